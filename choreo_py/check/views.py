"""Views of spanned data: `chunkat`, `subspan`, `at`, `sqz`...

`x.chunkat(a, b)` cuts every dimension of `x`, so it takes one factor per
dimension (an ituple counts its rank); a tile (`subspan`) is no larger than
the dimension it cuts and a constant tile index (`.at`) stays in the
tile grid, and a constant window (`.view(...).from(...)`) inside the data;
`.sqz()` drops the unit dimensions a reshaping view
(`subspan`/`span_as`/`view`) produced; `.at()` indexes data, so a future's
data is reached through `f.data` first.
"""
from __future__ import annotations

from typing import Optional

from ..frontend import ast as A
from . import types as Ty

_RESHAPING = ("subspan", "span_as", "view")


def method(ck, n: A.MethodCall) -> None:
    base = ck.t(n.base)
    if base.kind == Ty.FUTURE and n.method == "at":
        ck.error(f"'.{n.method}()' on a future; use its data ('.data.{n.method}(...)')",
                 n.loc)
        return
    rule = _METHODS.get(n.method)
    if rule is not None:
        rule(ck, n, base)


def _factor_count(ck, args) -> Optional[int]:
    total = 0
    for a in args:
        t = ck.t(a)
        if t.kind in (Ty.ITUPLE, Ty.BOUNDED, Ty.MDSPAN):
            if t.rank is None:
                return None
            total += t.rank
        elif t.kind in (Ty.INT, Ty.FLOAT, Ty.BOOL) or isinstance(a, A.Name) and a.id == "_":
            total += 1
        else:
            return None
    return total


def _chunkat(ck, n: A.MethodCall, base) -> None:
    if base.kind != Ty.DATA or base.rank is None:
        return
    count = _factor_count(ck, n.args)
    if count is not None and count != base.rank:
        ck.error(f"'.chunkat' takes one factor per dimension: {count} for data of rank "
                 f"{base.rank}", n.loc)
        return
    dims = _static_dims(ck, n.base)
    if dims is None or len(dims) != len(n.args):
        return
    for a, d in zip(n.args, dims):      # one chunk per value of a bounded variable
        sym = ck.lookup(a.id) if isinstance(a, A.Name) else None
        if sym is not None and sym.extent is not None and d is not None and sym.extent > d:
            ck.error(f"'{a.id}' cuts a dimension of {d} into {sym.extent} chunks; the tile "
                     "factor exceeds the dimension", a.loc)


def _subspan(ck, n: A.MethodCall, base) -> None:
    dims = _static_dims(ck, n.base)
    if dims is None or len(dims) != len(n.args):
        return
    for a, d in zip(n.args, dims):
        v = ck.fold(a)
        if v is not None and d is not None and v > d:
            ck.error(f"the tile extent {v} is larger than the dimension it cuts ({d})", a.loc)
        elif v is not None and v <= 0:
            ck.error(f"the tile extent {v} must be positive", a.loc)


def _at(ck, n: A.MethodCall, base) -> None:
    """A constant tile index past the grid of `x.subspan(t...)`."""
    inner = n.base
    if n.method == "from" or not (isinstance(inner, A.MethodCall) and inner.method == "subspan"):
        return
    dims = _static_dims(ck, inner.base)
    if dims is None or len(dims) != len(inner.args) or len(n.args) != len(dims):
        return
    for a, d, t in zip(n.args, dims, inner.args):
        i, tile = ck.fold(a), ck.fold(t)
        if None in (i, tile, d) or tile <= 0:
            continue
        tiles = -(-d // tile)
        if i < 0 or i >= tiles:
            ck.error(f"tile index {i} is outside the {tiles} tiles of this dimension", a.loc)


def _sqz(ck, n: A.MethodCall, base) -> None:
    inner = n.base
    while isinstance(inner, A.MethodCall) and inner.method not in _RESHAPING:
        inner = inner.base
    if not isinstance(inner, A.MethodCall):
        ck.error("'.sqz()' follows a '.subspan', '.span_as' or '.view', whose unit "
                 "dimensions it removes", n.loc)


def _from(ck, n: A.MethodCall, base) -> None:
    """`x.view(e...).from(o...)`: a constant window stays inside the data."""
    inner = n.base
    if not (isinstance(inner, A.MethodCall) and inner.method == "view") or inner.strides:
        return
    dims = _static_dims(ck, inner.base)
    if dims is None or not len(dims) == len(inner.args) == len(n.args):
        return
    for o, e, d in zip(n.args, inner.args, dims):
        off, ext = ck.fold(o), ck.fold(e)
        if None in (off, ext, d):
            continue
        if off < 0 or off + ext > d:
            ck.error(f"the window [{off}, {off + ext}) leaves a dimension of {d}", o.loc)


_METHODS = {"chunkat": _chunkat, "subspan": _subspan, "at": _at, "from": _from, "sqz": _sqz}


def _static_dims(ck, e) -> Optional[list]:
    """The constant dimensions of a buffer or parameter named by `e`, if written."""
    if not isinstance(e, A.Name):
        return None
    sym = ck.lookup(e.id)
    return sym.dims if sym is not None else None


RULES = {
    A.MethodCall: [method],
}
