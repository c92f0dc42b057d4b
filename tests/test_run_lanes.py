"""Per-thread code run as lanes: C semantics per thread, whatever the other threads do."""
from __future__ import annotations

import pytest
import torch

import choreo_py
from choreo_py.interp import InterpError, lanes

DIV = """
__co__ void dv(global s32[N] X, global s32[N] Y) {
  parallel {t} by [cdiv(N, 32)] : block {
    parallel r by 32 : thread {
      n = t * 32 + r;
      if (n < N) {
        if (X.at(n) != SKIP)
          Y.at(n) = 100 / X.at(n) + 100 % X.at(n);
        else
          Y.at(n) = -1;
      }
    }
  }
}
"""

COUNTDOWN = """
__co__ void cd(global s32[N] X, global s32[N] Y) {
  parallel {t} by [1] : block {
    parallel r by 32 : thread {
      if (r < N) {
        mutable u32 k = X.at(r);
        mutable s32 steps = 0;
        while (k != 0) {
          k = k / 2;
          steps = steps + 1;
        }
        mutable u32 w = 0;
        w = w - 1;
        Y.at(r) = steps * 1000 + w % 1000;
      }
    }
  }
}
"""


def _run(tmp_path, name, text, tensors, **kw):
    path = tmp_path / name
    path.write_text(text)
    return choreo_py.interpret(str(path), tensors, **kw)


def _c_div(a, b):
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


@pytest.mark.parametrize("vectorise", [True, False])
def test_division_where_the_guard_excludes_zero(tmp_path, monkeypatch, vectorise):
    if not vectorise:
        monkeypatch.setattr(lanes, "eligible", lambda body, top=True, private=(): False)
    x = torch.tensor([0, 3, -7, 5, 0, 2, 1, -9, 4, 0] * 5, dtype=torch.int32)
    y = torch.zeros_like(x)
    _run(tmp_path, "div.co", DIV.replace("SKIP", "0"), dict(X=x, Y=y))
    ref = [-1 if a == 0 else _c_div(100, a) + (100 - _c_div(100, a) * a) for a in x.tolist()]
    assert y.tolist() == ref


def test_division_by_zero_names_the_threads(tmp_path):
    x = torch.tensor([0, 3, 7, 0] * 10, dtype=torch.int32)
    with pytest.raises(InterpError, match=r"integer division by zero in instance r=0 "
                                          r"\(and 15 more\)"):
        _run(tmp_path, "div7.co", DIV.replace("SKIP", "7"), dict(X=x, Y=torch.zeros_like(x)))


@pytest.mark.parametrize("vectorise", [True, False])
def test_unsigned_wrap_and_lane_dependent_while_loops(tmp_path, monkeypatch, vectorise):
    """k = X[r] as u32 halves to 0 in a different number of steps per thread; 0u - 1 wraps."""
    if not vectorise:
        monkeypatch.setattr(lanes, "eligible", lambda body, top=True, private=(): False)
    x = torch.tensor([0, 1, 2, 3, 8, 100, -1], dtype=torch.int32)
    y = torch.zeros_like(x)
    _run(tmp_path, "cd.co", COUNTDOWN, dict(X=x, Y=y))
    assert y.tolist() == [295, 1295, 2295, 2295, 4295, 7295, 32295]  # -1 is 2^32 - 1: 32 halvings
