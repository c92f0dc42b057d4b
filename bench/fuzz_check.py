"""Mutation fuzzing of `choreo check` (the whole-language pass included) over the
shared corpus and the examples: no input may produce anything but diagnostics.

    python bench/fuzz_check.py [--mutations 5000] [--seed 0] [--corpus ../shared/corpus]

Each mutation (a truncation, token deletion, duplication or swap, random bytes,
or several token replacements) is applied to a file drawn at random, then run
through `choreo check` (parse rules, the whole-language pass in both modes, and
the tile IR's analysis).  A ChoreoError is the expected outcome for a broken
program; anything else (an exception, a RecursionError) is a crash, printed
with its input and traceback.  The run is deterministic for a given seed.
"""
from __future__ import annotations

import argparse
import random
import re
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from choreo_py import check, frontend  # noqa: E402
from choreo_py.diagnostics import ChoreoError, take_warnings  # noqa: E402

TOKEN = re.compile(r"\s+|[A-Za-z_]\w*|\d[\w.]*|\S")
DEFAULT_CORPUS = ROOT.parent / "shared" / "corpus" / "tests"


def sources(corpus: Path | None) -> list[tuple[str, str]]:
    """(name, text) of every example and corpus program."""
    files = sorted((ROOT / "examples").glob("*.co"))
    if corpus is not None and corpus.is_dir():
        files += sorted(corpus.rglob("*.co"))
    return [(str(f.relative_to(f.parents[1])), f.read_text(errors="replace")) for f in files]


def mutate(text: str, rng: random.Random) -> str:
    toks = TOKEN.findall(text) or [" "]
    kind = rng.randrange(6)
    if kind == 0:
        return text[: rng.randrange(max(len(text), 1))]
    i, j = rng.randrange(len(toks)), rng.randrange(len(toks))
    if kind == 1:
        del toks[i]
    elif kind == 2:
        toks.insert(i, toks[i])
    elif kind == 3:
        toks[i], toks[j] = toks[j], toks[i]
    elif kind == 4:
        toks.insert(i, bytes(rng.randrange(256) for _ in range(rng.randrange(1, 8)))
                    .decode("latin-1"))
    else:
        for _ in range(3):
            toks[rng.randrange(len(toks))] = rng.choice(toks)
    return "".join(toks)


def run_one(text: str, name: str) -> str:
    """'accepted' | 'rejected'; raises on a crash."""
    take_warnings()
    try:
        program = frontend.check_text(text, name)
    except ChoreoError as err:
        err.render()
        return "rejected"
    try:          # the strict mode `compile` runs, on what `check` accepted
        check.check_program(program, strict=True)
    except ChoreoError as err:
        err.render()
    finally:
        take_warnings()
    return "accepted"


def fuzz(files: list[tuple[str, str]], mutations: int, seed: int) -> dict:
    rng = random.Random(f"fuzz_check:{seed}")
    counts = {"accepted": 0, "rejected": 0, "crashed": 0}
    crashes = []
    for n in range(mutations):
        name, text = files[rng.randrange(len(files))]
        mutated = mutate(text, rng)
        try:
            counts[run_one(mutated, f"{name}#{n}")] += 1
        except Exception:  # noqa: BLE001 - a crash is what this looks for
            counts["crashed"] += 1
            crashes.append((name, n, mutated, traceback.format_exc()))
    counts["crashes"] = crashes
    return counts


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mutations", type=int, default=5000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    a = ap.parse_args()
    files = sources(a.corpus)
    t0 = time.perf_counter()
    result = fuzz(files, a.mutations, a.seed)
    dt = time.perf_counter() - t0
    for name, n, text, tb in result["crashes"][:5]:
        print(f"--- crash: mutation {n} of {name}\n{tb}--- input ---\n{text}\n")
    print(f"{a.mutations} mutations of {len(files)} files (seed {a.seed}) in {dt:.0f} s: "
          f"{result['rejected']} rejected, {result['accepted']} accepted, "
          f"{result['crashed']} crashed")
    return 1 if result["crashed"] else 0


if __name__ == "__main__":
    sys.exit(main())
