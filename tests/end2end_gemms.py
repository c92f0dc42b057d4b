"""Ports of the main() checks of end-to-end programs with inline asm and warp-specialised
GEMMs (asm_basic.co, wgmma_ss.co, wgmma_persis.co), as end2end_refs.py's cases:
`cases(end2end)` returns (cases, cases the interpreter does not run)."""
from __future__ import annotations

import os

import torch


# --- end2end/asm_basic.co: inline PTX moving a value through registers; its main checks
# each function's one element against the value passed in
def _asm_result(args, res, want):
    assert int(res.cpu()[0]) == args[0], f"asm result {int(res.cpu()[0])} != {args[0]}"


ASM = [("test_volatile_copy", 42), ("test_basic_copy", 7), ("test_readwrite", 99),
       ("test_named_copy", 42), ("test_named_readwrite", 7)]


# --- end2end/wgmma_ss.co: GEMMs of its main()'s data (lhs[m][k] = ((m + 2k) % 3) / 2,
# rhs[n][k] = ((2n + k) % 3) / 2) at M = N = 384, K = 128; |out - ref| <= 0.1
def _wgmma_ss_inputs(dtype, out_dtype, transposed=False, m=384, n=384):
    def make(gen, dev):
        k = 128
        kk = torch.arange(k)
        lhs = (((torch.arange(m)[:, None] + 2 * kk) % 3) * 0.5).to(dtype).to(dev)
        rhs = (((2 * torch.arange(n)[:, None] + kk) % 3) * 0.5).to(dtype).to(dev)
        return lhs, rhs, torch.zeros((n, m) if transposed else (m, n), dtype=out_dtype).to(dev)
    return make


def _wgmma_ss_check(transposed=False):
    def check(args, res, want):
        lhs, rhs, out = (a.cpu().float() for a in args[:3])
        ref = lhs @ rhs.T
        got = out.T if transposed else out
        assert float((got - ref).abs().max()) <= 0.1, "values are not equal"
    return check


# --- end2end/wgmma_persis.co, the persistent 1-producer 3-consumer GEMM: its main's sizes
# (1536 x 2048 x 128, inputs uniform in [0, 2)) and its sampled check's tolerance
# (|out - ref| <= 0.5 + 0.02 |ref|), here over every element
def _persis_inputs(gen, dev, m=1536, n=2048):
    k = 128
    lhs = (torch.rand(m, k, generator=gen) * 2).half().to(dev)
    rhs = (torch.rand(n, k, generator=gen) * 2).half().to(dev)
    return lhs, rhs, torch.zeros(m, n, dtype=torch.float16).to(dev)


def _persis_check(args, res, want):
    lhs, rhs, out = (a.cpu().float() for a in args[:3])
    ref = lhs @ rhs.T
    assert bool(((out - ref).abs() <= 0.5 + 0.02 * ref.abs()).all()), "persistent mismatch"


# --- end2end/wgmma_persis.co, the persistent GEMM over a Hilbert-curve tile schedule: its
# main's port of hilbert_index_to_xy (64 x 128 tiles, the schedule as two s32 tables)
def _hilbert_xy(size: int, index: int) -> tuple[int, int]:
    x = y = 0
    scale = 1
    while scale < size:
        rx = 1 & (index // 2)
        ry = 1 & (index ^ rx)
        if ry == 0:  # hilbert_rotate
            if rx == 1:
                x, y = scale - 1 - x, scale - 1 - y
            x, y = y, x
        x += scale * rx
        y += scale * ry
        index //= 4
        scale *= 2
    return x, y


def _hilbert_schedule(tiles_m: int, tiles_n: int) -> tuple[list, list]:
    size = 1
    while size < max(tiles_m, tiles_n):
        size *= 2
    pts = [_hilbert_xy(size, i) for i in range(size * size)]
    pts = [(x, y) for x, y in pts if x < tiles_m and y < tiles_n]
    assert len(pts) == tiles_m * tiles_n, "hilbert schedule mismatch"
    return [x for x, _ in pts], [y for _, y in pts]


def _hilbert_inputs(gen, dev, m=1536, n=2048):
    lhs, rhs, out = _persis_inputs(gen, dev, m, n)
    sm, sn = _hilbert_schedule(lhs.shape[0] // 64, rhs.shape[0] // 128)
    return (lhs, rhs, out, torch.tensor(sm, dtype=torch.int32).to(dev),
            torch.tensor(sn, dtype=torch.int32).to(dev))


def cases(end2end: str) -> tuple[list, dict]:
    cases: list = []
    not_interpreted: dict = {}
    cases += [(os.path.join(end2end, "asm_basic.co"), fn, (lambda v: lambda gen, dev: (v,))(v),
               None, _asm_result) for fn, v in ASM]
    not_interpreted.update({f"asm_basic.co::{fn}": "inline asm is PTX: the interpreter does not "
                            "run it (the emulator and the GPU do)" for fn, _ in ASM})
    cases += [(os.path.join(end2end, "wgmma_ss.co"), fn,
               _wgmma_ss_inputs(torch.float16, torch.float16), None, _wgmma_ss_check())
              for fn in ("matmul_f16_ws_1p1c", "matmul_f16_ws_1p3c")]
    # synchronous TMA loads in MMA kernels; fp8 inputs of the same values (exact in e4m3)
    cases += [(os.path.join(end2end, "wgmma_ss.co"), fn, _wgmma_ss_inputs(a, out), None,
               _wgmma_ss_check(transposed))
              for fn, a, out, transposed in (
                  ("matmul_e4m3", torch.float8_e4m3fn, torch.float32, False),
                  ("matmul_st_trans", torch.float16, torch.float16, True),
                  # its synchronous dma.copy loads and its store of output_s: TMA (sync_copies)
                  ("matmul_f16", torch.float16, torch.float16, False),
                  # loads two warpgroups make together: issued and waited by their leader
                  ("matmul_e4m3_mwg", torch.float8_e4m3fn, torch.float16, False))]
    # its masked store: main()'s 70 x 130 views of the same data (the first rows of each)
    cases.append((os.path.join(end2end, "wgmma_ss.co"), "matmul_st_masked",
                  _wgmma_ss_inputs(torch.float16, torch.float16, m=70, n=130), None,
                  _wgmma_ss_check()))
    # `: cluster` (sema/clusters.py): clusters of 2 blocks over main()'s grids, a multicast
    # load as each block's load of the same tile, `trigger.cluster` as the block's trigger
    cases += [(os.path.join(end2end, "wgmma_ss.co"), fn, _wgmma_ss_inputs(a, torch.float16, m=m),
               None, _wgmma_ss_check())
              for fn, a, m in (("matmul_f16_tbc", torch.float16, 384),
                               ("matmul_e4m3_ws_tbc", torch.float8_e4m3fn, 384),
                               # clusters of 4 blocks of 128 rows: M = 512, not main()'s 384
                               # (3 blocks, no whole cluster: refused, tests/test_clusters.py)
                               ("matmul_e4m3_mwg_tbc", torch.float8_e4m3fn, 512))]
    cases += [(os.path.join(end2end, "wgmma_persis.co"), "matmul_f16_ws_1p3c_persis",
               _persis_inputs, None, _persis_check),
              (os.path.join(end2end, "wgmma_persis.co"), "matmul_persis_hilbert_sm90",
               _hilbert_inputs, None, _persis_check),
              # 4 x 2 tiles (8 of the 114 blocks work): what the emulator runs on sm_100a,
              # whose f16 tile makes a load, rounding and store of tensor memory per MMA
              # (67 s at main()'s sizes; test_end2end_emu.ONE_TARGET)
              (os.path.join(end2end, "wgmma_persis.co"), "matmul_persis_hilbert_sm90",
               lambda gen, dev: _hilbert_inputs(gen, dev, 256, 256), None, _persis_check,
               "4x2_tiles")]
    return cases, not_interpreted


# --- block-scaled fp8 GEMMs (sema/mma_scale.py): wgmma_ss.co's blockscale_gemm_e4m3_n48 at
# its main()'s sizes and data (M = N = 384, K = 128, the e4m3 copies of the f16 data above,
# every scale 1.0; |out - ref| <= 0.1), and wgmma_persis.co's blockscale_gemm_e4m3_ws_persis
# at its test_blockscale_persistent sizes (512 x 2048 x 128, inputs in [0, 2), scales in
# [1, 3); |out - ref| <= 0.5 + 0.08 |ref|, there over 256 samples, here over every element).
# The refs scale each 128-wide K block: out = sum_kb (lhs_kb @ rhs_kb^T) * sl[:, kb] * sr[n, kb].
def _blockscale_ref(lhs, sl, rhs, sr, n_block):
    m, k = lhs.shape
    ref = torch.zeros(m, rhs.shape[0])
    for kb in range(k // 128):
        part = lhs[:, kb * 128:(kb + 1) * 128] @ rhs[:, kb * 128:(kb + 1) * 128].T
        col = sr[:, kb].repeat_interleave(n_block)[:rhs.shape[0]]
        ref += part * sl[:, kb:kb + 1] * col[None, :]
    return ref


def _blockscale_ss_inputs(gen, dev):
    lhs, rhs, out = _wgmma_ss_inputs(torch.float8_e4m3fn, torch.float16)(gen, "cpu")
    m, k = lhs.shape
    n = rhs.shape[0]
    sl, sr = torch.ones(m, k // 128), torch.ones(n // 48, k // 128)
    return tuple(x.to(dev) for x in (lhs, sl, rhs, sr, out))


def _blockscale_ss_scaled_inputs(gen, dev):
    """Beyond main(): two K blocks (K = 256) and scales in [0.5, 1.5), so that each block's
    product is scaled by its own factors (inputs in {0, 0.5, 1}, as main()'s)."""
    m, n, k = 128, 96, 256
    lhs = (torch.randint(0, 3, (m, k), generator=gen) * 0.5).to(torch.float8_e4m3fn)
    rhs = (torch.randint(0, 3, (n, k), generator=gen) * 0.5).to(torch.float8_e4m3fn)
    sl = 0.5 + torch.rand(m, k // 128, generator=gen)
    sr = 0.5 + torch.rand(n // 48, k // 128, generator=gen)
    out = torch.zeros(m, n, dtype=torch.float16)
    return tuple(x.to(dev) for x in (lhs, sl, rhs, sr, out))


def _blockscale_ss_close(rel):
    """main()'s check, |out - ref| <= 0.1, plus `rel` |ref| for the f16 accumulator's
    roundings where the sums grow past main()'s (0 for main()'s own data)."""
    def check(args, res, want):
        lhs, sl, rhs, sr, out = (a.cpu().float() for a in args)
        ref = _blockscale_ref(lhs, sl, rhs, sr, 48)
        bad = (out - ref).abs() > 0.1 + rel * ref.abs()
        assert not bool(bad.any()), \
            f"blockscale values are not equal (max error {float((out - ref).abs().max())})"
    return check


def _blockscale_persis_inputs(gen, dev):
    m, n, k = 512, 2048, 128
    lhs = (torch.rand(m, k, generator=gen) * 2).to(torch.float8_e4m3fn)
    rhs = (torch.rand(n, k, generator=gen) * 2).to(torch.float8_e4m3fn)
    sl = 1 + 2 * torch.rand(m, 1, generator=gen)
    sr = 1 + 2 * torch.rand(n // 128, 1, generator=gen)
    return tuple(x.to(dev) for x in (lhs, sl, rhs, sr, torch.zeros(m, n, dtype=torch.float16)))


def _blockscale_persis_check(args, res, want):
    lhs, sl, rhs, sr, out = (a.cpu().float() for a in args)
    ref = _blockscale_ref(lhs, sl, rhs, sr, 128)
    assert bool(((out - ref).abs() <= 0.5 + 0.08 * ref.abs()).all()), "blockscale mismatch"


def blockscale_cases(end2end: str) -> list:
    return [(os.path.join(end2end, "wgmma_ss.co"), "blockscale_gemm_e4m3_n48",
             _blockscale_ss_inputs, None, _blockscale_ss_close(0.0)),
            (os.path.join(end2end, "wgmma_ss.co"), "blockscale_gemm_e4m3_n48",
             _blockscale_ss_scaled_inputs, None, _blockscale_ss_close(2 ** -8), "two_k_blocks"),
            (os.path.join(end2end, "wgmma_persis.co"), "blockscale_gemm_e4m3_ws_persis",
             _blockscale_persis_inputs, None, _blockscale_persis_check)]


#: On sm_100a both programs are refused by name before their scaling (which sm_100a lowers:
#: tests/test_mma_scale.py): fp8 inputs, and the persistent one's region that joins.
BLOCKSCALE_REFUSED_ON = {
    "wgmma_ss.co::blockscale_gemm_e4m3_n48": ("sm_100a", "an MMA on f8_e4m3 x f8_e4m3"),
    "wgmma_ss.co::blockscale_gemm_e4m3_n48[two_k_blocks]": ("sm_100a",
                                                          "an MMA on f8_e4m3 x f8_e4m3"),
    "wgmma_persis.co::blockscale_gemm_e4m3_ws_persis": (
        "sm_100a", "in a kernel with tensor-memory accumulators"),
}
