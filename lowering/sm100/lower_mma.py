"""One MMA statement on sm_100a: `acc (+)= a @ op(b)` as tcgen05.mma k-steps.

    [barrier over the instance, if its threads used TMEM or waited since]
    @!elected bra L_mma_issued
    tcgen05.fence::after_thread_sync
    tcgen05.mma.cta_group::1.kind::f16 [d], a, b, idesc, enable   x K/16
    tcgen05.commit...mbarrier::arrive::one [future's mbarrier]   (if a `wait` names it)
  L_mma_issued:
    bar.warp.sync -1            (reconverge: tcgen05.ld/st are .sync.aligned)
    xor phase, phase, 1         (the parity `wait` will see complete)

Operands: a shared tile is an sm_100 shared memory descriptor (address >> 4
| the constant fields of descriptors.py: LBO/SBO of the core's stripe
layout, version 1, the swizzle), advanced per k-step like wgmma's: K-major
16 columns inside a stripe, then the next stripe; MN-major (the B of
`row.col`) 16 rows. A bf16 A operand in TMEM (P) is `[a]`, 8 packed columns
per k-step. The instruction descriptor is the constant of
`descriptors.instr_desc_f16`.

An f16 accumulator's tile is f32 in tensor memory (D format f32) and is
rounded to f16 when each MMA statement completes: tcgen05.ld, cvt.rn.f16.f32 /
cvt.f32.f16, tcgen05.st, as sm_90a rounds its f32 registers after the wgmma
wait. That is the program's f16 accumulator, `acc = f16(acc + a @ b)` per
statement with the product summed in f32 (what the interpreter computes). A D
of format f16 (idesc bits 4-5 = 0) would round after every K = 16 instruction
of the statement instead: another value for K > 16, and sm_90a's results would
differ from sm_100a's. The cost is one load/round/store of the tile per
statement; only synchronous MMAs in a warpgroup role take it (an asynchronous
MMA has no point where the role's threads could round before the next one).
"""
from __future__ import annotations

from choreo_py import ir

from ..core import events
from ..core.fragments import k_steps, mma_accumulator
from ..core.descriptors import desc_add, tile_descriptor
from ..core.context import Lowering
from ..core.f16_values import round_f16
from ..core.writer import V
from . import descriptors as d
from ..core.memory import addr as _addr

MMA_K = 16


def issue(t, lw: Lowering, s: ir.Mma, zero_first: bool) -> None:
    t._check_role(lw, s.loc, s.acc)
    single = lw.role.single_thread  # an issue-only role (block_acc.py): no election
    acc = mma_accumulator(lw, s)
    m, n = acc.frag.shape
    kind, k, a_tmem = _a_operand(lw, s)
    if acc.frag.dtype == "f16":
        _check_f16(t, lw, s)
    b = lw.memory.layout(s.b.base, s.loc)
    trans_b = s.layout == "row.col"
    want = (k, n) if trans_b else (n, k)
    if _shape(s.b) != want:
        raise lw.refuse(f"mma.{s.layout} with B of shape {list(_shape(s.b))} (expected "
                        f"{list(want)})", s.loc)
    if kind not in ("bf16", "f16") or b.dtype != kind:
        raise lw.refuse(f"an MMA on {kind} x {b.dtype}", s.loc)
    if k % MMA_K:
        raise lw.refuse(f"an MMA with K = {k} (a multiple of {MMA_K})", s.loc)
    try:
        idesc = d.instr_desc_f16(m, n, ab_dtype=kind, a_major="K",
                                 b_major="MN" if trans_b else "K", a_in_tmem=a_tmem is not None)
    except ValueError as e:
        raise lw.refuse(f"this MMA shape ({e})", s.loc) from None
    w = lw.w
    fut = t.future_of[id(s)]
    b_desc, b_col0 = _desc(lw, s.b, s.loc, mn_major=trans_b)
    if a_tmem is None:
        a_desc, a_col0 = _desc(lw, s.a, s.loc, mn_major=False)
        a_lay = lw.memory.layout(s.a.base, s.loc)
    else:
        a_addr = t.region_addr(lw, a_tmem)
    d_addr = t.region_addr(lw, s.acc)
    id_reg = lw.once(("idesc", idesc), lambda: _const(lw, "b32", f"idesc_{idesc:08x}", hex(idesc)))
    first = _enable(t, lw, s, zero_first)
    on = lw.once(("pred", 1), lambda: _const(lw, "pred", "accumulate", 1))
    own = fut in t.futures  # an mbarrier of its own: something waits the future
    if own:
        bar, bar_off = t.barrier(lw, fut)
        phase = t.phase(lw, fut)
    if not single:
        t.sync_before_issue(lw, fut)
    w.comment(f"one {'' if single else 'elected '}thread issues {k // MMA_K} k-steps of "
              f"M={m} N={n} K={MMA_K}; " + (f"the commit arms '{fut}'" if own else
                                            f"the triggers after '{fut}' commit it"))
    done = w.label("mma_issued")
    if not single:
        w.bra(done, lw.inst_leader(), negate=True)
    lw.depth += not single  # values made here are not available to the other threads
    w.call("ptx.tcgen05.fence_after_thread_sync")
    for i, kk in enumerate(k_steps(lw, s, k, MMA_K)):
        if trans_b:
            bd = desc_add(lw, b_desc, kk * MMA_K * b.row_bytes)
        else:
            bd = desc_add(lw, b_desc, _kmajor_step(b, b_col0, kk))
        if a_tmem is None:
            a = desc_add(lw, a_desc, _kmajor_step(a_lay, a_col0, kk)).text
        else:
            a = _addr(a_addr, kk * MMA_K // 2)  # two bf16 per 32-bit column
        w.op("tcgen05.mma.cta_group::1.kind::f16", _addr(d_addr), a, bd, id_reg,
             first if i == 0 else on)
    if own:
        w.op("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64",
             _addr(bar, bar_off))
    lw.depth -= not single
    if not single:
        w.put_label(done)
        w.op("bar.warp.sync", -1)
    if own:
        w.op("xor.b32", phase, phase, 1)
    if s.acc in t.flow.flagged:
        w.op("mov.pred", t._flag(lw, s.acc), 1)
    if s.future is None:
        t.wait_future(lw, fut)
        if acc.frag.dtype == "f16":
            _round_f16(t, lw, acc)


def _round_f16(t, lw: Lowering, acc) -> None:
    """An f16 accumulator's tile takes f16 precision after the MMA (f16_values.round_f16):
    every thread loads its rows, rounds them and stores them back (the module's
    docstring says why the tile is f32 in tensor memory)."""
    regs = acc.layout.regs
    lw.w.comment(f"{acc.frag.name} is f16: its f32 cells take f16 precision after the MMA")
    t.tmem_load(lw, acc.frag.name, acc.array, regs)
    round_f16(lw, [V(f"{acc.array}[{k}]", "f32") for k in range(regs)])
    t.tmem_store(lw, acc.frag.name, acc.array, regs, packed=False)


def _check_f16(t, lw: Lowering, s: ir.Mma) -> None:
    """The f16 rounding needs the role's threads right after the MMA completes."""
    if s.future is not None:
        raise lw.refuse(f"an asynchronous MMA into the f16 accumulator '{s.acc}'", s.loc)
    if lw.role.single_thread or s.acc in t.block:
        raise lw.refuse(f"the f16 accumulator '{s.acc}' of an issue-only role or of the block",
                        s.loc)


def commit_trigger(t, lw: Lowering, s: ir.Trigger) -> None:
    """`trigger e after qk`: the thread that issued the MMAs commits them to e's slot.

    tcgen05.commit makes the mbarrier track every tcgen05 operation the thread issued
    before it (the pipe is in order), so the slot completes when qk and every earlier
    MMA of the role have completed; the role does not wait. One commit is one arrival,
    as the plain trigger's one arrive per instance (passes/event_arrivals.py). In a
    warpgroup role the threads' tensor-memory reads and writes are ordered before the
    commit as before an issue (fence, barrier over the instance), and their shared-memory
    writes as before a plain trigger (fence.proxy.async, barrier): a waiter may read them
    or hand the buffer to the TMA engine."""
    for name in s.after:
        if name not in t.future_of.values() or not t.in_mma_role(lw):
            raise lw.refuse(f"'trigger ... after {name}' outside the role that issues the MMA",
                            s.loc)
    single = lw.role.single_thread
    reg, off = events.slot_address(lw, s.event, s.loc)  # at depth 0: every thread has it
    w = lw.w
    if not single:  # what the role's threads wrote to shared memory is the waiters' too
        lw.instance_sync_if_dirty()
        t.sync_before_issue(lw, s.after[0])
    w.comment(f"{s.event.event} completes when {', '.join(s.after)} (and every earlier MMA of "
              "this thread) has completed")
    if not single:
        done = w.label("committed")
        w.bra(done, lw.inst_leader(), negate=True)
    w.op("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64",
         _addr(reg, off))
    if not single:
        w.put_label(done)
        w.op("bar.warp.sync", -1)


def _enable(t, lw: Lowering, s: ir.Mma, zero_first: bool) -> V:
    """Enable-input-d of k-step 0: overwrite after a fill 0, else accumulate."""
    if zero_first:
        return lw.once(("pred", 0), lambda: _const(lw, "pred", "overwrite", 0))
    if s.acc in t.flow.flagged:
        return t._flag(lw, s.acc)
    return lw.once(("pred", 1), lambda: _const(lw, "pred", "accumulate", 1))


def _a_operand(lw: Lowering, s: ir.Mma):
    """(element type, K, TMEM operand name or None)."""
    if isinstance(s.a, str):
        fi = lw.frags.get(s.a)
        if fi is None or fi.kind != "operand":
            raise lw.refuse(f"an MMA whose A '{s.a}' is not a register operand", s.loc)
        acc = lw.frags[s.acc].frag
        if fi.frag.shape[0] != acc.shape[0]:
            raise lw.refuse(f"an A operand of {fi.frag.shape[0]} rows into an accumulator of "
                            f"{acc.shape[0]}", s.loc)
        return fi.frag.dtype, fi.frag.shape[1], s.a
    shape = _shape(s.a)
    acc = lw.frags[s.acc].frag
    if shape[0] != acc.shape[0]:
        raise lw.refuse(f"an MMA whose A tile has {shape[0]} rows (the accumulator has "
                        f"{acc.shape[0]})", s.loc)
    return lw.memory.layout(s.a.base, s.loc).dtype, shape[1], None


def _desc(lw: Lowering, view: ir.View, loc, *, mn_major: bool):
    """Descriptor of a shared tile's origin (the sm_100 layout bits)."""
    return tile_descriptor(lw, view, loc, lambda lay: d.smem_desc_bits(
        lay.swizzle, mn_major=mn_major, stripe_bytes=lay.stripe_bytes, row_bytes=lay.row_bytes))


def _kmajor_step(lay, col0: int, kk: int) -> int:
    """Bytes from the tile's first column to k-step kk's (16 columns per step)."""
    def at(c: int) -> int:
        return (c // lay.stripe_cols) * lay.stripe_bytes + (c % lay.stripe_cols) * lay.esize
    return at(col0 + MMA_K * kk) - at(col0)


def _const(lw: Lowering, ty: str, hint: str, value) -> V:
    r = lw.w.reg(ty, hint)
    lw.w.op(f"mov.{ty}", r, value)
    return r


def _shape(v: ir.View) -> tuple:
    return tuple(e.value if isinstance(e, ir.Const) else None for e in v.shape)

