"""Mutability: only `mutable` variables change after their declaration.

Choreo values are immutable unless declared `mutable` (host code included);
ituples and mdspans describe shapes and index spaces and never change; and
what defines a shape (an ituple, an mdspan, a buffer's dimensions) may not
depend on a mutable, since shapes are fixed when storage is laid out.
"""
from __future__ import annotations

from ..frontend import ast as A
from ..frontend import bindings
from . import types as Ty

#: Kinds a `mutable` declaration can make changeable.
_VALUE_KINDS = (Ty.INT, Ty.FLOAT, Ty.BOOL, Ty.UNKNOWN)


def _reassign(ck, name: str, loc, op: str = "=") -> None:
    sym = ck.lookup(name)
    if sym is None or sym.mutable:
        return
    kind = sym.type.kind
    if kind in (Ty.ITUPLE, Ty.MDSPAN):
        ck.error(f"'{name}' is an {kind}; {kind}s can not be re-assigned", loc)
        return
    decision = bindings.assignment(name, op, ck.seen(name))
    if decision.action == bindings.REFUSE:
        ck.lenient_error(decision.message, loc)


def assign(ck, s: A.Assign) -> None:
    if isinstance(s.target, A.Name):
        if s.op != "=" or not ck.extra.get("assign_declares"):
            _reassign(ck, s.target.id, s.target.loc, s.op)
        elif ck.extra.get("assign_declares"):
            _no_mutable_in_shape(ck, s.value, s.value)


def increment(ck, u: A.Unary) -> None:
    if u.op in ("++", "--", "post++", "post--") and isinstance(u.operand, A.Name):
        _reassign(ck, u.operand.id, u.operand.loc, "++")


def _mutable_name(ck, root):
    for node in A.walk(root):
        if isinstance(node, A.Name):
            sym = ck.lookup(node.id)
            if sym is not None and sym.written_mutable and sym.type.kind in _VALUE_KINDS:
                return node
    return None


def _no_mutable_in_shape(ck, value, where) -> None:
    """`{a, b}` / `[a, b]` literals must not read mutables."""
    if isinstance(value, (A.ITupleLit, A.MdSpanLit)):
        bad = _mutable_name(ck, value)
        if bad is not None:
            what = "an ituple" if isinstance(value, A.ITupleLit) else "an mdspan"
            ck.error(f"the mutable '{bad.id}' can not define {what}", bad.loc)


def ituple_decl(ck, s: A.ITupleDecl) -> None:
    bad = _mutable_name(ck, s.value)
    if bad is not None:
        ck.error(f"the mutable '{bad.id}' can not define an ituple", bad.loc)


def mdspan_decl(ck, s: A.MdSpanDecl) -> None:
    bad = _mutable_name(ck, s.value)
    if bad is not None:
        ck.error(f"the mutable '{bad.id}' can not define an mdspan", bad.loc)


def buffer_dims(ck, s) -> None:
    dims = list(s.type.dims or ()) if getattr(s, "type", None) else []
    for d in dims + list(s.array_dims):
        if isinstance(d, A.DimWildcard):
            continue
        bad = _mutable_name(ck, d)
        if bad is not None:
            ck.error(f"the mutable '{bad.id}' can not be a buffer dimension", bad.loc)


def mutable_decl(ck, s: A.ScalarDecl) -> None:
    t = ck.t(s.init) if s.init is not None else Ty.UNKNOWN_T
    if s.mutable and t.kind in (Ty.ITUPLE, Ty.MDSPAN) and s.type is None:
        ck.error(f"'{s.name}' is an {t.kind}; {t.kind}s can not be 'mutable'", s.loc)


RULES = {
    A.Assign: [assign],
    A.Unary: [increment],
    A.ITupleDecl: [ituple_decl],
    A.MdSpanDecl: [mdspan_decl],
    A.BufferDecl: [buffer_dims],
    A.FragDecl: [buffer_dims],
    A.ScalarDecl: [mutable_decl],
}
