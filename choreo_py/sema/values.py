"""What a name means during semantic analysis, and the scopes that hold names.

Sema evaluates the program's compile-time structure: shapes, views and the
roles of names. A name is bound to one of the `Value` kinds below; scalar
values carry the IR expression that computes them (a `Const` when known at
compile time, else a `Sym` naming an IR `Let`/`Var`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from .. import ir
from ..diagnostics import ChoreoError
from ..source import Loc


class Unsupported(ChoreoError):
    """A valid construct the tile IR (and so the backends) cannot express yet."""

    def __init__(self, construct: str, loc: Loc | None) -> None:
        super().__init__(f"{construct} is not supported by the tile IR yet", loc)
        self.construct = construct


class Refused(Unsupported):
    """A construct the rule checks (choreo_py/check/) refuse, met by a build they did not
    run before (the interpreter's): refused in their words; like any Unsupported, it
    leaves the function to the rules where the analysis is lenient (`choreo check`)."""

    def __init__(self, message: str, loc: Loc | None) -> None:
        ChoreoError.__init__(self, message, loc)
        self.construct = message


class ShapeNotYetKnown(Unsupported):
    """An accumulator's shape is used before the MMA that gives it (sema looks ahead for it)."""


@dataclass
class Value:
    loc: Optional[Loc] = field(default=None, kw_only=True)


@dataclass
class Scalar(Value):
    expr: ir.Expr
    mutable: bool = False
    bound: Optional[ir.Expr] = None  # upper bound of a bounded variable (`#p`)
    kind: str = "let"  # let | var | index | dim | const
    # A rank-1 bounded ituple used as the integer it holds (`with k in [8]`): `k(0)` is
    # its element 0, `k` itself; `k(-1)` is the offset form, as for any bounded integer.
    ituple1: bool = False

    @property
    def dtype(self) -> str:
        return self.expr.dtype


@dataclass
class Tensor(Value):
    """A global parameter."""
    param: ir.Param


@dataclass
class BufferValue(Value):
    buffer: ir.Buffer


@dataclass
class ViewValue(Value):
    view: ir.View
    dtype: str


@dataclass
class TilingValue(Value):
    """`x.subspan(...)` or `x.subspan(...).step(...)` before `.at(...)`."""
    tiling: object  # views.Tiling
    dtype: str


@dataclass
class EventValue(Value):
    event: ir.Event


@dataclass
class FutureValue(Value):
    name: str
    kind: str  # "tma" (global->shared) | "tma_store" | "dma" | "mma"
    dst: Optional[ir.View] = None
    done: bool = False  # the operation was made synchronous
    rotated: bool = False  # exchanged by `swap` / `rotate` (sema/rotations.py)


@dataclass
class FragValue(Value):
    frag: ir.Frag


@dataclass
class ShapeValue(Value):
    """An mdspan: `[a, b]`, `x.span`."""
    dims: tuple[ir.Expr, ...]
    of_frag: Optional[str] = None  # `acc.span`: the fragment it came from


@dataclass
class ITupleValue(Value):
    elems: tuple[ir.Expr, ...]


@dataclass
class BoundedTuple(ITupleValue):
    """A bounded ituple (`with index = {x, y} in [6, 17]`, sema/iterate.py): the names of its
    bounded integers, outer to inner, whose values and bounds the scope holds."""

    parts: tuple[str, ...] = ()


@dataclass
class Opaque(Value):
    """A name declared by a statement sema skipped as unsupported; using it is unsupported too."""
    construct: str = ""


#: AST statement fields that name what the statement declares.
def declared_names(stmt) -> list[str]:
    from ..frontend import ast as A

    names = []
    for attr in ("name", "future"):
        v = getattr(stmt, attr, None)
        if isinstance(v, str):
            names.append(v)
    target = getattr(stmt, "target", None)
    if isinstance(target, A.Name) and (not isinstance(stmt, A.Assign) or stmt.op == "="):
        names.append(target.id)
    names += getattr(stmt, "region_names", [])  # a region of the host (sema/host_regions.py)
    return names


class Scope:
    """A chain of name tables: a block's names shadow the enclosing ones."""

    def __init__(self, parent: "Scope | None" = None) -> None:
        self.parent = parent
        self.names: dict[str, Value] = {}

    def lookup(self, name: str) -> Value | None:
        s: Scope | None = self
        while s is not None:
            if name in s.names:
                return s.names[name]
            s = s.parent
        return None

    def visible(self) -> list[str]:
        """Every name this scope sees (for "did you mean" hints)."""
        out: list[str] = []
        s: Scope | None = self
        while s is not None:
            out += [n for n in s.names if not n.startswith("<->")]  # sema/iterate.py WHERE
            s = s.parent
        return out

    def local(self, name: str) -> Value | None:
        return self.names.get(name)

    def owner(self, name: str) -> "Scope | None":
        """The scope whose table holds the `name` this scope sees."""
        s: Scope | None = self
        while s is not None and name not in s.names:
            s = s.parent
        return s

    def encloses(self, other: "Scope | None") -> bool:
        """Whether this scope is `other` or one of the scopes around it."""
        while other is not None and other is not self:
            other = other.parent
        return other is self

    def bind(self, name: str, value: Value) -> None:
        self.names[name] = value

    def child(self) -> "Scope":
        return Scope(self)


def seen_by_assignment(scope: "Scope", name: str, dims: dict):
    """What an assignment to `name` finds, in the terms of the one assignment rule
    (frontend/bindings.py): a scalar variable or value, or something else; `dims`, the
    dimension names the build fixed (parameters)."""
    from ..frontend import bindings

    old = scope.lookup(name)
    if old is None:
        return None
    kind = old.kind if isinstance(old, Scalar) else None
    fixed = "a parameter" if kind in ("arg", "dim") or name in dims else \
        "a bounded variable" if kind == "index" else ""
    return bindings.Seen(mutable=isinstance(old, Scalar) and old.mutable,
                         scalar=isinstance(old, Scalar), local=scope.local(name) is not None,
                         loc=getattr(old, "loc", None), fixed=fixed)


def kind_of(v: Value) -> str:
    """What a value is, in a diagnostic's words ("a buffer", "an event", ...)."""
    return {
        "Scalar": "a scalar", "Tensor": "a global tensor", "BufferValue": "a buffer",
        "ViewValue": "a view", "TilingValue": "a tiling", "EventValue": "an event",
        "FutureValue": "a future", "FragValue": "a fragment", "ShapeValue": "a shape",
        "ITupleValue": "an ituple",
    }.get(type(v).__name__, "a value")
