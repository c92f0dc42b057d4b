"""Placeholder futures (`tma.any`), `swap` / `rotate` of futures, and TMA futures another
role waits for: sema's forms (sema/rotations.py, sema/role_futures.py), checked in the
interpreter and by running the emitted PTX of both targets in the emulator against torch.

Double-buffered kernels without MMAs (end2end/tma_v2.co) are thread kernels: their TMA
copies move tiles with cooperative loads (lowering/core/simt.py); a kernel of roles keeps
real TMA loads, published by the event the rewrite adds (codegen/cute/tma_barrier_init.co).
"""
from __future__ import annotations

import pytest
import torch

import choreo_py
from choreo_py import frontend, ir, sema
from choreo_py.diagnostics import ChoreoError
from choreo_py.driver import compile_file
from choreo_py.runtime.build import ptxas

from conftest import need_shared
from test_host_programs import emulate_function

TARGETS = ["sm_90a", "sm_100a"]

TRIPLE = """
__co__ auto tri(f32 [6, 16, 128] l) {
  f32 [l.span] output;
  parallel p by 32 : block {
    with k in [8] {
      f0 = tma.copy.async l.chunkat(_, k, p) => shared;
      f1 = tma.any;
      f2 = tma.any;
      foreach k(1:) {
        f1 = tma.copy.async l.chunkat(_, k, p) => shared;
        wait f0;
        shared f32 [f0.span] t;
        foreach i in [f0.span]
          t.at(i) = f0.data.at(i) * 2.0f;
        tma.copy t => output.chunkat(_, k - 1, p);
        rotate(f0, f1, f2);
      }
      wait f0;
      tma.copy f0.data => output.chunkat(_, k(-1), p);
    }
  }
  return output;
}
"""

RELAY = """
__co__ void relay(global f16 [M, 128] lhs, global f16 [M, 128] out) {
  parallel block_m by cdiv(M, 64) : block
  parallel p by 2 : group-4 {
    lhs_f = tma.any;
    inthreads(p == 0) {
      lhs_f = tma.copy.async lhs.subspan(64, 128).at(block_m, 0) => shared;
    }
    inthreads(p == 1) {
      wait lhs_f;
      tma.copy lhs_f.data => out.subspan(64, 128).at(block_m, 0);
    }
  }
}
"""


def _write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def _tri_want(x):
    """Chunks 0..6 along dimension 1 doubled (computed on f0 before the rotation), chunk 7
    as loaded (the epilogue's copy)."""
    want = x * 2
    want[:, 14:16] = x[:, 14:16]
    return want


def _ir(path, target="sm_90a"):
    from choreo_py.passes.pipeline import ir_of_file
    from choreo_py import targets

    return ir_of_file(path, targets.get(target))


def test_rotated_futures_share_one_buffer_array(tmp_path):
    path = _write(tmp_path, "tri.co", TRIPLE)
    k = _ir(path).functions[0].kernels[0]
    buf = k.buffer("f0__shared")
    assert buf is not None and buf.count == 3
    assert ir.is_thread_kernel(k)
    loads = [s for s in ir.walk(k.body) if isinstance(s, ir.TmaLoad)]
    assert len(loads) == 2 and all(s.future is None for s in loads)  # complete when issued
    assert all(s.dst.slot is not None for s in loads)
    steps = [s for s in ir.walk(k.body) if isinstance(s, ir.Assign) and s.name == "__rot_f0"]
    assert len(steps) == 1


def test_rotate_in_the_interpreter(tmp_path):
    path = _write(tmp_path, "tri.co", TRIPLE)
    x = torch.rand(6, 16, 128, generator=torch.Generator().manual_seed(1))
    got = choreo_py.interpret(path, function="tri", target="sm_90a")(x)
    assert torch.equal(got, _tri_want(x))


@pytest.mark.emu
@pytest.mark.parametrize("target", TARGETS)
def test_rotate_emulated(tmp_path, target):
    path = _write(tmp_path, "tri.co", TRIPLE)
    x = torch.rand(6, 16, 128, generator=torch.Generator().manual_seed(2))
    got, launches = emulate_function(path, "tri", (x,), target)
    assert launches == ["tri"]
    assert torch.equal(got, _tri_want(x))


def test_the_double_buffered_corpus_program(tmp_path):
    path = str(need_shared("corpus", "tests", "gpu", "end2end", "tma_v2.co"))
    g = torch.Generator().manual_seed(3)
    a, b = (torch.rand(6, 16, 128, generator=g) * 20 - 10 for _ in range(2))
    assert torch.equal(choreo_py.interpret(path, function="tma_ab_buffer", target="sm_90a")(a, b),
                       a + b)


@pytest.mark.emu
@pytest.mark.parametrize("target", TARGETS)
def test_the_double_buffered_corpus_program_emulated(target):
    path = str(need_shared("corpus", "tests", "gpu", "end2end", "tma_v2.co"))
    g = torch.Generator().manual_seed(4)
    a, b = (torch.rand(6, 16, 128, generator=g) * 20 - 10 for _ in range(2))
    got, _ = emulate_function(path, "tma_ab_buffer", (a, b), target)
    assert torch.equal(got, a + b)


@pytest.mark.emu
def test_the_fp8_double_buffer_emulated():
    path = str(need_shared("corpus", "tests", "gpu", "end2end", "tma_f32.co"))
    g = torch.Generator().manual_seed(5)
    a, b = ((torch.rand(16, 16, 128, generator=g) * 4 - 2).to(torch.float8_e4m3fn)
            for _ in range(2))
    got, _ = emulate_function(path, "tma_ab_buffer_fp8", (a, b), "sm_90a")
    # Its main's tolerance. (The thread lowering adds the widened values in f32; the
    # interpreter rounds the f8 sum to f8 first, as the IR's types say: within 0.125 here.)
    assert (got - (a.float() + b.float())).abs().max().item() <= 0.2


def test_a_future_another_role_waits_becomes_an_event(tmp_path):
    path = _write(tmp_path, "relay.co", RELAY)
    k = _ir(path).functions[0].kernels[0]
    assert [e.name for e in k.events] == ["__loaded_lhs_f"]
    triggers = [s for s in ir.walk(k.body) if isinstance(s, ir.Trigger)]
    assert [t.after for t in triggers] == [["lhs_f"]]
    waits = [s for s in ir.walk(k.body) if isinstance(s, ir.Wait)]
    assert [[x.event for x in w.items] for w in waits] == [["__loaded_lhs_f"]]


def test_relay_in_the_interpreter(tmp_path):
    path = _write(tmp_path, "relay.co", RELAY)
    a = torch.randn(128, 128, generator=torch.Generator().manual_seed(6)).half()
    out = torch.zeros_like(a)
    choreo_py.interpret(path, function="relay", target="sm_90a")(a, out)
    assert torch.equal(out, a)


@pytest.mark.emu
@pytest.mark.parametrize("target", TARGETS)
def test_relay_emulated(tmp_path, target):
    path = _write(tmp_path, "relay.co", RELAY)
    a = torch.randn(128, 128, generator=torch.Generator().manual_seed(7)).half()
    got, _ = emulate_function(path, "relay", (a, torch.zeros_like(a)), target)
    assert torch.equal(got["out"], a)


@pytest.mark.ptxas
@pytest.mark.parametrize("target", TARGETS)
def test_tma_barrier_init_assembles(target):
    path = str(need_shared("corpus", "tests", "gpu", "codegen", "cute", "tma_barrier_init.co"))
    text = compile_file(path, "ptx", target)
    assert "cp.async.bulk.tensor" in text and "mbarrier" in text
    _, log = ptxas(text, target, verbose=True)
    assert "error" not in log.lower()


def _refusal(tmp_path, body: str) -> ChoreoError:
    path = _write(tmp_path, "bad.co", body)
    with pytest.raises(ChoreoError) as e:
        sema.build_module(frontend.parse_file(path))
    assert e.value.loc is not None
    return e.value


def test_a_swap_before_any_copy_is_refused_by_name(tmp_path):
    e = _refusal(tmp_path, """
__co__ void k(f32 [4, 8] x) {
  parallel p by 1 : block {
    a = tma.any;
    b = tma.any;
    swap(a, b);
  }
}
""")
    assert "'swap' of futures no copy into shared memory was assigned to yet" in e.message


def test_a_cross_role_wait_in_a_loop_is_refused_by_name(tmp_path):
    e = _refusal(tmp_path, RELAY.replace("      wait lhs_f;\n",
                                         "      foreach i in [2] { wait lhs_f; }\n"))
    assert "waiting inside a loop or branch for 'lhs_f', which another role loads" in e.message


def test_a_positive_offset_form_is_refused_by_name(tmp_path):
    e = _refusal(tmp_path, TRIPLE.replace("k(-1)", "k(1)"))
    assert "the offset form of a bounded variable other than 'x(-n)'" in e.message
