"""One launch of each causal FlashAttention kernel per shape, for Nsight Compute.

    ncu --clock-control none -k regex:'flash_atten|sdpa|fmha|cudnn' --metrics ... \
        python3 bench/ncu_fa.py [--variants unpaired,tile-major]

Order per shape: the seed, the persistent example, its variants (bench/attention.py
VARIANTS), cuDNN SDPA. Each is launched twice; profile the second launches.
"""
from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import attention  # noqa: E402

SHAPES = [(2, 16, 8192), (8, 16, 1024)]


def main() -> None:
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    ap = argparse.ArgumentParser()
    ap.add_argument("--variants", default="")
    args = ap.parse_args()
    variants = [v for v in args.variants.split(",") if v]
    for b, h, s in SHAPES:
        q, k, v = (torch.randn(b, s, h, 128, device="cuda", dtype=torch.bfloat16)
                   for _ in range(3))
        o = torch.empty_like(q)
        runs = [("seed", attention.compiled("flash_atten_causal")),
                ("persistent", attention.compiled("flash_atten_persistent"))]
        runs += [(f"variant {x}", attention.compiled("flash_atten_persistent", x))
                 for x in variants]
        qt, kt, vt = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)

        def cudnn():
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                F.scaled_dot_product_attention(qt, kt, vt, is_causal=True)
        for label, f in runs + [("cuDNN", None)]:
            for _ in range(2):
                if f is None:
                    cudnn()
                else:
                    f(q, k, v, o)
            torch.cuda.synchronize()
            print(f"[ncu_fa] B={b} H={h} S={s}: {label} launched twice", flush=True)


if __name__ == "__main__":
    main()
