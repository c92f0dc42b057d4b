"""Initialisers: what a declaration may be initialised with.

An ituple is written `{...}` with as many elements as its declared rank; a
`bool` is not made from an integer (Choreo has no implicit int -> bool); an
mdspan is a shape, so it is not made from a scalar or an ituple (`[n]` or
`{...}` say which is meant); strings exist only as literals handed to
`print`/`println`.  Shape arithmetic combines shapes of one rank and never
booleans.
"""
from __future__ import annotations

from ..frontend import ast as A
from . import types as Ty


def ituple_decl(ck, s: A.ITupleDecl) -> None:
    v = ck.t(s.value)
    if v.kind in (Ty.INT, Ty.FLOAT, Ty.BOOL, Ty.MDSPAN):
        ck.error(f"the ituple '{s.name}' is initialised with {Ty.describe(v.kind)}; write it "
                 "as '{...}'", s.value.loc)
    elif s.rank is not None and v.kind == Ty.ITUPLE and v.rank is not None and v.rank != s.rank:
        ck.error(f"the ituple '{s.name}' has {s.rank} elements but is initialised with "
                 f"{v.rank}", s.value.loc)


def mdspan_decl(ck, s: A.MdSpanDecl) -> None:
    v = ck.t(s.value)
    if v.kind in (Ty.INT, Ty.FLOAT, Ty.BOOL, Ty.ITUPLE, Ty.STRING):
        ck.error(f"the mdspan '{s.name}' can not be made from {Ty.describe(v.kind)}", s.value.loc)
    elif s.rank is not None and v.kind == Ty.MDSPAN and v.rank is not None and v.rank != s.rank:
        ck.error(f"the mdspan '{s.name}' has rank {s.rank} but is initialised with a "
                 f"rank-{v.rank} shape", s.value.loc)


def scalar_decl(ck, s: A.ScalarDecl) -> None:
    if s.init is None:
        if not s.mutable and s.type is not None and s.type.spelling in ("int", "bool"):
            ck.error(f"the {s.type.spelling} '{s.name}' is immutable and needs an initial "
                     "value (or declare it 'mutable')", s.loc)
        elif s.type is None or s.type.name == "auto":
            ck.error(f"'{s.name}' has neither a type nor an initial value to take one from",
                     s.loc)
        return
    v = ck.t(s.init)
    if v.kind == Ty.STRING:
        ck.error(f"'{s.name}': string variables are not part of Choreo; pass the literal "
                 "to 'println' directly", s.init.loc)
    elif s.type is not None and s.type.name == "bool" and v.kind in (Ty.INT, Ty.FLOAT):
        ck.error(f"the bool '{s.name}' can not be initialised with {Ty.describe(v.kind)}; compare "
                 "it (e.g. 'x != 0')", s.init.loc)
    elif s.type is not None and Ty.scalar_of(s.type.name).kind in Ty.SCALARS and \
            v.kind in (Ty.ITUPLE, Ty.MDSPAN, Ty.FUTURE, Ty.EVENT):
        ck.error(f"'{s.name}' of type {s.type.spelling} can not be initialised with "
                 f"{Ty.describe(v.kind)}", s.init.loc)


def assign_decl(ck, s: A.Assign) -> None:
    if ck.extra.get("assign_declares") and ck.t(s.value).kind == Ty.STRING:
        ck.error(f"'{s.target.id}': string variables are not part of Choreo; pass the "
                 "literal to 'println' directly", s.value.loc)


def shape_arith(ck, n: A.Binary) -> None:
    if n.op in ("==", "!=", "&&", "||", "<", ">", "<=", ">=") or n.op.startswith("#"):
        return
    lt, rt = ck.t(n.lhs), ck.t(n.rhs)
    shaped = [t for t in (lt, rt) if t.kind in (Ty.MDSPAN, Ty.ITUPLE)]
    if not shaped:
        return
    if Ty.BOOL in (lt.kind, rt.kind):
        ck.error(f"operator '{n.op}' can not combine {Ty.describe(shaped[0].kind)} with a bool",
                 n.loc)
    elif len(shaped) == 2 and None not in (lt.rank, rt.rank) and lt.rank != rt.rank:
        ck.lenient_error(f"operator '{n.op}' on shapes of different ranks ({lt.rank} vs. "
                         f"{rt.rank})", n.loc)



RULES = {
    A.ITupleDecl: [ituple_decl],
    A.MdSpanDecl: [mdspan_decl],
    A.ScalarDecl: [scalar_decl],
    A.Assign: [assign_decl],
    A.Binary: [shape_arith],
}
