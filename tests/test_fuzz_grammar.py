"""A fixed-seed sample of bench/fuzz_grammar.py: generated programs and tree mutations
through check, compile for both targets and ptxas. Every finding kind stays at 0 (the
campaign's own counts are in the bench script's report)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"
sys.path.insert(0, str(BENCH))

import fuzz_grammar  # noqa: E402

SAMPLE = 36  # programs 0..35 of seed 0 (about 20 s on a loaded 2-core machine)


@pytest.fixture(scope="module")
def result():
    return fuzz_grammar.campaign(SAMPLE, seed=0)


def test_programs_are_deterministic():
    assert fuzz_grammar.program(0, 5) == fuzz_grammar.program(0, 5)
    assert fuzz_grammar.program(0, 5) != fuzz_grammar.program(0, 6)


@pytest.mark.parametrize("kind", fuzz_grammar.KINDS)
def test_the_sample_finds_nothing(result, kind):
    found = [f"#{f['index']} {f['origin']} {f['target']}: {f['message'][:300]}"
             for f in result["findings"] if f["kind"] == kind]
    assert not found, "\n".join(found)


def test_the_sample_reaches_the_backends(result):
    c = result["counts"]
    assert c["programs"] == SAMPLE and c["compiled"] >= SAMPLE // 3


@pytest.mark.ptxas
def test_the_sample_reaches_ptxas(result):
    assert result["counts"]["assembled"] >= SAMPLE // 3
