"""The checker's model of what a name or an expression is.

The model is deliberately coarse: enough to tell an integer from a boolean,
an ituple from an mdspan, spanned data from a future or an event, and to
carry a rank and an element type where the program fixes them.  Anything
it cannot tell is `UNKNOWN`, and every rule stays silent on an unknown: a
rule reports only what is certain, so that valid programs are never refused.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Optional

from ..source import Loc

# kinds
INT, FLOAT, BOOL, STRING = "int", "float", "bool", "string"
ITUPLE, MDSPAN, BOUNDED = "ituple", "mdspan", "bounded"
DATA, FUTURE, EVENT, FRAG = "data", "future", "event", "frag"
VOID, UNKNOWN = "void", "unknown"

SCALARS = (INT, FLOAT, BOOL)
INT_TYPES = {"s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64", "int", "index"}
FLOAT_TYPES = {"f16", "bf16", "f32", "f64", "f8", "f8_e4m3", "f8_e5m2", "tf32", "half",
               "float", "double", "f6_e2m3", "f6_e3m2", "f4_e2m1"}


@dataclass(frozen=True)
class T:
    """A type. `rank` is the number of dimensions (mdspan, ituple, data, future,
    bounded) when known; `elem` the element type of data and futures."""
    kind: str
    rank: Optional[int] = None
    elem: Optional[str] = None
    storage: Optional[str] = None
    is_async: bool = False
    placeholder: bool = False     # `f = dma.any;`
    array: Optional[int] = None   # rank of a buffer/event array (`e[4]`)

    def with_(self, **kw) -> "T":
        return replace(self, **kw)


UNKNOWN_T = T(UNKNOWN)
INT_T, FLOAT_T, BOOL_T, STRING_T = T(INT), T(FLOAT), T(BOOL), T(STRING)


def scalar_of(name: Optional[str]) -> T:
    """The type of a written scalar type name (`s32`, `f16`, `bool`, `auto`)."""
    if name is None:
        return UNKNOWN_T
    if name == "bool":
        return BOOL_T
    if name in INT_TYPES:
        return INT_T
    if name in FLOAT_TYPES or name.startswith(("f", "bf")):
        return FLOAT_T
    if name == "void":
        return T(VOID)
    return UNKNOWN_T


@dataclass
class Sym:
    """A declared name."""
    name: str
    type: T
    loc: Optional[Loc]
    origin: str = "local"   # param | dim | local | with | foreach | parallel | buffer | ...
    mutable: bool = False
    written_mutable: bool = False  # declared with the `mutable` keyword
    divergent: bool = False  # depends on a parallel variable (thread identity)
    global_param: bool = False
    unknown_dim: bool = False  # derived from a `??` dimension
    waited: bool = False
    level: Optional[str] = None  # for parallel variables: their level
    uses: int = 0
    dims: Optional[list] = None  # constant dimensions of a buffer/parameter (None: unknown)
    sources: tuple = ()          # `h = select(c, f, g)`: waiting h waits f and g
    const: Optional[int] = None
    extent: Optional[int] = None  # a bounded variable's constant extent (`x in [8]`: 8)
    swizzle: Optional[tuple] = None  # (bytes, 'copy'|'mma.load') of the first explicit use  # the value of an immutable integer known when compiling


@dataclass
class Scope:
    """One block's names.  `kind` says what opened it (function, block, with,
    foreach, parallel, inthreads, loop...)."""
    kind: str
    names: dict[str, Sym] = field(default_factory=dict)
    futures: list[Sym] = field(default_factory=list)


def describe(kind: str) -> str:
    """A kind with its article, for messages: 'an ituple', 'a bool'."""
    return {INT: "an integer", FLOAT: "a floating-point value", BOOL: "a bool",
            ITUPLE: "an ituple", MDSPAN: "an mdspan", STRING: "a string", FUTURE: "a future",
            EVENT: "an event", DATA: "spanned data", BOUNDED: "a bounded variable"}.get(kind, kind)
