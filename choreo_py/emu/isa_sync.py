"""Barriers, mbarriers, fences and the instructions that only steer the hardware.

bar.sync / bar.arrive (barrier.sync / barrier.arrive): named barriers 0-15;
the thread count is the second operand, else every thread of the CTA that
has not exited. Arrivals count the executing threads.

mbarrier: init / arrive / arrive.expect_tx / expect_tx / complete_tx / try_wait.parity /
test_wait.parity / inval (see machine.MBarrier). A try_wait whose next
instruction branches back to it while its predicate is false (the spin
loop every compiler writes), or back to a head of pure register operations
before it (_is_spin), parks the warp until the barrier's phase changes
instead of spinning. A warp waiting for a phase two or more phases
older than one it already waited for is reported (it would read a refilled
slot as incomplete and hang): a race in strict mode, a note in relaxed mode,
where the wait then behaves as the hardware's parity test does.
"""
from __future__ import annotations

import numpy as np

from .barriers import MBarrier
from .isa_table import Unsupported, decoder, handler
from .lanes import LANES
from .operands import address_reader, operand_reader, writer


# ---------------------------------------------------------------- named barriers
def _bar(inst, wait: bool):
    from .isa_support import machine
    m = machine()
    ops = inst.operands
    bid = operand_reader(ops[0], "u32", m)
    count = operand_reader(ops[1], "u32", m) if len(ops) > 1 else None

    def ex(w):
        b = int(bid(w)[w.mask][0])
        if not 0 <= b < 16:
            raise w.machine.misuse(f"barrier id {b} is not in 0..15", inst)
        c = int(count(w)[w.mask][0]) if count is not None else None
        return w.cta.bar_arrive(w, b, c, wait)
    return ex


@decoder("bar.sync", "barrier.sync", "bar.cta.sync", "barrier.cta.sync", "bar.red")
def _dec_bar_sync(inst):
    if inst.parts[1] == "red":
        raise Unsupported(f"'{inst.opcode}'")
    return _bar(inst, True)


@decoder("bar.arrive", "barrier.arrive", "bar.cta.arrive", "barrier.cta.arrive")
def _dec_bar_arrive(inst):
    return _bar(inst, False)


# ---------------------------------------------------------------- mbarriers
def _lanes_addrs(w, addr):
    a = addr(w)
    return [int(x) for x in a[w.mask].tolist()]


@decoder("mbarrier.init")
def _dec_mbar_init(inst):
    from .isa_support import machine
    m = machine()
    addr = address_reader(inst.operands[0], m)
    count = operand_reader(inst.operands[1], "u32", m)

    def ex(w):
        cnt = count(w)
        for lane in np.flatnonzero(w.mask):
            a = int(addr(w)[lane])
            if a % 8:
                raise w.machine.misuse(f"mbarrier at {a:#x} is not 8-byte aligned", inst)
            w.cta.mbarriers[a] = MBarrier(w.cta, a, int(cnt[lane]), inst)
    return ex


@decoder("mbarrier.inval")
def _dec_mbar_inval(inst):
    from .isa_support import machine
    addr = address_reader(inst.operands[0], machine())

    def ex(w):
        for a in _lanes_addrs(w, addr):
            w.cta.mbarriers.pop(a, None)
    return ex


@decoder("mbarrier.arrive")
def _dec_mbar_arrive(inst):
    from .isa_support import machine
    m = machine()
    ops = inst.operands
    expect = "expect_tx" in inst.parts
    has_state = ops[0].kind in ("reg", "sink")
    dst = ops[0] if has_state else None
    rest = ops[1:] if has_state else ops
    addr = address_reader(rest[0], m)
    extra = operand_reader(rest[1], "u32", m) if len(rest) > 1 else None
    wr = writer(dst, "b64", m) if dst is not None else None

    def ex(w):
        x = extra(w) if extra is not None else None
        state = np.zeros(LANES, dtype=np.uint64)
        clock = w.cta.hb.release(w.warp_id)  # an arrive releases (hb.py)
        for lane in np.flatnonzero(w.mask):
            bar = w.cta.mbarrier(int(addr(w)[lane]))
            state[lane] = bar.phase
            if expect:
                bar.expect_tx(int(x[lane]))
                bar.arrive(1, clock)
            else:
                bar.arrive(int(x[lane]) if x is not None else 1, clock)
        if wr is not None:
            wr(w, state)
    return ex


def _tx_decoder(method: str):
    """`mbarrier.expect_tx [bar], tx` / `mbarrier.complete_tx [bar], tx`: each active lane
    expects, or completes (as an async copy's completion does: what it wrote before is
    then seen by the phase's waiters), `tx` bytes of the phase's transactions."""
    def dec(inst):
        from .isa_support import machine
        m = machine()
        addr = address_reader(inst.operands[0], m)
        tx = operand_reader(inst.operands[1], "u32", m)

        def ex(w):
            t = tx(w)
            for lane in np.flatnonzero(w.mask):
                bar = w.cta.mbarrier(int(addr(w)[lane]))
                if method == "complete_tx":
                    bar.complete_tx(int(t[lane]), w.cta.hb.release(w.warp_id))
                else:
                    bar.expect_tx(int(t[lane]))
        return ex
    return dec


decoder("mbarrier.expect_tx")(_tx_decoder("expect_tx"))
decoder("mbarrier.complete_tx")(_tx_decoder("complete_tx"))


def _completed(bar, parity: int) -> bool:
    return (bar.phase & 1) != parity


def _check_behind(w, bar, parity: int, inst) -> None:
    """Reports a waiter two or more phases behind the barrier.

    Strict mode raises it. Relaxed mode notes it and lets the wait do what the
    hardware's does: try_wait.parity compares the parity asked for with the
    barrier's current phase parity and nothing else (_completed), so a waiter
    two phases behind passes when the parities happen to differ and waits for
    the next phase otherwise. A kernel may rely on that when a later completion
    implies the earlier ones (in-order tcgen05.commit arrivals), as the design
    kernel's correction warps do on PV_DONE (docs/emulator_sm100.md)."""
    prev = bar.seen.get(w.warp_id)
    if _completed(bar, parity):
        target = bar.phase - 1 if ((bar.phase - 1) & 1) == parity else bar.phase - 2
    else:
        target = bar.phase + (0 if (bar.phase & 1) == parity else 1)
    if prev is not None and target - prev >= 2 and bar.phase - 1 - prev >= 2:
        w.machine.race(
            f"warp {w.warp_id} waits on the {bar.describe()} for parity {parity}, but it last "
            f"waited for phase {prev} and the barrier has completed phase {bar.phase - 1}: it "
            f"is two or more phases behind (an early phase's parity reads as a later one)",
            inst, bar.init_inst, relaxable=True)
    if _completed(bar, parity):
        bar.seen[w.warp_id] = target


#: Opcodes (first part) that only compute registers from registers: re-executing them
#: with the same inputs gives the same values (no memory, no synchronisation).
PURE = frozenset({"mov", "xor", "and", "or", "not", "add", "sub", "mul", "mad", "shl", "shr",
                  "setp", "selp", "cvt", "cvta", "min", "max", "neg", "abs", "bfe", "bfi",
                  "prmt", "lop3", "cnot"})
_VOLATILE = ("%clock", "%globaltimer")  # special registers a re-execution reads anew


def _back_branch(inst, prog):
    """The branch that closes the wait loop: `@!p bra HEAD` right after the wait, or
    CuTe DSL's `@p bra DONE; bra HEAD`. None when the wait does not loop."""
    nxt = prog[inst.idx + 1] if inst.idx + 1 < len(prog) else None
    if nxt is None or nxt.parts[0] != "bra" or nxt.guard != inst.operands[0].reg:
        return None
    if nxt.guard_neg:
        return nxt
    back = prog[inst.idx + 2] if inst.idx + 2 < len(prog) else None
    return back if back is not None and back.parts[0] == "bra" and back.guard < 0 else None


def _dests(x):
    from .ptx_parse import _regs_of
    return set(_regs_of(x.operands[0])) if x.operands else set()


def _pure(x) -> bool:
    return x.parts[0] in PURE and not any(
        op.kind == "sreg" and str(op.value).startswith(_VOLATILE) for op in x.operands)


def _is_spin(inst, prog) -> bool:
    """Whether the wait is the test of a loop that only polls it: the loop's back-branch
    returns to the wait, or to a head whose instructions up to the wait are pure register
    operations (PURE) reading no register the loop writes after them (so re-executing
    them cannot change what the wait tests: an inserted `xor` of the parity, say). Such a
    loop parks the warp at the wait until the barrier's phase changes."""
    back = _back_branch(inst, prog)
    if back is None or not back.data <= inst.idx:
        return False
    later: set = set()  # registers written at or after the instruction, up to the branch
    for x in reversed(prog[back.data:back.idx + 1]):
        later |= _dests(x)
        if x.idx < inst.idx and not _pure(x):
            return False
        if x.idx <= inst.idx and later & (set(x.srcs) | ({x.guard} - {-1})):
            return False
    return True


@decoder("mbarrier.try_wait", "mbarrier.test_wait")
def _dec_mbar_wait(inst):
    from .isa_support import machine
    m = machine()
    ops = inst.operands
    if "parity" not in inst.parts:
        raise Unsupported(f"'{inst.opcode}' (only the .parity form is modelled)")
    addr = address_reader(ops[1], m)
    parity = operand_reader(ops[2], "u32", m)
    wr = writer(ops[0], "pred", m)
    spin = [None]  # decided once the branches are resolved (first execution)

    def ex(w):
        if spin[0] is None:
            spin[0] = _is_spin(inst, w.prog)
        par = parity(w)
        a = addr(w)
        ok = np.zeros(LANES, dtype=bool)
        bars = {}
        for lane in np.flatnonzero(w.mask):
            bar = bars.get(int(a[lane]))
            if bar is None:
                bar = bars[int(a[lane])] = w.cta.mbarrier(int(a[lane]))
                _check_behind(w, bar, int(par[lane]) & 1, inst)
            ok[lane] = _completed(bar, int(par[lane]) & 1)
        if spin[0] and not ok[w.mask].all():
            pending = [(b, int(par[np.flatnonzero(w.mask & (a == k))[0]]) & 1)
                       for k, b in bars.items()]
            def what():
                return "; ".join(f"{b.describe()} for parity {p}" for b, p in pending)
            return w.block(lambda: all(_completed(b, p) for b, p in pending), what, retry=True)
        for k, bar in bars.items():  # a wait that observes a completed phase acquires it
            if ok[w.mask & (a == k)].any():
                w.cta.hb.acquire(w.warp_id, bar.done_clock)
        wr(w, ok)
    return ex


# ---------------------------------------------------------------- fences and hints
@decoder("fence.proxy.async")
def _dec_fence_proxy_async(inst):
    def ex(w):
        w.cta.races.fence(w)
    return ex


@decoder("fence", "membar", "fence.mbarrier_init", "fence.proxy.tensormap",
         "fence.proxy.alias", "fence.acq_rel", "fence.sc", "nanosleep", "griddepcontrol",
         "prefetch", "prefetchu", "discard", "applypriority")
def _dec_noop(inst):
    # Ordering fences: the emulator executes each warp's memory operations in program
    # order and makes a write visible to every warp at once, so these have nothing to
    # order; hints change no result.
    return lambda w: None


@decoder("setmaxnreg")
def _dec_setmaxnreg(inst):
    from .isa_support import machine
    n = operand_reader(inst.operands[0], "u32", machine())
    inc = "inc" in inst.parts

    def ex(w):
        v = int(n(w)[0])
        if not (24 <= v <= 256 and v % 8 == 0):
            raise w.machine.misuse(f"setmaxnreg {v}: must be a multiple of 8 in 24..256", inst)
        pool = RegisterPool.of(w.cta)
        return pool.increase(w, v, inst) if inc else pool.release(w, v, inst)
    return ex


class RegisterPool:
    """The CTA's register pool of setmaxnreg (PTX ISA, "setmaxnreg"): a CTA starts with
    every warp at the kernel's entry register count; `.dec` gives a warp's surplus back to
    the pool, `.inc` takes from it and blocks until the pool holds enough. Registers are
    not created: a kernel whose increases need more than its warps gave back waits forever
    on hardware, which the emulator reports as a deadlock naming the request.

    The entry count is what ptxas allocates a kernel that uses setmaxnreg: the most its
    launch bounds allow (65,536 registers of the SM over .maxntid x .minnctapersm threads,
    in units of 8, at most .maxnreg and 255): 168 at 384 threads, 96 at 640, as ptxas -v
    reports for the attention examples."""

    UNIT = 8
    SM_REGISTERS = 65536

    def __init__(self, cta) -> None:
        self.entry = entry_registers(cta.machine.kernel, cta.machine.launch.threads)
        self.held = {w.warp_id: self.entry for w in cta.warps}
        self.free = 0   # thread-registers given back and not yet taken (per lane: x 32)

    @staticmethod
    def of(cta) -> "RegisterPool":
        pool = cta.state.get("setmaxnreg")
        if pool is None:
            pool = cta.state["setmaxnreg"] = RegisterPool(cta)
        return pool

    def release(self, w, v: int, inst):
        cur = self.held[w.warp_id]
        if v > cur:
            raise w.machine.misuse(f"setmaxnreg.dec {v}: the warp holds {cur} registers a "
                                   "thread (dec must not raise the count)", inst)
        self.free += (cur - v) * LANES
        self.held[w.warp_id] = v
        w.cta.notify()

    def increase(self, w, v: int, inst):
        cur = self.held[w.warp_id]
        if v < cur:
            raise w.machine.misuse(f"setmaxnreg.inc {v}: the warp holds {cur} registers a "
                                   "thread (inc must not lower the count)", inst)
        need = (v - cur) * LANES
        if need > self.free:
            def what():
                return (f"setmaxnreg.inc {v}: needs {need} registers from the CTA's pool, "
                        f"which holds {self.free} (entry {self.entry} a thread x "
                        f"{len(self.held) * LANES} threads; now held: "
                        f"{sum(self.held.values()) * LANES})")
            return w.block(lambda: need <= self.free, what, retry=True)
        self.free -= need
        self.held[w.warp_id] = v


def entry_registers(kernel, threads: int) -> int:
    """The registers a thread holds at entry (see RegisterPool)."""
    ntid = 1
    for d in kernel.maxntid or (threads,):
        ntid *= d
    per_thread = RegisterPool.SM_REGISTERS // (ntid * max(1, kernel.minnctapersm))
    cap = min(per_thread, kernel.maxnreg or 255, 255)
    return cap // RegisterPool.UNIT * RegisterPool.UNIT


@decoder("createpolicy")
def _dec_createpolicy(inst):
    from .isa_support import machine
    wr = writer(inst.operands[0], "b64", machine())
    policy = np.full(LANES, 0x1000_0000_0000_0000 | hash(inst.opcode) & 0xFFFF, dtype=np.uint64)
    return lambda w: wr(w, policy)


@handler("prefetch.tensormap")
def prefetch_tensormap(warp, inst):
    """Checks that the address is a tensor map (the hardware would fault later)."""
    a = warp.addr(inst.operands[0])
    for x in a[warp.mask].tolist():
        if warp.machine.launch.params.tmap_at(int(x)) is None:
            raise warp.machine.misuse(f"prefetch.tensormap at {int(x):#x}: no tensor map there",
                                      inst)
