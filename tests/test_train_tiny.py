"""bench/train_tiny.py, the training-loop check of the attention backward: a tiny
transformer trained with our attention (examples/flash_atten_bwd.py's Function), with
torch SDPA in bf16, with float32 attention and with a torch model of our roundings, from
one initialization on one batch sequence; the loss curves must agree within the spread
bf16 attention itself causes (the script's docstring), and a run whose dK is zeroed must
not. On the CPU our kernels run in the interpreter (one layer, S=64); marked `gpu`, the
script's own shapes (two layers, S=256, four heads; GQA on two KV heads too) for 30
steps."""
from __future__ import annotations

import csv
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
import train_tiny  # noqa: E402


def check(v: dict):
    """The script's verdict: ours within tolerance, the loss fallen, the control rejected."""
    assert v["learned"], v
    assert v["gap"] <= v["tol"], v
    assert v["control_gap"] > v["tol"], v


def test_cpu_interpreter(tmp_path):
    """20 steps at B=4, H=2, S=64 through the script's command line, its CSV read back."""
    out = tmp_path / "curves.csv"
    argv = ["--device", "cpu", "--layers", "1", "--heads", "2", "--seq", "64", "--batch", "4",
            "--period", "16", "--steps", "20", "--control", "--out", str(out)]
    assert train_tiny.main(argv) == 0
    with open(out, newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    assert rows[0] == ["step", *train_tiny.RUNS, "control"]
    curves = {name: [float(r[i + 1]) for r in rows[1:]] for i, name in enumerate(rows[0][1:])}
    assert all(len(c) == 20 for c in curves.values())
    check(train_tiny.verdict(curves))


@pytest.mark.gpu
@pytest.mark.parametrize("dim,causal,kv_heads,seq", [(64, True, 0, 256), (128, True, 0, 256),
                                                     (64, False, 0, 256), (64, True, 2, 256),
                                                     (128, True, 0, 300)])
def test_gpu(dim, causal, kv_heads, seq):
    """Four heads of D 64 or 128; GQA on two KV heads; S = 300 leaves partial tiles."""
    cfg = train_tiny.Config(dim=dim, causal=causal, steps=30, kv_heads=kv_heads, seq=seq)
    check(train_tiny.verdict(train_tiny.curves(cfg, train_tiny.RUNS + ("control",))))
