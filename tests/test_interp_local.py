"""`local` buffers in the interpreter: each thread instance has its own copy, as each GPU
thread has (interp/memory.py, Memory.own). A body that would run as lanes (lanes.py) runs
one thread per instance when it touches a local buffer; a copy `=> local` lands in the
copying instance's buffer."""
from __future__ import annotations

import pytest
import torch

import choreo_py
from choreo_py.interp import InterpError

PER_THREAD = """
__co__ s32 [4, 32] per_thread(s32 [4, 32] a) {
  s32[a.span] out;
  parallel p by 4, q by 32 {
    local s32 [8] buf;
    foreach i in [8]
      buf.at(i) = a.at(p, q) * 10 + i;
    mutable s32 t = 0;
    foreach i in [8]
      t += buf.at(i);
    out.at(p, q) = t;
  }
  return out;
}
"""

COPIES = """
__co__ s32 [2, 5, 16] copies(s32 [2, 5, 16] a) {
  s32[a.span] out;
  parallel p by 2, q by 16 {
    l = dma.copy a.chunkat(p, _, q) => local;
    local s32 [l.span] twice;
    foreach x in l.span
      twice.at(x) = l.data.at(x) * 2;
    dma.copy twice => out.chunkat(p, _, q);
  }
  return out;
}
"""

OUT_OF_BOUNDS = """
__co__ s32 [32] oob(s32 [32] a) {
  s32[a.span] out;
  parallel q by 32 : thread {
    local s32 [4] buf;
    buf.at(q / 8) = a.at(q);
    out.at(q) = buf.at(q / 8 + (q == 31 ? 1 : 0));
  }
  return out;
}
"""


NESTED = """
__co__ s32 [2, 32] nested(s32 [2, 32] a) {
  s32[a.span] out;
  parallel p by 2 : block {
    local s32 [4] buf;
    buf.at(0) = a.at(p, 0) * 100;
    parallel q by 32 : thread {
      out.at(p, q) = buf.at(0) + a.at(p, q);
    }
  }
  return out;
}
"""


def _run(tmp_path, src, name, *args):
    path = tmp_path / f"{name}.co"
    path.write_text(src)
    return choreo_py.interpret(str(path), function=name, target="sm_90a")(*args)


def test_each_instance_has_its_own_local_buffer(tmp_path):
    # one buffer per block would be a race between the 32 instances (or, run in turn, give
    # every instance the last one's values)
    a = torch.arange(128, dtype=torch.int32).reshape(4, 32)
    out = _run(tmp_path, PER_THREAD, "per_thread", a)
    assert torch.equal(out, a * 80 + 28)


def test_a_copy_into_local_lands_in_the_instances_buffer(tmp_path):
    a = torch.randint(-10, 10, (2, 5, 16), generator=torch.Generator().manual_seed(1),
                      dtype=torch.int32)
    out = _run(tmp_path, COPIES, "copies", a)
    assert torch.equal(out, a * 2)


def test_an_instances_buffer_is_bounds_checked_and_named_for_it(tmp_path):
    with pytest.raises(InterpError) as e:
        _run(tmp_path, OUT_OF_BOUNDS, "oob", torch.arange(32, dtype=torch.int32))
    assert "index 4 outside extent 4" in str(e.value) and "buf{q=31}" in str(e.value)


def test_an_inner_instance_starts_from_what_the_outer_code_stored(tmp_path):
    # every thread ran the block-level store on its own copy: each q sees its block's value
    a = torch.arange(64, dtype=torch.int32).reshape(2, 32)
    out = _run(tmp_path, NESTED, "nested", a)
    assert torch.equal(out, a[:, :1] * 100 + a)


@pytest.mark.emu
def test_the_emulated_ptx_agrees(tmp_path):
    path = tmp_path / "nested.co"
    path.write_text(NESTED)
    a = torch.arange(64, dtype=torch.int32).reshape(2, 32)
    out = choreo_py.emulate_program(str(path), target="sm_90a").nested(a)
    assert torch.equal(out, a[:, :1] * 100 + a)
