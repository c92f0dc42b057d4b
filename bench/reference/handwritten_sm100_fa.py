"""Hand-written sm_100a FlashAttention forward in pyptx 0.1.1 (reference lowering).

This is the code the sm_100a backend should emit for
``shared/seeds/flash_atten_causal.co`` (causal, or full attention with
``causal=False``; bf16, D = 128, BSHD tensors). It keeps the seed's schedule
and roles and changes only the MMA / accumulator path against the
sm_90a kernel (``lowering/sm90/handwritten_fa.py``, whose TMA, mbarrier-ring
and loop emitters it reuses unchanged):

* warpgroup 0 is the producer (one thread issues the TMA loads, as on Hopper);
  warpgroups 1 and 2 are the consumers, 64 query rows each;
* accumulators live in tensor memory (TMEM). Warp 4 allocates 512 columns;
  the address is broadcast through shared memory. Layout (the TMEM map of
  the seed, see ``choreo_py/passes/tmem_plan.py``): consumer c uses lane alignment 16*c of the
  M=64 "layout F" data path, both consumers share the columns
  S = acc_s 0..127, O = acc_o 128..255, P = acc_s_cast 256..319 (bf16 packed);
* one elected thread per consumer (its warpgroup's thread 0) issues
  ``tcgen05.mma.cta_group::1.kind::f16`` M=64 N=128 K=16: QK^T with both
  operands in shared memory, P@V with A = P read from TMEM (the ``[a-tmem]``
  form). ``mma.fill 0`` becomes the enable-input-d predicate of the first
  k-step (static false for S; ``v_order != 0`` for O, whose first PV may be
  the final one). Each MMA future is an mbarrier armed by ``tcgen05.commit``;
* ``wait`` on such a future is ``mbarrier.try_wait`` + ``tcgen05.fence::after_thread_sync``;
* softmax runs in registers on a ``tcgen05.ld.16x32bx2`` of S: thread t of a
  warp holds row 16*warp + t%16, columns 64*(t/16) .. +63, so a row is split
  over the thread pair (t, t^16) and a row reduction is a local tree plus one
  ``shfl.bfly 16`` (M=64 cannot give 128 threads whole rows; see
  docs/blackwell-notes.md);
* P goes back to TMEM as bf16x2 with ``tcgen05.st``, O is rescaled with
  tcgen05.ld/st, and the epilogue is tcgen05.ld -> st.shared (128B swizzle)
  -> one TMA store of the 128-row tile by the role leader after ``role.sync``;
* at the end warp 4 deallocates and relinquishes the allocation permit.

Each ``ptx.*`` call emits one PTX instruction (``ptx.mbarrier.wait`` emits
its try_wait loop); ``# co:`` comments name the Choreo statement a block
lowers. The tcgen05 emitters are in ``emit.py`` (with the pyptx 0.1.1 gaps
they work around); docs/blackwell-notes.md has the statement-by-statement
table, the TMEM layout decision and the ptxas figures.
"""
from __future__ import annotations

import functools

from pyptx import kernel, ptx, reg
from pyptx.reg import Reg
from pyptx.types import b32, b64, f32, pred, s32, u32

from choreo_py.lowering.sm100 import descriptors as d
from choreo_py.runtime.build import ptxas

from handwritten_sm90_fa import (EventRing, aligned_smem_base, counted_loop, event_addr,
                                 f32_imm, tensor_map_param, tma_load_4d, tree_reduce, u32_reg)
from handwritten_sm100_emit import (desc_at, mma_commit, pair_allreduce, ring_desc, smem_desc, tmem_load_rows,
                   tmem_offset, tmem_publish, tmem_store_rows, umma, wait_mma)

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
MMA_K = 16                                 # kind::f16 K per instruction

STRIPE_COLS = 64                           # one 128-B swizzle row holds 64 bf16
STRIPE_BYTES = BLOCK_M * 128               # 128 rows x 128 B
TILE_BYTES = BLOCK_M * DIM * 2             # 32 KiB: one Q/K/V/O tile

# Shared memory (byte offsets from the 1024-aligned base). o_buf is one
# 128-row tile like q_shared: the IR stores it with one leader TMA store.
SMEM_Q = 0
SMEM_K = SMEM_Q + TILE_BYTES
SMEM_V = SMEM_K + K_STAGES * TILE_BYTES
SMEM_O = SMEM_V + V_STAGES * TILE_BYTES
SMEM_BAR = SMEM_O + TILE_BYTES
BAR_QF = SMEM_BAR
BAR_KF = BAR_QF + 8
BAR_VF = BAR_KF + 8 * K_STAGES
BAR_KE = BAR_VF + 8 * V_STAGES
BAR_VE = BAR_KE + 8 * K_STAGES
BAR_MMA_S = BAR_VE + 8 * V_STAGES          # future of the MMAs into acc_s, per consumer
BAR_MMA_O = BAR_MMA_S + 8 * NUM_CONSUMERS  # future of the MMAs into acc_o, per consumer
SMEM_TMEM_SLOT = BAR_MMA_O + 8 * NUM_CONSUMERS   # tcgen05.alloc writes the base here
SMEM_END = SMEM_TMEM_SLOT + 8
SMEM_ALIGN = 1024
DYN_SMEM_BYTES = SMEM_END + SMEM_ALIGN     # room to round the base up

# Tensor memory: the seed's TMEM map (pass tmem-plan) (tests/test_sm100_tmem.py).
TMEM_ALLOC_COLS = 512
# S is shared by the consumers' lane halves (consumer c at lanes + 16c, layout F);
# P, the TMEM A operand of P@V, and O, that MMA's accumulator, stay at lane 0 with
# columns of their own per consumer (CUTLASS's NonInterleaved TMEM-A allocation).
TMEM_S = 0                                 # acc_s, f32 [64, 128]
TMEM_O = 128                               # acc_o, f32 [64, 128]; consumer c: + 128c
TMEM_P = 384                               # acc_s_cast, bf16 [64, 128] in 64 columns; + 64c
LANE_ALIGN = 16                            # acc_s of consumer c: lanes + 16c
TMEM_STEP = {"acc_s": LANE_ALIGN << 16, "acc_o": 128, "acc_s_cast": 64}
HALF = BLOCK_N // 2                        # columns per thread of a 16x32bx2 load
ALLOC_WARP = 4                             # consumer 0's first warp allocates and frees

# Named barriers: 0 the whole CTA, 1 + cid one consumer, 3 both consumers (role.sync).
ROLE_BARRIER = 3

IDESC_QK = d.instr_desc_f16(WG_M, BLOCK_N, a_major="K", b_major="K")
IDESC_PV = d.instr_desc_f16(WG_M, DIM, a_major="K", b_major="MN", a_in_tmem=True)
DESC_K_MAJOR = d.kmajor_sw128_const()                  # Q (A), K (B of QK^T)
DESC_V = d.mnmajor_sw128_const(STRIPE_BYTES)           # V: N-major B, stripes 16 KiB apart
NEG_INF = "0fFF800000"


# --------------------------------------------------------------------------
# The kernel
# --------------------------------------------------------------------------

def kernel_name(causal: bool) -> str:
    return "flash_atten_causal_sm100" if causal else "flash_atten_sm100"


@functools.lru_cache(maxsize=None)
def build_flash_attention(causal: bool = True):
    """Trace the FA forward kernel; ``causal`` selects the seed (True) or full attention."""

    def fa_kernel():
        _fa_body(causal)

    fa_kernel.__name__ = kernel_name(causal)          # the PTX entry symbol
    return kernel(
        arch="sm_100a",
        raw_params=[
            ("b8.align64.array128", "tmap_q"),
            ("b8.align64.array128", "tmap_k"),
            ("b8.align64.array128", "tmap_v"),
            ("b8.align64.array128", "tmap_o"),
            ("u32", "n_blocks"),
        ],
        extern_smem="smem",
        block=(THREADS, 1, 1),
        # co: [[launch_bounds(_, 1)]] -- the entry register cap lets setmaxnreg act.
        raw_directives=[("maxntid", (THREADS, 1, 1)), ("minnctapersm", (1,))],
    )(fa_kernel)


class _Block:
    """Per-CTA values shared by the roles (registers traced once at entry)."""

    def __init__(self, causal: bool) -> None:
        self.causal = causal
        # co: parallel.async {tile, head, batch} by [cdiv(Q_SEQ, BLOCK_M), H, B] : block
        self.tmaps = [tensor_map_param(n) for n in ("tmap_q", "tmap_k", "tmap_v", "tmap_o")]
        n_blocks = ptx.param(u32, "n_blocks")
        tile = u32_reg(ptx.special.ctaid.x())
        self.head = u32_reg(ptx.special.ctaid.y())
        self.batch = u32_reg(ptx.special.ctaid.z())
        self.tid = u32_reg(ptx.special.tid.x())
        # co: bm = cdiv(Q_SEQ, BLOCK_M) - 1 - tile;   kv_bound = bm + 1;
        self.bm = reg.scalar(u32)
        ptx.inst.sub.u32(self.bm, n_blocks, 1)
        ptx.inst.sub.u32(self.bm, self.bm, tile)
        self.kv_bound = reg.scalar(u32)
        if causal:
            ptx.inst.add.u32(self.kv_bound, self.bm, 1)
        else:                                      # full attention: every KV tile
            ptx.inst.mov.u32(self.kv_bound, n_blocks)
        self.q_row = self.bm << 7                  # bm * BLOCK_M
        # co: shared ... q_shared, k_buf[2], v_buf[2], o_buf; shared event ...
        self.base = aligned_smem_base()
        self.qf = event_addr(self.base, BAR_QF)
        self.kf = EventRing(self.base, BAR_KF, K_STAGES)
        self.vf = EventRing(self.base, BAR_VF, V_STAGES)
        self.ke = EventRing(self.base, BAR_KE, K_STAGES, ready=True)
        self.ve = EventRing(self.base, BAR_VE, V_STAGES, ready=True)
        self.tmem_slot = event_addr(self.base, SMEM_TMEM_SLOT)


def _fa_body(causal: bool) -> None:
    blk = _Block(causal)
    warp = blk.tid >> 5
    # Tensor memory: one warp allocates; the address lands in shared memory.
    with ptx.if_(warp == ALLOC_WARP):
        ptx.tcgen05.alloc(blk.tmem_slot, TMEM_ALLOC_COLS)
    with ptx.if_(blk.tid == 0):
        ptx.mbarrier.init(blk.qf, 1)
        for ring, count in ((blk.kf, 1), (blk.vf, 1), (blk.ke, NUM_CONSUMERS), (blk.ve, NUM_CONSUMERS)):
            for s in range(ring.stages):
                ptx.mbarrier.init(event_addr(blk.base, ring.offset + 8 * s), count)
        for c in range(NUM_CONSUMERS):             # MMA futures: one tcgen05.commit each
            ptx.mbarrier.init(event_addr(blk.base, BAR_MMA_S + 8 * c), 1)
            ptx.mbarrier.init(event_addr(blk.base, BAR_MMA_O + 8 * c), 1)
        ptx.fence.mbarrier_init()
    ptx.tcgen05.fence_before_thread_sync()
    ptx.bar.sync(0)
    ptx.tcgen05.fence_after_thread_sync()

    # co: parallel p by [BLOCK_M / WG_M + 1] : group-4
    wg = blk.tid >> 7
    ptx.bra("consumer_entry", pred=(wg != 0))
    _producer(blk)
    ptx.label("consumer_entry")
    _Consumer(blk, wg, warp).run()


def _producer(blk: _Block) -> None:
    """inthreads.async (p == 0): exactly the sm_90a producer."""
    # co: call croq::cuda::setreg_dec(40);
    ptx.setmaxnreg(PRODUCER_REGS, inc=False)
    tmap_q, tmap_k, tmap_v, _ = blk.tmaps
    with ptx.if_(blk.tid == 0):
        evict_first = reg.scalar(b64)
        ptx.inst.createpolicy.fractional.L2__evict_first.b64(evict_first, 1.0)
        evict_last = reg.scalar(b64)
        ptx.inst.createpolicy.fractional.L2__evict_last.b64(evict_last, 1.0)
        # co: q_load = tma.load.async.evict_first.swiz Q_head...at(bm, 0) => q_shared;
        #     trigger qf after q_load;
        ptx.mbarrier.arrive_expect_tx(blk.qf, TILE_BYTES)
        for stripe in range(2):
            tma_load_4d(blk.base, SMEM_Q + stripe * STRIPE_BYTES, tmap_q,
                        (stripe * STRIPE_COLS, blk.head, blk.q_row, blk.batch), blk.qf, evict_first)

        # co: foreach {issue} in [kv_bound] { bn = bm - issue; ... }
        def producer_step(issue: Reg) -> None:
            bn = reg.scalar(u32)
            ptx.inst.sub.u32(bn, blk.kv_bound, 1)
            ptx.inst.sub.u32(bn, bn, issue)
            kv_row = bn << 7
            for full, empty, smem_off, tmap in ((blk.kf, blk.ke, SMEM_K, tmap_k),
                                                (blk.vf, blk.ve, SMEM_V, tmap_v)):
                empty.wait(issue)                  # co: wait ke.at(k_pipe_order);
                # co: k_load = tma.load...K_head...at(bn, 0) => k_buf[k_slot];
                #     trigger kf.at(k_pipe_order++) after k_load;
                bar = full.addr(issue)
                ptx.mbarrier.arrive_expect_tx(bar, TILE_BYTES)
                dst = reg.scalar(u32)
                ptx.inst.mad.lo.u32(dst, issue & 1, TILE_BYTES, blk.base)
                for stripe in range(2):
                    tma_load_4d(dst, smem_off + stripe * STRIPE_BYTES, tmap,
                                (stripe * STRIPE_COLS, blk.head, kv_row, blk.batch), bar, evict_last)

        counted_loop("producer_kv_loop", blk.kv_bound, producer_step)
    ptx.ret()


class _Consumer:
    """inthreads.async (p > 0): one of the two 64-row consumer warpgroups."""

    def __init__(self, blk: _Block, wg: Reg, warp: Reg) -> None:
        self.blk = blk
        # co: call croq::cuda::setreg_inc(232);
        ptx.setmaxnreg(CONSUMER_REGS, inc=True)
        # co: cid = p - 1;
        self.cid = reg.scalar(u32)
        ptx.inst.sub.u32(self.cid, wg, 1)
        self.warp = warp
        self.lane = blk.tid & 31
        self.is_leader = (blk.tid & 127) == 0
        self.c_scale = reg.scalar(f32, init=SCALE_LOG2)
        self.k_order = reg.scalar(u32, init=0)
        self.v_order = reg.scalar(u32, init=0)
        self.step_barrier = reg.scalar(u32)        # named barrier 1 + cid
        ptx.inst.add.u32(self.step_barrier, self.cid, 1)
        self.mma_s = event_addr(blk.base, BAR_MMA_S)
        ptx.inst.mad.lo.u32(self.mma_s, self.cid, 8, self.mma_s)
        self.mma_o = event_addr(blk.base, BAR_MMA_O)
        ptx.inst.mad.lo.u32(self.mma_o, self.cid, 8, self.mma_o)
        self._tmem_addresses()
        self._mma_operands()
        self.s = reg.array(f32, HALF)              # co: acc_s: this thread's 64 columns of a row
        self.p = reg.array(b32, HALF // 2)         # co: acc_s_cast, bf16x2
        self.o = reg.array(f32, HALF)              # acc_o, while it is rescaled / stored
        self.m = reg.scalar(f32)                   # co: scores_max (this thread's row)
        self.l = reg.scalar(f32)                   # co: logsum (partial over 64 columns)

    def _tmem_addresses(self) -> None:
        tmem = self.tmem_base()
        # Region bases of this consumer (what its MMAs name): S at lane alignment
        # 16 * cid, O and P at lane 0 and columns of their own.
        def region(col: int, step: int) -> Reg:
            out = reg.scalar(b32)
            ptx.inst.mad.lo.u32(out, self.cid, step, tmem)
            return tmem_offset(out, col)
        self.d_s = region(TMEM_S, TMEM_STEP["acc_s"])
        self.d_o = region(TMEM_O, TMEM_STEP["acc_o"])
        self.a_p = region(TMEM_P, TMEM_STEP["acc_s_cast"])
        # This warp's rows: lanes 32 * (warp % 4) on from the region (9.7.16.8.1).
        quarter = reg.scalar(u32)
        ptx.inst.and_.b32(quarter, self.warp, 3)
        ptx.inst.shl.b32(quarter, quarter, 5 + 16)
        self.ld_s = tmem_offset(self.d_s, quarter)
        self.ld_o = tmem_offset(self.d_o, quarter)
        self.st_p = tmem_offset(self.a_p, quarter)

    def _mma_operands(self) -> None:
        base = self.blk.base
        q_addr = reg.scalar(u32)                   # q_shared rows [64 cid, +64): K-major A
        ptx.inst.mad.lo.u32(q_addr, self.cid, WG_M * 128, base)
        self.q_desc = smem_desc(q_addr, DESC_K_MAJOR)
        self.k_desc0 = smem_desc(event_addr(base, SMEM_K), DESC_K_MAJOR)
        self.v_desc0 = smem_desc(event_addr(base, SMEM_V), DESC_V)
        self.idesc_qk = reg.scalar(b32, init=IDESC_QK)
        self.idesc_pv = reg.scalar(b32, init=IDESC_PV)
        # enable-input-d operands: accumulate (k-steps > 0) / overwrite (mma.fill 0)
        one = reg.scalar(u32, init=1)
        self.p_true = reg.scalar(pred)
        ptx.inst.setp.ne.u32(self.p_true, one, 0)
        self.p_false = reg.scalar(pred)
        ptx.inst.setp.eq.u32(self.p_false, one, 0)

    # ---- MMA issue (the elected thread) ---------------------------------

    def issue_qk(self) -> None:
        # co: acc_s = mma.fill.f32 0.0f;  (-> enable-input-d false on k-step 0)
        # co: qk = mma.row.row.async acc_s, q_shared...at(cid, 0), k_buf[k_slot];
        k_desc = ring_desc(self.k_desc0, self.k_order, K_STAGES, TILE_BYTES)
        for kk in range(DIM // MMA_K):
            off = d.kmajor_sw128_kstep(kk, rows=BLOCK_M)
            umma(self.d_s, desc_at(self.q_desc, off), desc_at(k_desc, off), self.idesc_qk,
                 self.p_false if kk == 0 else self.p_true)
        mma_commit(self.mma_s)

    def issue_pv(self) -> None:
        # co: pv = mma.row.col.async acc_o, acc_s_cast, v_buf[v_slot];
        # acc_o = mma.fill 0 is pending until the first PV: it overwrites (v_order == 0).
        v_desc = ring_desc(self.v_desc0, self.v_order, V_STAGES, TILE_BYTES)
        accumulate = reg.scalar(pred)
        ptx.inst.setp.ne.u32(accumulate, self.v_order, 0)
        for kk in range(BLOCK_N // MMA_K):
            a = tmem_offset(self.a_p, kk * MMA_K // 2)   # 16 bf16 = 8 packed columns
            umma(self.d_o, a, desc_at(v_desc, d.mnmajor_sw128_kstep(kk)), self.idesc_pv,
                 accumulate if kk == 0 else self.p_true, a_tmem=True)
        mma_commit(self.mma_o)

    def leader_issue(self, *, qk: bool, pv: bool, first: bool = False) -> None:
        """The elected thread waits for the operands' TMA and issues the MMAs; the
        other threads go on to the futures' waits (they never read shared memory)."""
        with ptx.if_(self.is_leader):
            if first:
                ptx.mbarrier.wait(self.blk.qf, 0)  # co: wait qf;
            if qk:
                self.blk.kf.wait(self.k_order)     # co: wait kf.at(k_pipe_order);
            # Order the MMAs after the step barrier (P/O stores, S loads of all threads).
            ptx.tcgen05.fence_after_thread_sync()
            if qk:
                self.issue_qk()
            if pv:
                self.blk.vf.wait(self.v_order)     # co: wait vf.at(v_pipe_order);
                self.issue_pv()
        ptx.inst.bar.warp.sync(-1)                 # reconverge before .sync.aligned tcgen05

    # ---- futures ------------------------------------------------------------

    def wait_qk(self) -> None:
        # co: wait qk;  trigger ke.at(k_pipe_order++);
        wait_mma(self.mma_s, self.k_order & 1)
        self.blk.ke.arrive(self.k_order, pred_reg=self.is_leader)
        ptx.inst.add.u32(self.k_order, self.k_order, 1)

    def wait_pv(self) -> None:
        # co: wait pv;  trigger ve.at(v_pipe_order++);
        wait_mma(self.mma_o, self.v_order & 1)
        self.blk.ve.arrive(self.v_order, pred_reg=self.is_leader)
        ptx.inst.add.u32(self.v_order, self.v_order, 1)

    # ---- softmax on registers -------------------------------------------

    def load_s(self) -> None:
        tmem_load_rows(self.s, self.ld_s, HALF)
        ptx.tcgen05.wait_ld()

    def causal_mask(self) -> None:
        # co: apply {i, j} in acc_s.span { if (j > cid * WG_M + i) acc_s.at(i, j) = -inf; }
        # row i = 16 warp + lane % 16, column j = 64 (lane / 16) + r:
        # masked iff r > i + 64 cid - 64 (lane / 16) =: t
        t = reg.scalar(s32)
        ptx.inst.and_.b32(t, self.warp, 3)
        ptx.inst.shl.b32(t, t, 4)
        ptx.inst.add.u32(t, t, self.lane & 15)
        ptx.inst.mad.lo.u32(t, self.cid, WG_M, t)
        ptx.inst.sub.s32(t, t, (self.lane >> 4) << 6)
        masked = reg.scalar(pred)
        for r in range(HALF):
            ptx.inst.setp.lt.s32(masked, t, r)
            ptx.inst.selp.f32(self.s[r], NEG_INF, self.s[r], masked)

    def row_max(self, m: Reg) -> None:
        # co: reduce_max(scores_max, acc_s, 1);
        tree_reduce("max", m, list(self.s))
        pair_allreduce("max", m)

    def neg_scaled(self, m: Reg) -> Reg:
        out = reg.scalar(f32)
        ptx.inst.mul.f32(out, m, f32_imm(-SCALE_LOG2))
        return out

    def exp_rows(self, neg_mc: Reg) -> None:
        # co: acc_s = __exp2f(acc_s * 0.12751743f - scores_max * 0.12751743f);
        for x in self.s:
            ptx.inst.fma.rn.f32(x, x, self.c_scale, neg_mc)
            ptx.inst.ex2.approx.ftz.f32(x, x)

    def store_p(self) -> None:
        # co: acc_s_cast.at(i, j) = __to(acc_s.at(i, j));
        # bf16x2: the lower column in the low half, as the [a-tmem] operand packs K.
        for i in range(len(self.p)):
            ptx.inst.cvt.rn.bf16x2.f32(self.p[i], self.s[2 * i + 1], self.s[2 * i])
        tmem_store_rows(self.st_p, self.p, HALF // 2)

    def rescale_o(self, scale: Reg) -> None:
        # co: acc_o.at(i, j) = acc_o.at(i, j) * scores_scale.at(i);
        tmem_load_rows(self.o, self.ld_o, HALF)
        ptx.tcgen05.wait_ld()
        for x in self.o:
            ptx.inst.mul.f32(x, x, scale)
        tmem_store_rows(self.ld_o, self.o, HALF)

    # ---- schedule ---------------------------------------------------------

    def run(self) -> None:
        self.prologue()
        n_steps = reg.scalar(u32)
        ptx.inst.sub.u32(n_steps, self.blk.kv_bound, 1)
        counted_loop("consumer_kv_loop", n_steps, lambda _step: self.step())
        self.finish()

    def prologue(self) -> None:
        # co: first_qk = mma.row.row.async acc_s, q..., k_buf[first_k_slot];  wait first_qk;
        self.leader_issue(qk=True, pv=False, first=True)
        self.wait_qk()
        self.load_s()
        if self.blk.causal:
            self.causal_mask()
        self.row_max(self.m)
        self.exp_rows(self.neg_scaled(self.m))
        # co: scores_sum = sum_j acc_s; logsum = scores_sum;  (per-thread partial sums;
        # the pair reduction is deferred to all_reduce_sum, every rescale being per row)
        tree_reduce("add", self.l, list(self.s))
        self.store_p()
        # co: acc_o = mma.fill.f32 0.0f;  -> the first PV's enable-input-d (issue_pv)
        tmem_publish(self.step_barrier, 128)

    def step(self) -> None:
        # co: qk = mma...acc_s...;  pv = mma...acc_o, acc_s_cast, v_buf[prev_v_slot];
        self.leader_issue(qk=True, pv=True)
        self.wait_qk()                             # co: wait qk; trigger ke...
        self.load_s()
        # co: copy(scores_max_prev, scores_max); reduce_max(scores_max, acc_s, 1);
        #     scores_max = max(scores_max, prev); scores_scale = exp2(prev*c - max*c);
        m_prev = reg.scalar(f32)
        ptx.inst.mov.f32(m_prev, self.m)
        self.row_max(self.m)
        ptx.inst.max.f32(self.m, self.m, m_prev)
        neg_mc = self.neg_scaled(self.m)
        scale = reg.scalar(f32)
        ptx.inst.fma.rn.f32(scale, m_prev, self.c_scale, neg_mc)
        ptx.inst.ex2.approx.ftz.f32(scale, scale)
        ptx.inst.mul.f32(self.l, self.l, scale)    # co: logsum = logsum * scores_scale;
        self.exp_rows(neg_mc)
        # co: scores_sum = sum_j acc_s; logsum = logsum + scores_sum;
        part = reg.scalar(f32)
        tree_reduce("add", part, list(self.s))
        ptx.inst.add.f32(self.l, self.l, part)
        self.wait_pv()                             # co: wait pv; trigger ve...
        self.store_p()
        self.rescale_o(scale)
        tmem_publish(self.step_barrier, 128)

    def finish(self) -> None:
        # co: final_pv = mma.row.col.async acc_o, acc_s_cast, v_buf[final_v_slot];
        self.leader_issue(qk=False, pv=True)
        # co: all_reduce_sum(logsum); scores_scale = 1.0f / logsum;
        pair_allreduce("add", self.l)
        inv = reg.scalar(f32)
        ptx.inst.rcp.approx.ftz.f32(inv, self.l)
        self.wait_pv()                             # co: wait final_pv; trigger ve...
        self.epilogue(inv)

    def epilogue(self, inv: Reg) -> None:
        blk = self.blk
        # co: acc_o *= scores_scale;  mma.store acc_o, o_buf.subspan(WG_M, DIM).at(cid, 0);
        # The apply and the store share one TMEM read. Thread: row r = 64 cid + 16 warp
        # + lane % 16, stripe lane / 16 = its 64 columns: one full 128-B swizzled row.
        tmem_load_rows(self.o, self.ld_o, HALF)
        ptx.tcgen05.wait_ld()
        for i in range(len(self.p)):
            lo, hi = self.o[2 * i], self.o[2 * i + 1]
            ptx.inst.mul.f32(lo, lo, inv)
            ptx.inst.mul.f32(hi, hi, inv)
            ptx.inst.cvt.rn.bf16x2.f32(self.p[i], hi, lo)
        row = reg.scalar(u32)
        ptx.inst.and_.b32(row, self.warp, 3)
        ptx.inst.shl.b32(row, row, 4)
        ptx.inst.add.u32(row, row, self.lane & 15)
        ptx.inst.mad.lo.u32(row, self.cid, WG_M, row)
        row_addr = reg.scalar(u32)
        ptx.inst.mad.lo.u32(row_addr, row, 128, blk.base)
        ptx.inst.mad.lo.u32(row_addr, self.lane >> 4, STRIPE_BYTES, row_addr)
        ptx.inst.add.u32(row_addr, row_addr, SMEM_O)
        xr = (self.lane & 7) << 4                  # 128B swizzle: chunk c -> c ^ (row % 8)
        for c in range(8):
            addr = reg.scalar(u32)
            ptx.inst.xor.b32(addr, xr, c << 4)
            ptx.inst.add.u32(addr, addr, row_addr)
            ptx.inst.st.shared.v4.b32(ptx.addr(addr), [self.p[4 * c + j] for j in range(4)])
        # co: role.sync;  generic-proxy stores become visible to the TMA (async proxy),
        # and this thread's TMEM reads are ordered before the deallocation.
        ptx.fence.proxy_async_shared_cta()
        ptx.tcgen05.fence_before_thread_sync()
        ptx.bar.sync(ROLE_BARRIER, 128 * NUM_CONSUMERS)
        # co: tma.copy o_buf => O_head.subspan(BLOCK_M, DIM).at(bm, 0);  (role leader)
        with ptx.if_(blk.tid == 128):
            for stripe in range(2):
                src = event_addr(blk.base, SMEM_O + stripe * STRIPE_BYTES)
                ptx.cp.async_.bulk.tensor_4d.store(
                    dst=blk.tmaps[3], src=src,
                    coord=(stripe * STRIPE_COLS, blk.head, blk.q_row, blk.batch))
            ptx.cp.async_.bulk.commit_group()
            ptx.cp.async_.bulk.wait_group(0, read=True)
        ptx.inst.bar.warp.sync(-1)
        with ptx.if_(self.warp == ALLOC_WARP):
            ptx.tcgen05.fence_after_thread_sync()
            ptx.tcgen05.dealloc(self.tmem_base(), TMEM_ALLOC_COLS)
            ptx.tcgen05.relinquish_alloc_permit()
        ptx.ret()

    def tmem_base(self) -> Reg:
        base = reg.scalar(b32)
        ptx.inst.ld.shared.b32(base, ptx.addr(self.blk.tmem_slot))
        return base


def flash_attention_ptx(causal: bool = True) -> str:
    return build_flash_attention(causal).ptx()


def ptxas_report(causal: bool = True) -> str:
    """Assemble for sm_100a with ``ptxas -v`` (the runtime's ptxas); returns its resource report."""
    return ptxas(flash_attention_ptx(causal), "sm_100a", verbose=True)[1]
