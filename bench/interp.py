"""Reference-interpreter timings: the seed at B=1, H=1, S=256 must run in under 30 s.

    python bench/interp.py [--repeat N]

Prints, for each example: the time to build its IR (parse + sema, once per
file), the time to interpret it (best of N), and the end-to-end time of the
`choreo run` command in a fresh process (Python start-up and torch import
included). Exits 1 if the seed's end-to-end time is 30 s or more.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from choreo_py.interp import RunStats, api  # noqa: E402

LIMIT_S = 30.0
CASES = [  # (file, dims, the seed?)
    ("examples/flash_atten_causal.co", dict(B=1, H=1, Q_SEQ=256, KV_SEQ=256), True),
    ("examples/flash_atten_causal.co", dict(B=1, H=2, Q_SEQ=1024, KV_SEQ=1024), False),
    ("examples/flash_atten.co", dict(B=1, H=1, Q_SEQ=256, KV_SEQ=256), False),
    ("examples/gemm.co", dict(M=512, N=512, K=512), False),
    ("examples/softmax.co", dict(ROWS=1024), False),
]


def _tensors(module, fn, dims):
    from choreo_py.interp import checks

    reads, _ = api.param_usage(module, fn)
    return checks.make_inputs(fn, dims, reads, 0, api.param_shape)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads available")
    seed_total = None
    for path, dims, is_seed in CASES:
        start = time.perf_counter()
        api._CACHE.clear()
        module, _ = api.load_module(str(ROOT / path))
        build = time.perf_counter() - start
        fn = api.pick_function(module)
        best = float("inf")
        for _ in range(args.repeat):
            stats = RunStats()
            tensors = _tensors(module, fn, dims)
            start = time.perf_counter()
            api.interpret(str(ROOT / path), tensors, stats=stats)
            best = min(best, time.perf_counter() - start)
        shape = ",".join(f"{k}={v}" for k, v in dims.items())
        start = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "choreo_py", "run", str(ROOT / path),
                               "--shape", shape], capture_output=True, text=True)
        total = time.perf_counter() - start
        status = "ok" if proc.returncode == 0 else f"exit {proc.returncode}"
        print(f"{path:34} {shape:32} IR {build:5.2f} s  interpret {best:6.3f} s "
              f"({stats.blocks} blocks, {stats.statements} statements)  "
              f"choreo run {total:5.2f} s [{status}]")
        if proc.returncode != 0:
            print(proc.stderr, file=sys.stderr)
        if is_seed:
            seed_total = total
    verdict = "meets" if seed_total < LIMIT_S else "MISSES"
    print(f"seed at B=1,H=1,S=256: choreo run {seed_total:.2f} s end to end, "
          f"{verdict} the {LIMIT_S:.0f} s requirement")
    return 0 if seed_total < LIMIT_S else 1


if __name__ == "__main__":
    sys.exit(main())
