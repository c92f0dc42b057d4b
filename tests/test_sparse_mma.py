"""The 2:4 structured-sparse MMA (mma.row.row.sp, ir.SparseMma): the interpreter's
reading of packed A and its metadata, and the emulator's wgmma.mma_async.sp, each
against a dense torch product of the matrix the runtime's encoder packed
(tests/end2end_sparse.py; the whole programs run from tests/test_end2end*.py)."""
from __future__ import annotations

import pytest
import torch

import numpy as np

from choreo_py.interp import sparse as interp_sparse
from choreo_py.interp.errors import InterpError
from end2end_sparse import encode, structured_sparse


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float8_e4m3fn])
def test_interpreter_expands_the_encoders_packing(dtype):
    gen = torch.Generator().manual_seed(1)
    dense = structured_sparse(gen, 64, 64, dtype)
    packed, meta = encode(dense)
    got = interp_sparse.expand(packed.float(), meta.float(), None)
    assert torch.equal(got, dense.float())
    assert int((got != 0).sum()) == 64 * 32  # two of every four


def test_interpreter_reads_unordered_indices_and_refuses_equal_ones():
    packed = torch.tensor([[1.0, 2.0, 3.0, 4.0]])
    meta = torch.tensor([[0b0010 | (0b1101 << 4)]], dtype=torch.float32)  # (2, 0), (1, 3)
    got = interp_sparse.expand(packed, meta, None)
    assert got.tolist() == [[2.0, 0.0, 1.0, 0.0, 0.0, 3.0, 0.0, 4.0]]
    with pytest.raises(InterpError, match="0b0101"):
        interp_sparse.expand(packed, torch.tensor([[0b0101]], dtype=torch.float32), None)


# ------------------------------------------------ the emulator's wgmma.mma_async.sp
# The metadata registers are built here from CUTLASS's sparse GMMA metadata layouts
# (cute/atom/mma_traits_sm90_gmma_sparse.hpp), evaluated as CuTe layouts: a (thread,
# value) coordinate maps to element m + 64 k of the 64 x K metadata tile, one bit per
# dense column (value v is bit v of the thread's 32-bit register; the bits of column k
# are bit k % 4 of its group's nibble).
E_LAYOUTS = {  # dense K of one instruction -> (thread shape, thread stride, value shape, stride)
    32: ((2, 2, 8, 4), (1024, 0, 1, 16), (16, 2), (64, 8)),      # ELayout_64x32 (16-bit)
    64: ((2, 2, 8, 4), (8, 2048, 1, 16), (32,), (64,)),          # ELayout_64x64 (8-bit)
}


def _colex(i: int, shape) -> list:
    out = []
    for s in shape:
        out.append(i % s)
        i //= s
    return out


def meta_registers(meta: torch.Tensor, k: int, step: int) -> list[int]:
    """The 128 threads' sp-meta values for instruction `step` (dense columns step*k..)."""
    tshape, tstride, vshape, vstride = E_LAYOUTS[k]
    nibbles = [[(int(meta[r, g // 2]) >> (4 * (g % 2))) & 0xF for g in range(2 * meta.shape[1])]
               for r in range(64)]
    regs = []
    for t in range(128):
        toff = sum(c * s for c, s in zip(_colex(t, tshape), tstride))
        v = 0
        for bit in range(32):
            off = toff + sum(c * s for c, s in zip(_colex(bit, vshape), vstride))
            m, col = off % 64, step * k + off // 64
            v |= ((nibbles[m][col // 4] >> (col % 4)) & 1) << bit
        regs.append(v)
    return regs


HEAD = """.version 8.5
.target sm_90a
.address_size 64
.extern .shared .align 128 .b8 smem[];
"""


#: element type -> (PTX type, dense K of one instruction, A descriptor bits, B descriptor
#: bits): A packed [64, 32] (bf16: 64-byte rows, 64-byte swizzle; e4m3: 32-byte rows,
#: 32-byte swizzle), B [n, 64] (128-byte / 64-byte swizzle); SBO = 8 rows, LBO = 16 B
KINDS = {"bf16": ("bf16", 32, 0x8000002000010000, 0x4000004000010000),
         "f8_e4m3": ("e4m3", 64, 0xC000001000010000, 0x8000002000010000)}


def sparse_ptx(n: int, sel: int, dtype: str) -> str:
    """D = dense(A) @ B^T over K = 64 (two m64nNk32 steps for bf16, one m64nNk64 for
    e4m3): packed A at smem, B at smem + 4096, the metadata registers read from global
    memory, two per thread (the second unused for e4m3)."""
    kind, k, a_bits, b_bits = KINDS[dtype]
    es = 2 if k == 32 else 1
    acc = ", ".join(f"%d{i}" for i in range(n // 2))
    stores = "\n".join(f"\tst.global.f32 [%py+{4 * i}], %d{i};" for i in range(n // 2))
    trans = ", 0, 0" if es == 2 else ""
    mmas = "\n".join(
        f"\tadd.s64 %da, %da0, {2 * s};\n\tadd.s64 %db, %db0, {4 * s};\n"
        f"\twgmma.mma_async.sp.sync.aligned.m64n{n}k{k}.f32.{kind}.{kind} {{{acc}}}, %da, %db, "
        f"%e{s}, {sel}, {0 if s == 0 else 1}, 1, 1{trans};" for s in range(64 // k))
    tx = 64 * 32 * es + n * 64 * es
    return HEAD + f"""
.visible .entry k(
\t.param .align 64 .b8 tmap_A[128],
\t.param .align 64 .b8 tmap_B[128],
\t.param .u64 p_e,
\t.param .u64 p_y
)
{{
\t.reg .u32 %sm, %th, %off, %t32, %e0, %e1;
\t.reg .u64 %tm, %py, %pe, %o64, %da0, %db0, %da, %db;
\t.reg .f32 %d<{n // 2}>;
\t.reg .pred %p, %q;
\t.reg .b64 %st;
\tmov.u32 %sm, smem;
\tadd.u32 %sm, %sm, 1023;
\tand.b32 %sm, %sm, -1024;
\tmov.u32 %th, %tid.x;
\tsetp.eq.u32 %p, %th, 0;
\t@%p mbarrier.init.shared::cta.b64 [%sm+16384], 1;
\tbar.sync 0;
\t@%p mbarrier.arrive.expect_tx.shared::cta.b64 %st, [%sm+16384], {tx};
\tmov.b64 %tm, tmap_A;
\tcvta.param.u64 %tm, %tm;
\t@%p cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%sm], [%tm, {{0, 0}}], [%sm+16384];
\tmov.b64 %tm, tmap_B;
\tcvta.param.u64 %tm, %tm;
\t@%p cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%sm+4096], [%tm, {{0, 0}}], [%sm+16384];
WAIT:
\tmbarrier.try_wait.parity.shared.b64 %q, [%sm+16384], 0;
\t@!%q bra WAIT;
\tmul.lo.u32 %off, %th, 8;
\tcvt.u64.u32 %o64, %off;
\tld.param.u64 %pe, [p_e];
\tadd.s64 %pe, %pe, %o64;
\tld.global.u32 %e0, [%pe];
\tld.global.u32 %e1, [%pe+4];
\tshr.u32 %t32, %sm, 4;
\tcvt.u64.u32 %da0, %t32;
\tor.b64 %da0, %da0, {a_bits};
\tadd.u32 %t32, %sm, 4096;
\tshr.u32 %t32, %t32, 4;
\tcvt.u64.u32 %db0, %t32;
\tor.b64 %db0, %db0, {b_bits};
\twgmma.fence.sync.aligned;
{mmas}
\twgmma.commit_group.sync.aligned;
\twgmma.wait_group.sync.aligned 0;
\tmul.lo.u32 %off, %th, {4 * (n // 2)};
\tcvt.u64.u32 %o64, %off;
\tld.param.u64 %py, [p_y];
\tadd.s64 %py, %py, %o64;
{stores}
\tret;
}}
"""


def sparse_case(n: int, sel: int, blank, dtype: str = "bf16"):
    """(PTX, launch, tensors, dense torch product) of one hand-written wgmma.sp kernel."""
    tdtype = {"bf16": torch.bfloat16, "f8_e4m3": torch.float8_e4m3fn}[dtype]
    k = KINDS[dtype][1]
    es = 2 if k == 32 else 1
    gen = torch.Generator().manual_seed(5)
    dense = structured_sparse(gen, 64, 64, tdtype)
    packed, meta = encode(dense)
    b = (torch.rand(n, 64, generator=gen) * 2 - 1).to(tdtype)
    regs = [meta_registers(meta, k, s) for s in range(64 // k)] + [[0] * 128]
    if blank is not None:  # pair `blank` of each quad holds 0b0000 groups (invalid)
        regs = [[0 if (t % 4) // 2 == blank else v for t, v in enumerate(r)] for r in regs]
    words = np.array([[regs[0][t], regs[1][t]] for t in range(128)], dtype=np.uint32)
    e = torch.from_numpy(words.reshape(-1).view(np.int32).copy())
    y = torch.zeros(128 * (n // 2))
    launch = {"grid": [1, 1, 1], "block": [128, 1, 1], "shared_bytes": 16384 + 1024 + 64,
              "params": [{"name": "tmap_A", "tmap": "A", "box": [32, 64], "swizzle": 32 * es},
                         {"name": "tmap_B", "tmap": "B", "box": [64, n], "swizzle": 64 * es},
                         {"name": "p_e", "ptr": "E"}, {"name": "p_y", "ptr": "Y"}],
              "tensors": {"A": {"dtype": dtype, "shape": [64, 32]},
                          "B": {"dtype": dtype, "shape": [n, 64]},
                          "E": {"dtype": "s32", "shape": [256]},
                          "Y": {"dtype": "f32", "shape": [128 * (n // 2)]}}}
    tensors = {"A": packed, "B": b, "E": e, "Y": y}
    return sparse_ptx(n, sel, dtype), launch, tensors, (dense.double() @ b.double().T).float()


def read_d(y: torch.Tensor, n: int) -> np.ndarray:
    """D [64, n] from the threads' accumulator registers as the kernel stored them."""
    out = y.cpu().numpy().reshape(4, 32, n // 2)
    d = np.full((64, n), np.nan, dtype=np.float32)
    for w in range(4):
        for lane in range(32):
            g, c = lane // 4, lane % 4
            for i in range(n // 2):
                d[16 * w + g + 8 * ((i >> 1) & 1), 8 * (i >> 2) + 2 * c + (i & 1)] = out[w, lane, i]
    return d


def _run_sparse(n: int, sel: int, blank, dtype: str = "bf16"):
    """(D as the emulator computes it, the dense torch product)."""
    from choreo_py.emu import emulate_ptx

    ptx, launch, tensors, ref = sparse_case(n, sel, blank, dtype)
    emulate_ptx(ptx, launch, tensors)
    return read_d(tensors["Y"], n), ref.numpy()


#: the hand-written kernels: (n, selector, the pair blanked, type)
HAND_WRITTEN = [(16, 0, 1, "bf16"), (32, 1, 0, "bf16"), (24, 0, None, "f8_e4m3")]


@pytest.mark.ptxas
@pytest.mark.parametrize("n,sel,blank,dtype", HAND_WRITTEN)
def test_hand_written_sparse_wgmma_assembles(n, sel, blank, dtype):
    """ptxas accepts the kernels' wgmma.mma_async.sp as written from the PTX ISA."""
    from choreo_py.runtime.build import ptxas

    cubin, _ = ptxas(sparse_ptx(n, sel, dtype), "sm_90a")
    assert len(cubin) > 0


@pytest.mark.gpu
@pytest.mark.parametrize("n,sel,blank,dtype", HAND_WRITTEN)
def test_gpu_runs_the_hand_written_sparse_wgmma_as_the_emulator_does(n, sel, blank, dtype):
    """The same kernels on the GPU: D against the dense product and against the emulator's
    D (a difference here with the programs' own GPU cases passing or not tells whether
    the emulator's model of wgmma.sp or the lowering is wrong)."""
    from choreo_py.emu.launch import LaunchSpec
    from choreo_py.runtime.build import ptxas
    from choreo_py.runtime.launch import CudaKernel, kernel_param

    ptx, launch, tensors, ref = sparse_case(n, sel, blank, dtype)
    cubin, _ = ptxas(ptx, "sm_90a")
    spec = LaunchSpec.from_json(ptx, launch)
    dev = {k: v.cuda() for k, v in tensors.items()}
    kern = CudaKernel(cubin, "k", spec.shared_bytes, dev["Y"].device)
    params = [kernel_param(p, dev, {}) for p in spec.params]
    kern.launch(tuple(spec.grid), 128, CudaKernel.pack(params), 0)
    torch.cuda.synchronize()
    got = read_d(dev["Y"], n)
    np.testing.assert_allclose(got, ref.numpy(), rtol=1e-5, atol=1e-4)
    emu, _ = _run_sparse(n, sel, blank, dtype)
    np.testing.assert_allclose(got, emu, rtol=1e-5, atol=1e-4)


@pytest.mark.emu
@pytest.mark.parametrize("n,sel", [(16, 0), (32, 1)])
def test_emulator_sparse_wgmma_matches_the_dense_product(n, sel):
    """bf16, two m64nNk32 steps. The selector names the pair of each quad whose registers
    are read: the other pair holds invalid metadata, which must not matter."""
    d, ref = _run_sparse(n, sel, blank=1 - sel)
    np.testing.assert_allclose(d, ref, rtol=1e-5, atol=1e-4)


@pytest.mark.emu
def test_emulator_sparse_wgmma_e4m3_matches_the_dense_product():
    """e4m3: one m64nNk64 step, every thread's register read (selector 0)."""
    d, ref = _run_sparse(24, 0, blank=None, dtype="f8_e4m3")
    np.testing.assert_allclose(d, ref, rtol=1e-5, atol=1e-4)


@pytest.mark.emu
def test_emulator_reports_invalid_metadata_of_the_selected_pair():
    from choreo_py.emu import EmuError

    with pytest.raises(EmuError, match="0b0000"):
        _run_sparse(16, 0, blank=0)


# ------------------------------------------ an MMA of two wgmma.sp steps, end to end
#: one statement over K = 64 of f16 (two m64nNk32 steps, two metadata registers per
#: thread), and a second K tile accumulated in a loop
TWO_STEPS = """
__co__ auto sp2(f16 [64, 64] lhs_packed, u8 [64, 16] lhs_meta, f16 [16, 128] rhs) {
  f32 [64, 16] output{0.0f};
  parallel {bm, bn} by [1, 1] : block {
    mc = mma.fill.f32 0.0f;
    foreach {k} in [2] {
      a_s = tma.copy.swiz<64> lhs_packed.chunkat(bm, k) => shared;
      b_s = tma.copy.swiz<128> rhs.chunkat(bn, k) => shared;
      m_s = dma.copy lhs_meta.chunkat(bm, k) => shared;
      parallel p by 1 : group-4 {
        me = mma.load m_s;
        mma.row.row.sp mc, a_s, b_s, me;
      }
    }
    mma.store mc, output.chunkat(bm, bn);
  }
  return output;
}
"""


def _two_step_inputs():
    gen = torch.Generator().manual_seed(3)
    dense = structured_sparse(gen, 64, 128, torch.float16)
    packed, meta = encode(dense)
    b = (torch.rand(16, 128, generator=gen) * 2 - 1).half()
    return (packed, meta, b), dense.double() @ b.double().T


def test_two_step_sparse_mma_in_the_interpreter(tmp_path):
    import choreo_py

    path = tmp_path / "sp2.co"
    path.write_text(TWO_STEPS)
    args, ref = _two_step_inputs()
    got = choreo_py.interpret(str(path), function="sp2", target="sm_90a")(*args)
    assert float((got.double() - ref).abs().max()) < 1e-3


@pytest.mark.emu
@pytest.mark.parametrize("schedule", ["round_robin", "random"])
def test_two_step_sparse_mma_in_the_emulator(tmp_path, schedule):
    import choreo_py

    path = tmp_path / "sp2.co"
    path.write_text(TWO_STEPS)
    args, ref = _two_step_inputs()
    got = choreo_py.emulate_program(str(path), target="sm_90a", schedule=schedule,
                                    seed=7)["sp2"](*args)
    assert float((got.double() - ref).abs().max()) < 1e-3


# ------------------------------------------------------------ the rules, by name
def _compile(tmp_path, body: str, target: str = "sm_90a"):
    from choreo_py.driver import compile_file

    path = tmp_path / "k.co"
    path.write_text("__co__ void k() {\n  parallel b by 1 : block {\n" + body + "\n  }\n}\n")
    return compile_file(str(path), emit="ir", target=target)


SHARED = """    shared f16[64, 16] a;
    shared f16[32, 32] bt;
    shared u8[64, 4] m;
"""


@pytest.mark.parametrize("mma,words", [
    ("me = mma.load m;\n      mma.row.row.sp acc, a, bt, me;", None),
    ("mma.row.row.sp acc, a, bt;", "a sparse MMA without its metadata operand"),
    ("ma = mma.load a;\n      me = mma.load m;\n      mma.row.row.sp acc, ma, bt, me;",
     "a sparse MMA on register fragments"),
    ("me = mma.load m;\n      f = mma.row.row.sp.async acc, a, bt, me;\n      wait f;",
     "an asynchronous or scheduled sparse MMA"),
    ("me = mma.load bt;\n      mma.row.row.sp acc, a, bt, me;",
     "is a u8[64, 4] fragment (4 bits per group of 4 along K); 'me' is f16[32, 32]"),
])
def test_sema_rules(tmp_path, mma, words):
    from choreo_py.diagnostics import ChoreoError

    body = SHARED + "    parallel g by 1 : group-4 {\n      acc = mma.fill.f32 0.0f;\n      " \
        + mma + "\n    }"
    if words is None:
        assert "sparse=me" in _compile(tmp_path, body)
        return
    with pytest.raises(ChoreoError) as e:
        _compile(tmp_path, body)
    assert words in e.value.message and e.value.loc is not None


def test_verifier_wants_a_shared_packed_a():
    from choreo_py.ir import parse as ir_parse, verify as ir_verify
    from choreo_py.diagnostics import ChoreoError

    text = """kernel k() {
  grid t < 1
  shared b: f16[32, 32]
  frag acc: f32[64, 32] layout=acc
  frag a: f16[64, 16] layout=operand
  frag me: u8[64, 4] layout=sparse_meta
  mma.row.row acc += a * b<0+:32, 0+:32> sparse=me
}

func k() {
  launch k
}
"""
    with pytest.raises(ChoreoError, match="packed A operand from shared memory"):
        ir_verify.verify_module(ir_parse.parse_module(text))
