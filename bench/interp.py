"""Reference-interpreter timings: the seed at B=1, H=1, S=256 must run in under 30 s.

    python bench/interp.py [--repeat N] [--thread-kernels-only] [--no-threads]

Prints, for each example: the time to build its IR (parse + sema, once per
file), the time to interpret it (best of N), and the end-to-end time of the
`choreo run` command in a fresh process (Python start-up and torch import
included). Exits 1 if the seed's end-to-end time is 30 s or more.

Then the thread kernels whose block barriers sit in loops (LayerNorm, a tree
reduction): the CPU seconds of `interpret` (IR built beforehand; median of N,
each on fresh inputs) with their bodies run as guarded lanes (lanes.py) and,
unless --no-threads, as one thread per instance (how they ran before lanes
took them; lanes.GUARDED_LANES = False), with the speed-up and whether the
two outputs are bit-identical.
"""
from __future__ import annotations

import argparse
import hashlib
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from choreo_py.interp import RunStats, api, lanes  # noqa: E402
from choreo_py.interp.scalars import TORCH_DTYPES  # noqa: E402

LIMIT_S = 30.0
CASES = [  # (file, dims, the seed?)
    ("examples/flash_atten_causal.co", dict(B=1, H=1, Q_SEQ=256, KV_SEQ=256), True),
    ("examples/flash_atten_causal.co", dict(B=1, H=2, Q_SEQ=1024, KV_SEQ=1024), False),
    ("examples/flash_atten.co", dict(B=1, H=1, Q_SEQ=256, KV_SEQ=256), False),
    ("examples/gemm.co", dict(M=512, N=512, K=512), False),
    ("examples/softmax.co", dict(ROWS=1024), False),
]


#: (file, defines, dims, parameter shapes) of the thread kernels with barriers in loops
THREAD_CASES = [
    ("tests/co/layernorm_block_rows.co", {}, dict(M=64, N=320),
     dict(X=("M", "N"), GAMMA=("N",), BETA=("N",), Y=("M", "N"))),
    ("tests/co/layernorm_missing_barrier.co", {"FIXED": "1"}, dict(M=64, N=320),
     dict(X=("M", "N"), GAMMA=("N",), BETA=("N",), Y=("M", "N"))),
    ("tests/co/tree_reduce_rows.co", {}, dict(M=300, N=200), dict(X=("M", "N"), Y=("M",))),
]


def _tensors(module, fn, dims):
    from choreo_py.interp import checks

    reads, _ = api.param_usage(module, fn)
    return checks.make_inputs(fn, dims, reads, 0, api.param_shape)


def _thread_inputs(module, shapes: dict, dims: dict) -> dict:
    """Seeded inputs in each parameter's dtype; outputs zeroed."""
    fn = api.pick_function(module)
    reads, _ = api.param_usage(module, fn)
    gen = torch.Generator().manual_seed(0)
    out = {}
    for p in fn.params:
        shape = [dims[d] for d in shapes[p.name]]
        dtype = TORCH_DTYPES[p.dtype]
        out[p.name] = (torch.randn(shape, generator=gen).to(dtype) if p.name in reads
                       else torch.zeros(shape, dtype=dtype))
    return out


def _cpu_seconds(path: str, defines: dict, dims: dict, shapes: dict, repeat: int):
    """(median CPU seconds of `interpret`, statements, md5 of the outputs)."""
    module, _ = api.load_module(str(ROOT / path), defines=defines)
    times, digest, stats = [], None, None
    for _ in range(repeat):
        tensors = _thread_inputs(module, shapes, dims)
        stats = RunStats()
        start = time.process_time()
        api.interpret(str(ROOT / path), tensors, defines=defines, stats=stats)
        times.append(time.process_time() - start)
        digest = hashlib.md5(b"".join(t.float().numpy().tobytes()
                                      for t in tensors.values())).hexdigest()
    return statistics.median(times), stats.statements, digest


def thread_kernels(repeat: int, threads: bool) -> None:
    print(f"thread kernels with barriers in loops: CPU s of interpret, median of {repeat}")
    for path, defines, dims, shapes in THREAD_CASES:
        shape = ",".join(f"{k}={v}" for k, v in dims.items())
        name = path + "".join(f" -D {k}" for k in defines)
        fast, count, digest = _cpu_seconds(path, defines, dims, shapes, repeat)
        line = f"{name:48} {shape:12} lanes {fast:6.2f} s ({count} statements)"
        if threads:
            lanes.GUARDED_LANES = False
            try:
                slow, slow_count, slow_digest = _cpu_seconds(path, defines, dims, shapes, repeat)
            finally:
                lanes.GUARDED_LANES = True
            same = "bit-identical" if (slow_digest, slow_count) == (digest, count) else "DIFFER"
            line += f"  threads {slow:6.2f} s  x{slow / fast:.1f}  outputs {same}"
        print(line, flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--thread-kernels-only", action="store_true",
                    help="only the thread kernels with barriers in loops")
    ap.add_argument("--no-threads", action="store_true",
                    help="do not time those kernels as one thread per instance")
    args = ap.parse_args()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads available")
    if args.thread_kernels_only:
        thread_kernels(args.repeat, not args.no_threads)
        return 0
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
    thread_kernels(args.repeat, not args.no_threads)
    verdict = "meets" if seed_total < LIMIT_S else "MISSES"
    print(f"seed at B=1,H=1,S=256: choreo run {seed_total:.2f} s end to end, "
          f"{verdict} the {LIMIT_S:.0f} s requirement")
    return 0 if seed_total < LIMIT_S else 1


if __name__ == "__main__":
    sys.exit(main())
