"""Host code as the reference's CPU model (co-mock) runs it.

co-mock (LancerLab/croqtile, tools/co-mock/mock_interp.cpp) runs a `__co__`
function's host statements as it runs a kernel's: DMA with futures and
`wait`, copies into fresh buffers and of tiles, MMAs, asserts; a parallel
region's instances each run on a snapshot of the host's scalars
(`MockMemory::Fork`), so a kernel's assignment to a host variable changes
its own copy, while a host `foreach` assigns the host's. Each program here
prints what those semantics give, worked out by hand in the comments.
"""
from __future__ import annotations

import pytest

import choreo_py
from choreo_py.driver import compile_file


def _run(tmp_path, capfd, src: str, fn: str = "main") -> list[str]:
    path = tmp_path / "p.co"
    path.write_text(src)
    getattr(choreo_py.interpret(str(path), target="sm_90a"), fn)()
    return capfd.readouterr().out.splitlines()


ASYNC_DMA = """
__co__ void main() {
  s32[8] a;
  s32[8] b;
  foreach i in [8] { a.at(i) = i * 3; }
  f = dma.copy.async a => b;
  mutable int n = 0;
  println("issued");
  wait f;
  println(b.at(5));
  foreach t in [4] {
    g = dma.copy.async a.chunkat(t) => local;
    wait g;
    n += g.data.at(1);
  }
  println(n);
  h = dma.copy a.subspan(2).at(3) => shared;
  println(h.data.at(0), h.data.at(1));
}
"""


def test_host_async_and_tiled_dma_with_futures(tmp_path, capfd):
    """a = 0, 3, ..., 21. b after the wait is a: b[5] = 15. Chunk t of 4 is a[2t], a[2t+1]:
    the sum of the second elements 3 + 9 + 15 + 21 = 48, assigned to the host's `n` by a
    host loop. subspan(2).at(3) is a[6], a[7] = 18, 21."""
    assert _run(tmp_path, capfd, ASYNC_DMA) == ["issued", "15", "48", "18 21"]


def test_a_future_waited_after_host_statements_between(tmp_path, capfd):
    """The region that starts the copy reaches its wait over a print between them."""
    src = """
__co__ void main() {
  f32[4] a;
  f32[4] b;
  foreach i in [4] { a.at(i) = 0.5f * i; }
  f = dma.copy.async a => b;
  println("between");
  wait f;
  println(b.at(3));
}
"""
    assert _run(tmp_path, capfd, src) == ["between", "1.5"]


HOST_SCALARS = """
__co__ void main() {
  s32[4] a;
  s32[4] o;
  mutable int s = 5;
  parallel p by 4 {
    s += p;
    o.at(p) = s;
  }
  println(s, o.at(0), o.at(3));
  foreach i in [4] { s += o.at(i) + a.at(i); }
  println(s);
  mutable int k = 1;
  parallel q by 1 {
    k = k * 10;
    println(k);
  }
  println(k);
}
"""


def test_host_scalars_assigned_in_parallel_regions_and_host_loops(tmp_path, capfd):
    """Instance p of the region adds p to its own copy of s = 5: o = 5, 6, 7, 8 and the
    host's s is still 5; the host loop adds o's sum 26 to it: 31. k's copy is 10 in the
    region and the host's k 1 after it."""
    assert _run(tmp_path, capfd, HOST_SCALARS) == ["5 5 8", "31", "10", "1"]


def test_a_host_variable_a_kernel_assigns_is_its_copy_in_the_ir(tmp_path):
    """The kernel's copy is a variable of its own, initialised from the argument; a host
    loop's copy is written back (`writes_back`), which the IR's reader reads back."""
    path = tmp_path / "p.co"
    path.write_text(HOST_SCALARS)
    text = compile_file(str(path), "ir", "sm_90a")
    assert "var s__local: s32 = s" in text
    assert text.count("writes_back s = s__local") == 1
    from choreo_py.ir import parse as ir_parse
    from choreo_py.ir.printer import print_module

    assert print_module(ir_parse.parse_module(text)).strip() == text.strip()


def test_host_mma(tmp_path, capfd):
    """A 16x16x16 MMA of ones by twos on the host: every element 16 * 1 * 2 = 32; then a
    second MMA into the same accumulator adds 32 again."""
    src = """
__co__ void main() {
  f16[16, 16] a;
  f16[16, 16] b;
  f32[16, 16] c;
  foreach i in [16] { foreach j in [16] { a.at(i, j) = 1.0f; b.at(i, j) = 2.0f; } }
  mc = mma.fill.f32 0.0f;
  ma = mma.load a;
  mb = mma.load b;
  mma.row.row mc, ma, mb;
  mma.store mc, c;
  println(c.at(0, 0), c.at(15, 7));
  mma.row.row mc, ma, mb;
  mma.store mc, c;
  println(c.at(3, 3));
}
"""
    assert _run(tmp_path, capfd, src) == ["32 32", "64"]


def test_host_asserts_on_values_and_elements(tmp_path, capfd):
    """An assert on a host variable or a tensor element is checked where it is written."""
    src = """
__co__ void main() {
  s32[2] a;
  mutable int c = 3;
  assert(c == 3, "c is three");
  a.at(1) = 7;
  assert(a.at(1) == 7, "a1 is seven");
  println("ok");
  c += 1;
  assert(c == 3, "c is still three");
}
"""
    with pytest.raises(choreo_py.ChoreoError, match="assertion failed: c is still three"):
        _run(tmp_path, capfd, src)
    assert capfd.readouterr().out.splitlines() == ["ok"]
    bad = src.replace("a.at(1) == 7", "a.at(1) == 8")
    with pytest.raises(choreo_py.ChoreoError, match="assertion failed: a1 is seven") as e:
        _run(tmp_path, capfd, bad)
    assert e.value.loc is not None and e.value.loc.line == 7


@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_host_regions_compile(tmp_path, target):
    """The host's regions have no PTX entry (the host runs them); the kernel that assigns
    its copy of a host variable is lowered."""
    path = tmp_path / "p.co"
    path.write_text(HOST_SCALARS.replace("println(k);\n  }", "}"))
    ptx = compile_file(str(path), "ptx", target)
    assert ptx.count(".entry") == 2


FRAGMENTS = """
__co__ void main() {
  f16[16, 16] a;
  f16[16, 16] b;
  f32[16, 16] c;
  foreach i in [16] { foreach j in [16] { a.at(i, j) = 1.0f; b.at(i, j) = 0.5f * j; } }
  parallel p by 1 : group {
    mc = mma.fill.f32 0.0f;
    ma = mma.load a;
    mb = mma.load b;
    mma.row.row mc, ma, mb;
    rs = mma.fill.f32 0.0f;
    reduce_sum(rs, mc, 1);
    println(rs.at(0));
    cm = mma.fill.f32 0.0f;
    reduce_max(cm, mc, 0);
    println(cm.at(3));
    mc.at(2, 5) = 7.5f;
    println(mc.at(2, 5), mc.at(2, 6));
    mma.store mc, c;
  }
  println(c.at(2, 5), c.at(0, 0));
}
"""


def test_fragment_elements_and_reduction_shapes_outside_apply(tmp_path, capfd):
    """b[n, k] = k / 2, so with a all ones mc[m, n] = sum over k of k / 2 = 60. A fill that
    no MMA shapes takes its reduction's shape: the row sums are 16 * 60 = 960, the column
    maxima 60. An element store outside `apply` changes that element alone (co-mock's
    fragments are whole arrays), which the store to c shows."""
    assert _run(tmp_path, capfd, FRAGMENTS) == ["960", "60", "7.5 60", "7.5 60"]


def test_a_fragment_element_store_outside_apply_is_refused_by_name(tmp_path):
    """A fragment's elements are spread over the threads' registers: a store to one of them
    outside `apply` is refused by name, at the store, by both targets."""
    src = """
__co__ void main(f16[16, 16] a, f16[16, 16] b, f32[16, 16] c) {
  parallel p by 1 : group {
    mc = mma.fill.f32 0.0f;
    ma = mma.load a;
    mb = mma.load b;
    mma.row.row mc, ma, mb;
    mc.at(0, 0) = 5.0f;
    mma.store mc, c;
  }
}
"""
    path = tmp_path / "p.co"
    path.write_text(src)
    for target in ("sm_90a", "sm_100a"):
        with pytest.raises(choreo_py.ChoreoError) as e:
            compile_file(str(path), "ptx", target)
        assert "a store to a fragment element outside 'apply'" in e.value.message
        assert e.value.loc is not None and e.value.loc.line == 8


def test_host_scalars_declared_from_tensor_elements(tmp_path, capfd):
    """`int v = a.at(0);` on the host declares a host scalar that later host statements and
    kernels read: v = 7; w = 7 + 1, then 10 after `w += 2`; the kernel stores w + p, so
    a[1] = 11; `x = a.at(1) * 2` declares x = 22."""
    src = """
__co__ void main() {
  s32[4] a;
  a.at(0) = 7;
  int v = a.at(0);
  println(v);
  mutable int w = a.at(0) + 1;
  w += 2;
  parallel p by 2 { a.at(p) = w + p; }
  println(a.at(1));
  x = a.at(1) * 2;
  println(x);
}
"""
    assert _run(tmp_path, capfd, src) == ["7", "11", "22"]


def test_host_double_buffering_with_placeholder_futures(tmp_path, capfd):
    """dma-advanced.md's pattern on the host: data[i] = 10 i, chunk y of 4 is data[4y..4y+3].
    Step y waits the chunk y - 1 and stores its last element 10 (4 (y - 1) + 3): 30, 70, 110.
    `select(k, ...)` takes its k-th future, as co-mock's Select does: #y % 2 = 0 gives lfB,
    which the last swap left naming chunk 2, so the epilogue stores 110 again."""
    src = """
__co__ void main() {
  s32[16] data;
  s32[4] out;
  foreach i in [16] { data.at(i) = i * 10; }
  with y in [4] {
    lfA = dma.copy.async data.chunkat(y) => shared;
    lfB = dma.any;
    foreach y(1:) {
      lfB = dma.copy.async data.chunkat(y) => shared;
      wait lfA;
      out.at(y - 1) = lfA.data.at(3);
      swap(lfA, lfB);
    }
    lf = select(#y % 2, lfB, lfA);
    wait lf;
    out.at(3) = lf.data.at(3);
  }
  println(out.at(0), out.at(1), out.at(2), out.at(3));
}
"""
    assert _run(tmp_path, capfd, src) == ["30 70 110 110"]


def test_run_runs_every_function_of_a_file_of_functions_without_arguments(tmp_path, capfd):
    """co-mock runs each top-level function in turn; so does `choreo run` when no function is
    named and none takes arguments (a file whose functions take some runs the first)."""
    from choreo_py.cli import main

    path = tmp_path / "two.co"
    path.write_text("__co__ void first() {\n  println(1);\n}\n"
                    "__co__ void second() {\n  mutable int k = 2;\n  k += 3;\n  println(k);\n}\n")
    assert main(["run", str(path)]) == 0
    printed = [x for x in capfd.readouterr().out.splitlines() if not x.startswith(("ran", "check"))]
    assert printed == ["1", "5"]
    path.write_text(path.read_text().replace("void second()", "void second(int x)"))
    assert main(["run", str(path)]) == 0
    printed = [x for x in capfd.readouterr().out.splitlines() if not x.startswith(("ran", "check"))]
    assert printed == ["1"]


SCAN = """
__co__ s32 [8] scan(s32 [4] a) {
  s32 [8] out;
  mutable int s = 5;
  parallel p by 4 : block {
    s += p;
    out.at(p) = s + a.at(p);
  }
  foreach i in [4] { s += out.at(i); }
  parallel q by 1 : block { out.at(4) = s; }
  return out;
}
"""


def _scan_want(a):
    """Block p's copy of s is 5 + p; the host's s is 5 until its loop adds out[0..3]."""
    import torch

    out = torch.zeros(8, dtype=torch.int32)
    out[:4] = 5 + torch.arange(4, dtype=torch.int32) + a.cpu()
    out[4] = 5 + int(out[:4].sum())
    return out


def test_kernel_copies_and_host_write_back_in_a_host_program(tmp_path):
    import torch

    path = tmp_path / "scan.co"
    path.write_text(SCAN)
    a = torch.tensor([3, -1, 4, 10], dtype=torch.int32)
    assert torch.equal(choreo_py.interpret(str(path), target="sm_90a").scan(a), _scan_want(a))
    for target in ("sm_90a", "sm_100a"):  # the GPU's host program, each launch's PTX emulated
        lib = choreo_py.emulate_program(str(path), target=target)
        assert torch.equal(lib.scan(a), _scan_want(a))


@pytest.mark.gpu
def test_kernel_copies_and_host_write_back_on_the_gpu(tmp_path):
    """The same host program on the GPU: the kernels' copies in registers, the host loop
    run on the host's copy of `out` (runtime/host_program.py) and its `s` written back."""
    import torch

    path = tmp_path / "scan.co"
    path.write_text(SCAN)
    a = torch.tensor([3, -1, 4, 10], dtype=torch.int32)
    out = choreo_py.load(str(path)).scan(a.cuda())
    assert torch.equal(out.cpu(), _scan_want(a))
