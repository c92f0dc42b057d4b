"""The math builtins: every one of the reference's is in the table, computed by the
interpreter and lowered on sm_90a and sm_100a; the precision each reaches (the emitted PTX
in the emulator, against float64) is the one bench/data/builtins_precision.json states, and
docs/reference/builtins.md is the page generated from the table and that file.

The reference's math builtins are its scanner's keywords (lib/scanner.l: `__acos` ...
`__tanh`; `__alignup`/`__aligndown` are integer builtins, the atomics and barriers are not
math): one spelling each.
"""
from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

import choreo_py
from choreo_py import cli
from choreo_py.frontend import builtins
from choreo_py.ir import BUILTINS, math_defs

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("builtins_precision",
                                               ROOT / "bench" / "builtins_precision.py")
bp = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bp)

REFERENCE_MATH = """__acos __asin __atan __atan2 __ceil __cos __cosh __exp __exp2f __expm1 __fabs
    __fmaf __frcp_rn __floor __gelu __isfinite __round __rsqrt __sigmoid __sinh __softplus
    __sqrt __tan __log1p __log __max __min __pow __sign __sin __tanh""".split()


def _stored() -> dict:
    return json.loads((ROOT / "bench" / "data" / "builtins_precision.json").read_text())


def test_the_table_has_each_math_builtin_of_the_reference_once():
    names = [m.name for m in builtins.MATH]
    assert sorted(names) == sorted(REFERENCE_MATH) and len(set(names)) == len(names)
    assert all(builtins.FUNCTIONS[m.name] == m.ir and BUILTINS[m.ir] == len(m.params)
               for m in builtins.MATH)
    assert not set(builtins.C_SPELLINGS) & set(builtins.FUNCTIONS)
    assert set(builtins.C_SPELLINGS.values()) <= set(names)
    assert set(bp.DOMAINS) == {m.ir for m in builtins.MATH}


@pytest.mark.emu
def test_the_measured_precision_is_the_stated_one():
    """Re-measured now (interpreter, and each target's PTX in the emulator), every figure
    equals the file's: the page cannot state a precision the code no longer has."""
    stored = _stored()
    assert stored["points"] == bp.N
    now = bp.measure()
    for name, sides in now["results"].items():
        for side, got in sides.items():
            want = stored["results"][name][side]
            assert got.keys() == want.keys(), (name, side, got)
            for key, v in got.items():
                if isinstance(v, float):
                    assert v == pytest.approx(want[key], rel=1e-9, abs=1e-300), (name, side, key)
                else:
                    assert v == want[key], (name, side, key)


def test_every_builtin_is_lowered_on_both_targets_within_the_programs_tolerance():
    """No refusal, no special argument (zero, infinity, NaN, a half) of another kind than
    float64's, and each within the 2e-4 relative tolerance programs compare with."""
    for name, sides in _stored()["results"].items():
        for side in ("interp", *bp.TARGETS):
            r = sides[side]
            assert "refused" not in r and r["specials"] == [], (name, side, r)
            assert r["points"] > 0.9 * bp.N and r["rel"] < 2e-5, (name, side, r)


def test_the_reference_page_is_the_generated_one():
    page = (ROOT / "docs" / "reference" / "builtins.md").read_text()
    assert page == bp.markdown(*bp.stored()), \
        "regenerate: python bench/builtins_precision.py --markdown --write"
    assert "reference/builtins.md" in (ROOT / "mkdocs.yml").read_text()


@pytest.mark.parametrize("m", builtins.MATH, ids=[m.name for m in builtins.MATH])
def test_the_measurement_counts_what_is_wrong(m):
    """The error measure itself: a result one ulp off is 1 ulp, a NaN where float64 has a
    number is a wrong special value."""
    x = bp.sample(m.ir, 256)
    want = bp.exact(m.ir, x)
    ok = np.isfinite(want) & (want != 0)
    off = want.astype(np.float32)
    off[ok] = np.nextafter(off[ok], np.float32(np.inf))
    assert 0.5 <= bp.errors(off, want)["ulp"] <= 1.5 or not ok.any()
    specials = np.array(bp.SPECIALS, np.float32)
    wrong = bp.exact(m.ir, [specials] * len(m.params)).copy()
    wrong[0] = math.nan
    assert bp.specials_agree(wrong, bp.exact(m.ir, [specials] * len(m.params)))


CONSTANTS = """\
__co__ f32 [8] k(f32 [8] a) {
  f32 [8] o;
  parallel p by 1 : block
    parallel q by 8 : thread {
      o.at(q) = a.at(q) + __round(-2.5f) * 1000.0f + __ceil(0.25f) * 100.0f
              + __sign(-3.0f) * 10.0f + __isfinite(1.0f);
    }
  return o;
}
"""


@pytest.mark.emu
@pytest.mark.parametrize("target", bp.TARGETS)
def test_constant_arguments(tmp_path, target):
    """Constant arguments (no register to start from): the same values in the emulator
    and the interpreter, C's (round(-2.5) = -3, away from zero)."""
    path = tmp_path / "c.co"
    path.write_text(CONSTANTS)
    a = torch.arange(8, dtype=torch.float32)
    want = a + (-3000.0 + 100.0 - 10.0 + 1.0)
    assert torch.equal(choreo_py.interpret(str(path), target=target).k(a), want)
    assert torch.equal(choreo_py.emulate_program(str(path), target=target).k(a), want)


def test_the_meanings_are_the_references():
    """round halves away from zero, sign of NaN is 0, gelu is the tanh form (the GPU
    target's, not the erf form: they differ by 1e-4 near x = 1.5)."""
    assert [math_defs.round_away(v) for v in (2.5, -2.5, 0.49999997, -0.3)] == [3, -3, 0, -0.0]
    assert math.copysign(1, math_defs.round_away(-0.3)) == -1
    assert math_defs.sign(math.nan) == 0.0 and math_defs.isfinite(math.inf) == 0.0
    x = 1.5
    tanh_form = 0.5 * x * (1 + math.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    assert math_defs.gelu(x) == pytest.approx(tanh_form, rel=1e-15)
    assert abs(math_defs.gelu(x) - 0.5 * x * (1 + math.erf(x / math.sqrt(2)))) > 1e-4
    assert math_defs.softplus(100.0) == 100.0 and math_defs.softplus(-100.0) > 0


@pytest.mark.parametrize("call,meant", [
    ("__expf(x.at(q))", "is not declared (did you mean '__exp'?)"),
    ("__exp2(x.at(q))", "is not declared (did you mean '__exp2f'?)"),
    ("__powf(x.at(q), 2.0f)", "is not declared (did you mean '__pow'?)"),
    ("__fmaxf(x.at(q), 1.0f)", "is not declared (did you mean '__max'?)")])
def test_a_c_spelling_names_the_builtin_it_means(tmp_path, capsys, call, meant):
    """One argument reads as a dimension access of an undeclared name, two as a call of an
    unknown function: the same words for both."""
    path = tmp_path / "c.co"
    path.write_text("__co__ void k(global f32[64] x, global f32[64] o) {\n"
                    "  parallel q by 64 : thread {\n"
                    f"    o.at(q) = {call};\n  }}\n}}\n")
    assert cli.main(["check", str(path)]) == 1
    err = capsys.readouterr().err
    spelling = call.split("(")[0]
    assert f"c.co:3:15: error: '{spelling}' {meant}" in err, err
    assert err.count("error:") == 1, err


F64 = """\
__co__ f64 [64] k(f64 [64] a) {
  f64 [64] o;
  parallel p by 1 : block
    parallel q by 64 : thread {
      o.at(q) = __gelu(a.at(q));
    }
  return o;
}
"""


@pytest.mark.parametrize("target", bp.TARGETS)
def test_an_f64_argument_is_refused_at_its_location(tmp_path, capsys, target):
    """`check` accepts it (valid Choreo); the backends have no f64 registers and say so
    where the value is computed, with the source line and a caret."""
    path = tmp_path / "d.co"
    path.write_text(F64)
    assert cli.main(["check", str(path)]) == 0
    capsys.readouterr()
    assert cli.main(["compile", str(path), "--target", target, "-o", str(tmp_path / "x")]) == 1
    err = capsys.readouterr().err
    assert f"d.co:5:7: error: a scalar of type f64 is not lowered for {target} yet" in err, err
    assert "^" in err and "Traceback" not in err


SWEEP = """\
__co__ {t} [64] k({t} [64] a) {{
  {t} [64] o;
  parallel p by 1 : block
    parallel q by 64 : thread {{
      x = a.at(q);
      o.at(q) = {calls};
    }}
  return o;
}}
"""


@pytest.mark.parametrize("dtype", ["f16", "bf16", "f32", "s32", "u32", "s64"])
def test_every_builtin_of_every_argument_type_compiles_or_is_refused_where_it_is(tmp_path,
                                                                                 dtype):
    """What `check` accepts the backends lower (ptxas assembles it) or refuse at the
    statement: `__fabs` of a u32 was `abs.u32`, which ptxas rejects (PTX's abs is for
    signed types); the interpreter keeps the value, as the lowering now does."""
    from choreo_py.diagnostics import ChoreoError
    from choreo_py.driver import compile_file
    from choreo_py.runtime.build import find_ptxas, ptxas

    calls = " + ".join(f"{m.name}({', '.join(['x'] * len(m.params))})" for m in builtins.MATH)
    path = tmp_path / "k.co"
    path.write_text(SWEEP.format(t=dtype, calls=calls))
    assert cli.main(["check", str(path)]) == 0
    for target in bp.TARGETS:
        try:
            ptx = compile_file(str(path), "ptx", target)
        except ChoreoError as e:
            assert e.render().startswith(f"{path}:5:7: error: "), e.render()
            continue
        if find_ptxas() is not None:
            ptxas(ptx, target)


@pytest.mark.emu
@pytest.mark.parametrize("target", bp.TARGETS)
def test_fabs_of_an_unsigned_value_is_the_value(tmp_path, target):
    """The lowering moved it (PTX has no abs.u32); the interpreter took a block's threads'
    integers through f32 (|4294967295u| was 0, |16777217| 16777216)."""
    path = tmp_path / "u.co"
    path.write_text(SWEEP.format(t="u32", calls="__fabs(x)"))
    a = torch.tensor([0, 1, 7, 2 ** 31, 2 ** 32 - 1, 16777217] * 10 + [3] * 4, dtype=torch.int64)
    # a u32 tensor is torch.uint32 to the emulator, int64 to the interpreter
    emulated = choreo_py.emulate_program(str(path), target=target).k(a.to(torch.uint32))
    assert torch.equal(emulated.to(torch.int64), a)
    assert torch.equal(choreo_py.interpret(str(path), target=target).k(a), a)


def test_the_page_takes_the_gpu_columns_from_a_gpu_measurement():
    """`--gpu` writes the same record for the side "gpu"; the page adds two columns from
    it (fed here the emulator's sm_90a figures under that name, to read the layout)."""
    data = _stored()
    gpu = {"device": "a GPU", "points": data["points"], "domains": data["domains"],
           "results": {k: {"gpu": v["sm_90a"]} for k, v in data["results"].items()}}
    page = bp.markdown(data, gpu)
    rows = [line for line in page.splitlines() if line.startswith("| `__")]
    assert len(rows) == len(builtins.MATH) and all(r.count("|") == 11 for r in rows)
    assert "| GPU | GPU relative |" in page and "on a GPU (a GPU)" in page
    assert rows[0].endswith(f"| {bp._fmt_ulp(data['results']['__exp']['sm_90a'])} | "
                            f"{bp._fmt(data['results']['__exp']['sm_90a'], 'rel')} |")
