"""FlashAttention backward on a GPU: examples/flash_atten_bwd.co's three kernels (Dlt,
dK/dV, dQ) against torch SDPA's backward (flash and cuDNN backends), and the forward
with LSE (examples/flash_atten_bwd_fwd.co) against SDPA's forward.

    python3 bench/attention_bwd.py [--shapes B,H,S,D,causal ...]

Timing: median of per-call CUDA-event pairs (`event_times`, 10 warm-up, 30 timed
calls). Our backward is the three launches in order. SDPA's backward is
`torch.autograd.grad` of a forward that ran once, with retain_graph. TFLOP/s counts
the backward as 2.5x the forward's 4*B*H*S^2*D (/2 when causal).
Also printed: each gradient's relative error against float32 SDPA's.
"""
from __future__ import annotations

import argparse
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "examples"))
sys.path.insert(0, os.path.join(ROOT, "tests"))

DEFAULT = ["2,16,4096,64,0", "2,16,4096,64,1", "2,16,4096,128,0", "2,16,4096,128,1",
           "8,16,1024,128,1"]


def median(ts):
    return ts[len(ts) // 2]


def bench_shape(b, h, s, d, causal):
    """One row: (ms ours fwd, ms ours bwd, ms SDPA bwd per backend, errors)."""
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from choreo_py.runtime.autotune import event_times
    from fa_bwd_ref import bwd_inputs, rel
    from flash_atten_bwd import programs

    q, k, v, do = (x.cuda() for x in bwd_inputs(b, s, h, d, seed=1))
    fwd, bwd = programs(bool(causal), d, "cuda")
    o = torch.empty_like(q)
    lse = torch.empty(b, h, s, device="cuda")
    dlt = torch.empty_like(lse)
    dq, dk, dv = (torch.empty_like(q) for _ in range(3))

    def ours_fwd():
        fwd.fa_fwd_lse(q, k, v, o, lse)

    def ours_bwd():
        bwd.fa_bwd_pre(o, do, dlt)
        bwd.fa_bwd_dkdv(q, k, v, do, lse, dlt, dk, dv)
        bwd.fa_bwd_dq(q, k, v, do, lse, dlt, dq)

    t_fwd = median(event_times(ours_fwd, 10, 30))
    t_bwd = median(event_times(ours_bwd, 10, 30))
    leaves = [x.transpose(1, 2).detach().requires_grad_() for x in (q, k, v)]
    gt = do.transpose(1, 2)
    torch_bwd = {}
    for name, backend in (("flash", SDPBackend.FLASH_ATTENTION),
                          ("cudnn", SDPBackend.CUDNN_ATTENTION)):
        try:
            with sdpa_kernel(backend):
                out = torch.nn.functional.scaled_dot_product_attention(*leaves, is_causal=bool(causal))

            def step(out=out):
                torch.autograd.grad(out, leaves, gt, retain_graph=True)
            torch_bwd[name] = median(event_times(step, 10, 30))
        except RuntimeError as e:  # a backend that does not take this shape
            torch_bwd[name] = f"n/a ({str(e).splitlines()[0][:40]})"
    ref = [x.float().transpose(1, 2).requires_grad_() for x in (q, k, v)]
    r = torch.nn.functional.scaled_dot_product_attention(*ref, is_causal=bool(causal))
    r.backward(do.float().transpose(1, 2))
    errs = [rel(a, x.grad.transpose(1, 2)) for a, x in zip((dq, dk, dv), ref)]
    return t_fwd, t_bwd, torch_bwd, errs


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", nargs="*", default=DEFAULT, help="B,H,S,D,causal each")
    args = ap.parse_args(argv)
    print("| B | H | S | D | causal | ours fwd ms | ours bwd ms | bwd TFLOP/s | SDPA flash bwd ms "
          "| SDPA cuDNN bwd ms | rel err dQ, dK, dV |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for spec in args.shapes:
        b, h, s, d, causal = (int(x) for x in spec.split(","))
        t_fwd, t_bwd, tb, errs = bench_shape(b, h, s, d, causal)
        flops = 2.5 * 4 * b * h * s * s * d / (2 if causal else 1)
        cell = lambda t: f"{t:.3f}" if isinstance(t, float) else t  # noqa: E731
        print(f"| {b} | {h} | {s} | {d} | {causal} | {t_fwd:.3f} | {t_bwd:.3f} | "
              f"{flops / t_bwd / 1e9:.1f} | {cell(tb['flash'])} | {cell(tb['cudnn'])} | "
              f"{', '.join(f'{e:.2e}' for e in errs)} |")


if __name__ == "__main__":
    main()
