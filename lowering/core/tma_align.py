"""Where a TMA box may start: the PTX ISA (5.5.3.1, tiled mode) asks the bounding box's
address to be 16-byte aligned. The tensor map's strides are 16-byte multiples (the
driver refuses others; runtime/kernel.py copies such tensors with the threads), so the
innermost coordinate alone decides: coordinate x element bytes must be a multiple of 16.
The H200 stops a store that breaks it with an illegal instruction (the varlen example's
LSE store at a sequence's first row); the emulator reports it (emu/isa_tma.py).

`multiple_of` proves a divisor of an index expression from its form (constants, sums,
products, shifts, the kernel's once-bound lets); `check` refuses a box whose innermost
coordinate is a constant off the 16-byte grid and says whether a run-time one is proven
aligned (the callers take the threads' path when it is not)."""
from __future__ import annotations

import math
from typing import Optional

from choreo_py import ir
from choreo_py.diagnostics import ChoreoError

#: a proof that does not stop: a let's value that reads the let (never in valid IR)
_DEPTH = 32


def kernel_lets(kernel: ir.Kernel) -> dict:
    """The kernel's lets bound once (name -> value): a name bound twice proves nothing."""
    seen: dict = {}
    for s in ir.walk(kernel.body):
        if isinstance(s, ir.Let):
            seen[s.name] = None if s.name in seen else s.value
    return {k: v for k, v in seen.items() if v is not None}


def multiple_of(e, lets: Optional[dict] = None, depth: int = 0) -> int:
    """The largest divisor of `e` its form proves (0: e is 0, any divisor holds)."""
    if depth > _DEPTH:
        return 1
    go = lambda x: multiple_of(x, lets, depth + 1)  # noqa: E731
    if isinstance(e, ir.Const):
        return abs(int(e.value)) if isinstance(e.value, int) and not isinstance(e.value, bool) else 1
    if isinstance(e, ir.Sym):
        value = (lets or {}).get(e.name)
        return go(value) if value is not None else 1
    if isinstance(e, ir.Bin):
        a = go(e.lhs)
        if e.op in ("+", "-"):
            return math.gcd(a, go(e.rhs))
        if e.op == "*":
            return a * go(e.rhs)
        if e.op == "<<" and isinstance(e.rhs, ir.Const):
            return a << int(e.rhs.value)
    if isinstance(e, ir.Select):
        return math.gcd(go(e.if_true), go(e.if_false))
    return 1


def check(lw, inner, esize: int, loc) -> bool:
    """True when the box's innermost coordinate `inner` is proven 16-byte aligned; a
    constant that is not is refused by name."""
    if esize >= 16 or esize <= 0:
        return True
    need = 16 // esize
    if isinstance(inner, ir.Const) and isinstance(inner.value, int):
        if inner.value % need:
            raise ChoreoError(f"a TMA box that starts {inner.value * esize} bytes into a row: "
                              "the hardware needs its address 16-byte aligned (PTX ISA "
                              "5.5.3.1); start it at a multiple of 16 bytes", loc)
        return True
    lets = getattr(lw, "_tma_lets", None)
    if lets is None:
        lets = lw._tma_lets = kernel_lets(lw.k)
    m = multiple_of(inner, lets)
    return m == 0 or m % need == 0
