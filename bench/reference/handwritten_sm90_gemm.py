"""Hand-written sm_90a bf16 GEMM in pyptx (reference lowering): C = A @ B.

A is [M, K] row-major, B is [K, N] row-major, C is [M, N] row-major bf16,
f32 accumulation.  Same building blocks and style as ``handwritten_fa``:

* CTA tile 128 x 256, K step 64, 3-stage TMA ring (full/empty mbarriers);
* 384 threads: warpgroup 0 produces (``setmaxnreg.dec 40``, one thread issues
  the TMA loads), warpgroups 1-2 consume (``setmaxnreg.inc 232``), each
  computing a 64 x 256 slice with ``wgmma m64n256k16`` (A K-major, B MN-major,
  both 128-byte swizzled), one wgmma group kept in flight;
* epilogue: accumulator -> bf16 into a swizzled shared tile -> TMA store.

Choreo shape of the same kernel (what the lowering corresponds to)::

    parallel {n, m} by [N/256, M/128] : block {
      shared bf16[128, 64] a_buf[3]; shared bf16[64, 256] b_buf[3];
      parallel p by [3] : group-4 {
        inthreads.async (p == 0) { foreach k: wait empty; tma.load A, B => a_buf, b_buf; trigger full }
        inthreads.async (p > 0)  { foreach k: wait full; mma acc, a_buf, b_buf; trigger empty;
                                   mma.store acc, c_buf; tma.copy c_buf => C }
      }
    }
"""

from __future__ import annotations

import ctypes
import functools

from pyptx import kernel, ptx, reg
from pyptx.types import b64, f32, u32, u64

from handwritten_sm90_fa import (
    DESC_KMAJOR_SW128,
    CudaKernel,
    aligned_smem_base,
    counted_loop,
    desc_add,
    desc_mnmajor_sw128,
    encode_tensor_map,
    event_addr,
    smem_desc,
    store_acc_bf16_swizzled,
    tensor_map_param,
    tma_operand,
    u32_reg,
    SMEM_ALIGN,
)

BM, BN, BK = 128, 256, 64
STAGES = 3
WG_M = 64
NUM_CONSUMERS = 2
THREADS = 128 * (NUM_CONSUMERS + 1)
ACC_REGS = WG_M * BN // 128                  # 128 f32 per thread

A_STAGE_BYTES = BM * BK * 2                  # 16 KiB: [128 rows][128 B]
B_STRIPE_BYTES = BK * 128                    # 8 KiB: [64 k-rows][64 cols]
B_STAGE_BYTES = BK * BN * 2                  # 32 KiB: 4 stripes
C_WG_BYTES = WG_M * BN * 2                   # 32 KiB per consumer
C_STRIPE_BYTES = WG_M * 128                  # 8 KiB

SMEM_A = 0
SMEM_B = SMEM_A + STAGES * A_STAGE_BYTES
SMEM_C = SMEM_B + STAGES * B_STAGE_BYTES
SMEM_FULL = SMEM_C + NUM_CONSUMERS * C_WG_BYTES
SMEM_EMPTY = SMEM_FULL + 8 * STAGES
SMEM_END = SMEM_EMPTY + 8 * STAGES
DYN_SMEM_BYTES = SMEM_END + SMEM_ALIGN


def tma_load_2d(dst, dst_offset: int, tmap, coords, mbar, policy) -> None:
    ptx.inst.cp.async_.bulk.tensor._2d.shared__cluster.global_.mbarrier__complete_tx__bytes.L2__cache_hint(
        ptx.addr(dst, dst_offset) if dst_offset else ptx.addr(dst),
        tma_operand(tmap, coords),
        ptx.addr(mbar),
        policy,
    )


def _gemm_body() -> None:
    tmap_a = tensor_map_param("tmap_a")
    tmap_b = tensor_map_param("tmap_b")
    tmap_c = tensor_map_param("tmap_c")
    k_tiles = ptx.param(u32, "k_tiles")
    n0 = u32_reg(ptx.special.ctaid.x()) << 8      # * BN
    m0 = u32_reg(ptx.special.ctaid.y()) << 7      # * BM
    tid = u32_reg(ptx.special.tid.x())

    base = aligned_smem_base()
    full_base = event_addr(base, SMEM_FULL)
    empty_base = event_addr(base, SMEM_EMPTY)

    def slot_addr(ring_base, stage):
        out = reg.scalar(u32)
        ptx.inst.mad.lo.u32(out, stage, 8, ring_base)
        return out

    with ptx.if_(tid == 0):
        for s in range(STAGES):
            ptx.mbarrier.init(event_addr(base, SMEM_FULL + 8 * s), 1)
            ptx.mbarrier.init(event_addr(base, SMEM_EMPTY + 8 * s), NUM_CONSUMERS)
        ptx.fence.mbarrier_init()
    ptx.bar.sync(0)

    wg = tid >> 7
    ptx.bra("consumer_entry", pred=(wg != 0))

    # ---------------- producer warpgroup ----------------
    ptx.setmaxnreg(40, inc=False)
    with ptx.if_(tid == 0):
        policy = reg.scalar(b64)
        ptx.inst.createpolicy.fractional.L2__evict_last.b64(policy, 1.0)
        pipe = ptx.pipeline(STAGES)

        def produce(kt):
            stage, phase = pipe.advance()
            empty_phase = phase ^ 1                  # empty slots start "ready"
            ptx.mbarrier.wait(slot_addr(empty_base, stage), empty_phase)
            full = slot_addr(full_base, stage)
            ptx.mbarrier.arrive_expect_tx(full, A_STAGE_BYTES + B_STAGE_BYTES)
            k0 = kt << 6                             # * BK
            a_dst = reg.scalar(u32)
            ptx.inst.mad.lo.u32(a_dst, stage, A_STAGE_BYTES, base)
            tma_load_2d(a_dst, SMEM_A, tmap_a, (k0, m0), full, policy)
            b_dst = reg.scalar(u32)
            ptx.inst.mad.lo.u32(b_dst, stage, B_STAGE_BYTES, base)
            for j in range(BN // 64):
                n_j = reg.scalar(u32)
                ptx.inst.add.u32(n_j, n0, 64 * j)
                tma_load_2d(b_dst, SMEM_B + j * B_STRIPE_BYTES, tmap_b, (n_j, k0), full, policy)

        counted_loop("producer_k_loop", k_tiles, produce)
    ptx.ret()

    # ---------------- consumer warpgroups ----------------
    ptx.label("consumer_entry")
    ptx.setmaxnreg(232, inc=True)
    cid = reg.scalar(u32)
    ptx.inst.sub.u32(cid, wg, 1)
    ltid = tid & 127
    lane = tid & 31
    warp_row = (ltid >> 5) << 4
    is_leader = ltid == 0

    a_addr = reg.scalar(u32)
    ptx.inst.mad.lo.u32(a_addr, cid, WG_M * 128, base)
    a_desc0 = smem_desc(a_addr, DESC_KMAJOR_SW128)
    b_desc0 = smem_desc(event_addr(base, SMEM_B), desc_mnmajor_sw128(B_STRIPE_BYTES))

    acc = reg.array(f32, ACC_REGS)
    for i in range(ACC_REGS):                        # co: acc = mma.fill.f32 0.0f
        ptx.inst.mov.f32(acc[i], "0f00000000")

    pipe = ptx.pipeline(STAGES)
    prev_stage = reg.scalar(u32, init=0)
    have_prev = reg.scalar(u32, init=0)

    def consume(kt):
        stage, phase = pipe.advance()
        ptx.mbarrier.wait(slot_addr(full_base, stage), phase)
        stage64 = reg.scalar(u64)
        ptx.inst.cvt.u64.u32(stage64, stage)
        a_desc = reg.scalar(u64)
        ptx.inst.mad.lo.u64(a_desc, stage64, A_STAGE_BYTES >> 4, a_desc0)
        b_desc = reg.scalar(u64)
        ptx.inst.mad.lo.u64(b_desc, stage64, B_STAGE_BYTES >> 4, b_desc0)
        ptx.wgmma.fence()
        for kk in range(BK // 16):
            ptx.inst.wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16(
                list(acc), desc_add(a_desc, kk * 32), desc_add(b_desc, kk * 16 * 128),
                1, 1, 1, 0, 1)
        ptx.wgmma.commit_group()
        # Keep this stage's group in flight; the previous one is finished.
        ptx.wgmma.wait_group(1)
        release = reg.scalar(u32)
        ptx.inst.and_.b32(release, have_prev, 1)
        with ptx.if_(release == 1):
            ptx.mbarrier.arrive(slot_addr(empty_base, prev_stage), pred=is_leader)
        ptx.inst.mov.u32(prev_stage, stage)
        ptx.inst.mov.u32(have_prev, 1)

    counted_loop("consumer_k_loop", k_tiles, consume)
    ptx.wgmma.wait_group(0)
    ptx.mbarrier.arrive(slot_addr(empty_base, prev_stage), pred=is_leader)

    # co: mma.store acc, c_buf; tma.copy c_buf => C
    c_addr = reg.scalar(u32)
    ptx.inst.mad.lo.u32(c_addr, cid, C_WG_BYTES, base)
    ptx.inst.add.u32(c_addr, c_addr, SMEM_C)
    store_acc_bf16_swizzled(acc, c_addr, lane, warp_row, n_cols=BN, stripe_bytes=C_STRIPE_BYTES)
    ptx.fence.proxy_async_shared_cta()
    ptx.bar.sync(wg, 128)
    with ptx.if_(is_leader):
        c_row = reg.scalar(u32)
        ptx.inst.mad.lo.u32(c_row, cid, WG_M, m0)
        for j in range(BN // 64):
            src = reg.scalar(u32)
            ptx.inst.add.u32(src, c_addr, j * C_STRIPE_BYTES)
            n_j = reg.scalar(u32)
            ptx.inst.add.u32(n_j, n0, 64 * j)
            ptx.cp.async_.bulk.tensor_2d.store(dst=tmap_c, src=src, coord=(n_j, c_row))
        ptx.cp.async_.bulk.commit_group()
        ptx.cp.async_.bulk.wait_group(0, read=True)
    ptx.ret()


@functools.lru_cache(maxsize=None)
def build_gemm():
    def gemm_bf16_sm90():
        _gemm_body()

    return kernel(
        arch="sm_90a",
        raw_params=[
            ("b8.align64.array128", "tmap_a"),
            ("b8.align64.array128", "tmap_b"),
            ("b8.align64.array128", "tmap_c"),
            ("u32", "k_tiles"),
        ],
        extern_smem="smem",
        block=(THREADS, 1, 1),
        raw_directives=[("maxntid", (THREADS, 1, 1)), ("minnctapersm", (1,))],
    )(gemm_bf16_sm90)


def gemm_ptx() -> str:
    return build_gemm().ptx()


@functools.lru_cache(maxsize=None)
def _compiled_gemm() -> CudaKernel:
    return CudaKernel(gemm_ptx(), "gemm_bf16_sm90", DYN_SMEM_BYTES)


def row_major_tensor_map(t, box_rows: int):
    """2-D map over a row-major [R, C] bf16 tensor, box = 64 cols x box_rows rows."""
    R, C = t.shape
    return encode_tensor_map(t.data_ptr(), (C, R), (C * 2,), (64, box_rows))


def gemm(a, b, out=None):
    """C = A @ B for bf16 A [M, K], B [K, N] (M % 128 == N % 256 == K % 64 == 0)."""
    import torch

    M, K = a.shape
    K2, N = b.shape
    assert K == K2 and M % BM == 0 and N % BN == 0 and K % BK == 0
    assert a.dtype == b.dtype == torch.bfloat16 and a.is_contiguous() and b.is_contiguous()
    if out is None:
        out = torch.empty((M, N), dtype=torch.bfloat16, device=a.device)
    kern = _compiled_gemm()
    params = [row_major_tensor_map(a, BM), row_major_tensor_map(b, BK),
              row_major_tensor_map(out, WG_M), ctypes.c_uint32(K // BK)]
    stream = torch.cuda.current_stream(a.device).cuda_stream
    kern.launch((N // BN, M // BM, 1), (THREADS, 1, 1), params, stream)
    return out
