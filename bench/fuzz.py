"""Mutation fuzzing of the whole compiler: `check`, then `compile --emit ptx`, then ptxas.

    python3 bench/fuzz.py -n 20000 --jobs 2 --out /tmp/fuzz   # the long run
    python3 bench/fuzz.py -n 200 --examples-only                # a quick look

Mutants of the examples, tests/co and the reference compiler's corpus ($CHOREO_SHARED
or ../shared/corpus): token edits (truncation, deletion, duplication, swaps, random
bytes), line edits (a statement dropped, duplicated, moved) and value edits (numbers
replaced by edge values such as -1, 65536, 2^32, 1e39f; operators swapped; names
replaced by others of the file or by names the generated module uses). Mutant i of a
seed is always the same program, so every finding can be reproduced with `--only i`.

Each mutant runs `choreo check` and, where that passes, `choreo compile --emit ptx`
for one target (alternating), and PTX that compiles is assembled by ptxas. Findings:
  traceback   an exception escaped the command line
  exit3       an internal error (exit status 3)
  timeout     a command ran past --timeout seconds
  unlocated   an error without `file:line:col:` (or `file:` for the whole file)
  ptxas       PTX we produced that ptxas rejects
The report counts them (0 is the goal for each) and writes the first few of each
kind, input and messages, to --out.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import multiprocessing
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from choreo_py.runtime.build import find_ptxas  # noqa: E402  (the project's one ptxas lookup)

TOKEN = re.compile(r"\s+|[A-Za-z_]\w*|\d[\w.]*|\S")
NUMBER = re.compile(r"\d[\w.]*")
NAME = re.compile(r"[A-Za-z_]\w*")
EDGE_NUMBERS = ["0", "1", "2", "3", "-1", "7", "64", "65536", "4294967296",
                "99999999999999999999", "1e39f", "1e300", "0.5f", "2"]
OPERATORS = ["+", "-", "*", "/", "%", "<", ">", "==", "!=", "&&", "||"]
GENERATED_NAMES = ["u32", "s32", "f32", "pred", "ptx", "reg", "kernel", "ENTRY", "grid",
                   "smem", "KERNEL", "range"]
LOCATED = re.compile(r"^(?:.+?):\d+:\d+: error: |^(?:.+?\.co\w*): error: ", re.M)
KINDS = ("traceback", "exit3", "timeout", "unlocated", "ptxas")
TARGETS = ("sm_90a", "sm_100a")


# ---------------------------------------------------------------- sources and mutants

def corpus_dir() -> Path | None:
    base = Path(os.environ.get("CHOREO_SHARED") or ROOT.parent / "shared") / "corpus"
    return base if base.is_dir() else None


def sources(examples_only: bool = False) -> list[Path]:
    """The programs to mutate: the examples and tests/co first, then the corpus."""
    own = sorted((ROOT / "examples").glob("*.co")) + sorted((ROOT / "tests" / "co").glob("*.co"))
    corpus = corpus_dir()
    if examples_only or corpus is None:
        return own
    return own + sorted(corpus.rglob("*.co"))


def pick_source(files: list[Path], n_own: int, rng: random.Random) -> Path:
    """Half the mutants from the repository's own programs (the ones that compile),
    half from the corpus (the language's breadth)."""
    if n_own == len(files) or rng.random() < 0.5:
        return files[rng.randrange(n_own)]
    return files[rng.randrange(n_own, len(files))]


def _token_edit(toks: list[str], rng: random.Random) -> None:
    i, j = rng.randrange(len(toks)), rng.randrange(len(toks))
    kind = rng.randrange(5)
    if kind == 0:
        del toks[i]
    elif kind == 1:
        toks.insert(i, toks[i])
    elif kind == 2:
        toks[i], toks[j] = toks[j], toks[i]
    elif kind == 3:
        junk = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 6)))
        toks.insert(i, junk.decode("latin-1"))
    else:
        toks[i] = rng.choice(toks)


def _value_edit(toks: list[str], rng: random.Random) -> None:
    kind = rng.randrange(3)
    pattern = (NUMBER, None, NAME)[kind]
    if kind == 1:
        places = [k for k, t in enumerate(toks) if t in OPERATORS]
    else:
        places = [k for k, t in enumerate(toks) if pattern.fullmatch(t)]
    if not places:
        return _token_edit(toks, rng)
    k = rng.choice(places)
    if kind == 0:
        toks[k] = rng.choice(EDGE_NUMBERS)
    elif kind == 1:
        toks[k] = rng.choice(OPERATORS)
    else:
        names = [t for t in toks if NAME.fullmatch(t)]
        toks[k] = rng.choice(GENERATED_NAMES if rng.random() < 0.3 else names)


def _line_edit(text: str, rng: random.Random) -> str:
    lines = text.splitlines(True)
    if len(lines) < 2:
        return text
    i = rng.randrange(len(lines))
    kind = rng.randrange(3)
    if kind == 0:
        del lines[i]
    elif kind == 1:
        lines.insert(i, lines[i])
    else:
        j = min(i + 1, len(lines) - 1)
        lines[i], lines[j] = lines[j], lines[i]
    return "".join(lines)


def mutate(text: str, rng: random.Random) -> str:
    """One to three edits of `text`, chosen by `rng`."""
    if not text:
        return text
    choice = rng.random()
    if choice < 0.05:
        return text[: rng.randrange(len(text))]
    if choice < 0.35:
        return _line_edit(text, rng)
    toks = TOKEN.findall(text)
    for _ in range(rng.choice((1, 1, 2, 3))):
        (_value_edit if rng.random() < 0.6 else _token_edit)(toks, rng)
    return "".join(toks)


def mutant(seed: int, index: int, files: list[Path], n_own: int) -> tuple[Path, str]:
    """Mutant `index` of `seed`: (its source file, its text). Deterministic."""
    rng = random.Random(f"choreo-fuzz:{seed}:{index}")
    src = pick_source(files, n_own, rng)
    return src, mutate(src.read_text(encoding="utf-8", errors="replace"), rng)


# ---------------------------------------------------------------- running one

class _Timeout(BaseException):
    """Not an Exception: the command line's last-resort handler must not catch it."""


def _alarm(signum, frame):
    raise _Timeout


def _cli(argv: list[str]) -> tuple[int | str, str]:
    """Runs the command line in this process: (exit status or 'traceback', stderr)."""
    from choreo_py import cli

    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        try:
            rc = cli.main(argv)
        except SystemExit as e:
            rc = e.code if isinstance(e.code, int) else 2
        except _Timeout:
            raise
        except BaseException as e:  # noqa: BLE001 - what the fuzzer looks for
            return "traceback", f"{type(e).__name__}: {e}\n{err.getvalue()}"
    return rc, err.getvalue()


def _assemble(ptx_path: Path, target: str) -> str | None:
    """ptxas's complaint about our PTX, or None when it assembles."""
    exe = find_ptxas()
    if exe is None:
        return None
    res = subprocess.run([exe, f"-arch={target}", str(ptx_path), "-o", os.devnull],
                         capture_output=True, text=True, timeout=120)
    return None if res.returncode == 0 else res.stderr.strip()[:2000]


def run_one(path: Path, include_dir: Path, target: str, timeout: float) -> dict:
    """check, then compile to PTX and assemble; the findings of this mutant."""
    from choreo_py.source import SOURCES

    found = {"kind": None, "stage": None, "message": "", "compiled": False, "assembled": False}
    inc = ["-I", str(include_dir)]
    ptx = path.with_suffix(".ptx")
    signal.signal(signal.SIGALRM, _alarm)
    stage = "check"
    try:
        signal.setitimer(signal.ITIMER_REAL, timeout)
        rc, err = _cli(["check", str(path)] + inc)
        if rc == 0:
            stage = "compile"
            rc, err = _cli(["compile", str(path), "--target", target, "--emit", "ptx", "-o",
                            str(ptx)] + inc)
        signal.setitimer(signal.ITIMER_REAL, 0)
    except _Timeout:
        found.update(kind="timeout", stage=stage, message=f"{stage} ran past {timeout} s")
        return found
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        for name in list(SOURCES._texts):  # keep the process small over 20,000 mutants
            if name.startswith(str(path.parent)):
                SOURCES._texts.pop(name, None)
    found["stage"] = stage
    if rc == "traceback":
        found.update(kind="traceback", message=err)
    elif rc == 3:
        found.update(kind="exit3", message=err)
    elif rc == 1 and not LOCATED.search(err):
        found.update(kind="unlocated", message=err)
    elif rc == 0 and stage == "compile":
        found["compiled"] = True
        complaint = _assemble(ptx, target)
        if complaint is not None:
            found.update(kind="ptxas", message=complaint)
        else:
            found["assembled"] = find_ptxas() is not None
    ptx.unlink(missing_ok=True)
    return found


# ---------------------------------------------------------------- the campaign

_STATE: dict = {}


def _init(seed: int, examples_only: bool, workdir: str, timeout: float) -> None:
    os.environ.setdefault("CHOREO_PY_NO_CACHE", "")
    files = sources(examples_only)
    n_own = len(sorted((ROOT / "examples").glob("*.co")) + sorted((ROOT / "tests" / "co").glob("*.co")))
    _STATE.update(seed=seed, files=files, n_own=n_own, workdir=Path(workdir), timeout=timeout)


def _work(index: int) -> dict:
    st = _STATE
    src, text = mutant(st["seed"], index, st["files"], st["n_own"])
    path = st["workdir"] / f"m{index}.co"
    path.write_text(text, encoding="utf-8", errors="replace")
    target = TARGETS[index % 2]
    start = time.perf_counter()
    try:
        found = run_one(path, src.parent, target, st["timeout"])
    finally:
        path.unlink(missing_ok=True)
    found.update(index=index, source=str(src.relative_to(src.parents[2]) if len(src.parents) > 2
                                         else src), target=target,
                 seconds=round(time.perf_counter() - start, 3))
    if found["kind"]:
        found["text"] = text
    return found


def campaign(n: int, seed: int = 0, jobs: int = 2, examples_only: bool = False,
             timeout: float = 10.0, only: list[int] | None = None, progress=None) -> dict:
    """Runs mutants 0..n-1 (or `only`); returns the counts and the findings."""
    indices = only if only is not None else list(range(n))
    counts = {k: 0 for k in KINDS}
    counts.update(mutants=0, checked_ok=0, compiled=0, assembled=0)
    findings: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="choreo_fuzz_") as workdir:
        args = (seed, examples_only, workdir, timeout)
        if jobs > 1:
            ctx = multiprocessing.get_context("fork")
            pool = ctx.Pool(jobs, initializer=_init, initargs=args, maxtasksperchild=2000)
            results = pool.imap_unordered(_work, indices, chunksize=4)
        else:
            _init(*args)
            pool, results = None, map(_work, indices)
        try:
            for r in results:
                counts["mutants"] += 1
                counts["checked_ok"] += r["stage"] == "compile"
                counts["compiled"] += r["compiled"]
                counts["assembled"] += r["assembled"]
                if r["kind"]:
                    counts[r["kind"]] += 1
                    findings.append(r)
                    if progress:
                        first = (r["message"].strip().splitlines() or [""])[0][:160]
                        print(f"found {r['kind']} #{r['index']} {r['source']} {r['target']}: "
                              f"{first}", flush=True)
                if progress and counts["mutants"] % progress == 0:
                    print(json.dumps(counts), flush=True)
        finally:
            if pool is not None:
                pool.terminate()
    return {"counts": counts, "findings": sorted(findings, key=lambda f: f["index"])}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=20000, help="mutants to run (default 20000)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--timeout", type=float, default=10.0, help="seconds per mutant")
    ap.add_argument("--examples-only", action="store_true",
                    help="mutate the repository's programs only, not the corpus")
    ap.add_argument("--only", type=int, nargs="*", help="run these mutant indices")
    ap.add_argument("--out", help="folder for the report and the findings' inputs")
    args = ap.parse_args()
    start = time.perf_counter()
    res = campaign(args.n, args.seed, args.jobs, args.examples_only, args.timeout, args.only,
                   progress=500)
    counts = res["counts"]
    counts["seconds"] = round(time.perf_counter() - start, 1)
    print(json.dumps(counts))
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "report.json").write_text(json.dumps(res, indent=1))
        for f in res["findings"][:200]:
            (out / f"{f['kind']}-{f['index']}.co").write_text(f.get("text", ""))
            (out / f"{f['kind']}-{f['index']}.txt").write_text(
                f"source {f['source']} target {f['target']} stage {f['stage']}\n{f['message']}")
    for f in res["findings"][:20]:
        first = (f["message"].strip().splitlines() or [""])[0][:160]
        print(f"{f['kind']:<10} #{f['index']} {f['source']} {f['target']}: {first}")
    bad = sum(counts[k] for k in KINDS)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
