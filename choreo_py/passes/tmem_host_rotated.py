"""The rotated form of the loop proof that P may lie in S's columns (FA4's MMA order).

tmem_host_loop.py admits an MMA role whose KV loop issues, per step t, the MMA into S
(S(t) = Q K(t)^T) and then the MMA reading P(t) (O += P(t) V). FA4 issues them rotated:
the item's first MMA into S before the loop, then per trip t the MMA reading P(t) and
the next step's MMA into S(t+1), and the last MMA reading P after the loop, so that a
block with two query tiles issues PV0(t), QK0(t+1), PV1(t), QK1(t+1): each tile's
softmax overlaps the other tile's MMAs. In the role's program order the MMAs are the
same sequence as the loop form's (S(0), P(0), S(1), P(1), ...), so the same argument
holds; this proves the rotated program has that sequence and that its event numbers
are the steps of it:

- the writer role W is as in tmem_host_loop.py: one `apply` writing P in its KV loop,
  after its wait of S's event e_s (every other statement naming S between the two) and
  before its plain trigger of P's event e_p, at step numbers of that loop;
- the MMA role R, issue-only, names S and P in one block B (its top level, or the body
  of the `foreach`/`if` statements of a work-item loop, each holding nothing else that
  names them), and there only in: before one loop L, `mma.fill s, 0` at once followed
  by the MMA into S, published by `trigger e_s.at(x) after` its future; in L's body at
  its top level, the MMA reading P after `wait e_p.at(y)`, then `mma.fill s, 0` at once
  followed by the MMA into S, published by `trigger e_s.at(x') after` its future; after
  L, the MMA reading P after `wait e_p.at(y'')`; R neither breaks nor continues;
- the step numbers: one `mutable` counter c, declared once at R's top level from 0 and
  increased only by one `+ 1` at L's top level and one at B's top level after L (so it
  counts the steps: L's trips and the last one); x is c + k at B's entry, x' the next
  step's, c + k + 1 in L's trip (`order + 1` before L's increment), y and y'' the
  current step's, c + j (W's e_s wait being at its step + k, its e_p trigger at + j);
- e_s and e_p are plain rings (not `= ready`), e_s triggered at those two statements
  only, e_p at one.

Then in R's program order the MMA reading P(t) precedes the MMA into S(t+1) (L's trip t,
or the item's last PV before the next item's first QK), and tcgen05.mma issued by one
thread execute in order; W reads S(t) after e_s(t), which completes with the MMA into
S(t); W writes P(t+1) only after e_s(t+1), after the MMA that read P(t).

What it cannot prove is refused, located at P's declaration, naming the statement.
"""
from __future__ import annotations

from typing import Optional

from .. import ir
from .tmem_host_loop import (_ISSUE, Refused, _line, _refs, _step_loop, _step_of,
                             only_in_loop, only_in_window, touches)


def _naming(stmts: list, names: tuple) -> list[int]:
    return [i for i, s in enumerate(stmts) if any(touches(s, n) for n in names)]


def rotated(frag: ir.Frag, roles: list, w_role: ir.Role):
    """(R, B) where the one role other than W that issues MMAs into S or reading P names
    them in the rotated shape (`block_of`); None otherwise (the loop form decides)."""
    owners = [r for r in roles if any(isinstance(x, ir.Mma) and (x.acc == frag.host or
                                                               x.a == frag.name)
                                      for x in ir.walk(r.body))]
    if len(owners) != 1 or owners[0] is w_role:
        return None
    b = block_of(owners[0], (frag.host, frag.name))
    return None if b is None else (owners[0], b)


def block_of(role: ir.Role, names: tuple) -> Optional[list]:
    """The block B where the role names S or P in more than one statement, one of them a
    loop, reached through `foreach`/`if` statements that name them in one statement
    each; None where the role is not so shaped (the loop form's, or another)."""
    body = role.body
    while True:
        at = _naming(body, names)
        if len(at) != 1:
            break
        node = body[at[0]]
        if not isinstance(node, (ir.For, ir.If)):
            return None
        inner = [b for b in ir.child_blocks(node) if _naming(b, names)]
        if len(inner) != 1:
            return None
        body = inner[0]
    at = _naming(body, names)
    loops = [i for i in at if isinstance(body[i], ir.For)]
    return body if len(at) > 1 and len(loops) == 1 else None


def _order(ref: ir.EventRef, counter: str, stmt) -> int:
    """k of `.at(counter + k)` (or `.at(counter)`: 0)."""
    e = ref.order
    if ref.index is None and isinstance(e, ir.Sym) and e.name == counter:
        return 0
    if ref.index is None and isinstance(e, ir.Bin) and e.op == "+" and isinstance(e.lhs, ir.Sym) \
            and e.lhs.name == counter and isinstance(e.rhs, ir.Const) \
            and isinstance(e.rhs.value, int) and not isinstance(e.rhs.value, bool):
        return e.rhs.value
    raise Refused(f"{_line(stmt)} names '{ref.event}' at no step of the counter '{counter}' "
                  f"('.at({counter})' or '.at({counter} + k)')")


def _incs(body: list, counter: str) -> list[int]:
    return [i for i, s in enumerate(body) if isinstance(s, ir.Assign) and s.name == counter]


def _step(ref, stmt, body: list, at: int, counter: str) -> int:
    """The offset of `ref` at body[at] from the counter's value where `body` starts."""
    return _order(ref, counter, stmt) + sum(1 for i in _incs(body, counter) if i < at)


def _counter(role: ir.Role, b: list, loop: ir.For, after: int) -> str:
    """The step counter: declared once at the role's top level from 0, increased by one
    `+ 1` at the loop's top level and one at B's after the loop, assigned nowhere else."""
    names = {s.name for s in ir.walk(loop.body) if isinstance(s, ir.Assign)}
    for name in sorted(names):
        decl = [s for s in ir.walk(role.body) if isinstance(s, (ir.Var, ir.Let, ir.ViewDef))
                and s.name == name]
        writes = [s for s in ir.walk(role.body) if isinstance(s, ir.Assign) and s.name == name]
        top = [s for s in role.body if isinstance(s, ir.Var) and s.name == name]
        if len(decl) != 1 or not top or not (isinstance(top[0].init, ir.Const)
                                             and top[0].init.value == 0):
            continue
        inc = [s for s in writes if isinstance(s.value, ir.Bin) and s.value.op == "+"
               and isinstance(s.value.lhs, ir.Sym) and s.value.lhs.name == name
               and isinstance(s.value.rhs, ir.Const) and s.value.rhs.value == 1]
        if len(writes) == 2 == len(inc) and len(_incs(loop.body, name)) == 1 \
                and [i for i in _incs(b, name) if i > after] and len(_incs(b, name)) == 1:
            return name
    raise Refused(f"the MMA loop at {_line(loop)} has no step counter: a 'mutable' counter "
                  "from 0 at the role's top level, increased once per trip and once after "
                  "the loop (the last step), and nowhere else")


def _fresh_s(stmts: list, i: int, s_name: str) -> Optional[ir.Mma]:
    """The MMA into S at stmts[i + 1] when stmts[i] is `mma.fill s, 0` (a fresh S)."""
    f = stmts[i]
    if isinstance(f, ir.MmaFill) and f.acc == s_name and f.value.value == 0 and \
            i + 1 < len(stmts) and isinstance(stmts[i + 1], ir.Mma) and stmts[i + 1].acc == s_name:
        return stmts[i + 1]
    return None


def _reads_p(s, frag: ir.Frag) -> bool:
    return isinstance(s, ir.Mma) and s.a == frag.name and s.acc != frag.host


def _published(stmts: list, lo: int, hi: int, qk: ir.Mma, where) -> tuple:
    """(index, EventRef) of `trigger e.at(...) after qk` in stmts[lo:hi]."""
    for j in range(lo, hi):
        for r in _refs(stmts[j], ir.Trigger):
            if qk.future is not None and stmts[j].after == [qk.future]:
                return j, r
    raise Refused(f"the MMA into '{qk.acc}' at {_line(qk)} is not published by "
                  f"'trigger ... after {qk.future or 'its future'}' {where}")


def _waited(stmts: list, lo: int, hi: int, event: str):
    for j in range(lo, hi):
        for r in _refs(stmts[j], ir.Wait):
            if r.event == event:
                return j, r
    return None, None


def _shape(b: list, frag: ir.Frag):
    """(i_fill0, i_loop, i_pv_last): the statements of B naming S or P (the docstring)."""
    s_name, p_name = frag.host, frag.name
    at = _naming(b, (s_name, p_name))
    i_loop = next(i for i in at if isinstance(b[i], ir.For))
    pre, post = [i for i in at if i < i_loop], [i for i in at if i > i_loop]
    if len(pre) != 2 or _fresh_s(b, pre[0], s_name) is None or pre[1] != pre[0] + 1 \
            or touches(b[pre[1]], p_name):
        raise Refused(f"before the MMA loop at {_line(b[i_loop])} the statements naming "
                      f"'{s_name}' or '{p_name}' are not 'mma.fill {s_name}, 0' at once "
                      f"followed by the MMA into '{s_name}' (the first step's)")
    if len(post) != 1 or not _reads_p(b[post[0]], frag):
        s = b[post[0]] if post else b[i_loop]
        raise Refused(f"after the MMA loop at {_line(b[i_loop])} the statements naming "
                      f"'{s_name}' or '{p_name}' are not the MMA reading '{p_name}' (the last "
                      f"step's), at {_line(s)}")
    return pre[0], i_loop, post[0]


def _loop_shape(lb: list, frag: ir.Frag, loop: ir.For):
    """(i_pv, i_fill) of L's body: the MMA reading P, then a fresh MMA into S."""
    at = _naming(lb, (frag.host, frag.name))
    if not (len(at) == 3 and _reads_p(lb[at[0]], frag) and at[2] == at[1] + 1
            and _fresh_s(lb, at[1], frag.host) is not None and not touches(lb[at[2]], frag.name)):
        raise Refused(f"the rotated MMA loop's statements naming '{frag.host}' or "
                      f"'{frag.name}' (at {_line(loop)}) are not: the MMA reading "
                      f"'{frag.name}', then 'mma.fill {frag.host}, 0' at once followed by the "
                      f"MMA into '{frag.host}' (the next step's)")
    return at[0], at[1]


def _plain(kernel: ir.Kernel, ev: str, n: int, stmt) -> None:
    if any(e.name == ev and e.ready for e in kernel.events):
        raise Refused(f"'{ev}' (at {_line(stmt)}) is declared ready: its first wait does not "
                      "wait a trigger")
    got = sum(isinstance(s, ir.Trigger) and s.event.event == ev for s in ir.walk(kernel.body))
    if got != n:
        raise Refused(f"'{ev}' is triggered at {got} statements; the rotated proof pairs "
                      f"{n} with its waits")


def check_rotated(kernel: ir.Kernel, frag: ir.Frag, roles: list, w_role: ir.Role,
                  w_at: int, a_idx: int, r_role: ir.Role, b: list,
                  nested: frozenset = frozenset()) -> None:
    """Raises Refused unless W's KV loop and R's rotated MMAs hold the docstring's form
    (`roles`: the roles as the proof reads them, W's lifted: `nested` holds its id)."""
    s_name = frag.host
    lw = _step_loop(w_role, w_at)
    wb = lw.body
    apply = wb[a_idx]
    only_in_loop(w_role, w_at, lw, s_name, frag)
    sub = id(w_role) in nested

    def w_refs(lo, hi, kind):
        return {r.event: (r, j) for j in range(lo, hi) for r in _refs(wb[j], kind)}

    def w_step(ref, j):
        return _step_of(ref, wb[j], w_role, w_at, j, sub)
    w_waits, w_trigs = w_refs(0, a_idx, ir.Wait), w_refs(a_idx + 1, len(wb), ir.Trigger)
    bad = next((x for x in ir.walk(r_role.body) if not isinstance(x, _ISSUE)
                or isinstance(x, (ir.Break, ir.Continue))), None)
    if bad is not None:
        raise Refused(f"the MMA role is not issue-only straight code ({_line(bad)} is more "
                      "than a copy, an MMA, a wait or a trigger, or leaves a loop)")
    i_fill0, i_loop, i_pv_last = _shape(b, frag)
    loop = b[i_loop]
    lb = loop.body
    i_pv, i_fill = _loop_shape(lb, frag, loop)
    c = _counter(r_role, b, loop, i_loop)
    qk0, qk = b[i_fill0 + 1], lb[i_fill + 1]
    j0, ref0 = _published(b, i_fill0 + 2, i_loop, qk0, f"before the loop at {_line(loop)}")
    if ref0.event not in w_waits:
        raise Refused(f"the writer waits no '{ref0.event}' (triggered at {_line(b[j0])}) "
                      f"before the apply at {_line(apply)}")
    e_s, (ws, i_ws) = ref0.event, w_waits[ref0.event]
    k_s = w_step(ws, i_ws)
    checks = [(ref0, b[j0], _step(ref0, b[j0], b, j0, c), k_s, e_s)]
    j, ref = _published(lb, i_fill + 2, len(lb), qk, "in the trip that issues it")
    checks.append((ref, lb[j], _step(ref, lb[j], lb, j, c), k_s + 1, e_s))
    j, ref = next(((j, r) for j in range(i_pv) for r in _refs(lb[j], ir.Wait)
                   if r.event in w_trigs), (None, None))
    if ref is None:
        raise Refused(f"the MMA reading '{frag.name}' at {_line(lb[i_pv])} waits no event the "
                      f"writer triggers after the apply at {_line(apply)}")
    e_p, k_p = ref.event, w_step(*w_trigs[ref.event])
    tp = wb[w_trigs[e_p][1]]
    if tp.after:
        raise Refused(f"the trigger at {_line(tp)} fires when its futures complete "
                      "('after'), not after the statements before it")
    checks.append((ref, lb[j], _step(ref, lb[j], lb, j, c), k_p, e_p))
    j, ref = _waited(b, i_loop + 1, i_pv_last, e_p)
    if ref is None:
        raise Refused(f"the MMA reading '{frag.name}' at {_line(b[i_pv_last])} waits no "
                      f"'{e_p}' after the loop at {_line(loop)}")
    checks.append((ref, b[j], _step(ref, b[j], b, j, c), k_p, e_p))  # (c counts L's trips)
    for ref, stmt, got, want, event in checks:
        if ref.event != event or got != want:
            raise Refused(f"{_line(stmt)} names '{ref.event}' of another step than the "
                          "writer's, in the rotated order (the next step's S in the loop)")
    _plain(kernel, e_s, 2, b[i_fill0 + 1])
    _plain(kernel, e_p, 1, b[i_pv_last])
    only_in_window(wb, a_idx, i_ws, s_name, apply, frag, roles, (w_role, r_role))
