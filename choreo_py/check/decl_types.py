"""What a declaration declares: the type, rank and constant dimensions the
walker records for a buffer, a parameter, a future or a scalar."""
from __future__ import annotations

from typing import Optional

from ..frontend import ast as A
from ..frontend.parse_checks import fold_int
from . import types as Ty
from .expr_types import _rank_of
from .types import T


def _bound_rank(ck, bounds: list) -> Optional[int]:
    total = 0
    for b in bounds:
        r = _rank_of(ck.t(b))
        if r is None:
            return None
        total += r
    return total


def _type_rank(ck, t: A.MdSpanType) -> Optional[int]:
    if t.rank is not None:
        return t.rank
    if not t.dims:
        return None
    if len(t.dims) == 1 and not isinstance(t.dims[0], A.DimWildcard):
        dim = t.dims[0]     # `f32 [sp]`: one entry may stand for a whole shape
        return _rank_of(ck.t(dim)) if id(dim) in ck.types else (
            1 if isinstance(dim, (A.IntLit, A.Name)) else None)
    return len(t.dims)


def _static_dims(t: A.MdSpanType) -> Optional[list]:
    """The written dimensions, each an int when constant (else None)."""
    if not t.dims or (len(t.dims) == 1 and t.rank is None
                      and not isinstance(t.dims[0], A.IntLit)):
        return None       # `f32 [sp]`: one entry may stand for a whole shape
    return [None if isinstance(d, A.DimWildcard) else fold_int(d) for d in t.dims]


def _selected_names(e) -> tuple:
    if isinstance(e, A.CallExpr) and e.func == "select":
        return tuple(a.id for a in e.args[1:] if isinstance(a, A.Name))
    return ()


def _decl_type(v: T) -> T:
    return v.with_(placeholder=False) if v.kind != Ty.FUTURE else v


def _dma_future(ck, s: A.DmaOp) -> T:
    if s.operation == "any":
        return T(Ty.FUTURE, is_async=True, placeholder=True)
    dst = ck.t(s.dst) if s.dst is not None and not isinstance(s.dst, A.StorageTarget) \
        else ck.t(s.src)
    return T(Ty.FUTURE, rank=dst.rank, elem=dst.elem, storage="dma", is_async=s.is_async)
