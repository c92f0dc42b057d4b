"""`++` / `--` inside an expression: `a.at(i++) = v;`, `x = i++ + 1;`, `f(++i)`.

C's meaning: the operand's value before (postfix) or after (prefix) it changes by one.
Sema evaluates a statement's expression once, in order, emitting what it computes
before the statement itself; an increment met there becomes `let t = i; i = i + 1`
(postfix) or `i = i + 1; let t = i` (prefix) and the expression reads `t`. That is C's
result wherever the expression is evaluated exactly once and the variable is named
nowhere else in it, which `increments_ok` decides per statement:

  - a declaration, an assignment or an expression statement (not a loop's or a
    branch's condition: evaluated each time, not once before);
  - no `?:`, `&&` or `||` (an operand evaluated only sometimes);
  - the incremented variable named once in the statement (`i++ + i` is unsequenced in
    C: no answer to give).

Elsewhere the increment is refused by name with its location. Two other forms of a
scalar statement the reference's CPU model gives a value live here too: `__alignup` /
`__aligndown` as values (`align`) and `s32 r;`, a variable that starts at zero
(`zero_decl`).
"""
from __future__ import annotations

from collections import Counter
from contextlib import contextmanager

from ..diagnostics import ChoreoError
from ..frontend import ast as A
from ..frontend.bindings import decl_mutable
from .. import ir
from ..ir import build as B
from .values import Scalar, Unsupported

INCREMENTS = ("++", "--", "post++", "post--")


def _err(message: str, node) -> ChoreoError:
    return ChoreoError(message, getattr(node, "loc", None))
_ONCE = (A.ScalarDecl, A.Assign, A.ExprStmt)


def increments_ok(node) -> bool:
    """Whether an increment inside this statement's expressions can be evaluated in turn."""
    if not isinstance(node, _ONCE):
        return False
    names: Counter = Counter()
    incremented = []
    for n in A.walk(node):
        if isinstance(n, (A.Ternary, A.Block)) or (isinstance(n, A.Binary)
                                                  and n.op in ("&&", "||")):
            return False
        if isinstance(n, A.Name):
            names[n.id] += 1
        if isinstance(n, A.Unary) and n.op in INCREMENTS and isinstance(n.operand, A.Name):
            incremented.append(n.operand.id)
    return all(names[x] == 1 for x in incremented)


@contextmanager
def increments_in(builder, node):
    """While `builder` builds the statement `node`: whether its increments may be hoisted."""
    saved, builder.increments_ok = getattr(builder, "increments_ok", False), increments_ok(node)
    try:
        yield
    finally:
        builder.increments_ok = saved


def has_increment(node) -> bool:
    """Whether an expression changes a variable (evaluating it twice would change it twice)."""
    return any(isinstance(n, A.Unary) and n.op in INCREMENTS for n in A.walk(node))


def increment_in_expr(self, n: A.Unary) -> Scalar:
    """`i++` / `++i` inside a statement's expression (sema/increments.py): the value
    before / after, kept in a fresh let, with the increment emitted in turn."""
    if not getattr(self, "increments_ok", False) or not hasattr(self, "increment"):
        raise Unsupported(f"'{n.op.replace('post', '')}' inside this expression (an "
                          "operand evaluated more than once or only sometimes, or a "
                          "variable also named elsewhere in the statement)", n.loc)
    if not n.op.startswith("post"):
        self.increment(n)
    v = self.scope.lookup(n.operand.id) if isinstance(n.operand, A.Name) else None
    if not isinstance(v, Scalar) or not v.mutable:
        raise _err(f"'{n.op.replace('post', '')}' needs a mutable variable", n)
    self.increment_count = getattr(self, "increment_count", 0) + 1
    name = f"{n.operand.id}__inc{self.increment_count}"
    self.emit(ir.Let(name, v.expr, loc=n.loc))
    if n.op.startswith("post"):
        self.increment(n)
    return Scalar(ir.Sym(name, v.expr.dtype), kind="let")


def align(self, n: A.CallExpr) -> Scalar:
    """`__alignup(v, a)` / `__aligndown(v, a)`: v rounded up / down to a multiple of a
    (integers; the reference's CPU model: tools/co-mock/mock_interp.cpp CallBIF,
    `((v + a - 1) / a) * a` and `(v / a) * a`)."""
    if len(n.args) != 2:
        raise _err(f"'{n.func}' takes 2 argument(s), not {len(n.args)}", n)
    v, a = (self.scalar(x) for x in n.args)
    for x, node in ((v, n.args[0]), (a, n.args[1])):
        if ir.is_float(x.dtype) or x.dtype == "bool":
            raise _err(f"'{n.func}' needs integer operands, not {x.dtype}", node)
    if B.as_int(a) is not None and B.as_int(a) <= 0:
        raise _err(f"'{n.func}' needs a positive alignment, not {B.as_int(a)}", n.args[1])
    if n.func == "__alignup":
        v = B.binop("-", B.add(v, a), B.const(1))
    return Scalar(B.mul(B.binop("/", v, a), a))


def zero_decl(self, s: A.ScalarDecl) -> None:
    """`s32 r;` (a data element type, or `mutable`): a variable that starts at zero, as
    the reference's CPU model makes it (tools/co-mock/mock_interp.cpp
    `ExecNamedVariableDecl`: a scalar without an initialiser is 0 of its type). An
    immutable `int b;` was refused by the rule checks (choreo_py/check/initialisers.py)."""
    dtype = s.type.name
    if not (s.mutable or decl_mutable(s)) or dtype not in ir.DTYPE_BITS:
        raise _err(f"the {s.type.spelling} '{s.name}' is immutable and needs an initial "
                   "value (or declare it 'mutable')", s)
    zero = ir.Const(0.0 if ir.is_float(dtype) else (False if dtype == "bool" else 0), dtype)
    self.emit(ir.Var(s.name, dtype, zero, loc=s.loc))
    self.scope.bind(s.name, Scalar(ir.Sym(s.name, dtype), mutable=True, kind="var", loc=s.loc))
