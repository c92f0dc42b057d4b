"""The loop form of the proof that P may lie in S's columns (FA4's KV loop).

In attention's KV loop S is fresh every step (S = Q K^T), P is written over it, the MMA
role reads P (O += P V), and the next step's MMA into S overwrites P's columns. The
straight-line proof (tmem_host_order.py) cannot admit it: S is touched after P is
written, by the next step. This one admits exactly this shape, as a proof that in every
step t nothing reads S as S once P(t) is written and nothing writes S's columns while
P(t) may still be read:

- the writer role W writes P by one `apply` at the top level of a loop Lw at W's top
  level, reading `s.at(i, j)` at its own indices; before it, at Lw's top level, W waits
  `e_s.at(x)` (S's completion event); after it W triggers `e_p.at(y)` (P's event); every
  other statement of Lw naming S sits between that wait and the apply; nothing else in
  W names S;
- the MMA role R, issue-only (its body only issues copies, MMAs, waits and triggers, so
  one thread runs it), issues every MMA into S and every MMA reading P, at the top
  level of one loop Lr at R's top level, in this order: `mma.fill s, 0` immediately
  followed by the MMA into S (fresh: its first k-step does not accumulate), a wait of
  that MMA's future then `trigger e_s.at(x')`, or `trigger e_s.at(x') after` that future
  (a commit: e_s completes when the MMA has, so W's wait of it sees S),
  `wait e_p.at(y')`, the MMA reading P. The
  next step's MMA into S is therefore issued after the MMA reading P by the same thread,
  and tcgen05.mma issued by one thread execute in order: it writes P's columns only after
  that read; W's next write of P waits e_s, which follows the next step's MMA into S;
- the events pair the same step: e_s and e_p are plain rings (not `= ready`) triggered at
  that one statement only, and x, x' (and y, y') are the step number t of their loop plus
  the same offset: the loop's own index (the loop starts at 0, steps by 1; not
  assigned or redeclared in it), or a `mutable` counter declared once, set to 0 at the
  role's top level and increased only by one `+ 1` at the loop body's top level
  (offset 1 after that increment); neither loop breaks or continues;
- no other role and no statement outside the roles (but the declarations) names S.

A persistent kernel runs the KV loop once per work item, inside a loop over the items
(and a branch for the block's last, partial round). Where, in a role, every statement
naming S or P lies in one loop nested in such `foreach`/`if` statements (the only
statements of them naming S or P being the next level down), the proof reads the
role with that innermost loop lifted to its top level (`lifted`): the step number is
then the count of the loop's executed bodies over the whole role, which only a
counter declared at the role's top level and increased once per body can be (the
loop's own index restarts with each item, so it is not a step number there), and
nothing outside the loop but that declaration may declare or assign what the loop
assigns.

What it cannot prove is refused, located at P's declaration, naming the statement.
"""
from __future__ import annotations

import dataclasses
from typing import Optional

from .. import ir
from ..diagnostics import ChoreoError

#: what an issue-only role holds (the lowering runs one with one thread); passes/ sits
#: below the lowering, so the kinds are written out here
_ISSUE = (ir.Let, ir.Var, ir.Assign, ir.ViewDef, ir.For, ir.While, ir.If, ir.SetMaxRegs,
          ir.TmaLoad, ir.TmaStore, ir.Trigger, ir.Wait, ir.Mma, ir.MmaFill)


class Refused(ChoreoError):
    """Why the loop form does not hold: the caller reports it, located at P's declaration,
    after "'p' cannot lie in the columns of 's': " (each reason is in docs/errors.md)."""


def _names(obj, out: set) -> set:
    """Every string inside `obj` (fields, lists, nested bodies): a statement that names
    S anywhere counts as touching it (a variable of the same name only makes the check
    refuse more)."""
    if isinstance(obj, str):
        out.add(obj)
    elif isinstance(obj, (list, tuple)):
        for x in obj:
            _names(x, out)
    elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        for f in dataclasses.fields(obj):
            if f.name != "loc":
                _names(getattr(obj, f.name), out)
    return out


def touches(stmt: ir.Stmt, name: str) -> bool:
    return name in _names(stmt, set())



def lifted(role: ir.Role, names: tuple) -> tuple[ir.Role, bool]:
    """(the role as the proof reads it, whether its loop was lifted): see the docstring.
    A role whose statements naming `names` are not so nested is returned as it is."""
    at = [i for i, x in enumerate(role.body) if any(touches(x, n) for n in names)]
    if len(at) != 1:
        return role, False
    node, depth = role.body[at[0]], 0
    while isinstance(node, (ir.For, ir.If)):
        inner = [x for b in ir.child_blocks(node) for x in b
                 if any(touches(x, n) for n in names)]
        if len(inner) != 1 or not isinstance(inner[0], (ir.For, ir.If)):
            break
        node, depth = inner[0], depth + 1
    if depth == 0 or not isinstance(node, ir.For):
        return role, False
    assigned = {x.name for x in ir.walk(node.body) if isinstance(x, (ir.Assign, ir.Var, ir.Let))}
    inside = {id(x) for x in ir.walk([node])}
    for x in ir.walk([role.body[at[0]]]):
        if id(x) not in inside and isinstance(x, (ir.Assign, ir.Var, ir.Let)) \
                and x.name in assigned:
            raise Refused(f"{_line(x)} sets '{x.name}', which the loop at {_line(node)} "
                          "(the KV loop of a work item) sets too")
    view = dataclasses.replace(role, body=list(role.body[:at[0]]) + [node])
    return view, True


def _line(stmt) -> str:
    loc = getattr(stmt, "loc", None)
    return f"line {loc.line}" if loc else "a statement"


def _step_loop(role: ir.Role, at: int) -> ir.For:
    """The For at role.body[at], counting from 0 by 1, that neither breaks nor continues."""
    loop = role.body[at]
    if not all(isinstance(e, ir.Const) and e.value == v for e, v in ((loop.start, 0),
                                                                     (loop.step, 1))):
        raise Refused(f"the loop at {_line(loop)} does not count its steps from 0 by 1")
    if any(isinstance(x, (ir.Break, ir.Continue)) for x in ir.walk(loop.body)):
        raise Refused(f"the loop at {_line(loop)} breaks or continues")
    return loop


def _counter_step(name: str, role: ir.Role, at: int, i: int) -> Optional[int]:
    """Offset of counter `name` at statement i of the loop role.body[at]: set to 0 at the
    role's top level before the loop, increased only by one `name := name + 1` at the
    loop body's top level. None: not such a counter."""
    loop = role.body[at]
    init = [s for s in role.body[:at] if isinstance(s, ir.Var) and s.name == name]
    if len(init) != 1 or not (isinstance(init[0].init, ir.Const) and init[0].init.value == 0):
        return None
    if sum(_binds(s, name) for s in ir.walk(role.body)) != 1:
        return None  # declared again (a shadow): not the counter the loop increases
    writes = [s for s in ir.walk(role.body) if isinstance(s, ir.Assign) and s.name == name]
    incs = [j for j, s in enumerate(loop.body) if isinstance(s, ir.Assign) and s.name == name]
    if len(writes) != 1 or len(incs) != 1:
        return None
    v = writes[0].value
    if not (isinstance(v, ir.Bin) and v.op == "+" and isinstance(v.lhs, ir.Sym)
            and v.lhs.name == name and isinstance(v.rhs, ir.Const) and v.rhs.value == 1):
        return None
    return 1 if incs[0] < i else 0


def _binds(stmt, name: str) -> bool:
    """Whether `stmt` declares a scalar or view called `name`."""
    return isinstance(stmt, (ir.Let, ir.Var, ir.ViewDef)) and stmt.name == name


def _step_of(ref: ir.EventRef, stmt, role: ir.Role, at: int, i: int,
             nested: bool = False) -> int:
    """The offset k such that `ref`'s order is t + k in step t of the loop role.body[at]
    (`nested`: a lifted loop, whose index restarts per work item, is no step number)."""
    loop = role.body[at]
    e = ref.order
    if ref.index is None and isinstance(e, ir.Sym):
        if not nested and e.name == loop.var and not any(_binds(s, e.name) or isinstance(s, ir.Assign)
                                          and s.name == e.name for s in ir.walk(loop.body)):
            return 0
        k = _counter_step(e.name, role, at, i)
        if k is not None:
            return k
    raise Refused(f"{_line(stmt)} names '{ref.event}' at no step number of the loop at "
                  f"{_line(loop)} (its index, or a counter from 0 increased once per step, "
                  "as '.at(order)')")


def _plain(kernel: ir.Kernel, ev: str, stmt) -> None:
    """A ring whose waits wait its triggers, triggered at one statement only."""
    if any(e.name == ev and e.ready for e in kernel.events):
        raise Refused(f"'{ev}' (waited at {_line(stmt)}) is declared ready: its first wait "
                      "does not wait a trigger")
    n = sum(isinstance(s, ir.Trigger) and s.event.event == ev for s in ir.walk(kernel.body))
    if n != 1:
        raise Refused(f"'{ev}' is triggered at {n} statements; the proof pairs one trigger "
                      "with its wait")


def _refs(stmt, kind) -> list:
    """The event references of a top-level `wait` or `trigger` (kind Wait or Trigger)."""
    if not isinstance(stmt, kind):
        return []
    refs = stmt.items if kind is ir.Wait else [stmt.event]
    return [r for r in refs if isinstance(r, ir.EventRef)]


def _mma_role(kernel: ir.Kernel, frag: ir.Frag, roles: list, w_role: ir.Role,
              real: Optional[dict] = None):
    """(role, index of its loop): the issue-only role that issues every MMA into S and
    every MMA reading P, all in one loop at its top level (`real`: the whole role of a
    lifted view, which must be issue-only as a whole)."""
    owners = [r for r in roles if any(isinstance(x, ir.Mma) and (x.acc == frag.host or
                                                               x.a == frag.name)
                                      for x in ir.walk(r.body))]
    if len(owners) != 1 or owners[0] is w_role:
        raise Refused(f"the MMAs into '{frag.host}' and those reading '{frag.name}' come from "
                      f"{len(owners)} roles; one role other than the writer's issues them")
    r = owners[0]
    whole = (real or {}).get(id(r), r)
    bad = next((x for x in ir.walk(whole.body) if not isinstance(x, _ISSUE)), None)
    if bad is not None:
        raise Refused(f"the MMA role is not issue-only ({_line(bad)} is more than a copy, an "
                      "MMA, a wait or a trigger), so more than one thread may issue its MMAs")
    at = [i for i, s in enumerate(r.body)
          if touches(s, frag.host) or touches(s, frag.name)]
    if len(at) != 1 or not isinstance(r.body[at[0]], ir.For):
        s = r.body[at[-1]] if at else r
        raise Refused(f"{_line(s)}: the MMA role names '{frag.host}' or '{frag.name}' outside "
                      "one loop at its top level")
    return r, at[0]


def _mma_steps(body: list, frag: ir.Frag):
    """(i_fill, i_qk, i_pv) in the MMA loop's body: `mma.fill s, 0` at once followed by
    the MMA into S, then the MMA reading P; nothing else there names S or P."""
    s_name, p_name = frag.host, frag.name
    at = [i for i, s in enumerate(body) if touches(s, s_name) or touches(s, p_name)]
    kinds = [body[i] for i in at]
    if not (len(at) == 3 and isinstance(kinds[0], ir.MmaFill) and kinds[0].acc == s_name
            and kinds[0].value.value == 0 and at[1] == at[0] + 1
            and isinstance(kinds[1], ir.Mma) and kinds[1].acc == s_name
            and isinstance(kinds[2], ir.Mma) and kinds[2].a == p_name
            and kinds[2].acc != s_name and not touches(kinds[1], p_name)):
        first = kinds[0] if kinds else body[0]
        raise Refused(f"the MMA loop's statements naming '{s_name}' or '{p_name}' (from "
                      f"{_line(first)}) are not: 'mma.fill {s_name}, 0', at once the MMA into "
                      f"'{s_name}' (a fresh {s_name}), then the MMA reading '{p_name}'")
    return tuple(at)


def _find(body: list, lo: int, hi: int, kind, events) -> tuple:
    """(index, EventRef) of the first top-level `kind` in body[lo:hi] naming one of `events`."""
    for j in range(lo, hi):
        for r in _refs(body[j], kind):
            if r.event in events:
                return j, r
    return None, None


def _s_published(rb: list, qk: ir.Mma, i_pv: int, w_waits: set, frag: ir.Frag,
                 apply: ir.Apply) -> tuple:
    """(index, EventRef) of the trigger that publishes S to the writer, before the MMA
    reading P: a plain one after `wait qk`, or `trigger e after qk` (it completes when qk
    has: what the writer's wait then sees is S)."""
    i_w = next((j for j in range(rb.index(qk) + 1, i_pv) if isinstance(rb[j], ir.Wait) and any(
        isinstance(x, ir.FutureRef) and x.future == qk.future for x in rb[j].items)), None)
    for j in range(rb.index(qk) + 1, i_pv):
        for r in _refs(rb[j], ir.Trigger):
            if r.event in w_waits and qk.future is not None and (
                    rb[j].after == [qk.future] or (i_w is not None and j > i_w)):
                return j, r
    if qk.future is None or i_w is None:
        raise Refused(f"the MMA into '{frag.host}' at {_line(qk)} is not waited (nor named by "
                      f"'trigger ... after {qk.future or 'its future'}') before the MMA reading "
                      f"'{frag.name}' at {_line(rb[i_pv])}")
    raise Refused(f"between {_line(rb[i_w])} and {_line(rb[i_pv])} the MMA role triggers "
                  f"no event the writer waits before the apply at {_line(apply)}")


def only_in_loop(w_role: ir.Role, w_at: int, lw: ir.For, s_name: str, frag: ir.Frag) -> None:
    """The writer's role touches S only in its KV loop (statement `w_at`, the loop `lw`)."""
    for i, s in enumerate(w_role.body):
        if i != w_at and touches(s, s_name):
            raise Refused(f"{_line(s)} touches '{s_name}' outside the loop at {_line(lw)} "
                          f"that writes '{frag.name}'")


def only_in_window(wb: list, a_idx: int, i_ws: int, s_name: str, apply, frag: ir.Frag,
                   roles: list, pair: tuple) -> None:
    """The writer's statements touch S only between its wait for S and the apply that
    writes P over it, and no role but the pair touches S."""
    for j, s in enumerate(wb):
        if j != a_idx and touches(s, s_name) and not i_ws < j < a_idx:
            raise Refused(f"{_line(s)} touches '{s_name}' and is not between the wait at "
                          f"{_line(wb[i_ws])} and the apply at {_line(apply)} that writes "
                          f"'{frag.name}' over it")
    for role in roles:
        if all(role is not r for r in pair):
            s = next((x for x in role.body if touches(x, s_name)), None)
            if s is not None:
                raise Refused(f"{_line(s)} touches '{s_name}' in a third role")


def check_loop(kernel: ir.Kernel, frag: ir.Frag, roles: list, w_role: ir.Role, w_at: int,
               a_idx: int, nested: frozenset = frozenset(),
               real: Optional[dict] = None) -> None:
    """Raises Refused unless the loop form holds (the module's docstring). `roles` may be
    lifted views (`lifted`): `nested` holds their ids, `real` maps them to the roles."""
    s_name = frag.host
    lw = _step_loop(w_role, w_at)
    wb = lw.body
    apply = wb[a_idx]
    only_in_loop(w_role, w_at, lw, s_name, frag)
    r_role, r_at = _mma_role(kernel, frag, roles, w_role, real)
    lr = _step_loop(r_role, r_at)
    rb = lr.body
    i_fill, i_qk, i_pv = _mma_steps(rb, frag)
    qk = rb[i_qk]
    w_waits = {r.event for j in range(a_idx) for r in _refs(wb[j], ir.Wait)}
    i_ts, ts = _s_published(rb, qk, i_pv, w_waits, frag, apply)
    i_ws, ws = _find(wb, 0, a_idx, ir.Wait, {ts.event})
    w_trigs = {r.event for j in range(a_idx + 1, len(wb)) for r in _refs(wb[j], ir.Trigger)}
    i_wp, wp = _find(rb, i_ts + 1, i_pv, ir.Wait, w_trigs)
    if wp is None:
        raise Refused(f"the MMA reading '{frag.name}' at {_line(rb[i_pv])} waits no event the "
                      f"writer triggers after the apply at {_line(apply)}")
    i_tp, tp = _find(wb, a_idx + 1, len(wb), ir.Trigger, {wp.event})
    for (ja, ra, sa, ia, role_a, at_a), (jb, rb_, sb, ib, role_b, at_b) in (
            ((i_ts, ts, rb[i_ts], i_ts, r_role, r_at), (i_ws, ws, wb[i_ws], i_ws, w_role, w_at)),
            ((i_tp, tp, wb[i_tp], i_tp, w_role, w_at), (i_wp, wp, rb[i_wp], i_wp, r_role, r_at))):
        if sa.after and sa.after != [qk.future]:
            raise Refused(f"the trigger at {_line(sa)} fires when its futures complete "
                          "('after'), not after the statements before it")
        _plain(kernel, ra.event, sb)
        if _step_of(ra, sa, role_a, at_a, ia, id(role_a) in nested) != \
                _step_of(rb_, sb, role_b, at_b, ib, id(role_b) in nested):
            raise Refused(f"{_line(sb)} waits '{ra.event}' of another step than the one "
                          f"{_line(sa)} triggers")
    only_in_window(wb, a_idx, i_ws, s_name, apply, frag, roles, (w_role, r_role))


