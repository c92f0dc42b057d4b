"""How much of the reference compiler's test corpus compiles end to end, and what stops the rest.

    python3 bench/compile_coverage.py [--corpus ../shared/corpus] [--target sm_90a] [--top 15]
                                      [--ptxas]

For every program the corpus manifest marks valid ("expect": "accept"), runs
`choreo compile --emit ptx` in-process and counts the programs that reach PTX;
the others are grouped by the first refusal (names in quotes folded), most
frequent first. With --ptxas a program counts only when ptxas also assembles
its PTX (a rejection is reported as one). `choreo check` conformance (the front end) is a separate score:
../shared/tools/conformance.py.

Shape-specialised programs are counted apart. A file whose whole-file,
shape-generic build is refused only for sizes it needs as numbers (an implicit
shared buffer of an input's shape, a thread count from a parameter: what
`choreo_py.load` and `choreo_py.interpret` handle by building each function for
the call's shapes, host/specialize.py) is compiled again function by function
for the arguments of the calls its own main() makes, as tests/end2end_refs.py
ports them (the end-to-end programs); a function without such a call must build
shape-generically. Such a file is listed as "specialised" and counted in the
second total only; `--generic-only` leaves them out. A file with no main() call
to take sizes from (a codegen test) is not specialised.
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
    ap.add_argument("--generic-only", action="store_true",
                    help="no shape-specialised builds (see the module docstring)")
    ap.add_argument("--by-file", action="store_true",
                    help="also list each refused file with its first refusal and location")
    args = ap.parse_args()
    from choreo_py.diagnostics import ChoreoError
    from choreo_py.driver import compile_file
    from choreo_py.runtime.build import ptxas

    manifest = json.load(open(os.path.join(args.corpus, "manifest.json"), encoding="utf-8"))
    entries = manifest if isinstance(manifest, list) else manifest.get("files", [])
    compiled, specialised, reasons, total = [], [], collections.Counter(), 0
    refused: list[tuple[str, str]] = []
    host_only: list[str] = []
    for e in entries:
        path = os.path.join(args.corpus, e["path"])
        if e.get("expect") != "accept" or not os.path.exists(path):
            continue
        total += 1
        try:
            try:
                ptx = compile_file(path, "ptx", args.target)
                if args.ptxas:
                    ptxas(ptx, args.target)
                compiled.append(e["path"])
                if ".entry" not in ptx:  # host code only: a module without kernel entries
                    host_only.append(e["path"])
            except ChoreoError as err:
                if args.generic_only or not _specialise(path, err, args.target, args.ptxas):
                    raise
                specialised.append(e["path"])
        except ChoreoError as err:
            first = err.diagnostics[0].message if err.diagnostics else str(err)
            reasons[re.sub(r"'[^']*'", "'_'", first.splitlines()[0])] += 1
            at = err.diagnostics[0].loc if err.diagnostics else None
            where = f":{at.line}:{at.col}" if at is not None else ""
            refused.append((e["path"] + where, first.splitlines()[0]))
        except Exception as err:  # noqa: BLE001 - an internal error is itself a finding
            reasons[f"INTERNAL ERROR {type(err).__name__}"] += 1
    checked = " that ptxas accepts" if args.ptxas else ""
    print(f"{len(compiled)} of {total} valid corpus programs compile to {args.target} PTX{checked}"
          " shape-generically")
    print(f"  of which {len(host_only)} are host code only (a module without kernel entries: "
          "the host program runs in the interpreter and the runtime)")
    for path in compiled:
        print(f"  {path}{'  (host only)' if path in host_only else ''}")
    if not args.generic_only:
        print(f"{len(compiled) + len(specialised)} of {total} with {len(specialised)} built per "
              "function for the sizes of their main()'s calls:")
        for path in specialised:
            print(f"  {path}")
    print("first refusal of the others:")
    for reason, n in reasons.most_common(args.top):
        print(f"  {n:4d}  {reason}")
    if args.by_file:
        print("refused files:")
        for where, reason in sorted(refused, key=lambda r: (r[1], r[0])):
            print(f"  {where}: {reason}")


def _specialise(path: str, err, target: str, check_ptxas: bool) -> bool:
    """Whether every function of `path` compiles (and assembles) when built for the sizes of
    its main()'s calls (tests/end2end_refs.py), the others shape-generically; only for a
    whole-file refusal that names sizes as its only reasons."""
    from choreo_py import frontend, targets
    from choreo_py.diagnostics import ChoreoError
    from choreo_py.host.specialize import Functions
    from choreo_py.runtime import build
    from choreo_py.runtime.host_program import _only_shape_limits

    if not _only_shape_limits(err):
        return False
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    import end2end_refs as refs

    calls = {c[1]: c for c in refs.CASES if os.path.basename(c[0]) == os.path.basename(path)
             and os.path.samefile(os.path.dirname(c[0]), os.path.dirname(path))}
    if not calls:
        return False
    funcs = Functions(frontend.parse_file(path), targets.get(target), strict=True)
    for name in funcs.names():
        try:
            fn = funcs.get(name)
        except ChoreoError:
            if name not in calls:
                return False
            try:
                ptx = refs.case_ptx(calls[name], target)
            except ChoreoError:
                return False
        else:
            ptx = build.emit(funcs.module(fn), path, "ptx", target)
        if check_ptxas:
            build.ptxas(ptx, target)
    return True


if __name__ == "__main__":
    main()
