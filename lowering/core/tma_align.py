"""Where a TMA box may start: the PTX ISA (5.5.3.1, tiled mode) asks the bounding box's
address to be 16-byte aligned. The tensor map's strides are 16-byte multiples (the
driver refuses others; runtime/kernel.py copies such tensors with the threads), so the
innermost coordinate alone decides: coordinate x element bytes must be a multiple of 16.
The H200 stops a store that breaks it with an illegal instruction (the varlen example's
LSE store at a sequence's first row); the emulator reports it (emu/isa_tma.py).

`multiple_of` proves a divisor of an index expression from its form (constants, sums,
products, shifts, the kernel's once-bound lets). A tensor with a copy whose box is not
proven aligned (`off_grid_tensors`) is copied by the threads, as one whose rows are not
16-byte multiples (tma_fallback.applies); the row-bounded store keeps its TMA for whole
boxes and checks the coordinate at run time (roles._store_rows); `check` is the last
word before a TMA instruction is written."""
from __future__ import annotations

import math
from typing import Optional

from choreo_py import ir

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


def check(lw, inner, esize: int, loc=None) -> bool:
    """True when the box's innermost coordinate `inner` is proven 16-byte aligned."""
    if esize >= 16 or esize <= 0:
        return True
    lets = getattr(lw, "_tma_lets", None)
    if lets is None:
        lets = lw._tma_lets = kernel_lets(lw.k)
    m = multiple_of(inner, lets)
    return m == 0 or m % (16 // esize) == 0


def off_grid_tensors(lw) -> frozenset:
    """The kernel's tensors with a TMA copy whose box is not proven 16-byte aligned (the
    row-bounded stores aside: they check at run time)."""
    got = getattr(lw, "_tma_off_grid", None)
    if got is None:
        names = set()
        for s in ir.walk(lw.k.body):
            view = s.src if isinstance(s, ir.TmaLoad) else \
                s.dst if isinstance(s, ir.TmaStore) and s.rows is None else None
            p = lw.k.param(view.base) if view is not None else None
            if p is not None and not check(lw, view.offsets[-1], ir.dtype_bytes(p.dtype)):
                names.add(view.base)
        got = lw._tma_off_grid = frozenset(names)
    return got
