"""`choreo compile --emit cubin`: ptxas's spills and warnings are reported as located
warnings; a ptxas rejection of the compiler's own PTX is an internal error (exit 3) that
quotes the PTX line, never exit 1 ("your program is wrong")."""
from __future__ import annotations

from pathlib import Path

import pytest

from choreo_py import cli
from choreo_py.runtime import build

EX = Path(__file__).resolve().parent.parent / "examples"
needs_ptxas = pytest.mark.skipif(build.find_ptxas() is None, reason="ptxas not on PATH")


@needs_ptxas
def test_spills_are_warnings(capsys, tmp_path):
    """Without setreg_inc the sm_90a consumers keep 168 registers and spill."""
    text = (EX / "flash_atten_causal.co").read_text()
    src = tmp_path / "noinc.co"
    src.write_text("".join(line for line in text.splitlines(True) if "setreg_inc" not in line))
    out = tmp_path / "k.cubin"
    rc = cli.main(["compile", str(src), "--target", "sm_90a", "--emit", "cubin", "-o", str(out)])
    err = capsys.readouterr().err
    assert rc == 0 and out.stat().st_size > 0
    assert "noinc.co:20:3: warning: ptxas:" in err
    assert "bytes spill stores" in err


@needs_ptxas
@pytest.mark.parametrize("target", ("sm_90a", "sm_100a"))
def test_clean_kernel_has_no_warning(capsys, tmp_path, target):
    out = tmp_path / "k.cubin"
    rc = cli.main(["compile", str(EX / "gemm.co"), "--target", target, "--emit", "cubin",
                   "-o", str(out)])
    assert rc == 0 and "warning" not in capsys.readouterr().err


@needs_ptxas
def test_rejected_ptx_is_an_internal_error_with_the_line(capsys, tmp_path, monkeypatch):
    real = build._ptx_of

    def broken(text):
        ptx = real(text)
        return ptx.replace("ret;", "mul.f32 %f_bogus, %f_bogus, 2;\n\tret;", 1)

    monkeypatch.setattr(build, "_ptx_of", broken)
    rc = cli.main(["compile", str(EX / "gemm.co"), "--target", "sm_90a", "--emit", "cubin",
                   "-o", str(tmp_path / "k.cubin")])
    err = capsys.readouterr().err
    assert rc == 3
    assert "gemm.co:16:3: internal error: ptxas rejected the generated PTX" in err
    assert "PTX line" in err and "%f_bogus" in err


def test_findings_parse_ptxas_reports():
    report = ("ptxas info    : Used 168 registers\n"
              "ptxas info    : 160 bytes stack frame, 240 bytes spill stores, 0 bytes spill loads\n"
              "ptxas warning : (C7515) wgmma serialized due to ...\n"
              "ptxas info    : 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n")
    found = build.ptxas_findings(report)
    assert found == ["(C7515) wgmma serialized due to ...",
                     "240 bytes spill stores, 0 bytes spill loads"]


def test_findings_name_their_entry():
    """Each entry's findings carry its name, so a file of several kernels reports a spill
    at the kernel that spilled, not at the first one."""
    report = ("ptxas info    : 0 bytes gmem\n"
              "ptxas info    : Compiling entry function 'k_one' for 'sm_90a'\n"
              "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
              "ptxas info    : Compiling entry function 'k_two' for 'sm_90a'\n"
              "    16 bytes stack frame, 16 bytes spill stores, 8 bytes spill loads\n")
    assert build.findings_by_entry(report) == [
        ("k_two", "16 bytes spill stores, 8 bytes spill loads")]


@needs_ptxas
def test_a_spill_is_located_at_its_kernel(capsys, tmp_path):
    """flash_atten_bwd.co's dK/dV kernel (its second) spills with the D=64 register split at
    D=128; the warning is at its own `parallel`, not at the file's first kernel."""
    src = EX / "flash_atten_bwd.co"
    rc = cli.main(["compile", str(src), "--target", "sm_90a", "--emit", "cubin",
                   "-o", str(tmp_path / "k.cubin"), "-DDIM=128", "-DKN=64", "-DPRODUCER_REGS=40", "-DCONSUMER_REGS=232"])
    err = capsys.readouterr().err
    line = next(n for n, t in enumerate(src.read_text().splitlines(), 1)
                if "by [cdiv(S, KN), H_KV, B] : block" in t)
    assert rc == 0 and f"flash_atten_bwd.co:{line}:3: warning: ptxas:" in err, err
