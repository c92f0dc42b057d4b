"""Inputs for a first call of a loaded kernel in bench/compile.py --cache --launch:
random CUDA tensors of the kernel's parameter shapes (symbolic dimensions 256)."""
from __future__ import annotations

_DTYPES = {"bf16": "bfloat16", "f16": "float16", "f32": "float32"}


def first_call(kernel, size: int = 256) -> None:
    import torch

    tensors = []
    for _, dtype, shape in kernel.meta.TENSORS:
        dims = [d if isinstance(d, int) else (128 if d in ("D", "HEAD_DIM") else size)
                for d in shape]
        if len(dims) == 4:  # BSHD attention: batch 1, 2 heads
            dims[0], dims[2] = 1, 2
        tensors.append(torch.randn(*dims, device="cuda").to(getattr(torch, _DTYPES[dtype])))
    kernel(*tensors)
    torch.cuda.synchronize()
