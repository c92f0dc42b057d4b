"""Mutation fuzzing of the front end: no input may produce anything but a ChoreoError.

Seeded and deterministic: truncations, token deletions, duplications and
swaps, and random bytes, applied to the project's examples; 2,000+ cases.
"""
from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from choreo_py import frontend
from choreo_py.diagnostics import ChoreoError

EXAMPLES = sorted((Path(__file__).resolve().parent.parent / "examples").glob("*.co"))
TOKEN = re.compile(r"\s+|[A-Za-z_]\w*|\d[\w.]*|\S")
CASES_PER_EXAMPLE = 150  # x every example: 3,000+ inputs (bench/fuzz.py runs 20,000)


def _tokens(text: str) -> list[str]:
    return TOKEN.findall(text)


def _mutate(text: str, rng: random.Random) -> str:
    toks = _tokens(text)
    kind = rng.randrange(6)
    if kind == 0:  # truncation
        return text[: rng.randrange(len(text))]
    i = rng.randrange(len(toks))
    j = rng.randrange(len(toks))
    if kind == 1:  # deletion
        del toks[i]
    elif kind == 2:  # duplication
        toks.insert(i, toks[i])
    elif kind == 3:  # swap
        toks[i], toks[j] = toks[j], toks[i]
    elif kind == 4:  # random bytes
        junk = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 8)))
        toks.insert(i, junk.decode("latin-1"))
    else:  # several mutations at once
        for _ in range(3):
            k = rng.randrange(len(toks))
            toks[k] = rng.choice(toks)
    return "".join(toks)


def _check_no_crash(text: str, name: str) -> None:
    try:
        frontend.check_text(text, name)
    except ChoreoError as err:
        rendered = err.render()
        assert "error" in rendered
        assert err.loc is None or err.loc.line >= 1


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
@pytest.mark.slow
def test_mutations_never_crash(example: Path) -> None:
    text = example.read_text()
    rng = random.Random(f"fuzz:{example.name}")
    for n in range(CASES_PER_EXAMPLE):
        mutated = _mutate(text, rng)
        try:
            _check_no_crash(mutated, f"{example.name}#{n}")
        except AssertionError:
            raise
        except Exception as err:  # pragma: no cover - the failure report
            pytest.fail(f"case {n} of {example.name} raised {type(err).__name__}: {err}\n"
                        f"--- input ---\n{mutated}")


def _cases(example: Path) -> list[str]:
    """The inputs test_mutations_never_crash gives the front end for `example`."""
    text = example.read_text()
    rng = random.Random(f"fuzz:{example.name}")
    return [_mutate(text, rng) for _ in range(CASES_PER_EXAMPLE)]


def test_enough_cases() -> None:
    """The fuzzer tests what it claims: 2,000+ distinct inputs, none the example itself,
    and among them both programs the front end rejects and programs it accepts (a
    mutator that only ever broke the lexer, or changed nothing, would test little)."""
    distinct, outcomes = set(), {"rejected": 0, "accepted": 0}
    for example in EXAMPLES:
        original = example.read_text()
        cases = _cases(example)
        distinct |= {c for c in cases if c != original}
        for n, case in enumerate(cases[:12]):
            try:
                frontend.check_text(case, f"{example.name}#{n}")
                outcomes["accepted"] += 1
            except ChoreoError:
                outcomes["rejected"] += 1
    assert len(distinct) >= 2000
    assert outcomes["rejected"] >= 20 and outcomes["accepted"] >= 5, outcomes
