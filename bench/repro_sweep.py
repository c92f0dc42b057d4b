"""Run every program of ../shared/repro through check and compile (both targets, then
ptxas) under the fuzz budget, and every saved emulator mutant strict, and classify
each outcome as the issue's "done" list counts them.

    python bench/repro_sweep.py [--repro ../shared/repro] [--cpu 10]

A program may be accepted or refused; what it may not do is exit 3, print a
traceback, give an error without `file:line:col`, produce PTX that ptxas rejects,
or take more than the CPU budget.  A saved PTX mutant must be reported (exit 1).
"""
from __future__ import annotations

import argparse
import re
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOCATED = re.compile(r"^\S+:\d+:\d+: error: ", re.M)


def _limit(cpu):
    return lambda: resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))


def _run(cmd, cpu):
    p = subprocess.run(cmd, capture_output=True, text=True, preexec_fn=_limit(cpu), cwd=ROOT)
    return p.returncode, p.stdout + p.stderr


def classify(rc, out):
    """The first failure class of one command's outcome, or None when it is fine."""
    if rc in (-9, -24, 137, 152) or rc < 0:
        return "slow" if rc in (-9, -24) else f"signal {rc}"
    if "Traceback" in out:
        return "traceback"
    if rc == 3:
        return "exit3"
    if rc == 1 and "error" in out and not LOCATED.search(out):
        return "unlocated"
    return None


def sweep_program(path: Path, cpu: int):
    """Check, then compile for each target and assemble: each step's class."""
    rows = []
    rc, out = _run([sys.executable, "-m", "choreo_py.cli", "check", str(path)], cpu)
    rows.append(("check", rc, classify(rc, out)))
    for target in ("sm_90a", "sm_100a"):
        with tempfile.TemporaryDirectory() as tmp:
            ptx = Path(tmp) / "x.ptx"
            rc, out = _run([sys.executable, "-m", "choreo_py.cli", "compile", str(path),
                            "--target", target, "--emit", "ptx", "-o", str(ptx)], cpu)
            bad = classify(rc, out)
            if rc == 0 and ptx.exists() and not bad:
                prc, pout = _run(["ptxas", f"-arch={target}", str(ptx), "-o", "/dev/null"], cpu)
                bad = None if prc == 0 else f"ptxas {pout.strip()[:80]}"
            rows.append((target, rc, bad))
    return rows


def sweep_ptx(path: Path, repro: Path, cpu: int):
    causal = path.name.startswith("causal")
    co = ROOT / "examples" / ("flash_atten_causal.co" if causal else "flash_atten_blackwell.co")
    extra = ["--causal"] if causal else ["NUM_SMS=1"]
    extra += ["--schedule", "greedy"] if causal or "del_bar_sync" in path.name else []
    rc, out = _run([sys.executable, str(repro / "emu" / "run_saved_ptx.py"), str(path), str(co), *extra], cpu * 30)
    return [("emulate", rc, None if rc == 1 and "reported" in out else out.strip()[-120:])]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repro", type=Path, default=ROOT.parent / "shared" / "repro")
    ap.add_argument("--cpu", type=int, default=10)
    a = ap.parse_args(argv)
    bad = 0
    for path in sorted(a.repro.rglob("*")):
        if path.suffix == ".co":
            rows = sweep_program(path, a.cpu)
        elif path.suffix == ".ptx":
            rows = sweep_ptx(path, a.repro, a.cpu)
        else:
            continue
        fails = [f"{step}: {why}" for step, _, why in rows if why]
        bad += bool(fails)
        codes = " ".join(f"{step}={rc}" for step, rc, _ in rows)
        print(f"{'FAIL' if fails else 'ok  '} {path.relative_to(a.repro)}  {codes}  {'; '.join(fails)}",
              flush=True)
    print(f"{bad} with a failure")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
