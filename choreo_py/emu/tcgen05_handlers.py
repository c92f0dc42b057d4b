"""Opcode handlers of the tcgen05 family: PTX operands in, Tcgen05State calls out.

Forms modelled (cta_group::1 only; cta_group::2, .ws, multicast, sparsity, block
scaling and tcgen05.cp / tcgen05.shift are refused by name with their PTX line):

  tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [dst], ncols
  tcgen05.dealloc.cta_group::1.sync.aligned.b32 taddr, ncols
  tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned
  tcgen05.mma.cta_group::1.kind::{f16,tf32} [d], a-desc|[a], b-desc, idesc, enable-input-d
  tcgen05.commit.cta_group::1.mbarrier::arrive::one[.shared::cluster].b64 [mbar]
  tcgen05.ld.sync.aligned.<shape>.x<N>[.pack::16b].b32 {r...}, [taddr][, imm]
  tcgen05.st.sync.aligned.<shape>.x<N>[.unpack::16b].b32 [taddr][, imm], {r...}
  tcgen05.wait::ld / tcgen05.wait::st (.sync.aligned)
  tcgen05.fence::before_thread_sync / tcgen05.fence::after_thread_sync

Completion. A commit takes the issuing thread's MMAs issued since its last commit;
the CTA's async queue completes them later (the schedule's delay), in issue order
(the tensor pipe is in order): the results land in TMEM, the shared-memory operand
reads are released, then the mbarrier receives its arrival. A tcgen05.ld of a cell
whose MMA has not completed is a race; so is a TMA overwriting an operand an MMA
in flight still reads (the core's shared-memory tracker).
"""
from __future__ import annotations

import numpy as np


from . import warp_converge  # noqa: F401  (bar.warp.sync reconverges the warp)
from .hb import Shadow, join, words as hb_words
from .isa_table import Unsupported, handler
from .races import race_report
from .sm100_desc import DescriptorError
from .tcgen05 import Tcgen05State
from .tmem import POISON, TmemError

_NO_CLOCK = np.zeros(0, np.int32)

_SHAPES = ("32x32b", "16x64b", "16x128b", "16x256b", "16x32bx2")


def _state(warp) -> Tcgen05State:
    cta = warp.cta
    if cta.tmem is None:
        cta.tmem = Tcgen05State(strict=warp.machine.strict)
    return cta.tmem


# What relaxed mode lets pass (docs/emulator_sm100.md, "Relaxed mode"): reading never-written
# tensor memory, and a tcgen05.st read by an MMA after the writer's wait::st and a thread
# synchronisation but without tcgen05.fence::before_thread_sync.
_RELAXABLE = ("tmem-uninitialised", "tcgen05.st-unfenced")


def _flush(warp, st: Tcgen05State) -> None:
    """Turn the state's reports into the machine's races / notes."""
    reports, st.reports = st.reports, []
    for r in reports:
        if r.kind == "tmem-a-lane16":
            note = f"{warp.machine.where(warp.inst)}: {r.message}"
            if note not in warp.machine.notes:
                warp.machine.notes.append(note)
        else:
            warp.machine.race(r.message, warp.inst, relaxable=r.kind in _RELAXABLE)


def _guarded(fn):
    """Rule violations of tmem.py / sm100_desc.py become misuse reports at the PTX line."""
    def run(warp, inst):
        try:
            return fn(warp, inst)
        except (TmemError, DescriptorError) as err:
            raise warp.machine.misuse(str(err), inst) from None
    return run


def _uniform(warp, values: np.ndarray, what: str, relaxable: bool = False) -> int:
    """The warp-uniform value of a .sync.aligned operand.

    `relaxable`: relaxed mode takes the lowest active thread's value (noted). pyptx's
    tcgen05 probes, which ran on B200s, pass tcgen05.ld/st a per-thread address
    (base + lane << 16); their results fit the hardware using one thread's address."""
    lanes = warp.active_lanes()
    v = values[lanes]
    if (v != v[0]).any():
        msg = f"{what} differs between the threads of the warp (a .sync.aligned instruction " \
              "takes one value)"
        if not (relaxable and warp.machine.relaxed):
            raise warp.machine.misuse(msg, warp.inst)
        note = f"{warp.machine.where(warp.inst)}: {msg}; thread {int(lanes[0])}'s value used"
        if note not in warp.machine.notes:
            warp.machine.notes.append(note)
    return int(v[0])


def _require(inst, *parts: str) -> None:
    for p in parts:
        if p not in inst.parts:
            raise Unsupported(f"'{inst.opcode}': only the {p} form is modelled")


def _scalar(warp, op, ptype="b32") -> np.ndarray:
    return warp.read(op, ptype)


# ----------------------------------------------------------------- allocation
@handler("tcgen05.alloc")
@_guarded
def _alloc(warp, inst):
    _require(inst, "cta_group::1")
    st = _state(warp)
    dst = _uniform(warp, warp.addr(inst.operands[0]).astype(np.int64), "tcgen05.alloc address")
    ncols = _uniform(warp, _scalar(warp, inst.operands[1], "u32"), "tcgen05.alloc column count")
    col = st.tmem.alloc(ncols)
    if col is None:   # no room: the allocation blocks until a dealloc frees columns
        return warp.block(lambda: st.tmem.alloc_possible(ncols),
                          f"tcgen05.alloc of {ncols} columns (tensor memory full)")
    warp.cta.smem[dst:dst + 4] = np.array([col], np.uint32).view(np.uint8)
    _columns_hb(warp, inst, col, ncols, "tcgen05.alloc")
    return None


def _columns_hb(warp, inst, col: int, ncols: int, what: str, dealloc: bool = False) -> None:
    """tcgen05.alloc counts as a write of every cell of its columns by the warp's tcgen05
    agent: another thread's tcgen05 use of the columns must be ordered after it by
    fence::before_thread_sync -> thread sync -> fence::after_thread_sync (PTX ISA,
    "tcgen05 Memory Consistency Model": alloc is a tcgen05 operation). tcgen05.dealloc
    is such a write too, with a weaker ordering (_dealloc_clock)."""
    lanes, cols = np.meshgrid(np.arange(128), np.arange(col, col + ncols), indexing="ij")
    agent, epoch, clock = warp.cta.hb.tc_view(warp.warp_id)
    if dealloc:
        clock = _dealloc_clock(warp, clock)
    _tmem_hb(warp, inst, lanes, cols, True, agent, epoch, clock, what)


def _dealloc_clock(warp, clock):
    """What a tcgen05.dealloc is ordered after: the deallocating warp's generic clock (no
    fence::after_thread_sync needed), and every other warp's tcgen05.ld/st that the warp
    followed by a thread synchronisation reaching the deallocator (no
    fence::before_thread_sync needed): the design kernel, which ran on Blackwell, frees
    the columns after a bar.sync with neither fence on the correction warps' side
    (docs/emulator_sm100.md, rule 10). MMAs are ordered by their commit's mbarrier."""
    hb = warp.cta.hb
    w = warp.warp_id
    clock = join(clock, hb.vc[w])
    mine = hb.padded(hb.vc[w])
    for x, rec in warp.cta.state.get("tc_generic", {}).items():
        done = [e for e, g in rec.items() if g <= mine[x]]
        if x != w and done:
            a = hb.tc_agent(x)
            clock[a] = max(int(clock[a]), max(done))
    return clock


@handler("tcgen05.dealloc")
@_guarded
def _dealloc(warp, inst):
    _require(inst, "cta_group::1")
    st = _state(warp)
    taddr = _uniform(warp, _scalar(warp, inst.operands[0]), "tcgen05.dealloc address")
    ncols = _uniform(warp, _scalar(warp, inst.operands[1], "u32"), "tcgen05.dealloc columns")
    if taddr >> 16:
        raise TmemError(f"tcgen05.dealloc address {taddr:#x} is not an allocation (lane != 0)")
    _columns_hb(warp, inst, taddr & 0xFFFF, ncols, "tcgen05.dealloc", dealloc=True)
    st.tmem.dealloc(taddr & 0xFFFF, ncols)
    warp.cta.notify()
    return None


@handler("tcgen05.relinquish_alloc_permit")
@_guarded
def _relinquish(warp, inst):
    _require(inst, "cta_group::1")
    _state(warp).tmem.relinquish()
    return None


# ----------------------------------------------------------------- MMA and commit
def _mma_prepare(inst):
    for bad in ("cta_group::2", "ws", "sp", "block_scale", "collector"):
        if any(p == bad or p.startswith(bad + "::") for p in inst.parts):
            raise Unsupported(f"'{inst.opcode}': the .{bad} form is not modelled")
    _require(inst, "cta_group::1")
    kinds = [p.split("::", 1)[1] for p in inst.parts if p.startswith("kind::")]
    if not kinds:
        raise Unsupported(f"'{inst.opcode}': no .kind")
    ops = inst.operands
    mask_form = len(ops) == 6 and ops[4].kind == "vec" and len(ops[4].items) == 4
    if len(ops) != 5 and not mask_form:
        raise Unsupported(f"'{inst.opcode}': only the [d], a, b, idesc[, disable-output-lane], "
                          "enable-input-d forms (no scale-input-d) are modelled")
    return kinds[0]


@handler("tcgen05.mma", prepare=_mma_prepare)
@_guarded
def _mma(warp, inst):
    st = _state(warp)
    kind = inst.data
    d_op, a_op, b_op, idesc_op = inst.operands[:4]
    en_op = inst.operands[-1]
    if len(inst.operands) == 6:   # disable-output-lane: modelled when it disables nothing
        masks = [_scalar(warp, item, "b32")[warp.mask] for item in inst.operands[4].items]
        if any(m.any() for m in masks):
            raise warp.machine.misuse("tcgen05.mma with a non-zero disable-output-lane mask "
                                      "is not modelled", inst)
    d_addr = warp.addr(d_op).astype(np.int64)
    a_tmem = a_op.kind == "addr"
    a_val = warp.addr(a_op).astype(np.int64) if a_tmem else _scalar(warp, a_op, "b64")
    b_val = _scalar(warp, b_op, "b64")
    idesc = _scalar(warp, idesc_op, "b32")
    enable = _scalar(warp, en_op, "pred")
    races = warp.cta.races
    for lane in warp.active_lanes().tolist():
        seq = len(st.seq_line) + 1
        key = ("tcgen05.mma", id(st), seq)
        agent, epoch, clock, tclock = _pipe_issue(warp)

        def smem_read(lo, hi, what, addrs, nbytes, _key=key):
            races.async_read(inst, lo, hi, f"tcgen05.mma {what} operand", key=_key)
            races.hb_check(inst, hb_words(addrs.ravel(), nbytes), False, agent, epoch, clock,
                           f"tcgen05.mma (its {what} operand)")

        thread = int(warp.tid[lane])
        st.mma(thread, inst.line, kind, int(idesc[lane]), int(d_addr[lane]),
               ("tmem" if a_tmem else "smem", int(a_val[lane])), int(b_val[lane]),
               bool(enable[lane]), warp.cta.smem, smem_read=smem_read, key=key)
        op = st.uncommitted[thread][-1]
        if op.a_cells:
            _tmem_hb(warp, inst, *op.a_cells, False, agent, epoch, tclock,
                     "tcgen05.mma (its A operand)")
        _tmem_hb(warp, inst, op.lanes, op.cols, True, agent, epoch, tclock,
                 "tcgen05.mma (its D accumulator)")
    _flush(warp, st)
    return None


# ----------------------------------------------------------------- happens-before (hb.py)
def _pipe_issue(warp):
    """A tcgen05.mma issued by `warp`: (agent, epoch, shared-memory
    clock, tensor-memory clock). Its shared-memory operand reads are ordered after what
    the issuer did before (generic order: a TMA load waited for on an mbarrier needs no
    tcgen05 fence); its tensor-memory accesses only after the issuer's tcgen05 view
    (hb.py: what reached the issuer through tcgen05.fence::after_thread_sync, and the
    issuer's own tcgen05 work)."""
    hb, state = warp.cta.hb, warp.cta.state
    w = warp.warp_id
    agent = hb.agent(("mma", w), f"the tcgen05.mma pipe (MMAs issued by warp {w})")
    epoch = hb.epochs[agent] = hb.epochs.get(agent, 0) + 1
    key, tkey = ("mma_clock", w), ("mma_tclock", w)
    clock = state[key] = hb.padded(join(state.get(key, _NO_CLOCK), hb.release(w)))
    clock[agent] = epoch
    _, _, tc = hb.tc_view(w)
    tclock = state[tkey] = hb.padded(join(state.get(tkey, _NO_CLOCK), tc))
    tclock[agent] = epoch
    return agent, epoch, clock.copy(), tclock.copy()


def _tmem_hb(warp, inst, lanes, cols, write: bool, agent: int, epoch: int, clock, what: str):
    cta = warp.cta
    shadow = cta.state.get("tmem_hb")
    if shadow is None:
        shadow = cta.state["tmem_hb"] = Shadow(cta.hb, 128 * 512, "tensor memory")
    cells = (np.asarray(lanes, np.int64) * 512 + np.asarray(cols, np.int64)).ravel()
    hit = shadow.access(cells, write, agent, epoch, clock, inst.idx)
    if hit is not None:
        hint = _fence_hint(cta.hb, shadow, hit, warp.warp_id)
        # Synchronised, but no tcgen05.fence::after_thread_sync after the synchronisation:
        # strict reports it (the ISA's pattern); relaxed mode notes it, as FA4's forward
        # kernel, which ran on B200s, reads the S/O accumulators with tcgen05.ld right after
        # waiting on the mbarrier its MMA warp's tcgen05.commit arrives on, with no fence
        # (docs/emulator_sm100.md, rule 10).
        race_report(warp.machine, cta.hb, "tensor memory", hit, write, agent, what, inst,
                    lambda c: f"lane {c // 512} column {c % 512}", hint=hint,
                    relaxable=hint.startswith(f"warp {warp.warp_id} synchronised with it"))


def _fence_hint(hb, shadow, hit, w: int) -> str:
    """Which tcgen05 fence of the pattern fence::before_thread_sync -> thread sync ->
    fence::after_thread_sync (PTX ISA, "tcgen05 Memory Consistency Model") is missing."""
    cell, other, _, wrote = hit
    e = int(shadow.w_epoch[cell] if wrote else shadow.r_epoch[cell, other])
    key = next((k for k, a in hb.index.items() if a == other), None)
    vc = hb.padded(hb.vc[w])
    if vc[other] >= e:
        return (f"warp {w} synchronised with it, but without tcgen05.fence::after_thread_sync "
                "after that synchronisation its tcgen05 operations are not ordered by it")
    if isinstance(key, tuple) and key[0] == "tc":
        if not any(hb.padded(c)[other] >= e for c in hb.vc):
            return (f"warp {key[1]} executed no tcgen05.fence::before_thread_sync between "
                    "that access and a synchronisation, so no thread synchronisation orders it")
    return ("tcgen05 operations of two threads are ordered only by tcgen05.fence::"
            "before_thread_sync -> bar.sync / mbarrier arrive-wait -> tcgen05.fence::"
            "after_thread_sync")


def _warp_tmem(warp, inst, cells, write: bool, what: str) -> None:
    """A tcgen05.ld / tcgen05.st: an access of the warp's tcgen05 agent (hb.py)."""
    hb, w = warp.cta.hb, warp.warp_id
    agent, epoch, clock = hb.tc_view(w)
    # the warp's generic epoch at its last access of tcgen05 epoch `epoch` (_dealloc_clock)
    warp.cta.state.setdefault("tc_generic", {}).setdefault(w, {})[epoch] = int(hb.vc[w][w])
    lanes, lo, hi = cells
    for cols in (lo, hi):
        if cols is not None:
            _tmem_hb(warp, inst, lanes, cols, write, agent, epoch, clock, what)


@handler("tcgen05.commit")
@_guarded
def _commit(warp, inst):
    for bad in ("cta_group::2", "multicast::cluster"):
        if bad in inst.parts:
            raise Unsupported(f"'{inst.opcode}': the .{bad} form is not modelled")
    _require(inst, "cta_group::1", "mbarrier::arrive::one")
    st = _state(warp)
    cta = warp.cta
    addrs = warp.addr(inst.operands[0]).astype(np.int64)
    # the arrive-on releases the pipe's work up to here and what the thread did before
    w = warp.warp_id   # its MMAs only: tcgen05.commit tracks the executing thread's
    clock = join(join(warp.cta.hb.release(w), cta.state.get(("mma_clock", w), _NO_CLOCK)),
                 cta.state.get(("mma_tclock", w), _NO_CLOCK))
    for lane in warp.active_lanes().tolist():
        bar = cta.mbarrier(int(addrs[lane]))
        group = st.commit_take(int(warp.tid[lane]))

        def complete(_group=group, _bar=bar):
            for key in st.complete(_group):
                cta.races.release(key)
            _bar.arrive(1, clock)

        cta.schedule(complete, "tcgen05.commit (MMAs in flight)", inst)
    return None


# ----------------------------------------------------------------- ld / st
def _ldst_prepare(inst):
    shape = next((p for p in inst.parts if p in _SHAPES), None)
    num = next((int(p[1:]) for p in inst.parts if p[:1] == "x" and p[1:].isdigit()), None)
    if shape is None or num is None:
        raise Unsupported(f"'{inst.opcode}': shape or .num not modelled")
    pack = "pack::16b" in inst.parts or "unpack::16b" in inst.parts
    return shape, num, pack


def _half_split(warp, inst, shape, op) -> int | None:
    if shape != "16x32bx2":
        return None
    return _uniform(warp, _scalar(warp, op, "u32"), "immHalfSplitoff")


@handler("tcgen05.ld", prepare=_ldst_prepare)
@_guarded
def _ld(warp, inst):
    st = _state(warp)
    shape, num, pack = inst.data
    vec, addr = inst.operands[0], inst.operands[1]
    split = _half_split(warp, inst, shape, inst.operands[2]) if shape == "16x32bx2" else None
    taddr = _uniform(warp, warp.addr(addr).astype(np.int64), "tcgen05.ld address", True)
    values, now = st.ld(warp.warp_id, inst.line, taddr, shape, num, pack, split, warp.mask)
    _flush(warp, st)
    _warp_tmem(warp, inst, st._fragment_cells(warp.warp_id, taddr, shape, num, pack, split,
                                              "tcgen05.ld"), False, "tcgen05.ld")
    regs = [item.reg for item in vec.items]
    for r, reg in enumerate(regs):
        warp.write_reg(reg, now[:, r])
    # Until wait::ld the registers belong to the load: touching one is a race in strict
    # mode (they hold poison, the values land at the wait); relaxed mode wrote the values
    # at once and notes the first touch of each (isa_wgmma.check_async_registers).
    pending = warp.async_state.setdefault("tcgen05.ld", [])
    pending.append((regs, values if st.strict else None, warp.mask.copy()))
    for reg in regs:
        warp.inflight_regs[reg] = (inst, "ld")
    return None


@handler("tcgen05.wait::ld")
def _wait_ld(warp, inst):
    _state(warp).wait_ld(warp.warp_id)
    for regs, values, mask in warp.async_state.pop("tcgen05.ld", []):
        for r, reg in enumerate(regs):
            if values is not None:
                cur = warp.R[reg]
                v = values[:, r]
                if v.dtype != cur.dtype:
                    v = v.view(cur.dtype)
                warp.R[reg] = np.where(mask, v, cur)
            warp.inflight_regs.pop(reg, None)
    return None


@handler("tcgen05.st", prepare=_ldst_prepare)
@_guarded
def _st(warp, inst):
    st = _state(warp)
    shape, num, pack = inst.data
    addr, vec = inst.operands[0], inst.operands[-1]
    split = _half_split(warp, inst, shape, inst.operands[1]) if shape == "16x32bx2" else None
    taddr = _uniform(warp, warp.addr(addr).astype(np.int64), "tcgen05.st address", True)
    values = np.stack([_scalar(warp, item, "b32") for item in vec.items], axis=1)
    st.st(warp.warp_id, inst.line, taddr, shape, num, pack, split, values, warp.mask)
    _flush(warp, st)  # a store onto cells an MMA in flight reads or writes: reported here
    _warp_tmem(warp, inst, st._fragment_cells(warp.warp_id, taddr, shape, num, pack, split,
                                              "tcgen05.st"), True, "tcgen05.st")
    return None


@handler("tcgen05.wait::st")
def _wait_st(warp, inst):
    _state(warp).wait_st(warp.warp_id)
    return None


@handler("tcgen05.fence::before_thread_sync")
def _fence_before(warp, inst):
    _state(warp).fence_before(warp.warp_id)
    warp.cta.hb.tc_fence_before(warp.warp_id)
    return None


@handler("tcgen05.fence::after_thread_sync")
def _fence_after(warp, inst):
    warp.cta.hb.tc_fence_after(warp.warp_id)
    return None


@handler("tcgen05.cp", "tcgen05.shift")
def _refused(warp, inst):  # pragma: no cover - refused at load time by the prepare below
    raise Unsupported(f"'{inst.opcode}' is not modelled")


def _refuse_prepare(inst):
    raise Unsupported(f"'{inst.opcode}' is not modelled (no example kernel uses it)")


handler("tcgen05.cp", "tcgen05.shift", prepare=_refuse_prepare)(_refused)

__all__ = ["POISON"]
