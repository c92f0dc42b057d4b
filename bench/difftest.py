"""Differential testing: random valid programs, four opinions of each, compared.

    python3 bench/difftest.py -n 2000 --seed 0 -j 2 --out /tmp/difftest
    python3 bench/difftest.py --only 1234 -v           # one program, its source and results

Each program of bench/difftest_gen.py (deterministic from its seed) is checked
(`choreo check --strict`: a program the generator meant as valid that fails is a
generator bug, counted as `invalid`), then run four ways on the same inputs:
  ref      the generator's own evaluation (Python/numpy, C semantics: the third opinion)
  interp   the interpreter (choreo_py.interpret)
  sm_90a   compiled to PTX for sm_90a, run in the PTX emulator (choreo_py.emulate_program)
  sm_100a  the same for sm_100a
Outputs are compared bit for bit (NaNs equal whatever their payload) except where an
approximate operation feeds an element: there the generator's per-element bound applies
(difftest_gen.APPROX documents each op's). Outcomes:
  agree      every side that ran gives the reference's result
  disagree   a side gives another result, or faults (race, deadlock, step limit,
             out-of-bounds) where the reference has a result; saved to --out
  known:NAME a disagreement in a program with a form a known open bug covers
             (KNOWN_BUGS: the program's features name it); saved too
  refused    a side refuses the program by name (a form not lowered for a target, not
             modelled by the emulator, not supported by the interpreter): counted per
             reason, not a disagreement
  crashed    an exception that is not a located refusal or a fault (a traceback), or
             the per-program time limit
  invalid    `choreo check --strict` rejects a generated program (a generator bug)
"""
from __future__ import annotations

import argparse
import collections
import json
import multiprocessing
import os
import re
import signal
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import numpy as np  # noqa: E402

import difftest_gen  # noqa: E402

SIDES = ("interp", "sm_90a", "sm_100a")
INTERP_STEPS = 400_000
EMU_STEPS = 4_000_000
TIME_LIMIT_S = 120

#: Open bugs a program's features identify: feature -> the bug's name. A disagreement in
#: a program with the feature is counted as that bug, not as a new one. (The assignment
#: rule's bug, an inner block's `x = e` of an enclosing immutable x making a new binding,
#: was one until main fixed it: such an assignment is now refused, and the generator
#: assigns mutables only, in inner blocks and loops as much as anywhere.)
KNOWN_BUGS: dict[str, str] = {}


class Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise Timeout()


# ---------------------------------------------------------------- one program

def check_strict(path: str) -> str | None:
    """`choreo check --strict`: None if the program passes, else the first message."""
    from choreo_py import check, frontend
    from choreo_py.diagnostics import ChoreoError, take_warnings

    try:
        program = frontend.parse_file(path, (), None)
        frontend.check_parse_rules(program)
        check.check_program(program, strict=True)
        frontend.check_program(program)
    except ChoreoError as err:
        take_warnings()
        return err.render()
    found = take_warnings()
    return found[0].render() if found else None


def reason_of(err: BaseException) -> str:
    """A refusal's reason without its location and names, for counting."""
    text = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
    text = re.sub(r"^.*?:\d+:\d+: (error: )?", "", text)
    text = re.sub(r"'[^']*'", "'…'", text)
    text = re.sub(r"\b\d+\b", "#", text)
    return text[:160]


def to_torch(prog):
    """The program's inputs as CPU tensors (bf16 ones converted from their f32 arrays)."""
    import torch

    out = {}
    for k, v in prog.inputs.items():
        t = torch.from_numpy(v.copy())
        out[k] = t.to(torch.bfloat16) if k in prog.bf16 else t
    return out


def to_numpy(t):
    import torch

    return t.float().numpy() if t.dtype == torch.bfloat16 else t.numpy()


def run_side(side: str, path: str, prog) -> tuple[str, object]:
    """('ok', outputs) | ('refused', reason) | ('fault', message) | ('crash', traceback)."""
    from choreo_py import emulate_program, interpret
    from choreo_py.diagnostics import ChoreoError
    from choreo_py.emu.report import EmuError, UnsupportedError
    from choreo_py.interp.errors import InterpError

    tensors = to_torch(prog)
    try:
        if side == "interp":
            lib = interpret(path, step_limit=INTERP_STEPS)
        else:
            lib = emulate_program(path, target=side, step_limit=EMU_STEPS)
        getattr(lib, prog.function)(*tensors.values())
    except Timeout:
        raise
    except InterpError as err:
        return "fault", f"{type(err).__name__}: {err}"
    except UnsupportedError as err:
        return "refused", "emulator: " + reason_of(err)
    except EmuError as err:
        return "fault", f"{type(err).__name__}: {err}"
    except ChoreoError as err:
        return "refused", f"{side}: " + reason_of(err)
    except Exception:  # noqa: BLE001 - the crash is the finding
        return "crash", traceback.format_exc()
    return "ok", {k: to_numpy(tensors[k]) for k in prog.outputs}


def same(ref: np.ndarray, got: np.ndarray, tol) -> np.ndarray:
    """Per element: equal bit for bit (NaN = NaN), or within tol where tol > 0."""
    if ref.dtype.kind != "f":
        return ref == got
    a, b = ref.astype(np.float64), got.astype(np.float64)
    nan = np.isnan(a) & np.isnan(b)
    bits = ref.view(np.uint16 if ref.itemsize == 2 else np.uint32) == got.view(
        np.uint16 if got.itemsize == 2 else np.uint32)
    ok = bits | nan
    if tol is not None:
        with np.errstate(all="ignore"):
            ok |= (tol > 0) & (np.abs(a - b) <= tol)
    return ok


def differences(prog, results: dict) -> dict:
    """side -> description of how its outputs differ from the reference (absent: same)."""
    out = {}
    for side, (status, val) in results.items():
        if status == "fault":
            out[side] = f"fault: {val[:600]}"
            continue
        if status != "ok" or prog.expected is None:
            continue
        msgs = []
        for name in prog.outputs:
            ok = same(prog.expected[name], val[name], prog.tolerance.get(name))
            if not ok.all():
                bad = np.flatnonzero(~ok.reshape(-1))
                i = bad[:4]
                msgs.append(f"{name}: {len(bad)} of {ok.size} differ; at {i.tolist()}: "
                            f"ref {prog.expected[name].reshape(-1)[i].tolist()} "
                            f"got {val[name].reshape(-1)[i].tolist()}")
        if msgs:
            out[side] = "; ".join(msgs)
    return out


def run_one(seed: int, workdir: str, family: str | None = None) -> dict:
    t0 = time.time()
    res = {"seed": seed, "status": "agree", "refusals": [], "diff": {}, "times": {}}
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(TIME_LIMIT_S)
    try:
        prog = difftest_gen.generate(seed, family)
        res["family"], res["features"], res["note"] = prog.family, sorted(prog.features), prog.note
        res["_prog"] = prog
        path = os.path.join(workdir, f"dt{seed}.co")
        Path(path).write_text(prog.source)
        bad = check_strict(path)
        if bad:
            res.update(status="invalid", detail=bad)
            return res
        results = {}
        for side in SIDES:
            ts = time.time()
            results[side] = run_side(side, path, prog)
            res["times"][side] = round(time.time() - ts, 3)
        crashes = {s: v for s, (st, v) in results.items() if st == "crash"}
        res["refusals"] = [v for st, v in results.values() if st == "refused"]
        diff = differences(prog, results)
        res["diff"] = diff
        if crashes:
            res.update(status="crashed", detail=crashes)
        elif diff:
            known = [KNOWN_BUGS[f] for f in prog.features if f in KNOWN_BUGS]
            res["status"] = f"known:{known[0].split(' ')[0]}" if known else "disagree"
        elif all(st == "refused" for st, _ in results.values()):
            res["status"] = "refused"
        res["_results"] = results
        return res
    except Timeout:
        res.update(status="crashed", detail={"time": f"over {TIME_LIMIT_S} s"})
        return res
    except Exception:  # noqa: BLE001 - a generator crash
        res.update(status="crashed", detail={"generator": traceback.format_exc()})
        return res
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
        res["time"] = round(time.time() - t0, 3)


def save(res: dict, out: Path) -> Path:
    """A finding's folder: program, seed, inputs, every side's outputs, the report."""
    d = out / f"{res['status'].replace(':', '_')}_{res['seed']}"
    d.mkdir(parents=True, exist_ok=True)
    prog = res.get("_prog")
    if prog is not None:
        (d / "program.co").write_text(prog.source)
        np.savez(d / "inputs.npz", **prog.inputs)
        if prog.expected is not None:
            np.savez(d / "ref.npz", **prog.expected)
        for side, (st, val) in res.get("_results", {}).items():
            if st == "ok":
                np.savez(d / f"{side}.npz", **val)
    (d / "report.json").write_text(json.dumps(public(res), indent=1, default=str))
    return d


def public(res: dict) -> dict:
    return {k: v for k, v in res.items() if not k.startswith("_")}


# ---------------------------------------------------------------- many programs

def _worker(args):
    seed, workdir, family = args
    return run_one(seed, workdir, family)


def summarize(results: list[dict], elapsed: float) -> dict:
    status = collections.Counter(r["status"] for r in results)
    reasons = collections.Counter(x for r in results for x in r["refusals"])
    sides_refused = collections.Counter()
    for r in results:
        for x in r["refusals"]:
            sides_refused[x.split(":")[0]] += 1
    return {"programs": len(results), "status": dict(status), "refusals": dict(reasons.most_common()),
            "refusals_by_side": dict(sides_refused), "seconds": round(elapsed, 1)}


def run_many(seeds, jobs: int = 1, out: Path | None = None, family: str | None = None,
             verbose: bool = False) -> tuple[list[dict], dict]:
    t0 = time.time()
    results = []
    with tempfile.TemporaryDirectory(prefix="difftest") as workdir:
        tasks = [(s, workdir, family) for s in seeds]
        if jobs > 1:
            with multiprocessing.get_context("fork").Pool(jobs, maxtasksperchild=50) as pool:
                it = pool.imap_unordered(_worker, tasks)
                results = [report(r, out, verbose) for r in it]
        else:
            results = [report(_worker(t), out, verbose) for t in tasks]
    return results, summarize(results, time.time() - t0)


def report(res: dict, out: Path | None, verbose: bool) -> dict:
    st = res["status"]
    if st not in ("agree", "refused"):
        where = save(res, out) if out else None
        detail = res.get("diff") or res.get("detail")
        print(f"[{st}] seed {res['seed']} ({res.get('family')}): {str(detail)[:400]}"
              + (f" -> {where}" if where else ""), flush=True)
    elif verbose:
        print(f"[{st}] seed {res['seed']} {res.get('note', '')} {res['times']} {res['refusals']}", flush=True)
    res.pop("_prog", None)
    res.pop("_results", None)
    return res


def replay(folder: Path) -> int:
    """A saved finding run again by the current compiler (the generator may have changed
    since: the folder has the program and its data)."""
    rep = json.loads((folder / "report.json").read_text())
    inputs = dict(np.load(folder / "inputs.npz"))
    ref = dict(np.load(folder / "ref.npz")) if (folder / "ref.npz").exists() else None
    fam = rep.get("family")
    fn = "gemm" if fam == "mma" else "k"
    outputs = tuple(ref) if ref else ()
    prog = difftest_gen.Program(rep["seed"], fam, (folder / "program.co").read_text(), fn, inputs,
                                outputs, ref, {}, set(rep.get("features", ())), rep.get("note", ""),
                                ("A", "B", "C") if "mma:bf16" in rep.get("features", ()) else ())
    results = {side: run_side(side, str(folder / "program.co"), prog) for side in SIDES}
    diff = differences(prog, results)
    for side, (st, val) in results.items():
        print(f"{side}: {st}" + (f" {str(val)[:300]}" if st != "ok" else "") + (f"  DIFF {diff[side]}" if side in diff else ""))
    return 1 if diff or any(st == "crash" for st, _ in results.values()) else 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", type=int, default=100, help="programs (seeds S .. S+n-1)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--only", type=int, help="one seed: print its program and results")
    ap.add_argument("-j", "--jobs", type=int, nargs="?", const=os.cpu_count(), default=1)
    ap.add_argument("--family", choices=sorted(difftest_gen.FAMILIES))
    ap.add_argument("--out", type=Path, default=Path("difftest_findings"))
    ap.add_argument("--json", type=Path, help="write every program's result here")
    ap.add_argument("-v", "--verbose", action="store_true")
    ap.add_argument("--replay", type=Path, help="a saved finding's folder: run its program.co "
                    "on its inputs.npz again, every side against its ref.npz")
    args = ap.parse_args(argv)
    if args.replay:
        return replay(args.replay)
    if args.only is not None:
        prog = difftest_gen.generate(args.only, args.family)
        print(prog.source)
        print(prog.note, sorted(prog.features))
        seeds = [args.only]
    else:
        seeds = range(args.seed, args.seed + args.n)
    results, summary = run_many(seeds, args.jobs, args.out, args.family, args.verbose)
    if args.json:
        args.json.write_text(json.dumps(results, indent=0, default=str))
    print(json.dumps(summary, indent=1))
    bad = sum(v for k, v in summary["status"].items() if k in ("disagree", "crashed", "invalid"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
