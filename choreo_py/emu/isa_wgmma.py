"""sm_90 warpgroup MMA: wgmma.fence / mma_async / commit_group / wait_group.

wgmma.mma_async.sync.aligned.m64nNk16.f32.{bf16,f16}.{bf16,f16}
    d, a-desc | {a0..a3}, b-desc, scale-d, imm-scale-a, imm-scale-b[, imm-trans-a], imm-trans-b
wgmma.mma_async.sync.aligned.m64nNk32.f32.{e4m3,e5m2}.{e4m3,e5m2}
    d, a-desc, b-desc, scale-d, imm-scale-a, imm-scale-b    (K-major, shared memory only)

The four warps of a warpgroup hold 16 rows each of the 64-row D (and of a
register A); warp (id % 4) owns rows 16*(id % 4) ... +15, so every warp's
share is computed from its own registers and the shared operands when that
warp issues the instruction. Fragment layouts (PTX ISA, "wgmma register
fragments"): lane = 4*g + c; D register i holds row g + 8*((i >> 1) & 1),
column 8*(i >> 2) + 2*c + (i & 1); A register j (two 16-bit halves, the
lower k in the low half) holds row g + 8*(j & 1), columns 2*c + 8*(j >> 1)
+ {0, 1}.

Shared operands come through the sm_90 matrix descriptor (CUTLASS
GmmaDescriptor): start address bits 0-13 (>>4), leading byte offset 16-29
(>>4), stride byte offset 32-45 (>>4), base offset 49-51, layout 62-63
(0 interleave, 1 128B, 2 64B, 3 32B swizzle). Canonical layouts (CUTLASS
mma_sm90_desc.hpp, in elements; T = 16 bytes of elements, W = swizzle
bytes of elements):
    K-major, swizzled:   ((8,m),(T,2)) : ((W,SBO),(1,T))       row r at W*(r%8) + SBO*(r/8)
    K-major, interleave: ((8,m),(T,2)) : ((T,SBO),(1,LBO))
    MN-major, swizzled:  ((W,m),(8,k)) : ((1,LBO),(W,SBO))
    MN-major, interleave:((T,m),(8,k)) : ((1,SBO),(T,LBO))
then the swizzle of the absolute address (swizzle.py).

Numerics: the products of bf16/f16 (and fp8) pairs are exact in float32; each
k-step sums its 16 (32) products and the accumulator in float64 and rounds once
to float32. The hardware's internal accumulation order and precision are
not documented; the calibration (docs/emulator.md) measures the difference.

Strict mode: D is written at wgmma.wait_group (not at issue); until then
reading or writing an accumulator register, or writing a register A
operand, is a race, and the shared operands are in-flight asynchronous
reads (races.py).
"""
from __future__ import annotations

import re

import numpy as np

from .isa_alu import bf16_bits_to_f32, fp8_to_f16_bits
from .hb import join
from .isa_table import Unsupported, decoder
from .lanes import ALL, LANES
from .operands import operand_reader
from .swizzle import swizzle

_NO_CLOCK = np.zeros(0, np.int32)
_G = np.arange(LANES) // 4
_C = np.arange(LANES) % 4
LAYOUT_SWIZZLE = {0: 0, 1: 128, 2: 64, 3: 32}


def decode_desc(desc: int) -> dict:
    return {"start": (desc & 0x3FFF) << 4, "lbo": ((desc >> 16) & 0x3FFF) << 4,
            "sbo": ((desc >> 32) & 0x3FFF) << 4, "base_offset": (desc >> 49) & 7,
            "swizzle": LAYOUT_SWIZZLE[(desc >> 62) & 3]}


_ADDRS: dict = {}


def operand_addrs(desc: int, rows: int, k: int, es: int, mn_major: bool) -> np.ndarray:
    """Shared byte address of element (row, kk) of a rows x k operand, shape (rows, k)
    (read-only: kept per descriptor, as a pipeline's stages reuse a few descriptors)."""
    key = (desc, rows, k, es, mn_major)
    a = _ADDRS.get(key)
    if a is None:
        if len(_ADDRS) >= 4096:
            _ADDRS.clear()
        a = _operand_addrs(desc, rows, k, es, mn_major)
        a.flags.writeable = False
        _ADDRS[key] = a
    return a


def _operand_addrs(desc: int, rows: int, k: int, es: int, mn_major: bool) -> np.ndarray:
    d = decode_desc(desc)
    if d["base_offset"]:
        raise Unsupported("wgmma descriptor with a non-zero base offset")
    sw = d["swizzle"]
    r = np.arange(rows)[:, None]
    kk = np.arange(k)[None, :]
    t = 16 // es
    if not mn_major:
        if sw:
            off = (r % 8) * sw + (r // 8) * d["sbo"] + kk * es
        else:
            off = (r % 8) * 16 + (r // 8) * d["sbo"] + (kk % t) * es + (kk // t) * d["lbo"]
    else:
        if sw:
            wn = sw // es
            off = (r % wn) * es + (r // wn) * d["lbo"] + (kk % 8) * sw + (kk // 8) * d["sbo"]
        else:
            off = (r % t) * es + (r // t) * d["sbo"] + (kk % 8) * 16 + (kk // 8) * d["lbo"]
    return swizzle(d["start"] + off, sw)


#: input kind -> bytes per element
_ESIZE = {"bf16": 2, "f16": 2, "e4m3": 1, "e5m2": 1}


_FP8 = {}


def _to_f32(bits: np.ndarray, dtype: str) -> np.ndarray:
    if dtype == "bf16":
        return bf16_bits_to_f32(bits)
    if dtype in ("e4m3", "e5m2"):
        if dtype not in _FP8:  # the 256 codes, as the emulator's cvt decodes them
            _FP8[dtype] = fp8_to_f16_bits(dtype).view(np.float16).astype(np.float32)
        return _FP8[dtype][bits.astype(np.uint8)]
    return bits.view(np.float16).astype(np.float32)


def _d_index(n: int):
    i = np.arange(n // 2)
    rows = _G[:, None] + 8 * ((i[None, :] >> 1) & 1)
    cols = 8 * (i[None, :] >> 2) + 2 * _C[:, None] + (i[None, :] & 1)
    return rows, cols


def _a_index():
    j = np.arange(4)
    rows = _G[:, None] + 8 * (j[None, :] & 1)
    cols = 2 * _C[:, None] + 8 * (j[None, :] >> 1)
    return rows, cols


_A_ROWS, _A_COLS = _a_index()


def _state(w):
    return w.async_state.setdefault("wgmma", {"open": [], "groups": []})


@decoder("wgmma.fence")
def _dec_fence(inst):
    def ex(w):
        # Registers as the fence saw them: a later write replaces the array object (registers
        # are never changed in place), so `is` tells whether a thread wrote it since.
        w.async_state["wgmma.fence"] = list(w.R)
    return ex


def _check_fenced(w, inst, regs, what: str) -> None:
    """PTX ISA: wgmma.fence must order a thread's register accesses before a wgmma.mma_async
    that uses the same accumulator or A registers (chained MMAs excepted). Without it ptxas
    serialises the wgmma pipeline (a warning, correct results), so --relaxed notes it."""
    fenced = w.async_state.get("wgmma.fence")
    if fenced is None:
        w.machine.race("wgmma.mma_async without a wgmma.fence before it in this warp", inst,
                       relaxable=True)
        w.async_state["wgmma.fence"] = list(w.R)
        return
    for r in regs:
        if w.R[r] is not fenced[r]:
            w.machine.race(f"wgmma.mma_async uses {what} {w.machine.kernel.reg_names[r]}, written "
                           f"after the last wgmma.fence (the fence must order that write)",
                           inst, relaxable=True)
            fenced[r] = w.R[r]


@decoder("wgmma.mma_async")
def _dec_mma(inst):
    from .isa_support import machine
    m = machine()
    shape = next((p for p in inst.parts if re.fullmatch(r"m\d+n\d+k\d+", p)), None)
    if shape is None or "sp" in inst.parts:
        raise Unsupported(f"'{inst.opcode}'")
    mm, n, k = (int(x) for x in re.findall(r"\d+", shape))
    types = [p for p in inst.parts if p in ("f32", "f16", "bf16", "e4m3", "e5m2", "tf32", "s8",
                                             "u8", "s32")]
    dtype, atype, btype = types[0], types[1], types[2]
    es = _ESIZE.get(atype)
    if mm != 64 or dtype != "f32" or es is None or atype != btype or k != 32 // es:
        raise Unsupported(f"'{inst.opcode}' (modelled: m64nNk16 with bf16/f16 inputs, m64nNk32 "
                          f"with e4m3/e5m2 inputs, f32 accumulators)")
    ops = inst.operands
    d_regs = [op.reg for op in ops[0].items]
    if len(d_regs) != n // 2:
        raise Unsupported(f"'{inst.opcode}': {len(d_regs)} accumulator registers for N={n}")
    a_regs = [op.reg for op in ops[1].items] if ops[1].kind == "vec" else None
    a_desc = operand_reader(ops[1], "b64", m) if a_regs is None else None
    b_desc = operand_reader(ops[2], "b64", m)
    scale_d = operand_reader(ops[3], "pred" if ops[3].kind == "reg" else "s32", m)
    imms = [op.value for op in ops[4:]]
    if es == 1:  # 8-bit inputs: K-major from shared memory, no transpose operands
        if a_regs is not None or len(imms) != 2:
            raise Unsupported(f"'{inst.opcode}' with A in registers")
        (sa, sb), ta, tb = imms, 0, 0
    elif a_regs is None:
        sa, sb, ta, tb = imms
    else:
        sa, sb, tb = imms
        ta = 0
    if (sa, sb) != (1, 1):
        raise Unsupported(f"'{inst.opcode}' with negated inputs (imm-scale {sa}, {sb})")

    def ex(w):
        lane0, accumulate, key = issue_begin(w, inst, scale_d, d_regs, a_regs)
        rank, cta = w.warp_id % 4, w.cta
        bdesc = int(b_desc(w)[lane0])
        b_addr = operand_addrs(bdesc, n, k, es, bool(tb))
        cta.races.async_read(inst, int(b_addr.min()), int(b_addr.max()) + es,
                             "the wgmma B operand", key)
        cta.races.hb_warp(w, inst, b_addr.ravel(), es, False, "the wgmma B operand")
        bmat = _to_f32(_gather(cta, b_addr, es), btype)  # (n, k)
        if a_regs is None:
            adesc = int(a_desc(w)[lane0])
            a_addr = operand_addrs(adesc, 64, k, es, bool(ta))[16 * rank:16 * rank + 16]
            cta.races.async_read(inst, int(a_addr.min()), int(a_addr.max()) + es,
                                 "the wgmma A operand", key)
            cta.races.hb_warp(w, inst, a_addr.ravel(), es, False, "the wgmma A operand")
            amat = _to_f32(_gather(cta, a_addr, es), atype)  # (16, k)
        else:
            amat = np.zeros((16, 16), dtype=np.float32)
            for j, r in enumerate(a_regs):
                if r in w.unset:
                    w.check_read(r)
                v = w.R[r].view(np.uint32)
                lo = _to_f32((v & 0xFFFF).astype(np.uint16), atype)
                hi = _to_f32((v >> 16).astype(np.uint16), atype)
                amat[_A_ROWS[:, j], _A_COLS[:, j]] = lo
                amat[_A_ROWS[:, j], _A_COLS[:, j] + 1] = hi
        issue_result(w, inst, d_regs, a_regs, accumulate, amat, bmat, key)
    return ex


def issue_begin(w, inst, scale_d, d_regs, a_regs):
    """The checks and bookkeeping of one warp's issue of a warpgroup MMA: (first active
    lane, whether it accumulates, the operation's key)."""
    if not w.gfull:
        w.machine.race("wgmma.mma_async executed by a warp whose 32 lanes are not all "
                       "converged (.sync.aligned)", inst)
    lane0 = int(np.flatnonzero(w.mask)[0])
    accumulate = bool(scale_d(w)[lane0])
    _check_fenced(w, inst, d_regs if accumulate else (), "accumulator")
    _check_fenced(w, inst, a_regs or (), "A register")
    st = _state(w)
    seq = st["issued"] = st.get("issued", 0) + 1
    key = ("wgmma", w.warp_id // 4, seq)  # one key per warpgroup operation (see _retire)
    _warpgroup(w.cta, w)["issued"].setdefault(seq, set()).add(w.warp_id)
    w.cta.notify()
    return lane0, accumulate, key


def issue_result(w, inst, d_regs, a_regs, accumulate, amat, bmat, key) -> None:
    """D (this warp's 16 rows) = [D +] amat (16 x k) @ bmat (n x k)^T, pending until
    wgmma.wait_group writes it."""
    d_rows, d_cols = _d_index(2 * len(d_regs))
    acc = np.zeros((16, 2 * len(d_regs)), dtype=np.float64)
    if accumulate:
        cur = np.stack([_current(w, r) for r in d_regs], axis=1)  # (32, n/2)
        acc[d_rows, d_cols] = cur
    res = (acc + amat.astype(np.float64) @ bmat.astype(np.float64).T).astype(np.float32)
    vals = res[d_rows, d_cols]  # (32, n/2)
    st = _state(w)
    pending = st.setdefault("values", {})
    for i, r in enumerate(d_regs):
        pending[r] = vals[:, i]
        w.inflight_regs[r] = (inst, "acc")
    for r in a_regs or ():
        w.inflight_regs.setdefault(r, (inst, "a"))
    st["open"].append((d_regs, a_regs, key))
    # the wait_group that retires it is ordered after every warp's issue (hb.py)
    clocks = _warpgroup(w.cta, w).setdefault("clocks", {})
    clocks[key[2]] = join(clocks.get(key[2], _NO_CLOCK), w.cta.hb.release(w.warp_id))


def _warpgroup(cta, w) -> dict:
    groups = cta.state.setdefault("wgmma", {})
    return groups.setdefault(w.warp_id // 4, {"issued": {}})


def _complete(cta, w, key) -> bool:
    """A warpgroup MMA completes once all four warps issued it (.sync.aligned): then its
    shared operands are read for the whole warpgroup, which is what lets one thread of
    the warpgroup release the stage after its own wgmma.wait_group (CUTLASS's
    consumer_release does exactly this)."""
    warps = {x.warp_id for x in cta.warps if x.warp_id // 4 == w.warp_id // 4 and not x.done}
    issued = _warpgroup(cta, w)["issued"].get(key[2], set())
    return warps <= issued


def _current(w, r):
    """Accumulator r as an MMA with scale-d reads it: the value of an earlier MMA still in
    flight (chained MMAs), else the register (which the thread must have written)."""
    v = w.async_state.get("wgmma", {}).get("values", {}).get(r)
    if v is not None:
        return v
    if r in w.unset:
        w.check_read(r)
    return w.R[r].view(np.float32)


def _gather(cta, addrs: np.ndarray, es: int = 2) -> np.ndarray:
    lo = addrs.astype(np.int64)
    if es == 1:
        return cta.smem[lo]
    return cta.smem[lo[..., None] + np.arange(2)].view(np.uint16)[..., 0]


@decoder("wgmma.commit_group")
def _dec_commit(inst):
    def ex(w):
        st = _state(w)
        st["groups"].append(st["open"])
        st["open"] = []
    return ex


@decoder("wgmma.wait_group")
def _dec_wait(inst):
    from .isa_support import machine
    n = operand_reader(inst.operands[0], "u32", machine())

    def ex(w):
        st = _state(w)
        keep = int(n(w)[0])
        groups = st["groups"]
        retire = groups[:max(len(groups) - keep, 0)]
        keys = [key for group in retire for _, _, key in group]
        if not all(_complete(w.cta, w, k) for k in keys):
            return w.block(lambda: all(_complete(w.cta, w, k) for k in keys),
                           "the other warps of its warpgroup to issue the wgmma it waits for",
                           retry=True)
        st["groups"] = groups[len(retire):]
        values = st.get("values", {})
        still = {r for g in st["groups"] + [st["open"]] for d, _, _ in g for r in d}
        still_a = {r for g in st["groups"] + [st["open"]] for _, a, _ in g for r in (a or ())}
        wg_clocks = _warpgroup(w.cta, w).get("clocks", {})
        for group in retire:
            for d_regs, a_regs, key in group:
                w.cta.races.release(key)
                w.cta.hb.acquire(w.warp_id, wg_clocks.get(key[2]))
                for r in d_regs:
                    if r not in still and r in values:
                        w.R[r] = values.pop(r)
                        w.mark_written(r, ALL)  # the MMA computed all 32 lanes
                        w.inflight_regs.pop(r, None)
                        fenced = w.async_state.get("wgmma.fence")
                        if fenced is not None:  # the MMA's own result, not a thread's write
                            fenced[r] = w.R[r]
                for r in a_regs or ():
                    if r not in still_a and w.inflight_regs.get(r, (None, ""))[1] == "a":
                        w.inflight_regs.pop(r, None)
    return ex


def check_async_registers(machine, w, inst) -> None:
    """Strict: registers of an in-flight wgmma are not touched before wgmma.wait_group,
    nor those of a tcgen05.ld before tcgen05.wait::ld."""
    if inst.parts[0] in ("wgmma", "tcgen05"):
        return  # chained MMAs on the same accumulators, commit/wait themselves
    touch = inst.__dict__.get("_touch")
    if touch is None:
        from .ptx_parse import _regs_of
        dst = set(_regs_of(inst.operands[0])) if inst.operands else set()
        touch = inst._touch = (tuple(inst.srcs), tuple(dst))
    srcs, dsts = touch
    for r in srcs:
        hit = _owner(w, r)
        if hit is not None and hit[1] == "ld":
            _touch_ld(machine, w, inst, r, hit[0], "reads")
        elif hit is not None and hit[1] == "acc":
            machine.race(f"reads {machine.kernel.reg_names[r]} while the wgmma that writes it is "
                         f"in flight (wgmma.wait_group first)", inst, hit[0])
    for r in dsts:
        hit = _owner(w, r)
        if hit is not None and hit[1] == "ld":
            _touch_ld(machine, w, inst, r, hit[0], "writes")
        elif hit is not None:
            role = "writes" if hit[1] == "acc" else "reads as its A operand"
            machine.race(f"writes {machine.kernel.reg_names[r]}, which an in-flight wgmma "
                         f"{role} (wgmma.wait_group first)", inst, hit[0])


def _touch_ld(machine, w, inst, r: int, ld, how: str) -> None:
    """A register of a tcgen05.ld touched before tcgen05.wait::ld: a race in strict mode;
    relaxed mode (the hardware's register scoreboard orders such accesses, and FA4-style
    kernels rely on it) notes it once and hands the register back to the program."""
    if machine.strict:
        machine.race(f"{how} {machine.kernel.reg_names[r]} before tcgen05.wait::ld: the "
                     f"tcgen05.ld that writes it is in flight", inst, ld)
    # noted once per load instruction (the note names the load, not each register)
    machine.race("destination registers of this tcgen05.ld used before tcgen05.wait::ld "
                 "(the register scoreboard orders that on hardware)", ld, relaxable=True)
    w.inflight_regs.pop(r, None)


def _owner(w, r):
    """(instruction, role) of an async operation owning register r; a bare instruction
    (as other families record it) owns the register like an accumulator."""
    hit = w.inflight_regs.get(r)
    if hit is None or isinstance(hit, tuple):
        return hit
    return (hit, "acc")
