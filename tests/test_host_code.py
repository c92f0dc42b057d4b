"""Host code around kernels (sema/host_code.py, host/execute.py): loops launching kernels,
host scalars, host code over tensor elements, whole-tensor copies, parameters without a
written shape. Each program runs in the interpreter against torch; the launch sequence of
the GPU runtime's host program (runtime/host_program.py, on the generated module's
KERNELS) is checked without a GPU by recording its launches; the PTX assembles."""
from __future__ import annotations

import os

import pytest
import torch

import choreo_py
from choreo_py.driver import compile_file
from choreo_py.runtime.build import find_ptxas, ptxas

from end2end_refs import END2END

LOOP = """
__co__ void rows(s32 [R, 64] x, int n) {
  mutable int total = 0;
  foreach i in [R] {
    parallel q by 64 : thread
      x.at(i, q) = x.at(i, q) + i * 10 + total;
    total += n;
  }
}
"""


def _rows_want(x, n):
    i = torch.arange(x.shape[0], dtype=torch.int32)[:, None]
    return x + i * 10 + i * n


def _write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_a_host_loop_launches_its_kernel_per_iteration(tmp_path):
    path = _write(tmp_path, "rows.co", LOOP)
    x = torch.randint(-5, 5, (5, 64), dtype=torch.int32)
    want = _rows_want(x, 3)
    choreo_py.interpret(path, target="sm_90a").rows(x, 3)
    assert torch.equal(x, want)
    ir_text = compile_file(path, "ir", "sm_90a")
    assert "scalars i: s32, total: s32" in ir_text
    assert "for i in 0..R {\n    launch rows\n    total := total + n\n  }" in ir_text


class _Recorder:
    """A launcher for ThreadProgram (as CudaLauncher is): records the launch, its grid and
    its scalar words, and runs the kernel in the interpreter in the GPU's place."""

    engine_name, devices = "the interpreter", ("cpu",)  # what the call's binding checks

    def __init__(self, program):
        self.program, self.calls = program, []

    @staticmethod
    def device(tensors):
        return torch.device("cpu")

    @staticmethod
    def sync(device):
        pass

    def launch(self, name, tensors, dims, device):
        info = self.program.kernels[name]
        args = {d: int(dims[d]) for d in info["DIMS"]}
        self.calls.append((name, info["grid"](**args), args))
        # what the GPU would compute, so that the host program goes on with real data
        from choreo_py.interp.runner import run_kernel

        kernel = self.program.module.kernel(name)
        run_kernel(kernel, {p.name: tensors[p.name] for p in kernel.params}, args)


def _gpu_program(path, function, target="sm_90a"):
    from choreo_py import frontend, targets
    from choreo_py.host.specialize import Functions
    from choreo_py.runtime import build
    from choreo_py.runtime.host_program import ThreadProgram

    funcs = Functions(frontend.parse_file(path), targets.get(target), strict=True)
    fn = funcs.get(function)
    module = funcs.module(fn)
    program = ThreadProgram(path, target, module, build.pyptx_text(module, path, target),
                            launcher=_Recorder)
    return fn, program


def test_the_runtime_launch_sequence_of_a_host_loop(tmp_path):
    """The generated module's host program: one launch per iteration, the loop variable and
    the mutable total as the kernel's scalar words, in the order its DIMS name them."""
    path = _write(tmp_path, "rows.co", LOOP)
    fn, program = _gpu_program(path, "rows")
    x = torch.zeros((4, 64), dtype=torch.int32)
    program.call(fn, (x, 7), {})
    assert program.kernels["rows"]["DIMS"] == ("R", "i", "total")
    assert program.launcher.calls == [
        ("rows", (1, 1, 1), {"R": 4, "i": k, "total": 7 * k}) for k in range(4)]
    assert torch.equal(x, _rows_want(torch.zeros((4, 64), dtype=torch.int32), 7))


NESTED = """
__co__ s32 [M, N] tiles(s32 [M, N] a) {
  s32 [a.span] out;
  with {tm, tn} in [M / 16, N / 32] {
    foreach tm, tn(::2) {
      parallel p by 16 : block
        parallel q by 32 : thread
          out.at(tm # p, tn # q) = a.at(tm # p, tn # q) * 2 + tm;
      if (tm == 1) break;
    }
  }
  return out;
}
"""


def test_with_foreach_and_break_around_a_kernel(tmp_path):
    """`with`/`foreach` with a stride and a `break` on the host (it leaves the innermost
    loop, tn): the kernels of the iterations run write their tiles; the tiles of the
    skipped iterations stay zero."""
    path = _write(tmp_path, "tiles.co", NESTED)
    a = torch.randint(-9, 9, (48, 128), dtype=torch.int32)
    out = choreo_py.interpret(path, target="sm_90a").tiles(a)
    want = torch.zeros_like(a)
    for tm in range(3):
        for tn in range(0, 4, 2):
            rows, cols = slice(tm * 16, tm * 16 + 16), slice(tn * 32, tn * 32 + 32)
            want[rows, cols] = a[rows, cols] * 2 + tm
            if tm == 1:  # the innermost loop's (C's nesting of `foreach tm, tn`)
                break
    assert torch.equal(out, want)
    fn, program = _gpu_program(path, "tiles")
    program.call(fn, (a,), {})
    assert [c[2]["tm"] * 10 + c[2]["tn"] for c in program.launcher.calls] == [0, 2, 10, 20, 22]
    assert all(c[1] == (16, 1, 1) for c in program.launcher.calls)


HOST_DATA = """
__co__ void prefix(s32 [32] a, s32 [32] b) {
  mutable int k = 2;
  k *= 3;
  foreach i in [32] {
    b.at(i) = a.at(i) * k + i;
  }
  parallel p by 1 : block
    parallel q by 32 : thread
      a.at(q) = b.at(q) + 1;
}
"""


def test_host_code_over_elements_runs_on_the_host(tmp_path):
    """A host loop over tensor elements that launches nothing: a kernel the host runs
    (`device cpu`, no PTX entry), reading the host variable k."""
    path = _write(tmp_path, "prefix.co", HOST_DATA)
    a = torch.randint(-9, 9, (32,), dtype=torch.int32)
    b = torch.zeros(32, dtype=torch.int32)
    a0 = a.clone()
    choreo_py.interpret(path, target="sm_90a").prefix(a, b)
    assert torch.equal(b, a0 * 6 + torch.arange(32, dtype=torch.int32))
    assert torch.equal(a, b + 1)
    ir_text = compile_file(path, "ir", "sm_90a")
    assert "device cpu" in ir_text and "scalars k: s32" in ir_text
    ptx = compile_file(path, "ptx", "sm_90a")
    assert ptx.count(".entry") == 1


COPY = """
__co__ f32 [N, 4] twice(f32 [N, 4] a) {
  f32 [a.span] out;
  dma.copy a => out;
  parallel p by 1 : block
    parallel q by 4 : thread
      foreach r in [N]
        out.at(r, q) = out.at(r, q) * 2.0f;
  return out;
}
"""


def test_a_host_copy_of_a_whole_tensor(tmp_path):
    path = _write(tmp_path, "copy.co", COPY)
    a = torch.randn(6, 4)
    out = choreo_py.interpret(path, target="sm_90a").twice(a)
    assert torch.equal(out, a * 2)
    assert "dma.copy" in compile_file(path, "ir", "sm_90a").split("func twice")[1]


UNSHAPED = """
__co__ auto scale(f32 mdspan<2> a) {
  f32 [a.span] out;
  parallel p by a.span(0) : block
    parallel q by 8 : thread
      foreach c in [a.span(1) / 8]
        out.at(p, c # q) = a.at(p, c # q) * 3.0f;
  return out;
}
"""


def test_a_parameter_without_a_written_shape(tmp_path):
    """`f32 mdspan<2> a`: its dimensions come from the argument (generic build: symbolic;
    the interpreter binds them per call)."""
    path = _write(tmp_path, "scale.co", UNSHAPED)
    lib = choreo_py.interpret(path, target="sm_90a")
    for shape in ((3, 16), (5, 8)):
        a = torch.randn(shape)
        assert torch.equal(lib.scale(a), a * 3)
    assert "a: global f32[a__dim0, a__dim1]" in compile_file(path, "ir", "sm_90a")


#: A host loop around a TMA kernel that reads the loop variable (the MMA/TMA launcher
#: passes no scalar arguments).
TMA_IN_LOOP = """
__co__ void f(global bf16[N, 64] A, global bf16[N, 64] C) {
  foreach i in [2] {
    parallel {t} by [cdiv(N, 128)] : block {
      shared bf16[128, 64] tile;
      shared event full;
      parallel p by 1 : group-4 {
        inthreads.async (p == 0) {
          load = tma.load.async A.subspan(128, 64).at(t + i, 0) => tile;
          trigger full after load;
          wait full;
          tma.copy tile => C.subspan(128, 64).at(t, 0);
        }
      }
    }
  }
}
"""

REFUSED = [
    ("__co__ void f(s32 [N] a) {\n  event e;\n  parallel p by 1 : block {}\n}\n",
     "an event declared on the host"),
    ("__co__ void f(s32 [N] a) {\n  foreach i in [2] {\n    s32 [4] t;\n"
     "    parallel p by 1 : block {}\n  }\n}\n", "a host buffer declared inside host control"),
    ("__co__ void f(f64 [N] a) {\n  mutable f64 s = 1.0;\n  parallel p by 1 : block\n"
     "    a.at(0) = s;\n}\n", "the host value 's' of type f64 in a kernel"),
    (TMA_IN_LOOP, "host code other than launching the kernel is not lowered for sm_90a yet"),
    ("__co__ void f(s32 [N] a, int b) {\n  int d = b * 2;\n  s32 [d] t;\n"
     "  parallel p by 1 : block\n    t.at(0) = a.at(0);\n}\n",
     "a host buffer whose dimension is the host variable 'd'"),
]


@pytest.mark.parametrize("text,message", REFUSED)
def test_host_code_that_is_not_lowered_is_refused_by_name(tmp_path, text, message):
    path = _write(tmp_path, "r.co", text)
    with pytest.raises(choreo_py.ChoreoError) as e:
        compile_file(path, "ptx", "sm_90a")
    assert message in e.value.message
    assert e.value.loc is not None and e.value.loc.line >= 1


def test_debug_rtti_prints_its_ituples(capfd):
    """end2end/debug_rtti_GDB_types.co: its PRINT lines (the host's, then the kernel's)."""
    path = os.path.join(END2END, "debug_rtti_GDB_types.co")
    if not os.path.exists(path):
        pytest.skip(f"{path} is not available (set CHOREO_SHARED)")
    lib = choreo_py.interpret(path, target="sm_90a")
    lib.debug_builtin_non_scalar_types(torch.zeros((32, 64), dtype=torch.int32), 1)
    assert capfd.readouterr().out == "111 {0, 0, 0}\n222 {0, 0, 0}\n"  # one space between arguments
    fn, program = _gpu_program(path, "debug_builtin_non_scalar_types")
    program.call(fn, (torch.zeros((32, 64), dtype=torch.int32), 1), {})
    assert [c[0] for c in program.launcher.calls] == ["debug_builtin_non_scalar_types"]
    assert program.launcher.calls[0][2] == {"x": 1}
    assert capfd.readouterr().out == "111 {0, 0, 0}\n222 {0, 0, 0}\n"  # one space between arguments


@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_host_programs_assemble(tmp_path, target):
    if find_ptxas() is None:
        pytest.skip("ptxas (CUDA 12.8+) is not on PATH")
    for name, text in (("rows.co", LOOP), ("tiles.co", NESTED), ("prefix.co", HOST_DATA),
                       ("copy.co", COPY), ("scale.co", UNSHAPED)):
        ptxas(compile_file(_write(tmp_path, name, text), "ptx", target), target)
    only_host = _write(tmp_path, "h.co", "__co__ void h(int a) {\n  mutable int b = a;\n"
                       "  b += 1;\n  println(b);\n}\n")
    ptx = compile_file(only_host, "ptx", target)
    assert ".entry" not in ptx
    ptxas(ptx, target)


SCALAR_RESULT = """
__co__ auto count(s32 [N] a, int k) {
  mutable int n = 0;
  foreach i in [N / 4] {
    if (i % k == 0) n += 1;
  }
  sp : a.span;
  t = {N, k, 7};
  picked : [sp, 5][(1), (0)];
  u = t {(2), (0)};
  return n * 1000 + picked(0) * 10 + u(0) + u(1);
}
"""


def test_a_scalar_result_and_selections(tmp_path):
    """`return <scalar>;`: the call returns the number; `s[(1), (0)]` and `t {(2), (0)}`
    select elements of a shape and an ituple."""
    path = _write(tmp_path, "count.co", SCALAR_RESULT)
    lib = choreo_py.interpret(path, target="sm_90a")
    for n, k in ((40, 3), (16, 1)):
        want = sum(1 for i in range(n // 4) if i % k == 0) * 1000 + 5 * 10 + 7 + n
        assert lib.count(torch.zeros(n, dtype=torch.int32), k) == want
    fn, program = _gpu_program(path, "count")
    assert program.call(fn, (torch.zeros(40, dtype=torch.int32), 3), {}) == 4057 + 40
    assert program.launcher.calls == []


def test_the_host_loops_program():
    """tests/co/host_loops.co (also round-tripped through the IR text by test_ir_parse)."""
    path = os.path.join(os.path.dirname(__file__), "co", "host_loops.co")
    a = torch.randint(-9, 9, (8, 32), dtype=torch.int32)
    out = choreo_py.interpret(path, target="sm_90a").host_loops(a, 2)
    want = torch.zeros_like(a)
    for r in range(5):  # r > k + 2 = 4 breaks
        want[r] = a[r] * 2 + r + 3 * r
    want[0] += 2
    assert torch.equal(out, want)


def test_sema_builds_only_host_statements_the_executor_runs():
    from choreo_py.host.execute import _RULES
    from choreo_py.sema.host_code import HOST_STATEMENTS

    assert set(_RULES) == set(HOST_STATEMENTS)


CHUNKS = """
__co__ f32 [8, 64] chunks(f32 [8, 64] a) {
  f32 [a.span] out;
  foreach i in [4] {
    parallel p by 1 : block {
      s = dma.copy a.chunkat(i, _) => shared;
      parallel q by 64 : thread
        foreach r in [2]
          out.chunkat(i, _).at(r, q) = s.data.at(r, q) + 1.0f;
    }
  }
  return out;
}
"""


def test_a_host_loop_variable_tiles_a_kernels_copy(tmp_path):
    """The loop variable is a bounded variable in the kernel: `chunkat(i, _)` of a copy
    into shared memory and of the store, one row pair per launch."""
    path = _write(tmp_path, "chunks.co", CHUNKS)
    a = torch.randn(8, 64)
    assert torch.equal(choreo_py.interpret(path, target="sm_90a").chunks(a), a + 1)
    fn, program = _gpu_program(path, "chunks")
    out = program.call(fn, (a,), {})
    assert torch.equal(out, a + 1)
    assert [c[2] for c in program.launcher.calls] == [{"i": k} for k in range(4)]
    if find_ptxas() is not None:
        for target in ("sm_90a", "sm_100a"):
            ptxas(compile_file(path, "ptx", target), target)


def test_a_float_host_value_reaches_the_kernel(tmp_path):
    """An f32 host variable is a kernel argument (its bits in the word, as an f32 scalar
    parameter is): the interpreter and the emulated PTX agree with the value."""
    path = _write(tmp_path, "fhost.co", "__co__ void f(f32 [4] a) {\n  mutable float s = 1.5f;\n"
                  "  s *= 3.0f;\n  parallel p by 1 : block\n    a.at(0) = s;\n}\n")
    a = torch.zeros(4)
    choreo_py.interpret(path, target="sm_90a").f(a)
    assert float(a[0]) == 4.5
    b = torch.zeros(4)
    choreo_py.emulate_program(path, target="sm_90a").f(b)
    assert float(b[0]) == 4.5


DERIVED = """
__co__ auto halves(s32 [N, 64] x, int f) {
  mdspan d : [N, f];
  s32 [d / {2, 4}] out;
  parallel {i, j} by [N / 2, f / 4] : block
    parallel k by 1 : thread
      out.at(i, j) = x.at(2 * i, j) + f;
  return out;
}
"""


@pytest.mark.parametrize("engine", ["interpreter", "sm_90a", "sm_100a"])
def test_a_host_buffer_dimension_computed_from_the_parameters(tmp_path, engine):
    """`s32 [d / {2, 4}] out;` of `d : [N, f]`: the call evaluates N / 2 and f / 4 when it
    allocates `out`; the kernel binds them from the tensor it receives."""
    path = _write(tmp_path, "halves.co", DERIVED)
    if engine == "interpreter":
        fn = choreo_py.interpret(path, function="halves", target="sm_90a")
    else:
        fn = choreo_py.emulate_program(path, target=engine)["halves"]
        if find_ptxas() is not None:
            ptxas(compile_file(path, "ptx", engine), engine)
    x = torch.arange(8 * 64, dtype=torch.int32).reshape(8, 64)
    res = fn(x, 32)
    assert res.shape == (4, 8) and torch.equal(res, x[0::2, :8] + 32)


def test_a_computed_host_buffer_dimension_that_is_not_positive_is_a_located_error(tmp_path):
    path = _write(tmp_path, "halves.co", DERIVED)
    fn = choreo_py.interpret(path, function="halves", target="sm_90a")
    with pytest.raises(choreo_py.ChoreoError) as e:
        fn(torch.zeros((8, 64), dtype=torch.int32), 2)  # f / 4 == 0
    assert "a dimension of 'out' is 0 for these arguments" in e.value.message
    assert (e.value.loc.line, e.value.loc.col) == (4, 20)


RUN_TIME_INDEX = """
__co__ void pick(s32 [N, M] x, s32 [4] out, int c) {
  mdspan dims : [N, M, 7];
  int a = dims(c) + 1;
  parallel p by 1 : block
    parallel q by 1 : thread
      out.at(0) = a;
}
"""


@pytest.mark.parametrize("engine", ["interpreter", "sm_90a", "sm_100a"])
def test_a_dimension_index_known_at_run_time_on_the_host(tmp_path, engine):
    """`dims(c)` of the scalar parameter `c`: the host selects the element, and stops the call
    with a located error for an index outside the rank."""
    path = _write(tmp_path, "pick.co", RUN_TIME_INDEX)
    if engine == "interpreter":
        fn = choreo_py.interpret(path, function="pick", target="sm_90a")
    else:
        fn = choreo_py.emulate_program(path, target=engine)["pick"]
        if find_ptxas() is not None:
            ptxas(compile_file(path, "ptx", engine), engine)
    x = torch.zeros((3, 5), dtype=torch.int32)
    for c, want in ((0, 4), (1, 6), (2, 8)):
        out = torch.zeros(4, dtype=torch.int32)
        fn(x, out, c)
        assert out[0].item() == want
    with pytest.raises(choreo_py.ChoreoError) as e:
        fn(x, torch.zeros(4, dtype=torch.int32), 3)
    assert "the dimension index is out of range for a rank-3 value (c=3)" in e.value.message
    assert (e.value.loc.line, e.value.loc.col) == (4, 16)


def test_the_run_time_index_check_is_made_once_and_not_by_the_one_kernel_launcher(tmp_path):
    """The check is one host statement (an initialiser is built twice); the launcher of a
    single kernel checks sizes only, so a function with the check is a host program."""
    from choreo_py import frontend, ir
    from choreo_py.runtime.kernel import _checks_host_values
    from choreo_py.sema import build_function

    text = RUN_TIME_INDEX.replace("out.at(0) = a;", "out.at(0) = N;")
    fn = build_function(frontend.parse_text(text, "pick.co").functions[0])
    assert sum(isinstance(s, ir.Assert) for s in fn.body) == 1
    assert _checks_host_values(fn)


def test_a_dimension_index_known_at_run_time_in_a_kernel_is_refused_by_name(tmp_path):
    path = _write(tmp_path, "k.co", "__co__ void k(s32 [4] out, int c) {\n"
                  "  mdspan dims : [4, 8];\n  parallel p by 1 : block\n"
                  "    parallel q by 1 : thread\n      out.at(0) = dims(c);\n}\n")
    with pytest.raises(choreo_py.ChoreoError) as e:
        compile_file(path, "ptx", "sm_90a")
    assert "a dimension index known only at run time in a kernel" in e.value.message
    assert (e.value.loc.line, e.value.loc.col) == (5, 24)
