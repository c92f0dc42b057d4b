"""Compile time of the seed to PTX for sm_100a, against ptxas alone on that PTX.

    python bench/compile.py [--repeat 10] [--target sm_100a] [--file examples/...co]

Three numbers, each the median of --repeat runs:

- in-process: `compile_file(seed, emit="ptx")` in a warm interpreter (the first
  call, which also imports and builds the grammar tables, is reported apart),
  with its stages: parse, sema -> tile IR, lowering -> pyptx text, pyptx trace -> PTX;
- subprocess: `python -m choreo_py compile --emit ptx FILE -o OUT`, what a user
  waits for (interpreter start and imports included);
- ptxas: `ptxas -arch=sm_100a` on the same PTX (to a cubin), for scale.

Requirement (checked here, not in the tests): the subprocess compile of the
seed to PTX takes < 1 s on this machine. Prints PASS or FAIL.
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SEED = ROOT / "examples" / "flash_atten_causal.co"
LIMIT_S = 1.0


def _timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def _stages(path: str, target: str) -> dict:
    """One in-process compile, stage by stage (seconds)."""
    from choreo_py import driver, frontend
    from choreo_py.runtime import build

    t = {}
    t["parse"], program = _timed(lambda: frontend.parse_file(path))
    t["sema"], module = _timed(lambda: driver.build_ir(program, target))
    if target == "sm_100a":
        from choreo_py.lowering.sm100.lower import lower_module
    else:
        from choreo_py.lowering.sm90 import lower_module
    t["lower"], text = _timed(lambda: lower_module(module, os.path.basename(path)))
    t["trace"], _ = _timed(lambda: build.run_module(text).ptx())
    return t


def _median(xs):
    return statistics.median(xs)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--file", default=str(SEED))
    ap.add_argument("--target", default="sm_100a", choices=("sm_100a", "sm_90a"))
    ap.add_argument("--repeat", type=int, default=10)
    args = ap.parse_args()
    from choreo_py.driver import compile_file
    from choreo_py.runtime import build

    print(f"machine: {platform.machine()} {os.cpu_count()} cpus, python "
          f"{platform.python_version()}; {Path(args.file).name} -> {args.target} PTX, "
          f"median of {args.repeat}")
    first, ptx = _timed(lambda: compile_file(args.file, "ptx", args.target))
    warm = [_timed(lambda: compile_file(args.file, "ptx", args.target))[0]
            for _ in range(args.repeat)]
    stages = [_stages(args.file, args.target) for _ in range(args.repeat)]
    parts = ", ".join(f"{k} {_median([s[k] for s in stages]) * 1000:.0f}"
                      for k in ("parse", "sema", "lower", "trace"))
    print(f"in-process: first call {first * 1000:.0f} ms (backend imports, grammar tables); "
          f"warm {_median(warm) * 1000:.0f} ms ({parts} ms)")

    with tempfile.TemporaryDirectory(prefix="choreo_bench_") as tmp:
        out = os.path.join(tmp, "seed.ptx")
        cmd = [sys.executable, "-m", "choreo_py", "compile", "--target", args.target,
               "--emit", "ptx", args.file, "-o", out]
        sub = []
        for _ in range(args.repeat):
            dt, res = _timed(lambda: subprocess.run(cmd, cwd=ROOT, capture_output=True))
            if res.returncode:
                print(res.stderr.decode(), file=sys.stderr)
                return 2
            sub.append(dt)
        print(f"subprocess (choreo compile --emit ptx): {_median(sub) * 1000:.0f} ms "
              f"(min {min(sub) * 1000:.0f}, max {max(sub) * 1000:.0f})")

        exe = build.find_ptxas()
        if exe:
            cubin = os.path.join(tmp, "seed.cubin")
            pcmd = [exe, f"-arch={args.target}", out, "-o", cubin]
            pt = [_timed(lambda: subprocess.run(pcmd, capture_output=True, check=True))[0]
                  for _ in range(args.repeat)]
            print(f"ptxas -arch={args.target} on that PTX ({len(ptx.splitlines())} lines): "
                  f"{_median(pt) * 1000:.0f} ms")
        else:
            print("ptxas: not on PATH")
    ok = _median(sub) < LIMIT_S
    print(f"{'PASS' if ok else 'FAIL'}: compile to PTX {_median(sub) * 1000:.0f} ms "
          f"{'<' if ok else '>='} {LIMIT_S * 1000:.0f} ms")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
