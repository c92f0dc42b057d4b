"""What the static fault checks know of a kernel's integer scalars at a statement.

Two kinds of knowledge, both exact for what they claim:

- a range per name (interval arithmetic over grid, parallel, role, loop and apply
  indices, the lets derived from them, and the sizes the function's asserts bound;
  None: unknown), which holds for every value the name takes there;
- cases: combinations of values of the indices every one of which some instance runs
  (each instance of `parallel p by 3` runs its body, so p = 0, 1 and 2 all occur; a
  role's members are exactly the instances that run it). A fault for one case is a
  fault of every run reaching the statement, where the range of the name alone would
  hide it among the values that are fine (`a_buf.at(cid + 1)` for cid = 0..1).

A condition on case names splits the cases between the branches; one that cannot be
decided per case, or a branch that jumps (break, continue, yield) on such a condition,
drops the names it reads from the cases (they keep their ranges).
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

from .. import ir
from ..diagnostics import InternalError
from ..ir.eval import EvalError, evaluate

Interval = tuple[float, float]
MAX_CASES = 64  # combinations followed at once (more: the indices keep their ranges only)
MAX_CASE_NAMES = 64  # names a case gives values (more lets of case indices: dependent)


# ---------------------------------------------------------------- intervals

def interval(e: ir.Expr, env: dict) -> Interval | None:
    """The range of integer expression `e` given the ranges of its symbols (None: unknown)."""
    rule = INTERVALS.get(type(e))
    if rule is None:
        raise InternalError(f"static ranges: no rule for the expression kind {type(e).__name__}")
    return rule(e, env)


def _const(e: ir.Const, env) -> Interval | None:
    if isinstance(e.value, bool) or not isinstance(e.value, int):
        return None
    return (e.value, e.value)


def _bin(e: ir.Bin, env) -> Interval | None:
    a, b = interval(e.lhs, env), interval(e.rhs, env)
    if a is None or b is None:
        return None
    return _BIN.get(e.op, lambda a, b: None)(a, b)


def _un(e: ir.Un, env) -> Interval | None:
    a = interval(e.operand, env)
    return (-a[1], -a[0]) if a is not None and e.op == "-" else None


def _select(e: ir.Select, env) -> Interval | None:
    a, b = interval(e.if_true, env), interval(e.if_false, env)
    return (min(a[0], b[0]), max(a[1], b[1])) if a is not None and b is not None else None


def _call(e: ir.Call, env) -> Interval | None:
    if e.fn not in ("min", "max") or len(e.args) != 2:
        return None
    a, b = (interval(x, env) for x in e.args)
    if a is None or b is None:
        return None
    f = min if e.fn == "min" else max
    return (f(a[0], b[0]), f(a[1], b[1]))


def _mul(a: Interval, b: Interval) -> Interval | None:
    if any(math.isinf(x) for x in a + b):
        if a[0] >= 0 and b[0] >= 0:
            return (a[0] * b[0], math.inf)
        return None
    ps = [x * y for x in a for y in b]
    return (min(ps), max(ps))


def _div(a: Interval, b: Interval) -> Interval | None:
    if b[0] != b[1] or b[0] <= 0 or a[0] < 0:
        return None
    return (a[0] // b[0], a[1] if math.isinf(a[1]) else a[1] // b[0])


def _mod(a: Interval, b: Interval) -> Interval | None:
    if b[0] != b[1] or b[0] <= 0 or a[0] < 0:
        return None
    return (0, min(a[1], b[0] - 1)) if a[1] >= b[0] else a


_BIN = {
    "+": lambda a, b: (a[0] + b[0], a[1] + b[1]),
    "-": lambda a, b: (a[0] - b[1], a[1] - b[0]),
    "*": _mul, "/": _div, "%": _mod,
}

#: The rule of every expression kind (tests/test_static_dispatch.py checks each has one).
INTERVALS = {
    ir.Const: _const,
    ir.Sym: lambda e, env: env.get(e.name),
    ir.Bin: _bin,
    ir.Un: _un,
    ir.Select: _select,
    ir.Call: _call,
    ir.Elem: lambda e, env: None,     # a fragment element: data
    ir.BufElem: lambda e, env: None,  # a buffer element: data
}


def index_range(extent: ir.Expr, env) -> Interval:
    """0 .. extent-1, for a loop or grid index (upper end unknown: unbounded)."""
    r = interval(extent, env)
    return (0, r[1] - 1 if r is not None else math.inf)


# ---------------------------------------------------------------- asserts

_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "=="}


def assumed_ranges(kernel: ir.Kernel) -> dict[str, Interval]:
    """Ranges of the sizes the function's asserts bound (`assert(M <= 256, ...)`, `&&` of
    such): no launch has other sizes. A shape dimension is never negative."""
    bounds: dict[str, list[float]] = {}
    for cond in kernel.assumes:
        for name, op, value in _atoms(cond):
            lo, hi = bounds.setdefault(name, [-math.inf, math.inf])
            if op in (">", ">=", "=="):
                lo = max(lo, value + (op == ">"))
            if op in ("<", "<=", "=="):
                hi = min(hi, value - (op == "<"))
            bounds[name] = [lo, hi]
    shape = {d.name for p in kernel.params for d in p.shape if isinstance(d, ir.Sym)}
    return {n: (max(lo, 0) if n in shape else lo, hi) for n, (lo, hi) in bounds.items()}


def _atoms(cond: ir.Expr):
    """(name, op, integer) for each `name op integer` conjunct of `cond`."""
    if isinstance(cond, ir.Bin) and cond.op == "&&":
        yield from _atoms(cond.lhs)
        yield from _atoms(cond.rhs)
        return
    if not isinstance(cond, ir.Bin) or cond.op not in _FLIP:
        return
    lhs, op, rhs = cond.lhs, cond.op, cond.rhs
    if isinstance(rhs, ir.Sym):
        lhs, op, rhs = rhs, _FLIP[op], lhs
    if isinstance(lhs, ir.Sym) and isinstance(rhs, ir.Const) and \
            isinstance(rhs.value, int) and not isinstance(rhs.value, bool):
        yield lhs.name, op, rhs.value


# ---------------------------------------------------------------- scope

_STAMPS = itertools.count()
MAX_DEF_NODES = 48  # a substituted expression larger than this stays as written
MAX_LET_CHAIN = 8  # lets of lets followed by one substitution


@dataclass
class Scope:
    """Ranges, cases and let definitions at one point of the walk (copied per block).

    `defs` holds each let's value and the stamp of its binding; `bound` the stamp of
    each name's latest binding. A definition whose names were bound after it is stale
    (it spoke of their earlier values): `subst` keeps its name. Stamps keep a binding
    O(1) in a kernel of thousands of lets; substitution happens only where a place is
    compared (static_order)."""

    ranges: dict = field(default_factory=dict)
    cases: tuple = ({},)
    defs: dict = field(default_factory=dict)   # let name -> (value, stamp)
    bound: dict = field(default_factory=dict)  # name -> stamp of its latest binding
    # names whose value may differ between cases without being a case name (a let of a
    # case index and a loop index): a condition on one splits no case, it drops them all
    dependent: set = field(default_factory=set)

    def copy(self) -> "Scope":
        return Scope(dict(self.ranges), self.cases, dict(self.defs), dict(self.bound),
                     set(self.dependent))

    # -- bindings
    def let(self, name: str, value: ir.Expr) -> None:
        self.ranges[name] = interval(value, self.ranges)
        self._per_case(name, value)
        self._rebound(name)
        self.defs[name] = (value, self.bound[name])
        self._depends(name, value)

    def unknown(self, name: str, value: ir.Expr | None = None) -> None:
        """A mutable scalar (or one rebound to what is not followed): no range, no case."""
        self.ranges[name] = None
        self.drop({name})
        self._rebound(name)
        self.defs.pop(name, None)
        self._depends(name, value)

    def _rebound(self, name: str) -> None:
        self.bound[name] = next(_STAMPS)

    def definition(self, name: str) -> ir.Expr | None:
        """The substituted value of let `name`, if still current."""
        got = self.defs.get(name)
        if got is None:
            return None
        value, stamp = got
        names = ir.sym_names(value)
        if name in names or any(self.bound.get(n, -1) > stamp for n in names):
            return None  # `x = x + 1` (the earlier x), or a name rebound since
        return value

    def _depends(self, name: str, value: ir.Expr | None) -> None:
        if not self.dependent and len(self.cases) <= 1:
            return  # no case to vary by
        cases = self.case_names()
        if name in cases:
            self.dependent.discard(name)
        elif value is not None and any(n in cases or n in self.dependent
                                       for n in ir.sym_names(value)):
            self.dependent.add(name)

    def entering_loop(self, body: list) -> None:
        """Names a loop body binds: the lets read from them are not substituted in it, and
        those it binds from case-varying values vary by case from the first iteration on."""
        bound = [s for s in ir.walk(body) if isinstance(s, (ir.Let, ir.Var, ir.Assign))]
        for s in bound:
            self._rebound(s.name)
        for s in ir.walk(body):
            if isinstance(s, ir.For):
                self._rebound(s.var)
        cases, grow = self.case_names(), True
        while grow:
            new = {s.name for s in bound if s.name not in self.dependent and s.name not in cases
                   and any(n in cases or n in self.dependent for n in ir.sym_names(_value(s)))}
            self.dependent |= new
            grow = bool(new)

    def index(self, name: str, rng: Interval | None, values=None) -> None:
        """An index of range `rng`; `values`: every one of them runs (a new case name)."""
        self.ranges[name] = rng
        self._rebound(name)
        self.defs.pop(name, None)
        self.drop({name})
        self.dependent.discard(name)
        if values is not None and len(self.cases) * len(values) <= MAX_CASES:
            self.cases = tuple(dict(c, **{name: v}) for c in self.cases for v in values)

    def _per_case(self, name: str, value: ir.Expr) -> None:
        if not self.cases or len(self.cases[0]) >= MAX_CASE_NAMES:
            self.drop({name})  # it stays dependent on the case names it reads
            return
        try:
            vals = [evaluate(value, c) for c in self.cases]
        except EvalError:
            self.drop({name})
            return
        if any(not isinstance(v, int) for v in vals):  # a bool is an int
            self.drop({name})
            return
        self.cases = tuple(dict(c, **{name: v}) for c, v in zip(self.cases, vals))

    # -- cases
    def case_names(self) -> set[str]:
        return set(self.cases[0]) if self.cases else set()

    def forget_cases(self) -> None:
        self.cases = ({},) if self.cases else ()
        self.dependent = set()

    def varying(self, names: set[str]) -> None:
        """Code run for the cases where a condition on `names` holds: forget what cannot
        be told apart (a case name read: its values; a dependent name: every case)."""
        if names & self.dependent:
            self.forget_cases()
        else:
            self.drop(names)

    def drop(self, names: set[str]) -> None:
        """Forget the cases' values of `names` (the combinations merge)."""
        if not names & self.case_names():
            return
        seen, out = set(), []
        for c in self.cases:
            kept = {k: v for k, v in c.items() if k not in names}
            key = tuple(sorted(kept.items()))
            if key not in seen:
                seen.add(key)
                out.append(kept)
        self.cases = tuple(out)

    def split(self, cond: ir.Expr) -> tuple["Scope", "Scope"]:
        """(the scope where `cond` holds, the scope where it does not)."""
        yes, no = self.copy(), self.copy()
        if ir.sym_names(cond) & self.dependent:
            yes.forget_cases()
            no.forget_cases()
            return yes, no
        names = ir.sym_names(cond) & self.case_names()
        if not names:
            return yes, no
        try:
            truth = [bool(evaluate(cond, c)) for c in self.cases]
        except EvalError:
            yes.drop(names)
            no.drop(names)
            return yes, no
        yes.cases = tuple(c for c, t in zip(self.cases, truth) if t)
        no.cases = tuple(c for c, t in zip(self.cases, truth) if not t)
        return yes, no

    def restrict(self, name: str, values) -> None:
        """Only the cases where index `name` is one of `values` (a role's members)."""
        allowed = set(values)
        if name in self.case_names():
            self.cases = tuple(c for c in self.cases if c[name] in allowed)

    def case_envs(self, names: set[str]):
        """(description, ranges) per case, of the cases' values of `names` only (none:
        no case refines them)."""
        seen = set()
        for c in self.cases:
            vals = {k: v for k, v in c.items() if k in names}
            key = tuple(sorted(vals.items()))
            if not vals or key in seen:
                continue
            seen.add(key)
            env = dict(self.ranges, **{k: (v, v) for k, v in vals.items()})
            yield ", ".join(f"{k} = {v}" for k, v in vals.items()), env


# ---------------------------------------------------------------- expressions

def subst(e: ir.Expr, scope: Scope) -> ir.Expr:
    """`e` with the lets of `scope` replaced by their current values (as far as they are
    current, to a bounded size: past it, `e` as written)."""
    out = _subst(e, scope, 0)
    return out if out is e or _nodes(out) <= MAX_DEF_NODES else e


def _subst(e: ir.Expr, scope: Scope, depth: int) -> ir.Expr:
    if not scope.defs or depth > MAX_LET_CHAIN:
        return e
    if isinstance(e, ir.Sym):
        got = scope.definition(e.name)
        return e if got is None else _subst(got, scope, depth + 1)
    kids = ir.expr_children(e)
    new = [_subst(x, scope, depth) for x in kids]
    if all(a is b for a, b in zip(new, kids)):
        return e
    return _rebuild(e, new)


def _nodes(e: ir.Expr) -> int:
    n = 0
    for _ in ir.expr_walk(e):
        n += 1
        if n > MAX_DEF_NODES:
            break
    return n


def _rebuild(e: ir.Expr, kids: list) -> ir.Expr:
    """`e` with its direct sub-expressions replaced (the order of expr_children)."""
    from dataclasses import fields, replace

    kids = list(kids)
    changes = {}
    for f in fields(e):
        v = getattr(e, f.name)
        if f.type in ir.EXPR_FIELD and v is not None:
            changes[f.name] = kids.pop(0)
    for f in fields(e):
        if f.type in ir.EXPRS_FIELD:
            v = getattr(e, f.name)
            changes[f.name] = type(v)(kids.pop(0) for _ in v)
    return replace(e, **changes)


def _value(s) -> ir.Expr:
    return s.init if isinstance(s, ir.Var) else s.value


def canon(e: ir.Expr | None):
    """A form of `e` without types: two expressions of one value for every binding of their
    names compare equal (`order % 4` in a u32 and an s32 spelling)."""
    if e is None:
        return None
    if isinstance(e, ir.Const):
        return ("c", e.value)
    if isinstance(e, ir.Sym):
        return ("s", e.name)
    return (type(e).__name__, getattr(e, "op", getattr(e, "fn", None)),
            tuple(canon(x) for x in ir.expr_children(e)))


def uses(e: ir.Expr | None) -> set[str]:
    return ir.sym_names(e) if e is not None else set()
