"""The autotuner against a full sweep, on a GPU: does `load(path, autotune=...)` pick a
configuration as fast as the best one that timing every configuration finds?

    python3 bench/autotune.py --out FILE [--shapes 4096x4096x4096,512x512x8192]
                              [--space BN=64,128,256 --space STAGES=2,3,4,5,6] [--reps 100]

After a 1 s matmul warm-up, for each shape (M x N x K of examples/gemm.co, C = A @ B^T in bf16):

- the sweep: every configuration of the space loaded on its own, its output compared
  with torch's matmul (relative error at most 1e-2, else it is left out, with the
  error), then timed (CUDA events: --warmup calls, then the median of --reps, the L2
  cache flushed before each timed call, as the autotuner's own timer does);
- the pick, first: `load(..., autotune=space)` called once on the same tensors, with
  empty caches (its own timing: CUDA events, 10 warm-up calls, median of 50), and the
  seconds of that first call (compiling, checking and timing everything; the first
  shape's also loads the compiler's imports);
- the verdict: the pick and the sweep's best timed again, alternately, in --rounds
  rounds (the median of each); pick / best is the ratio the acceptance bounds (issue
  30: at most 1.03 at every shape).

Each shape runs in a process of its own (a fault on the GPU ends that shape only);
FILE gets the table in Markdown and, beside it, FILE.json the measurements. The kernel
and autotune caches live in a temporary folder, so nothing tuned before counts.
Self-contained: it needs choreo-py (this checkout), torch and cuda-python, and ptxas.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

GEMM = os.path.join(ROOT, "examples", "gemm.co")
SPACE = {"BN": ["64", "128", "256"], "STAGES": ["2", "3", "4", "5", "6"]}
SHAPES = [(4096, 4096, 4096), (512, 512, 8192), (8192, 256, 4096)]
TARGET = "sm_90a"
RTOL = 1e-2


def inputs(m: int, n: int, k: int, seed: int = 0):
    import torch

    g = torch.Generator(device="cuda").manual_seed(seed)
    a = torch.randn(m, k, device="cuda", generator=g).bfloat16()
    b = torch.randn(n, k, device="cuda", generator=g).bfloat16()
    return a, b, torch.empty(m, n, device="cuda", dtype=torch.bfloat16)


def median_ms(fn, warmup: int, reps: int) -> float:
    from choreo_py.runtime.autotune import event_times

    return statistics.median(event_times(fn, warmup, reps, flush=True))


def sweep(space: dict, tensors, warmup: int, reps: int) -> list[dict]:
    """Every configuration loaded, checked against torch and timed on its own."""
    import choreo_py
    from choreo_py.runtime.autotune import configurations

    a, b, c = tensors
    ref = a.float() @ b.float().T
    rows = []
    for config in configurations(space):
        row = {"config": config, "ms": None, "skipped": None}
        rows.append(row)
        c.fill_(float("nan"))  # an element a configuration leaves unwritten shows
        try:
            fn = choreo_py.load(GEMM, target=TARGET, defines=config)
            fn(a, b, c)
        except Exception as e:  # noqa: BLE001 - the compiler's refusal, reported in the table
            row["skipped"] = str(e).strip().splitlines()[0]
            continue
        err = ((c.float() - ref).norm() / ref.norm()).item()
        if not err <= RTOL:
            row["skipped"] = f"wrong result: relative error {err:.3g} against torch"
            continue
        row["ms"] = median_ms(lambda: fn(a, b, c), warmup, reps)
    return rows


def pick(space: dict, tensors) -> tuple[dict, float, str]:
    """(the autotuner's pick, the seconds of its first call, its table)."""
    import torch

    import choreo_py

    tuned = choreo_py.load(GEMM, target=TARGET, autotune=space, key=["M", "N", "K"])
    torch.cuda.synchronize()
    start = time.perf_counter()
    tuned(*tensors)
    torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    (config,) = tuned.winners.values()
    return {k: str(v) for k, v in config.items()}, seconds, tuned.report.table()


def confirm(best: dict, chosen: dict, tensors, warmup: int, reps: int, rounds: int):
    """(best's ms, the pick's ms): timed alternately, the median over `rounds` rounds."""
    import choreo_py

    fns = {name: choreo_py.load(GEMM, target=TARGET, defines=config)
           for name, config in (("best", best), ("pick", chosen))}
    times: dict = {"best": [], "pick": []}
    for _ in range(rounds):
        for name, fn in fns.items():
            times[name].append(median_ms(lambda: fn(*tensors), warmup, reps))
    return statistics.median(times["best"]), statistics.median(times["pick"])


def warm_up(seconds: float = 1.0) -> None:
    """Matmuls for `seconds`: the card leaves its idle clocks before anything is timed."""
    import torch

    x = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        for _ in range(20):
            x @ x
        torch.cuda.synchronize()


def compare(shape, space: dict, warmup: int, reps: int, rounds: int) -> dict:
    """One shape: the pick (first: its first call compiles too), the sweep, and pick /
    best re-timed."""
    import torch

    tensors = inputs(*shape)
    warm_up()
    chosen, seconds, table = pick(space, tensors)
    rows = sweep(space, tensors, warmup, reps)
    timed = [r for r in rows if r["ms"] is not None]
    if not timed:
        raise RuntimeError("no configuration ran in the sweep")
    best = min(timed, key=lambda r: r["ms"])["config"]
    best_ms, pick_ms = confirm(best, chosen, tensors, warmup, reps, rounds) \
        if chosen != best else (None, None)
    m, n, k = shape
    return {"shape": list(shape), "gpu": torch.cuda.get_device_name(), "sweep": rows,
            "best": best, "pick": chosen, "tune_seconds": seconds, "tuner_table": table,
            "best_ms": best_ms, "pick_ms": pick_ms,
            "ratio": 1.0 if chosen == best else pick_ms / best_ms,
            "tflops": 2 * m * n * k / (min(r["ms"] for r in timed) * 1e9)}


def _text(config: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in config.items())


def markdown(results: list[dict], args) -> str:
    """The summary table, then each shape's sweep."""
    out = [f"# Autotune vs sweep: examples/gemm.co on {_gpu(results)}", "",
           f"warmup {args.warmup}, median of {args.reps} calls, L2 flushed before each; pick vs best re-timed "
           f"alternately in {args.rounds} rounds", "",
           "| M x N x K | sweep best | ms | TFLOP/s | pick | pick / best | first call s |",
           "|---|---|---|---|---|---|---|"]
    for r in results:
        shape = " x ".join(map(str, r["shape"]))
        if "error" in r:
            out.append(f"| {shape} | error: {r['error']} | | | | | |")
            continue
        best_ms = min(x["ms"] for x in r["sweep"] if x["ms"] is not None)
        out.append(f"| {shape} | {_text(r['best'])} | {best_ms:.4f} | {r['tflops']:.0f} | "
                   f"{_text(r['pick'])} | {r['ratio']:.3f} | {r['tune_seconds']:.1f} |")
    for r in results:
        if "error" in r:
            continue
        out += ["", f"## {' x '.join(map(str, r['shape']))}", "", "| configuration | ms |",
                "|---|---|"]
        for x in r["sweep"]:
            what = f"{x['ms']:.4f}" if x["ms"] is not None else f"skipped: {x['skipped']}"
            out.append(f"| {_text(x['config'])} | {what} |")
        out += ["", "```text", r["tuner_table"].rstrip(), "```"]
    return "\n".join(out) + "\n"


def _gpu(results: list[dict]) -> str:
    return next((r["gpu"] for r in results if "gpu" in r), "no GPU")


def _one(args) -> int:
    """`--one MxNxK`: one shape in this process; its JSON on stdout's last line."""
    shape = tuple(int(x) for x in args.one.split("x"))
    result = compare(shape, _space(args), args.warmup, args.reps, args.rounds)
    print(json.dumps(result))
    return 0


def _space(args) -> dict:
    if not args.space:
        return SPACE
    return {k: v.split(",") for k, _, v in (s.partition("=") for s in args.space)}


def _run_shape(shape, args, env) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), "--one", "x".join(map(str, shape)),
           "--warmup", str(args.warmup), "--reps", str(args.reps), "--rounds", str(args.rounds)]
    for s in args.space:
        cmd += ["--space", s]
    try:
        got = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=args.timeout)
    except subprocess.TimeoutExpired:
        return {"shape": list(shape), "error": f"no result within {args.timeout} s"}
    if got.returncode != 0 or not got.stdout.strip():
        tail = (got.stderr.strip().splitlines() or ["no output"])[-1]
        return {"shape": list(shape), "error": f"exit {got.returncode}: {tail}"}
    return json.loads(got.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=False, help="the Markdown table (FILE.json beside it)")
    ap.add_argument("--shapes", default=",".join("x".join(map(str, s)) for s in SHAPES))
    ap.add_argument("--space", action="append", default=[], metavar="NAME=V1,V2")
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--reps", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--timeout", type=int, default=400, help="seconds per shape")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        return _one(args)
    with tempfile.TemporaryDirectory(prefix="choreo_autotune_") as cache:
        env = {**os.environ, "CHOREO_PY_CACHE_DIR": cache, "PYTHONPATH": os.pathsep.join(
            p for p in (ROOT, os.environ.get("PYTHONPATH", "")) if p)}
        env.pop("CHOREO_PY_NO_CACHE", None)
        results = [_run_shape(tuple(int(x) for x in s.split("x")), args, env)
                   for s in args.shapes.split(",")]
    text = markdown(results, args)
    print(text, end="")
    if args.out:
        with open(args.out, "w", encoding="utf-8") as fh:
            fh.write(text)
        with open(args.out + ".json", "w", encoding="utf-8") as fh:
            json.dump(results, fh, indent=1)
    return 0 if all("error" not in r and r["ratio"] <= 1.03 for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
