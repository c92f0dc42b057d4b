"""The command line as a kernel author meets it: --version, help with defaults, what
`compile` wrote, -o -, -D overridden by the file, progress, --ref, auto's guesses,
messages in Choreo words, "did you mean" hints."""
from __future__ import annotations

import argparse
import io
import re
from pathlib import Path

import pytest

from choreo_py import __version__, cli, construct_names, ir
from choreo_py.frontend import ast
from choreo_py.progress import Progress
from choreo_py.sema import values

ROOT = Path(__file__).resolve().parent.parent
EX = ROOT / "examples"


def main(capsys, *argv):
    rc = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return rc, out, err


def test_version(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["--version"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert re.fullmatch(rf"choreo-py {re.escape(__version__)} \(pyptx \S+, Python \S+\)\n", out)


def _subparsers(ap):
    for action in ap._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action.choices
    raise AssertionError("no subcommands")


def test_every_option_has_help_and_shows_its_default_once():
    """Each default is in the help, once: the formatter adds "(default: X)" unless the
    help tells it already (`check --target` showed it twice)."""
    ap = cli.build_parser()
    for name, sub in _subparsers(ap).items():
        formatter = sub._get_formatter()
        for action in sub._actions:
            assert action.help, f"choreo {name} {action.option_strings or action.dest}: no help"
            shown = formatter._get_help_string(action) % {"default": action.default}
            where = f"choreo {name} {(action.option_strings or [action.dest])[0]}"
            assert shown.lower().count("default") <= 1, f"{where}: {shown}"
            if not cli._says_nothing(action.default) and action.option_strings:
                assert f"default: {action.default}" in shown, f"{where}: default not shown"


def test_compile_says_what_it_wrote(capsys, tmp_path):
    out_file = tmp_path / "g.py"
    rc, out, err = main(capsys, "compile", EX / "gemm.co", "-o", out_file)
    assert rc == 0 and out == ""
    assert err == f"choreo: wrote pyptx for sm_100a to {out_file} ({out_file.stat().st_size} bytes)\n"


def test_compile_to_stdout(capsys):
    rc, out, err = main(capsys, "compile", EX / "gemm.co", "--emit", "pyptx", "-o", "-")
    assert rc == 0 and out.startswith('"""') and "KERNEL" in out
    assert err.startswith("choreo: wrote pyptx for sm_100a to stdout (")
    rc, out, err = main(capsys, "compile", EX / "gemm.co", "--emit", "ir", "-q")
    assert rc == 0 and out.startswith("kernel gemm(") and err == ""


@pytest.mark.ptxas
@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_compile_cubin_reports_ptxas_resources(capsys, tmp_path, target):
    out_file = tmp_path / "g.cubin"
    rc, _, err = main(capsys, "compile", EX / "gemm.co", "--emit", "cubin", "--target", target,
                      "-o", out_file)
    assert rc == 0 and out_file.read_bytes()[:4] == b"\x7fELF"
    assert re.fullmatch(rf"choreo: wrote cubin for {target} to {re.escape(str(out_file))} "
                        r"\(\d+ bytes\); ptxas: \d+ registers, 0 bytes spill stores, 0 bytes "
                        r"spill loads, 0 bytes stack, \d+ bytes shared memory \(\d+ dynamic\), "
                        r"\d+ barriers\n", err), err


def test_a_define_the_file_overrides_draws_a_located_warning(capsys, tmp_path):
    src = tmp_path / "k.co"
    src.write_text("#define STAGES 4\n#ifndef BM\n#define BM 64\n#endif\nint x = STAGES;\n")
    rc, out, err = main(capsys, "preprocess", src, "-D", "STAGES=2", "-D", "BM=128")
    assert rc == 0 and "int x = 4;" in out
    assert err.startswith(f"{src}:1:9: warning: 'STAGES' redefined: this #define overrides "
                          "-D STAGES=2 from the command line")
    assert "BM" not in err  # guarded by #ifndef: -D wins, nothing to say
    rc, _, err = main(capsys, "preprocess", src)
    assert rc == 0 and err == ""


def test_progress_draws_on_a_terminal_only():
    class Tty(io.StringIO):
        def isatty(self):
            return True

    t = iter(range(100))
    tty, pipe = Tty(), io.StringIO()
    for stream in (tty, pipe):
        bar = Progress("interpreting f", stream=stream, clock=lambda: next(t))
        for i in range(1, 5):
            bar(i, 4)
        bar.close()
    assert pipe.getvalue() == ""
    assert "interpreting f [###############...............] 2/4 blocks" in tty.getvalue()
    assert tty.getvalue().endswith("\r\033[K")


def test_auto_guesses_only_when_the_names_leave_no_doubt(capsys, tmp_path):
    relu = tmp_path / "gemm_relu.co"
    relu.write_text((EX / "gemm.co").read_text())
    rc, out, _ = main(capsys, "run", relu, "--shape", "M=128,N=128,K=64")
    assert rc == 0
    assert ("check none (auto: parameters A, B, C fit --check matmul, but 'relu' in the names "
            "may mean more than matmul: no reference picked") in out
    rc, out, _ = main(capsys, "run", EX / "gemm.co", "--shape", "M=128,N=128,K=64")
    assert rc == 0 and "check matmul (auto: guessed from the parameters A, B, C and the names " \
                       "('gemm'); --check or --ref to choose)" in out


def test_a_python_reference(capsys, tmp_path):
    refs = tmp_path / "refs.py"
    refs.write_text("def mm(A, B):\n    return A @ B.T\n\ndef wrong(A, B):\n"
                    "    return {'C': (A @ B.T).relu()}\n")
    rc, out, _ = main(capsys, "run", EX / "gemm.co", "--shape", "M=128,N=128,K=64",
                      "--ref", f"{refs}:mm")
    assert rc == 0 and f"check ref (--ref {refs}:mm): C max abs error" in out
    assert out.rstrip().endswith(": ok")
    rc, out, err = main(capsys, "run", EX / "gemm.co", "--shape", "M=128,N=128,K=64",
                        "--ref", f"{refs}:wrong")
    assert rc == 1 and out.rstrip().endswith(": FAILED")
    assert f"C differs from the reference {refs}:wrong" in err


@pytest.mark.parametrize("ref, message", [
    ("nocolon", "expected MODULE:FUNCTION"),
    ("/nonexistent/r.py:f", "cannot read '/nonexistent/r.py'"),
    ("{refs}:missing", "has no function 'missing'"),
    ("{refs}:boom", "raised ZeroDivisionError"),
])
def test_python_reference_usage_errors(capsys, tmp_path, ref, message):
    refs = tmp_path / "refs.py"
    refs.write_text("def boom(A, B):\n    return 1 / 0\n")
    rc, _, err = main(capsys, "run", EX / "gemm.co", "--shape", "M=128,N=128,K=64",
                      "--ref", ref.format(refs=refs))
    assert rc == 2 and message in err


def test_reserved_type_name_as_a_variable(capsys, tmp_path):
    src = tmp_path / "s2.co"
    src.write_text("__co__ void f(global f32[N] X) {\n  s2 = 3;\n"
                   "  parallel {t} by [N] : block { }\n}\n")
    rc, _, err = main(capsys, "check", src)
    assert rc == 1
    assert err.startswith(f"{src}:2:3: error: 's2' is a type name (a reserved word) and cannot "
                          "name a variable")


def test_did_you_mean_a_declared_name(capsys, tmp_path):
    src = tmp_path / "u.co"
    src.write_text("__co__ void f(global f32[N] X) {\n  parallel {t} by [N] : block {\n"
                   "    shared f32[4] buf;\n    buff.at(0) = 1.0f;\n  }\n}\n")
    rc, _, err = main(capsys, "compile", src, "--emit", "ir")
    assert rc == 1
    assert err.startswith(f"{src}:4:5: error: 'buff' is not declared (did you mean 'buf'?)")


def _classes(module, base):
    return [c for c in vars(module).values()
            if isinstance(c, type) and c.__module__ == module.__name__ and issubclass(c, base)]


@pytest.mark.parametrize("module, base, table", [
    (ast, ast.Node, construct_names.AST_WORDS),
    (ir, object, construct_names.IR_WORDS),
    (values, values.Value, construct_names.VALUE_WORDS),
])
def test_every_node_class_has_choreo_words(module, base, table):
    """Messages name constructs in Choreo words (construct_names.describe), never as a
    Python class: a new class without an entry would leak its name into a message."""
    missing = [c.__name__ for c in _classes(module, base) if c.__name__ not in table
               and not issubclass(c, Exception) and not c.__name__.startswith("_")]
    assert not missing, f"add Choreo words for {missing} to choreo_py/construct_names.py"


def test_no_message_formats_a_class_name():
    """The refusal and error sites go through describe(), not type(x).__name__."""
    pattern = re.compile(r"(ChoreoError|InterpError|EvalError|Unsupported|refuse|\.err|\berr)\(f?[\"'][^\n]*\{type\(\w+\)\.__name__\}")
    offenders = []
    for path in list((ROOT / "choreo_py").rglob("*.py")) + list((ROOT / "lowering").rglob("*.py")):
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if pattern.search(line) and "internal error" not in line:
                offenders.append(f"{path.relative_to(ROOT)}:{n}")
    assert not offenders, offenders


def test_check_says_it_found_no_errors(capsys):
    rc, out, err = main(capsys, "check", EX / "gemm.co")
    assert rc == 0 and out == ""
    assert err == f"choreo: {EX / 'gemm.co'}: ok (1 __co__ function)\n"
    rc, out, err = main(capsys, "check", EX / "gemm.co", "-q")
    assert rc == 0 and out == err == ""


def test_auto_does_not_guess_matmul_for_a_gemm_with_an_epilogue(capsys, tmp_path):
    """Named like a plain GEMM, but with a ReLU on the accumulator: not compared with
    A @ B^T (which would report FAILED), and the output says why."""
    src = (ROOT / "docs" / "tutorial" / "tiled-gemm.md").read_text()
    program = src[src.index("__co__ void gemm_relu"):]
    program = program[:program.index("```")].replace("gemm_relu", "gemm")
    path = tmp_path / "gemm.co"
    path.write_text(program)
    rc, out, _ = main(capsys, "run", path, "--shape", "M=128,N=128,K=64")
    assert rc == 0
    assert ("check none (auto: parameters A, B, C fit --check matmul, but the kernel works on "
            "its accumulator's elements (an epilogue): no reference picked") in out
