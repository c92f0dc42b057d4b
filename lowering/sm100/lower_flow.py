"""When an accumulator tile moves between tensor memory and registers (sm_100a).

On sm_100a an MMA accumulator lives in tensor memory (TMEM); per-thread code
works on a register copy (`tcgen05.ld` in, `tcgen05.st` out). This pass walks
the MMA role's IR once and decides, per statement:

- `loads`: whether an access must `tcgen05.ld` the tile. Forward: the copy
  is valid from a load (or a register write) until the next MMA into the
  accumulator. Loop heads, loop exits and branches start with no valid copy
  (register states are not merged), so the first access after one reloads.
- `writeback`: whether a statement that writes the registers (an apply that
  stores into the accumulator, a fill kept in registers) must `tcgen05.st`
  them back. Backward liveness: only if tensor memory is read again (an
  accumulating MMA, or a reload) before it is overwritten. The seed's
  `acc_s` never goes back (its next MMA overwrites it); `acc_o` goes back
  after the rescale in the loop (the next PV accumulates) but not after the
  final one (mma.store reads the registers).
- `flagged`: accumulators whose zero fills cost no instruction on the tile:
  when on every path the next use after a fill is an MMA into it, the fill
  clears a predicate and that MMA's first k-step overwrites
  (enable-input-d = the predicate). Otherwise the fill sets the registers.
  A block accumulator (`shared`) is seen by the other roles through events,
  so a `trigger` between the fill and that MMA counts as a use: the roles
  it publishes to would expect the zeros (FA4's O, zeroed per work item by
  `if (step == 0) mma.fill o, 0.0f;` before the step's PV, is flagged).

Statements are keyed by id(); the same objects are lowered.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

from choreo_py import ir


Live = frozenset


@dataclass
class Flow:
    loads: dict = field(default_factory=dict)      # (id(stmt), acc) -> bool
    writeback: dict = field(default_factory=dict)  # (id(stmt), acc) -> bool
    flagged: frozenset = frozenset()
    # the accumulators with tensor-memory columns; one of the accumulator layout that no MMA
    # writes (`frag f32[DV, DK] state_frag` an apply fills) lives in registers alone
    in_tmem: frozenset = frozenset()

    def load(self, s, acc: str) -> bool:
        return acc in self.in_tmem and self.loads.get((id(s), acc), True)  # unknown: be safe

    def store_back(self, s, acc: str) -> bool:
        return acc in self.in_tmem and self.writeback.get((id(s), acc), True)


elem_reads = ir.elem_reads  # fragments an apply body reads (as the core sees them)


def writes(s) -> set:
    """Fragments an apply stores into."""
    if not isinstance(s, ir.Apply):
        return set()
    return {t.frag for t in ir.walk(s.body) if isinstance(t, ir.ElemStore)}


def touched(s, accs: set) -> tuple[set, set]:
    """(accumulators the statement reads or writes, those it writes) among `accs`."""
    if isinstance(s, ir.Apply):
        w = writes(s)
        return (w | elem_reads(s.body)) & accs, w & accs
    if isinstance(s, ir.Reduce):
        return {s.src} & accs, set()
    if isinstance(s, ir.MmaStore):
        return {s.acc} & accs, set()
    return set(), set()


def fill_of(s, accs: set) -> Optional[tuple[str, object]]:
    """(accumulator, value) of an `mma.fill` or an initialised accumulator declaration."""
    if isinstance(s, ir.MmaFill) and s.acc in accs:
        return s.acc, s.value.value
    if isinstance(s, ir.FragDecl) and s.frag.name in accs and s.init is not None:
        return s.frag.name, s.init.value
    return None


# ---------------------------------------------------------------- walkers

def _backward(stmts: list, out: Live, step: Callable, everything: Live) -> Live:
    for s in reversed(stmts):
        if isinstance(s, (ir.For, ir.While)):
            head: Live = Live()
            while True:  # the body's entry, to a fixed point (the last pass records)
                new = _backward(s.body, head | out, step, everything)
                if new == head:
                    break
                head = new
            out = head | out
        elif isinstance(s, ir.If):
            out = _backward(s.then, out, step, everything) | \
                _backward(s.orelse, out, step, everything)
        elif isinstance(s, (ir.Break, ir.Continue)):
            out = everything  # where it lands is not tracked: everything may be needed
        else:
            out = step(s, out)
    return out


class _Analysis:
    def __init__(self, accs: set, facts, shared: frozenset = frozenset()) -> None:
        self.accs = accs
        self.facts = facts
        self.shared = shared & accs  # the block's: a trigger may publish them
        self.flow = Flow(in_tmem=frozenset(accs))
        self.needs_value: dict = {}  # id(fill) -> a read may see the fill before an MMA

    def folded(self, s) -> bool:
        return isinstance(s, ir.MmaFill) and id(s) in self.facts.folded_fills

    # -------------------------------------------- which fills can be a predicate
    def read_before_mma(self, s, out: Live) -> Live:
        fill = fill_of(s, self.accs)
        if fill is not None:
            self.needs_value[id(s)] = fill[0] in out
            return out - {fill[0]}
        if isinstance(s, ir.Mma):
            return out - {s.acc}
        if isinstance(s, ir.Trigger):
            return out | self.shared
        return out | touched(s, self.accs)[0]

    def flags(self, body: list) -> frozenset:
        _backward(body, Live(), self.read_before_mma, Live(self.accs))
        ok, bad = set(), set()
        for s in ir.walk(body):
            fill = fill_of(s, self.accs)
            if fill is None or self.folded(s):
                continue
            name, value = fill
            (bad if value != 0 or self.needs_value[id(s)] else ok).add(name)
        return frozenset(ok - bad)

    # -------------------------------------------- register copies (forward)
    def forward(self, stmts: list, valid: Live) -> Live:
        for s in stmts:
            if isinstance(s, (ir.For, ir.While)):
                self.forward(s.body, Live())
                valid = Live()
            elif isinstance(s, ir.If):
                self.forward(s.then, Live())
                self.forward(s.orelse, Live())
                valid = Live()
            else:
                valid = self.forward_one(s, valid)
        return valid

    def forward_one(self, s, valid: Live) -> Live:
        fill = fill_of(s, self.accs)
        if fill is not None:
            name = fill[0]
            if self.folded(s) or name in self.flow.flagged:
                return valid - {name}
            return valid | {name}  # the fill sets the registers
        if isinstance(s, ir.Mma):
            return valid - {s.acc}
        if isinstance(s, ir.FragDecl):
            return valid - {s.frag.name}
        t, _ = touched(s, self.accs)
        for a in t:
            self.flow.loads[(id(s), a)] = a not in valid
        return valid | t

    # -------------------------------------------- tensor-memory liveness (backward)
    def live(self, s, out: Live) -> Live:
        fill = fill_of(s, self.accs)
        if fill is not None:
            name = fill[0]
            if self.folded(s):
                return out  # the MMA after it overwrites
            if name not in self.flow.flagged:
                self.flow.writeback[(id(s), name)] = name in out
            return out - {name}
        if isinstance(s, ir.Mma):
            if s.acc not in self.accs:
                return out
            return out - {s.acc} if id(s) in self.facts.zero_first else out | {s.acc}
        if isinstance(s, ir.FragDecl):
            return out - {s.frag.name}
        t, w = touched(s, self.accs)
        for a in w:
            self.flow.writeback[(id(s), a)] = a in out
        return (out - w) | {a for a in t if self.flow.loads[(id(s), a)]}


def analyse(role: ir.Role, accs: set, facts, shared: frozenset = frozenset(),
            k: Optional[ir.Kernel] = None, small_moves: bool = False) -> Flow:
    """The decisions for the MMA role `role`, whose accumulators (TMEM tiles) are `accs`
    (`shared`: those of the block, which other roles see), and those of kernel `k`'s
    reader roles (reader_copies)."""
    body = role.body
    an = _Analysis(set(accs), facts, frozenset(shared))
    an.flow.flagged = an.flags(body)
    an.forward(body, Live())
    _backward(body, Live(), an.live, Live(accs))
    if k is not None:
        an.flow.loads.update(reader_copies(k, role, frozenset(shared), small_moves))
    return an.flow


# ---------------------------------------------------------------- reader roles

#: Statements of a reader role across which its register copy of a block accumulator stays
#: the tile's value. A copy goes stale only when another role writes the tile between two
#: of this role's reads; in a race-free program such a write is ordered after the first read
#: and before the second only through a release of this role in between (a trigger, a
#: barrier): these statements release nothing. A `wait` only acquires: a write it orders
#: before the second read is also ordered before, or races with, the first.
_KEEPS = (ir.Apply, ir.Reduce, ir.FragCopy, ir.FragDecl, ir.Wait, ir.Let, ir.Var, ir.Assign,
          ir.ViewDef, ir.SetMaxRegs)


def reader_loads(body: list, accs: frozenset, hosts: dict) -> dict:
    """(id(stmt), acc) -> whether a reader role's statement must tcgen05.ld the block's
    accumulator `acc` (the others reuse the registers the last load left). Forward, as the
    MMA role's copies: loop heads and exits and branches start with no copy. A copy is
    kept by statements that only read it (a row max, then the exponentials over the same
    S: FA4's softmax reads S once a step); a statement that writes the tile (its stores go
    back at once, piece by piece) or an operand over its columns (`hosts`: P over S) leaves
    none, and so does anything that is not in _KEEPS."""
    loads: dict = {}

    def walk(stmts: list, valid: Live) -> Live:
        for s in stmts:
            if isinstance(s, (ir.For, ir.While)):
                walk(s.body, Live())
                valid = Live()
            elif isinstance(s, ir.If):
                walk(s.then, Live())
                walk(s.orelse, Live())
                valid = Live()
            elif not isinstance(s, _KEEPS):
                valid = Live()
            else:
                t, w = touched(s, set(accs))
                for a in t:
                    loads[(id(s), a)] = a not in valid
                over = {hosts[o] for o in writes(s) if o in hosts}
                voted = isinstance(s, ir.Apply) and s.warp_vote  # skipping warps load nothing
                valid = Live() if voted else (valid | t) - w - over
        return valid

    walk(body, Live())
    return loads


def reader_copies(k: ir.Kernel, mma_role: ir.Role, block: frozenset, small_moves: bool) -> dict:
    """reader_loads for every role of `k` but the one that issues the MMAs, where the
    readers move the tile 16 registers at a time (`small_moves`, block_acc.piece_limit: a
    kernel that repartitions its registers; none otherwise): a tcgen05.ld/st of 64 needs 64
    consecutive registers, and a copy held across statements leaves ptxas none
    (flash_atten_blackwell_persistent.co, 168 registers a thread, spilled 60 bytes with its
    S kept across three statements; the two-tile example, 16-register moves, spills none)."""
    hosts = {f.name: f.host for f in k.frags if f.host in block}
    loads: dict = {}
    if not block or not small_moves:
        return loads
    for role in ir.walk(k.body):
        if isinstance(role, ir.Role) and role is not mma_role:
            loads.update(reader_loads(role.body, block, hosts))
    return loads
