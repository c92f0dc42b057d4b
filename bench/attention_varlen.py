"""Variable-length (packed THD) attention on an H100/H200 (`python3 bench/attention.py
--rows varlen [--fa4]`): examples/flash_atten_varlen.co beside FlashAttention-4's
flash_attn_varlen_func (flash_attn.cute, where it imports) and torch SDPA called once per
sequence (its flash and cuDNN backends: what a model without a varlen kernel does).

Rows (bf16, H = 32 query heads over 8 KV heads unless named, D = 128): batches of mixed
lengths between 1k and 8k tokens drawn from a fixed seed (the sequences listed in the
results), causal (bottom right per sequence) and not, with the LSE, with key lengths that
differ from the query lengths, with seqused_k, and head dim 64.

Every implementation's output is checked first against tests/attn_varlen_ref.py on the
first KV-head group (its H / H_KV query heads) of every sequence; a relative error over
2e-2 leaves it untimed, logged. Timing as bench/attention.py's: "graph" (CUDA-graph
replay, median) and "events" (per-call CUDA events, median). TFLOP/s counts the visible
(query, key) pairs only: 2 * pairs * (D + D) * H / time. `plan()` (no GPU) lists the rows
with their lengths and pairs: `python3 bench/attention_varlen.py` prints it.
"""
from __future__ import annotations

import datetime
import inspect
import os
import sys
from dataclasses import dataclass

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

VARLEN = os.path.join(ROOT, "examples", "flash_atten_varlen.co")
CHECK_TOL = 2e-2
LABELS = ["choreo-py varlen", "flash-attn-4 varlen", "SDPA flash per seq", "SDPA cuDNN per seq"]


def lengths(n: int, seed: int, lo: int = 1024, hi: int = 8192) -> tuple:
    """`n` sequence lengths in [lo, hi], drawn from `seed` (the same on every machine)."""
    import torch

    g = torch.Generator().manual_seed(seed)
    return tuple(int(x) for x in torch.randint(lo, hi + 1, (n,), generator=g))


@dataclass(frozen=True)
class Row:
    label: str
    lq: tuple
    lk: tuple = ()  # () : the query lengths
    h: int = 32
    hkv: int = 8
    d: int = 128
    causal: bool = False
    lse: bool = False
    used: tuple = ()  # seqused_k (() : none)

    @property
    def keys(self) -> tuple:
        return self.lk or self.lq

    @property
    def defines(self) -> dict:
        out = {"DIM": str(self.d), "CAUSAL": "1" if self.causal else "0",
               "LSE": "1" if self.lse else "0"}
        if self.used:
            out["SEQUSED_K"] = "1"
        return out

    def seen(self) -> tuple:
        """The keys each sequence's queries read: seqused_k where given."""
        return self.used or self.keys


_MIXED = lengths(8, 1)
VARLEN_ROWS = [
    Row("8 seqs 1k-8k non-causal", _MIXED),
    Row("8 seqs 1k-8k causal", _MIXED, causal=True),
    Row("8 seqs 1k-8k causal, LSE", _MIXED, causal=True, lse=True),
    Row("16 seqs 1k-8k causal", lengths(16, 2), causal=True),
    Row("8 seqs, keys 1k-8k apart, causal", _MIXED, lk=lengths(8, 3), causal=True),
    Row("8 seqs causal, seqused_k", _MIXED, causal=True,
        used=tuple(max(1, n - n // 4) for n in _MIXED)),
    Row("8 seqs 1k-8k causal, hdim 64", _MIXED, d=64, causal=True),
]


def log(msg: str = "") -> None:
    print(msg, flush=True)


def pairs(r: Row) -> int:
    """Visible (query, key) pairs over the sequences (bottom-right causal per sequence)."""
    total = 0
    for nq, nk in zip(r.lq, r.seen()):
        if not r.causal:
            total += nq * nk
            continue
        # query i sees min(max(i + nk - nq + 1, 0), nk) keys
        for i in range(nq):
            total += min(max(i + nk - nq + 1, 0), nk)
    return total


def plan() -> list[str]:
    """One line a row: its label, defines, lengths and pairs (needs no GPU)."""
    out = []
    for r in VARLEN_ROWS:
        out.append(f"{r.label}: {r.defines}, q {list(r.lq)}, k {list(r.keys)}"
                   + (f", seqused_k {list(r.used)}" if r.used else "")
                   + f", {pairs(r)} visible pairs")
    return out


def tensors(r: Row):
    import torch

    from attn_varlen_ref import cu_seqlens

    g = torch.Generator(device="cuda").manual_seed(0)

    def rnd(n, h):
        return torch.randn(n, h, r.d, device="cuda", generator=g).to(torch.bfloat16)

    tq, tk = sum(r.lq), sum(r.keys)
    t = {"q": rnd(tq, r.h), "k": rnd(tk, r.hkv), "v": rnd(tk, r.hkv),
         "cu_q": cu_seqlens(list(r.lq), "cuda"), "cu_k": cu_seqlens(list(r.keys), "cuda"),
         "used": torch.tensor(r.used, dtype=torch.int32, device="cuda") if r.used else None}
    t["o"] = torch.empty_like(t["q"])
    t["lse"] = torch.empty(r.h, tq, device="cuda") if r.lse else None
    return t


def check(r: Row, t: dict, out) -> float:
    """||out - ref|| / ||ref|| over every sequence's first KV-head group."""
    from attn_varlen_ref import varlen_attention

    g = r.h // r.hkv
    ref, _ = varlen_attention(t["q"][:, :g], t["k"][:, :1], t["v"][:, :1], t["cu_q"],
                              t["cu_k"], r.causal, t["used"])
    got = out[:, :g].float()
    return float((got - ref).norm() / ref.norm())


def ours(r: Row, t: dict):
    import choreo_py

    fn = choreo_py.load(VARLEN, target="sm_90a", defines=r.defines)
    args = [t["q"], t["k"], t["v"], t["cu_q"], t["cu_k"]]
    if r.used:
        args.append(t["used"])
    args.append(t["o"])
    if r.lse:
        args.append(t["lse"])
    return [("choreo-py varlen", lambda: fn(*args))]


def fa4(r: Row, t: dict):
    """FlashAttention-4's flash_attn_varlen_func, by keyword (its max_seqlen_* and
    return_lse where the installed version takes them)."""
    from flash_attn.cute import flash_attn_varlen_func

    kw = {"cu_seqlens_q": t["cu_q"], "cu_seqlens_k": t["cu_k"], "causal": r.causal}
    params = inspect.signature(flash_attn_varlen_func).parameters
    if r.used:
        kw["seqused_k"] = t["used"]
    if "max_seqlen_q" in params:
        kw["max_seqlen_q"] = max(r.lq)
    if "max_seqlen_k" in params:
        kw["max_seqlen_k"] = max(r.keys)
    if r.lse and "return_lse" in params:  # (a row with the LSE: FA4 computes it too)
        kw["return_lse"] = True

    def fn():
        got = flash_attn_varlen_func(t["q"], t["k"], t["v"], **kw)
        return got[0] if isinstance(got, tuple) else got
    return [("flash-attn-4 varlen", fn)]


def sdpa_per_sequence(r: Row, t: dict):
    """SDPA once per sequence on its slices (BHSD views), through one backend each; the
    outputs are written into one packed tensor (part of the time: a model does it too)."""
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.attention.bias import causal_lower_right

    cq, ck = [0], [0]
    for nq, nk in zip(r.lq, r.keys):
        cq.append(cq[-1] + nq)
        ck.append(ck[-1] + nk)
    seqs = []
    for b, (nq, nk) in enumerate(zip(r.lq, r.seen())):
        q = t["q"][cq[b]:cq[b + 1]].transpose(0, 1)[None]
        k = t["k"][ck[b]:ck[b] + nk].transpose(0, 1)[None]
        v = t["v"][ck[b]:ck[b] + nk].transpose(0, 1)[None]
        kw: dict = {"enable_gqa": r.h != r.hkv}
        if r.causal and nq != nk:
            kw["attn_mask"] = causal_lower_right(nq, nk)
        elif r.causal:
            kw["is_causal"] = True
        seqs.append((b, q, k, v, kw))
    out = torch.empty_like(t["q"])

    def run(backend):
        def fn():
            with sdpa_kernel(backend):
                for b, q, k, v, kw in seqs:
                    o = F.scaled_dot_product_attention(q, k, v, **kw)
                    out[cq[b]:cq[b + 1]].copy_(o[0].transpose(0, 1))
            return out
        return fn

    return [("SDPA flash per seq", run(SDPBackend.FLASH_ATTENTION)),
            ("SDPA cuDNN per seq", run(SDPBackend.CUDNN_ATTENTION))]


def time_row(r: Row, use_fa4: bool) -> dict:
    import torch

    from timing import event_times, graph_times

    t = tensors(r)
    flops = 2 * pairs(r) * (r.d + r.d) * r.h
    impls = ours(r, t)
    if use_fa4:
        try:
            impls += fa4(r, t)
        except Exception as err:  # noqa: BLE001 - report and carry on
            log(f"  flash-attn-4: not available: {err!r}"[:300])
    impls += sdpa_per_sequence(r, t)
    row: dict = {}
    for label, fn in impls:
        try:
            t["o"].fill_(float("nan"))
            got = fn()  # ours writes o; the others return their output
            torch.cuda.synchronize()
            err = check(r, t, t["o"] if got is None else got)
            log(f"  {label:20s} rel. error {err:.2e}")
            if not err < CHECK_TOL:
                row[label] = {"error": err}
                continue
            row[label] = {"error": err,
                          "graph": flops / graph_times(fn, 10)[5] / 1e9,
                          "events": flops / event_times(fn, 5, 30)[15] / 1e9}
            log(f"  {label:20s} graph {row[label]['graph']:.1f} / events "
                f"{row[label]['events']:.1f} TFLOP/s")
        except Exception as err:  # noqa: BLE001 - report and carry on
            row[label] = {"failed": f"{err!r}"[:200]}
            log(f"  {label:20s} ERROR {err!r}"[:300])
    del t
    torch.cuda.empty_cache()
    return row


from attention_family import cell  # noqa: E402,F401  (one table cell format for both)


def write(path: str, results: list, command: str) -> None:
    import torch

    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = ["# Variable-length attention on the GPU: examples/flash_atten_varlen.co", "",
             f"- GPU: {torch.cuda.get_device_name()}; torch {torch.__version__}; {date}",
             f"- command: `{command}`",
             "- TFLOP/s of the visible (query, key) pairs, graph / events "
             "(bench/attention_varlen.py); the rows' lengths below the table",
             "", "| row | " + " | ".join(LABELS) + " |", "|---|" + "---|" * len(LABELS)]
    for r, row in results:
        lines.append(f"| {r.label} | " + " | ".join(cell(row.get(x)) for x in LABELS) + " |")
    lines += ["", *[f"- {p}" for p in plan()], ""]
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("\n".join(lines))
    log("\n".join(lines))


def run(out: str, use_fa4: bool, only: str, command: str) -> None:
    """Times every row (those whose label holds one of `only`'s comma-separated strings)."""
    results = []
    for r in VARLEN_ROWS:
        if only and not any(x in r.label for x in only.split(",")):
            continue
        log(f"[varlen] {r.label}")
        results.append((r, time_row(r, use_fa4)))
    write(out, results, command)


if __name__ == "__main__":
    print("\n".join(plan()))
