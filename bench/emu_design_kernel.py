"""Calibration 2: the seed's hand-written Blackwell kernel in the emulator, against SDPA.

    python bench/emu_design_kernel.py [--cases default|all]

The kernel is pyptx's 1-CTA FlashAttention builder restored from the seed
(bench/reference/pyptx_fa_blackwell.py; needs ../shared or $CHOREO_SHARED),
traced with the installed pyptx to PTX for sm_100a and run through
`emulate_ptx` with its own launch facts (grid, block, shared bytes; its
tensor-map pointer parameters bound to tensor maps of the 2-D (B*H*S, 128)
tensors). Non-causal, bf16, B*H = 1; q and k scaled by 0.5 as in the kernel's
own GPU test; rel = ||O - SDPA|| / ||SDPA|| in float32.

The builder's defaults read tcgen05.ld registers without tcgen05.wait::ld
(`dbg_scoreboard_ld`, the hardware's register scoreboard orders them), which
strict mode reports: the strict cases use the builder's own
`dbg_scoreboard_ld=False` (explicit waits); the relaxed cases use the
defaults. Each line: S, options, schedule, mode, rel, warp instructions,
seconds, and what relaxed mode let pass. Exit status 1 if a case fails
(rel >= 1e-2, or an emulator report where none is expected, or none where one is).
"""
from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench" / "reference"))

import torch  # noqa: E402

import pyptx_fa_blackwell  # noqa: E402
from choreo_py.emu import EmuStats, emulate_ptx  # noqa: E402
from choreo_py.emu.report import EmuError  # noqa: E402

TOLERANCE = 1e-2
STRICT_OPTIONS = {"dbg_scoreboard_ld": False}
# (S, options, schedule, strict, seed, expected): the default cases are what
# tests/test_emu_design_kernel.py runs. The seed picks the inputs and the random
# schedule; "report": the emulator must report the run (a two-phases-behind waiter).
DEFAULT_CASES = [
    (256, STRICT_OPTIONS, "round_robin", True, 0, "ok"),
    (256, STRICT_OPTIONS, "random", True, 0, "ok"),
    (256, STRICT_OPTIONS, "greedy", True, 0, "ok"),
    (512, STRICT_OPTIONS, "random", True, 0, "report"),
    (512, STRICT_OPTIONS, "random", False, 0, "ok"),
    (512, {}, "random", False, 1, "ok"),
]
MORE_CASES = [
    (256, {}, "round_robin", True, 0, "report"),   # reads tcgen05.ld registers before wait::ld
    (256, {}, "round_robin", False, 0, "ok"),
    (512, STRICT_OPTIONS, "round_robin", True, 0, "ok"),
    (512, STRICT_OPTIONS, "reverse", True, 0, "ok"),
    (512, {}, "random", False, 0, "ok"),
    (256, {"emu_pairs": (), **STRICT_OPTIONS}, "round_robin", True, 0, "ok"),
]


@dataclass
class Result:
    rel: float = float("nan")
    instructions: int = 0
    seconds: float = 0.0
    notes: list = field(default_factory=list)
    error: str = ""


_MODULE = []


def builder():
    if not _MODULE:
        _MODULE.append(pyptx_fa_blackwell.load())
    return _MODULE[0].build_flash_attention_blackwell


def design_launch(seqlen: int, batch_heads: int = 1, **options):
    """(ptx, launch description) of the builder for one shape."""
    k = builder()(seqlen, batch_heads, **options)
    rows = batch_heads * seqlen
    params = [{"name": n, "ptr": n} for n in "QKVO"]
    for name, spec in zip("QKV", k.in_specs):
        params.append({"name": f"{name}_tma_desc", "tmap": name,
                       "box": list(reversed(spec.tma_box)), "swizzle": 128})
    launch = {"grid": list(k.grid), "block": list(k.block), "shared_bytes": int(k.smem),
              "params": params,
              "tensors": {n: {"dtype": "bf16", "shape": [rows, 128]} for n in "QKVO"}}
    return k.ptx(), launch


def inputs(seqlen: int, batch_heads: int = 1, seed: int = 0) -> dict:
    g = torch.Generator().manual_seed(seed)
    shape = (batch_heads * seqlen, 128)
    q, k = ((torch.randn(shape, generator=g) * 0.5).bfloat16() for _ in range(2))
    v = torch.randn(shape, generator=g).bfloat16()
    return {"Q": q, "K": k, "V": v, "O": torch.zeros(shape, dtype=torch.bfloat16)}


def sdpa_rel(t: dict, seqlen: int, batch_heads: int = 1) -> float:
    view = lambda x: x.float().view(1, batch_heads, seqlen, 128)  # noqa: E731
    ref = torch.nn.functional.scaled_dot_product_attention(view(t["Q"]), view(t["K"]), view(t["V"]))
    out = view(t["O"])
    return float((out - ref).norm() / ref.norm())


def run_case(seqlen: int, options: dict, schedule: str, strict: bool, seed: int = 0) -> Result:
    ptx, launch = design_launch(seqlen, **options)
    t = inputs(seqlen, seed=seed)
    stats = EmuStats()
    res = Result()
    start = time.perf_counter()
    try:
        emulate_ptx(ptx, launch, t, schedule=schedule, seed=seed, strict=strict, stats=stats,
                    ptx_name="flash_attention_blackwell.ptx")
        res.rel = sdpa_rel(t, seqlen)
    except EmuError as err:
        res.error = err.render().split("\n")[0]
    res.seconds = time.perf_counter() - start
    res.instructions, res.notes = stats.instructions, stats.notes
    return res


def _summary(notes: list) -> str:
    kinds = {}
    for n in notes:
        key = "ld before wait::ld" if "tcgen05.wait::ld" in n else (
            "waiter 2+ phases behind" if "phases behind" in n else n.split(": ", 1)[-1][:40])
        kinds[key] = kinds.get(key, 0) + 1
    return ", ".join(f"{k} x{v}" for k, v in kinds.items()) or "-"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", choices=("default", "all"), default="default")
    args = ap.parse_args(argv)
    try:
        builder()
    except pyptx_fa_blackwell.SeedError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    cases = DEFAULT_CASES + (MORE_CASES if args.cases == "all" else [])
    failed = 0
    print("| S | options | schedule | mode | rel | warp instructions | seconds | relaxed notes |")
    print("|---|---|---|---|---|---|---|---|")
    for s, options, schedule, strict, seed, expected in cases:
        r = run_case(s, options, schedule, strict, seed)
        opts = ", ".join(f"{k}={v}" for k, v in options.items()) or "defaults"
        mode = "strict" if strict else "relaxed"
        rel = f"{r.rel:.5f}" if not r.error else f"reported: {r.error[:120]}"
        print(f"| {s} | {opts} | {schedule} (seed {seed}) | {mode} | {rel} | "
              f"{r.instructions or '-'} | {r.seconds:.2f} | {_summary(r.notes)} |", flush=True)
        ok = bool(r.error) if expected == "report" else (not r.error and r.rel < TOLERANCE)
        failed += not ok
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
