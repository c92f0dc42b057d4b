"""Measurements that calibrate the performance model (bench/model.py, bench/MODEL.md).

    python3 bench/model_measure.py --out $OUT/measure.json     # on an H200
    python3 bench/model_measure.py --dry-run                   # no GPU: compile and check shapes

On the H200 it times, in one process and one device run:
- the causal seed (examples/flash_atten_causal.co) and the persistent example
  (examples/flash_atten_persistent.co) at the four causal rows of bench/RESULTS.md
  (B=2 H=16 S=8192, B=1 S=4096, B=4 S=2048, B=8 S=1024), plus the diagnostic row
  B=64 H=16 S=128 (every query tile one K/V step: the fixed cost per CTA);
- the non-causal example (examples/flash_atten.co) at B=2 H=16 S=8192;
- the GEMM (examples/gemm.co) at M=N=8192, K=4096 (4096 output tiles, 31 waves).
bf16, D=128, BSHD. Each output is first checked against float32 torch (a subset of heads
for attention, every element for the GEMM); a kernel that fails the check is not timed.

Timing is bench/timing.py's, as bench/attention.py uses it: "graph" = 10 (S >= 4096, and
the GEMM) or 40 calls captured in one CUDA graph, replayed 10 times, median per call; two
rounds (r1, r2) interleaved over the kernels after a 2 s matmul warm-up; "burst" = after
1.5 s idle, 10 warm-up + 50 timed calls with CUDA events, median. The SM and memory clocks,
power and throttle reasons are sampled by `nvidia-smi -lms 100` during the whole run; each
timing carries the samples that fell inside it (median SM clock), because the model's
rates are per clock and the card is power-capped on the long rows.

The JSON written to --out: {"gpu", "sm_count", "driver", "torch", "date", "clocks_max",
"rows": [{"kernel", "source", "shape", "flops", "check", "ms" (graph r1 median),
"tflops", "times": {method: {"ms", "tflops", "samples_ms", "clocks"}}}]}.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

D = 128
ATTN_ROWS = [(2, 16, 8192, True), (1, 16, 4096, True), (4, 16, 2048, True), (8, 16, 1024, True)]
DIAG_ROWS = [(64, 16, 128, True)]
NONCAUSAL_ROWS = [(2, 16, 8192, False)]
GEMM_SHAPES = [(8192, 8192, 4096)]
KERNELS = {"seed": "flash_atten_causal", "persistent": "flash_atten_persistent",
           "noncausal": "flash_atten", "gemm": "gemm"}
TOL = 1e-2
DEVICE = "cuda"  # a smoke test on the CPU replaces it (tests/test_model.py)
METHODS = ("graph_r1", "graph_r2", "sustained", "burst")
SUSTAINED_S = 1.0  # "sustained": graph replays for about this long, so the clock samples (10 Hz) settle


def log(msg: str = "") -> None:
    print(msg, flush=True)


def cases() -> list[dict]:
    """Every (kernel, shape) the run times, in order."""
    out = []
    for b, h, s, causal in ATTN_ROWS + DIAG_ROWS:
        for k in ("seed", "persistent"):
            out.append({"kernel": k, "shape": {"B": b, "H": h, "S": s, "D": D, "causal": causal},
                        "diagnostic": (b, h, s, causal) in DIAG_ROWS})
    for b, h, s, causal in NONCAUSAL_ROWS:
        out.append({"kernel": "noncausal",
                    "shape": {"B": b, "H": h, "S": s, "D": D, "causal": causal},
                    "diagnostic": False})
    for m, n, k in GEMM_SHAPES:
        out.append({"kernel": "gemm", "shape": {"M": m, "N": n, "K": k}, "diagnostic": False})
        # the machine's own GEMM on the same tensors: what the tensor pipe gives at this clock
        out.append({"kernel": "cublas", "shape": {"M": m, "N": n, "K": k}, "diagnostic": True})
    return out


def flops(case: dict) -> float:
    sh = case["shape"]
    if case["kernel"] in ("gemm", "cublas"):
        return 2.0 * sh["M"] * sh["N"] * sh["K"]
    return 4.0 * sh["B"] * sh["H"] * sh["S"] ** 2 * sh["D"] / (2 if sh["causal"] else 1)


def dims_of(case: dict) -> dict:
    """The program's symbolic dimensions for this case (names of the .co parameters)."""
    sh = case["shape"]
    if case["kernel"] in ("gemm", "cublas"):
        return {"M": sh["M"], "N": sh["N"], "K": sh["K"]}
    return {"B": sh["B"], "H": sh["H"], "Q_SEQ": sh["S"], "KV_SEQ": sh["S"]}


def label(case: dict) -> str:
    sh = case["shape"]
    if case["kernel"] in ("gemm", "cublas"):
        return f"{case['kernel']} M={sh['M']} N={sh['N']} K={sh['K']}"
    c = "causal" if sh["causal"] else "non-causal"
    return f"{case['kernel']} B={sh['B']} H={sh['H']} S={sh['S']} {c}"


_LOADED: dict = {}


def kernel(name: str):
    import choreo_py

    if name not in _LOADED:
        path = os.path.join(ROOT, "examples", f"{KERNELS[name]}.co")
        _LOADED[name] = choreo_py.load(path, target="sm_90a")
    return _LOADED[name]


# ------------------------------------------------------------------ dry run (no GPU)

def dry_run() -> int:
    """Compiles every kernel for sm_90a (ptxas included) and checks that the program
    accepts every shape: its size assertions and its grid, as a launch would."""
    bad = 0
    for name in KERNELS:
        t0 = time.time()
        fn = kernel(name)
        res = fn.resources
        log(f"[compile] {name}: {fn.name}, {len(fn.ptx)} chars of PTX, {res} "
            f"({time.time() - t0:.1f} s)")
    for case in cases():
        if case["kernel"] not in KERNELS:
            continue
        fn = kernel(case["kernel"])
        dims = dims_of(case)
        try:
            fn.check_assertions(dims)
            grid = tuple(int(g) for g in fn.meta.grid(**dims))
            log(f"[shape] {label(case)}: accepted, grid {grid}, {fn.meta.THREADS} threads")
        except Exception as err:  # noqa: BLE001 - report every refused shape
            bad += 1
            log(f"[shape] {label(case)}: REFUSED {err}")
    return 1 if bad else 0


# ------------------------------------------------------------------ clocks

class ClockSampler:
    """`nvidia-smi -lms 100` in the background: (time, SM MHz, memory MHz, W, deg C, reasons).
    A field this driver does not know drops out of the query; an [N/A] reads as None."""

    FIELDS = ["clocks.sm", "clocks.mem", "power.draw", "temperature.gpu",
              "clocks_throttle_reasons.active"]

    def __init__(self) -> None:
        self.samples: list = []
        self.proc = None
        fields = self._fields_that_work()
        if not fields:
            return
        self.fields = fields
        self.proc = subprocess.Popen(
            ["nvidia-smi", f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits",
             "-lms", "100"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        threading.Thread(target=self._read, daemon=True).start()

    def _fields_that_work(self) -> list:
        for fields in (self.FIELDS, self.FIELDS[:4], self.FIELDS[:1]):
            try:
                res = subprocess.run(["nvidia-smi", f"--query-gpu={','.join(fields)}",
                                      "--format=csv,noheader,nounits"],
                                     capture_output=True, text=True, timeout=20)
            except (OSError, subprocess.SubprocessError):
                return []
            if res.returncode == 0 and res.stdout.strip():
                return fields
        return []

    @staticmethod
    def _num(text: str):
        try:
            return float(text)
        except ValueError:
            return None

    def _read(self) -> None:
        for line in self.proc.stdout:
            parts = [p.strip() for p in line.strip().split(",")]
            if len(parts) != len(self.fields):
                continue
            rec = dict(zip(self.fields, parts))
            self.samples.append((time.time(), self._num(rec["clocks.sm"]),
                                 self._num(rec.get("clocks.mem", "")),
                                 self._num(rec.get("power.draw", "")),
                                 self._num(rec.get("temperature.gpu", "")),
                                 rec.get("clocks_throttle_reasons.active", "")))

    def window(self, t0: float, t1: float) -> dict:
        """The samples taken between t0 and t1 (or the nearest one), summarised."""
        samples = [s for s in list(self.samples) if s[1] is not None]
        inside = [s for s in samples if t0 <= s[0] <= t1]
        if not inside:  # a window shorter than the sampling period: the nearest sample
            inside = sorted(samples, key=lambda s: abs(s[0] - (t0 + t1) / 2))[:1]
        if not inside:
            return {}

        def med(i):
            xs = sorted(s[i] for s in inside if s[i] is not None)
            return xs[len(xs) // 2] if xs else None
        sm = [s[1] for s in inside]
        return {"n": len(inside), "sm_mhz": med(1), "sm_mhz_min": min(sm), "sm_mhz_max": max(sm),
                "mem_mhz": med(2), "power_w": med(3), "temp_c": med(4),
                "throttle": sorted({s[5] for s in inside})}

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()


def smi(query: str) -> str:
    try:
        return subprocess.run(["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=20).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


# ------------------------------------------------------------------ inputs and checks

def attention_ref_heads(q, k, v, causal: bool, heads: list[int]):
    """softmax(q k^T / sqrt(d) [causal]) v in float32 for the given heads, [B, S, h, D]."""
    import math

    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    s_len = q.shape[1]
    outs = []
    for hd in heads:
        qh, kh, vh = (x[:, :, hd].float() for x in (q, k, v))  # [B, S, D]
        s = (qh @ kh.transpose(-1, -2)) / math.sqrt(q.shape[-1])
        if causal:
            mask = torch.ones(s_len, s_len, device=q.device, dtype=torch.bool).tril()
            s = s.masked_fill(~mask, float("-inf"))
        outs.append(torch.softmax(s, dim=-1) @ vh)
        del s
    return torch.stack(outs, dim=2)


def rel_err(out, ref) -> float:
    import torch

    if bool(torch.isnan(out).any()):
        return float("nan")
    return float((out.float() - ref).norm() / ref.norm())


def make_inputs(case: dict):
    """(tensors, check) for a case; check(fn) runs the kernel once on a NaN-filled
    output and returns the relative error against float32 torch (NaN: unwritten)."""
    import torch

    sh = case["shape"]
    g = torch.Generator(device=DEVICE).manual_seed(1234)
    if case["kernel"] in ("gemm", "cublas"):
        a = torch.randn(sh["M"], sh["K"], device=DEVICE, dtype=torch.bfloat16, generator=g)
        bt = torch.randn(sh["N"], sh["K"], device=DEVICE, dtype=torch.bfloat16, generator=g)
        c = torch.empty(sh["M"], sh["N"], device=DEVICE, dtype=torch.bfloat16)

        def check_gemm(fn):
            c.fill_(float("nan"))
            fn()
            torch.cuda.synchronize()
            torch.backends.cuda.matmul.allow_tf32 = False
            return rel_err(c, a.float() @ bt.float().T)
        return (a, bt, c), check_gemm
    b, h, s = sh["B"], sh["H"], sh["S"]
    q, k, v = (torch.randn(b, s, h, D, device=DEVICE, dtype=torch.bfloat16, generator=g)
               for _ in range(3))
    o = torch.empty_like(q)
    heads = sorted({0, h // 2, h - 1})

    def check_attn(fn):
        o.fill_(float("nan"))
        fn()
        torch.cuda.synchronize()
        if bool(torch.isnan(o).any()):  # every element must be written
            return float("nan")
        return rel_err(o[:, :, heads], attention_ref_heads(q, k, v, sh["causal"], heads))
    return (q, k, v, o), check_attn


# ------------------------------------------------------------------ timing

def warm_up(seconds: float = 2.0) -> None:
    import torch

    w = torch.randn(8192, 8192, device=DEVICE, dtype=torch.bfloat16)
    t0 = time.time()
    while time.time() - t0 < seconds:
        for _ in range(20):
            torch.matmul(w, w)
        torch.cuda.synchronize()


def time_method(method: str, fn, case: dict, row: dict) -> list[float]:
    import torch

    from timing import event_times, graph_times

    big = case["kernel"] in ("gemm", "cublas") or case["shape"].get("S", 0) >= 4096
    calls = 10 if big else 40
    if method.startswith("graph"):
        return graph_times(fn, calls, 10)
    if method == "sustained":
        est = row["times"]["graph_r1"]["ms"] * calls / 1e3  # seconds per replay
        return graph_times(fn, calls, max(10, min(2000, int(SUSTAINED_S / est))))
    torch.cuda.synchronize()
    time.sleep(1.5)
    return event_times(fn, 10, 50)


def measure(args) -> dict:
    import torch

    sampler = ClockSampler()
    props = torch.cuda.get_device_properties(0)
    report = {"gpu": torch.cuda.get_device_name(), "sm_count": props.multi_processor_count,
              "driver": smi("driver_version"), "torch": torch.__version__,
              "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
              "clocks_max": smi("clocks.max.sm,clocks.max.mem,power.limit"),
              "command": "python3 bench/model_measure.py " + " ".join(sys.argv[1:]),
              "methods": "graph_r1/graph_r2: CUDA-graph replay median (bench/timing.py), 10 "
                         "replays; sustained: the same graph replayed for about 1 s (the clock "
                         "the model is calibrated at); burst: 1.5 s idle, 10 + 50 calls, CUDA "
                         "events, median",
              "rows": []}
    todo = [c for c in cases() if not args.only or any(x in label(c) for x in args.only.split(","))]
    ready = []
    for case in todo:
        t0 = time.time()
        tensors, check = make_inputs(case)
        if case["kernel"] == "cublas":
            a, bt, c = tensors
            fn = (lambda a=a, bt=bt, c=c: torch.matmul(a, bt.t(), out=c))
        else:
            fn = (lambda f=kernel(case["kernel"]), t=tensors: f(*t))
        try:
            err, error = check(fn), None
        except Exception as exc:  # noqa: BLE001 - a failing kernel is reported, the run goes on
            err, error = float("nan"), repr(exc)[:300]
        ok = err == err and err < TOL
        name = KERNELS.get(case["kernel"])
        row = {"kernel": f"{name}.co" if name else "torch.matmul",
               "source": f"examples/{name}.co" if name else "cuBLAS (torch.matmul)",
               "role": case["kernel"], "label": label(case), "shape": case["shape"],
               "diagnostic": case["diagnostic"], "flops": flops(case),
               "check": {"rel_err": err, "ok": ok, "tol": TOL, "error": error}, "times": {}}
        log(f"[check] {label(case)}: rel. error {err:.3e} {'PASS' if ok else 'FAIL'} "
            f"({time.time() - t0:.1f} s){' ' + error if error else ''}")
        report["rows"].append(row)
        if ok:
            ready.append((case, fn, row, tensors))
        else:
            del tensors
    save(report, args.out)
    warm_up()
    for method in METHODS:
        for case, fn, row, _ in ready:
            t0 = time.time()
            try:
                ts = time_method(method, fn, case, row)
            except Exception as exc:  # noqa: BLE001 - keep the other timings
                row["times"][method] = {"error": repr(exc)[:300]}
                log(f"[{method}] {row['label']}: ERROR {exc!r}"[:300])
                continue
            t1 = time.time()
            ms = ts[len(ts) // 2]
            row["times"][method] = {"ms": ms, "tflops": row["flops"] / ms / 1e9,
                                    "samples_ms": ts if len(ts) <= 60 else None,
                                    "n": len(ts), "min_ms": ts[0], "max_ms": ts[-1],
                                    "clocks": sampler.window(t0, t1)}
            log(f"[{method}] {row['label']}: {ms:.4f} ms {row['flops'] / ms / 1e9:.1f} TFLOP/s "
                f"clocks {row['times'][method]['clocks'].get('sm_mhz')} MHz")
        save(report, args.out)  # a run cut short keeps what it measured
    for row in report["rows"]:
        r1 = row["times"].get("graph_r1") or {}
        row["ms"], row["tflops"] = r1.get("ms"), r1.get("tflops")
    sampler.stop()
    return report


def save(report: dict, path: str) -> None:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(report, fh, indent=1)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", help="where to write the JSON (required unless --dry-run)")
    ap.add_argument("--dry-run", action="store_true",
                    help="no GPU: compile every kernel for sm_90a (ptxas too) and check the shapes")
    ap.add_argument("--only", default="",
                    help="comma-separated substrings of the case labels to run (e.g. 'gemm,S=1024')")
    args = ap.parse_args()
    if args.dry_run:
        return dry_run()
    if not args.out:
        ap.error("--out PATH is required (or --dry-run)")
    import torch

    if not torch.cuda.is_available():
        ap.error("no CUDA device: the timings need the H200 (--dry-run compiles without one)")
    t0 = time.time()
    report = measure(args)
    report["wall_s"] = time.time() - t0
    save(report, args.out)
    log(f"[done] {len(report['rows'])} rows in {report['wall_s']:.0f} s -> {args.out}")
    failed = [r["label"] for r in report["rows"] if not r["check"]["ok"]]
    if failed:
        log("[FAILED checks] " + "; ".join(failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
