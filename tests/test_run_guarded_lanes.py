"""Thread bodies with block barriers inside loops, run as guarded lanes (lanes.mode).

Such a body used to run as one thread per instance. As lanes it must give the
threads' results bit for bit, the same statement count, and, when it faults
(a race, an index out of bounds, a barrier that only some threads reach), the
very report the threads give: the lanes then put back what they stored and the
threads run it.
"""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

import choreo_py
from choreo_py.interp import InterpError, RunStats, lanes

CO = Path(__file__).resolve().parent / "co"


def _both(monkeypatch, run):
    """`run()` as guarded lanes, then as threads: (lanes' outcome, threads' outcome)."""
    out = []
    for guarded in (True, False):
        monkeypatch.setattr(lanes, "GUARDED_LANES", guarded)
        out.append(run())
    return out


def _outcome(path, make, **kw):
    """The tensors a run leaves and its statement count, or its error's report."""
    def run():
        tensors, stats = make(), RunStats()
        try:
            choreo_py.interpret(str(path), tensors, stats=stats, **kw)
        except InterpError as e:
            return {"error": (type(e).__name__, e.render())} | tensors
        return {"statements": stats.statements} | tensors
    return run


def _same(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for k in a:
        if isinstance(a[k], torch.Tensor):
            assert torch.equal(a[k], b[k]), k
        else:
            assert a[k] == b[k], k


def _layernorm_inputs(m, n, dtype=torch.float32):
    """A maker of the same seeded inputs at every call."""
    def make():
        g = torch.Generator().manual_seed(1)
        return dict(X=torch.randn(m, n, generator=g).to(dtype),
                    GAMMA=torch.randn(n, generator=g).to(dtype),
                    BETA=torch.randn(n, generator=g).to(dtype),
                    Y=torch.zeros(m, n, dtype=dtype))
    return make


def test_the_layernorm_with_barriers_in_loops_is_the_threads_bit_for_bit(monkeypatch):
    make = _layernorm_inputs(5, 200)
    fast, slow = _both(monkeypatch, _outcome(CO / "layernorm_block_rows.co", make))
    _same(fast, slow)
    ref = torch.nn.functional.layer_norm(fast["X"], (200,), fast["GAMMA"], fast["BETA"],
                                         eps=1e-5)
    assert (fast["Y"] - ref).abs().max() < 1e-4


@pytest.mark.parametrize("schedule", ["round_robin", "random"])
def test_the_bf16_layernorm_is_the_threads_bit_for_bit(monkeypatch, schedule):
    make = _layernorm_inputs(3, 300, torch.bfloat16)
    fast, slow = _both(monkeypatch, _outcome(CO / "layernorm_missing_barrier.co", make,
                                             defines={"FIXED": "1"}, schedule=schedule))
    _same(fast, slow)


def test_the_tree_reduction_is_the_threads_bit_for_bit(monkeypatch):
    x = torch.randn(7, 300, generator=torch.Generator().manual_seed(2))
    make = lambda: dict(X=x.clone(), Y=torch.zeros(7))  # noqa: E731
    fast, slow = _both(monkeypatch, _outcome(CO / "tree_reduce_rows.co", make))
    _same(fast, slow)
    assert (fast["Y"] - fast["X"].sum(1)).abs().max() < 1e-4


def test_a_race_in_a_guarded_body_is_the_threads_report(monkeypatch):
    make = _layernorm_inputs(2, 200, torch.bfloat16)
    fast, slow = _both(monkeypatch, _outcome(CO / "layernorm_missing_barrier.co", make))
    assert fast["error"][0] == "RaceError"
    assert "thread t=0 writes red[0]" in fast["error"][1]
    _same(fast, slow)


ARITH = """
__co__ void arith(global f32[K] X, global f32[N] Y, global s32[N] Z) {
  parallel {b} by [1] : block {
    shared f32[64] s;
    parallel t by 64 : thread {
      mutable f32 acc = 0.0f;
      mutable s32 h = t;
      foreach {k} in [3] {
        x = X.at(t * 3 + k);
        acc += __exp(x) + __log(__fabs(x) + 1.0f) + __rsqrt(__fabs(x)) + __max(x, -0.0f);
        h = h * 1103515245 + 12345;
        s.at(t) = acc;
        sync.barrier : block;
        acc = acc + s.at(63 - t) / __tanh(x + 3.0f);
        sync.barrier : block;
      }
      Y.at(t) = acc;
      Z.at(t) = h >> 3;
    }
  }
}
"""


def test_guarded_lanes_compute_the_threads_scalar_bits(tmp_path, monkeypatch):
    """Math functions in double rounded once, integers wrapping at every operation,
    Python's max (of two zeros, the first): as the threads' scalar code computes."""
    path = tmp_path / "arith.co"
    path.write_text(ARITH)
    g = torch.Generator().manual_seed(3)
    x = torch.randn(192, generator=g)
    x[::7] = 0.0
    make = lambda: dict(X=x.clone(), Y=torch.zeros(64), Z=torch.zeros(64, dtype=torch.int32))  # noqa: E731
    fast, slow = _both(monkeypatch, _outcome(path, make))
    assert "error" not in fast
    _same(fast, slow)


DIVERGENT = """
__co__ void div(global f32[N] X, global f32[N] Y) {
  parallel {b} by [1] : block {
    shared f32[64] s;
    parallel t by 64 : thread {
      foreach {k} in [2] {
        if (t < LIVE)
          sync.barrier : block;
        s.at(t) = X.at(t) + k;
        sync.barrier : block;
        Y.at(t) = s.at(63 - t);
        sync.barrier : block;
      }
    }
  }
}
"""


@pytest.mark.parametrize("live", [32, 64])
def test_a_barrier_only_some_threads_reach_is_the_threads_deadlock(tmp_path, monkeypatch,
                                                                    live):
    path = tmp_path / "divergent.co"
    path.write_text(DIVERGENT.replace("LIVE", str(live)))
    make = lambda: dict(X=torch.arange(64.0), Y=torch.zeros(64))  # noqa: E731
    fast, slow = _both(monkeypatch, _outcome(path, make))
    _same(fast, slow)
    if live == 64:  # every thread takes the branch: no divergence, no fault
        assert torch.equal(fast["Y"], torch.arange(64.0, 0.0, -1.0))
    else:
        assert fast["error"][0] == "DeadlockError"


OUT_OF_BOUNDS = """
__co__ void oob(global f32[N] X, global f32[N] Y) {
  parallel {b} by [1] : block {
    shared f32[64] s;
    parallel t by 64 : thread {
      foreach {k} in [2] {
        Y.at(t) = Y.at(t) + X.at(t) + k;
        s.at(t) = Y.at(t);
        sync.barrier : block;
        Y.at(t) = s.at(t + k);
        sync.barrier : block;
      }
    }
  }
}
"""


def test_an_index_out_of_bounds_is_the_threads_report_and_their_stores(tmp_path,
                                                                        monkeypatch):
    """The lanes stored Y before the fault: put back, the threads' stores are what is left."""
    path = tmp_path / "oob.co"
    path.write_text(OUT_OF_BOUNDS)
    make = lambda: dict(X=torch.arange(64.0), Y=torch.full((64,), -5.0))  # noqa: E731
    fast, slow = _both(monkeypatch, _outcome(path, make))
    assert fast["error"][0] == "InterpError"
    assert "out of" in fast["error"][1] or "outside" in fast["error"][1]
    _same(fast, slow)


ATOMIC_IN_LOOP = """
__co__ void atom(global f32[N] X, global f32[N] Y) {
  parallel {b} by [1] : block {
    parallel t by 64 : thread {
      foreach {k} in [2] {
        __atomic_add(Y.at(0), X.at(t));
        sync.barrier : block;
      }
    }
  }
}
"""


def test_the_modes_of_bodies(tmp_path):
    """Barriers only at the top level: plain lanes; inside loops: guarded; with atomics,
    whose order the threads and the lanes take differently: threads."""
    from choreo_py.interp import api
    from choreo_py import ir

    def body_modes(path, **kw):
        module, _ = api.load_module(str(path), **kw)
        return [lanes.mode(s.body) for f in module.functions for k in f.kernels
                for s in ir.walk(k.body) if isinstance(s, ir.Parallel) and s.var == "t"]

    assert body_modes(CO / "tree_reduce_rows.co") == ["guarded"]
    assert body_modes(CO / "layernorm_block_rows.co") == ["guarded"]
    assert body_modes(CO / "block_inthreads.co") == ["lanes"]
    path = tmp_path / "atom.co"
    path.write_text(ATOMIC_IN_LOOP)
    assert body_modes(path) == [None]


CONVERT = """
__co__ void conv(global f32[N] X, global s32[N] Y) {
  parallel {b} by [1] : block {
    shared f32[64] s;
    parallel t by 64 : thread {
      foreach {k} in [2] {
        s.at(t) = X.at(t) * 1000.0f / X.at(63 - t);
        sync.barrier : block;
        Y.at(t) = __to<s32>(s.at(t)) + (t << (k * 30));
        sync.barrier : block;
      }
    }
  }
}
"""


@pytest.mark.parametrize("start", [0.0, 1.0])
def test_conversions_and_shifts_are_the_threads(tmp_path, monkeypatch, start):
    """From 0 on, X[63 - t] is 0 for t = 63: an infinity that no s32 holds, which the
    threads refuse; from 1 on, s32 wrap of the shifts, the same bits."""
    path = tmp_path / "convert.co"
    path.write_text(CONVERT)
    x = torch.arange(start, start + 64.0)
    make = lambda: dict(X=x.clone(), Y=torch.zeros(64, dtype=torch.int32))  # noqa: E731
    fast, slow = _both(monkeypatch, _outcome(path, make))
    _same(fast, slow)
    assert ("error" in fast) == (start == 0.0)
