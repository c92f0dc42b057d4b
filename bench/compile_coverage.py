"""How much of the reference compiler's test corpus compiles end to end, and what stops the rest.

    python3 bench/compile_coverage.py [--corpus ../shared/corpus] [--target sm_90a] [--top 15]
                                      [--ptxas]

For every program the corpus manifest marks valid ("expect": "accept"), runs
`choreo compile --emit ptx` in-process and counts the programs that reach PTX;
the others are grouped by the first refusal (names in quotes folded), most
frequent first. With --ptxas a program counts only when ptxas also assembles
its PTX (a rejection is reported as one). `choreo check` conformance (the front end) is a separate score:
../shared/tools/conformance.py.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", default=os.path.join(ROOT, "..", "shared", "corpus"))
    ap.add_argument("--target", default="sm_90a", choices=["sm_90a", "sm_100a"])
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--ptxas", action="store_true", help="count only PTX that ptxas accepts")
    args = ap.parse_args()
    from choreo_py.diagnostics import ChoreoError
    from choreo_py.driver import compile_file
    from choreo_py.runtime.build import ptxas

    manifest = json.load(open(os.path.join(args.corpus, "manifest.json"), encoding="utf-8"))
    entries = manifest if isinstance(manifest, list) else manifest.get("files", [])
    compiled, reasons, total = [], collections.Counter(), 0
    for e in entries:
        path = os.path.join(args.corpus, e["path"])
        if e.get("expect") != "accept" or not os.path.exists(path):
            continue
        total += 1
        try:
            ptx = compile_file(path, "ptx", args.target)
            if args.ptxas:
                ptxas(ptx, args.target)
            compiled.append(e["path"])
        except ChoreoError as err:
            first = err.diagnostics[0].message if err.diagnostics else str(err)
            reasons[re.sub(r"'[^']*'", "'_'", first.splitlines()[0])] += 1
        except Exception as err:  # noqa: BLE001 - an internal error is itself a finding
            reasons[f"INTERNAL ERROR {type(err).__name__}"] += 1
    checked = " that ptxas accepts" if args.ptxas else ""
    print(f"{len(compiled)} of {total} valid corpus programs compile to {args.target} PTX{checked}")
    for path in compiled:
        print(f"  {path}")
    print("first refusal of the others:")
    for reason, n in reasons.most_common(args.top):
        print(f"  {n:4d}  {reason}")


if __name__ == "__main__":
    main()
