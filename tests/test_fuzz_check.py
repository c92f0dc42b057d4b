"""A seed-stable sample of bench/fuzz_check.py (the full run: 5,000+ mutations):
mutated corpus programs and examples never crash `choreo check` or the strict
whole-language pass."""
from __future__ import annotations

import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "bench"
sys.path.insert(0, str(BENCH))

import fuzz_check  # noqa: E402

SAMPLE = 400


def test_fuzz_sample_never_crashes() -> None:
    files = fuzz_check.sources(fuzz_check.DEFAULT_CORPUS)
    result = fuzz_check.fuzz(files, SAMPLE, seed=11)
    assert result["crashed"] == 0, "\n".join(tb for *_, tb in result["crashes"][:3])
    # the sample exercises both outcomes, or it tests nothing
    assert result["rejected"] > 0 and result["accepted"] > 0
