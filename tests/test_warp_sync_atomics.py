"""Thread kernels: `sync.barrier : group` / `: thread` (the warp's barrier) and the
`__atomic_*` built-ins.

Each program runs in the interpreter and, for both targets, as PTX in the emulator,
against a value computed here with torch; ptxas assembles both targets' PTX.
"""
from __future__ import annotations

import pytest
import torch

import choreo_py
from choreo_py.diagnostics import ChoreoError
from choreo_py.driver import compile_file
from choreo_py.runtime.build import find_ptxas, ptxas

TARGETS = ("sm_90a", "sm_100a")


def _write(tmp_path, name: str, src: str) -> str:
    path = tmp_path / name
    path.write_text(src)
    return str(path)


def _emulated(path: str, target: str, grid: int, threads: int, smem: int,
              tensors: dict[str, torch.Tensor], params: list[str]) -> dict:
    """The target's PTX of `path` run in the emulator on copies of `tensors`; each pointer
    parameter `ptr_<name>` is the tensor of that name."""
    from choreo_py.emu.api import emulate_ptx

    ptx = compile_file(path, "ptx", target)
    end = ptx.rindex("}")
    ptx = ptx[:end] + "\tret;\n}\n"  # the emulator stops at an exit, not at the entry's end
    dtype = {torch.int32: "s32", torch.int64: "s64", torch.float32: "f32"}
    desc = {"grid": [grid, 1, 1], "block": [threads, 1, 1], "shared_bytes": smem,
            "params": [{"name": f"ptr_{p}", "ptr": p} for p in params],
            "tensors": {n: {"dtype": dtype[t.dtype], "shape": list(t.shape)}
                        for n, t in tensors.items()}}
    copies = {n: t.clone() for n, t in tensors.items()}
    res = emulate_ptx(ptx, desc, copies)
    return res if isinstance(res, dict) and res else copies


def _assembles(path: str) -> None:
    if find_ptxas() is None:
        pytest.skip("ptxas (CUDA 12.8+) is not on PATH")
    for target in TARGETS:
        ptxas(compile_file(path, "ptx", target), target)


WARP_REVERSE = """
__co__ s32 [64] warp_rev(s32 [64] a) {
  s32 [64] out;
  parallel p by 2 : block {
    parallel q by 32 : thread {
      shared s32 [32] s;
      s.at(q) = a.at(p * 32 + q);
      sync.barrier : LEVEL;
      out.at(p * 32 + q) = s.at(31 - q);
    }
  }
  return out;
}
"""


@pytest.mark.parametrize("level", ["group", "thread"])
def test_a_warp_barrier_orders_the_warps_shared_accesses(tmp_path, level):
    path = _write(tmp_path, "warp.co", WARP_REVERSE.replace("LEVEL", level))
    a = torch.randint(-1000, 1000, (64,), dtype=torch.int32)
    want = a.view(2, 32).flip(1).reshape(64)
    assert torch.equal(choreo_py.interpret(path, target="sm_90a").warp_rev(a), want)
    for target in TARGETS:
        assert "bar.warp.sync -1;" in compile_file(path, "ptx", target)
        got = _emulated(path, target, 2, 32, 128, {"a": a, "out": torch.zeros(64, dtype=torch.int32)},
                        ["a", "out"])
        assert torch.equal(got["out"], want), target
    _assembles(path)


def test_the_interpreter_keeps_a_race_across_warps(tmp_path):
    """A warp barrier does not order two warps: the interpreter reports the race."""
    src = WARP_REVERSE.replace("LEVEL", "group").replace("by 32 : thread", "by 64 : thread") \
        .replace("s32 [32] s", "s32 [64] s").replace("31 - q", "63 - q").replace("p * 32 + q", "q")
    path = _write(tmp_path, "race.co", src)
    with pytest.raises(Exception, match="data race on s"):
        choreo_py.interpret(path, target="sm_90a").warp_rev(torch.zeros(64, dtype=torch.int32))


def test_a_warp_barrier_in_part_of_a_warp_is_refused(tmp_path):
    src = WARP_REVERSE.replace("LEVEL", "group").replace(
        "parallel q by 32 : thread {", "parallel r by 32 : thread {} parallel q by 16 : thread {")
    path = _write(tmp_path, "part.co", src)
    with pytest.raises(ChoreoError, match="a warp barrier inside a parallel region that covers "
                       "part of a warp") as e:
        compile_file(path, "ptx", "sm_90a")
    assert "part.co:5:34:" in str(e.value)


ATOMICS = """
__co__ s32 [11, 8] atoms(s32 [64] a) {
  s32 [11, 8] out {0};
  parallel p by 1 : block {
    shared s32 [9, 8] s;
    parallel q by 64 : thread {
      if (q < 8) {
        s.at(0, q) = 0; s.at(1, q) = 0; s.at(2, q) = 1000000; s.at(3, q) = -1000000;
        s.at(4, q) = -1; s.at(5, q) = 0; s.at(6, q) = 0; s.at(7, q) = q; s.at(8, q) = q;
      }
      sync.barrier : block;
      int j = q % 8;
      __atomic_add(s.at(0, j), a.at(q));
      __atomic_sub(s.at(1, j), a.at(q));
      __atomic_min(s.at(2, j), a.at(q));
      __atomic_max(s.at(3, j), a.at(q));
      __atomic_and(s.at(4, j), a.at(q));
      __atomic_or(s.at(5, j), a.at(q));
      __atomic_xor(s.at(6, j), a.at(q));
      if (q < 8) {
        __atomic_exch(s.at(7, j), a.at(q));
        __atomic_cas(s.at(8, j), q - q % 2, a.at(q));
      }
      __atomic_add(out.at(9, j), 1);
      __atomic_max(out.at(10, j), a.at(q));
      sync.barrier : block;
      if (q < 8) {
        foreach r in [9] { out.at(r, q) = s.at(r, q); }
      }
    }
  }
  return out;
}
"""


def _atomics_ref(a: torch.Tensor) -> torch.Tensor:
    g = a.view(8, 8)  # g[i, j] = a[8 i + j]: the values lane j's column receives
    out = torch.zeros(11, 8, dtype=torch.int64)
    out[0] = g.sum(0)
    out[1] = -g.sum(0)
    out[2] = torch.minimum(g.min(0).values, torch.tensor(1000000))
    out[3] = torch.maximum(g.max(0).values, torch.tensor(-1000000))
    for j in range(8):
        col = [int(v) for v in g[:, j]]
        andv, orv, xorv = -1, 0, 0
        for v in col:
            andv, orv, xorv = andv & v, orv | v, xorv ^ v
        out[4, j], out[5, j], out[6, j] = andv, orv, xorv
        out[7, j] = col[0]  # exch by lane j alone
        out[8, j] = col[0] if j % 2 == 0 else j  # cas: compare j - j % 2 matches even j
    out[9] = 8
    out[10] = torch.maximum(g.max(0).values, torch.tensor(0))
    return out.to(torch.int32)


def test_the_atomic_builtins_against_torch(tmp_path):
    path = _write(tmp_path, "atoms.co", ATOMICS)
    torch.manual_seed(0)
    a = torch.randint(-5000, 5000, (64,), dtype=torch.int32)
    want = _atomics_ref(a)
    assert torch.equal(choreo_py.interpret(path, target="sm_90a").atoms(a), want)
    for target in TARGETS:
        got = _emulated(path, target, 1, 64, 512,
                        {"a": a, "out": torch.zeros(11, 8, dtype=torch.int32)}, ["a", "out"])
        assert torch.equal(got["out"], want), target
    _assembles(path)


TYPED = """
__co__ T [8] k(T [64] a) {
  T [8] out {0};
  parallel p by 1 : block
    parallel q by 64 : thread {
      __atomic_OP(out.at(q % 8), a.at(q));
    }
  return out;
}
"""


@pytest.mark.parametrize("ty,op", [("s64", "add"), ("s64", "max"), ("s64", "sub"),
                                   ("s64", "or"), ("f32", "add")])
def test_atomics_on_other_element_types(tmp_path, ty, op):
    path = _write(tmp_path, "typed.co", TYPED.replace("T ", f"{ty} ").replace("OP", op))
    torch.manual_seed(1)
    if ty == "f32":  # integral values: the sum is exact in any order
        a = torch.randint(-100, 100, (64,)).float()
    else:
        a = torch.randint(-(1 << 40), 1 << 40, (64,), dtype=torch.int64)
    g = a.view(8, 8)
    zero = torch.zeros(8, dtype=a.dtype)
    want = {"add": lambda: g.sum(0), "sub": lambda: -g.sum(0),
            "max": lambda: torch.maximum(g.max(0).values, zero),
            "or": lambda: g[0] | g[1] | g[2] | g[3] | g[4] | g[5] | g[6] | g[7]}[op]()
    assert torch.equal(choreo_py.interpret(path, target="sm_90a").k(a), want)
    for target in TARGETS:
        got = _emulated(path, target, 1, 64, 0, {"a": a, "out": torch.zeros(8, dtype=a.dtype)},
                        ["a", "out"])
        assert torch.equal(got["out"], want), target
    _assembles(path)


@pytest.mark.parametrize("op,ty", [("min", "f32"), ("and", "f32"), ("cas", "f32")])
def test_an_atomic_on_an_element_type_cuda_lacks_is_refused(tmp_path, op, ty):
    args = "out.at(q % 8), 0.0f, a.at(q)" if op == "cas" else "out.at(q % 8), a.at(q)"
    src = TYPED.replace("T ", f"{ty} ").replace("__atomic_OP(out.at(q % 8), a.at(q))",
                                                 f"__atomic_{op}({args})")
    path = _write(tmp_path, "refused.co", src)
    with pytest.raises(ChoreoError, match=f"'__atomic_{op}' on f32 elements is not supported"):
        compile_file(path, "ptx", "sm_90a")


def test_the_atomics_and_the_warp_barrier_round_trip_through_the_ir_text(tmp_path):
    from choreo_py.ir import parse as ir_parse, printer as ir_printer

    path = _write(tmp_path, "atoms.co", ATOMICS.replace("sync.barrier : block;\n      int j",
                                                        "sync.barrier : group;\n      int j"))
    text = compile_file(path, "ir", "sm_90a")
    assert "atomic_cas s<" in text and "atomic_xor s<" in text and "sync.warp" in text
    assert ir_printer.print_module(ir_parse.parse_module(text)) == text


OLD_VALUES = """
__co__ s32 [130] olds(s32 [64] a) {
  s32 [130] out {0};
  parallel p by 1 : block {
    shared s32 [2] s;
    parallel q by 64 : thread {
      if (q == 0) {
        s.at(0) = 0; s.at(1) = 5;
      }
      sync.barrier : block;
      mutable s32 old = __atomic_add(s.at(0), 1);
      out.at(q) = old;
      mutable s32 o2 = __atomic_max(s.at(1), a.at(q));
      out.at(64 + q) = o2;
      sync.barrier : block;
      if (q == 0) {
        out.at(128) = s.at(0); out.at(129) = s.at(1);
      }
    }
  }
  return out;
}
"""


def test_an_atomics_old_value_in_a_variable(tmp_path):
    """`mutable s32 old = __atomic_add(...)`: each thread gets the value before its own
    update: the 64 increments hand out 0..63 once each, in any order."""
    path = _write(tmp_path, "olds.co", OLD_VALUES)
    a = torch.randperm(64, dtype=torch.int32) * 3
    interp = choreo_py.interpret(path, target="sm_90a").olds(a)
    # The interpreter updates in lane order: lane q sees q increments and the running max.
    assert torch.equal(interp[:64], torch.arange(64, dtype=torch.int32))
    run_max = torch.cummax(torch.cat([torch.tensor([5]), a[:-1]]).clamp(min=5), 0).values
    assert torch.equal(interp[64:128], run_max.to(torch.int32))
    for target in TARGETS:
        assert "atom.shared.add.s32" in compile_file(path, "ptx", target)
        got = _emulated(path, target, 1, 64, 64, {"a": a, "out": torch.zeros(130, dtype=torch.int32)},
                        ["a", "out"])["out"]
        assert torch.equal(got[:64].sort().values, torch.arange(64, dtype=torch.int32)), target
        assert got[128] == 64 and got[129] == int(a.max()), target
        assert bool((got[64:128] >= 5).all()) and bool((got[64:128] <= a.max()).all()), target
    assert interp[128] == 64 and interp[129] == int(a.max())
    _assembles(path)


@pytest.mark.parametrize("stmt,name", [("sync.barrier : group;", "a warp barrier (sync.barrier "
                                        ": group)"), ("yield;", "a yield")])
@pytest.mark.parametrize("target", TARGETS)
def test_a_warp_barrier_or_yield_in_an_mma_kernel_is_refused_by_name(tmp_path, stmt, name,
                                                                     target):
    import os

    src = open(os.path.join(os.path.dirname(__file__), "..", "examples", "gemm.co")).read()
    lines = src.splitlines(keepends=True)
    at = next(i for i, l in enumerate(lines) if "acc = mma.fill.f32" in l)
    lines.insert(at, "        " + stmt + "\n")
    path = _write(tmp_path, "gemm.co", "".join(lines))
    if stmt == "yield;":
        # a yield makes the consumer roles leave the kernel before they trigger `empty`: the
        # pipeline check now reports the producer's never-completed wait first, located there
        wait_at = next(i for i, l in enumerate(lines) if "wait empty.at(order);" in l)
        with pytest.raises(ChoreoError, match=f"gemm.co:{wait_at + 1}:11: error: pipeline check: "
                           r"role \(p == 0\) \[p=0\] waits empty.at\(order\).*never completed"):
            compile_file(path, "ptx", target)
        return
    with pytest.raises(ChoreoError, match=f"gemm.co:{at + 1}:9: error: {name} is not lowered "
                       f"for {target} yet".replace("(", r"\(").replace(")", r"\)")):
        compile_file(path, "ptx", target)
