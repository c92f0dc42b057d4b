"""Front-end speed: parse time of the seed (median of 20), of the whole shared
corpus, and the cost of a `choreo check` process (start-up included).

    python bench/frontend.py [--corpus ../shared/corpus/tests] [--processes 10]

The first parse in a process loads the parser (or builds it, on a cold cache)
and compiles the lexer's regexes; it is reported separately, and the medians
are taken over the parses after it.
"process start-up" runs `python -m choreo_py.cli check SEED` as new processes,
beside a bare interpreter and a bare `import choreo_py.cli`, so that the part
choreo-py adds can be told apart from the interpreter's own start-up.
Requirements (checked here, not in the timed tests): the seed parses in < 50 ms, and
`choreo check` of the seed takes < 250 ms end to end (wall time of the new process; the
CPU time is printed beside it, since other work on a shared machine stretches the wall
time). Without bytecode caching (PYTHONDONTWRITEBYTECODE=1) every run also compiles the
package's sources, which is reported.
"""
from __future__ import annotations

import argparse
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from choreo_py import frontend  # noqa: E402
from choreo_py.diagnostics import ChoreoError  # noqa: E402

SEED = ROOT / "examples" / "flash_atten_causal.co"
SEED_LIMIT_MS = 50.0
CHECK_LIMIT_MS = 250.0   # `choreo check SEED` as a new process, start-up included


def _time(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1000.0


def _processes(argv: list[str], n: int) -> list[tuple[float, float]]:
    """(wall, CPU) times (ms) of `n` runs of `python argv...` from the repository root; the
    CPU time (user + system of the child) does not grow when other work shares the cores."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = []
    for _ in range(n):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        subprocess.run([sys.executable, *argv], cwd=ROOT, env=env, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wall = (time.perf_counter() - t0) * 1000.0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000.0
        out.append((wall, cpu))
    return out


def startup(n: int) -> None:
    _processes(["-m", "choreo_py.cli", "check", str(SEED)], 1)   # warms the parser cache
    runs = {
        "python -c pass": ["-c", "pass"],
        "import choreo_py.cli": ["-c", "import choreo_py.cli"],
        f"choreo check {SEED.name}": ["-m", "choreo_py.cli", "check", str(SEED)],
    }
    times = {name: [] for name in runs}
    for _ in range(n):   # interleaved, so that a slow spell of the machine hits all three
        for name, argv in runs.items():
            times[name] += _processes(argv, 1)
    bytecode = "off (PYTHONDONTWRITEBYTECODE)" if sys.dont_write_bytecode else "on"
    print(f"process start-up ({n} runs each, bytecode caching {bytecode}; wall, then CPU):")
    med = {}
    for name, ts in times.items():
        wall, cpu = [t[0] for t in ts], [t[1] for t in ts]
        med[name] = statistics.median(wall), statistics.median(cpu)
        print(f"  {name:36s} median {med[name][0]:6.0f} ms  (min {min(wall):.0f}); "
              f"CPU {med[name][1]:5.0f} ms")
    (bare, _), (imp, _), (whole, whole_cpu) = med.values()
    print(f"  `choreo check` end to end: {whole:.0f} ms (limit {CHECK_LIMIT_MS:.0f} ms; "
          f"CPU {whole_cpu:.0f} ms): interpreter {bare:.0f}, imports {imp - bare:.0f}, "
          f"the check itself {whole - imp:.0f}")
    return whole


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", default=str(ROOT.parent / "shared" / "corpus" / "tests"))
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--processes", type=int, default=10,
                    help="runs of each process for the start-up figures (0: skip them)")
    args = ap.parse_args()

    first = _time(lambda: frontend.parse_file(str(SEED)))
    seed = [_time(lambda: frontend.parse_file(str(SEED))) for _ in range(args.repeat)]
    med = statistics.median(seed)
    print(f"machine: {platform.machine()} {platform.processor() or ''} python {platform.python_version()}")
    print(f"seed {SEED.name}: first parse (parser load included) {first:.1f} ms; "
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

    whole = startup(args.processes) if args.processes > 0 else None

    failed = med >= SEED_LIMIT_MS or (whole is not None and whole >= CHECK_LIMIT_MS)
    print(f"{'FAIL' if med >= SEED_LIMIT_MS else 'OK'}: seed parse median {med:.2f} ms "
          f"(limit {SEED_LIMIT_MS} ms)")
    if whole is not None:
        print(f"{'FAIL' if whole >= CHECK_LIMIT_MS else 'OK'}: `choreo check` of the seed "
              f"{whole:.0f} ms end to end (limit {CHECK_LIMIT_MS:.0f} ms)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
