"""Happens-before of asynchronous copies and MMAs, for the static fault check.

A TMA (or asynchronous DMA) load writes its shared destination until its future is
waited: directly (`wait a_load`), or through an event a `trigger e after a_load`
completes (`wait e`, or an event some role triggers after waiting e). A statement of
the issuing instance that reads the destination before that reads what the copy has
not written yet (the interpreter reports the race; the GPU reads stale data).

An asynchronous MMA reads its shared operands until it is waited (MMAs complete in
order: waiting a later one completes the earlier ones) or until an event triggered
`after` it completes. Releasing the ring slot of an operand (`trigger empty` where a
producer waits `empty` before refilling the buffer) while the MMA may still read it
lets the producer overwrite the tile under the tensor core.

Both are may-analyses over paths (the walker in static_faults merges branches and
iterates loops), exact for what they report: a place is compared only when it is the
same for every binding of its names (the same slot and box after the lets are
substituted, no name rebound between the copy and the read), so an entry whose names
change (a loop index, `order++`) is dropped rather than guessed.
"""
from __future__ import annotations

from dataclasses import dataclass

from .. import ir
from . import static_ranges as R


@dataclass(frozen=True)
class Place:
    """A box of a shared buffer, its slot and offsets with the lets substituted."""

    base: str
    slot: object  # canon of the slot expression (None: no slot)
    offsets: tuple  # substituted expressions
    extents: tuple  # ints (None: unknown)
    names: frozenset  # the names the slot and offsets read

    @property
    def label(self) -> str:
        return self.base


def place(v: ir.View, scope: R.Scope) -> Place:
    offs = tuple(R.subst(o, scope) for o in v.offsets)
    slot = R.subst(v.slot, scope) if v.slot is not None else None
    names = set(R.uses(slot))
    for o in offs:
        names |= ir.sym_names(o)
    exts = tuple(e.value if isinstance(e, ir.Const) and isinstance(e.value, int) else None
                 for e in v.extents)
    return Place(v.base, R.canon(slot), offs, exts, frozenset(names))


def _dims(a: Place, b: Place, env: dict):
    """Per dimension: (a's start range, a's extent, b's start range, b's extent), or None
    when a box is not known."""
    if a.base != b.base or a.slot != b.slot or len(a.offsets) != len(b.offsets):
        return None
    out = []
    for oa, na, ob, nb in zip(a.offsets, a.extents, b.offsets, b.extents):
        if na is None or nb is None:
            return None
        if R.canon(oa) == R.canon(ob):
            out.append(((0, 0), na, (0, 0), nb))
            continue
        ra, rb = R.interval(oa, env), R.interval(ob, env)
        if ra is None or rb is None:
            return None
        out.append((ra, na, rb, nb))
    return out


def overlaps(a: Place, b: Place, env: dict) -> bool:
    """Whether boxes a and b share an element for every binding of their names."""
    dims = _dims(a, b, env)
    return dims is not None and all(ra[1] < rb[0] + nb and rb[1] < ra[0] + na
                                    for ra, na, rb, nb in dims)


def inside(a: Place, b: Place, env: dict) -> bool:
    """Whether box a lies inside box b for every binding of their names."""
    dims = _dims(a, b, env)
    return dims is not None and all(ra[0] >= rb[1] and ra[1] + na <= rb[0] + nb
                                    for ra, na, rb, nb in dims)


# ---------------------------------------------------------------- the kernel's events

def _roles(k: ir.Kernel) -> list[list[ir.Stmt]]:
    """The bodies whose waits order their triggers: each role, and each parallel body
    outside its roles (the code every instance runs)."""
    out = [s.body for s in ir.walk(k.body) if isinstance(s, ir.Role)]
    out += [[t for t in s.body if not isinstance(t, ir.Role)] for s in ir.walk(k.body)
            if isinstance(s, ir.Parallel)]
    return out or [k.body]


class Events:
    """What the kernel's triggers and waits say about futures and buffers."""

    def __init__(self, k: ir.Kernel) -> None:
        self.k = k
        trig = [s for s in ir.walk(k.body) if isinstance(s, ir.Trigger)]
        self.after: dict[str, set] = {}
        for t in trig:
            for f in t.after:
                self.after.setdefault(f, set()).add(t.event.event)
        self.bodies = [(_waited(b), {t.event.event for t in ir.walk(b)
                                     if isinstance(t, ir.Trigger)}) for b in _roles(k)]
        self.closures: dict[str, frozenset] = {}
        self.guards = _guards(k)

    def completing(self, future: str) -> frozenset:
        """Events whose wait orders the issuer after `future` completes: those triggered
        after it, and (over-approximated) those any body triggers after waiting one."""
        got = self.closures.get(future)
        if got is None:
            got, grow = set(self.after.get(future, ())), True
            while grow:
                grow = False
                for waits, trigs in self.bodies:
                    if waits & got and not trigs <= got:
                        got |= trigs
                        grow = True
            got = self.closures[future] = frozenset(got)
        return got

    def slot_of(self, ref: ir.EventRef, scope: R.Scope):
        """The canon of the slot `ref` names (order % slots, or its index)."""
        ev = self.k.event(ref.event)
        n = (ev.slots if ev is not None else 1) or 1
        if ref.order is not None:
            order = R.subst(ref.order, scope)
            return None if n == 1 else R.canon(ir.Bin("%", order, ir.Const(n, "s32"), "s32"))
        if ref.index is not None and n > 1:
            return R.canon(R.subst(ref.index, scope))
        return None


def _waited(body) -> set:
    return {it.event for s in ir.walk(body) if isinstance(s, ir.Wait)
            for it in s.items if isinstance(it, ir.EventRef)}


def _writes(stmts) -> set[str]:
    """Shared buffers the statements write (copies' destinations, stores)."""
    out = set()
    for s in ir.walk(stmts):
        for v in _WRITTEN.get(type(s), lambda s: ())(s):
            out.add(v.base)
    return out


_WRITTEN = {
    ir.TmaLoad: lambda s: (s.dst,), ir.DmaCopy: lambda s: (s.dst,),
    ir.BufStore: lambda s: (s.view,), ir.MmaStore: lambda s: (s.dst,),
}


def _guards(k: ir.Kernel) -> dict[str, set]:
    """event -> the shared buffers some body refills after waiting it (a ring's `empty`:
    triggering it hands the slot back to the producer), where the event has one slot per
    buffer of the array."""
    out: dict[str, set] = {}
    blocks = [k.body] + [b for s in ir.walk(k.body) for b in ir.child_blocks(s)]
    for stmts in blocks:
        for i, s in enumerate(stmts):
            if not isinstance(s, ir.Wait):
                continue
            later = _writes(stmts[i + 1:])
            for it in s.items:
                if isinstance(it, ir.EventRef):
                    out.setdefault(it.event, set()).update(
                        b for b in later if _same_count(k, it.event, b))
    return out


def _same_count(k: ir.Kernel, event: str, base: str) -> bool:
    ev, buf = k.event(event), k.buffer(base)
    return ev is not None and buf is not None and (ev.slots or 1) == (buf.count or 1)
