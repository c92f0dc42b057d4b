"""The names a program may give: not the language's own words, one function per name.

Choreo reserves its keywords and its type names: the reference compiler's lexer
turns them into tokens of their own inside a `__co__` function, so no
declaration can take them (a function, parameter, dimension, loop variable,
buffer or scalar named `global`, `with` or `s32` is not a Choreo program). Our
parser is more forgiving in places (a keyword in a name's position where the
grammar is unambiguous), so check refuses them here, at the name.

Any other identifier is the program's: a Python keyword (`lambda`) or a word the
generated pyptx/PTX uses (`reg`, `smem`) is a valid Choreo name, and the backends
mangle it (lowering/core/names.py), never the program.

Two functions of one name in a file are a redefinition (C's rule): the reference
compiles one module, and a file whose second `k` silently replaced the first (or
emitted two PTX entries of one name) is refused at the second definition.
"""
from __future__ import annotations

import dataclasses
from typing import Optional

from ..diagnostics import Diagnostic
from ..frontend import ast as A
from ..frontend.parser import TYPE_NAMES
from ..source import SOURCES, Loc

#: The words of a `__co__` function that the reference lexer makes keywords
#: (statement and clause words, parallel levels, storage, built-ins).
KEYWORDS = frozenset("""
    after all_reduce_sum apply asm assert auto barrier block break by call cdiv cluster
    continue cooperative copy device dma else event false fence foreach frag global goto
    group if in inf inthreads ituple local mdspan mma mutable nullptr parallel print println
    reduce_max reduce_sum return rotate select shared stream swap sync term thread tma
    trigger true unroll vectorize void volatile wait where while with yield
    __asm__ __cpp__ __co__ __device__ __co_device__
""".split())

#: Names a declaration may not take.
RESERVED = KEYWORDS | TYPE_NAMES

#: What a reserved word is, for the message.
def _what(name: str) -> str:
    return "a type name" if name in TYPE_NAMES else "a keyword of Choreo"


def reserved_name(name: Optional[str], loc) -> Optional[Diagnostic]:
    """The error for a declaration named by a reserved word, or None."""
    if not name or name not in RESERVED:
        return None
    return Diagnostic("error", f"'{name}' is {_what(name)} (a reserved word) and cannot be "
                      f"declared as a name; choose another name, e.g. '{name}_'",
                      name_loc(name, loc))


def name_loc(name: str, loc: Optional[Loc]) -> Optional[Loc]:
    """Where `name` is written at or after `loc` on its line (a node's location is where
    its construct starts: `__co__ void k(...)` starts at `__co__`)."""
    if loc is None:
        return None
    text = SOURCES.line(loc) or ""
    at = _word_at(text, name, max(loc.col - 1, 0))
    return Loc(loc.file, loc.line, at + 1) if at >= 0 else loc


def _word_at(text: str, word: str, start: int) -> int:
    """The first whole-word occurrence of `word` in `text` from `start`, or -1."""
    i = text.find(word, start)
    while i >= 0:
        before = text[i - 1] if i > 0 else " "
        after = text[i + len(word)] if i + len(word) < len(text) else " "
        if not (before.isalnum() or before == "_") and not (after.isalnum() or after == "_"):
            return i
        i = text.find(word, i + 1)
    return -1


def function_names(program: A.Program, building: bool = False) -> list[Diagnostic]:
    """Reserved function names; a second function of a name and parameter types already
    defined (C++'s rule: the reference's functions overload by their parameters); and,
    when `building`, overloads at all: a PTX module has one entry per name."""
    found, first, sigs = [], {}, {}
    for fn in program.functions:
        d = reserved_name(fn.name, fn.loc)
        if d is not None:
            found.append(d)
        at = name_loc(fn.name, fn.loc)
        sig = (fn.name, tuple(_shape(p.type) for p in fn.params))
        if sig in sigs:
            prev = sigs[sig]
            where = f" (first defined at {prev.line}:{prev.col})" if prev else ""
            found.append(Diagnostic("error", f"redefinition of '{fn.name}'{where}", at))
        elif fn.name in first and building:
            prev = first[fn.name]
            where = f" (another at {prev.line}:{prev.col})" if prev else ""
            found.append(Diagnostic("error", f"overloaded functions of one name '{fn.name}'"
                                    f"{where} are not compiled: a PTX module has one entry "
                                    "per name; rename one", at))
        sigs.setdefault(sig, at)
        first.setdefault(fn.name, at)
    return found


def _shape(node):
    """A type as a comparable value: the AST without its locations."""
    if isinstance(node, list):
        return tuple(_shape(x) for x in node)
    if not isinstance(node, A.Node):
        return node
    return (type(node).__name__,) + tuple(
        _shape(getattr(node, f.name)) for f in dataclasses.fields(node)
        if f.name not in ("loc", "spelling") and not f.name.endswith("_loc"))

