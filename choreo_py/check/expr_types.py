"""The type of each expression, from its children's types (see `types`).

One function per AST expression node, in `EXPR_TYPE`; `walker.Checker.expr`
calls them bottom-up.  Each returns `UNKNOWN_T` whenever the program does not
fix the answer, so that the rules stay silent rather than guess.
"""
from __future__ import annotations

from typing import Callable, Optional

from ..frontend import ast as A
from . import types as Ty
from .types import T

#: Methods whose result is spanned data of the base's rank.
VIEW_METHODS = frozenset({"subspan", "chunkat", "chunk", "at", "step", "from", "view",
                          "span_as", "modspan", "stride", "zfill", "sqz", "squeeze"})


def _rank_of(t: T) -> Optional[int]:
    """How many scalars a value stands for inside `[...]` or `{...}`."""
    if t.kind in (Ty.INT, Ty.FLOAT, Ty.BOOL):
        return 1
    if t.kind in (Ty.MDSPAN, Ty.ITUPLE, Ty.BOUNDED):
        return t.rank
    return None


def _t_name(ck, n: A.Name) -> T:
    sym = ck.use(n.id, n.loc)
    return sym.type if sym is not None else Ty.UNKNOWN_T


def _t_unary(ck, n: A.Unary) -> T:
    if n.op == "!":
        return Ty.BOOL_T
    if n.op == "&":
        return Ty.UNKNOWN_T
    return ck.t(n.operand)


COMPARE = frozenset({"==", "!=", "<", ">", "<=", ">=", "&&", "||"})


def _t_binary(ck, n: A.Binary) -> T:
    if n.op in COMPARE:
        return Ty.BOOL_T
    lt, rt = ck.t(n.lhs), ck.t(n.rhs)
    for t in (lt, rt):
        if t.kind in (Ty.MDSPAN, Ty.ITUPLE):
            # `sp / [..]` and `sp % [..]` give ituples (tile counts, remainders)
            both = lt.kind in (Ty.MDSPAN, Ty.DATA) and rt.kind in (Ty.MDSPAN, Ty.DATA)
            return T(Ty.ITUPLE, rank=t.rank) if both and n.op in ("/", "%") else t
    if Ty.FLOAT in (lt.kind, rt.kind):
        return Ty.FLOAT_T
    if lt.kind in (Ty.INT, Ty.BOUNDED) and rt.kind in (Ty.INT, Ty.BOUNDED):
        return Ty.INT_T if not n.op.startswith("#") else lt
    return Ty.UNKNOWN_T


def _t_ternary(ck, n: A.Ternary) -> T:
    return ck.t(n.then) if ck.t(n.then).kind != Ty.UNKNOWN else ck.t(n.otherwise)


def _t_ubound(ck, n: A.UBound) -> T:
    ck.use(n.name, n.loc)
    return Ty.INT_T


def _t_ituple(ck, n: A.ITupleLit) -> T:
    return T(Ty.ITUPLE, rank=_sum_ranks(ck, n.elements))


def _t_mdspan(ck, n: A.MdSpanLit) -> T:
    return T(Ty.MDSPAN, rank=_sum_ranks(ck, n.elements))


def _sum_ranks(ck, elements) -> Optional[int]:
    total = 0
    for e in elements:
        r = _rank_of(ck.t(e))
        if r is None:
            return None
        total += r
    return total


def _t_index(ck, n: A.Index) -> T:
    base = ck.t(n.base)
    if any(isinstance(i, A.DimIndex) or i.parenthesized for i in n.indices):
        return T(Ty.MDSPAN, rank=len(n.indices))    # `x[(1), (0)]`: a derived shape
    if base.kind == Ty.DATA:
        return Ty.scalar_of(base.elem) if base.array is None else base.with_(array=None)
    if base.kind == Ty.EVENT:
        return base.with_(array=None)
    if base.kind in (Ty.MDSPAN,):
        return T(Ty.MDSPAN, rank=len(n.indices))
    if base.kind == Ty.FUTURE:
        return base
    return Ty.UNKNOWN_T


def _t_member(ck, n: A.Member) -> T:
    base = ck.t(n.base)
    if n.name == "span":
        return T(Ty.MDSPAN, rank=base.rank if base.kind in (Ty.DATA, Ty.FUTURE) else None)
    if n.name in ("data", "mdata") and base.kind == Ty.FUTURE:
        return T(Ty.DATA, rank=base.rank, elem=base.elem)
    return Ty.UNKNOWN_T


def _t_method(ck, n: A.MethodCall) -> T:
    base = ck.t(n.base)
    if base.kind == Ty.EVENT and n.method == "at":
        return base.with_(array=None)
    if base.kind != Ty.DATA or n.method not in VIEW_METHODS:
        return Ty.UNKNOWN_T
    if n.method in ("sqz", "squeeze", "view", "span_as"):
        return base.with_(rank=None, array=None)
    return base.with_(array=None)


def _t_call(ck, n: A.CallExpr) -> T:
    if n.func == "select" and len(n.args) > 1:
        return ck.t(n.args[1])
    if n.func in ("cdiv", "__alignup", "__aligndown"):
        return Ty.INT_T
    if n.func == "__isfinite":
        return Ty.BOOL_T
    return Ty.UNKNOWN_T


def _t_cast(ck, n: A.Cast) -> T:
    return Ty.scalar_of(n.target.name) if n.target else Ty.UNKNOWN_T


EXPR_TYPE: dict[type, Callable] = {
    A.IntLit: lambda ck, n: Ty.INT_T,
    A.FloatLit: lambda ck, n: Ty.FLOAT_T,
    A.BoolLit: lambda ck, n: Ty.BOOL_T,
    A.StringLit: lambda ck, n: Ty.STRING_T,
    A.Name: _t_name,
    A.Unary: _t_unary,
    A.Binary: _t_binary,
    A.Ternary: _t_ternary,
    A.UBound: _t_ubound,
    A.SizeOf: lambda ck, n: Ty.INT_T,
    A.ITupleLit: _t_ituple,
    A.MdSpanLit: _t_mdspan,
    A.DimIndex: lambda ck, n: Ty.INT_T,
    A.Index: _t_index,
    A.ITupleSelect: lambda ck, n: T(Ty.ITUPLE, rank=len(n.indices)),
    A.DimOf: lambda ck, n: Ty.INT_T,
    A.Member: _t_member,
    A.MethodCall: _t_method,
    A.CallExpr: _t_call,
    A.Cast: _t_cast,
}
