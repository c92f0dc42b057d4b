"""A seed-stable sample of the whole-compiler fuzzer (bench/fuzz.py) in the suite: 240
mutants of the examples, tests/co and (when present) the corpus through check,
compile --emit ptx and ptxas, with no traceback, internal error, timeout, unlocated
error or rejected PTX. The long run is `python3 bench/fuzz.py -n 20000`."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
import fuzz  # noqa: E402

SAMPLE = 240


@pytest.fixture(scope="module")
def campaign() -> dict:
    return fuzz.campaign(SAMPLE, seed=0, jobs=min(2, os.cpu_count() or 1), timeout=10.0)


def test_fuzz_sample_finds_nothing(campaign):
    counts = campaign["counts"]
    report = "\n".join(f"{f['kind']} #{f['index']} ({f['source']}, {f['target']}): "
                       f"{f['message'][:400]}\n--- mutant ---\n{f['text'][:3000]}"
                       for f in campaign["findings"][:3])
    assert all(counts[k] == 0 for k in fuzz.KINDS), f"{counts}\n{report}"
    assert counts["mutants"] == SAMPLE
    assert counts["compiled"] >= 10  # the sample reaches the backends, not only the parser


@pytest.mark.ptxas
def test_fuzz_sample_assembles(campaign):
    """Every mutant that compiled was assembled by ptxas (skipped, not passed, without it)."""
    counts = campaign["counts"]
    assert counts["assembled"] == counts["compiled"] >= 10


def test_mutants_are_seed_stable():
    files = fuzz.sources()
    n_own = len(fuzz.sources(examples_only=True))
    assert fuzz.mutant(0, 17, files, n_own) == fuzz.mutant(0, 17, files, n_own)
    assert fuzz.mutant(0, 17, files, n_own) != fuzz.mutant(1, 17, files, n_own)
