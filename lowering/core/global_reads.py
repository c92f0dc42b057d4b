"""Elements of global tensors read by the scalar and fragment code of an MMA kernel.

An MMA kernel reaches its tensors through TMA descriptors; a program that reads
single elements as well (a persistent kernel's tile schedule `schedule.at(t)`, a
per-row bias inside an `apply` over an accumulator) needs the tensor's address:
it becomes a kernel parameter of its own (`ptr_<tensor>`, PARAMS kind "ptr",
after the dimensions), loaded once in the prologue and converted to a global
address there. Each read is one `ld.global` per thread at the element's
address (row-major over the shape the function declares), widened to its
register type as in thread kernels (threads.py).

Only tensors the kernel does not write are read this way: a TMA or an
`mma.store` write of the same tensor goes through another proxy or another
thread, and nothing here orders the read after it.
"""
from __future__ import annotations

import dataclasses

from choreo_py import ir

from .threads import Places
from .writer import V


def load(lw, x, e: ir.BufElem, loc) -> V:
    """The value of `e` (a global element) with its indices lowered by `x`."""
    root = lw.k.root(e.view.base)
    if lw.k.param(root) is None:
        raise lw.refuse(f"reading an element of the {_storage(lw, root)} buffer '{root}' "
                        "in an MMA kernel", loc)
    if root in _written(lw):
        raise lw.refuse(f"reading elements of '{root}', which this kernel also writes", loc)
    places = Places.of_mma_kernel(lw)
    places.pointers.setdefault(root, _pointer(lw, root))
    return places.load(e.view, e.index, e.dtype, loc, expr=x)


def params(lw) -> list[str]:
    """Tensors read by element, in the order their parameters follow the dimensions."""
    return sorted(lw.global_pointers)


def _pointer(lw, name: str) -> V:
    ptrs = lw.global_pointers
    if name not in ptrs:
        w = lw.w
        with w.into(lw.prologue_mark):
            raw = w.reg("u64", f"{name}_ptr")
            w.call("ptx.param", "u64", f'"ptr_{name}"', f"dst={raw.text}")
            g = w.reg("u64", f"{name}_g")
            w.op("cvta.to.global.u64", g, raw)
        ptrs[name] = g
    return ptrs[name]


def _storage(lw, name: str) -> str:
    b = lw.k.buffer(name)
    return b.storage if b is not None else "unknown"


def _written(lw) -> set:
    """Roots of the views any statement of the kernel writes (a `dst`, a BufStore's view)."""
    memo = lw.written_roots
    if memo is None:
        memo = set()
        for s in ir.walk(lw.k.body):
            for f in dataclasses.fields(s):
                v = getattr(s, f.name)
                writes = f.name.startswith("dst") or (isinstance(s, ir.BufStore)
                                                      and f.name == "view")
                if writes and isinstance(v, ir.View):
                    memo.add(lw.k.root(v.base))
        lw.written_roots = memo
    return memo
