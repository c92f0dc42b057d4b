"""Scalar statements and structured control flow.

Loops are do-while loops behind a guard (`foreach` may run zero times),
with the trip bound evaluated once before the loop; branches jump to
labels. Nothing here uses pyptx's `if_`/`else_` blocks (see writer.py).
"""
from __future__ import annotations

from choreo_py import ir

from .context import Lowering
from .conversions import assign_scalar
from .exprs import ExprLowering, reg_type


def expr(lw: Lowering, e: ir.Expr, loc, hint: str = "t", dst=None):
    return _exprs(lw, loc).value(e, hint, dst)


def _exprs(lw: Lowering, loc) -> ExprLowering:
    # A lowering of per-thread code (simt.py) reads memory in expressions: its own leaves.
    make = getattr(lw, "exprs", None)
    return make(loc) if make is not None else ExprLowering(lw, loc)


def nonneg(lw: Lowering, e: ir.Expr, loc) -> bool:
    return ExprLowering(lw, loc).nonneg(e)


def let(lw: Lowering, s: ir.Let) -> None:
    v = expr(lw, s.value, s.loc, hint=s.name)
    if lw.holds_mutable(v):  # `int b = v;` of a mutable v: b keeps the value it has now
        v = lw.w.reg(v.ty, s.name, init=v)
    lw.bind(s.name, v, nonneg=nonneg(lw, s.value, s.loc), uniform=lw.uniform(s.value))


def var(lw: Lowering, s: ir.Var) -> None:
    ty = reg_type(s.dtype, lw, s.loc)
    r = lw.w.reg(ty, s.name)
    assign_scalar(_exprs(lw, s.loc), s.dtype, s.init, r)
    lw.var_types[s.name] = s.dtype
    lw.bind(s.name, r, mutable=True, nonneg=s.dtype.startswith("u"))


def assign(lw: Lowering, s: ir.Assign) -> None:
    b = lw.lookup(s.name)
    if b is None or not b.mutable:
        raise lw.refuse(f"assigning '{s.name}', which is not a mutable scalar,", s.loc)
    assign_scalar(_exprs(lw, s.loc), lw.var_types.get(s.name, ""), s.value, b.value)


def for_(lw: Lowering, s: ir.For, body) -> None:
    w = lw.w
    step = expr(lw, s.step, s.loc)
    if not step.is_const or step.const == 0:
        raise lw.refuse("a foreach whose step is not a non-zero constant", s.loc)
    i = w.reg("s32", s.var)
    expr(lw, s.start, s.loc, dst=i)
    stop = expr(lw, s.stop, s.loc, hint=f"{s.var}_end")
    bound = lw.lookup(s.stop.name) if isinstance(s.stop, ir.Sym) else None
    if bound is not None and bound.mutable:  # the trip count is fixed at loop entry
        stop = w.reg("s32", f"{s.var}_end", init=stop)
    # Every thread of a warp runs a loop with warp-uniform bounds and no early exit
    # the same number of times: its branches are `bra.uni` and its index uniform.
    uni = lw.uniform(s.start) and lw.uniform(s.stop) and not (bound is not None and bound.mutable) \
        and not any(isinstance(t, (ir.Break, ir.Continue)) for t in ir.walk(s.body))
    lw.depth += 1
    lw.push()
    top, cont, end = w.label(f"{s.var}_loop"), w.label(f"{s.var}_next"), w.label(f"{s.var}_end")
    up = step.const > 0
    more, done = ("lt", "ge") if up else ("gt", "le")
    p = w.reg("pred", f"{s.var}_more")
    w.op(f"setp.{done}.s32", p, i, stop)
    w.bra(end, p, uni=uni)
    w.put_label(top)
    lw.bind(s.var, i, nonneg=nonneg(lw, s.start, s.loc) and up, uniform=uni)
    lw.scopes[-1][s.var].invariant = False
    lw.loops.append((cont, end))
    body(s.body)
    lw.loops.pop()
    w.put_label(cont)
    w.op("add.s32", i, i, step)
    w.op(f"setp.{more}.s32", p, i, stop)
    w.bra(top, p, uni=uni)
    w.put_label(end)
    lw.pop()
    lw.depth -= 1


def while_(lw: Lowering, s: ir.While, body) -> None:
    w = lw.w
    lw.depth += 1
    top, end = w.label("while"), w.label("while_end")
    w.put_label(top)
    c = expr(lw, s.cond, s.loc, hint="cond")
    w.bra(end, c, negate=True)
    lw.push()
    lw.loops.append((top, end))
    body(s.body)
    lw.loops.pop()
    lw.pop()
    w.bra(top)
    w.put_label(end)
    lw.depth -= 1


def if_(lw: Lowering, s: ir.If, body) -> None:
    w = lw.w
    c = expr(lw, s.cond, s.loc, hint="cond")
    if c.is_const:  # a condition fixed at compile time keeps one branch
        # ... nested as a branch is: a name bound in it is not the region's invariant (a
        # use of it in a statement inside would be hoisted to the region's mark, before the
        # binding; bench/difftest.py seed 12447: pyptx's UnboundLocalError)
        lw.depth += 1
        lw.push()
        body(s.then if c.const else s.orelse)
        lw.pop()
        lw.depth -= 1
        return
    lw.depth += 1
    other, end = w.label("else"), w.label("endif")
    w.bra(other if s.orelse else end, c, negate=True, uni=lw.uniform(s.cond))
    lw.push()
    body(s.then)
    lw.pop()
    if s.orelse:
        w.bra(end)
        w.put_label(other)
        lw.push()
        body(s.orelse)
        lw.pop()
    w.put_label(end)
    lw.depth -= 1


def break_(lw: Lowering, s: ir.Break) -> None:
    if not lw.loops:
        raise lw.refuse("break outside a loop", s.loc)
    lw.w.bra(lw.loops[-1][1])


def continue_(lw: Lowering, s: ir.Continue) -> None:
    if not lw.loops:
        raise lw.refuse("continue outside a loop", s.loc)
    lw.w.bra(lw.loops[-1][0])

