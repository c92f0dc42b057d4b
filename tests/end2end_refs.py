"""Programs run as host programs, with inputs and the check each one's own `main()` makes.

CASES lists (file, function, make inputs, check) for the reference compiler's
end-to-end programs (`../shared/corpus/tests/gpu/end2end/`) that compile, and
for the examples. `make(gen, device)` returns the call's arguments; `check(args,
result)` raises AssertionError as the program's C++ check would fail. The
checks are ports of the programs' `main()`: the same tolerances, the same
comparisons. The interpreter's suite (test_end2end.py), the PTX emulator's
(test_end2end_emu.py: the GPU's launches, each entry's PTX emulated) and the
GPU's (test_end2end_gpu.py) run the same cases.

Long because: one port per end-to-end program, beside the input makers and checks
the ports share; the families that stand alone are apart (end2end_gemms.py,
flash_atten_ref.py, end2end_warp_refs.py: wmma.co and ampere_mma.co, end2end_subbyte.py:
the sub-byte types).
"""
from __future__ import annotations

import os

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: the reference compiler's programs: $CHOREO_SHARED (the device copy) or ../shared
SHARED = os.environ.get("CHOREO_SHARED") or os.path.join(ROOT, "..", "shared")
END2END = os.path.join(SHARED, "corpus", "tests", "gpu", "end2end")
EXAMPLES = os.path.join(ROOT, "examples")


#: element type -> torch dtype of the engine that runs the case (set by run_case: the
#: interpreter widens unsigned types, a GPU needs the exact widths).
DTYPES: dict = {}


def _typed_ints(etype):
    def make(gen, dev):
        return tuple(torch.randint(0, 10, (6, 64), generator=gen).to(DTYPES[etype]).to(dev)
                     for _ in range(2))
    return make


_BITS = {"s32": 32, "u32": 32, "s16": 16, "u16": 16, "s8": 8, "u8": 8}


def _wrapped_sum(etype):
    """static_cast<T>(a + b), computed in int64 on the CPU."""
    def ref(args):
        total = args[0].cpu().to(torch.int64) + args[1].cpu().to(torch.int64)
        bits = _BITS[etype]
        total = total % (1 << bits)
        if etype.startswith("s"):
            total = torch.where(total >= 1 << (bits - 1), total - (1 << bits), total)
        return total
    return ref


def _equal_as_int(args, res, want):
    assert torch.equal(res.cpu().to(torch.int64), want), "values are not equal."


def _s32(gen, shape, dev):
    return torch.randint(-10, 10, shape, generator=gen, dtype=torch.int32).to(dev)


def _ints(gen, shape, lo, hi, device):
    return torch.randint(lo, hi, shape, generator=gen, dtype=torch.int32).to(device)


def _floats(gen, shape, lo, hi, dtype, device):
    return (torch.rand(shape, generator=gen) * (hi - lo) + lo).to(dtype).to(device)


def _equal(args, res, want):
    assert torch.equal(res.cpu(), want.cpu()), "values are not equal."


def _close(tol):
    def check(args, res, want):
        diff = (res.float().cpu() - want.float().cpu()).abs().max().item()
        assert diff <= tol, f"max difference {diff} > {tol}"
    return check


# --- end2end/add-shared.co: a + b, element by element (its main: exact equality)
def _add_shared(gen, dev):
    return (_ints(gen, (6, 17, 64), -10, 10, dev), _ints(gen, (6, 17, 64), -10, 10, dev))


# --- end2end/memreuse-static.co: a + b for u8 [8, 256] filled in [0, 10) (exact)
def _memreuse(gen, dev):
    return tuple(torch.randint(0, 10, (8, 256), generator=gen, dtype=torch.uint8).to(dev)
                 for _ in range(2))


# --- end2end/float_types.co: |res - (float(a) + float(b))| <= 0.1; fp8 copies exact
def _fadd(dtype):
    def make(gen, dev):
        return tuple(_floats(gen, (6, 64), -10.0, 10.0, dtype, dev) for _ in range(2))
    return make


def _fcopy(dtype):
    def make(gen, dev):
        return (_floats(gen, (6, 64), -10.0, 10.0, torch.float32, "cpu").to(dtype).to(dev),)
    return make


def _sum_ref(args):
    return args[0].float() + args[1].float()


def _copy_ref(args):
    return args[0]


def _bits_equal(args, res, want):
    assert torch.equal(res.cpu().view(torch.uint8), want.cpu().view(torch.uint8)), \
        "values are not equal."


# --- examples
def _vector_add(gen, dev):
    return tuple(_floats(gen, (1024,), -1.0, 1.0, torch.float32, dev) for _ in range(2))


def _transpose(gen, dev):
    return (_floats(gen, (64, 96), -1.0, 1.0, torch.float32, dev),)


def _rmsnorm(gen, dev):
    return (_floats(gen, (128, 256), -2.0, 2.0, torch.float32, dev),
            _floats(gen, (256,), 0.5, 1.5, torch.float32, dev))


def _rmsnorm_ref(args):
    x, w = (a.float() for a in args)
    return x * torch.rsqrt((x * x).mean(dim=1, keepdim=True) + 1e-6) * w


def _gemm(gen, dev):
    return (_floats(gen, (32, 48), -1.0, 1.0, torch.float32, dev),
            _floats(gen, (48, 64), -1.0, 1.0, torch.float32, dev),
            _floats(gen, (64,), -1.0, 1.0, torch.float32, dev))


def _gemm_ref(args):
    a, b, bias = (x.cpu().double() for x in args)
    return torch.relu(a @ b + bias).float()


def _softmax(gen, dev):
    x = _floats(gen, (256, 128), -3.0, 3.0, torch.bfloat16, dev)
    return (x, torch.zeros_like(x))


def _softmax_check(args, res, want):
    got = args[1].float().cpu()
    ref = torch.softmax(args[0].float().cpu(), dim=1)
    diff = (got - ref).abs().max().item()
    assert diff <= 1e-2, f"max difference {diff}"


# --- end2end/dma_3d.co and dma_4d5d.co: each function copies its input through shared
# memory; main() checks output == input element by element (f16 compared as values).
COPIES = [
    ("dma_3d.co", "test_flat_s32", torch.int32, (2, 4, 8)),
    ("dma_3d.co", "test_flat_f16", torch.float16, (3, 8, 16)),
    ("dma_3d.co", "test_flat_async", torch.int32, (2, 8, 32)),
    ("dma_3d.co", "test_flat_large", torch.int32, (4, 16, 32)),
    ("dma_3d.co", "test_flat_s8", torch.int8, (2, 16, 64)),
    ("dma_3d.co", "test_batch_s32", torch.int32, (2, 4, 8)),
    ("dma_3d.co", "test_batch_f16", torch.float16, (3, 8, 16)),
    ("dma_3d.co", "test_batch_async", torch.int32, (2, 8, 32)),
    ("dma_3d.co", "test_mixed_flatten", torch.int32, (3, 4, 8)),
    ("dma_3d.co", "test_mixed_flatten_f16", torch.float16, (4, 8, 16)),
    ("dma_3d.co", "test_mixed_batch", torch.int32, (2, 4, 8)),
    ("dma_3d.co", "test_mixed_batch_inner_static", torch.int32, (3, 4, 8)),
    ("dma_4d5d.co", "test_4d_flat_s32", torch.int32, (2, 3, 4, 8)),
    ("dma_4d5d.co", "test_4d_flat_f16", torch.float16, (2, 2, 4, 16)),
    ("dma_4d5d.co", "test_4d_dyn_s32", torch.int32, (2, 3, 4, 8)),
    ("dma_4d5d.co", "test_4d_mixed", torch.int32, (2, 3, 5, 7)),
    ("dma_4d5d.co", "test_4d_dyn_outer", torch.int32, (3, 3, 4, 8)),
    ("dma_4d5d.co", "test_5d_flat_s32", torch.int32, (2, 2, 3, 4, 8)),
    ("dma_4d5d.co", "test_5d_dyn", torch.int32, (2, 2, 3, 4, 5)),
    ("dma_4d5d.co", "test_5d_mixed", torch.int32, (2, 3, 3, 4, 8)),
]


# --- end2end/tiled_dma.co: main() compares a region of the output with the input at an
# offset: output[i][j] == input[oi + i][oj + j] for i < rows, j < cols (f16 as values);
# `zero_row`: that output row must be 0 (the zero-initialised result buffer).
TILED = [  # function, dtype, input shape, rows, cols, oi, oj, zero_row
    ("foo1", torch.int32, (32, 32), 32, 32, 0, 0, None),
    ("foo2", torch.float16, (31, 32), 31, 32, 0, 0, 31),
    ("foo3", torch.float16, (32, 1024), 7, 32, 0, 0, None),
    ("foo4", torch.int32, (32, 64), 32, 64, 0, 0, None),
    ("foo5", torch.float16, (31, 64), 31, 64, 0, 0, 31),
    ("foo6", torch.float32, (128, 128), 32, 32, 32, 64, None),
    ("foo7", torch.int32, (64, 32), 64, 32, 0, 0, None),
    ("foo8", torch.int32, (16, 48), 16, 48, 0, 0, None),
    ("foo9", torch.int8, (32, 128), 32, 128, 0, 0, None),
    ("foo10", torch.int32, (13, 32), 13, 32, 0, 0, None),
    ("foo11", torch.int32, (13, 64), 13, 64, 0, 0, None),
    ("foo12", torch.float16, (64, 64), 64, 64, 0, 0, None),
    ("foo13", torch.float16, (128, 128), 128, 128, 0, 0, None),
    ("foo14", torch.float16, (4, 128), 4, 128, 0, 0, None),
    ("foo15", torch.int32, (128, 16), 128, 16, 0, 0, None),
    ("foo16", torch.int8, (64, 128), 32, 64, 0, 0, None),
    ("foo17", torch.int32, (48, 64), 16, 32, 0, 0, None),
    ("foo18", torch.int8, (64, 128), 13, 64, 0, 0, None),
    ("foo19", torch.int32, (128, 128), 32, 32, 32, 64, None),
    ("foo25", torch.int32, (128,), 128, None, 0, 0, None),
    ("foo26", torch.float16, (256,), 256, None, 0, 0, None),
    ("foo27", torch.int32, (64,), 64, None, 0, 0, None),
    ("foo28", torch.int8, (512,), 512, None, 0, 0, None),
    ("copy_tail_m", torch.float16, (70, 64), 70, 64, 0, 0, None),
    ("copy_tail_k", torch.float16, (64, 72), 64, 72, 0, 0, None),
    ("copy_tail_mk", torch.float16, (70, 72), 70, 72, 0, 0, None),
]


def _region_check(rows, cols, oi, oj, zero_row):
    def check(args, res, want):
        x, out = args[0].cpu().float(), res.cpu().float()
        if cols is None:
            assert torch.equal(out[:rows], x[oi:oi + rows]), "mismatch"
            return
        assert torch.equal(out[:rows, :cols], x[oi:oi + rows, oj:oj + cols]), "mismatch"
        if zero_row is not None:
            assert torch.all(out[zero_row] == 0), "zfill row mismatch"
    return check


def _transposed(rows, cols):
    """tiled_dma.co foo20/foo21: output[i][j] == input[j][i] for i < rows, j < cols."""
    def check(args, res, want):
        assert torch.equal(res.cpu()[:rows, :cols], args[0].cpu()[:cols, :rows].t()), \
            "mismatch"
    return check


def _padded(low, high, value):
    """tiled_dma.co foo22-24: output[i][j] == input[i - low0][j - low1] inside, else value."""
    def ref(args):
        x = args[0].cpu()
        out = torch.full((x.shape[0] + low[0] + high[0], x.shape[1] + low[1] + high[1]), value,
                         dtype=x.dtype)
        out[low[0]:low[0] + x.shape[0], low[1]:low[1] + x.shape[1]] = x
        return out
    return ref


def _copy_input(dtype, shape):
    def make(gen, dev):
        if dtype.is_floating_point:
            return (_floats(gen, shape, -8.0, 8.0, dtype, dev),)
        return (torch.randint(-63, 64, shape, generator=gen).to(dtype).to(dev),)
    return make


# --- end2end/fp8_ops.co: fp8 inputs in [-2, 2); sums in f16 within 0.35 (e4m3) / 0.5
# (e5m2) of float(a) + float(b); copies compare float values exactly.
def _fp8(dtype, shape, n):
    def make(gen, dev):
        return tuple(_floats(gen, shape, -2.0, 2.0, torch.float32, "cpu").to(dtype).to(dev)
                     for _ in range(n))
    return make


FP8 = [
    ("ele_add_fp8_e4m3", _fp8(torch.float8_e4m3fn, (6, 64), 2), _sum_ref, _close(0.35)),
    ("ele_add_fp8_e5m2", _fp8(torch.float8_e5m2, (6, 64), 2), _sum_ref, _close(0.5)),
    ("fp8_dma_copy_sync", _fp8(torch.float8_e4m3fn, (6, 17, 64), 1), _copy_ref, _close(0.0)),
    ("fp8_dma_copy_async", _fp8(torch.float8_e5m2, (6, 17, 64), 1), _copy_ref, _close(0.0)),
    ("fp8_dma_copy_group", _fp8(torch.float8_e5m2, (6, 17, 32), 1), _copy_ref, _close(0.0)),
    ("fp8_dma_add", _fp8(torch.float8_e5m2, (6, 17, 32), 2), _sum_ref, _close(0.35)),
    ("fp8_dma_add1", _fp8(torch.float8_e5m2, (6, 17, 32), 2), _sum_ref, _close(0.35)),
]

# --- end2end/atomic_add.co: input[i] = i; output[b] == the count of i % 16 == b
def _histogram(gen, dev):
    return (torch.arange(256, dtype=torch.int32).to(dev),)


def _histogram_ref(args):
    return torch.bincount(args[0].cpu().long() % 16, minlength=16).int()


# --- end2end/wgmma_rs.co: A from registers (a constant fragment, or mma.load of a shared
# tile) times B in shared memory; its main's data and its 0.1 tolerance
def _rs_lhs(dev):
    m, k = torch.meshgrid(torch.arange(64), torch.arange(16), indexing="ij")
    return (((m + 2 * k) % 3).float() * 0.5).to(torch.float16).to(dev)


def _rs_rhs(dev):
    n, k = torch.meshgrid(torch.arange(64), torch.arange(16), indexing="ij")
    return (((2 * n + k) % 3).float() * 0.5).to(torch.float16).to(dev)


def _rs1_ref(args):
    return args[0].cpu().float().sum(1).expand(64, 64)  # [m][n]: the sum of row n of B


def _rs2_ref(args):
    return args[0].cpu().float() @ args[1].cpu().float().t()


# --- end2end/hetero_cpu_gpu*.co: `: device(cpu)` regions (the host runs them) beside GPU
# kernels; the functions update their arguments in place. Each case: the initial values
# main() sets (functions of i), and the values it expects after the call, within its
# tolerance.
def _hetero(n, inits, expects, tol):
    def make(gen, dev):  # (fresh tensors: the call writes them)
        return tuple(f(torch.arange(n, dtype=torch.float32)).clone().to(dev) for f in inits)

    def check(args, res, want):
        assert res is None
        i = torch.arange(n, dtype=torch.float32)
        for k, (arg, f) in enumerate(zip(args, expects)):
            diff = (arg.cpu() - f(i)).abs().max().item()
            assert diff <= tol, f"argument {k}: max difference {diff} > {tol}"
    return make, check


HETERO = [
    ("hetero_cpu_gpu.co", "hetero_add", 1024, [lambda i: i, lambda i: i * 2],
     [lambda i: i + 1, lambda i: i * 2 + 2], 1e-5),
    ("hetero_cpu_gpu_dma.co", "hetero_dma_roundtrip", 128, [lambda i: i, lambda i: i + 100],
     [lambda i: i * 2, lambda i: i + 100], 1e-5),
    ("hetero_cpu_gpu_multi.co", "hetero_multi_phase", 256,
     [lambda i: i, lambda i: i, lambda i: i * 0],
     [lambda i: i + 1, lambda i: i * 2, lambda i: (i + 1) + i * 2], 1e-5),
    ("hetero_cpu_gpu_scale.co", "hetero_parallel_scale", 4096,
     [lambda i: i % 100, lambda i: i % 50, lambda i: i % 200, lambda i: i % 75],
     [lambda i: i % 100 + 10, lambda i: (i % 50) * 3, lambda i: i % 200 - 5,
      lambda i: i % 75 + 100], 1e-4),
]

#: Cases a target refuses by name: (target, words of the refusal).
REFUSED_ON = {
    "wgmma_rs.co::wgmma_rs2": ("sm_100a", "mma.load (a register A operand"),
    "wgmma_ss.co::matmul_f16_ws_1p3c": ("sm_100a", "in a kernel with tensor-memory accumulators"),
    "wgmma_ss.co::matmul_e4m3": ("sm_100a", "an MMA on f8_e4m3 x f8_e4m3"),
    "wgmma_ss.co::matmul_st_trans": ("sm_100a", "mma.store.transp (a transposed store"),
    "wgmma_ss.co::matmul_e4m3_mwg": ("sm_100a", "an MMA on f8_e4m3 x f8_e4m3"),
    "wgmma_ss.co::matmul_e4m3_ws_tbc": ("sm_100a", "an MMA on f8_e4m3 x f8_e4m3"),
    "wgmma_ss.co::matmul_e4m3_mwg_tbc": ("sm_100a", "an MMA on f8_e4m3 x f8_e4m3"),
    "wgmma_persis.co::matmul_f16_ws_1p3c_persis": ("sm_100a",
                                                   "in a kernel with tensor-memory accumulators"),
}

#: Cases the interpreter does not run, with the reason (they still assemble and run on a GPU).
NOT_INTERPRETED: dict = {}

_HOPPER_MMA_RACE = ("every group (warp) of a block widens the whole shared tile into the "
                    "same fl_f16 / fr_f16 with no barrier before the other groups' mma.load "
                    "reads it (nor before the next k's writes): unordered conflicting accesses "
                    "across warps, benign only because the values written are the same")
#: Programs that race: case id -> (why, what the interpreter's / the emulator's race report
#: says). The race detectors must report them (strict runs), not pass them.
RACES: dict = {f"hopper_mma.co::{fn}": (_HOPPER_MMA_RACE, "data race on fl_f16",
                                        "writes shared memory")
               for fn in ("matmul_f6", "matmul_f4")}


def _add_local(gen, dev):
    return (_ints(gen, (6, 17, 64), -10, 10, dev), _ints(gen, (6, 17, 64), -10, 10, dev))


CASES = [
    (os.path.join(END2END, "atomic_add.co"), "histogram_shared", _histogram, _histogram_ref,
     _equal),
] + [
    (os.path.join(END2END, "fp8_ops.co"), fn, make, ref, check) for fn, make, ref, check in FP8
] + [
    (os.path.join(END2END, "tiled_dma.co"), "foo20", _copy_input(torch.int32, (64, 128)), None,
     _transposed(128, 64)),
    (os.path.join(END2END, "tiled_dma.co"), "foo21", _copy_input(torch.int32, (64, 64)), None,
     _transposed(32, 16)),
    (os.path.join(END2END, "tiled_dma.co"), "foo22", _copy_input(torch.int32, (32, 64)),
     _padded((2, 4), (2, 4), 99), _equal),
    (os.path.join(END2END, "tiled_dma.co"), "foo23", _copy_input(torch.int32, (32, 64)),
     _padded((2, 4), (2, 4), 99), _equal),
    (os.path.join(END2END, "tiled_dma.co"), "foo24", _copy_input(torch.int32, (30, 60)),
     _padded((2, 1), (3, 2), -1), _equal),
] + [
    # end2end/add.co, its second function: per-thread copies into local buffers (exact)
    (os.path.join(END2END, "add.co"), "ele_add_local_dma", _add_local, lambda a: a[0] + a[1],
     _equal),
] + [
    (os.path.join(END2END, f), fn, _copy_input(dt, shape), _copy_ref, _equal)
    for f, fn, dt, shape in COPIES
] + [
    (os.path.join(END2END, "tiled_dma.co"), fn, _copy_input(dt, shape), None,
     _region_check(rows, cols, oi, oj, zero))
    for fn, dt, shape, rows, cols, oi, oj, zero in TILED
] + [
    # end2end/copy.co: sync/async/group copies through shared memory (exact)
    (os.path.join(END2END, "copy.co"), "dma_copy_sync", lambda g, d: (_s32(g, (6, 17, 64), d),),
     _copy_ref, _equal),
    (os.path.join(END2END, "copy.co"), "dma_copy_async", lambda g, d: (_s32(g, (6, 17, 64), d),),
     _copy_ref, _equal),
    (os.path.join(END2END, "copy.co"), "dma_copy_group", lambda g, d: (_s32(g, (6, 17, 32), d),),
     _copy_ref, _equal),
    (os.path.join(END2END, "copy.co"), "dma_add",
     lambda g, d: (_s32(g, (6, 17, 32), d), _s32(g, (6, 17, 32), d)), lambda a: a[0] + a[1],
     _equal),
    (os.path.join(END2END, "copy.co"), "dma_add1",
     lambda g, d: (_s32(g, (6, 17, 32), d), _s32(g, (6, 17, 32), d)), lambda a: a[0] + a[1],
     _equal),
] + [
    # end2end/integral_types.co: static_cast<T>(a + b), inputs in [0, 10)
    (os.path.join(END2END, "integral_types.co"), f"ele_add_{t}", _typed_ints(t), _wrapped_sum(t),
     _equal_as_int) for t in ("s32", "u32", "s16", "u16", "s8", "u8")
] + [
    # (path, function, make(gen, device), reference(args) or None, check(args, res, want))
    (os.path.join(END2END, "add-shared.co"), "ele_add", _add_shared,
     lambda a: a[0] + a[1], _equal),
    (os.path.join(END2END, "memreuse-static.co"), "mem_reuse_static", _memreuse,
     lambda a: a[0] + a[1], _equal),
    (os.path.join(END2END, "memreuse.co"), "mem_reuse_dynamic", _memreuse,
     lambda a: a[0] + a[1], _equal),
    (os.path.join(END2END, "float_types.co"), "ele_add_f32", _fadd(torch.float32),
     _sum_ref, _close(0.1)),
    (os.path.join(END2END, "float_types.co"), "ele_add_f16", _fadd(torch.float16),
     _sum_ref, _close(0.1)),
    (os.path.join(END2END, "float_types.co"), "ele_add_bf16", _fadd(torch.bfloat16),
     _sum_ref, _close(0.1)),
    (os.path.join(END2END, "float_types.co"), "copy_f8_e4m3", _fcopy(torch.float8_e4m3fn),
     _copy_ref, _bits_equal),
    (os.path.join(END2END, "float_types.co"), "copy_f8_e5m2", _fcopy(torch.float8_e5m2),
     _copy_ref, _bits_equal),
    (os.path.join(END2END, "wgmma_rs.co"), "wgmma_rs1", lambda g, d: (_rs_rhs(d),), _rs1_ref,
     _close(0.1)),
    (os.path.join(END2END, "wgmma_rs.co"), "wgmma_rs2", lambda g, d: (_rs_lhs(d), _rs_rhs(d)),
     _rs2_ref, _close(0.1)),
    (os.path.join(EXAMPLES, "vector_add.co"), "vector_add", _vector_add,
     lambda a: a[0] + a[1], _close(0.0)),
    (os.path.join(EXAMPLES, "transpose.co"), "transpose", _transpose,
     lambda a: a[0].t().contiguous(), _close(0.0)),
    (os.path.join(EXAMPLES, "rmsnorm.co"), "rmsnorm", _rmsnorm, _rmsnorm_ref, _close(1e-3)),
    (os.path.join(EXAMPLES, "softmax.co"), "softmax", _softmax, None, _softmax_check),
    (os.path.join(EXAMPLES, "gemm_bias_relu.co"), "gemm_bias_relu", _gemm, _gemm_ref,
     _close(1e-4)),
] + [
    (os.path.join(END2END, f), fn, make, None, check)
    for f, fn, n, inits, expects, tol in HETERO
    for make, check in [_hetero(n, inits, expects, tol)]
]


# --- end2end/numerics.co: C math functions; its main: |got - ref| <= 2e-4 + 2e-4 |ref|
def _numerics_in(n):
    return lambda gen, dev: tuple(_floats(gen, (512,), -0.5, 1.0, torch.float32, dev)
                                  for _ in range(n))


def _core6_ref(args):
    x = args[0].cpu().double()
    return (torch.sqrt(x + 2) + 1 / torch.sqrt(x + 2) + torch.sin(x) + torch.sinh(x * 0.25)
            + torch.cos(x) + torch.cosh(x * 0.25))


def _unary_ref(args):
    x = args[0].cpu().double()
    return (torch.acos(x * 0.5) + torch.asin(x * 0.5) + torch.atan(x) + torch.sin(x)
            + torch.cos(x) + torch.cosh(x * 0.25) + torch.sinh(x * 0.25) + torch.exp(x * 0.25)
            + torch.log(x + 2.5) + torch.log1p(x * 0.25 + 0.5) + torch.expm1(x * 0.25)
            + torch.sqrt(x + 2.5) + 1 / torch.sqrt(x + 2.5) + torch.tan(x * 0.25)
            + torch.tanh(x))


def _binary_ref(args):
    x, y = args[0].cpu().double(), args[1].cpu().double()
    return torch.pow(x + 1.5, y + 1.5) + torch.atan2(x, y)


def _numerics_check(args, res, want):
    diff = (res.cpu().double() - want).abs()
    tol = 2e-4 + 2e-4 * want.abs()
    assert bool((diff <= tol).all()), f"numerics mismatch: {(diff - tol).max().item()} over"


def _returns_nothing(args, res, want):
    assert res is None, "a void function returned a value"


def _untouched_and_void(args, res, want):
    _returns_nothing(args, res, want)
    assert not args[0].cpu().any(), "the input was written"


def _span_as_ref(args):
    """res[i][j] == a[i/3][i%3][j] + b[i/3][i%3][j]"""
    a, b = (x.cpu() for x in args)
    i = torch.arange(6)
    return a[i // 3, i % 3] + b[i // 3, i % 3]


CASES += [
    # end2end/add.co, its first function: lhs.span_as(6, 64) on the host side (exact)
    (os.path.join(END2END, "add.co"), "ele_add_span_as",
     lambda gen, dev: (_ints(gen, (2, 3, 64), -10, 10, dev), _ints(gen, (2, 3, 64), -10, 10, dev)),
     _span_as_ref, _equal),
    # end2end/stream.co: foo(100, s) prints a + p in each of 6 blocks; its main checks that it
    # runs (test_kernel_language.py checks the printed lines)
    (os.path.join(END2END, "stream.co"), "foo", lambda gen, dev: (100,), None, _returns_nothing),
    # end2end/debug_rtti_GDB_types.co: host code around the kernel (`with idx in [b]`, b an
    # ituple of the scalar argument); its main calls it on zeros with x = 1 and checks that
    # it runs (the printed lines: test_host_code.py)
    (os.path.join(END2END, "debug_rtti_GDB_types.co"), "debug_builtin_non_scalar_types",
     lambda gen, dev: (torch.zeros((32, 64), dtype=torch.int32).to(dev), 1), None,
     _untouched_and_void),
    (os.path.join(END2END, "numerics.co"), "numerics_core6", _numerics_in(1), _core6_ref,
     _numerics_check),
    (os.path.join(END2END, "numerics.co"), "unary_mix", _numerics_in(1), _unary_ref,
     _numerics_check),
    (os.path.join(END2END, "numerics.co"), "binary_mix", _numerics_in(2), _binary_ref,
     _numerics_check),
]


# --- asm_basic.co, wgmma_ss.co, wgmma_persis.co: end2end_gemms.py
from end2end_gemms import cases as _gemm_cases  # noqa: E402

_more, _not_run = _gemm_cases(END2END)
CASES += _more
NOT_INTERPRETED.update(_not_run)

# --- block-scaled fp8 GEMMs of wgmma_ss.co and wgmma_persis.co: end2end_gemms.py
from end2end_gemms import BLOCKSCALE_REFUSED_ON, blockscale_cases  # noqa: E402

CASES += blockscale_cases(END2END)
REFUSED_ON.update(BLOCKSCALE_REFUSED_ON)


# --- end2end/tma_v2.co, tma_f32.co: TMA copies through shared memory, double-buffered with
# `tma.any` placeholders and `swap`; inputs in [-10, 10) (fp8: [-2, 2)), exact equality
# (fp8: |got - ref| <= 0.2, as their mains check)
def _fp8_pair(gen, dev):
    return tuple(_floats(gen, (16, 16, 128), -2.0, 2.0, torch.float32, "cpu")
                 .to(torch.float8_e4m3fn).to(dev) for _ in range(2))


def _fp8_sum_ref(args):
    return args[0].cpu().float() + args[1].cpu().float()


CASES += [
    (os.path.join(END2END, "tma_v2.co"), "tma_ab_buffer",
     lambda gen, dev: tuple(_floats(gen, (6, 16, 128), -10, 10, torch.float32, dev)
                            for _ in range(2)), lambda a: a[0] + a[1], _equal),
    (os.path.join(END2END, "tma_f32.co"), "tma_copy_async",
     _copy_input(torch.float32, (6, 16, 64)), _copy_ref, _equal),
    (os.path.join(END2END, "tma_f32.co"), "tma_copy_multi_subspan",
     _copy_input(torch.float32, (6, 16, 64)), _copy_ref, _equal),
    (os.path.join(END2END, "tma_f32.co"), "tma_copy_tiled",
     _copy_input(torch.float32, (6, 16, 128)), _copy_ref, _equal),
    (os.path.join(END2END, "tma_f32.co"), "tma_ab_buffer_fp8", _fp8_pair, _fp8_sum_ref,
     _close(0.2)),
]


# --- end2end/flash_atten.co: attention with a run-time causal flag (flash_atten_ref.py)
from flash_atten_ref import fa_check as _fa_check, fa_inputs as _fa_inputs, fa_ref as _fa_ref  # noqa: E402

CASES += [
    (os.path.join(END2END, "flash_atten.co"), "flash_atten", _fa_inputs(causal), _fa_ref,
     _fa_check, label) for causal, label in ((False, "non-causal"), (True, "causal"))
]


# --- end2end/cooperative_grid_sync.co: two blocks exchange values through global memory
# across a grid-wide barrier (a cooperative launch); its main: res == {2, 1}
CASES += [
    (os.path.join(END2END, "cooperative_grid_sync.co"), "coop_grid_sync", lambda gen, dev: (),
     lambda a: torch.tensor([2, 1], dtype=torch.int32), _equal),
]


# --- the sub-byte types (fp6, fp4, u6..u1, s6..s2, bin1): end2end_subbyte.py
from end2end_subbyte import REFUSED as _subbyte_refused, cases as _subbyte_cases  # noqa: E402

CASES += _subbyte_cases(END2END)
REFUSED_ON.update(_subbyte_refused)


# --- end2end/gemm_sp.co: 2:4 structured-sparse A (wgmma.mma_async.sp): end2end_sparse.py
from end2end_sparse import REFUSED as _sparse_refused, cases as _sparse_cases  # noqa: E402

CASES += _sparse_cases(END2END)
REFUSED_ON.update(_sparse_refused)


def case_id(case) -> str:
    """`file::function`, and the case's label where a function has several (its call's
    scalar arguments)."""
    label = f"[{case[5]}]" if len(case) > 5 else ""
    return f"{os.path.basename(case[0])}::{case[1]}{label}"


def need_file(path: str) -> str:
    """`path`, or skip the calling test saying where the program was looked for (a fresh
    clone has no ../shared: the reference compiler's programs are not in the repository)."""
    if not os.path.exists(path):
        import pytest

        pytest.skip(f"{path} is not available (set CHOREO_SHARED to the shared folder)")
    return path


def run_case(case, call, device, dtypes) -> None:
    """Makes the inputs, calls the function through `call(path, function)`, checks."""
    path, function, make, ref, check = case[:5]
    need_file(path)
    DTYPES.clear()
    DTYPES.update(dtypes)
    gen = torch.Generator().manual_seed(0)
    args = make(gen, device)
    res = call(path, function)(*args)
    want = ref(args) if ref is not None else None
    check(args, res, want)


def case_ptx(case, target: str) -> str:
    """The PTX the GPU runs for the case: its function built for the case's shapes."""
    from choreo_py import frontend, targets
    from choreo_py.host.specialize import Functions
    from choreo_py.runtime import build
    from choreo_py.runtime.host_program import torch_dtypes

    path, function, make = case[:3]
    need_file(path)
    DTYPES.clear()
    DTYPES.update(torch_dtypes())
    args = make(torch.Generator().manual_seed(0), "cpu")
    funcs = Functions(frontend.parse_file(path), targets.get(target), strict=True)
    from choreo_py.diagnostics import ChoreoError

    fn = funcs.get(function, args, {})
    try:
        return build.emit(funcs.module(fn), path, "ptx", target)
    except ChoreoError:  # as the runtime does: the backend may need the call's sizes
        special = funcs.for_call(function, args, {})
        if special is None or special is fn:
            raise
        return build.emit(funcs.module(special), path, "ptx", target)


# --- end2end/wmma.co and ampere_mma.co (mma.sync): end2end_warp_refs.py
from end2end_warp_refs import warp_cases  # noqa: E402  (it takes this module's helpers)

CASES += warp_cases(END2END, DTYPES, _floats, _ints, _equal_as_int)


# --- end2end/gdn_recurrence.co: a Gated Delta Network's chunked state update (end2end_gdn.py)
from end2end_gdn import cases as _gdn_cases  # noqa: E402

CASES += _gdn_cases(END2END)
