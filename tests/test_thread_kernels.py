"""Host programs and thread kernels: language forms, refusals by name, generated code.

Small programs written here, each run in the interpreter and (where it
compiles) assembled by ptxas; the reference compiler's programs and the
examples are in test_end2end.py.
"""
from __future__ import annotations

import pytest
import torch

import choreo_py
from choreo_py.diagnostics import ChoreoError
from choreo_py.driver import compile_file
from choreo_py.runtime.build import find_ptxas, ptxas


def _write(tmp_path, name: str, src: str) -> str:
    path = tmp_path / name
    path.write_text(src)
    return str(path)


def _assembles(path: str) -> None:
    if find_ptxas() is None:
        pytest.skip("ptxas (CUDA 12.8+) is not on PATH")
    for target in ("sm_90a", "sm_100a"):
        ptxas(compile_file(path, "ptx", target), target)


TWO_D = """
__co__ s32 [4, 32] idx2(s32 [4, 32] a) {
  s32 [4, 32] out;
  parallel p by 1 : block
    parallel {x, y} by [4, 32] : thread
      out.at(x, y) = a.at(x, y) * 10 + x;
  return out;
}
"""


def test_two_dimensional_thread_region(tmp_path):
    path = _write(tmp_path, "two_d.co", TWO_D)
    a = torch.randint(0, 9, (4, 32), dtype=torch.int32)
    out = choreo_py.interpret(path, target="sm_90a").idx2(a)
    assert torch.equal(out, a * 10 + torch.arange(4, dtype=torch.int32).view(4, 1))
    _assembles(path)


ZFILL = """
__co__ s32 [4, 8] pad_rows(s32 [3, 8] a) {
  s32 [4, 8] out {7};
  parallel p by 1 : block
    parallel q by 8 : thread {
      shared s32 [4, 8] buf;
      dma.copy a.subspan(3, 8) => buf.subspan(4, 8);
      dma.copy buf => out;
    }
  return out;
}
"""


def test_a_smaller_tile_is_zero_filled_and_initialisers_fill(tmp_path):
    path = _write(tmp_path, "zfill.co", ZFILL)
    a = torch.randint(1, 9, (3, 8), dtype=torch.int32)
    out = choreo_py.interpret(path, target="sm_90a").pad_rows(a)
    assert torch.equal(out[:3], a)
    assert torch.all(out[3] == 0)
    _assembles(path)


SEVERAL = """
__co__ f32 [N] twice(f32 [N] a) {
  f32 [a.span] b;
  f32 [a.span] c;
  parallel p by N / 32, q by 32
    b.at(p * 32 + q) = a.at(p * 32 + q) * 2.0f;
  parallel p by N / 32, q by 32
    c.at(p * 32 + q) = b.at(p * 32 + q) + 1.0f;
  return c;
}

__co__ f32 [N] neg(f32 [N] a) {
  f32 [a.span] b;
  parallel p by N / 32, q by 32
    b.at(p * 32 + q) = -a.at(p * 32 + q);
  return b;
}
"""


def test_several_kernels_and_functions_in_one_file(tmp_path):
    path = _write(tmp_path, "several.co", SEVERAL)
    lib = choreo_py.interpret(path, target="sm_90a")
    a = torch.randn(64)
    assert torch.equal(lib.twice(a), a * 2 + 1)
    assert torch.equal(lib["neg"](a), -a)
    assert set(lib.functions) == {"twice", "neg"}
    ptx = compile_file(path, "ptx", "sm_90a")
    assert ptx.count(".visible .entry") == 3
    _assembles(path)


@pytest.mark.parametrize("src,message", [
    ("__co__ s32[2] f() {\n  s32[2] a;\n  parallel bx by 2 : block<cooperative> {\n"
     "    parallel t by 32 : thread { sync.barrier : block; }\n    a.at(bx) = 1;\n  }\n"
     "  return a;\n}\n", "a grid-wide barrier inside a parallel region"),
    ("__co__ auto f(f6_e2m3 [4] a) {\n  f6_e2m3 [4] o;\n  parallel p by 1, q by 4\n"
     "    o.at(q) = a.at(q) + a.at(q);\n  return o;\n}\n",
     "converting f6_e2m3 to or from f32 needs the fp6/fp4 conversions of sm_100a"),
    ("__co__ auto f(f8_ue8m0 [4] a) {\n  f8_ue8m0 [4] o;\n  parallel p by 1, q by 4\n"
     "    o.at(q) = a.at(q);\n  return o;\n}\n", "the element type 'f8_ue8m0'"),
])
def test_refused_by_name(tmp_path, src, message):
    path = _write(tmp_path, "refused.co", src)
    with pytest.raises(ChoreoError, match=message) as info:
        compile_file(path, "ptx", "sm_90a")
    assert info.value.diagnostics[0].loc is not None


def test_generated_code_is_deterministic(tmp_path):
    path = _write(tmp_path, "several.co", SEVERAL)
    assert compile_file(path, "ptx", "sm_100a") == compile_file(path, "ptx", "sm_100a")


def test_transpose_and_pad_round_trip_through_the_ir_text():
    from choreo_py import frontend, targets
    from choreo_py.ir import parse as ir_parse, printer as ir_printer
    from choreo_py.host.specialize import Functions

    from end2end_refs import END2END, need_file

    funcs = Functions(frontend.parse_file(need_file(f"{END2END}/tiled_dma.co")), targets.get("sm_90a"),
                      strict=True)
    for name in ("foo20", "foo22", "foo24"):
        text = ir_printer.print_module(funcs.module(funcs.get(name)))
        assert ".transp<" in text or ".pad<" in text
        assert ir_printer.print_module(ir_parse.parse_module(text)) == text


def test_atomic_add_round_trips_and_lowers_to_red():
    from choreo_py.ir import parse as ir_parse, printer as ir_printer

    from end2end_refs import END2END, need_file

    path = need_file(f"{END2END}/atomic_add.co")
    text = compile_file(path, "ir", "sm_90a")
    assert "atomic_add counts" in text
    assert ir_printer.print_module(ir_parse.parse_module(text)) == text
    assert "red.shared.add.s32" in compile_file(path, "ptx", "sm_90a")


def test_interpret_with_a_tensor_dict_allocates_the_result(tmp_path):
    path = _write(tmp_path, "two_d.co", TWO_D)
    a = torch.randint(0, 9, (4, 32), dtype=torch.int32)
    out = choreo_py.interpret(path, {"a": a}, target="sm_90a")
    assert torch.equal(out["out"], a * 10 + torch.arange(4, dtype=torch.int32).view(4, 1))


def test_load_gives_a_library_of_functions_and_raises_real_errors(tmp_path):
    from end2end_refs import END2END, need_file

    lib = choreo_py.load(need_file(f"{END2END}/integral_types.co"), target="sm_90a")
    assert "ele_add_s32" in lib.functions and "ele_add_u6" in lib.functions
    assert choreo_py.load(need_file(f"{END2END}/copy.co"), target="sm_90a",
                          function="dma_add").name == "dma_add"
    bad = _write(tmp_path, "bad.co", TWO_D.replace("a.at(x, y) * 10", "a.at(x) * 10"))
    with pytest.raises(ChoreoError, match="takes 2 indices"):
        choreo_py.load(bad, target="sm_90a")


DIVERGENT_COPY = """
__co__ s32 [64] f(s32 [64] a) {
  s32 [64] out;
  parallel p by 1 : block
    parallel q by 64 : thread {
      shared s32 [64] buf;
      if (q < 32) {
        dma.copy a => buf;
      }
      out.at(q) = buf.at(q);
    }
  return out;
}
"""


def test_a_barrier_under_a_thread_dependent_condition_is_refused(tmp_path):
    # every thread of the block must reach a cooperative copy's barriers, or the block hangs
    path = _write(tmp_path, "divergent.co", DIVERGENT_COPY)
    with pytest.raises(ChoreoError, match="under a condition that may differ between threads"):
        compile_file(path, "ptx", "sm_90a")
