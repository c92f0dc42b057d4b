"""The IR parser reads the printer's format back: goldens round-trip, the parsed IR is the
IR sema and the passes built (types included), and a backend lowers it to the same PTX."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from choreo_py import ir, targets
from choreo_py.diagnostics import ChoreoError, take_warnings
from choreo_py.passes import pipeline
from choreo_py.driver import ir_of_file
from choreo_py.ir.parse import IRParseError, parse_module
from choreo_py.ir.printer import print_module
from choreo_py.runtime import build

ROOT = Path(__file__).resolve().parent.parent
GOLDEN_IR = sorted((ROOT / "tests" / "golden" / "ir").rglob("*.ir.txt"))  # sm100/ too
PROGRAMS = sorted((ROOT / "examples").glob("*.co")) + sorted((ROOT / "tests" / "co").glob("*.co")) \
    + sorted((ROOT / "bench" / "variants").glob("*.co"))
TARGETS = ("sm_90a", "sm_100a")


def _plain(x):
    """A node as nested (kind, fields) without source locations, which the text omits, and
    without a kernel's `assumes` (the function's asserts copied for the static checks,
    which the printer does not write yet: the text keeps the asserts themselves)."""
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return (type(x).__name__, {f.name: _plain(getattr(x, f.name)) for f in dataclasses.fields(x)
                                   if f.name not in ("loc", "source", "assumes")})
    if isinstance(x, (list, tuple)):
        return [_plain(y) for y in x]
    return x


@pytest.mark.parametrize("golden", GOLDEN_IR, ids=lambda p: p.parent.name + "/" + p.name)
def test_golden_ir_round_trips(golden):
    text = golden.read_text()
    assert print_module(parse_module(text)) == text


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.name)
def test_parsed_ir_is_the_built_ir(program, target, monkeypatch):
    monkeypatch.chdir(ROOT)
    take_warnings()
    # lenient, as the interpreter builds it: a program the pipeline check refuses has IR too
    try:
        module = pipeline.ir_of_file(str(program.relative_to(ROOT)), targets.get(target),
                                     strict=False)
    except ChoreoError as err:   # the regression programs of located errors have no IR
        assert err.loc is not None, err.render()
        pytest.skip(f"{program.name} is a located program error: {err.message}")
    take_warnings()
    parsed = parse_module(print_module(module))
    assert _plain(parsed) == _plain(module)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("example", ["gemm", "flash_atten_causal"])
def test_backend_lowers_ir_text_to_the_same_ptx(example, target, monkeypatch):
    monkeypatch.chdir(ROOT)
    path = f"examples/{example}.co"
    module = ir_of_file(path, target=target)
    from_text = parse_module(print_module(module))
    assert build.emit(from_text, path, "ptx", target) == build.emit(module, path, "ptx", target)


def test_a_pass_can_be_tested_from_ir_text():
    """The free-tile-swizzle pass on a hand-written kernel: the tile only mma.store writes
    and tma.store reads gets the 128-byte swizzle; the one a thread reads stays row-major."""
    from choreo_py.passes import free_tile_swizzle

    text = """kernel k(C: global bf16[128, 128]) {
  grid t < 1
  shared c_buf: bf16[128, 128] offset=0
  shared d_buf: bf16[128, 128] offset=32768
  parallel p < 1 : group-4 (128 threads each) {
    frag acc: f32[64, 128] layout=acc
    mma.fill acc, 0.0:f32
    mma.store acc => c_buf<0+:64, 0+:128>
    let x = d_buf<0+:128, 0+:128>[0, 0]
    tma.store c_buf<0+:128, 0+:128> => C<0+:128, 0+:128>
  }
}

func k(C: global bf16[128, 128]) {
  launch k
}
"""
    module = parse_module(text)
    kernel = module.functions[0].kernels[0]
    free_tile_swizzle.run(kernel)
    assert (kernel.buffer("c_buf").swizzle, kernel.buffer("c_buf").free_swizzle) == (128, True)
    assert kernel.buffer("d_buf").swizzle is None
    assert "shared c_buf: bf16[128, 128] swizzle=128 layout-free offset=0" in print_module(module)
    let = kernel.body[0].body[3]
    assert isinstance(let, ir.Let) and let.value.dtype == "bf16"


@pytest.mark.parametrize("text, message", [
    ("kernel k() {\n  frobnicate\n}\n", "not a statement"),
    ("kernel k(A: global bf16[M]) {\n  let x = (1 +\n}\n", "expected an expression"),
    ("nonsense\n", "expected 'kernel' or 'func'"),
])
def test_bad_text_is_an_error_with_its_line(text, message):
    with pytest.raises(IRParseError, match=message) as info:
        parse_module(text)
    assert str(info.value).startswith("line ")
