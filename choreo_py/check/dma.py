"""DMA: copies move elements without converting them.

Source and destination (an explicit one, or the implicit buffer of
`=> local` reached later through `f.data`) agree in element type and rank;
`dma.pad<{low}, {high}, {mid}, v>` gives one entry per dimension in each
list; `dma.transp<...>` is a permutation of the dimensions, and the
transposed source has the destination's shape.
"""
from __future__ import annotations

from typing import Optional

from ..frontend import ast as A
from . import types as Ty


def copy_types(ck, s: A.DmaOp) -> None:
    if s.src is None or s.dst is None or isinstance(s.dst, A.StorageTarget):
        return
    src, dst = ck.t(s.src), ck.t(s.dst)
    # a future stands for the data its copy made (`dma.copy tile => out`, tile a future)
    if src.kind not in (Ty.DATA, Ty.FUTURE) or dst.kind not in (Ty.DATA, Ty.FUTURE):
        return
    if src.elem and dst.elem and _canon(src.elem) != _canon(dst.elem):
        ck.error(f"copy from {src.elem} data into a {dst.elem} destination: "
                 f"'{s.engine}.{s.operation}' does not convert element types", s.dst.loc)
    if src.rank is not None and dst.rank is not None and src.rank != dst.rank:
        ck.error(f"'{s.engine}.{s.operation}' from rank-{src.rank} data into a rank-{dst.rank} "
                 "destination", s.dst.loc)


def _canon(elem: str) -> str:
    return {"half": "f16", "float": "f32", "double": "f64", "int": "s32"}.get(elem, elem)


def _op_loc(s: A.DmaOp):
    """Where the operation is named (`.pad`, `.transp`), else the statement."""
    return s.modifiers[0].loc if s.modifiers else s.loc


def pad(ck, s: A.DmaOp) -> None:
    cfg = s.pad
    if cfg is None:
        return
    counts = {len(cfg.low), len(cfg.high), len(cfg.mid)}
    if len(counts) > 1:
        ck.error(f"the lists of 'dma.pad' differ in length (low {len(cfg.low)}, high "
                 f"{len(cfg.high)}, mid {len(cfg.mid)})", _op_loc(s))
        return
    rank = ck.t(s.src).rank if s.src is not None else None
    if rank is not None and cfg.low and len(cfg.low) != rank:
        ck.lenient_error(f"'dma.pad' gives {len(cfg.low)} entries per list for data of rank "
                         f"{rank}", _op_loc(s))
    for e in cfg.low + cfg.high + cfg.mid:
        if ck.t(e).kind in (Ty.FLOAT, Ty.BOOL):
            ck.error("a padding amount is an integer", e.loc)


def transpose(ck, s: A.DmaOp) -> None:
    perm = s.transpose
    if perm is None:
        return
    if sorted(perm) != list(range(len(perm))):
        ck.error(f"'dma.transp<{', '.join(map(str, perm))}>' is not a permutation of the "
                 f"dimensions 0..{len(perm) - 1}", _op_loc(s))
        return
    rank = ck.t(s.src).rank if s.src is not None else None
    if rank is not None and rank != len(perm):
        ck.error(f"'dma.transp' permutes {len(perm)} dimensions of rank-{rank} data",
                 _op_loc(s))
        return
    src, dst = static_shape(ck, s.src), static_shape(ck, s.dst)
    if src and dst and len(src) == len(perm) and len(dst) == len(perm) \
            and None not in src and None not in dst:
        moved = [src[i] for i in perm]
        if moved != dst:
            ck.error(f"the transposed shape [{', '.join(map(str, moved))}] differs from the "
                     f"destination's [{', '.join(map(str, dst))}]", _op_loc(s))


def static_shape(ck, e) -> Optional[list]:
    """Constant dimensions of a named buffer/parameter or of a tile of one."""
    if isinstance(e, A.Name):
        sym = ck.lookup(e.id)
        return sym.dims if sym is not None else None
    if isinstance(e, A.Index):
        return static_shape(ck, e.base) if ck.t(e.base).array else None
    if isinstance(e, A.MethodCall):
        if e.method in ("at", "from") and isinstance(e.base, A.MethodCall):
            return static_shape(ck, e.base)
        if e.method == "subspan" and not e.strides:
            dims = [ck.fold(a) for a in e.args]
            return dims if None not in dims else None
        if e.method == "chunkat":
            base = static_shape(ck, e.base)
            factors = [ck.fold(a) for a in e.args]
            if base and len(base) == len(factors) and None not in base + factors \
                    and all(f > 0 and d % f == 0 for d, f in zip(base, factors)):
                return [d // f for d, f in zip(base, factors)]
    return None


def _root(e):
    while isinstance(e, (A.MethodCall, A.Index, A.Member)):
        e = e.base
    return e.id if isinstance(e, A.Name) else None


def _agree(ck, name, swizzle, where: str, loc) -> None:
    """A swizzled tile is written and read with one pattern: a copy's `.swiz<N>`
    and the `mma.load.swiz<N>` that reads the same buffer agree."""
    if name is None or not isinstance(swizzle, int):
        return
    sym = ck.lookup(name)
    if sym is None or sym.type.kind != Ty.DATA:
        return
    if sym.swizzle is None:
        sym.swizzle = (swizzle, where)
    elif sym.swizzle[0] != swizzle and sym.swizzle[1] != where:
        ck.error(f"'{name}' is written and read with different swizzles ({sym.swizzle[1]} "
                 f"'.swiz<{sym.swizzle[0]}>', {where} '.swiz<{swizzle}>')", loc)


def copy_swizzle(ck, s: A.DmaOp) -> None:
    if s.dst is not None and not isinstance(s.dst, A.StorageTarget):
        _agree(ck, _root(s.dst), s.swizzle, "copy", s.loc)


def load_swizzle(ck, s: A.MmaLoad) -> None:
    _agree(ck, _root(s.source), s.swizzle, "mma.load", s.loc)


RULES = {A.DmaOp: [copy_types, pad, transpose, copy_swizzle], A.MmaLoad: [load_swizzle]}
