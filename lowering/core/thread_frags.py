"""Fragments of a `: thread` region are the thread's own arrays: local buffers.

`frag f32[64] c {3.0f};` declared in `parallel t by 128 : thread` gives every thread
its own 64 elements, and `apply {i} in c.span { ... }` runs over all of them in that
thread: exactly a `local f32[64]` buffer and a loop. A thread kernel whose fragments are
all of that kind (ir.per_thread_frags) is lowered from a copy rewritten so: the
declaration becomes a local buffer (its value, if any, written by a loop where the
declaration stood, so a declaration in a loop refills it each time), `apply` a loop
nest, `c.at(i)` an element of the buffer. The IR the interpreter runs keeps the
fragments (it runs local buffers only in regions of one instance).
"""
from __future__ import annotations

import dataclasses

from choreo_py import ir

def as_locals(kernel: ir.Kernel) -> ir.Kernel:
    """`kernel`, or where its fragments are per-thread arrays a copy with local buffers."""
    if not ir.per_thread_frags(kernel):
        return kernel
    views = {f.name: _whole(f) for f in kernel.frags}
    local = [ir.Buffer(f.name, "local", f.dtype, f.shape, loc=f.loc) for f in kernel.frags]
    return dataclasses.replace(kernel, buffers=list(kernel.buffers) + local, frags=[],
                               body=_block(kernel.body, views))


def _whole(f: ir.Frag) -> ir.View:
    n = len(f.shape)
    return ir.View(f.name, (ir.Const(0, "s32"),) * n,
                   tuple(ir.Const(e, "s32") for e in f.shape), (True,) * n)


def _block(stmts: list, views: dict) -> list:
    out = []
    for s in stmts:
        out += _stmt(s, views)
    return out


def _loops(indices, shape, body: list, loc) -> list:
    for var, n in reversed(list(zip(indices, shape))):
        body = [ir.For(var, ir.Const(0, "s32"), ir.Const(n, "s32"), body, loc=loc)]
    return body


def _stmt(s, views: dict) -> list:
    if isinstance(s, ir.FragDecl):
        if s.init is None:
            return []
        f = s.frag
        idx = tuple(f"{f.name}__fill{k}" for k in range(len(f.shape)))
        fill = ir.BufStore(views[f.name], tuple(ir.Sym(v, "s32") for v in idx), s.init,
                           loc=s.loc)
        return _loops(idx, f.shape, [fill], s.loc)
    if isinstance(s, ir.Apply):
        return _loops(s.indices, s.shape, _block(s.body, views), s.loc)
    if isinstance(s, ir.ElemStore):
        return [ir.BufStore(views[s.frag], tuple(_expr(e, views) for e in s.index),
                            _expr(s.value, views), loc=s.loc)]
    changes = {}
    for f in dataclasses.fields(s):
        v = getattr(s, f.name)
        if f.type in ir.BLOCK_FIELD:
            changes[f.name] = _block(v, views)
        elif f.type in ir.EXPR_FIELD and v is not None:
            changes[f.name] = _expr(v, views)
        elif f.type in ir.EXPRS_FIELD:
            changes[f.name] = type(v)(_expr(e, views) for e in v)
        elif f.type == "list" and f.name == "items":  # ir.Print: text and values
            changes[f.name] = [x if isinstance(x, str) else _expr(x, views) for x in v]
    return [dataclasses.replace(s, **changes)] if changes else [s]


def _expr(e, views: dict):
    if isinstance(e, ir.Elem):
        return ir.BufElem(views[e.frag], tuple(_expr(i, views) for i in e.index), e.dtype)
    changes = {}
    for f in dataclasses.fields(e):
        v = getattr(e, f.name)
        if f.type in ir.EXPR_FIELD and v is not None:
            changes[f.name] = _expr(v, views)
        elif f.type in ir.EXPRS_FIELD:
            changes[f.name] = tuple(_expr(x, views) for x in v)
    return dataclasses.replace(e, **changes) if changes else e
