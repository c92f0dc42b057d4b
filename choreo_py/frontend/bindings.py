"""What `name = expr` binds: the language's one rule, read by the rule checks
(choreo_py/check/), sema (choreo_py/sema/, which builds the IR the interpreter
and the backends run) and nothing else.

The language (the reference's type system):

  - `mutable T x = e;`, `mutable x = e;`: a variable.
  - `s32 x = e;`, `f32 y;`: a scalar of a data element type is a variable too
    (mutable by default, as `mutable s32 x` is).
  - `int x = e;`, `bool b = e;`, `auto x = e;`: a control scalar, initialised once
    and never changed.
  - `x = e;` where no `x` is visible: declares `x`, initialised once (immutable).
  - `x = e;` (or `x += e;`, `x++`) where a variable `x` is visible, in this block or
    any enclosing one: updates that variable.  In a loop body this is the loop-carried
    update (`i = i + 1;` counts).
  - `x = e;` where an immutable scalar `x` is visible, in any enclosing block: an
    error at the assignment.  It never silently declares a second `x` for the rest of
    the inner block: that would leave the enclosing `x` unchanged (a `while (i < 8)`
    whose `i` never counts) with nothing said.

Names that are not scalars (views, tilings, buffers, futures, shapes) follow their
own rules (a future is re-issued, a view may be named again in an inner block); the
callers keep those.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from . import ast as A

#: Control scalars: immutable unless declared `mutable`.  Scalars of a data
#: element type (`s32 a;`, `f32 x = 0.0f;`) are variables, mutable by default.
CONTROL_SCALARS = frozenset({"int", "bool", "auto", "index"})

DECLARE = "declare"   # a new immutable name in the assignment's block
UPDATE = "update"     # the visible variable takes the value
REFUSE = "refuse"     # an error at the assignment (Decision.message)


def element_typed(s: A.ScalarDecl) -> bool:
    """`s32 x = ...`: a scalar of a data element type (not a control scalar)."""
    return s.type is not None and s.type.spelling not in CONTROL_SCALARS


def decl_mutable(s: A.ScalarDecl) -> bool:
    """Whether a scalar declaration declares a variable (see the module docstring)."""
    return s.mutable or element_typed(s)


@dataclass(frozen=True)
class Seen:
    """What an assignment finds under its name: whether it is a variable, whether it
    is a scalar (the values this rule decides), whether it was declared in the
    assignment's own block, and where."""

    mutable: bool
    scalar: bool = True
    local: bool = False
    loc: object = None
    fixed: str = ""   # what can never be a variable: "a parameter", "a bounded variable"


@dataclass(frozen=True)
class Decision:
    action: str
    message: str = ""


def assignment(name: str, op: str, seen: Optional[Seen]) -> Decision:
    """What the assignment `name op ...` does (op: "=", "+=", ..., "++"); a compound one
    (`+=`, `++`) of a name not declared reads it, and that read is what is reported."""
    if seen is None:
        return Decision(DECLARE)
    if seen.mutable:
        return Decision(UPDATE)
    if not seen.scalar:
        return Decision(DECLARE if op == "=" and not seen.local else UPDATE)
    at = f"declared at {seen.loc.line}:{seen.loc.col}" if seen.loc is not None else ""
    if seen.fixed:
        where = f" ({at})" if at else ""
        return _refuse(f"'{name}' is {seen.fixed}{where}, which can not be assigned; copy it "
                       "into a 'mutable' variable to change the copy")
    if seen.local:
        where = f" ({at})" if at else ""
        return _refuse(f"'{name}' is immutable{where} and can not be assigned; declare it "
                       "'mutable' to change it")
    where = f" ({at}, outside this block)" if at else " (outside this block)"
    return _refuse(f"'{name}' is immutable{where} and can not be assigned; declare it "
                   "'mutable' to change it (an assignment in an inner block updates the "
                   "enclosing variable, it declares no new one)")


def _refuse(message: str) -> Decision:
    return Decision(REFUSE, message)


def written_names(root: A.Node) -> frozenset:
    """The names some statement under `root` assigns or increments: a variable that none
    of them changes keeps its initial value, so it may be folded like a constant."""
    out = set()
    for node in A.walk(root):
        if isinstance(node, A.Assign) and isinstance(node.target, A.Name):
            out.add(node.target.id)
        elif isinstance(node, A.Unary) and node.op in ("++", "--", "post++", "post--") \
                and isinstance(node.operand, A.Name):
            out.add(node.operand.id)
    return frozenset(out)
