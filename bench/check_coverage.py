"""How much of the corpus `choreo check` checks, and how much the tile IR lowers,
per function.

    python bench/check_coverage.py [--corpus ../shared/corpus]

For every function of every corpus program that parses:
  * checked: the whole-language pass (choreo_py.check) ran over all of it;
  * skipped subtree: the tile IR's lenient build skipped at least one
    statement (with everything inside it) as not supported -- before the
    whole-language pass existed, nothing inside such a subtree was checked;
  * builds for sm_90a / sm_100a: the IR builds and passes its verifier and
    the target's planning (`sema.build_module`).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from choreo_py.frontend import ast as A  # noqa: E402
from choreo_py import frontend, targets  # noqa: E402
from choreo_py.passes import pipeline  # noqa: E402
from choreo_py.diagnostics import ChoreoError, take_warnings  # noqa: E402
from choreo_py.sema.kernel import KernelBuilder  # noqa: E402

TARGETS = ("sm_90a", "sm_100a")


def skipped(func) -> bool:
    builder = KernelBuilder(func, lenient=True)
    try:
        builder.build()
    except ChoreoError:
        pass
    return bool(builder.skipped)


def builds(program, func, target: str) -> bool:
    try:
        pipeline.build_module(A.Program(items=[func], file=program.file, loc=program.loc),
                              targets.get(target))
        return True
    except ChoreoError:
        return False


def checked(func) -> bool:
    try:
        from choreo_py import check
    except ImportError:     # before the whole-language pass
        return False
    check.check_function(func, strict=False)
    return True


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", type=Path, default=ROOT.parent / "shared" / "corpus")
    a = ap.parse_args()
    counts = {"functions": 0, "checked": 0, "skipped": 0, **{t: 0 for t in TARGETS}}
    files = sorted((a.corpus / "tests").rglob("*.co"))
    parsed = 0
    for path in files:
        try:
            program = frontend.parse_file(str(path))
            frontend.check_parse_rules(program)
        except ChoreoError:
            continue
        parsed += 1
        for func in program.functions:
            counts["functions"] += 1
            counts["checked"] += checked(func)
            if skipped(func):
                counts["skipped"] += 1
                continue
            for t in TARGETS:
                counts[t] += builds(program, func, t)
        take_warnings()
    n = counts["functions"]
    print(f"{len(files)} corpus files, {parsed} parse; {n} functions")
    print(f"  checked by the whole-language pass: {counts['checked']} of {n}")
    print(f"  with a subtree the tile IR skips:    {counts['skipped']} of {n}")
    for t in TARGETS:
        print(f"  IR builds for {t}:                 {counts[t]} of {n}")


if __name__ == "__main__":
    main()
