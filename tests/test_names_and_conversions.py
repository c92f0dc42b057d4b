"""What compiles assembles; a program's names never break the generated module.

- mixed-type stores, initialisers and operators convert as C does (ptxas accepts the PTX;
  the emulated result is the interpreter's);
- event orders of any integer type;
- a located register-budget error instead of ptxas's "Insufficient registers";
- Choreo's reserved words refused at check, at the name; a redefinition refused;
- every Python keyword, pyptx name and PTX word as a kernel, size, or scalar name compiles
  to PTX ptxas accepts (lowering/core/names.py), or is refused located at check;
- 30,000-character names (ptxas segfaulted on them) are shortened.
The programs are in tests/co/fuzzback/ (from fuzzing).
"""
from __future__ import annotations

import keyword
import re
from pathlib import Path

import pytest

from choreo_py import frontend
from choreo_py.check.names import RESERVED
from choreo_py.diagnostics import ChoreoError
from choreo_py.driver import compile_file
from choreo_py.runtime.build import ptxas

HERE = Path(__file__).resolve().parent
CO = HERE / "co" / "fuzzback"
EXAMPLES = HERE.parent / "examples"
TARGETS = ("sm_100a", "sm_90a")
LOCATED = re.compile(r":\d+:\d+: error: ")


def _assembles(path: Path, target: str, include=()) -> None:
    ptx = compile_file(str(path), "ptx", target, include_dirs=include)
    cubin, _ = ptxas(ptx, target)  # raises PtxasRejection with ptxas's messages
    assert ".visible .entry" in ptx and cubin


def _refusal(path: Path, target: str = "sm_100a", include=()) -> str:
    with pytest.raises(ChoreoError) as e:
        compile_file(str(path), "ptx", target, include_dirs=include)
    return str(e.value)


def _check_refusal(path: Path) -> str:
    with pytest.raises(ChoreoError) as e:
        frontend.check_file(str(path))
    return str(e.value)


# ---------------------------------------------------------------- conversions

CONVERTED = ["st_mismatch_f16_into_s32", "u64_out", "mov_bin1", "int_plus_float_lit",
             "int_times_float_lit"]


@pytest.mark.ptxas
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name", CONVERTED)
def test_mixed_types_convert_and_assemble(name, target):
    _assembles(CO / f"{name}.co", target)


NARROW = ["s8", "u8", "s16", "u16", "bin1", "f16", "bf16", "u4", "s4", "s32", "u32"]


@pytest.mark.emu
@pytest.mark.parametrize("dtype", NARROW)
def test_a_narrow_scalar_takes_its_types_values_as_the_interpreter_does(dtype, tmp_path):
    """`mutable s8 v = 300.7` is 44, `bin1 v = 0.5` is 1, `u8 v = -1.0` is 255: the
    emulated PTX agrees with the interpreter element for element."""
    import torch

    from choreo_py.emu.program import emulate_program
    from choreo_py.interp.api import program

    src = tmp_path / f"n_{dtype}.co"
    src.write_text("__co__ void k(f32 [64] a) {\n  parallel p by 64 : thread {\n"
                   f"    mutable {dtype} v = a.at(p);\n    a.at(p) = v + 0.0;\n  }}\n}}\n")
    vals = torch.tensor([300.7, -1.0, 70000.0, 0.5, 1.0001, -3.5, 15.0, 0.0] * 8)
    ref = vals.clone()
    program(str(src), function="k")(ref)
    got = vals.clone()
    emulate_program(str(src), target="sm_90a").k(got)
    assert torch.equal(got, ref), (got[:8], ref[:8])


@pytest.mark.ptxas
@pytest.mark.parametrize("target", TARGETS)
def test_operators_convert_their_operands(target, tmp_path):
    """s64 + s32, u32 & bool, -u32, !int, a comparison of s64 and f32 (fuzzing found each
    rejected by ptxas as an argument mismatch)."""
    src = tmp_path / "ops.co"
    src.write_text("""__co__ s64 [N] k(s64 [N] a, u32 [N] b, bool [N] c) {
  s64 [a.span] out;
  parallel blk by N / 64 : block
    parallel t by 64 : thread {
      mutable s64 x = a.at(blk * 64 + t) + t;
      mutable u32 y = (b.at(blk * 64 + t) & c.at(blk * 64 + t)) | (0 - b.at(blk * 64 + t));
      mutable u32 z = -y;
      if (!y || x < 0.5f) { x = x * 2 + (y << x) + z; }
      out.at(blk * 64 + t) = (x > y ? x : y) % 7 + __to<s32>(1.5f * x);
    }
  return out;
}
""")
    _assembles(src, target)


# ---------------------------------------------------------------- event orders

@pytest.mark.ptxas
@pytest.mark.parametrize("target", TARGETS)
def test_an_s64_event_order_assembles(target):
    _assembles(CO / "s64_event_order.co", target, include=[str(EXAMPLES)])


@pytest.mark.ptxas
@pytest.mark.slow
@pytest.mark.parametrize("example", ["gemm_block_acc_cond_rescale",
                                     "flash_atten_blackwell_persistent"])
def test_s64_orders_in_the_blackwell_examples_assemble(example, tmp_path):
    text = (EXAMPLES / f"{example}.co").read_text()
    text, n = re.subn(r"mutable u32 (\w*order\w*) = 0", r"mutable s64 \1 = 0", text)
    assert n >= 2
    src = tmp_path / f"{example}_s64.co"
    src.write_text(text)
    _assembles(src, "sm_100a", include=[str(EXAMPLES)])


# ---------------------------------------------------------------- register budget

def test_an_instruction_wider_than_the_register_budget_is_refused_located():
    msg = _refusal(CO / "gemm_block_p_7groups.co")
    assert "gemm_block_p_7groups.co:23:5: error: tcgen05.st" in msg
    assert "takes 64 registers at once" in msg and "896 threads gets 72" in msg


# ---------------------------------------------------------------- redefinitions

@pytest.mark.parametrize("name", ["dup_function", "dup_function_print"])
def test_a_second_function_of_one_signature_is_a_redefinition(name):
    msg = _check_refusal(CO / f"{name}.co")
    assert f"{name}.co:6:13: error: redefinition of 'k' (first defined at 1:13)" in msg


def test_overloads_pass_check_and_compile_refuses_them_by_name(tmp_path):
    src = tmp_path / "overload.co"
    src.write_text("__co__ void k(f32 [64] a) {\n  parallel p by 64 : thread\n"
                   "    a.at(p) = 1.0f;\n}\n__co__ void k(s32 [64] a) {\n"
                   "  parallel p by 64 : thread\n    a.at(p) = 1;\n}\n")
    frontend.check_file(str(src))
    msg = _refusal(src)
    assert "overload.co:5:13: error: overloaded functions of one name 'k'" in msg


# ---------------------------------------------------------------- names

@pytest.mark.parametrize("name,word,at", [("name_global", "global", "1:16"),
                                          ("name_s32", "s32", "1:16"),
                                          ("kw_dim", "with", "1:29")])
def test_a_reserved_word_is_refused_at_the_name(name, word, at):
    msg = _check_refusal(CO / f"{name}.co")
    assert f"{name}.co:{at}: error: '{word}' is " in msg and "reserved word" in msg


@pytest.mark.ptxas
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name", ["kw_func", "name_reg", "name_smem"])
def test_python_and_ptx_names_compile_and_assemble(name, target):
    _assembles(CO / f"{name}.co", target)


def _pyptx_names() -> set[str]:
    import pyptx
    import pyptx.types

    return {n for m in (pyptx, pyptx.types) for n in dir(m) if not n.startswith("__")}


def _ptx_words() -> set[str]:
    from pyptx.spec.ptx import INSTRUCTIONS

    words = set(INSTRUCTIONS) | set((CO / "ptx_words.txt").read_text().split())
    return {w for w in words if re.fullmatch(r"[A-Za-z_]\w*", w)}


WORDS = sorted(set(keyword.kwlist) | set(keyword.softkwlist) | _pyptx_names() | _ptx_words()
               | {"ARCH", "KERNEL", "KERNELS", "ENTRY", "THREADS", "SMEM_BYTES", "PARAMS",
                  "TENSORS", "DIMS", "grid", "dims", "failed_assertions", "_Module", "_split",
                  "_grid_k0", "k0_fmt0", "PRELUDE", "x_", "_", "__", "print", "list", "range"})


def _kernel_text(i: int, w: str) -> str:
    """Kernel `w` whose scalar is `w`, and kernel k<i> whose size is `w`."""
    return f"""__co__ void {w}(f32 [N] a) {{
  parallel p by N / 64 : block
    parallel t by 64 : thread {{
      mutable f32 {w} = 1.0f;
      println("v", {w});
      a.at(p * 64 + t) = a.at(p * 64 + t) + {w};
    }}
}}
__co__ void k{i}(f32 [{w}] a) {{
  parallel p by {w} / 64 : block
    parallel t by 64 : thread
      a.at(p * 64 + t) = a.at(p * 64 + t) * 2.0f;
}}
"""


@pytest.mark.ptxas
def test_every_python_pyptx_and_ptx_word_compiles_or_is_refused_at_check(tmp_path):
    """Each word names a kernel, a mutable scalar and a size: check refuses it at the name
    (Choreo reserves it) or the whole table compiles, for both targets, to PTX ptxas takes."""
    accepted, refused = [], []
    for i, w in enumerate(WORDS):
        src = tmp_path / f"w{i}.co"
        src.write_text(_kernel_text(i, w))
        try:
            frontend.check_file(str(src))
        except ChoreoError as e:
            assert LOCATED.search(str(e)), (w, str(e))
            refused.append(w)
            continue
        assert w not in RESERVED, w
        accepted.append((i, w))
    assert {"lambda", "reg", "smem", "WARP_SZ", "vprintf", "kernel", "ptx"} <= {
        w for _, w in accepted}
    assert {"global", "s32", "with"} <= set(refused) | (set(RESERVED) - set(WORDS))
    table = tmp_path / "table.co"
    table.write_text("".join(_kernel_text(i, w) for i, w in accepted))
    for target in TARGETS:
        _assembles(table, target)


@pytest.mark.ptxas
@pytest.mark.parametrize("target", TARGETS)
def test_thirty_thousand_character_names_are_shortened(target, tmp_path):
    long = "b_buf_" + "a" * 30000
    src = tmp_path / "long_ident.co"
    src.write_text((EXAMPLES / "gemm.co").read_text().replace("b_buf", long))
    ptx = compile_file(str(src), "ptx", target, include_dirs=[str(EXAMPLES)])
    assert long not in ptx and max(len(t) for t in re.findall(r"[\w$]+", ptx)) < 200
    ptxas(ptx, target)
    again = compile_file(str(src), "ptx", target, include_dirs=[str(EXAMPLES)])
    assert again == ptx  # deterministic


def test_the_mangling_is_injective_and_leaves_ordinary_names():
    from choreo_py.lowering.core import names

    assert names.py_name("blk") == "blk" and names.ptx_name("gemm") == "gemm"
    assert names.py_name("lambda") == "lambda_" and names.ptx_name("smem") == "smem_"
    sample = WORDS + [w + "_" for w in WORDS] + [w + "__" for w in WORDS] + ["n" * 65,
                                                                         "n" * 66]
    for f in (names.py_name, names.ptx_name):
        out = [f(w) for w in sample]
        assert len(set(out)) == len(set(sample))
        assert not set(out) & (names.PY_MODULE_NAMES if f is names.py_name
                               else names.PTX_MODULE_NAMES)


@pytest.mark.ptxas
def test_a_48_column_block_accumulator_fills_in_power_of_two_pieces(tmp_path):
    """tcgen05.st's .num is a power of two: BN 48 is filled as .x32 and .x16 (fuzzing:
    ptxas "Unknown modifier '.x48'")."""
    src = tmp_path / "bn48.co"
    src.write_text((EXAMPLES / "gemm_block_acc.co").read_text().replace(
        "#define BN 128", "#define BN 48"))
    ptx = compile_file(str(src), "ptx", "sm_100a", include_dirs=[str(EXAMPLES)])
    assert ".x48" not in ptx
    ptxas(ptx, "sm_100a")


@pytest.mark.ptxas
@pytest.mark.parametrize("target", TARGETS)
def test_bool_operands_and_bool_event_orders(target, tmp_path):
    """A ?: of bools whose arms are a bool element and a negation; an event order declared
    bool (C promotes it to int for % and /)."""
    src = tmp_path / "bools.co"
    src.write_text("""__co__ s16 [N] k(f32 [N] a, bool [N] b) {
  s16 [a.span] out;
  parallel blk by N / 32 : block
    parallel t by 32 : thread
      out.at(blk * 32 + t) = __min((a.at(blk * 32 + t) > 0.0f ? !a.at(blk * 32 + t)
                                    : b.at(blk * 32 + t)), a.at(blk * 32 + t));
  return out;
}
""")
    _assembles(src, target)
    if target == "sm_100a":
        ex = tmp_path / "gemm_bool_order.co"
        ex.write_text((EXAMPLES / "gemm_block_acc.co").read_text().replace(
            "mutable u32 order = 0;", "mutable bool order = false;"))
        _assembles(ex, target, include=[str(EXAMPLES)])
