"""The autotuner on a Hopper GPU (marked `gpu`, skipped elsewhere): at three shapes,
load(examples/gemm.co, autotune=...)'s pick is within 3% of the fastest configuration
of a full sweep (issue 30's acceptance), its result is right, and a new tuner of the
same space reads the winner from the cache instead of timing again.

    python -m pytest -v tests/test_autotune_gpu.py
    python3 bench/autotune.py --out autotune.md     # the same comparison as a table
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

import choreo_py  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
import autotune as bench  # noqa: E402  (bench/autotune.py)


def _hopper() -> bool:
    return torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)


pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not _hopper(), reason="needs a CUDA GPU of compute "
                                                       "capability 9.0")]
SPACE = {"BN": ["64", "128", "256"], "STAGES": ["2", "3", "4"]}


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.delenv("CHOREO_PY_NO_CACHE", raising=False)
    monkeypatch.setenv("CHOREO_PY_CACHE_DIR", str(tmp_path / "kernels"))


@pytest.mark.parametrize("shape", [(4096, 4096, 4096), (512, 512, 8192), (8192, 256, 4096)])
def test_the_pick_is_within_3_percent_of_the_sweeps_best(shape):
    result = bench.compare(shape, SPACE, warmup=20, reps=100, rounds=5)
    print(bench.markdown([result], type("Args", (), {"warmup": 20, "reps": 100,
                                                      "rounds": 5})))
    assert result["ratio"] <= 1.03, result


def test_the_winner_is_right_and_read_back_without_timing():
    a, b, c = bench.inputs(1024, 2048, 1024)
    tuned = choreo_py.load(bench.GEMM, target="sm_90a", autotune=SPACE)
    tuned(a, b, c)
    ref = a.float() @ b.float().T
    assert ((c.float() - ref).norm() / ref.norm()).item() < 1e-2
    assert "against the interpreter at M=128 K=128 N=128" in tuned.report.reference

    def never(run, config):
        raise AssertionError("tuned again")

    again = choreo_py.load(bench.GEMM, target="sm_90a", autotune=SPACE, timer=never)
    c.zero_()
    again(a, b, c)
    assert again.report.cached and again.winners == tuned.winners
    assert ((c.float() - ref).norm() / ref.norm()).item() < 1e-2
