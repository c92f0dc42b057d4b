"""What `choreo` says where a new user met a silent or misleading answer: the bare command,
a run that compares nothing, sdpa-causal's mask alignment, a one-region kernel that
`emulate` took for a host program, an emulator mismatch that read as a compiler bug."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from choreo_py import cli
from choreo_py.emu import command as emu_command
from choreo_py.interp import checks

ROOT = Path(__file__).resolve().parent.parent
EX = ROOT / "examples"

# docs/tutorial/vector-add.md's kernel: void, one parallel region, per-thread code (its
# module is a launcher's: KERNELS, no grid of its own)
VADD = """\
__co__ void vadd(global f32[N] A, global f32[N] B, global f32[N] C) {
  parallel {blk} by [cdiv(N, 128)] : block {
    parallel t by 128 : thread {
      i = blk * 128 + t;
      if (i < N)
        C.at(i) = A.at(i) + B.at(i);
    }
  }
}
"""


def main(capsys, *argv):
    try:
        rc = cli.main([str(a) for a in argv])
    except SystemExit as exc:
        rc = exc.code
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return rc, out, err


@pytest.fixture
def vadd(tmp_path):
    path = tmp_path / "vadd.co"
    path.write_text(VADD)
    refs = tmp_path / "vadd_ref.py"
    refs.write_text("def vadd(A, B):\n    return A + B\n")
    return path, refs


def test_the_bare_command_prints_the_help_with_usage_status(capsys):
    rc, out, err = main(capsys)
    assert rc == 2 and err == ""
    assert out.startswith("usage: choreo") and "emulate" in out and "--version" in out
    assert "arguments are required" not in out


def test_a_run_that_compares_nothing_says_so_on_stderr(capsys, vadd):
    path, _ = vadd
    rc, out, err = main(capsys, "run", path, "--shape", "N=200")
    assert rc == 0
    assert "check none (auto: no reference fits this function's parameters)" in out
    assert f"{path}: note: nothing was compared" in err
    assert "--ref MODULE:FUNCTION" in err and "--check" in err


def test_check_none_asked_for_draws_no_note(capsys, vadd):
    path, _ = vadd
    rc, _, err = main(capsys, "run", path, "--shape", "N=200", "--check", "none")
    assert rc == 0 and "nothing was compared" not in err


def test_sdpa_causal_says_it_aligns_the_mask_top_left_when_the_lengths_differ(capsys):
    """flash_atten.co (no mask) against sdpa-causal: with Q_SEQ != KV_SEQ the note tells
    the alignment; with equal lengths there is no note."""
    fa = EX / "flash_atten.co"
    rc, _, err = main(capsys, "run", fa, "--shape", "B=1,H=1,Q_SEQ=128,KV_SEQ=256",
                      "--check", "sdpa-causal")
    assert rc == 1
    assert "aligns the causal mask top-left" in err
    assert "query i sees keys 0..i + 128" in err and "--ref" in err
    rc, _, err = main(capsys, "run", fa, "--shape", "B=1,H=1,Q_SEQ=128,KV_SEQ=128",
                      "--check", "sdpa-causal")
    assert "top-left" not in err


def test_the_help_of_check_tells_the_causal_alignment(capsys):
    for cmd in ("run", "emulate"):
        rc, out, _ = main(capsys, cmd, "--help")
        assert rc == 0 and "aligned top-left" in " ".join(out.split())


def test_sdpa_causal_matches_torchs_top_left_mask():
    """The alignment the note states is the one the reference computes."""
    from choreo_py.interp.api import load_module

    module, _ = load_module(str(EX / "flash_atten.co"), target="sm_90a")
    fn = module.functions[0]
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, n, 1, 128, generator=g) for n in (4, 8, 8))
    _, got = checks.reference("sdpa-causal", fn, {"Q": q, "K": k, "V": v, "O": q})
    s = (q[0, :, 0] @ k[0, :, 0].T) / 128 ** 0.5
    s = s.masked_fill(torch.ones(4, 8).tril().logical_not(), float("-inf"))
    want = s.softmax(-1) @ v[0, :, 0]
    assert torch.allclose(got[0, :, 0], want, atol=1e-5)


@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_emulate_takes_a_reference_for_a_one_region_void_kernel(capsys, vadd, target):
    """Its module is in the launcher's format, which made `emulate` call it a host program
    and refuse --ref."""
    path, refs = vadd
    rc, out, err = main(capsys, "emulate", path, "--shape", "N=300", "--target", target,
                        "--ref", f"{refs}:vadd")
    assert rc == 0, err
    assert "host program" not in out + err
    assert f"emulated vadd [N=300] target={target}" in out
    assert "check ref (--ref" in out and out.rstrip().endswith(": ok")


def test_emulate_without_a_reference_compares_a_kernel_with_the_interpreter(capsys, vadd):
    path, _ = vadd
    rc, out, _ = main(capsys, "emulate", path, "--shape", "N=300", "--target", "sm_90a")
    assert rc == 0
    assert "check interpreter: C max abs error 0.000e+00" in out


def test_a_function_with_a_result_is_still_a_host_program(capsys):
    rc, _, err = main(capsys, "emulate", EX / "vector_add.co", "--shape", "N=64",
                      "--ref", "docs/refs.py:vadd")
    assert rc == 2 and "vector_add is a host program (a result" in err


def test_an_emulator_mismatch_points_to_a_race_not_to_the_compiler(capsys):
    args = SimpleNamespace(file="k.co", rtol=1e-2)
    bad = emu_command._compare_with_interpreter(args, "C", torch.zeros(8), torch.ones(8))
    out, err = capsys.readouterr()
    assert bad == 1 and "FAILED" in out
    assert "differs from the interpreter's" not in err
    assert err.startswith("k.co: error: C from the emulated PTX does not match")
    assert "may have a race" in err
    assert "choreo run k.co --schedule random --seed N" in err
    assert "choreo check k.co --strict" in err
