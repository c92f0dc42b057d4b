"""No crash without a location: float literals beyond their type's range are located
errors, and kernels named like a symbol of the generated module compile, assemble and
launch (the generated names never collide with the user's)."""
from __future__ import annotations

from pathlib import Path

import pytest

from choreo_py import cli, driver
from choreo_py.diagnostics import ChoreoError
from choreo_py.runtime import build
from fa_helpers import assemble

EX = Path(__file__).resolve().parent.parent / "examples"
TARGETS = ("sm_90a", "sm_100a")


def _variant(tmp_path, example, old, new, name="v.co") -> Path:
    text = (EX / example).read_text()
    assert old in text
    path = tmp_path / name
    path.write_text(text.replace(old, new))
    return path


@pytest.mark.parametrize("example,old,new,where", [
    ("gemm.co", "mma.fill.f32 0.0f", "mma.fill.f32 1e300", "v.co:40:28:"),
    ("gemm.co", "mma.fill.f32 0.0f", "mma.fill.f32 -3.5e38f", "v.co:40:29:"),
    ("flash_atten.co", "acc_s.at(i, j) * 0.12751743f - scores_max",
     "acc_s.at(i, j) * 1e39f - scores_max", "v.co:98:30:"),
])
@pytest.mark.parametrize("cmd", ["check", "compile"])
def test_float_literal_beyond_f32(capsys, tmp_path, example, old, new, where, cmd):
    path = _variant(tmp_path, example, old, new)
    argv = [cmd, str(path)] + (["--emit", "ptx", "-o", "-"] if cmd == "compile" else [])
    assert cli.main(argv) == 1
    err = capsys.readouterr().err
    assert f"{where} error: the literal" in err and "beyond the range of f32" in err


def test_large_fill_of_an_integer_is_located(capsys, tmp_path):
    path = _variant(tmp_path, "gemm.co", "mma.fill.f32 0.0f",
                    "mma.fill.f32 999999999999999999999999999999999999999999")
    assert cli.main(["compile", str(path), "--emit", "ptx", "-o", "-"]) == 1
    assert "v.co:40:28: error: signed integer literal" in capsys.readouterr().err


def test_folded_overflow_is_infinity():
    from choreo_py.lowering.core.writer import f32_hex
    assert f32_hex(1e39) == "0f7F800000" and f32_hex(-1e39) == "0fFF800000"
    assert f32_hex(3.4028234663852886e38) == "0f7F7FFFFF"


# Choreo type names and keywords: refused at check since they became reserved words
RESERVED = {"u32", "s32", "f32", "print", "global"}

NAMES = ["u32", "s32", "f32", "pred", "ptx", "reg", "kernel", "ENTRY", "grid", "KERNEL",
         "THREADS", "list", "range", "max", "smem", "print"]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name", NAMES)
def test_kernel_named_like_a_generated_symbol(tmp_path, target, name):
    path = _variant(tmp_path, "gemm.co", "__co__ void gemm(", f"__co__ void {name}(")
    if name in RESERVED:
        # a Choreo type name or keyword is refused at check, located at the kernel's name
        line = 1 + path.read_text().splitlines().index(f"__co__ void {name}(")
        with pytest.raises(ChoreoError, match=f"v.co:{line}:13: error: '{name}' is a "
                           r"(type name|keyword of Choreo) \(a reserved word\)"):
            driver.compile_file(str(path), "pyptx", target)
        return
    text = driver.compile_file(str(path), "pyptx", target)
    mod = build.run_module(text)
    # The launcher's view of the module is intact: its grid, its entry, its kernel.
    assert mod.grid(M=256, K=64, N=384) == (3, 2, 1)
    assert mod.ENTRY == (name + "_" if name == "smem" else name)
    assert mod.THREADS == 384
    ptx = mod.ptx()
    assert f".entry {mod.ENTRY}(" in ptx
    if assemble(ptx, target) is None:
        pytest.skip("ptxas is not installed")


def test_unclashing_names_are_unchanged():
    text = driver.compile_file(str(EX / "gemm.co"), "pyptx", "sm_90a")
    assert 'ENTRY = "gemm"' in text and "\ndef gemm():" in text


@pytest.mark.parametrize("dim", ["global", "max", "grid", "lambda"])
def test_sizes_named_like_python_words(tmp_path, dim):
    """`def grid(M, K, N, global)` would not even parse: such sizes come as **dims."""
    path = _variant(tmp_path, "gemm.co", "global bf16[N, K] B,", f"global bf16[N, {dim}] B,")
    if dim in RESERVED:
        # a Choreo keyword as a size is refused at check, located at the size's name
        line = 1 + path.read_text().splitlines().index(f"  global bf16[N, {dim}] B,")
        with pytest.raises(ChoreoError, match=f"v.co:{line}:18: error: '{dim}' is a keyword "
                           r"of Choreo \(a reserved word\)"):
            driver.compile_file(str(path), "pyptx", "sm_90a")
        return
    mod = build.run_module(driver.compile_file(str(path), "pyptx", "sm_90a"))
    assert mod.grid(**{"M": 256, "K": 64, "N": 384, dim: 64}) == (3, 2, 1)
    ptx = mod.ptx()
    if assemble(ptx, "sm_90a") is None:
        pytest.skip("ptxas is not installed")


def test_sizes_keep_their_names_when_nothing_clashes():
    text = driver.compile_file(str(EX / "gemm.co"), "pyptx", "sm_90a")
    assert "\ndef grid(M, K, N):" in text
