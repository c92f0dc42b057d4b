"""Parameters and buffers.

A kernel receives scalars by value and global data by its address, so `&`
applies to neither; `??` (a dimension with no value at all) is only
meaningful for global data, whose extent the kernel never needs, and what
derives from it can not size anything that must be known when compiling
(shared or local buffers).  Buffer and event arrays are laid out when
compiling: their dimensions are integer constants greater than 0.
"""
from __future__ import annotations

from ..frontend import ast as A
from . import types as Ty


def param(ck, p: A.Param) -> None:
    t = p.type
    if p.by_ref:
        if p.name is None:
            ck.error("an unnamed parameter can not be passed by reference", p.loc)
        elif isinstance(t, A.TypeRef):
            ck.error(f"the scalar parameter '{p.name}' can not be passed by reference",
                     p.loc)
        elif p.storage == "global":
            ck.error(f"the global parameter '{p.name}' can not be passed by reference",
                     p.loc)
    if isinstance(t, A.MdSpanType) and p.storage != "global":
        for d in t.dims or ():
            if isinstance(d, A.DimWildcard) and d.kind == "??":
                ck.error("'??' (a dimension without value) is only allowed on 'global' "
                         "parameters", d.loc)


def scalar_storage(ck, s: A.ScalarDecl) -> None:
    if s.storage is not None:
        ck.error(f"the scalar '{s.name}' can not have the storage qualifier '{s.storage}' "
                 "(storage belongs to spanned data)", s.loc)


def buffer(ck, s) -> None:
    storage = getattr(s, "storage", None)
    if isinstance(s, A.BufferDecl) and storage in ("shared", "local") and not ck.in_parallel:
        # Shared and local memory exist only while a kernel runs.
        ck.lenient_error(f"a {storage} buffer is declared outside any 'parallel' block",
                         s.loc)
    if isinstance(s, (A.BufferDecl, A.FragDecl)) and storage != "global" and s.type:
        for d in s.type.dims or ():
            if not isinstance(d, A.DimWildcard) and ck.from_unknown(d):
                ck.error("a dimension derived from '??' has no value when compiling and can "
                         "not size a buffer", d.loc)
    for d in s.array_dims:
        _array_dim(ck, d, "event" if isinstance(s, A.EventDecl) else "buffer")


def _array_dim(ck, d, kind: str) -> None:
    what = f"{'an' if kind == 'event' else 'a'} {kind}"
    t = ck.t(d)
    if t.kind in (Ty.FLOAT, Ty.BOOL, Ty.STRING, Ty.MDSPAN, Ty.ITUPLE):
        ck.error(f"{what} array dimension is an integer, not {Ty.describe(t.kind)}", d.loc)
        return
    v = ck.fold(d)
    if v is not None and v <= 0:
        ck.error(f"{what} array dimension must be greater than 0 (it is {v})", d.loc)
        return
    for node in A.walk(d):
        if isinstance(node, A.Name):
            sym = ck.lookup(node.id)
            if sym is not None and (sym.written_mutable or sym.origin in ("param", "dim", "parallel",
                                                                  "with", "foreach")):
                ck.error(f"{what} array dimension is a constant, but '{node.id}' is only "
                         "known at run time", node.loc)
                return


RULES = {
    A.Param: [param],
    A.ScalarDecl: [scalar_storage],
    A.BufferDecl: [buffer],
    A.FragDecl: [buffer],
    A.EventDecl: [buffer],
}
