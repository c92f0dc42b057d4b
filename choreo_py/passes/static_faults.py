"""Run-time faults decided at compile time, where no schedule or shape can avoid them.

The interpreter reports these when a run reaches them; the generated code would
compute garbage silently (a wgmma accumulator read before `wgmma.wait_group` is
whatever the tensor core has written so far; a shared-memory box past its
buffer reads its neighbour). Each check here is exact for what it reports:

- a shared or local view whose box lies outside its buffer for every value its
  indices can take (interval arithmetic over grid, parallel, role, loop and
  apply indices; a symbol of unknown range makes the check give up, silently);
- a fragment read (or refilled) while an MMA that writes it may still be in
  flight on some path: a may-analysis over the structured control flow, with
  the in-order completion of MMA groups (waiting a later MMA completes the
  earlier ones); a fill 0 right before an MMA into the same fragment is that
  MMA's overwrite, not a read (so is a block accumulator's `if (c) mma.fill acc, 0;`
  right before an MMA into it: sm_100a clears that MMA's enable-input-d predicate,
  lowering/sm100/lower_flow.py `flagged`, and writes no tensor memory); what leaves a role (to the roles after it) drops
  the MMAs a `trigger e after f` published (and those issued before them): the
  other roles see them through e;
- an event some role waits on, not `= ready`, that no statement ever triggers.
"""
from __future__ import annotations

import math
from dataclasses import fields, is_dataclass

from .. import ir
from ..diagnostics import ChoreoError, Diagnostic

Interval = tuple[float, float]


# ---------------------------------------------------------------- intervals

def _interval(e: ir.Expr, env: dict[str, Interval | None]) -> Interval | None:
    """The range of integer expression `e` given the ranges of its symbols (None: unknown)."""
    if isinstance(e, ir.Const):
        if isinstance(e.value, bool) or not isinstance(e.value, int):
            return None
        return (e.value, e.value)
    if isinstance(e, ir.Sym):
        return env.get(e.name)
    if isinstance(e, ir.Bin):
        a, b = _interval(e.lhs, env), _interval(e.rhs, env)
        if a is None or b is None:
            return None
        return _BIN.get(e.op, lambda a, b: None)(a, b)
    if isinstance(e, ir.Call) and e.fn in ("min", "max") and len(e.args) == 2:
        a, b = (_interval(x, env) for x in e.args)
        if a is None or b is None:
            return None
        f = min if e.fn == "min" else max
        return (f(a[0], b[0]), f(a[1], b[1]))
    return None


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


def _index_range(extent: ir.Expr, env) -> Interval:
    """0 .. extent-1, for a loop or grid index (upper end unknown: unbounded)."""
    r = _interval(extent, env)
    return (0, r[1] - 1 if r is not None else math.inf)


# ---------------------------------------------------------------- views

def _views(obj, depth: int = 0):
    """Every ir.View inside a statement's fields (not inside nested statement lists)."""
    if isinstance(obj, ir.View):
        yield obj
        return
    if isinstance(obj, (list, tuple)):
        for x in obj:
            if not isinstance(x, ir.Stmt):
                yield from _views(x, depth + 1)
        return
    if is_dataclass(obj) and not isinstance(obj, type) and depth < 12:
        for f in fields(obj):
            sub = getattr(obj, f.name)
            if not isinstance(sub, (str, int, float, type(None))):
                yield from _views(sub, depth + 1)


class _Faults:
    def __init__(self, k: ir.Kernel) -> None:
        self.k = k
        self.found: list[Diagnostic] = []
        self.seen: set = set()
        self.seq = 0
        self.issued: dict[str, int] = {}  # future -> sequence number of its latest MMA
        self.jumps: list[list] = []
        self.published: list[set] = []  # per role: MMA futures a `trigger ... after` names
        self.folded = _folded_fills(k.body, block=_block_accs(k.body))

    def report(self, message: str, loc) -> None:
        key = (message, loc)
        if key not in self.seen:
            self.seen.add(key)
            self.found.append(Diagnostic("error", message, loc))

    # -- view bounds
    def check_view(self, v: ir.View, env, loc) -> None:
        buf = self.k.buffer(v.base)
        if buf is None:
            return
        for k, (off, ext, size) in enumerate(zip(v.offsets, v.extents, buf.shape)):
            r, n = _interval(off, env), ir_int(ext)
            if r is None or n is None:
                continue
            if r[0] + n > size or r[1] < 0:
                lo = int(r[0])
                self.report(f"this view of '{v.base}' {list(buf.shape)} spans elements "
                            f"[{lo}, {lo + n}) of dimension {k} for every value of its "
                            f"indices, outside the buffer's {size}", loc)
                return
        if v.slot is not None and buf.count:
            r = _interval(v.slot, env)
            if r is not None and (r[0] >= buf.count or r[1] < 0):
                self.report(f"'{v.base}[{int(r[0])}]' is outside the array of {buf.count} "
                            "buffers", loc)

    # -- walking
    def block(self, stmts, env, pend):
        env = dict(env)
        for s in stmts:
            if pend is None:  # unreachable after a break/continue
                return None
            pend = self.stmt(s, env, pend)
        return pend

    def stmt(self, s, env, pend):
        for v in _views(s):
            self.check_view(v, env, s.loc)
        self.frag_reads(s, pend)
        if isinstance(s, ir.Let):
            env[s.name] = _interval(s.value, env)
        elif isinstance(s, (ir.Var, ir.Assign)):
            env[s.name] = None
        elif isinstance(s, ir.For):
            inner = dict(env)
            start, stop = _interval(s.start, env), _interval(s.stop, env)
            inner[s.var] = (start[0], stop[1] - 1) if start and stop else None
            return self.loop(s.body, inner, pend)
        elif isinstance(s, ir.While):
            return self.loop(s.body, env, pend)
        elif isinstance(s, ir.If):
            a, b = self.block(s.then, env, pend), self.block(s.orelse, env, pend)
            return _union(a, b)
        elif isinstance(s, ir.Parallel):
            inner = dict(env)
            inner[s.var] = (0, s.extent - 1)
            self.parallel_var = s.var
            return _union(pend, self.block(s.body, inner, pend))
        elif isinstance(s, ir.Role):
            inner = dict(env)
            if s.members and getattr(self, "parallel_var", None):
                inner[self.parallel_var] = (min(s.members), max(s.members))
            self.published.append(set())
            out = self.block(s.body, inner, pend)
            return _union(pend, self._unpublished(out, self.published.pop()))
        elif isinstance(s, ir.Apply):
            inner = dict(env)
            for i, n in zip(s.indices, s.shape):
                inner[i] = (0, n - 1)
            return self.block(s.body, inner, pend)
        elif isinstance(s, (ir.Break, ir.Continue)):
            if self.jumps:
                self.jumps[-1].append(pend)
            return None
        return self.frag_writes(s, pend)

    def loop(self, body, env, pend):
        state = dict(pend)
        for _ in range(8):  # the pending sets only grow: a fixpoint in a few rounds
            self.jumps.append([])
            end = self.block(body, env, state)
            jumps = self.jumps.pop()
            nxt = state
            for x in [end] + jumps:
                nxt = _union(nxt, x)
            if nxt == state:
                break
            state = nxt
        return state

    # -- fragments and MMA futures
    def frag_reads(self, s, pend) -> None:
        if not pend:
            return
        reads = []
        if isinstance(s, ir.MmaStore):
            reads.append((s.acc, "mma.store"))
        elif isinstance(s, ir.Reduce):
            reads.append((s.src, "this reduction"))
        elif isinstance(s, ir.AllReduce):
            reads.append((s.frag, "this reduction"))
        elif isinstance(s, ir.FragCopy):
            reads.append((s.src, "this copy"))
        elif isinstance(s, ir.Mma) and isinstance(s.a, str):
            reads.append((s.a, "this MMA"))
        elif isinstance(s, ir.MmaFill) and not self._folded(s):
            reads.append((s.acc, "this fill"))
        elif isinstance(s, ir.ElemStore):
            reads.append((s.frag, "this store"))
        for attr in ("value", "cond"):
            e = getattr(s, attr, None)
            if isinstance(e, ir.Expr):
                reads += [(x.frag, "this statement") for x in ir.expr_walk(e)
                          if isinstance(x, ir.Elem)]
        for frag, what in reads:
            if frag in pend:
                fut, loc, _ = pend[frag]
                where = f" (line {loc.line})" if loc is not None else ""
                self.report(f"{what} uses '{frag}' while the MMA '{fut}'{where} may still be "
                            f"writing it; 'wait {fut};' first", s.loc)

    def frag_writes(self, s, pend):
        if isinstance(s, ir.Mma) and s.future is not None:
            self.seq += 1
            self.issued[s.future] = self.seq
            pend = dict(pend)
            pend[s.acc] = (s.future, s.loc, self.seq)
            return pend
        if isinstance(s, ir.Trigger) and self.published:
            self.published[-1].update(f for f in s.after if f in self.issued)
        if isinstance(s, ir.Wait):
            done = [it.future for it in s.items if isinstance(it, ir.FutureRef)]
            if done and pend:
                upto = max(self.issued.get(f, 0) for f in done)
                pend = {f: x for f, x in pend.items() if x[2] > upto and x[0] not in done}
        return pend


    def _unpublished(self, pend, published: set):
        """What leaves a role in flight: not its MMAs a `trigger e after f` published (the
        other roles see them through e), nor the ones issued before those (in order)."""
        if not pend or not published:
            return pend
        upto = max(self.issued[f] for f in published)
        return {f: x for f, x in pend.items() if x[2] > upto and x[0] not in published}

    def _folded(self, s: ir.MmaFill) -> bool:
        """`mma.fill s, 0` right before an MMA into s: that MMA's overwrite, issued after
        the MMAs in flight (lowering/core/analysis.py folds the same pairs)."""
        return id(s) in self.folded

def _folded_fills(stmts: list, out: set | None = None, block: frozenset = frozenset()) -> set:
    """id() of every `mma.fill acc, 0` whose next statement is an MMA into acc, and of a
    block accumulator's fill 0 that is all of an `if` (no else) right before one."""
    out = set() if out is None else out
    for s, nxt in zip(stmts, stmts[1:] + [None]):
        into = isinstance(nxt, ir.Mma)
        if isinstance(s, ir.MmaFill) and s.value.value == 0 and into and nxt.acc == s.acc:
            out.add(id(s))
        if isinstance(s, ir.If) and not s.orelse and len(s.then) == 1 and into:
            f = s.then[0]
            if isinstance(f, ir.MmaFill) and f.value.value == 0 and f.acc == nxt.acc \
                    and f.acc in block:
                out.add(id(f))
        for b in ir.child_blocks(s):
            _folded_fills(b, out, block)
    return out


def _block_accs(stmts: list) -> frozenset:
    """The block's accumulators (`mma.fill ... : block`: tensor memory on sm_100a)."""
    return frozenset(s.frag.name for s in ir.walk(stmts)
                     if isinstance(s, ir.FragDecl) and s.frag.block)


def ir_int(e) -> int | None:
    if isinstance(e, ir.Const) and isinstance(e.value, int) and not isinstance(e.value, bool):
        return e.value
    return None


def _union(a, b):
    if a is None:
        return b
    if b is None:
        return a
    out = dict(a)
    for f, x in b.items():
        if f not in out or out[f][2] < x[2]:
            out[f] = x
    return out


def _never_triggered(k: ir.Kernel) -> list[Diagnostic]:
    triggered = {s.event.event for s in ir.walk(k.body) if isinstance(s, ir.Trigger)}
    ready = {e.name for e in k.events if e.ready}
    out, seen = [], set()
    for s in ir.walk(k.body):
        if not isinstance(s, ir.Wait):
            continue
        for it in s.items:
            if isinstance(it, ir.EventRef) and it.event not in triggered | ready | seen:
                seen.add(it.event)
                out.append(Diagnostic("error", f"'{it.event}' is waited on but never "
                                      "triggered, and does not start ready: this wait "
                                      "never returns", s.loc))
    return out


def _shapeless(k: ir.Kernel) -> list[Diagnostic]:
    """Accumulators used but never shaped: only an MMA (or a declared shape) gives an
    accumulator its shape; `mma.fill` alone does not, and no code exists for a tile of
    unknown size."""
    unshaped = {f.name: f for f in k.frags if not f.shape}
    out, seen = [], set()
    for s in ir.walk(k.body):
        if isinstance(s, (ir.FragDecl, ir.MmaFill)) or not unshaped:
            continue
        used = {getattr(s, a, None) for a in ("acc", "src", "dst", "frag", "domain", "a")}
        for name in sorted(n for n in used if isinstance(n, str) and n in unshaped):
            if name not in seen:
                seen.add(name)
                out.append(Diagnostic("error", f"accumulator '{name}' has no shape: no MMA "
                                      "writes it ('mma.fill' alone does not give one)", s.loc))
    return out


def faults(k: ir.Kernel) -> list[Diagnostic]:
    """The view and fragment faults of kernel `k` (errors)."""
    shapeless = _shapeless(k)
    if shapeless:
        return shapeless
    f = _Faults(k)
    env = {}
    for g in k.grid:
        env[g.var] = _index_range(g.extent, env)
    f.block(k.body, env, {})
    return f.found


def hangs(k: ir.Kernel) -> list[Diagnostic]:
    """Waits that can never return (judged like the pipeline check's findings)."""
    return _never_triggered(k)


def check_kernel(k: ir.Kernel) -> None:
    found = faults(k)
    if found:
        raise ChoreoError(diagnostics=found)
