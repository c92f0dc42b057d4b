"""Inputs found by fuzzing the front end from outside: each is refused with a located error
(file:line:col, the source line, a caret) and exit 1, or compiled, never an internal error
(exit 3), a hang, or silent acceptance.

The slow ones are timed in CPU seconds of this process (other work on a loaded machine does
not count), against a bound far above what they take now (well under a second of work each,
beyond start-up): they took 15 s to minutes before, or did not finish.
"""
from __future__ import annotations

import time
from pathlib import Path

import pytest

from choreo_py import cli

CO = Path(__file__).resolve().parent / "co" / "fuzz"
TARGETS = ("sm_90a", "sm_100a")
CPU_BOUND_S = 60.0  # a hang guard; the 10 s bound is measured by bench/fuzz_grammar.py

VADD = """// a comment line
#define TILE 256
__co__ f32 [N] vector_add(f32 [N] a, f32 [N] b) {
  f32 [a.span] out;
  parallel blk by N / TILE : block
    parallel t by TILE : thread
      out.at(blk * TILE + t) = a.at(blk * TILE + t)EXTRA;
NESTED
  return out;
}
"""


def _vadd(extra: str = " + b.at(blk * TILE + t)", nested: str = "") -> str:
    return VADD.replace("EXTRA", extra).replace("NESTED", nested)


def _run(capsys, argv: list[str]) -> tuple[int, str, float]:
    start = time.process_time()
    rc = cli.main(argv)
    return rc, capsys.readouterr().err, time.process_time() - start


def _check(capsys, path: Path) -> tuple[int, str, float]:
    return _run(capsys, ["check", str(path)])


def _compile(capsys, path: Path, target: str, tmp_path: Path) -> tuple[int, str, float]:
    out = tmp_path / "out.ptx"
    return _run(capsys, ["compile", str(path), "--target", target, "--emit", "ptx",
                         "-o", str(out)])


def _located(err: str, path: Path, line: int, col: int, message: str,
             severity: str = "error") -> None:
    """`path:line:col: severity: message...`, then the source line, then the caret under col."""
    head = f"{path}:{line}:{col}: {severity}: {message}"
    lines = err.splitlines()
    at = next((i for i, text in enumerate(lines) if text.startswith(head)), None)
    assert at is not None, err[:2000]
    caret = lines[at + 2]
    assert caret.strip() == "^" and len(caret) - len(caret.lstrip()) == col - 1, err[:2000]
    assert "internal error" not in err and "Traceback" not in err


def _write(tmp_path: Path, text: str, name: str = "f.co") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


# ------------------------------------------------------------ exit 3 -> located exit 1

@pytest.mark.parametrize("target", TARGETS)
def test_a_300_term_sum_compiles(capsys, tmp_path, target):
    """It was 'internal error: nesting too deep to process': the lowering recursed past
    Python's default limit; every stage now runs with the limit choreo_py/limits.py sizes."""
    path = _write(tmp_path, _vadd(" + 0.0f" * 300))
    rc, err, _ = _compile(capsys, path, target, tmp_path)
    assert rc == 0, err[-2000:]


@pytest.mark.parametrize("where, text, line, col, message", [
    ("code", "#define BIG " + "1" * 5000 + "\n" + _vadd(" + BIG"), 8, 55,
     "signed integer literal '11111111111111111111...11111111 (5000 characters)' out of range"),
    ("if", "#if " + "1" * 5000 + "\n#endif\n" + _vadd(), 1, 5,
     "integer literal '11111111111111111111...11111111 (5000 characters)' is too large"),
    ("line", "#line " + "1" * 5000 + "\n" + _vadd(), 1, 1, "#line number '1111"),
    ("u64", _vadd(" + 18446744073709551616u"), 7, 55, "unsigned integer literal"),
], ids=["code", "if", "line", "u64"])
def test_integer_literals_beyond_64_bits_are_located(capsys, tmp_path, where, text, line, col,
                                                     message):
    """Python refuses int() of more than 4300 digits (it was exit 3 in three places)."""
    path = _write(tmp_path, text)
    rc, err, secs = _check(capsys, path)
    assert rc == 1
    _located(err, path, line, col, message)
    assert secs < CPU_BOUND_S


@pytest.mark.parametrize("name, line, col, message", [
    ("dim_inf.co", 1, 20, "an mdspan size is an integer: 'inf' is a floating-point value"),
    ("dim_not.co", 1, 20, 'The mdspan size "0" is invalid!'),
    ("dma_rank_mismatch.co", 6, 24, "'dma.copy' from rank-4 data into a rank-3 destination"),
    ("fill_mma_operand.co", 16, 11, "only the accumulator of an MMA can be filled: 'a_frag' is "
     "an operand of the MMA at 17:28"),
    ("fill_mma_operand_group.co", 9, 9, "only the accumulator of an MMA can be filled: 'ma'"),
])
def test_check_refuses_what_compile_crashed_on(capsys, tmp_path, name, line, col, message):
    path = CO / name
    rc, err, _ = _check(capsys, path)
    assert rc == 1
    _located(err, path, line, col, message)
    rc, err, _ = _compile(capsys, path, "sm_90a", tmp_path)
    assert rc == 1
    _located(err, path, line, col, message)


def test_a_float_parallel_bound_is_located(capsys, tmp_path):
    path = _write(tmp_path, "__co__ void k(f16 [N] o) {\n  parallel p by 2.5 : block\n"
                            "    o.at(p) = 1.0f;\n}\n")
    rc, err, _ = _check(capsys, path)
    assert rc == 1
    _located(err, path, 2, 17, "a parallel bound is an integer: '2.5'")


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name, line, col", [("asm_plain.co", 3, 5), ("asm_thread.co", 4, 7)])
def test_asm_without_its_semicolon_is_refused_by_name(capsys, tmp_path, target, name, line,
                                                      col):
    """pyptx cannot parse `nop` without ';' (an AttributeError on its RawLine); nor is
    `nop` a PTX instruction, which the rule checks say first."""
    path = CO / name
    rc, err, _ = _compile(capsys, path, target, tmp_path)
    assert rc == 1
    _located(err, path, line, col, "the __asm__ template is not PTX statements (each PTX "
                                   "instruction ends with ';'): 'nop' is not a PTX instruction "
                                   "(in 'nop')")


def test_asm_with_its_semicolon_is_pasted(capsys, tmp_path):
    path = _write(tmp_path, (CO / "asm_thread.co").read_text().replace('"nop"', '"membar.gl;"'))
    rc, err, _ = _compile(capsys, path, "sm_90a", tmp_path)
    assert rc == 0, err
    assert "membar.gl;" in (tmp_path / "out.ptx").read_text()


@pytest.mark.parametrize("target", TARGETS)
def test_an_f16_fragment_initialiser_beyond_f16_is_infinity(capsys, tmp_path, target):
    """4294967296 as f16 rounds to +inf (0x7C00), as cvt.rn does; it was a struct error."""
    rc, err, _ = _compile(capsys, CO / "f16_frag_init_big.co", target, tmp_path)
    assert rc == 0, err
    if target == "sm_90a":  # two f16 halves of a register fragment
        assert f"mov.b32 %a_frag0, {0x7C007C00};" in (tmp_path / "out.ptx").read_text()


def test_half_bits_overflow_to_infinity():
    from choreo_py.lowering.core.f16_values import half_bits, round_to_dtype

    assert half_bits(65519, "f16") == 0x7BFF and half_bits(65520, "f16") == 0x7C00
    assert half_bits(-10 ** 400, "f16") == 0xFC00
    assert half_bits(1e39, "bf16") == 0x7F80 and half_bits(-1e39, "bf16") == 0xFF80
    assert round_to_dtype(4294967296, "f16") == float("inf")


# ------------------------------------------------------------ slow or unbounded

def test_a_huge_mdspan_rank_is_refused_at_check(capsys):
    """`mdspan<2^64-1>`: compile allocated a dimension per rank (10.9 GB, killed at 113 s)."""
    path = CO / "mdspan_rank_huge.co"
    rc, err, secs = _check(capsys, path)
    assert rc == 1 and secs < CPU_BOUND_S
    _located(err, path, 1, 55, "an mdspan of more than 32 dimensions (the limit of choreo-py): "
                               "rank 18446744073709551615")


def test_many_dimensions_are_refused_at_the_first_past_the_limit(capsys, tmp_path):
    dims = ", ".join(["1"] * 40)
    path = _write(tmp_path, f"__co__ void k(f32 [{dims}] a) {{\n}}\n")
    rc, err, _ = _check(capsys, path)
    assert rc == 1
    _located(err, path, 1, 20 + 3 * 32, "an mdspan of more than 32 dimensions")


def test_65536_nested_thread_groups_are_refused_quickly(capsys):
    """65,536 groups of 128 threads: sema analysed each of 8 million threads (58 s)."""
    path = CO / "groups_65536.co"
    rc, err, secs = _check(capsys, path)
    assert rc == 1 and secs < CPU_BOUND_S
    _located(err, path, 3, 5, "the block has 8388608 threads (65536 thread groups of 128 "
                              "threads), more than the 1024 a CUDA block may have")


def test_a_30000_character_string_in_an_expression(capsys, tmp_path):
    """The syntax error's 'word before' was a quadratic regex search (15.9 s)."""
    path = _write(tmp_path, _vadd().replace("N / TILE", 'N /"' + "s" * 30000 + '" TILE'))
    rc, err, secs = _check(capsys, path)
    assert rc == 1 and secs < CPU_BOUND_S
    _located(err, path, 5, 30025, "expected a statement")


def test_100000_spaces_in_a_shape_compile(capsys, tmp_path):
    """Quoting the statement in the generated code stripped its comment with a regex that
    was quadratic in a run of blanks (27 s)."""
    text = (CO / "softmax_rows.co").read_text()
    path = _write(tmp_path, text.replace("in [COLS]", "in [COLS" + " " * 100000 + "]", 1))
    rc, err, secs = _compile(capsys, path, "sm_100a", tmp_path)
    assert rc == 0, err[-2000:]
    assert secs < CPU_BOUND_S


@pytest.mark.parametrize("depth", [800, 1200, 5000])
def test_deeply_nested_ifs_are_a_located_error(capsys, tmp_path, depth):
    """Superlinear before (1,200 levels: 8.2 s; 2,000: > 120 s and compile exit 3)."""
    path = _write(tmp_path, _vadd(nested="  " + "if (1) { " * depth + "}" * depth))
    rc, err, secs = _check(capsys, path)
    assert rc == 1 and secs < CPU_BOUND_S
    _located(err, path, 8, 9 * 256 + 1, "statements nested more than 256 deep")


@pytest.mark.parametrize("target", TARGETS)
def test_ifs_nested_to_the_limit_compile(capsys, tmp_path, target):
    path = _write(tmp_path, _vadd(nested="  " + "if (1) { " * 250 + "}" * 250))
    rc, err, _ = _compile(capsys, path, target, tmp_path)
    assert rc == 0, err[-2000:]


# ------------------------------------------------------------ input encodings

def test_utf16_is_refused_as_not_utf8(capsys, tmp_path):
    path = tmp_path / "u16.co"
    path.write_bytes(_vadd().encode("utf-16"))  # with its byte-order mark
    rc, err, _ = _check(capsys, path)
    assert rc == 1
    _located(err, path, 1, 1, "the file is not UTF-8 (it starts with a UTF-16 byte-order "
                              "mark): save it as UTF-8")
    assert "\n// a comment line\n" in err  # the line quoted readable, decoded


def test_utf16_without_a_mark_is_a_nul_error_with_a_hint(capsys, tmp_path):
    path = tmp_path / "u16.co"
    path.write_bytes(_vadd().encode("utf-16-le"))
    rc, err, _ = _check(capsys, path)
    assert rc == 1
    _located(err, path, 1, 2, "a NUL character (U+0000) in the source (the file may be UTF-16")


def test_invalid_utf8_is_located_at_its_byte(capsys, tmp_path):
    path = tmp_path / "bad.co"
    path.write_bytes(_vadd().encode().replace(b"a comment", b"a \xff comment"))
    rc, err, _ = _check(capsys, path)
    assert rc == 1
    _located(err, path, 1, 6, "the file is not UTF-8 (byte 0xff here is not valid UTF-8)")


def test_a_utf8_byte_order_mark_is_fine(capsys, tmp_path):
    path = tmp_path / "bom.co"
    path.write_bytes(b"\xef\xbb\xbf" + _vadd().encode())
    rc, err, _ = _check(capsys, path)
    assert rc == 0 and "ok (1 __co__ function)" in err


@pytest.mark.parametrize("ending", ["\r", "\r\n"], ids=["cr", "crlf"])
def test_cr_and_crlf_end_lines(capsys, tmp_path, ending):
    """CR-only: the first #define swallowed the file, which checked as 0 functions."""
    path = tmp_path / "cr.co"
    path.write_bytes(_vadd().replace("\n", ending).encode())
    rc, err, _ = _check(capsys, path)
    assert rc == 0 and "ok (1 __co__ function)" in err
    path.write_bytes(_vadd(" + undeclared").replace("\n", ending).encode())
    rc, err, _ = _check(capsys, path)
    assert rc == 1 and f"{path}:7:55: error:" in err  # lines counted at the CRs


@pytest.mark.parametrize("data, line, col", [
    (b"\0", 1, 1), (_vadd().encode().replace(b"comment", b"com\0ment"), 1, 9),
    (_vadd().encode().replace(b"out;", b"out\0;"), 4, 19),
], ids=["alone", "in-a-comment", "in-code"])
def test_a_nul_anywhere_is_located(capsys, tmp_path, data, line, col):
    path = tmp_path / "nul.co"
    path.write_bytes(data)
    rc, err, _ = _check(capsys, path)
    assert rc == 1
    _located(err, path, line, col, "a NUL character (U+0000) in the source")


def test_a_nul_in_an_included_file_is_located_there(capsys, tmp_path):
    (tmp_path / "inc.h").write_bytes(b"#define TILE 256\n\0\n")
    path = _write(tmp_path, '#include "inc.h"\n' + _vadd().replace("#define TILE 256\n", ""))
    rc, err, _ = _check(capsys, path)
    assert rc == 1
    _located(err, tmp_path / "inc.h", 2, 1, "a NUL character (U+0000) in the source")


def test_an_unknown_directive_in_host_code_is_a_located_warning(capsys):
    """The reference hands `#bogus` on to the host's C++ compiler, which rejects it."""
    path = CO / "unknown_directive.co"
    rc, err, _ = _check(capsys, path)
    assert rc == 0 and "1 warning" in err
    _located(err, path, 1, 1, "unknown preprocessing directive '#bogus'", "warning")


def test_known_host_directives_draw_no_warning(capsys, tmp_path):
    path = _write(tmp_path, '#include <cstdio>\n#pragma once\n  #  include_next <x.h>\n'
                            + _vadd())
    rc, err, _ = _check(capsys, path)
    assert rc == 0 and "warning" not in err


def test_an_unknown_directive_in_a_function_is_an_error(capsys, tmp_path):
    path = _write(tmp_path, _vadd(nested="#bogus"))
    rc, err, _ = _check(capsys, path)
    assert rc == 1
    _located(err, path, 8, 1, "expected a statement, got '#'")


def test_dev_null_is_not_a_regular_file(capsys):
    rc, err, _ = _run(capsys, ["check", "/dev/null"])
    assert rc == 2
    assert "cannot read '/dev/null': not a regular file" in err
