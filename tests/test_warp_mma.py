"""MMAs whose operands are register fragments (the mma.sync / WMMA form): ir.WarpMma.

The end-to-end programs that use it (wmma.co, ampere_mma.co: cases in
end2end_warp_refs.py) run in the interpreter and assemble in test_end2end.py, and
their PTX runs in the emulator against the same ports of their main() checks in
test_end2end_emu.py (both targets); here small programs check the lowering's edges (fragments smaller than one instruction, a row.row
B, shared operands, the block's own code) against torch. The emulator's
mma.sync is written from the PTX ISA's fragment tables, apart from the
lowering, so that a wrong lane layout in either shows here.
"""
from __future__ import annotations

import os

import pytest
import torch

import choreo_py
from choreo_py import ir
from choreo_py.diagnostics import ChoreoError
from choreo_py.driver import compile_file
from choreo_py.ir.parse import parse_module
from choreo_py.ir.printer import print_module
from choreo_py.runtime.build import find_ptxas, ptxas
from choreo_py.runtime.host_program import torch_dtypes

from end2end_refs import CASES, DTYPES, SHARED
from test_host_programs import emulate_function

WARP_CASES = [c for c in CASES if os.path.basename(c[0]) in ("wmma.co", "ampere_mma.co")]


def test_the_end2end_cases_are_listed():
    assert len(WARP_CASES) == 12


# ---------------------------------------------------------------- small programs

SMALL = """
__co__ auto small_rr(f16 [16, 12] lhs, f16 [24, 12] rhs) {
  f32 [16, 24] output;
  parallel m by 2 : block {
    mc = mma.fill.f32 0.5;
    parallel g by 3 : group {
      foreach k in 3 {
        ma = mma.load lhs.chunkat(m, k);
        mb = mma.load rhs.chunkat(g, k);
        mma.row.row mc, ma, mb;
      }
      mma.store mc, output.chunkat(m, g);
    }
  }
  return output;
}

__co__ auto shared_block(bf16 [32, 32] lhs, bf16 [32, 16] rhs) {
  f32 [32, 16] output;
  parallel p by 1 : block {
    mc = mma.fill.f32 0.0;
    a_s = dma.copy lhs => shared;
    b_s = dma.copy rhs => shared;
    foreach k in 2 {
      ma = mma.load a_s.chunkat(_, k);
      mb = mma.load b_s.chunkat(k, _);
      mma.row.col mc, ma, mb;
    }
    mma.store mc, output;
  }
  return output;
}

__co__ auto fused(f16 [32, 32] lhs, f16 [32, 16] rhs, int bias) {
  f32 [32, 16] output;
  parallel m by 2 : block {
    mc = mma.fill.f32 0.0;
    parallel g by 1 : group {
      foreach k in 2 {
        ma = mma.load lhs.chunkat(m, k);
        mb = mma.load rhs.chunkat(k, _);
        mma.row.col mc, ma, mb;
      }
      mc += bias;
      mc *= 0.5;
      mma.store mc, output.chunkat(m, _);
    }
  }
  return output;
}

__co__ auto warpgroups(f16 [128, 32] lhs, f16 [64, 32] rhs) {
  f32 [128, 64] output;
  parallel p by 1 : block {
    parallel q by 2 : group-4 {
      mc = mma.fill.f32 0.0;
      foreach k in 2 {
        ma = mma.load lhs.chunkat(q, k);
        mb = mma.load rhs.chunkat(_, k);
        mma.row.row mc, ma, mb;
      }
      mma.store mc, output.chunkat(q, _);
    }
  }
  return output;
}

__co__ auto ints_8x8(s8 [16, 32] lhs, s8 [32, 16] rhs) {
  s32 [16, 16] output;
  parallel {m, n} by [2, 1] : block {
    mc = mma.fill.s32 0;
    parallel {g0, g1} by [1, 2] : group {
      foreach k in 2 {
        ma = mma.load lhs.chunkat(m#g0, k);
        mb = mma.load rhs.chunkat(k, n#g1);
        mma.row.col mc, ma, mb;
      }
      mma.store mc, output.chunkat(m#g0, n#g1);
    }
  }
  return output;
}
"""


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    path = tmp_path_factory.mktemp("warp") / "small.co"
    path.write_text(SMALL)
    return str(path)


def _inputs(name):
    g = torch.Generator().manual_seed(1)
    if name == "small_rr":  # 8 x 4 A tiles (half an instruction's M, a quarter of its K)
        return (torch.randn(16, 12, generator=g).half(), torch.randn(24, 12, generator=g).half())
    if name == "fused":  # `mc += bias; mc *= 0.5;`: element-wise, each lane its own
        return (torch.randn(32, 32, generator=g).half(), torch.randn(32, 16, generator=g).half(), 3)
    if name == "warpgroups":  # each warp of a warpgroup: 16 of its 64 rows, all of B
        return (torch.randn(128, 32, generator=g).half(), torch.randn(64, 32, generator=g).half())
    if name == "shared_block":
        return (torch.randn(32, 32, generator=g).bfloat16(),
                torch.randn(32, 16, generator=g).bfloat16())
    return (torch.randint(-128, 128, (16, 32), generator=g).to(torch.int8),
            torch.randint(-128, 128, (32, 16), generator=g).to(torch.int8))


def _want(name, args):
    a, b = (x.double() for x in args[:2])
    if name == "small_rr":
        return a @ b.T + 0.5
    if name == "warpgroups":
        return a @ b.T
    if name == "fused":
        return (a @ b + args[2]) * 0.5
    return a @ b


@pytest.mark.parametrize("name", ["small_rr", "shared_block", "fused", "warpgroups", "ints_8x8"])
def test_interpreter_matches_torch(small, name):
    args = _inputs(name)
    DTYPES.update(torch_dtypes())
    got = choreo_py.interpret(small, function=name, target="sm_90a")(*args)
    assert torch.allclose(got.double(), _want(name, args), rtol=1e-5, atol=1e-3)


@pytest.mark.emu
@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
@pytest.mark.parametrize("name", ["small_rr", "shared_block", "fused", "warpgroups", "ints_8x8"])
def test_emulator_matches_torch(small, name, target):
    args = _inputs(name)
    got, _ = emulate_function(small, name, args, target)
    want = _want(name, args)
    if name == "ints_8x8":
        assert torch.equal(got.long(), want.long())
    else:
        assert torch.allclose(got.double(), want, rtol=1e-5, atol=1e-3)


@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_ptxas_accepts_and_output_is_deterministic(small, target):
    ptx = compile_file(small, "ptx", target)
    assert ptx == compile_file(small, "ptx", target)
    assert "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32" in ptx
    assert "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32" in ptx
    assert "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32" in ptx
    if find_ptxas() is None:
        pytest.skip("ptxas (CUDA 12.8+) is not on PATH")
    _, log = ptxas(ptx, target, verbose=True)
    assert "error" not in log.lower()


def test_ir_prints_and_parses_back(small):
    from choreo_py import targets
    from choreo_py.passes.pipeline import ir_of_file
    module = ir_of_file(small, targets.get("sm_90a"))
    text = print_module(module)
    assert "mma.sync.row.row mc += ma * mb" in text
    again = parse_module(text)
    assert print_module(again) == text
    mmas = [s for f in again.functions for k in f.kernels for s in ir.walk(k.body)
            if isinstance(s, ir.WarpMma)]
    assert {(s.layout, s.acc, s.a, s.b) for s in mmas} == {("row.row", "mc", "ma", "mb"),
                                                          ("row.col", "mc", "ma", "mb")}


# ---------------------------------------------------------------- refused by name

def _compile_error(tmp_path, src, target="sm_90a") -> ChoreoError:
    path = tmp_path / "bad.co"
    path.write_text(src)
    with pytest.raises(ChoreoError) as e:
        compile_file(str(path), "ptx", target)
    assert e.value.loc is not None
    return e.value


THREADS = """
__co__ auto th(f16 [16, 16] lhs, f16 [16, 8] rhs) {
  f32 [16, 8] output;
  parallel p by 1 : block {
    mc = mma.fill.f32 0.0;
    parallel q by 32 : thread {
      ma = mma.load lhs;
      mb = mma.load rhs;
      mma.row.col mc, ma, mb;
    }
    mma.store mc, output;
  }
  return output;
}
"""


def test_a_thread_level_is_refused_by_name(tmp_path):
    e = _compile_error(tmp_path, THREADS)
    assert "register fragments in a ': thread' level" in e.message and e.loc.line == 9


def test_an_integer_product_into_f32_is_refused_by_name(tmp_path):
    src = SMALL.split("__co__ auto ints_8x8")[1].replace("mma.fill.s32 0", "mma.fill.f32 0.0")
    src = "__co__ auto ints_8x8" + src.replace("s32 [16, 16] output", "f32 [16, 16] output")
    e = _compile_error(tmp_path, src)
    assert "a f32 accumulator of s8 operands" in e.message


F16_ACC = """
__co__ auto f16_acc(f16 [32, 64] lhs, f16 [64, 32] rhs) {
  f16 [32, 32] output{0.5f};
  parallel m by 2 : block {
    parallel g by 2 : group {
      mc = mma.load output.chunkat(m, g);
      foreach k in 4 {
        ma = mma.load lhs.chunkat(m, k);
        mb = mma.load rhs.chunkat(k, g);
        mma.row.col mc, ma, mb;
      }
      mc += 1.0;
      mma.store mc, output.chunkat(m, g);
    }
  }
  return output;
}
"""


@pytest.mark.emu
def test_f16_accumulator_rounds_as_the_interpreter(tmp_path):
    """An f16 accumulator (here loaded from an f16 tile) is summed in f32 by each MMA and
    rounded to f16 after it and after each element store: the emulated PTX gives the
    interpreter's values (to the last bit but for a few)."""
    path = tmp_path / "f16acc.co"
    path.write_text(F16_ACC)
    g = torch.Generator().manual_seed(5)
    lhs, rhs = torch.randn(32, 64, generator=g).half(), torch.randn(64, 32, generator=g).half()
    want = choreo_py.interpret(str(path), function="f16_acc", target="sm_90a")(lhs, rhs)
    assert torch.allclose(want.double(), lhs.double() @ rhs.double() + 1.5, atol=0.05)
    got, _ = emulate_function(str(path), "f16_acc", (lhs, rhs), "sm_90a")
    _as_the_interpreter(got, want)


def _as_the_interpreter(got, want):
    """The emulated values are the interpreter's, but for last-bit differences (at most 2
    units in the last place, each MMA's rounding one) in under 1% of the elements (each MMA's f32 sum: the emulator adds in
    float64 and rounds once, the interpreter's torch matmul adds in float32, and an f16
    accumulator is rounded again after every MMA)."""
    diff = (got.double() - want.double()).abs()
    big = torch.maximum(got.abs(), want.abs())
    ulp = (torch.nextafter(big, torch.tensor(float("inf"), dtype=want.dtype)) - big).double()
    assert bool((diff <= 2 * ulp).all()), f"max difference {(diff / ulp).max().item()} ulp"
    assert (diff > 0).double().mean().item() < 0.01, f"{(diff > 0).double().mean().item()}"


# ---------------------------------------------------------------- corpus codegen files

CODEGEN = os.path.join(SHARED, "corpus", "tests", "gpu", "codegen", "cute")
BARRIER_TOGGLE = os.path.join(CODEGEN, "ptx_barrier_codegen_toggle.co")
MMA_LOAD_FRAG = os.path.join(SHARED, "corpus", "tests", "parse", "mma_load_frag.co")


def _need(path):
    if not os.path.exists(path):
        pytest.skip(f"{path} is not available (set CHOREO_SHARED to the shared folder)")


@pytest.mark.emu
@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_warpgroup_file_with_tma_copies_matches_torch(target):
    """ptx_barrier_codegen_toggle.co: synchronous tma.copy tiles (cooperative copies here,
    pass warp-copies), a `: group-4` region's register fragments, an f32 accumulator stored
    at block level into a global f16 tile."""
    _need(BARRIER_TOGGLE)
    g = torch.Generator().manual_seed(2)
    lhs, rhs = (torch.randn(64, 64, generator=g).half() for _ in range(2))
    want = lhs.double() @ rhs.double().T
    out = torch.zeros(64, 64).half()
    choreo_py.interpret(BARRIER_TOGGLE, function="ptx_barrier_toggle_case",
                        target=target)(lhs, rhs, out)
    assert torch.allclose(out.double(), want, rtol=1e-2, atol=2e-2)
    got, _ = emulate_function(BARRIER_TOGGLE, "ptx_barrier_toggle_case",
                              (lhs, rhs, torch.zeros(64, 64).half()), target)
    assert torch.allclose(got["output"].double(), want, rtol=1e-2, atol=2e-2)


@pytest.mark.emu
def test_block_level_mma_file_matches_torch():
    """mma_load_frag.co: the MMA in the block's own code (a block of one warp)."""
    _need(MMA_LOAD_FRAG)
    g = torch.Generator().manual_seed(3)
    lhs, rhs = (torch.randn(16, 16, generator=g).half() for _ in range(2))
    got, _ = emulate_function(MMA_LOAD_FRAG, "mma_load_frag", (lhs, rhs), "sm_100a")
    assert torch.allclose(got.double(), lhs.double() @ rhs.double(), rtol=1e-2, atol=2e-2)


@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
@pytest.mark.parametrize("path", [BARRIER_TOGGLE, MMA_LOAD_FRAG], ids=["barrier_toggle",
                                                                       "mma_load_frag"])
def test_codegen_files_assemble(path, target):
    _need(path)
    if find_ptxas() is None:
        pytest.skip("ptxas (CUDA 12.8+) is not on PATH")
    _, log = ptxas(compile_file(path, "ptx", target), target, verbose=True)
    assert "error" not in log.lower()


AMPERE = os.path.join(SHARED, "corpus", "tests", "gpu", "end2end", "ampere_mma.co")


@pytest.mark.emu
@pytest.mark.parametrize("name,shape", [("matmul_f16_sm86", (32, 48, 32)),
                                        ("matmul_persis_sta_sm86", (48, 64, 32)),
                                        ("matmul_trans_sm86", (32, 48, 32))])
def test_functions_main_does_not_call_match_torch(name, shape):
    """ampere_mma.co's sm86 functions (row.row, tiles copied into shared memory inside the
    `: group` region, a persistent loop over tiles, mma.store.transp): interpreter and
    emulator vs torch."""
    _need(AMPERE)
    m, n, k = shape
    g = torch.Generator().manual_seed(4)
    lhs, rhs = torch.randn(m, k, generator=g).half(), torch.randn(n, k, generator=g).half()
    want = lhs.double() @ rhs.double().T
    if name == "matmul_trans_sm86":  # mma.store.transp: output is [N, M]
        want = want.T
    out = torch.zeros(*want.shape).half()
    choreo_py.interpret(AMPERE, function=name, target="sm_90a")(lhs, rhs, out)
    assert torch.allclose(out.double(), want, rtol=1e-2, atol=2e-2)
    got, _ = emulate_function(AMPERE, name, (lhs, rhs, torch.zeros(*want.shape).half()),
                              "sm_90a")
    assert torch.allclose(got["output"].double(), want, rtol=1e-2, atol=2e-2)


STMATRIX = os.path.join(CODEGEN, "stmatrix_codegen_enable.co")


@pytest.mark.emu
@pytest.mark.parametrize("name,shape,dtype", [
    ("stmatrix_codegen_case", (64, 64, 32), torch.float16),  # an f16 accumulator
    # N = 160: its second 152-column tile crosses the tensor's edge (TMA's clipping: the
    # load zero-fills, the store writes only inside; pass warp-copies cuts the boxes)
    ("stmatrix_codegen_case_bf16_f32_tail", (64, 160, 64), torch.bfloat16),
    ("stmatrix_codegen_case_bf16_f32_trans", (64, 160, 64), torch.bfloat16)])
def test_warpgroup_tma_functions_match_torch(name, shape, dtype):
    _need(STMATRIX)
    m, n, k = shape
    g = torch.Generator().manual_seed(6)
    lhs, rhs = torch.randn(m, k, generator=g).to(dtype), torch.randn(n, k, generator=g).to(dtype)
    want = lhs.double() @ rhs.double().T
    want = want.T if name.endswith("trans") else want
    out = torch.zeros(*want.shape).to(dtype)
    choreo_py.interpret(STMATRIX, function=name, target="sm_90a")(lhs, rhs, out)
    assert torch.allclose(out.double(), want, rtol=2e-2, atol=0.1)
    got, _ = emulate_function(STMATRIX, name, (lhs, rhs, torch.zeros(*want.shape).to(dtype)),
                              "sm_90a")
    _as_the_interpreter(got["output"], out)


FLOAT_HOST_VALUE = """
__co__ void f(f32 [N] a) {
  mutable float s = 1.5f;
  s = s * 2.0f;
  parallel p by 1 : block
    a.at(0) = s;
}
"""


@pytest.mark.emu
def test_a_float_host_value_reaches_the_kernel(tmp_path):
    """A float host value (like ampere_mma.co's f16 bias) is a kernel argument: its f32 bits."""
    from choreo_py.emu.program import emulate_program
    path = tmp_path / "hv.co"
    path.write_text(FLOAT_HOST_VALUE)
    a, b = torch.zeros(4), torch.zeros(4)
    choreo_py.interpret(str(path), function="f", target="sm_90a")(a)
    emulate_program(str(path), target="sm_90a").f(b)
    assert a.tolist() == b.tolist() == [3.0, 0.0, 0.0, 0.0]
