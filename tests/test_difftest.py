"""Differential testing (bench/difftest.py): a fixed-seed sample of random valid programs
run by the interpreter and by the PTX emulator for sm_90a and sm_100a, against the
generator's own evaluation; and the programs the big runs found wrong, pinned.

The sample's time, measured on this 2-core machine (one process, sequential):
`python -m pytest tests/test_difftest.py -k sample`: see SAMPLE below."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"
sys.path.insert(0, str(BENCH))

import difftest  # noqa: E402
import difftest_gen as gen  # noqa: E402

CO = Path(__file__).resolve().parent / "co" / "difftest"
#: seeds 0..59 of the mixed families (thread, copy, mma); this whole file, sample included,
#: took 76 s user CPU here (`time python -m pytest tests/test_difftest.py`, 2 shared cores)
SAMPLE = range(60)


# ---------------------------------------------------------------- the generator

def test_programs_are_deterministic() -> None:
    for seed in (0, 7, 123):
        a, b = gen.generate(seed), gen.generate(seed)
        assert a.source == b.source and a.family == b.family
        for k in a.inputs:
            assert np.array_equal(a.inputs[k], b.inputs[k])
        for k in a.outputs:
            assert np.array_equal(a.expected[k], b.expected[k], equal_nan=True)


def test_families_and_forms_are_generated() -> None:
    """The generator makes what it claims: every family, and in the thread family loops,
    breaks, guards, shared buffers, group levels and the approximate ops."""
    progs = [gen.generate(s) for s in range(80)]
    assert {p.family for p in progs} == set(gen.FAMILIES)
    feats = set().union(*(p.features for p in progs))
    for f in ("foreach", "while", "ranged", "break", "guard", "shared", "approx",
              "layout:block", "layout:group", "layout:group4", "decl:mutable-untyped",
              "decl:immutable-typed", "assign-in-loop", "assign-nested"):
        assert f in feats, f


@pytest.mark.parametrize("seed", range(12))
def test_generated_programs_pass_check_strict(seed, tmp_path) -> None:
    prog = gen.generate(seed)
    path = tmp_path / "p.co"
    path.write_text(prog.source)
    assert difftest.check_strict(str(path)) is None, prog.source


def test_reference_arithmetic_is_c() -> None:
    """The third opinion's integer rules: division truncates toward zero, % takes the
    dividend's sign, u32 wraps, s32 overflow and division by zero are undefined (the
    generator draws another program)."""
    assert gen.int_binop("/", "s32", -7, 2) == -3 and gen.int_binop("%", "s32", -7, 2) == -1
    assert gen.int_binop("-", "u32", 0, 1) == 2 ** 32 - 1
    assert gen.int_binop(">>", "s32", -8, 1) == -4
    for args in (("+", "s32", 2 ** 31 - 1, 1), ("/", "s32", 1, 0), ("<<", "s32", -1, 1)):
        with pytest.raises(gen.UB):
            gen.int_binop(*args)
    assert float(gen.bf16_round(np.float32(2054.7))) == 2048.0 and float(gen.bf16_round(np.float32(2056.1))) == 2064.0


def test_a_wrong_result_is_a_disagreement(monkeypatch, tmp_path) -> None:
    """The comparison can fail: a reference off by one ulp in one element is reported."""
    real = gen.generate

    def off(seed, family=None):
        p = real(seed, "copy")
        y = p.expected["Y"].copy()
        flat = y.reshape(-1)
        flat[0] = np.nextafter(flat[0], np.inf) if flat.dtype.kind == "f" else flat[0] + 1
        p.expected = {"Y": y}
        return p

    monkeypatch.setattr(difftest.difftest_gen, "generate", off)
    res = difftest.run_one(3, str(tmp_path))
    assert res["status"] == "disagree", res
    assert set(res["diff"]) == set(difftest.SIDES)


# ---------------------------------------------------------------- the sample

@pytest.mark.slow
def test_sample_agrees(tmp_path) -> None:
    results, summary = difftest.run_many(SAMPLE, jobs=1, out=tmp_path)
    bad = [r for r in results if r["status"] in ("disagree", "crashed", "invalid")]
    assert not bad, "\n".join(f"seed {r['seed']}: {r['status']} {str(r.get('diff') or r.get('detail'))[:600]}"
                              for r in bad)
    # the sample tests something: most of it runs to a comparison
    assert summary["status"].get("agree", 0) >= 0.8 * len(SAMPLE), summary


# ---------------------------------------------------------------- what the runs found

def _run_all(path: Path, inputs: dict, outputs: tuple) -> dict:
    import torch

    import choreo_py

    got = {}
    for side in difftest.SIDES:
        ts = {k: torch.from_numpy(v.copy()) for k, v in inputs.items()}
        lib = (choreo_py.interpret(str(path)) if side == "interp"
               else choreo_py.emulate_program(str(path), target=side))
        lib.k(*ts.values())
        got[side] = {k: ts[k].numpy() for k in outputs}
    return got


def test_parallel_index_compares_signed() -> None:
    """`t > x` of a parallel index t and a negative s32 x: setp.gt.u32 (the register's
    type) made every negative x greater than t on both targets."""
    n = 40
    x = np.array([(-1) ** i * (i * 7 % 23) for i in range(n)], np.int32)
    t = np.arange(n) % 32
    want = np.where(t > x[(np.arange(n) + 7) % n], t, x).astype(np.int32)
    for side, out in _run_all(CO / "signed_index_compare.co", {"X": x, "Y": np.zeros(n, np.int32)},
                              ("Y",)).items():
        assert np.array_equal(out["Y"], want), side


def test_narrow_conversions_round() -> None:
    """`__to<bf16>(x)` / `__to<f16>(x)` of an f32, and of a constant, round to the type
    (a bf16 scalar held 2054.7 on both targets: the conversion was dropped)."""
    x = np.array([2054.7, -11.84, 3.14159, 1 + 2 ** -10, 0.1, 7.0], np.float32)
    c = np.float32(float(gen.bf16_round(0.3)) + float(np.float16(0.3)))
    want = np.array([np.float32(float(gen.bf16_round(v)) + float(np.float16(v))) for v in x], np.float32) + c
    for side, out in _run_all(CO / "narrow_convert.co", {"X": x, "Y": np.zeros(len(x), np.float32)},
                              ("Y",)).items():
        assert np.array_equal(out["Y"], want), (side, out["Y"], want)


def test_fabs_and_a_mutable_it_initializes() -> None:
    """`__fabs` was refused by sema (which knew only `__fabsf`, a spelling the front end
    rejects), and `choreo check` then called the variable it initialized 'not mutable'."""
    assert difftest.check_strict(str(CO / "fabs_mutable.co")) is None
    x = np.array([-1.5, 2.0, -0.0, 3.25], np.float32)
    for side, out in _run_all(CO / "fabs_mutable.co", {"X": x, "Y": np.zeros(4, np.float32)},
                              ("Y",)).items():
        assert np.array_equal(out["Y"], 2 * np.abs(x)), side


def test_skipped_declaration_is_not_called_immutable(tmp_path, capsys) -> None:
    """A declaration sema skips as unsupported leaves its name unsupported: assigning it
    is noted the same way, not reported as an assignment of an immutable variable."""
    from choreo_py import cli

    p = tmp_path / "foreign.co"
    p.write_text((CO / "fabs_mutable.co").read_text().replace("__fabs(", '__to<"float">('))
    assert cli.main(["check", str(p)]) == 0
    assert cli.main(["compile", str(p), "--target", "sm_90a", "--emit", "ptx", "-o", str(tmp_path / "x")]) == 1
    err = capsys.readouterr().err
    assert 'a conversion to the foreign type "float" is not supported' in err, err
    assert "not mutable" not in err


def test_constants_fold_as_their_types_hold_them() -> None:
    """`~1u` folded to -2 (so `~1u < 2u` was true), `__to<s32>(4000000000u)` stayed
    4000000000 (its `>> 8` folded to 15625000), f32 constant arithmetic folded in double,
    and the interpreter took the literal 0.3f as the double 0.3 (`X - 0.3f` of X = 0.3f
    was 1.19e-8)."""
    n = 40
    x = np.full(n, 0.3, np.float32)
    got = _run_all(CO / "constants.co", {"X": x, "Y": np.ones(n, np.float32), "Z": np.zeros(n, np.int32)},
                   ("Y", "Z"))
    for side, out in got.items():
        assert np.array_equal(out["Y"], np.zeros(n, np.float32)), (side, out["Y"][:4])
        assert np.array_equal(out["Z"], (-294967296 >> 8) + np.arange(n, dtype=np.int32)), (side, out["Z"][:4])


def test_reads_guarded_by_a_condition_operator() -> None:
    """`(n < N) ? X.at(n) : 7`, `(n < N) && X.at(n) > 0`, `(n >= N) || X.at(n) > 0`: the
    read runs only where C evaluates it (found before main's guarded-read fix: the
    interpreter reported the out-of-bounds read, the emulated PTX faulted)."""
    n = 40
    x = np.array([(-1) ** i * (i % 9) for i in range(n)], np.int32)
    want = (10 * x + np.where(x > 0, 3, 0)).astype(np.int32)
    for side, out in _run_all(CO / "guarded_ternary.co", {"X": x, "Y": np.zeros(n, np.int32)},
                              ("Y",)).items():
        assert np.array_equal(out["Y"], want), side
