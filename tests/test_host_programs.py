"""Host programs whose files hold MMA kernels beside thread kernels.

tests/co/gemm_then_relu.co: one function launches an MMA kernel (TMA ring,
wgmma / tcgen05) into a buffer the call allocates and then a thread kernel
over it; another function of the file is a thread kernel alone. Checked in the
interpreter against torch, assembled by ptxas for both targets, and (sm_90a)
its PTX entries run in the emulator in launch order as the GPU runtime launches
them (runtime/host_program.py's parameters: tensor maps for the MMA entry,
pointers for the thread entry). test_end2end_gpu.py-style GPU check at the end.
"""
from __future__ import annotations

import os

import pytest
import torch

import choreo_py
from choreo_py import frontend, ir, targets
from choreo_py.driver import compile_file
from choreo_py.runtime import build
from choreo_py.runtime.build import find_ptxas, ptxas

HERE = os.path.dirname(os.path.abspath(__file__))
GEMM_RELU = os.path.join(HERE, "co", "gemm_then_relu.co")


def _inputs(m=128, n=128, k=128):
    g = torch.Generator().manual_seed(0)
    a = torch.randn(m, k, generator=g).to(torch.bfloat16)
    b = torch.randn(n, k, generator=g).to(torch.bfloat16)
    return a, b


def _want(a, b):
    return torch.relu(a.float() @ b.float().t())


def test_interpreter_runs_both_kernels_in_order():
    lib = choreo_py.interpret(GEMM_RELU, target="sm_90a")
    assert set(lib.functions) == {"gemm_relu", "relu"}
    a, b = _inputs()
    c = lib.gemm_relu(a, b)
    assert c.shape == (128, 128)
    assert (c.float() - _want(a, b)).abs().max().item() < 0.05 * _want(a, b).abs().max().item()
    assert (c.float() >= 0).all()  # the second kernel ran after the first
    x = torch.randn(5, 64)
    assert torch.equal(lib.relu(x), torch.relu(x))


@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_one_module_with_an_entry_per_kernel(target):
    text = compile_file(GEMM_RELU, "pyptx", target)
    ns = build.run_module(text).namespace
    kernels = ns["KERNELS"]
    assert len(kernels) == 3
    mma = [n for n, i in kernels.items() if "PARAMS" in i]
    assert len(mma) == 1 and kernels[mma[0]]["THREADS"] == 384
    assert [p[0] for p in kernels[mma[0]]["PARAMS"]] == ["tmap", "tmap", "tmap", "dim", "dim",
                                                          "dim"]
    ptx = compile_file(GEMM_RELU, "ptx", target)
    assert ptx.count(".visible .entry") == 3 and ptx.count(".version") == 1
    assert compile_file(GEMM_RELU, "ptx", target) == ptx  # deterministic
    if find_ptxas() is None:
        pytest.skip("ptxas (CUDA 12.8+) is not on PATH")
    ptxas(ptx, target)


def emulate_function(path: str, name: str, args: tuple, target: str):
    """Runs a function's kernels in the PTX emulator as runtime/host_program.py launches
    them: its host buffers allocated, its entries in launch order, an MMA entry's PARAMS
    (tensor maps, dimensions), a thread entry's pointers and dimensions. Returns (the
    result, or for a function that returns nothing every tensor by name; the launches)."""
    from choreo_py.emu.api import run_spec
    from choreo_py.emu.launch import LaunchSpec
    from choreo_py.host.specialize import Functions
    from choreo_py.interp.host import bind_args
    from choreo_py.interp.runner import allocate

    funcs = Functions(frontend.parse_file(path), targets.get(target), strict=True)
    fn = funcs.get(name, args, {})
    ns = build.run_module(build.program_text(funcs.module(fn), path, target)).namespace
    given = dict(zip(fn.arg_names or [p.name for p in fn.params], args))
    tensors = {p.name: given[p.name] for p in fn.params}
    _, scalars = bind_args(fn, args, {})  # bool / int / float arguments (f16 rounded)
    allocate(fn, tensors, {})
    for loc in fn.locals:  # what a kernel fails to write must not pass for a result
        if tensors[loc.name].is_floating_point() and loc.init is None:  # ({0.0f}: it is read)
            tensors[loc.name].fill_(float("nan"))
    shapes = tuple((p.name, p.dtype, tuple(x.name if isinstance(x, ir.Sym) else x.value
                                           for x in p.shape)) for p in fn.params + fn.locals)
    launches = [s.kernel for s in fn.body if isinstance(s, ir.Launch)]
    for kernel in launches:
        info = ns["KERNELS"][kernel]
        params = list(info.get("PARAMS") or
                      [("ptr", f"ptr_{t}", t) for t in info["TENSORS"]]
                      + [("dim", f"dim_{d}", d) for d in info["DIMS"]])
        coop = bool(info.get("COOPERATIVE"))
        if coop:  # the grid barrier's words, zeroed per launch as the runtime does
            tensors["__grid_sync"] = torch.zeros(2, dtype=torch.int32)
        spec = LaunchSpec(info["KERNEL"].ptx(), info["grid"], (info["THREADS"], 1, 1),
                          info["SMEM_BYTES"], params, shapes, cooperative=coop)
        run_spec(spec, tensors, scalars=scalars)
        tensors.pop("__grid_sync", None)
    return (tensors[fn.result] if fn.result is not None else tensors), launches


@pytest.mark.emu
def test_emulated_launches_match_torch():
    """The sm_90a entries executed by the PTX emulator, launched as the runtime does."""
    a, b = _inputs(128, 128, 128)
    c, launches = emulate_function(GEMM_RELU, "gemm_relu", (a, b), "sm_90a")
    assert len(launches) == 2
    want = _want(a, b)
    assert (c.float() - want).abs().max().item() < 0.02 * want.abs().max().item()
    assert (c.float() >= 0).all()


@pytest.mark.emu
@pytest.mark.parametrize("target,schedule", [("sm_90a", "greedy"), ("sm_100a", "random")])
def test_emulate_program_runs_the_functions_as_the_gpu_would(target, schedule):
    """choreo_py.emulate_program: the runtime's own launches (the MMA entry with its tensor
    maps, then the thread entry over the buffer the call allocated), each in the emulator."""
    from choreo_py.emu import EmuStats

    stats = EmuStats()
    lib = choreo_py.emulate_program(GEMM_RELU, target=target, schedule=schedule, stats=stats)
    a, b = _inputs(128, 128, 64)
    c = lib.gemm_relu(a, b)
    want = _want(a, b)
    assert (c.float() - want).abs().max().item() < 0.02 * want.abs().max().item()
    assert stats.ctas == 1 + 128 and stats.instructions > 0  # one GEMM tile, one CTA a row
    x = torch.randn(5, 64)
    assert torch.equal(lib.relu(x), torch.relu(x))


@pytest.mark.emu
@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_emulate_program_runs_a_file_of_one_mma_kernel(target):
    """examples/gemm.co (`load` gives a kernel, not a library): its PARAMS as a program's."""
    g = torch.Generator().manual_seed(1)
    a = torch.randn(128, 64, generator=g).bfloat16()
    b = torch.randn(128, 64, generator=g).bfloat16()
    c = torch.full((128, 128), float("nan")).bfloat16()
    gemm = os.path.join(os.path.dirname(HERE), "examples", "gemm.co")
    assert choreo_py.emulate_program(gemm, target=target).gemm(a, b, c) is None
    want = a.float() @ b.float().t()
    assert torch.allclose(c.float(), want, rtol=2e-2, atol=2e-2)


@pytest.mark.emu
def test_emulate_program_takes_cpu_tensors():
    lib = choreo_py.emulate_program(GEMM_RELU, target="sm_90a")
    with pytest.raises(ValueError, match="^x: on meta; the emulator takes tensors on cpu$"):
        lib.relu(torch.empty(5, 64, device="meta"))


@pytest.mark.gpu
def test_gpu_runs_the_host_program():
    lib = choreo_py.load(GEMM_RELU)
    a, b = (t.cuda() for t in _inputs(256, 256, 192))
    c = lib.gemm_relu(a, b)
    want = _want(a.cpu(), b.cpu())
    assert (c.float().cpu() - want).abs().max().item() < 0.02 * want.abs().max().item()
    x = torch.randn(7, 64, device="cuda")
    assert torch.equal(lib.relu(x), torch.relu(x))


SIZES = """
__co__ s32 [N] offsets(s32 [N] a) {
  s32 [a.span] out;
  int tiles = cdiv(N, 32);
  mid = N / 2;
  parallel t by tiles : block
    parallel q by 32 : thread {
      i = t * 32 + q;
      if (i < N)
        out.at(i) = a.at(i) + tiles * 1000 + (i < mid ? 1 : 0);
    }
  return out;
}
"""


def test_host_values_of_the_sizes(tmp_path):
    """Immutable host scalars computed from the function's sizes: each kernel that reads
    them computes them from its dimensions (checked against Python's own arithmetic)."""
    path = tmp_path / "sizes.co"
    path.write_text(SIZES)
    for n in (64, 70):
        a = torch.randint(0, 9, (n,), dtype=torch.int32)
        out = choreo_py.interpret(str(path), target="sm_90a").offsets(a)
        want = a + (-(-n // 32)) * 1000 + (torch.arange(n) < n // 2).int()
        assert torch.equal(out, want)
    if find_ptxas() is None:
        pytest.skip("ptxas (CUDA 12.8+) is not on PATH")
    for target in ("sm_90a", "sm_100a"):
        ptx = compile_file(str(path), "ptx", target)
        assert "dim_N" in ptx
        ptxas(ptx, target)


def test_a_mutable_host_value_sizes_the_grid(tmp_path):
    """A mutable host scalar (sema/host_code.py): the kernel's grid and body read it as a
    scalar argument, its value at the launch."""
    path = tmp_path / "mut.co"
    path.write_text(SIZES.replace("int tiles = cdiv(N, 32);", "mutable int tiles = 1;\n"
                                  "  tiles = cdiv(N, 32);"))
    n = 70
    a = torch.randint(0, 9, (n,), dtype=torch.int32)
    out = choreo_py.interpret(str(path), target="sm_90a").offsets(a)
    assert torch.equal(out, a + 3 * 1000 + (torch.arange(n) < n // 2).int())
    ir_text = compile_file(str(path), "ir", "sm_90a")
    assert "scalars tiles: s32" in ir_text and "var tiles: s32 = 1" in ir_text
    if find_ptxas() is not None:
        ptxas(compile_file(str(path), "ptx", "sm_90a"), "sm_90a")


def test_a_kernel_assigning_a_host_variable_changes_its_own_copy(tmp_path):
    """A kernel receives a host variable's value (co-mock runs each instance on a snapshot
    of the host's scalars): `tiles = 2;` inside it changes the instance's copy, read by its
    later statements, while the grid the host launched is the host's 3 tiles."""
    path = tmp_path / "mut.co"
    path.write_text(SIZES.replace("int tiles = cdiv(N, 32);", "mutable int tiles = 3;")
                    .replace("i = t * 32 + q;", "i = t * 32 + q; tiles = 2;"))
    n = 70
    a = torch.randint(0, 9, (n,), dtype=torch.int32)
    out = choreo_py.interpret(str(path), target="sm_90a").offsets(a)
    assert torch.equal(out, a + 2 * 1000 + (torch.arange(n) < n // 2).int())
    ir_text = compile_file(str(path), "ir", "sm_90a")
    assert "var tiles__local: s32 = tiles" in ir_text and "writes_back" not in ir_text
    if find_ptxas() is not None:
        ptxas(compile_file(str(path), "ptx", "sm_90a"), "sm_90a")


HOST_REGION = os.path.join(HERE, "co", "host_region.co")


def _host_region_want(x):
    return (x.to(torch.int64) * 3 + 1) * 2


def test_a_cpu_region_between_gpu_kernels_in_the_interpreter():
    x = torch.randint(0, 1000, (192,), dtype=torch.int64)  # u32 in the interpreter's int64
    want = _host_region_want(x)
    assert choreo_py.interpret(HOST_REGION, target="sm_90a").host_region(x) is None
    assert torch.equal(x, want)


@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_a_cpu_region_has_no_entry(target):
    fn = ir_of_file_(HOST_REGION, target).functions[0]
    assert [k.device for k in fn.kernels] == [None, "cpu", None]
    ptx = compile_file(HOST_REGION, "ptx", target)
    assert ptx.count(".visible .entry") == 2 and "host_region_k1" not in ptx
    if find_ptxas() is None:
        pytest.skip("ptxas (CUDA 12.8+) is not on PATH")
    ptxas(ptx, target)


def test_run_on_host_updates_the_callers_tensors():
    """runtime/host_program.run_on_host, on a CPU "device": the interpreter's widened copy
    of a u32 tensor, written back in the tensor's own dtype."""
    from choreo_py.runtime.host_program import run_on_host

    fn = ir_of_file_(HOST_REGION, "sm_90a").functions[0]
    x = torch.arange(128, dtype=torch.int64).to(torch.uint32)
    run_on_host(fn.kernels[1], {"x": x}, {"N": 128}, "cpu")
    assert x.dtype == torch.uint32 and torch.equal(x.to(torch.int64), torch.arange(128) + 1)


def ir_of_file_(path, target):
    from choreo_py.driver import ir_of_file

    return ir_of_file(path, target=target)


@pytest.mark.gpu
def test_gpu_runs_the_cpu_region_on_the_host():
    x = torch.randint(0, 1000, (256,), dtype=torch.int64).to(torch.uint32).cuda()
    want = _host_region_want(x.cpu().to(torch.int64))
    choreo_py.load(HOST_REGION).host_region(x)
    assert torch.equal(x.cpu().to(torch.int64), want)


@pytest.mark.parametrize("old,new,message", [
    ("parallel.async by 1 : device(cpu)", "parallel.async by 2 : device(cpu)",
     "a ': device(...)' region of more than one instance"),
    ("    foreach i in [N] {\n      x.at(i) = x.at(i) + 1;\n    }\n",
     "    parallel q by 4 : thread {\n      x.at(q) = x.at(q) + 1;\n      sync.shared;\n    }\n",
     "parallel levels inside a ': device(cpu)' region"),  # (without the barrier: loops,
    # tests/test_cpu_region_levels.py)
    ("  parallel.async by 1 : device(gpu) {\n", "  parallel.async by 1 : device(gpu) {\n"
     "    sync.global;\n", "host code inside a ': device(gpu)' region"),
])
def test_device_regions_refused_by_name(tmp_path, old, new, message):
    src = open(HOST_REGION).read()
    assert old in src
    path = tmp_path / "region.co"
    path.write_text(src.replace(old, new))
    with pytest.raises(choreo_py.ChoreoError) as e:
        compile_file(str(path), "ptx", "sm_90a")
    assert message in e.value.message and e.value.loc is not None
