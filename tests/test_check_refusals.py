"""Valid programs `choreo check` used to refuse, and the `check` command's report
of what would not compile for a target."""
from __future__ import annotations

import pytest

from choreo_py import cli, driver, frontend
from choreo_py.diagnostics import ChoreoError, take_warnings

SCALAR_PARAMS = """\
__co__ void f(global f32 [M, N] a, int n, s32 k, double b) {
  parallel p by 4 : block {
    if (b > 0.5) {
      x = n + k;
    }
  }
}
"""

RUNTIME_THREADS = """\
__co__ void f(global f32 [M, N] a, int n) {
  parallel p by 4 : block {
    parallel q by n : thread {
      y = q + 1;
    }
  }
}
"""

WIDE_SWIZZLE = """\
__co__ void f(global bf16 [M, K] A) {
  parallel p by 4 : block {
    shared bf16 [64, 16] buf;
    t = tma.load.async.swiz<128> A.subspan(64, 16).at(p, 0) => buf;
    wait t;
  }
}
"""

RAW_STRINGS = """\
const char* s = R"(brace { and "quote" )";
const char* t = R"d(a )" } b)d";
__co__ void f(global f32 [M] a) {
  __cpp__(R"(int x = 1; // "q")");
  parallel p by 4 : block {
    println("a", R"(b)");
  }
}
"""

NESTED_INTHREADS = """\
__co__ void f(global f32 [M] a) {
  parallel p by 4 : block {
    parallel q by 4 : group-4 {
      inthreads.async (q > 0) {
        inthreads (q > 1) { }
      }
    }
  }
}
"""

ROLE_ON_BLOCK_INDEX = """\
__co__ void f(global f32 [M] a) {
  parallel {t} by [2] : block {
    parallel p by 2 : group-4 {
      inthreads.async (p == t) { }
    }
  }
}
"""

VALID = [("inthreads-on-two-levels", ROLE_ON_BLOCK_INDEX, 4,
          "an 'inthreads' condition depending on more than"),
         ("scalar-parameters", SCALAR_PARAMS, 3, "'b'"),
         ("run-time-thread-count", RUNTIME_THREADS, 3, "a run-time count of thread groups"),
         ("swizzle-wider-than-rows", WIDE_SWIZZLE, 4, "'.swiz<128>' wider than"),
         ("nested-inthreads", NESTED_INTHREADS, 5, "nested 'inthreads'")]


@pytest.mark.parametrize("name,text,line,construct", VALID, ids=[v[0] for v in VALID])
def test_valid_program_is_checked_not_refused(name, text, line, construct) -> None:
    """`check` accepts it; `compile` refuses it by name, at its place, as not compiled."""
    frontend.check_text(text, "t.co")
    assert not [w for w in take_warnings() if w.severity == "error"]
    program = frontend.parse_text(text, "t.co")
    with pytest.raises(ChoreoError) as info:
        driver.build_ir(program, "sm_90a")
    assert "is not supported by the tile IR yet" in info.value.message
    assert construct in info.value.message
    assert info.value.loc.line == line


def test_raw_string_literals_lex() -> None:
    program = frontend.check_text(RAW_STRINGS, "t.co")
    fn = program.functions[0]
    cpp = fn.body.stmts[0]
    assert cpp.code == 'int x = 1; // "q"'
    call = fn.body.stmts[1].body.stmts[0].expr
    assert call.args[1].value == "b"


def test_raw_string_with_delimiter_value() -> None:
    from choreo_py.frontend.astbuild_exprs import unescape
    assert unescape('R"d(a )" b)d"') == 'a )" b'
    assert unescape('R"(x\\n)"') == "x\\n"      # no escapes in raw strings
    assert unescape('R"()"') == ""


def _run(tmp_path, text, *args, capsys):
    path = tmp_path / "t.co"
    path.write_text(text)
    rc = cli.main(["check", str(path), *args])
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_lowerable_report_names_each_construct(tmp_path, capsys) -> None:
    rc, out, err = _run(tmp_path, RUNTIME_THREADS, "--lowerable", "--target", "sm_90a",
                        capsys=capsys)
    assert rc == 0, err
    assert "t.co:3:19: note: not compiled for sm_90a:" in out
    assert "0 of 1 functions compile for sm_90a (not compiled: f)" in out


def test_lowerable_report_of_a_compiling_program(tmp_path, capsys) -> None:
    from pathlib import Path
    text = (Path(__file__).resolve().parent.parent / "examples" / "gemm.co").read_text()
    rc, out, err = _run(tmp_path, text, "--lowerable", "--target", "sm_100a", capsys=capsys)
    assert rc == 0, err
    assert out.strip() == "1 of 1 functions compile for sm_100a"


def test_lowerable_report_takes_an_accumulator_shape_from_a_later_mma(tmp_path, capsys):
    """flash_atten.co uses `acc_o.span` before the MMA that gives acc_o its shape, which
    compile builds with its accumulator-shape retry: the report does the same, so it no
    longer calls the function uncompilable while compile succeeds."""
    from conftest import need_shared

    text = need_shared("corpus", "tests", "gpu", "end2end", "flash_atten.co").read_text()
    rc, out, err = _run(tmp_path, text, "--lowerable", "--target", "sm_90a", capsys=capsys)
    assert rc == 0, err
    assert out.strip() == "1 of 1 functions compile for sm_90a"
    assert driver.compile_file(str(tmp_path / "t.co"), "ptx", "sm_90a")


LENIENT = """\
__co__ void f(global f32 [M] a) {
  int x = 1;
  x = 2;
}
"""


def test_plain_check_warns_strict_check_errs(tmp_path, capsys) -> None:
    rc, out, err = _run(tmp_path, LENIENT, capsys=capsys)
    assert rc == 0 and "t.co:3:3: warning: 'x' is immutable (declared at 2:7)" in err
    rc, out, err = _run(tmp_path, LENIENT, "--strict", capsys=capsys)
    assert rc == 1 and "t.co:3:3: error: 'x' is immutable (declared at 2:7)" in err
    assert "  x = 2;\n  ^" in err


def test_error_in_uncompiled_code_is_reported(tmp_path, capsys) -> None:
    """A mistake inside a statement the tile IR does not lower is still found."""
    text = ("__co__ void f(global f32 [M] a, int n) {\n"
            "  parallel p by 4 : block {\n"
            "    parallel q by n : thread {\n"
            "      with {x, y} in [4] {\n"
            "        z = x;\n      }\n    }\n  }\n}\n")
    rc, out, err = _run(tmp_path, text, capsys=capsys)
    assert rc == 1
    assert "t.co:4:22: error: 2 with variables for an index space of rank 1" in err
