"""A name bound in the kept branch of an `if` whose condition is a constant is the
branch's, not the region's (bench/difftest.py seed 12447: a use of it inside a nested
statement was hoisted to the region's mark, before the binding, and the pyptx module
failed with UnboundLocalError on both targets)."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

SOURCE = """__co__ void k(global f32[N] XF, global f32[N] YF) {
  parallel t by 32 : thread {
    mutable f32 v1 = XF.at(t % N);
    if ((~4000000000u) != 0u) {
      f32 v3 = v1;
      if (t < N) {
        foreach {j} in [2] {
          v1 = 1.0f - v3;
          YF.at(t) = __min(v3, 0.001f) + v1;
        }
      }
    }
  }
}
"""


def _want(xf: torch.Tensor) -> torch.Tensor:
    return torch.minimum(xf, torch.tensor(0.001)) + (1.0 - xf)


@pytest.mark.emu
@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_the_branch_binding_is_defined_before_its_uses(target, tmp_path):
    from choreo_py.emu.program import emulate_program
    from choreo_py.interp.api import program

    src = tmp_path / "c.co"
    src.write_text(SOURCE)
    xf = torch.linspace(-1, 1, 32)
    want = _want(xf)
    got, ref = torch.zeros(32), torch.zeros(32)
    program(str(src), function="k")(xf.clone(), ref)
    emulate_program(str(src), target=target).k(xf.clone(), got)
    assert torch.allclose(ref, want) and torch.equal(got, ref), (got[:4], ref[:4])
