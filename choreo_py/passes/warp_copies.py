"""Synchronous TMA copies in a warp-MMA kernel become cooperative copies.

A kernel whose MMAs take both operands as register fragments (the mma.sync
form: ir.is_warp_mma_kernel) is lowered thread by thread, and thread kernels
move tiles with cooperative `ld`/`st` loops, not with TMA (no tensor maps).
A synchronous `tma.copy` means only that the tile is in place, for every
thread, at the next statement, which the cooperative copy also gives; so it
is rewritten into a `dma.copy` of the same views. Its swizzle is dropped: the
layout of a tile in shared memory is no statement's business here (the
lowering's `mma.load` reads the tile as the copy wrote it), and the thread
copies write tiles row-major. What TMA does at the tensor's edges is kept: the
global box is cut at them (extent min(e, D - offset) where it may cross one),
so a load zero-fills the rest of the shared tile (a smaller source) and a
store writes only the elements inside the tensor. Asynchronous TMA copies are
left as they are (a kernel with them is no warp-MMA kernel, and is refused by
name).
"""
from __future__ import annotations

from dataclasses import replace

from .. import ir
from ..ir import build as B


def run(kernel: ir.Kernel, target=None) -> None:
    if ir.is_warp_mma_kernel(kernel):
        kernel.body = _rewrite(kernel, kernel.body)


def _rewrite(kernel: ir.Kernel, stmts: list) -> list:
    out = []
    for s in stmts:
        if isinstance(s, ir.TmaLoad) and s.future is None:
            s = ir.DmaCopy(_cut(kernel, s.src), s.dst, None, None, loc=s.loc,
                           leader_only=s.leader_only)
        elif isinstance(s, ir.TmaStore) and s.future is None and s.rows is None:
            s = ir.DmaCopy(s.src, _cut(kernel, s.dst), None, None, loc=s.loc,
                           leader_only=s.leader_only)
        for attr in ("body", "then", "orelse"):
            if isinstance(getattr(s, attr, None), list):
                setattr(s, attr, _rewrite(kernel, getattr(s, attr)))
        out.append(s)
    return out


def _cut(kernel: ir.Kernel, v: ir.View) -> ir.View:
    """The global box `v` cut at the tensor's edges (a kept dimension that may cross one)."""
    p = kernel.param(kernel.root(v.base))
    if p is None or kernel.alias(v.base) is not None or len(p.shape) != len(v.extents):
        return v
    extents = []
    for off, ext, dim, keep in zip(v.offsets, v.extents, p.shape, v.keep):
        inside = B.as_int(off) is not None and B.as_int(ext) is not None and \
            B.as_int(dim) is not None and B.as_int(off) + B.as_int(ext) <= B.as_int(dim)
        if keep and not inside:
            left = B.binop("-", dim, off, "s32")
            ext = ir.Call("max", (ir.Call("min", (ext, left), "s32"), B.const(0)), "s32")
        extents.append(ext)
    return replace(v, extents=tuple(extents))
