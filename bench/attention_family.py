"""The attention family on an H100/H200 (`python3 bench/attention.py --rows family`):
examples/flash_atten_family.co beside torch SDPA (cuDNN, FA2) where SDPA expresses the
row, and FlashAttention-4 (`--fa4`) where it is installed.

Rows (bf16, BSHD): the seed's own case (causal S=8192, to show what the family's general
masks cost against examples/flash_atten_causal.co), GQA 32/8 heads causal and non-causal
(with its LSE), causal bottom-right Q=1024 KV=4096, a sliding window of 512 keys
(causal, left 512), head dims 64 and 256.

Every implementation's output is checked first against tests/attn_family_ref.py on the
first KV-head group of batch 0 (a relative error over 2e-2 leaves it untimed, logged).
Timing as bench/attention.py's: "graph" (CUDA-graph replay, median) and "events" (per-call
CUDA events, median). TFLOP/s counts the visible (query, key) pairs only:
2 * pairs * (D + D_V) * B * H / time, so a mask's skipped work is not counted as done.
SDPA cannot express a sliding window without a dense mask (another kernel): n/a there.
"""
from __future__ import annotations

import datetime
import os
import sys
from dataclasses import dataclass

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from timing import event_times, graph_times  # noqa: E402

FAMILY = os.path.join(ROOT, "examples", "flash_atten_family.co")
CHECK_TOL = 2e-2


@dataclass(frozen=True)
class Row:
    label: str
    b: int
    h: int
    hkv: int
    sq: int
    skv: int
    d: int = 128
    causal: bool = False
    window: tuple = (-1, -1)
    lse: bool = False
    seed: bool = False  # the seed computes this row too
    block_m: int = 128

    @property
    def defines(self) -> dict:
        out = {"DIM": str(self.d)}
        if self.block_m != 128:
            out["BLOCK_M"] = str(self.block_m)
        if self.causal:
            out["CAUSAL"] = "1"
        if self.window[0] >= 0:
            out["WINDOW_LEFT"] = str(self.window[0])
        if self.window[1] >= 0:
            out["WINDOW_RIGHT"] = str(self.window[1])
        if self.lse:
            out["LSE"] = "1"
        return out


ROWS = [
    Row("causal S=8192 (the seed's case)", 2, 16, 16, 8192, 8192, causal=True, seed=True),
    Row("GQA 32/8 causal S=4096", 2, 32, 8, 4096, 4096, causal=True),
    Row("GQA 32/8 non-causal S=4096, LSE", 2, 32, 8, 4096, 4096, lse=True),
    Row("causal bottom-right Q=1024 KV=4096", 4, 16, 16, 1024, 4096, causal=True),
    Row("window 512 causal S=8192", 2, 16, 16, 8192, 8192, causal=True, window=(512, -1)),
    Row("hdim 64 causal S=4096", 4, 16, 16, 4096, 4096, d=64, causal=True),
    Row("hdim 64 non-causal S=4096", 4, 16, 16, 4096, 4096, d=64),
    Row("hdim 64 causal S=4096, BLOCK_M 192", 4, 16, 16, 4096, 4096, d=64, causal=True,
        block_m=192),
    Row("hdim 64 non-causal S=4096, BLOCK_M 192", 4, 16, 16, 4096, 4096, d=64, block_m=192),
    Row("hdim 256 causal S=4096", 2, 16, 16, 4096, 4096, d=256, causal=True),
    Row("hdim 256 non-causal S=4096", 2, 16, 16, 4096, 4096, d=256),
]


def log(msg: str = "") -> None:
    print(msg, flush=True)


def tensors(r: Row):
    import torch

    g = torch.Generator(device="cuda").manual_seed(0)

    def rnd(s, h):
        return torch.randn(r.b, s, h, r.d, device="cuda", generator=g).to(torch.bfloat16)

    q, k, v = rnd(r.sq, r.h), rnd(r.skv, r.hkv), rnd(r.skv, r.hkv)
    o = torch.empty_like(q)
    lse = torch.empty(r.b, r.h, r.sq, device="cuda") if r.lse else None
    return q, k, v, o, lse


def pairs(r: Row) -> int:
    from attn_family_ref import visible

    return int(visible(r.sq, r.skv, r.causal, r.window, device="cuda").sum())


def check(r: Row, q, k, v, out) -> float:
    """||out - ref|| / ||ref|| on batch 0's first KV-head group (its H / H_KV query heads)."""
    from attn_family_ref import attention

    g = r.h // r.hkv
    ref, _ = attention(q[:1, :, :g], k[:1, :, :1], v[:1, :, :1], r.causal, r.window)
    got = out[:1, :, :g].float()
    return float((got - ref).norm() / ref.norm())


def ours(r: Row, q, k, v, o, lse):
    import choreo_py

    fam = choreo_py.load(FAMILY, target="sm_90a", defines=r.defines)
    impls = [("choreo-py family", (lambda: fam(q, k, v, o, lse)) if r.lse
              else (lambda: fam(q, k, v, o)))]
    if r.seed:
        seed = choreo_py.load(os.path.join(ROOT, "examples", "flash_atten_causal.co"),
                              target="sm_90a")
        impls.append(("choreo-py seed", lambda: seed(q, k, v, o)))
    return impls


def sdpa(r: Row, q, k, v):
    """SDPA through cuDNN and FA2 where the row has an SDPA form (no window)."""
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    if r.window != (-1, -1):
        return []
    qt, kt, vt = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
    kw: dict = {}
    if r.causal and r.sq != r.skv:
        from torch.nn.attention.bias import causal_lower_right

        kw["attn_mask"] = causal_lower_right(r.sq, r.skv)
    elif r.causal:
        kw["is_causal"] = True
    if r.h != r.hkv:
        kw["enable_gqa"] = True

    def run(backend):
        def fn():  # (BHSD out: the check reads its BSHD view; timing copies nothing)
            with sdpa_kernel(backend):
                return F.scaled_dot_product_attention(qt, kt, vt, **kw).transpose(1, 2)
        return fn

    return [("cuDNN", run(SDPBackend.CUDNN_ATTENTION)),
            ("FA2 (SDPA flash)", run(SDPBackend.FLASH_ATTENTION))]


def fa4(r: Row, q, k, v):
    """FlashAttention-4's forward (flash_attn.cute), None for an unbounded window side."""
    from flash_attn.cute import flash_attn_func

    left, right = r.window
    win = (None if left < 0 else left, 0 if r.causal else (None if right < 0 else right))

    def fn():
        got = flash_attn_func(q, k, v, causal=r.causal, window_size=win)
        return got[0] if isinstance(got, tuple) else got
    return [("flash-attn-4", fn)]


def time_row(r: Row, use_fa4: bool) -> dict:
    import torch

    q, k, v, o, lse = tensors(r)
    flops = 2 * pairs(r) * (r.d + r.d) * r.b * r.h
    impls = ours(r, q, k, v, o, lse) + sdpa(r, q, k, v)
    if use_fa4:
        try:
            impls += fa4(r, q, k, v)
        except Exception as err:  # noqa: BLE001 - report and carry on
            log(f"  flash-attn-4: not available: {err!r}"[:300])
    calls = 10 if r.sq * r.skv >= 4096 * 4096 else 40
    row: dict = {}
    for label, fn in impls:
        try:
            o.fill_(float("nan"))
            got = fn()  # ours write o; the others return their output
            torch.cuda.synchronize()
            err = check(r, q, k, v, o if got is None else got)
            log(f"  {label:18s} rel. error {err:.2e}")
            if not err < CHECK_TOL:
                row[label] = {"error": err}
                continue
            row[label] = {"error": err,
                          "graph": flops / graph_times(fn, calls)[5] / 1e9,
                          "events": flops / event_times(fn, 10, 50)[25] / 1e9}
            log(f"  {label:18s} graph {row[label]['graph']:.1f} / events "
                f"{row[label]['events']:.1f} TFLOP/s")
        except Exception as err:  # noqa: BLE001 - report and carry on
            row[label] = {"failed": f"{err!r}"[:200]}
            log(f"  {label:18s} ERROR {err!r}"[:300])
    del q, k, v, o, lse
    torch.cuda.empty_cache()
    return row


def cell(c) -> str:
    if not c:
        return "n/a"
    if "failed" in c:
        return "failed"
    if "graph" not in c:
        return f"wrong ({c['error']:.1e})"
    return f"{c['graph']:.1f} / {c['events']:.1f}"


def write(path: str, results: list, command: str) -> None:
    import torch

    labels = ["choreo-py family", "choreo-py seed", "cuDNN", "FA2 (SDPA flash)", "flash-attn-4"]
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = ["# The attention family on the GPU: examples/flash_atten_family.co", "",
             f"- GPU: {torch.cuda.get_device_name()}; torch {torch.__version__}; {date}",
             f"- command: `{command}`",
             "- TFLOP/s of the visible (query, key) pairs, graph / events (bench/attention_family.py)",
             "", "| row | " + " | ".join(labels) + " |", "|---|" + "---|" * len(labels)]
    for r, row in results:
        lines.append(f"| {r.label} | " + " | ".join(cell(row.get(x)) for x in labels) + " |")
    lines.append("")
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("\n".join(lines))
    log("\n".join(lines))


def run(out: str, use_fa4: bool, only: str, command: str) -> None:
    """Times every row (those whose label holds one of `only`'s comma-separated strings)."""
    results = []
    for r in ROWS:
        if only and not any(x in r.label for x in only.split(",")):
            continue
        log(f"[family] {r.label}")
        results.append((r, time_row(r, use_fa4)))
    write(out, results, command)


# --- decode over a paged KV cache (examples/flash_atten_decode.co; bench/attention_decode.py
# times these rows: `python3 bench/attention_decode.py [--fa4]`). bf16, H = 32, H_KV = 8,
# D = 128; `lens` "mixed": batch i holds kv - i * kv // (2 * b) keys (partial last pages).
@dataclass(frozen=True)
class DecodeRow:
    label: str
    b: int
    kv: int
    page: int = 64
    qlen: int = 1
    mixed: bool = False
    h: int = 32
    hkv: int = 8
    d: int = 128


DECODE_ROWS = [
    DecodeRow("decode B=1 KV=128k", 1, 131072),
    DecodeRow("decode B=1 KV=32k", 1, 32768),
    DecodeRow("decode B=8 KV=32k", 8, 32768),
    DecodeRow("decode B=16 KV=16k mixed", 16, 16384, mixed=True),
    DecodeRow("decode B=64 KV=4k", 64, 4096),
    DecodeRow("decode B=64 KV=8k mixed", 64, 8192, mixed=True),
    DecodeRow("decode B=32 KV=8k Q=4", 32, 8192, qlen=4),
    DecodeRow("decode B=8 KV=32k page 16", 8, 32768, page=16),
    DecodeRow("decode B=8 KV=32k page 256", 8, 32768, page=256),
]
