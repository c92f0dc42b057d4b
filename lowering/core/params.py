"""A kernel's dimensions and scalar arguments, read from its parameters (`dim_*`).

Each is one 32-bit word (what the launchers pass: runtime/host_program.py,
runtime/launch.kernel_param): a dimension or an integer argument is loaded as
its type; a `bool` argument is a word that is 0 or not, turned into a
predicate once here; an `f32` argument is its bits (runtime/launch.word), an `f16` or `bf16` one
the f32 bits of its value (rounded to the type by interp.host.bind_args). Dimensions are never negative; integer arguments may be.
Thread kernels (simt.py) and MMA kernels (kernel.py) bind them alike.
"""
from __future__ import annotations

from .names import dim_param


def bind_dims(lw) -> None:
    w, k = lw.w, lw.k
    for d in k.symbolic_dims:
        dtype = next((x.dtype for x in k.scalars if x.name == d), "s32")
        if dtype in ("bool", "f32", "f16", "bf16"):  # (f16, bf16: widened to f32 registers)
            word = w.reg("u32", f"{d}_word")
            w.call("ptx.param", "u32", f'"{dim_param(d)}"', f"dst={word.text}")
            r = w.reg("pred" if dtype == "bool" else "f32", d)
            if dtype == "bool":
                w.op("setp.ne.u32", r, word, 0)
            else:
                w.op("mov.b32", r, word)
        else:
            r = w.reg(dtype, d)
            w.call("ptx.param", "u32", f'"{dim_param(d)}"', f"dst={r.text}")
        lw.bind(d, r, nonneg=not k.is_scalar_arg(d), uniform=True)
