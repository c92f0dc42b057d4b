"""FlashAttention backward on an H100/H200: examples/flash_atten_bwd.co's three kernels
(Dlt, dK/dV, dQ) beside cuDNN's (torch SDPA, cuDNN backend), FA2's (SDPA, flash backend)
and, with --fa4 where flash_attn.cute imports, FlashAttention-4's sm90 backward, in one
process on the same tensors.

    python3 bench/attention_bwd.py [--fa4] [--shapes B,H,S,D,causal[,H_KV] ...] [--out FILE]
    python3 bench/attention.py --backward [--fa4] [--only S=4096] [--out FILE]

Rows (bf16, BSHD, D=128): B*S = 8192 tokens at S = 1k, 2k, 4k, 8k (B=2: 16k tokens)
and 16k, H=16, causal and not, like the forward's rows (bench/attention.py). A sixth
field in --shapes is H_KV (GQA; SDPA's rows then pass enable_gqa).

Timing: per-call CUDA events, median of 30 calls after 10 warm-up calls
(`event_times`), after a 2 s matmul warm-up. Ours is the three launches on O and LSE
from our forward. A peer's backward is `torch.autograd.grad` of its forward, which ran
once (retain_graph): everything its backward launches (FA4: preprocess, the main kernel,
the dQ postprocess; the buffers it zeroes) is in its time, and so is autograd's
host-side work where that is slower than the GPU. TFLOP/s counts the backward as
2.5x the forward's 4*B*H*S^2*D (/2 when causal) for everyone (ours computes S and dP
twice, seven MMAs per tile pair instead of five, but is counted like the others).
`ratio` = the best peer's time / ours (above 1: ours is faster).
Every implementation's dQ, dK, dV are checked once against float32 SDPA's gradients
(relative error, printed); one over 2e-2 is timed but marked `(wrong)`.
"""
from __future__ import annotations

import argparse
import datetime
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "examples"))
sys.path.insert(0, os.path.join(ROOT, "tests"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

DEFAULT = [f"{b},16,{s},128,{c}" for b, s in ((8, 1024), (4, 2048), (2, 4096), (2, 8192),
                                              (1, 16384)) for c in (1, 0)]
PEERS = ("cuDNN", "FA2 (SDPA flash)", "flash-attn-4")
CHECK_TOL = 2e-2
WARMUP, REPS = 10, 30


def median_ms(fn) -> float:
    from timing import event_times

    ts = event_times(fn, WARMUP, REPS)
    return ts[len(ts) // 2]


def ours(q, k, v, do, causal):
    """(time fn, grads fn) of our three backward kernels on our forward's O and LSE."""
    import torch

    from flash_atten_bwd import programs

    b, s, h, d = q.shape
    fwd, bwd = programs(bool(causal), d, "cuda")
    o = torch.empty_like(q)
    lse = torch.empty(b, h, -(-s // 64) * 64, device="cuda")  # rows padded as the Function's
    fwd.fa_fwd_lse(q, k, v, o, lse)
    dlt = torch.empty(b, h, s, device="cuda")
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)

    def step():
        bwd.fa_bwd_pre(o, do, dlt)
        bwd.fa_bwd_dkdv(q, k, v, do, lse, dlt, dk, dv)
        bwd.fa_bwd_dq(q, k, v, do, lse, dlt, dq)

    def grads():
        step()
        return dq, dk, dv

    return step, grads


def autograd_peer(forward, q, k, v, do, bhsd: bool):
    """(time fn, grads fn) of the backward of `forward` (run once here) by autograd; the
    tensors are BSHD, handed over as BHSD views where `bhsd`."""
    import torch

    leaves = [(x.transpose(1, 2) if bhsd else x).detach().requires_grad_() for x in (q, k, v)]
    out = forward(*leaves)
    out = out[0] if isinstance(out, tuple) else out
    g = do.transpose(1, 2) if bhsd else do

    def step():
        return torch.autograd.grad(out, leaves, g, retain_graph=True)

    def grads():
        got = step()
        return [x.transpose(1, 2) for x in got] if bhsd else list(got)

    return step, grads


def peers(q, k, v, do, causal, use_fa4):
    """{label: (time fn, grads fn) or the reason it is absent}."""
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    gqa = {"enable_gqa": True} if k.shape[2] != q.shape[2] else {}

    def sdpa(backend):
        def fwd(*t):
            with sdpa_kernel(backend):
                return F.scaled_dot_product_attention(*t, is_causal=bool(causal), **gqa)
        return fwd

    found = {}
    for label, backend in (("cuDNN", SDPBackend.CUDNN_ATTENTION),
                           ("FA2 (SDPA flash)", SDPBackend.FLASH_ATTENTION)):
        try:
            found[label] = autograd_peer(sdpa(backend), q, k, v, do, bhsd=True)
        except RuntimeError as e:  # a backend that does not take this shape
            found[label] = f"n/a ({str(e).splitlines()[0][:60]})"
    if use_fa4:
        try:
            from flash_attn.cute import flash_attn_func

            found["flash-attn-4"] = autograd_peer(
                lambda *t: flash_attn_func(*t, causal=bool(causal)), q, k, v, do, bhsd=False)
        except Exception as e:  # noqa: BLE001 - not installed, or refuses the shape
            found["flash-attn-4"] = f"n/a ({type(e).__name__}: {str(e).splitlines()[0][:60]})"
    return found


def reference(q, k, v, do, causal):
    """float32 SDPA's (dQ, dK, dV), BSHD (GQA: K and V repeated per query head, their
    gradients summed back)."""
    import torch

    from fa_bwd_ref import expand_kv

    t = [x.float().requires_grad_() for x in (q, k, v)]
    bhsd = [x.transpose(1, 2) for x in (t[0], expand_kv(q, t[1]), expand_kv(q, t[2]))]
    torch.nn.functional.scaled_dot_product_attention(*bhsd, is_causal=bool(causal)).backward(
        do.float().transpose(1, 2))
    return [x.grad for x in t]


def bench_shape(b, h, s, d, causal, use_fa4=False, h_kv=None) -> dict:
    """{label: {"ms": float, "errs": [dQ, dK, dV]} or a reason string} for one row."""
    import torch

    from fa_bwd_ref import bwd_inputs, rel

    q, k, v, do = (x.cuda() for x in bwd_inputs(b, s, h, d, seed=1, h_kv=h_kv))
    want = reference(q, k, v, do, causal)
    impls = {"choreo-py": ours(q, k, v, do, causal), **peers(q, k, v, do, causal, use_fa4)}
    row = {}
    for label, impl in impls.items():
        if isinstance(impl, str):
            row[label] = impl
            continue
        step, grads = impl
        try:
            errs = [rel(g, w) for g, w in zip(grads(), want)]
            row[label] = {"errs": errs, "ms": median_ms(step)}
        except Exception as e:  # noqa: BLE001 - a peer's backward that refuses the shape
            row[label] = f"n/a ({type(e).__name__}: {str(e).splitlines()[0][:60]})"
        torch.cuda.synchronize()
    del want
    torch.cuda.empty_cache()
    return row


def flops(b, h, s, d, causal) -> float:
    return 2.5 * 4 * b * h * s * s * d / (2 if causal else 1)


def cell(x) -> str:
    if isinstance(x, str):
        return x
    wrong = " (wrong)" if max(x["errs"]) > CHECK_TOL else ""
    return f"{x['ms']:.3f}{wrong}"


def table(rows: list, labels: list) -> list[str]:
    """Markdown lines: ms, our TFLOP/s, ratio to the best peer, errors."""
    lines = ["| B | H (KV) | S | D | causal | " + " | ".join(f"{x} ms" for x in labels)
             + " | choreo-py TFLOP/s | ratio (best peer / ours) | rel err dQ, dK, dV (ours) |",
             "|---|---|---|---|---|" + "---|" * (len(labels) + 3)]
    for (b, h, s, d, c, hkv), r in rows:
        mine = r.get("choreo-py")
        times = [x["ms"] for lab, x in r.items() if lab != "choreo-py"
                 and isinstance(x, dict) and max(x["errs"]) <= CHECK_TOL]
        ok = isinstance(mine, dict)
        tf = f"{flops(b, h, s, d, c) / mine['ms'] / 1e9:.1f}" if ok else "n/a"
        ratio = f"{min(times) / mine['ms']:.3f}" if ok and times else "n/a"
        errs = ", ".join(f"{e:.2e}" for e in mine["errs"]) if ok else "n/a"
        heads = f"{h} ({hkv})" if hkv != h else f"{h}"
        lines.append(f"| {b} | {heads} | {s} | {d} | {c} | "
                     + " | ".join(cell(r.get(lab, "n/a")) for lab in labels)
                     + f" | {tf} | {ratio} | {errs} |")
    return lines


def run(shapes: list, use_fa4: bool, out: str | None, only: str = "", command: str = "") -> None:
    """Times every row of `shapes` ("B,H,S,D,causal"), prints the table, writes it to `out`."""
    import torch

    from attention import gpu_state, log, warm_up

    warm_up()
    rows = []
    for spec in shapes:
        b, h, s, d, c, *rest = (int(x) for x in spec.split(","))
        hkv = rest[0] if rest else h
        label = (f"B={b} H={h}" + (f" H_KV={hkv}" if hkv != h else "")
                 + f" S={s} D={d} {'causal' if c else 'non-causal'}")
        if only and not any(x in label for x in only.split(",")):
            continue
        log(f"[time] {label}  (GPU: {gpu_state()})")
        r = bench_shape(b, h, s, d, c, use_fa4, hkv)
        for lab, x in r.items():
            errs = "" if isinstance(x, str) else ", ".join(f"{e:.2e}" for e in x["errs"])
            log(f"  {lab}: " + (x if isinstance(x, str) else f"{x['ms']:.3f} ms, rel err {errs}"))
        rows.append(((b, h, s, d, c, hkv), r))
    labels = ["choreo-py"] + [p for p in PEERS if use_fa4 or p != "flash-attn-4"]
    default_command = "python3 bench/attention_bwd.py " + " ".join(sys.argv[1:])
    lines = ["# FlashAttention backward: choreo-py vs cuDNN, FA2 and FlashAttention-4", "",
             f"- GPU: {torch.cuda.get_device_name()}; torch {torch.__version__}, "
             f"cuDNN {torch.backends.cudnn.version()}",
             f"- date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M UTC}",
             f"- command: `{command or default_command}`",
             "- bf16 BSHD; per-call CUDA events, median of 30 after 10 warm-up; TFLOP/s = "
             "2.5·4·B·H·S²·D (/2 causal) / time; `(wrong)`: a gradient's relative error "
             f"over {CHECK_TOL} against float32 SDPA (left out of the ratio)", ""]
    lines += table(rows, labels)
    log("\n".join(lines))
    if out:
        with open(out, "w", encoding="utf-8") as fh:
            fh.write("\n".join(lines) + "\n")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", nargs="*", default=DEFAULT,
                    help="B,H,S,D,causal[,H_KV] each")
    ap.add_argument("--fa4", action="store_true",
                    help="also time FlashAttention-4's backward (flash_attn.cute: "
                         "../shared/tools/fa4_wheels.sh brings it to the H200)")
    ap.add_argument("--only", default="", help="only the rows whose label contains one of "
                                               "these comma-separated strings")
    ap.add_argument("--out", default=None, help="also write the table to this file")
    args = ap.parse_args(argv)
    run(args.shapes, args.fa4, args.out, args.only)


if __name__ == "__main__":
    main()
