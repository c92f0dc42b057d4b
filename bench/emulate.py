"""PTX emulator timings: the seed (causal, B=1 H=1 S=256, sm_100a) must run in under 20 s.

    python bench/emulate.py [--repeat N] [--all]

For each case: compile time (.co -> PTX, once), emulation time (best of N),
warp instructions executed and instructions per second, and the `choreo
emulate` command's end-to-end time in a fresh process (start-up, torch
import and compilation included). --all adds the other examples for both
targets. Exits 1 if the seed's end-to-end time is 20 s or more. One core:
the emulator is single-threaded Python and numpy; run under `taskset -c 0`
to be sure numpy's BLAS uses one core too.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from choreo_py.emu import EmuStats  # noqa: E402
from choreo_py.emu.api import run_spec  # noqa: E402
from choreo_py.emu.launch import from_co  # noqa: E402

LIMIT_S = 20.0
SEED = ("examples/flash_atten_causal.co", "sm_100a", dict(B=1, H=1, Q_SEQ=256, KV_SEQ=256), None)
MORE = [
    ("examples/flash_atten_causal.co", "sm_90a", dict(B=1, H=1, Q_SEQ=256, KV_SEQ=256), None),
    ("examples/flash_atten_causal.co", "sm_100a", dict(B=1, H=2, Q_SEQ=512, KV_SEQ=512), None),
    ("examples/flash_atten.co", "sm_90a", dict(B=1, H=1, Q_SEQ=256, KV_SEQ=256), None),
    ("examples/flash_atten.co", "sm_100a", dict(B=1, H=1, Q_SEQ=256, KV_SEQ=256), None),
    ("examples/flash_atten_persistent.co", "sm_90a", dict(B=1, H=1, Q_SEQ=256, KV_SEQ=256), 2),
    ("examples/gemm.co", "sm_90a", dict(M=256, N=256, K=256), None),
    ("examples/gemm.co", "sm_100a", dict(M=256, N=256, K=256), None),
]


def _tensors(path: str, dims: dict) -> dict:
    g = torch.Generator().manual_seed(0)
    if "gemm" in path:
        m, n, k = dims["M"], dims["N"], dims["K"]
        return dict(A=torch.randn(m, k, generator=g).bfloat16(),
                    B=torch.randn(n, k, generator=g).bfloat16(),
                    C=torch.zeros(m, n).bfloat16())
    b, h, s = dims["B"], dims["H"], dims["Q_SEQ"]
    q, k, v = (torch.randn(b, s, h, 128, generator=g).bfloat16() for _ in range(3))
    return dict(Q=q, K=k, V=v, O=torch.zeros_like(q))


def measure(path, target, dims, sms, repeat):
    defines = {"NUM_SMS": str(sms)} if sms else None
    t0 = time.perf_counter()
    spec = from_co(str(ROOT / path), target, (), defines)
    compile_s = time.perf_counter() - t0
    best = None
    for _ in range(repeat):
        stats = EmuStats()
        run_spec(spec, _tensors(path, dims), stats=stats)
        if best is None or stats.seconds < best.seconds:
            best = stats
    return compile_s, best


def end_to_end(path, target, dims, sms) -> float:
    shape = ",".join(f"{k}={v}" for k, v in dims.items())
    cmd = [sys.executable, "-m", "choreo_py", "emulate", str(ROOT / path), "--shape", shape,
           "--target", target] + (["-D", f"NUM_SMS={sms}"] if sms else [])
    t0 = time.perf_counter()
    res = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    took = time.perf_counter() - t0
    if res.returncode != 0:
        print(res.stdout + res.stderr)
        raise SystemExit(f"{' '.join(cmd)} failed")
    return took


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--all", action="store_true", help="also the other examples and targets")
    args = ap.parse_args()
    cases = [SEED] + (MORE if args.all else [])
    print(f"{'case':58} {'compile':>8} {'emulate':>8} {'warp insts':>11} {'insts/s':>9}")
    for path, target, dims, sms in cases:
        c, st = measure(path, target, dims, sms, args.repeat)
        shape = " ".join(f"{k}={v}" for k, v in dims.items())
        name = f"{Path(path).stem} {target} {shape}"
        print(f"{name:58} {c:7.2f}s {st.seconds:7.2f}s {st.instructions:11d} {st.rate:9,.0f}")
    e2e = end_to_end(*SEED)
    verdict = "ok" if e2e < LIMIT_S else "TOO SLOW"
    print(f"seed end to end (`choreo emulate`, fresh process): {e2e:.2f} s "
          f"(limit {LIMIT_S:.0f} s): {verdict}")
    return 0 if e2e < LIMIT_S else 1


if __name__ == "__main__":
    sys.exit(main())
