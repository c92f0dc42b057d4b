"""Compile time of the seed to PTX for sm_100a, against ptxas alone on that PTX.

    python bench/compile.py [--repeat 10] [--target sm_100a] [--file examples/...co]

Three numbers, each the median of --repeat runs:

- in-process: `compile_file(seed, emit="ptx")` in a warm interpreter (the first
  call, which also imports and builds the grammar tables, is reported apart),
  with its stages: parse, sema -> tile IR, lowering -> pyptx text, pyptx trace -> PTX;
- subprocess: `python -m choreo_py compile --emit ptx FILE -o OUT`, what a user
  waits for (interpreter start and imports included);
- ptxas: `ptxas -arch=sm_100a` on the same PTX (to a cubin), for scale.

Each subprocess is also timed as CPU time (user + system of the child, which a loaded
machine inflates far less than wall time) and as a ratio to the CPU time of
`python -c "import choreo_py"` measured in the same run, so that neither a busy machine
fakes a regression nor hides one. Children write and read bytecode caches, as an
installed package does (PYTHONDONTWRITEBYTECODE is dropped for them). Goals (issue 25): seed -> PTX <= 0.25 s CPU, -> cubin
<= 0.35 s, `choreo check` <= 0.15 s, whole process. Requirement checked here (not in the
tests): the subprocess compile of the seed to PTX takes < 1 s. Prints PASS or FAIL.

    python bench/compile.py --cache [--repeat 5] [--target sm_90a]

The kernel cache instead (runtime/cache.py): `choreo_py.load(FILE)` then the
cubin (`.cubin()`, ptxas included) in a new process, first with an empty cache
folder, then again in another new process with the folder the first one
filled; each timed inside the process (imports apart) and as the whole
process. With --launch (on a GPU) the timed part also includes the first call
of the kernel on CUDA tensors (module load and launch).
"""
from __future__ import annotations

import argparse
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SEED = ROOT / "examples" / "flash_atten_causal.co"
LIMIT_S = 1.0


def _timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def _stages(path: str, target: str) -> dict:
    """One in-process compile, stage by stage (seconds)."""
    from choreo_py import driver, frontend
    from choreo_py.runtime import build

    t = {}
    t["parse"], program = _timed(lambda: frontend.parse_file(path))
    t["sema"], module = _timed(lambda: driver.build_ir(program, target))
    t["lower"], text = _timed(lambda: build.pyptx_text(module, path, target))
    t["trace"], _ = _timed(lambda: build.run_module(text).ptx())
    return t


def _median(xs):
    return statistics.median(xs)


def _child_env() -> dict:
    """The children's environment: bytecode caches written and read, as after `pip
    install`. PYTHONDONTWRITEBYTECODE (set in some shells and CI images) would make every
    child compile every module of the package from source: about 1.7x the CPU time of
    `choreo compile` to PTX here, which is not what an installed compiler costs."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def _child_cpu(cmd, env=None) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one run of `cmd` in a new process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    res = subprocess.run(cmd, cwd=ROOT, capture_output=True, env=env)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if res.returncode:
        raise SystemExit(f"{' '.join(map(str, cmd))} failed:\n{res.stderr.decode()}")
    return (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime), wall


def _cpu_table(args, tmp: str) -> None:
    """Whole-process CPU time of each command, median of --repeat, beside the import."""
    py = sys.executable
    cmds = {
        "python -c pass": [py, "-c", "pass"],
        "import choreo_py": [py, "-c", "import choreo_py"],
        "choreo check": [py, "-m", "choreo_py", "check", args.file],
        "compile -> PTX": [py, "-m", "choreo_py", "compile", "--target", args.target,
                           "--emit", "ptx", args.file, "-o", os.path.join(tmp, "k.ptx")],
    }
    if build_has_ptxas():
        cmds["compile -> cubin"] = [py, "-m", "choreo_py", "compile", "--target", args.target,
                                    "--emit", "cubin", args.file, "-o",
                                    os.path.join(tmp, "k.cubin")]
    goals = {"choreo check": 0.15, "compile -> PTX": 0.25, "compile -> cubin": 0.35}
    env = _child_env()
    for cmd in cmds.values():             # untimed: writes the bytecode caches
        _child_cpu(cmd, env)
    rows = {name: [] for name in cmds}
    for _ in range(args.repeat):          # interleaved, so load changes hit every row alike
        for name, cmd in cmds.items():
            rows[name].append(_child_cpu(cmd, env))
    base = _median([c for c, _ in rows["import choreo_py"]])
    print(f"CPU time, whole process, median of {args.repeat} (interleaved; bytecode caches "
          f"written and read, as after pip install):")
    for name, runs in rows.items():
        cpu, wall = _median([c for c, _ in runs]), _median([w for _, w in runs])
        goal = goals.get(name)
        verdict = "" if goal is None else (f"  goal <= {goal:.2f} s: "
                                           f"{'met' if cpu <= goal else 'not met'}")
        print(f"  {name:<18} {cpu * 1000:6.0f} ms CPU ({cpu / base:4.2f}x import choreo_py; "
              f"wall {wall * 1000:.0f} ms){verdict}")


def build_has_ptxas() -> bool:
    from choreo_py.runtime import build

    return build.find_ptxas() is not None


# One load in a fresh process: prints "<import s> <load+cubin s> <from_cache>".
_LOAD_SNIPPET = """
import sys, time
t0 = time.perf_counter()
c0 = time.process_time()
import choreo_py, torch
t1 = time.perf_counter()
c1 = time.process_time()
k = choreo_py.load(sys.argv[1], target=sys.argv[2])
k.cubin()
c2 = time.process_time()
if sys.argv[3] == "launch":
    import fa_inputs_for_bench as fib
    fib.first_call(k)
t2 = time.perf_counter()
print(t1 - t0, t2 - t1, k.from_cache, c2 - c1)
"""


def _cache_timing(args) -> int:
    """First load (empty cache) vs second load (filled cache), each in a new process."""
    rows = {"first": [], "second": []}
    with tempfile.TemporaryDirectory(prefix="choreo_cache_bench_") as tmp:
        for i in range(args.repeat):
            env = dict(_child_env(), CHOREO_PY_CACHE_DIR=os.path.join(tmp, f"c{i}"))
            env.pop("CHOREO_PY_NO_CACHE", None)
            env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "bench"), env.get("PYTHONPATH", "")])
            for which in ("first", "second"):
                cmd = [sys.executable, "-c", _LOAD_SNIPPET, args.file, args.target,
                       "launch" if args.launch else "-"]
                wall, res = _timed(lambda: subprocess.run(cmd, cwd=ROOT, env=env,
                                                          capture_output=True, text=True))
                if res.returncode:
                    print(res.stderr, file=sys.stderr)
                    return 2
                imp, load, hit, cpu = res.stdout.split()
                if hit != ("True" if which == "second" else "False"):
                    print(f"{which} load: from_cache={hit}, expected the opposite", file=sys.stderr)
                    return 1
                rows[which].append((float(imp), float(load), wall, float(cpu)))
    what = "load + cubin" + (" + first launch" if args.launch else "")
    for which, runs in rows.items():
        print(f"{which} load ({'empty' if which == 'first' else 'filled'} cache), new process: "
              f"{what} {_median([r[1] for r in runs]) * 1000:.0f} ms "
              f"(imports {_median([r[0] for r in runs]) * 1000:.0f} ms, whole process "
              f"{_median([r[2] for r in runs]) * 1000:.0f} ms; load + cubin alone "
              f"{_median([r[3] for r in runs]) * 1000:.0f} ms CPU), median of {len(runs)}")
    speedup = _median([r[1] for r in rows["first"]]) / _median([r[1] for r in rows["second"]])
    print(f"cache: the second load takes 1/{speedup:.1f} of the first")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--file", default=str(SEED))
    ap.add_argument("--target", default="sm_100a", choices=("sm_100a", "sm_90a"))
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--cache", action="store_true",
                    help="time the kernel cache: first vs second load() in new processes")
    ap.add_argument("--launch", action="store_true",
                    help="with --cache: include the first call on a GPU (needs CUDA)")
    args = ap.parse_args()
    if args.cache:
        print(f"machine: {platform.machine()} {os.cpu_count()} cpus, python "
              f"{platform.python_version()}; {Path(args.file).name} -> {args.target}")
        return _cache_timing(args)
    from choreo_py.driver import compile_file
    from choreo_py.runtime import build

    print(f"machine: {platform.machine()} {os.cpu_count()} cpus, python "
          f"{platform.python_version()}; {Path(args.file).name} -> {args.target} PTX, "
          f"median of {args.repeat}")
    first, ptx = _timed(lambda: compile_file(args.file, "ptx", args.target))
    warm = [_timed(lambda: compile_file(args.file, "ptx", args.target))[0]
            for _ in range(args.repeat)]
    stages = [_stages(args.file, args.target) for _ in range(args.repeat)]
    parts = ", ".join(f"{k} {_median([s[k] for s in stages]) * 1000:.0f}"
                      for k in ("parse", "sema", "lower", "trace"))
    print(f"in-process: first call {first * 1000:.0f} ms (backend imports, grammar tables); "
          f"warm {_median(warm) * 1000:.0f} ms ({parts} ms)")

    with tempfile.TemporaryDirectory(prefix="choreo_bench_") as tmp:
        out = os.path.join(tmp, "seed.ptx")
        cmd = [sys.executable, "-m", "choreo_py", "compile", "--target", args.target,
               "--emit", "ptx", args.file, "-o", out]
        sub = []
        for _ in range(args.repeat):
            dt, res = _timed(lambda: subprocess.run(cmd, cwd=ROOT, capture_output=True,
                                                   env=_child_env()))
            if res.returncode:
                print(res.stderr.decode(), file=sys.stderr)
                return 2
            sub.append(dt)
        print(f"subprocess (choreo compile --emit ptx): {_median(sub) * 1000:.0f} ms "
              f"(min {min(sub) * 1000:.0f}, max {max(sub) * 1000:.0f})")

        exe = build.find_ptxas()
        if exe:
            cubin = os.path.join(tmp, "seed.cubin")
            pcmd = [exe, f"-arch={args.target}", out, "-o", cubin]
            pt = [_timed(lambda: subprocess.run(pcmd, capture_output=True, check=True))[0]
                  for _ in range(args.repeat)]
            print(f"ptxas -arch={args.target} on that PTX ({len(ptx.splitlines())} lines): "
                  f"{_median(pt) * 1000:.0f} ms")
        else:
            print("ptxas: not on PATH")
        _cpu_table(args, tmp)
    ok = _median(sub) < LIMIT_S
    print(f"{'PASS' if ok else 'FAIL'}: compile to PTX {_median(sub) * 1000:.0f} ms "
          f"{'<' if ok else '>='} {LIMIT_S * 1000:.0f} ms")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
