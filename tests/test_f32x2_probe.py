"""Per kernel, whether the .f32x2 pairs stay (choreo_py/runtime/pairing.py): ptxas -v on
the paired build decides, the verdict is written into the module (`F32X2`) and the PTX
(`// f32x2: ...`); a kernel whose paired build spills at its cap is paired under one 8
lower where that removes the spill, else lowered scalar; and the build the probe keeps
computes the scalar build's bits."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from choreo_py.driver import compile_file
from choreo_py.lowering.core import f32x2
from choreo_py.runtime import build, pairing

from block_helpers import assert_no_spills, emulate_strict

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "flash_atten_blackwell.co"
COMMIT = ROOT / "tests" / "co" / "flash_atten_blackwell_commit.co"
ROW_VECTOR = ROOT / "tests" / "co" / "gemm_row_vector.co"
BLOCKSCALE = ROOT / "tests" / "co" / "gemm_blockscale.co"
BWD = ROOT / "examples" / "flash_atten_bwd.co"
PAIRS = re.compile(r"^\s*(add|sub|mul|fma)[.a-z]*\.f32x2 ", re.M)
MAXNREG = re.compile(r"^\.maxnreg (\d+)$", re.M)
needs_ptxas = pytest.mark.skipif(build.find_ptxas() is None, reason="ptxas not on PATH")


@pytest.fixture(autouse=True)
def fresh(monkeypatch, tmp_path):
    """Each test probes anew: nothing traced, assembled or cached by another is reused."""
    monkeypatch.setattr(build, "_TRACED", {})
    monkeypatch.setattr(build, "_ASSEMBLED", {})
    monkeypatch.setenv("CHOREO_PY_CACHE_DIR", str(tmp_path / "cache"))


def _notes(ptx: str) -> list:
    return re.findall(r"^// f32x2: (\w+): (.*)$", ptx, re.M)


@needs_ptxas
def test_the_example_keeps_its_pairs_and_says_so():
    ptx = compile_file(str(EXAMPLE), emit="ptx", target="sm_100a")
    [(kernel, verdict)] = _notes(ptx)
    n = len(PAIRS.findall(ptx))
    assert kernel == "flash_atten_blackwell" and n > 100
    assert re.fullmatch(rf"paired: {n} \.f32x2, no spill under ptxas \d+\.\d+\.\d+ -v", verdict)
    assert_no_spills(ptx)


@needs_ptxas
def test_a_kernel_whose_pairs_spill_at_its_cap_is_paired_under_a_lower_one():
    """flash_atten_blackwell_commit.co: ptxas spills its paired build at its 168
    registers (384 threads) and not with the cap 8 lower: the output is that build,
    with `.maxnreg 160`, which assembles without spills, and the note says why."""
    ptx = compile_file(str(COMMIT), emit="ptx", target="sm_100a")
    [(kernel, verdict)] = _notes(ptx)
    n = len(PAIRS.findall(ptx))
    assert n > 100 and MAXNREG.findall(ptx) == ["160"]
    assert re.fullmatch(rf"paired under \.maxnreg 160: {n} \.f32x2; at the kernel's cap ptxas "
                        r"\S+ -v reported [1-9]\d* bytes spill stores, \d+ bytes spill loads, "
                        r"at 160 none", verdict)
    assert_no_spills(ptx)


def _fake_ptxas(monkeypatch, spills):
    """The probe's report as `spills(entry, its PTX)` says, for every paired entry."""
    def probe(ptx, target, tools):
        return {e: spills(e, pairing.entry_text(ptx, e)) for e in pairing.paired_entries(ptx)}
    monkeypatch.setattr(pairing, "_probe", probe)
    monkeypatch.setattr(pairing, "ptxas_version", lambda exe: "X")


def test_a_kernel_that_spills_under_the_lower_cap_too_is_lowered_scalar(monkeypatch):
    _fake_ptxas(monkeypatch, lambda e, text: (8, 4))
    ptx = compile_file(str(COMMIT), emit="ptx", target="sm_100a")
    assert _notes(ptx) == [("flash_atten_blackwell", "scalar: paired (190 .f32x2), ptxas X -v "
                            "reported 8 bytes spill stores, 4 bytes spill loads; under "
                            ".maxnreg 160, 8 bytes spill stores")]
    assert not PAIRS.search(ptx) and not MAXNREG.search(ptx)


def test_a_kernel_without_launch_bounds_is_not_capped(monkeypatch):
    """Without launch_bounds ptxas sizes the registers itself (its choice of occupancy):
    a spill of the paired build means scalar, with no second probe."""
    seen = []
    _fake_ptxas(monkeypatch, lambda e, text: seen.append(e) or (8, 4))
    ptx = compile_file(str(ROW_VECTOR), emit="ptx", target="sm_100a")
    assert _notes(ptx) == [("gemm_row_vector", "scalar: paired (32 .f32x2), ptxas X -v "
                            "reported 8 bytes spill stores, 4 bytes spill loads")]
    assert not PAIRS.search(ptx) and not MAXNREG.search(ptx) and seen == ["gemm_row_vector"]


def test_a_kernel_that_sets_its_roles_budgets_is_not_capped(monkeypatch):
    """The example's roles repartition its registers (setmaxnreg): a cap below the
    launch's would upset that, so a spill there means scalar, with no second probe."""
    seen = []
    _fake_ptxas(monkeypatch, lambda e, text: seen.append(e) or (4, 4))
    ptx = compile_file(str(EXAMPLE), emit="ptx", target="sm_100a")
    [(kernel, verdict)] = _notes(ptx)
    assert verdict.startswith("scalar: paired (") and "maxnreg" not in verdict
    assert not PAIRS.search(ptx) and not MAXNREG.search(ptx) and seen == [kernel]


@needs_ptxas
def test_a_second_compile_reads_the_probe_from_the_cache(monkeypatch):
    """The probe's reports are cached on disk under the PTX's hash: compiled again as in
    a fresh process (nothing in memory), the kernel runs no ptxas and gets the same text
    (the first compile probes at the cap and below it)."""
    runs = []
    real = build._assemble
    monkeypatch.setattr(build, "_assemble", lambda ptx, arch: runs.append(1) or real(ptx, arch))
    first = compile_file(str(COMMIT), emit="pyptx", target="sm_100a")
    assert len(runs) == 2
    monkeypatch.setattr(build, "_TRACED", {})
    monkeypatch.setattr(build, "_ASSEMBLED", {})
    assert compile_file(str(COMMIT), emit="pyptx", target="sm_100a") == first
    assert len(runs) == 2


@needs_ptxas
def test_the_module_text_records_the_verdict():
    text = compile_file(str(EXAMPLE), emit="pyptx", target="sm_100a")
    [(kernel, verdict)] = pairing.note_of(text)
    assert kernel == "flash_atten_blackwell" and verdict.startswith("paired: ")
    assert "f32x2(" in text


def test_without_ptxas_a_kernel_is_not_paired(monkeypatch):
    """Nothing can show that its pairs assemble without spills: scalar, and recorded."""
    monkeypatch.setattr(build, "find_ptxas", lambda: None)
    text = compile_file(str(ROW_VECTOR), emit="pyptx", target="sm_100a")
    assert pairing.note_of(text) == (
        ("gemm_row_vector", "scalar: 32 .f32x2 pairs not probed (no ptxas)"),)
    assert "f32x2(" not in text


def test_a_kernel_without_pairs_is_not_probed(monkeypatch):
    def refuse(*a, **k):
        raise AssertionError("probed")
    monkeypatch.setattr(build, "ptxas", refuse)
    text = compile_file(str(ROOT / "examples" / "gemm.co"), emit="pyptx", target="sm_100a")
    assert "F32X2" not in text


def test_each_kernel_of_a_file_is_decided_alone(monkeypatch):
    """flash_atten_bwd.co: fa_bwd_dkdv and fa_bwd_dq pair (both repartition their
    registers by setmaxnreg), fa_bwd_pre does not. ptxas (faked) spills dq alone: dq
    goes scalar, with no lower cap tried, and dkdv keeps its pairs."""
    seen = []
    _fake_ptxas(monkeypatch, lambda e, text: seen.append(e) or ((4, 4) if e == "fa_bwd_dq"
                                                                else (0, 0)))
    ptx = compile_file(str(BWD), emit="ptx", target="sm_100a")
    verdicts = dict(_notes(ptx))
    assert sorted(verdicts) == ["fa_bwd_dkdv", "fa_bwd_dq"]
    assert verdicts["fa_bwd_dkdv"] == "paired: 16 .f32x2, no spill under ptxas X -v"
    assert verdicts["fa_bwd_dq"] == ("scalar: paired (63 .f32x2), ptxas X -v reported 4 bytes "
                                     "spill stores, 4 bytes spill loads")
    assert pairing.paired_entries(ptx) == {"fa_bwd_dkdv": 16}
    assert sorted(seen) == ["fa_bwd_dkdv", "fa_bwd_dq"] and not MAXNREG.search(ptx)


def test_the_verdict_is_deterministic(monkeypatch):
    monkeypatch.setattr(build, "find_ptxas", lambda: None)
    first = compile_file(str(BLOCKSCALE), emit="pyptx", target="sm_100a")
    monkeypatch.setattr(build, "_TRACED", {})
    assert compile_file(str(BLOCKSCALE), emit="pyptx", target="sm_100a") == first


def test_sm90a_is_never_probed(monkeypatch):
    """sm_90a has no .f32x2 forms: its text is what it was, no verdict, no probe."""
    monkeypatch.setattr(build, "find_ptxas", lambda: None)
    text = compile_file(str(ROOT / "examples" / "flash_atten.co"), emit="pyptx", target="sm_90a")
    assert "F32X2" not in text and "f32x2(" not in text


@needs_ptxas
@pytest.mark.emu
@pytest.mark.slow
def test_the_kernel_paired_under_the_lower_cap_gives_the_scalar_bits(monkeypatch):
    """flash_atten_blackwell_commit.co as the probe leaves it (paired, `.maxnreg 160`) and
    with the pairs off: the same O, bit for bit, in the strict emulator (Q = 200, KV =
    330: a partial last tile; keys past the first tile 4 x larger: rows rescale)."""
    from test_flash_atten_blackwell import _inputs
    outs = []
    for pair in (f32x2.PROBE, False):
        monkeypatch.setattr(f32x2, "PAIR", pair)
        ptx = compile_file(str(COMMIT), emit="ptx", target="sm_100a")
        assert bool(PAIRS.search(ptx)) == bool(MAXNREG.search(ptx)) == (pair is not False)
        q, k, v, o = _inputs(200, 330, 1, grow=4)
        assert emulate_strict(COMMIT, dict(Q=q, K=k, V=v, O=o), "random") == []
        outs.append(o)
    assert torch.isfinite(outs[1].float()).all() and outs[1].float().abs().max() > 0
    assert torch.equal(outs[0].view(torch.int16), outs[1].view(torch.int16))
