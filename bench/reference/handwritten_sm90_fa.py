"""Hand-written sm_90a FlashAttention forward in pyptx (reference lowering).

A reference, not part of the compiler: the sm_90a backend was shaped after
it (bench/attention.py times it beside the generated kernel). It is the code
the sm_90a backend should emit for
``shared/seeds/flash_atten_causal.co``: causal (or, with ``causal=False``,
full) attention forward, bf16, D=128, tensors in BSHD layout ``[B, S, H, D]``.
Every ``ptx.*`` / ``ptx.inst.*`` call below emits exactly one PTX instruction
(``ptx.mbarrier.wait`` emits its two-instruction try_wait spin loop);
comments of the form ``# co: ...`` name the Choreo statement a block lowers.

Schedule (non-persistent, one CTA per 128-row query tile):

* grid ``(cdiv(S, 128), H, B)``, 384 threads = 3 warpgroups,
  ``bm = cdiv(S, 128) - 1 - blockIdx.x`` so the long causal tiles start first;
* warpgroup 0 is the producer: ``setmaxnreg.dec 40``, one thread issues the
  TMA loads (Q once, then K/V tiles from the diagonal down to tile 0 into
  2-stage rings guarded by full/empty mbarriers);
* warpgroups 1 and 2 are consumers (``setmaxnreg.inc 232``), each owning 64
  query rows: QK^T with ``wgmma m64n128k16`` (both operands in shared memory),
  online softmax in registers with ``ex2`` and the seed's scale 0.12751743,
  P converted to bf16 in registers and fed as the A operand of the P@V
  ``wgmma`` (register-A form), QK[current] overlapped with PV[previous],
  final normalisation, O written to shared memory and stored with TMA.

Shared memory (dynamic, base rounded up to 1024 B at run time):

    q_shared  [2 stripes][128 rows][64 cols]   32 KiB   @ 0
    k_buf[2]  [2][128][64] each                 64 KiB   @ 32 KiB
    v_buf[2]  [2][128][64] each                 64 KiB   @ 96 KiB
    o_buf[2]  one [2][64][64] block per consumer 32 KiB  @ 160 KiB
    events    qf, kf[2], vf[2], ke[2], ve[2]    72 B     @ 192 KiB

A 128-column bf16 tile is kept as two 64-column "stripes" (128 B rows) in the
128-byte swizzle that TMA writes and wgmma reads (``SWIZZLE_128B``).

Long because: it is one kernel written out instruction by instruction, in the
order the GPU runs it (producer, then consumers); the backend's output is compared
with it block by block, which a kernel split over files would hide.

Launch: ``flash_attention(q, k, v, causal=True)`` with torch tensors.  The
launcher builds the tensor maps with ``cuTensorMapEncodeTiled`` (cuda-python)
and passes them by value as ``.param .align 64 .b8 tmap[128]`` kernel
parameters (the ``__grid_constant__ CUtensorMap`` convention), compiles the
traced PTX with ptxas and launches with ``cuLaunchKernel`` on torch's current
stream.  See ``docs/hopper-notes.md`` for why this does not go through
pyptx's own ``Kernel.__call__`` path.
"""

from __future__ import annotations

import ctypes
import functools
import struct
from typing import Any, Sequence

from choreo_py.runtime.build import find_ptxas, ptxas
from choreo_py.runtime.launch import CudaKernel as RuntimeKernel
from choreo_py.runtime.launch import tensor_map

from pyptx import kernel, ptx, reg
from pyptx.reg import Reg
from pyptx.types import b32, b64, f32, pred, s32, u32, u64

# --------------------------------------------------------------------------
# Seed constants
# --------------------------------------------------------------------------
BLOCK_M = 128
BLOCK_N = 128
WG_M = 64
DIM = 128
K_STAGES = 2
V_STAGES = 2
NUM_CONSUMERS = BLOCK_M // WG_M            # 2 consumer warpgroups
THREADS = 128 * (NUM_CONSUMERS + 1)        # 384
SCALE_LOG2 = 0.12751743                    # log2(e) / sqrt(128), from the seed
PRODUCER_REGS = 40
CONSUMER_REGS = 232

# One 128-byte swizzle stripe holds 64 bf16 columns.
STRIPE_COLS = 64
STRIPE_BYTES_128 = 128 * 128               # 128 rows x 128 B
TILE_BYTES = BLOCK_M * DIM * 2             # 32 KiB: one Q/K/V tile
O_WG_BYTES = WG_M * DIM * 2                # 16 KiB: one consumer's O block
O_STRIPE_BYTES = WG_M * 128                # 8 KiB: 64 rows x 128 B

# Shared-memory layout (byte offsets from the 1024-aligned base).
SMEM_Q = 0
SMEM_K = SMEM_Q + TILE_BYTES
SMEM_V = SMEM_K + K_STAGES * TILE_BYTES
SMEM_O = SMEM_V + V_STAGES * TILE_BYTES
SMEM_BAR = SMEM_O + NUM_CONSUMERS * O_WG_BYTES
BAR_QF = SMEM_BAR
BAR_KF = BAR_QF + 8
BAR_VF = BAR_KF + 8 * K_STAGES
BAR_KE = BAR_VF + 8 * V_STAGES
BAR_VE = BAR_KE + 8 * K_STAGES
SMEM_END = BAR_VE + 8 * V_STAGES
SMEM_ALIGN = 1024                          # 128B-swizzle atoms are 1024 B
DYN_SMEM_BYTES = SMEM_END + SMEM_ALIGN     # room to round the base up

# wgmma shared-memory descriptor constants (PTX ISA "matrix descriptor"):
#   bits 13:0 start>>4, 29:16 LBO>>4, 45:32 SBO>>4, 63:62 swizzle (1 = 128B).
SWIZZLE_128B = 1


def desc_const(*, lbo: int, sbo: int, swizzle: int = SWIZZLE_128B) -> int:
    """Constant (address-free) part of a wgmma shared-memory descriptor."""
    return (swizzle << 62) | ((sbo >> 4) << 32) | ((lbo >> 4) << 16)


# K-major operand (rows of 128 B, 8-row core groups 1024 B apart); LBO is
# unused by the swizzled K-major layouts and conventionally 16 B.
DESC_KMAJOR_SW128 = desc_const(lbo=16, sbo=1024)
# MN-major operand whose MN extent spans several 64-column stripes:
# LBO = distance between stripes, SBO = distance between 8-row (K) groups.
def desc_mnmajor_sw128(stripe_bytes: int) -> int:
    return desc_const(lbo=stripe_bytes, sbo=1024)


def f32_imm(x: float) -> str:
    """PTX f32 immediate (exact bit pattern)."""
    return "0f%08X" % struct.unpack("<I", struct.pack("<f", x))[0]


NEG_INF = "0fFF800000"

# Accumulator fragment of wgmma m64nNk16 (f32): register i of a thread holds
#   row = 16*warp + lane/4 + 8*((i % 4) // 2),  col = 8*(i // 4) + 2*(lane % 4) + (i % 2)
ACC_REGS = BLOCK_N * WG_M // 128            # 64 for n=128
ROW0_REGS = [i for i in range(ACC_REGS) if i % 4 < 2]
ROW1_REGS = [i for i in range(ACC_REGS) if i % 4 >= 2]


# --------------------------------------------------------------------------
# Small emitters shared by the sm_90a kernels.  Each is what the backend
# emits for one Choreo construct; each PTX instruction is one call.
# --------------------------------------------------------------------------

def u32_reg(src: Any) -> Reg:
    """``mov.u32 %r, src`` (special register, symbol or immediate)."""
    return reg.from_(src, u32)


def tensor_map_param(name: str) -> Reg:
    """Generic address of a by-value ``CUtensorMap`` kernel parameter."""
    sym = reg.scalar(u64)
    ptx.inst.mov.b64(sym, name)
    gen = reg.scalar(u64)
    ptx.inst.cvta.param.u64(gen, sym)
    return gen


def aligned_smem_base(symbol: str = "smem") -> Reg:
    """Shared address of the dynamic buffer, rounded up to 1024 bytes."""
    raw = u32_reg(symbol)
    base = reg.scalar(u32)
    ptx.inst.add.u32(base, raw, SMEM_ALIGN - 1)
    ptx.inst.and_.b32(base, base, -SMEM_ALIGN)
    return base


def smem_desc(addr: Reg, const_bits: int) -> Reg:
    """wgmma descriptor for the shared tile starting at ``addr``."""
    start = reg.scalar(u32)
    ptx.inst.shr.u32(start, addr, 4)
    desc = reg.scalar(u64)
    ptx.inst.cvt.u64.u32(desc, start)
    ptx.inst.or_.b64(desc, desc, const_bits)
    return desc


def desc_add(desc: Reg, byte_offset: int) -> Reg:
    """Descriptor of the same tile moved by ``byte_offset`` bytes."""
    if byte_offset == 0:
        return desc
    out = reg.scalar(u64)
    ptx.inst.add.s64(out, desc, byte_offset >> 4)
    return out


def tma_operand(tmap: Reg, coords: Sequence[Any]):
    """``[tmap, {c0, c1, ...}]`` operand of ``cp.async.bulk.tensor``."""
    parts = [c.name if isinstance(c, Reg) else str(c) for c in coords]
    return ptx.addr(tmap, ", {" + ", ".join(parts) + "}")


def tma_load_4d(dst: Reg, dst_offset: int, tmap: Reg, coords, mbar: Reg, policy: Reg) -> None:
    """One TMA box load global -> shared, completing on ``mbar``."""
    ptx.inst.cp.async_.bulk.tensor._4d.shared__cluster.global_.mbarrier__complete_tx__bytes.L2__cache_hint(
        ptx.addr(dst, dst_offset) if dst_offset else ptx.addr(dst),
        tma_operand(tmap, coords),
        ptx.addr(mbar),
        policy,
    )


def quad_allreduce(op: str, x: Reg) -> None:
    """Reduce ``x`` over the 4 lanes that share an accumulator row."""
    for lane_mask in (1, 2):
        other = reg.scalar(f32)
        ptx.inst.shfl.sync.bfly.b32(other, x, lane_mask, 31, -1)
        getattr(ptx.inst, op).f32(x, x, other)


def tree_reduce(op: str, dst: Reg, regs: Sequence[Reg]) -> None:
    """``dst = op(regs...)`` as a balanced tree (short dependency chains)."""
    vals = list(regs)
    while len(vals) > 1:
        nxt = []
        for i in range(0, len(vals) - 1, 2):
            t = dst if len(vals) == 2 else reg.scalar(f32)
            getattr(ptx.inst, op).f32(t, vals[i], vals[i + 1])
            nxt.append(t)
        if len(vals) % 2:
            nxt.append(vals[-1])
        vals = nxt
    if vals[0] is not dst and vals[0].name != dst.name:
        ptx.inst.mov.f32(dst, vals[0])


class EventRing:
    """``shared event e[STAGES]`` indexed by a monotonically increasing order.

    ``e.at(order)`` is slot ``order % STAGES`` waited on with phase parity
    ``(order / STAGES) & 1``.  Events declared ``= ready`` start in the
    completed state: their waiter uses the opposite parity, so the first
    wait on each slot falls through (phase -1 counts as complete).
    """

    def __init__(self, base: Reg, offset: int, stages: int, *, ready: bool = False) -> None:
        assert stages & (stages - 1) == 0
        self.base = base
        self.offset = offset
        self.stages = stages
        self.ready = ready
        self.shift = stages.bit_length() - 1

    def addr(self, order: Reg) -> Reg:
        slot = order & (self.stages - 1)
        byte = slot << 3
        out = reg.scalar(u32)
        ptx.inst.add.u32(out, byte, self.base)
        if self.offset:
            ptx.inst.add.u32(out, out, self.offset)
        return out

    def parity(self, order: Reg) -> Reg:
        ph = (order >> self.shift) & 1
        if self.ready:
            ph = ph ^ 1
        return ph

    def wait(self, order: Reg) -> None:
        ptx.mbarrier.wait(self.addr(order), self.parity(order))

    def arrive(self, order: Reg, *, pred_reg: Reg | None = None) -> None:
        ptx.mbarrier.arrive(self.addr(order), pred=pred_reg)


def event_addr(base: Reg, offset: int) -> Reg:
    out = reg.scalar(u32)
    ptx.inst.add.u32(out, base, offset)
    return out


def counted_loop(label: str, count: Reg, body) -> None:
    """``foreach {i} in [count]`` with a run-time trip count (may be 0)."""
    i = reg.scalar(u32, init=0)
    more = reg.scalar(pred)
    with ptx.if_(count > 0):
        with ptx.loop(label, pred=more):
            body(i)
            ptx.inst.add.u32(i, i, 1)
            ptx.inst.setp.lt.u32(more, i, count)


def store_acc_bf16_swizzled(acc, base: Reg, lane: Reg, warp_row: Reg, *, n_cols: int, stripe_bytes: int) -> None:
    """``mma.store acc, buf``: f32 accumulator (m64nN) -> bf16 shared tile.

    The destination is [n_cols/64 stripes][64 rows][128 B] in the 128-byte
    swizzle (16-byte chunk c of row r lives at chunk c ^ (r % 8)), i.e. the
    layout a SWIZZLE_128B TMA store reads.  One ``st.shared.b32`` per pair of
    columns; a warp's 32 stores of one instruction hit 32 distinct banks.
    """
    # row r0 = 16*warp + lane/4 (and r0 + 8); r0 % 8 == lane / 4.
    x = lane >> 2
    r0 = reg.scalar(u32)
    ptx.inst.add.u32(r0, warp_row, x)
    row_addr = reg.scalar(u32)
    ptx.inst.mad.lo.u32(row_addr, r0, 128, base)
    quad = lane & 3
    ptx.inst.mad.lo.u32(row_addr, quad, 4, row_addr)
    xs = x << 4
    chunk_addr = []
    for c in range(8):
        sw = reg.scalar(u32)
        ptx.inst.xor.b32(sw, xs, c << 4)
        a = reg.scalar(u32)
        ptx.inst.add.u32(a, row_addr, sw)
        chunk_addr.append(a)
    packed = reg.scalar(b32)
    for g in range(n_cols // 8):
        stripe, c = divmod(g, 8)
        for half in (0, 1):
            lo = acc[4 * g + 2 * half]
            hi = acc[4 * g + 2 * half + 1]
            ptx.inst.cvt.rn.bf16x2.f32(packed, hi, lo)
            off = stripe * stripe_bytes + half * 8 * 128
            ptx.inst.st.shared.b32(ptx.addr(chunk_addr[c], off) if off else ptx.addr(chunk_addr[c]), packed)


# --------------------------------------------------------------------------
# The kernel
# --------------------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def build_flash_attention(causal: bool = True):
    """Trace the FA forward kernel; ``causal`` selects the seed (True) or full attention."""
    name = "flash_atten_causal_sm90" if causal else "flash_atten_sm90"

    def fa_kernel():
        _fa_body(causal)

    fa_kernel.__name__ = name                  # the PTX entry symbol
    return kernel(
        arch="sm_90a",
        raw_params=[
            ("b8.align64.array128", "tmap_q"),
            ("b8.align64.array128", "tmap_k"),
            ("b8.align64.array128", "tmap_v"),
            ("b8.align64.array128", "tmap_o"),
            ("u32", "n_blocks"),
        ],
        extern_smem="smem",
        block=(THREADS, 1, 1),
        # co: [[launch_bounds(_, 1)]] -- a register cap at entry is what
        # makes setmaxnreg take effect (ptxas: 65536 / 384 -> 168 regs).
        raw_directives=[("maxntid", (THREADS, 1, 1)), ("minnctapersm", (1,))],
    )(fa_kernel)


def _fa_body(causal: bool) -> None:
    # co: parallel.async {tile, head, batch} by [cdiv(Q_SEQ,128), H, B] : block
    tmap_q = tensor_map_param("tmap_q")
    tmap_k = tensor_map_param("tmap_k")
    tmap_v = tensor_map_param("tmap_v")
    tmap_o = tensor_map_param("tmap_o")
    n_blocks = ptx.param(u32, "n_blocks")
    tile = u32_reg(ptx.special.ctaid.x())
    head = u32_reg(ptx.special.ctaid.y())
    batch = u32_reg(ptx.special.ctaid.z())
    tid = u32_reg(ptx.special.tid.x())

    # co: bm = cdiv(Q_SEQ, BLOCK_M) - 1 - tile;
    bm = reg.scalar(u32)
    ptx.inst.sub.u32(bm, n_blocks, 1)
    ptx.inst.sub.u32(bm, bm, tile)
    # co: kv_bound = bm + 1;   (full attention: every KV tile)
    kv_bound = reg.scalar(u32)
    if causal:
        ptx.inst.add.u32(kv_bound, bm, 1)
    else:
        ptx.inst.mov.u32(kv_bound, n_blocks)
    q_row = bm << 7                              # bm * BLOCK_M

    # co: shared ... q_shared, k_buf[2], v_buf[2], o_buf; shared event ...
    base = aligned_smem_base()
    qf = event_addr(base, BAR_QF)
    kf = EventRing(base, BAR_KF, K_STAGES)
    vf = EventRing(base, BAR_VF, V_STAGES)
    ke = EventRing(base, BAR_KE, K_STAGES, ready=True)
    ve = EventRing(base, BAR_VE, V_STAGES, ready=True)

    with ptx.if_(tid == 0):
        ptx.mbarrier.init(qf, 1)
        for s in range(K_STAGES):
            ptx.mbarrier.init(event_addr(base, BAR_KF + 8 * s), 1)
            ptx.mbarrier.init(event_addr(base, BAR_KE + 8 * s), NUM_CONSUMERS)
        for s in range(V_STAGES):
            ptx.mbarrier.init(event_addr(base, BAR_VF + 8 * s), 1)
            ptx.mbarrier.init(event_addr(base, BAR_VE + 8 * s), NUM_CONSUMERS)
        ptx.fence.mbarrier_init()
    ptx.bar.sync(0)

    # co: parallel p by [BLOCK_M / WG_M + 1] : group-4
    wg = tid >> 7
    ptx.bra("consumer_entry", pred=(wg != 0))

    # ================= producer: inthreads.async (p == 0) =============
    # co: call croq::cuda::setreg_dec(40);
    ptx.setmaxnreg(PRODUCER_REGS, inc=False)
    with ptx.if_(tid == 0):
        evict_first = reg.scalar(b64)
        ptx.inst.createpolicy.fractional.L2__evict_first.b64(evict_first, 1.0)
        evict_last = reg.scalar(b64)
        ptx.inst.createpolicy.fractional.L2__evict_last.b64(evict_last, 1.0)

        # co: q_load = tma.load.async.evict_first.swiz Q_head...at(bm, 0) => q_shared;
        #     trigger qf after q_load;
        ptx.mbarrier.arrive_expect_tx(qf, TILE_BYTES)
        for stripe in range(2):
            tma_load_4d(base, SMEM_Q + stripe * STRIPE_BYTES_128, tmap_q,
                        (stripe * STRIPE_COLS, head, q_row, batch), qf, evict_first)

        # co: foreach {issue} in [kv_bound] { bn = bm - issue; ... }
        def producer_step(issue: Reg) -> None:
            bn = reg.scalar(u32)
            ptx.inst.sub.u32(bn, kv_bound, 1)
            ptx.inst.sub.u32(bn, bn, issue)
            kv_row = bn << 7
            for ring_full, ring_empty, smem_off, tmap in (
                (kf, ke, SMEM_K, tmap_k),
                (vf, ve, SMEM_V, tmap_v),
            ):
                # co: wait ke.at(k_pipe_order);
                ring_empty.wait(issue)
                # co: k_load = tma.load.async.evict_last.swiz K_head...at(bn, 0) => k_buf[k_slot];
                #     trigger kf.at(k_pipe_order++) after k_load;
                full = ring_full.addr(issue)
                ptx.mbarrier.arrive_expect_tx(full, TILE_BYTES)
                slot = issue & 1
                dst = reg.scalar(u32)
                ptx.inst.mad.lo.u32(dst, slot, TILE_BYTES, base)
                for stripe in range(2):
                    tma_load_4d(dst, smem_off + stripe * STRIPE_BYTES_128, tmap,
                                (stripe * STRIPE_COLS, head, kv_row, batch), full, evict_last)

        counted_loop("producer_kv_loop", kv_bound, producer_step)
    ptx.ret()

    # ================= consumers: inthreads.async (p > 0) =============
    ptx.label("consumer_entry")
    # co: call croq::cuda::setreg_inc(232);
    ptx.setmaxnreg(CONSUMER_REGS, inc=True)
    # co: cid = p - 1;
    cid = reg.scalar(u32)
    ptx.inst.sub.u32(cid, wg, 1)
    ltid = tid & 127
    lane = tid & 31
    warp_row = (ltid >> 5) << 4                 # 16 * warp within the warpgroup
    is_leader = ltid == 0
    c_scale = reg.scalar(f32, init=SCALE_LOG2)

    k_order = reg.scalar(u32, init=0)
    v_order = reg.scalar(u32, init=0)

    # Descriptors: Q rows [64*cid, 64*cid+64) of q_shared (K-major A),
    # K tile (K-major B of S = Q K^T), V tile (MN-major B of O += P V).
    q_addr = reg.scalar(u32)
    ptx.inst.mad.lo.u32(q_addr, cid, WG_M * 128, base)   # 64 rows x 128 B
    q_desc = smem_desc(q_addr, DESC_KMAJOR_SW128)
    k_addr = event_addr(base, SMEM_K)
    k_desc0 = smem_desc(k_addr, DESC_KMAJOR_SW128)
    v_addr = event_addr(base, SMEM_V)
    v_desc0 = smem_desc(v_addr, desc_mnmajor_sw128(STRIPE_BYTES_128))
    TILE_DESC = TILE_BYTES >> 4

    def ring_desc(desc0: Reg, order: Reg) -> Reg:
        slot = reg.scalar(u64)
        ptx.inst.cvt.u64.u32(slot, order & 1)
        out = reg.scalar(u64)
        ptx.inst.mad.lo.u64(out, slot, TILE_DESC, desc0)
        return out

    acc_s = reg.array(f32, ACC_REGS)             # S tile, m64n128 fragment
    acc_o = reg.array(f32, ACC_REGS)             # O tile, m64n128 fragment
    p_frag = reg.array(b32, ACC_REGS // 2)       # co: frag bf16[WG_M, BLOCK_N] acc_s_cast

    def issue_qk(order: Reg) -> None:
        # co: qk = mma.row.row.async acc_s, q_shared...at(cid, 0), k_buf[k_slot];
        # (acc_s = mma.fill 0 folds into scale-d = 0 on the first k step)
        k_desc = ring_desc(k_desc0, order)
        for kk in range(DIM // 16):
            off = (kk // 4) * STRIPE_BYTES_128 + (kk % 4) * 32
            ptx.inst.wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16(
                list(acc_s), desc_add(q_desc, off), desc_add(k_desc, off),
                0 if kk == 0 else 1, 1, 1, 0, 0)
        ptx.wgmma.commit_group()

    def issue_pv(order: Reg) -> None:
        # co: pv = mma.row.col.async acc_o, acc_s_cast, v_buf[v_slot];
        v_desc = ring_desc(v_desc0, order)
        for kk in range(BLOCK_N // 16):
            ptx.inst.wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16(
                list(acc_o), [p_frag[4 * kk + j] for j in range(4)],
                desc_add(v_desc, kk * 16 * 128), 1, 1, 1, 1)
        ptx.wgmma.commit_group()

    def cast_p() -> None:
        # co: acc_s_cast.at(i, j) = __to(acc_s.at(i, j));
        # The m64nN accumulator of columns [16k, 16k+16) is exactly the
        # register-A fragment of k-step k: p[i] = bf16x2(s[2i+1], s[2i]).
        for i in range(ACC_REGS // 2):
            ptx.inst.cvt.rn.bf16x2.f32(p_frag[i], acc_s[2 * i + 1], acc_s[2 * i])

    def exp_rows(neg_mc0: Reg, neg_mc1: Reg) -> None:
        # co: acc_s = __exp2f(acc_s * 0.12751743f - scores_max * 0.12751743f);
        for i in range(ACC_REGS):
            ptx.inst.fma.rn.f32(acc_s[i], acc_s[i], c_scale, neg_mc0 if i % 4 < 2 else neg_mc1)
            ptx.inst.ex2.approx.ftz.f32(acc_s[i], acc_s[i])

    def row_max(m: Reg, rows) -> None:
        # co: reduce_max(scores_max, acc_s, 1);
        tree_reduce("max", m, [acc_s[i] for i in rows])
        quad_allreduce("max", m)

    def neg_scaled(m: Reg) -> Reg:
        out = reg.scalar(f32)
        ptx.inst.mul.f32(out, m, f32_imm(-SCALE_LOG2))
        return out

    # co: wait qf;
    ptx.mbarrier.wait(qf, 0)

    m0 = reg.scalar(f32)
    m1 = reg.scalar(f32)
    l0 = reg.scalar(f32)
    l1 = reg.scalar(f32)

    # ---- QK prologue: the diagonal tile (the only masked one) ----------
    kf.wait(k_order)                                  # co: wait kf.at(k_pipe_order);
    ptx.wgmma.fence()
    issue_qk(k_order)                                 # co: first_qk = mma...
    ptx.wgmma.wait_group(0)                           # co: wait first_qk;
    ke.arrive(k_order, pred_reg=is_leader)            # co: trigger ke.at(k_pipe_order++);
    ptx.inst.add.u32(k_order, k_order, 1)

    if causal:
        # co: apply {i, j} in acc_s.span { if (j > cid * WG_M + i) acc_s.at(i, j) = -inf; }
        # column - row = (2*(lane%4) + 8g + e) - (64*cid + r0 + 8*half)
        diff = reg.scalar(s32)
        quad2 = (lane & 3) << 1
        row_in_tile = reg.scalar(u32)
        ptx.inst.mad.lo.u32(row_in_tile, cid, WG_M, warp_row)
        ptx.inst.add.u32(row_in_tile, row_in_tile, lane >> 2)
        ptx.inst.sub.s32(diff, quad2, row_in_tile)
        masked = reg.scalar(pred)
        for i in range(ACC_REGS):
            g, e = divmod(i, 4)
            thresh = 8 * (e // 2) - 8 * g - (e % 2)
            ptx.inst.setp.gt.s32(masked, diff, thresh)
            ptx.inst.selp.f32(acc_s[i], NEG_INF, acc_s[i], masked)

    row_max(m0, ROW0_REGS)
    row_max(m1, ROW1_REGS)
    exp_rows(neg_scaled(m0), neg_scaled(m1))
    # co: scores_sum = sum_j acc_s; logsum = scores_sum;  (per-thread partial
    # sums: the cross-lane reduction is deferred to all_reduce_sum at the end)
    tree_reduce("add", l0, [acc_s[i] for i in ROW0_REGS])
    tree_reduce("add", l1, [acc_s[i] for i in ROW1_REGS])
    cast_p()
    # co: acc_o = mma.fill.f32 0.0f;
    for i in range(ACC_REGS):
        ptx.inst.mov.f32(acc_o[i], "0f00000000")

    # ---- steady state: QK[current] overlapped with PV[previous] --------
    n_steps = reg.scalar(u32)
    ptx.inst.sub.u32(n_steps, kv_bound, 1)

    def consumer_step(_step: Reg) -> None:
        kf.wait(k_order)                              # co: wait kf.at(k_pipe_order);
        ptx.wgmma.fence()
        issue_qk(k_order)                             # co: qk = mma...
        vf.wait(v_order)                              # co: wait vf.at(v_pipe_order);
        ptx.wgmma.fence()                             # the spin loop above is a branch
        issue_pv(v_order)                             # co: pv = mma...
        ptx.wgmma.wait_group(1)                       # co: wait qk;
        ke.arrive(k_order, pred_reg=is_leader)        # co: trigger ke.at(k_pipe_order++);
        ptx.inst.add.u32(k_order, k_order, 1)

        # co: copy(scores_max_prev, scores_max); reduce_max(...);
        #     scores_max = max(scores_max, prev); scores_scale = exp2(prev*c - max*c);
        scales = []
        for m, l, rows in ((m0, l0, ROW0_REGS), (m1, l1, ROW1_REGS)):
            m_prev = reg.scalar(f32)
            ptx.inst.mov.f32(m_prev, m)
            row_max(m, rows)
            ptx.inst.max.f32(m, m, m_prev)
            neg_mc = neg_scaled(m)
            scale = reg.scalar(f32)
            ptx.inst.fma.rn.f32(scale, m_prev, c_scale, neg_mc)
            ptx.inst.ex2.approx.ftz.f32(scale, scale)
            # co: logsum = logsum * scores_scale;
            ptx.inst.mul.f32(l, l, scale)
            scales.append((scale, neg_mc))
        exp_rows(scales[0][1], scales[1][1])
        # co: scores_sum = sum_j acc_s; logsum += scores_sum;
        for l, rows in ((l0, ROW0_REGS), (l1, ROW1_REGS)):
            part = reg.scalar(f32)
            tree_reduce("add", part, [acc_s[i] for i in rows])
            ptx.inst.add.f32(l, l, part)

        ptx.wgmma.wait_group(0)                       # co: wait pv;
        ve.arrive(v_order, pred_reg=is_leader)        # co: trigger ve.at(v_pipe_order++);
        ptx.inst.add.u32(v_order, v_order, 1)
        cast_p()
        # co: acc_o.at(i, j) = acc_o.at(i, j) * scores_scale.at(i);
        for i in range(ACC_REGS):
            ptx.inst.mul.f32(acc_o[i], acc_o[i], scales[0][0] if i % 4 < 2 else scales[1][0])

    counted_loop("consumer_kv_loop", n_steps, consumer_step)

    # ---- final PV overlaps the row-sum reduction and reciprocals -------
    vf.wait(v_order)                                  # co: wait vf.at(v_pipe_order);
    ptx.wgmma.fence()
    issue_pv(v_order)                                 # co: final_pv = mma...
    # co: all_reduce_sum(logsum); scores_scale = 1.0f / logsum;
    inv0 = reg.scalar(f32)
    inv1 = reg.scalar(f32)
    for l, inv in ((l0, inv0), (l1, inv1)):
        quad_allreduce("add", l)
        ptx.inst.rcp.approx.ftz.f32(inv, l)
    ptx.wgmma.wait_group(0)                           # co: wait final_pv;
    ve.arrive(v_order, pred_reg=is_leader)            # co: trigger ve.at(v_pipe_order++);
    for i in range(ACC_REGS):
        ptx.inst.mul.f32(acc_o[i], acc_o[i], inv0 if i % 4 < 2 else inv1)

    # co: mma.store acc_o, o_buf.subspan(WG_M, DIM).at(cid, 0);
    o_addr = reg.scalar(u32)
    ptx.inst.mad.lo.u32(o_addr, cid, O_WG_BYTES, base)
    ptx.inst.add.u32(o_addr, o_addr, SMEM_O)
    store_acc_bf16_swizzled(acc_o, o_addr, lane, warp_row, n_cols=DIM, stripe_bytes=O_STRIPE_BYTES)
    # Generic-proxy writes must be visible to the TMA (async proxy) read.
    ptx.fence.proxy_async_shared_cta()
    ptx.bar.sync(wg, 128)                             # named barrier 1/2: this warpgroup

    # co: tma.copy o_buf => O_head.subspan(BLOCK_M, DIM).at(bm, 0);
    with ptx.if_(is_leader):
        o_row = reg.scalar(u32)
        ptx.inst.mad.lo.u32(o_row, cid, WG_M, q_row)
        for stripe in range(2):
            src = reg.scalar(u32)
            ptx.inst.add.u32(src, o_addr, stripe * O_STRIPE_BYTES)
            ptx.cp.async_.bulk.tensor_4d.store(
                dst=tmap_o, src=src, coord=(stripe * STRIPE_COLS, head, o_row, batch))
        ptx.cp.async_.bulk.commit_group()
        ptx.cp.async_.bulk.wait_group(0, read=True)
    ptx.ret()


def flash_attention_ptx(causal: bool = True) -> str:
    return build_flash_attention(causal).ptx()


# --------------------------------------------------------------------------
# Runtime: the compiler's own (choreo_py.runtime: ptxas lookup, cubin loading,
# tensor maps, launch), adapted to the (grid, block, params) calls used here
# --------------------------------------------------------------------------

def ptxas_compile(ptx_src: str, arch: str = "sm_90a") -> tuple[bytes, str]:
    """Assemble PTX with ptxas -v; returns (cubin, ptxas log)."""
    return ptxas(ptx_src, arch, verbose=True)


class CudaKernel:
    """A reference kernel's PTX, assembled and loaded by the runtime on the current device."""

    def __init__(self, ptx_src: str, entry: str, dyn_smem: int) -> None:
        import torch

        if find_ptxas() is not None:
            self.cubin, self.ptxas_log = ptxas_compile(ptx_src)
        else:                                      # no toolkit: let the driver JIT the PTX
            self.cubin, self.ptxas_log = ptx_src.encode() + b"\0", "driver JIT"
        self.kernel = RuntimeKernel(self.cubin, entry, dyn_smem, torch.cuda.current_device())
        self.dyn_smem = dyn_smem

    def launch(self, grid, block, params: Sequence[Any], stream: int) -> None:
        """``params``: CUtensorMap objects (passed by value) or ctypes scalars."""
        self.kernel.launch(grid, block[0], RuntimeKernel.pack(params), stream)


def encode_tensor_map(ptr: int, dims: Sequence[int], strides_bytes: Sequence[int],
                      box: Sequence[int], *, swizzle_128b: bool = True):
    """cuTensorMapEncodeTiled for a bf16 tensor (dims innermost first), by the runtime."""
    return tensor_map(ptr, "bf16", tuple(dims), tuple(strides_bytes), tuple(box),
                      128 if swizzle_128b else 0)


def bshd_tensor_map(t, box_rows: int):
    """Tensor map over a contiguous [B, S, H, D] bf16 tensor: dims (D, H, S, B),
    box (64, 1, box_rows, 1) = one 64-column stripe of ``box_rows`` rows of one head."""
    B, S, H, D = t.shape
    return encode_tensor_map(
        t.data_ptr(), (D, H, S, B), (D * 2, H * D * 2, S * H * D * 2),
        (STRIPE_COLS, 1, box_rows, 1))


@functools.lru_cache(maxsize=None)
def _compiled_fa(causal: bool) -> CudaKernel:
    k = build_flash_attention(causal)
    name = "flash_atten_causal_sm90" if causal else "flash_atten_sm90"
    return CudaKernel(k.ptx(), name, DYN_SMEM_BYTES)


def flash_attention(q, k, v, *, causal: bool = True, out=None):
    """O = softmax(Q K^T / sqrt(128) [+ causal mask]) V for bf16 [B, S, H, 128] tensors."""
    import torch

    assert q.dtype == torch.bfloat16 and q.is_cuda
    assert q.shape == k.shape == v.shape, "Q_SEQ == KV_SEQ only"
    B, S, H, D = q.shape
    assert D == DIM and S % BLOCK_M == 0, "spike kernel: D == 128 and S % 128 == 0"
    for t in (q, k, v):
        assert t.is_contiguous()
    if out is None:
        out = torch.empty_like(q)
    kern = _compiled_fa(causal)
    n_blocks = S // BLOCK_M
    params = [
        bshd_tensor_map(q, BLOCK_M), bshd_tensor_map(k, BLOCK_N),
        bshd_tensor_map(v, BLOCK_N), bshd_tensor_map(out, WG_M),
        ctypes.c_uint32(n_blocks),
    ]
    stream = torch.cuda.current_stream(q.device).cuda_stream
    kern.launch((n_blocks, H, B), (THREADS, 1, 1), params, stream)
    return out
