"""The tcgen05 descriptors the compiler emits against CUTLASS's CuTe encoder
(bench/desc_crosscheck.py says how): every instruction-descriptor field, every
shared-memory descriptor field at every k-block, and the element addresses the
emulator derives, for every case the sm_100a programs of examples/ and tests/co/
produce. Needs the CUTLASS headers (`pip install nvidia-cutlass==4.2.0`, a test
tool, not a dependency) and a C++ compiler with the CUDA toolkit's headers;
without them it skips saying so."""
from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import desc_crosscheck as xc  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def checked():
    rec = xc.record(xc.default_programs())
    instr, smem = sorted(rec.instr, key=repr), sorted(rec.smem, key=repr)
    try:
        exe = xc.build(xc.cpp_source(instr, smem))
    except xc.Missing as e:
        pytest.skip(f"CuTe cross-check: {e}")
    return rec, exe


def test_every_case_matches_cute(checked):
    rec, exe = checked
    res = xc.compare(rec, exe)
    assert res.diffs == []
    # what the programs cover: both majors of B, A in TMEM, M = 64 and 128, 32B and 128B swizzles
    assert {(c.major, c.swizzle) for c in rec.smem} >= {("K", 128), ("MN", 128), ("K", 32)}
    assert {c.m for c in rec.instr} == {64, 128} and any(c.a_in_tmem for c in rec.instr)
    assert res.instr == len(rec.instr) and res.smem == len(rec.smem)
    assert res.ksteps == sum(len(c.steps) for c in rec.smem)
    assert res.elements == sum(c.mma_mn * c.mma_k * len(c.steps) for c in rec.smem)
    # the only disagreement allowed: an LBO the MMA never reads (unread_fields)
    assert all(": lbo ours=" in u and "MN-major" in u for u in res.unread)


def test_a_wrong_sbo_is_caught(checked):
    """The comparison can fail: our bits with SBO one 16-byte unit off."""
    rec, exe = checked
    bad = xc.Recording(instr=rec.instr, smem={
        dataclasses.replace(c, bits=c.bits + (1 << 32)): p for c, p in rec.smem.items()})
    res = xc.compare(bad, exe)
    assert len([d for d in res.diffs if ": sbo ours=" in d]) == res.ksteps


def test_a_wrong_k_step_is_caught(checked):
    rec, exe = checked
    bad = xc.Recording(instr=rec.instr, smem={
        dataclasses.replace(c, steps=tuple((kb, adv + 32 * (kb == 1)) for kb, adv in c.steps)): p
        for c, p in rec.smem.items()})
    res = xc.compare(bad, exe)
    assert any("k-block 1: start ours=" in d for d in res.diffs)


def test_a_wrong_instr_field_is_caught(checked):
    rec, exe = checked
    bad = xc.Recording(smem=rec.smem, instr={
        dataclasses.replace(c, ours=c.ours ^ (1 << 16)): p for c, p in rec.instr.items()})
    res = xc.compare(bad, exe)
    assert len([d for d in res.diffs if ": b_major ours=" in d]) == len(rec.instr)


def test_the_emulators_addresses_are_checked(checked, monkeypatch):
    """An emulator that forgot the swizzle disagrees with CuTe's layout."""
    from choreo_py.emu import sm100_desc

    rec, exe = checked
    monkeypatch.setattr(sm100_desc, "swizzle_address", lambda addr, layout: addr)
    res = xc.compare(rec, exe)
    assert any(d.startswith("emulator addresses from CuTe's") for d in res.diffs)


@pytest.fixture(scope="module")
def tmem_atoms():
    try:
        return xc.run_tmem(xc.build(xc.tmem_source()))
    except xc.Missing as e:
        pytest.skip(f"CuTe cross-check: {e}")


def test_tmem_load_shapes_match_cute(tmem_atoms):
    """tcgen05.ld .32x32b / .16x32bx2 / .16x256b, every .num CuTe defines: which lane and
    column each thread's register holds, in the emulator and in thread_fragment."""
    res = xc.compare_tmem(tmem_atoms)
    assert res.diffs == []
    assert res.atoms == sum(len(n) for _, n in xc.TMEM_ATOMS.values())
    assert res.ours_regs == 4 * 32 * 2 * sum(xc.TMEM_ATOMS["32x32b"][1])


def test_a_wrong_half_split_is_caught(tmem_atoms, monkeypatch):
    from choreo_py.emu import tmem

    real = tmem.fragment_map.__wrapped__
    monkeypatch.setattr(tmem, "fragment_map", lambda shape, num, pack16=False, half_split=None:
                        real(shape, num, pack16, None if half_split is None else half_split + 1))
    assert any(".16x32bx2" in d for d in xc.compare_tmem(tmem_atoms).diffs)


def test_cases_no_program_emits_yet_match_cute():
    """Every swizzle in both majors (the 64B and MN-major 32B/64B forms no program uses yet)
    and instruction descriptors over M, N, dtypes, D formats and major pairs."""
    rec = xc.synthetic()
    try:
        res = xc.compare(rec)
    except xc.Missing as e:
        pytest.skip(f"CuTe cross-check: {e}")
    assert res.diffs == []
    assert {(c.major, c.swizzle) for c in rec.smem} == {
        (m, s) for m in ("K", "MN") for s in (32, 64, 128)}
    assert res.instr == len(rec.instr) > 100
    assert all(": lbo ours=" in u and "MN-major SW128" in u for u in res.unread)
