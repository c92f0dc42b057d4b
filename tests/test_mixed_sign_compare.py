"""A comparison of a signed and an unsigned integer compares in C's common type (found by
bench/difftest.py, seed 11302: `__min(1000u, 3u) <= (c ? 4000000000u : 0u)` compared signed
in the PTX of both targets, so 3 <= 4000000000u was false there and true in the
interpreter). The expected values are C's, computed here by hand: an int meeting an
unsigned int becomes unsigned (-1 is 4294967295); both executors must give them."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

BIG = 4000000000
CASES = {  # left side -> its value as C compares it against an unsigned int
    "3": 3, "-1": 2 ** 32 - 1, "__min(1000u, 3u)": 3, "__max(-1, 3)": 3,
    "__min(1000u, -1)": 1000,
}


def _source(left: str) -> str:
    return ("__co__ void k(global s32[N] XI, global f32[N] YF) {\n"
            "  parallel {b} by [cdiv(N, 32)] : block {\n"
            "    parallel t by 32 : thread {\n"
            "      n = b * 32 + t;\n"
            "      if (n < N)\n"
            f"        YF.at(n) = (({left} <= ((XI.at(n) != 0) ? {BIG}u : 0u)) ? 1.0f : 2.0f);\n"
            "    }\n  }\n}\n")


def _want(left: str, xi: torch.Tensor) -> torch.Tensor:
    right = torch.where(xi != 0, BIG, 0)
    return torch.where(CASES[left] <= right, 1.0, 2.0).float()


def _inputs():
    return torch.tensor([0, 1, 7, 0] * 8, dtype=torch.int32)


@pytest.mark.parametrize("left", CASES)
def test_the_interpreter_compares_in_the_common_type(left, tmp_path):
    from choreo_py.interp.api import program

    src = tmp_path / "c.co"
    src.write_text(_source(left))
    xi, yf = _inputs(), torch.zeros(32)
    program(str(src), function="k")(xi, yf)
    assert torch.equal(yf, _want(left, xi)), yf[:4]


@pytest.mark.emu
@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
@pytest.mark.parametrize("left", CASES)
def test_the_ptx_compares_in_the_common_type(left, target, tmp_path):
    from choreo_py.emu.program import emulate_program

    src = tmp_path / "c.co"
    src.write_text(_source(left))
    xi, yf = _inputs(), torch.zeros(32)
    emulate_program(str(src), target=target).k(xi, yf)
    assert torch.equal(yf, _want(left, xi)), yf[:4]
