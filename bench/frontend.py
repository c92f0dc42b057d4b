"""Front-end speed: parse time of the seed (median of 20) and of the whole shared corpus.

    python bench/frontend.py [--corpus ../shared/corpus/tests]

The first parse in a process builds the grammar's tables; it is reported
separately, and the medians are taken over the parses after it.
Requirement (checked here, not in the timed tests): the seed parses in < 50 ms.
"""
from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from choreo_py import frontend  # noqa: E402
from choreo_py.diagnostics import ChoreoError  # noqa: E402

SEED = ROOT / "examples" / "flash_atten_causal.co"
SEED_LIMIT_MS = 50.0


def _time(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1000.0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", default=str(ROOT.parent / "shared" / "corpus" / "tests"))
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args()

    first = _time(lambda: frontend.parse_file(str(SEED)))
    seed = [_time(lambda: frontend.parse_file(str(SEED))) for _ in range(args.repeat)]
    med = statistics.median(seed)
    print(f"machine: {platform.machine()} {platform.processor() or ''} python {platform.python_version()}")
    print(f"seed {SEED.name}: first parse (grammar build included) {first:.1f} ms; "
          f"median of {args.repeat}: {med:.2f} ms (min {min(seed):.2f}, max {max(seed):.2f})")

    files = sorted(Path(args.corpus).rglob("*.co")) if Path(args.corpus).is_dir() else []
    if files:
        total, ok, bad = 0.0, 0, 0
        for f in files:
            t0 = time.perf_counter()
            try:
                frontend.parse_file(str(f))
                ok += 1
            except ChoreoError:
                bad += 1
            total += time.perf_counter() - t0
        print(f"corpus: {len(files)} files parsed in {total * 1000:.0f} ms "
              f"({total * 1000 / len(files):.2f} ms/file; {ok} parsed, {bad} rejected)")
    else:
        print(f"corpus: not found at {args.corpus}, skipped")

    if med >= SEED_LIMIT_MS:
        print(f"FAIL: seed parse median {med:.2f} ms >= {SEED_LIMIT_MS} ms")
        return 1
    print(f"OK: seed parse median {med:.2f} ms < {SEED_LIMIT_MS} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
