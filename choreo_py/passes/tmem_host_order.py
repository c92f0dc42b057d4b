"""The order that lets a block operand lie in its accumulator's columns (`p : block in s`).

P written over S's cells destroys S there, so the plan accepts the pair only when it
can prove that nothing touches S after P is written, other than the statement that
writes P from S. The proof is deliberately narrow (a program it cannot prove is
refused, located at the declaration, naming the statement in the way):

- P is written by exactly one statement, an `apply` over P at the top level of its
  role (in no loop or branch, so it runs once) whose reads of S are `s.at(i, j)` at
  its own indices: element (i, j) of P lands in S's column j // 2 <= j, a column the
  apply has read (the lowering walks columns in increasing chunks, loading a chunk
  before storing it);
- every other statement that names S is the block-level declaration, or sits in a
  role before the apply in program order, or sits in another role R and is followed
  at R's top level by the one `trigger e` of a plain event e (not declared `ready`:
  a wait on it would not wait for the trigger) that the apply's role
  waits (`wait e`) at its top level before the apply; an MMA into S there must also
  be waited (`wait qk`) in R before that trigger, or the trigger be `after` an MMA
  future of R (`trigger e after qk`: e completes once every MMA R issued before it has).

Reading P (the MMA that takes it as A) is not restricted: S's cells hold P until
nothing is left to read them as S.

An apply at the top level of a loop at its role's top level is FA4's KV loop (S fresh
every step, P over it, the next step's MMA into S over P): tmem_host_loop.py proves it,
or tmem_host_rotated.py where the MMA role issues the next step's MMA into S after the
MMA reading P in each trip (FA4's order).
"""
from __future__ import annotations

from .. import ir
from ..diagnostics import ChoreoError
from .tmem_host_loop import Refused, check_loop, lifted, touches as _touches
from .tmem_host_rotated import check_rotated, rotated


def _line(stmt) -> str:
    loc = getattr(stmt, "loc", None)
    return f"line {loc.line}" if loc else "a statement"


def _not_in_host(frag: ir.Frag, why: str) -> ChoreoError:
    return ChoreoError(f"'{frag.name}' cannot lie in the columns of '{frag.host}': {why}",
                       frag.loc)


def _writer(frag: ir.Frag, roles: list[ir.Role]):
    """(role, index, index in the loop or None) of the one `apply` over p at the top level
    of a role, or of a loop at its top level; anything else writing p refuses."""
    found = []
    for role in roles:
        for i, s in enumerate(role.body):
            if isinstance(s, ir.Apply) and s.domain == frag.name:
                found.append((role, i, None))
            elif isinstance(s, ir.For):
                for j, x in enumerate(s.body):
                    if isinstance(x, ir.Apply) and x.domain == frag.name:
                        found.append((role, i, j))
                    else:
                        _no_other_use(frag, x)
            else:
                _no_other_use(frag, s)
    if len(found) != 1:
        raise _not_in_host(frag, f"'{frag.name}' must be written by exactly one 'apply' at the "
                      "top level of a role or of a loop at its top level "
                      f"(found {len(found)})")
    return found[0]


def _no_other_use(frag: ir.Frag, s: ir.Stmt) -> None:
    if any(_touches(x, frag.name) and not ir.child_blocks(x)
           and not (isinstance(x, ir.Mma) and x.a == frag.name) for x in ir.walk([s])):
        raise _not_in_host(frag, f"{_line(s)} uses '{frag.name}' other than as an MMA's A "
                           "operand or in one 'apply' over it at the top level of a role or "
                           "of a loop at its top level")


def _apply_reads_in_place(frag: ir.Frag, apply: ir.Apply) -> None:
    for s in ir.walk(apply.body):
        for attr in ("value", "cond"):
            e = getattr(s, attr, None)
            if not isinstance(e, ir.Expr):
                continue
            for x in ir.expr_walk(e):
                if isinstance(x, ir.Elem) and x.frag == frag.host and not (
                        len(x.index) == len(apply.indices) and all(
                            isinstance(i, ir.Sym) and i.name == n
                            for i, n in zip(x.index, apply.indices))):
                    raise _not_in_host(frag, f"the apply at {_line(apply)} reads '{frag.host}' "
                                  "other than at its own indices")


def _event(e: ir.EventRef):
    return e.event if e.index is None and e.order is None else None


def _waited(name, block: list[ir.Stmt]) -> set:
    return {w.future for s in block if isinstance(s, ir.Wait)
            for w in s.items if isinstance(w, ir.FutureRef)} & {name}


def _unwaited(acc: str, stmts: list[ir.Stmt]) -> set:
    """Futures of the MMAs into `acc` in `stmts` not waited later in their own block (a
    future not named, `None`, counts as never waited)."""
    out: set = set()
    for j, s in enumerate(stmts):
        if isinstance(s, ir.Mma) and s.acc == acc and not _waited(s.future, stmts[j + 1:]):
            out.add(s.future)
        for block in ir.child_blocks(s):
            out |= _unwaited(acc, block)
    return out


def _published(frag, role: ir.Role, i: int, waits: set, triggers: dict, mmas: set) -> bool:
    """Statement i of another role is ordered before the apply: a later top-level trigger of
    a plain event, triggered once in the kernel and waited before the apply, with every
    MMA into S in statement i waited before it, or the trigger `after` an MMA future of
    the role (a commit: it completes when every MMA the role issued before it has)."""
    pending = _unwaited(frag.host, [role.body[i]])
    for s in role.body[i + 1:]:
        if isinstance(s, ir.Wait):
            pending -= {w.future for w in s.items if isinstance(w, ir.FutureRef)}
        if isinstance(s, ir.Trigger) and _event(s.event) in waits:
            committed = bool(s.after) and set(s.after) <= mmas
            return (not pending or committed) and triggers.get(_event(s.event)) == 1 and \
                (not s.after or committed)
    return False


def _outside_roles(stmts: list[ir.Stmt]):
    """The statements outside every role: whole, where they hold no role; else opened."""
    for s in stmts:
        if isinstance(s, ir.Role):
            continue
        if any(isinstance(x, ir.Role) for x in ir.walk([s])):
            for block in ir.child_blocks(s):
                yield from _outside_roles(block)
        else:
            yield s


def check_order(kernel: ir.Kernel, frag: ir.Frag) -> None:
    """Raises a located ChoreoError unless nothing touches S after P is written."""
    roles = [s for s in ir.walk(kernel.body) if isinstance(s, ir.Role)]
    views, nested, real = [], set(), {}
    for r in roles:  # a persistent kernel's KV loop, inside its work-item loop: lifted
        try:
            v, is_lifted = lifted(r, (frag.host, frag.name))
        except Refused as why:
            raise _not_in_host(frag, why.message) from None
        views.append(v)
        real[id(v)] = r
        if is_lifted:
            nested.add(id(v))
    w_role, w_at, in_loop = _writer(frag, views)
    apply = w_role.body[w_at] if in_loop is None else w_role.body[w_at].body[in_loop]
    _apply_reads_in_place(frag, apply)
    if in_loop is not None:  # FA4's KV loop: tmem_host_loop.py (rotated: tmem_host_rotated.py)
        try:
            rot = rotated(frag, views, w_role)
            if rot is not None:
                check_rotated(kernel, frag, views, w_role, w_at, in_loop, *rot, frozenset(nested))
            else:
                check_loop(kernel, frag, views, w_role, w_at, in_loop, frozenset(nested), real)
        except Refused as why:
            raise _not_in_host(frag, why.message) from None
    else:
        _straight(kernel, frag, roles, w_role, w_at)
    outside = [s for s in _outside_roles(kernel.body)
               if not isinstance(s, (ir.FragDecl, ir.MmaFill)) and _touches(s, frag.host)]
    if outside:
        raise _not_in_host(frag, f"{_line(outside[0])} touches '{frag.host}' outside the roles")


def _straight(kernel: ir.Kernel, frag: ir.Frag, roles: list, w_role: ir.Role,
              w_at: int) -> None:
    """P written once: every other statement naming S is ordered before the apply."""
    apply = w_role.body[w_at]
    ready = {e.name for e in kernel.events if e.ready}  # a wait on these passes at once
    waits = {_event(e) for s in w_role.body[:w_at] if isinstance(s, ir.Wait)
             for e in s.items if isinstance(e, ir.EventRef)} - {None} - ready
    triggers: dict = {}
    mmas = {s.future for s in ir.walk(kernel.body) if isinstance(s, ir.Mma) and s.future}
    for s in ir.walk(kernel.body):
        if isinstance(s, ir.Trigger):
            triggers[_event(s.event)] = triggers.get(_event(s.event), 0) + 1
    for role in roles:
        for i, s in enumerate(role.body):
            if role is w_role and i == w_at or not _touches(s, frag.host):
                continue
            if role is w_role and i < w_at and not any(
                    isinstance(m, ir.Mma) for m in ir.walk([s])):
                continue
            if role is not w_role and _published(frag, role, i, waits, triggers, mmas):
                continue
            raise _not_in_host(frag, f"{_line(s)} touches '{frag.host}' and is not provably "
                          f"ordered before '{frag.name}' is written at {_line(apply)}")
