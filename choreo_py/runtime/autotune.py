"""Autotuning: the fastest of a program's configurations (values of its `#define`s) for
each shape, as Triton's `@triton.autotune` picks one, remembered on disk.

    gemm = choreo_py.load("examples/gemm.co", autotune={"BN": [64, 128], "STAGES": [2, 3]},
                          key=["M", "N", "K"])
    gemm(a, b, c)     # the first call for this (M, N, K) tunes; later ones launch the winner

The first call for a new shape key compiles every configuration (the cross product),
skips those the compiler refuses (its own message: too much shared memory, a tile the
target cannot do) or that spill registers (ptxas's report), checks results, times the
rest (`timer`; default CUDA events, warm-up and the median of the repetitions),
launches the fastest and keeps it in memory and in the kernel cache folder
(runtime/cache.py) under a hash of the program, defines, tuning space, shape key, GPU
name, target and compiler version: a later call, in any process, launches it directly.

Results are checked twice. The first configuration that compiles runs at a small shape
(every symbolic size at most `check_size`) against the interpreter, when that shape's
tensors are few enough for the interpreter to be cheap (CHEAP_ELEMENTS; once per
configuration and small shape); one that differs is skipped and the next one checked. Then every configuration's output at the
call's own shape is compared with the first one's that ran: that covers what the small
shape cannot (the tails of large sizes) and every configuration, for one launch each.
The report says which checks ran, and why the interpreter did not.

Tuning launches each configuration many times, and kernels write in place: the written
tensors are saved first and restored before each configuration's first launch and
after tuning, so the call's effect is one launch of the winner (also for a kernel that
reads what it writes). `verbose=True` or CHOREO_PY_AUTOTUNE_VERBOSE=1 prints each
tuning's table on stderr.
"""
from __future__ import annotations

import hashlib
import itertools
import json
import math
import os
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Optional

from .launch import ChoreoRuntimeError, LaunchError
from .timing import SPIN_UP_S, event_timer, event_times  # noqa: F401  (the benchmarks import them here)

FORMAT = "choreo-py autotune 1"
VERBOSE_ENV = "CHOREO_PY_AUTOTUNE_VERBOSE"
#: The sizes of the interpreter check: every symbolic dimension at most this.
CHECK_SIZE = 128
#: The interpreter check runs only when its tensors hold at most this many elements in
#: all (a 128 x 128 x 128 GEMM holds 49152; the interpreter takes well under a second).
CHEAP_ELEMENTS = 1 << 20
_DEVICES = ("cuda", "cpu")  # what a tuned call takes: CPU tensors run in the interpreter
RTOL = 1e-2  # ||out - ref|| / ||ref|| accepted, as `choreo run`'s default
#: The configurations whose first time is within this fraction of the fastest are timed
#: again, FINAL_ROUNDS times each, interleaved: a 50 us kernel's median of 50 launches
#: moves by 1-3% from one timing to the next (clocks, the order of timing), so one pass
#: can rank two configurations a few percent apart either way.
FINAL_MARGIN = 0.05
FINALISTS = 4
FINAL_ROUNDS = 5


def configurations(space: dict) -> list[dict]:
    """The cross product of `space` ({name: [values]}), the first name varying slowest."""
    names = list(space)
    return [dict(zip(names, values)) for values in itertools.product(*space.values())]


def check_space(space, defines: dict) -> dict:
    """`space` as {name: list of values}; a malformed one is a ValueError saying why."""
    if not isinstance(space, dict) or not space:
        raise ValueError("autotune: expected a dict {define: [values, ...]}, e.g. "
                         "{'BN': [64, 128]}")
    out = {}
    for name, values in space.items():
        if not isinstance(name, str) or not name.isidentifier():
            raise ValueError(f"autotune: {name!r} is not a macro name")
        if name in defines:
            raise ValueError(f"autotune: {name} is both tuned and given in defines")
        values = [values] if isinstance(values, (str, int)) else list(values)
        if not values:
            raise ValueError(f"autotune: {name} has no values to try")
        if len(set(map(str, values))) != len(values):
            raise ValueError(f"autotune: {name} lists a value twice ({values})")
        out[name] = values
    return out


@dataclass
class Row:
    """One configuration: its time in ms, or why it was skipped."""

    config: dict
    ms: Optional[float] = None
    skipped: Optional[str] = None
    rounds: int = 1  # timings its ms is the median of (more for the finalists)


@dataclass
class Report:
    """One tuning (or the cached record of one): what `verbose` and `choreo tune` print."""

    program: str
    shape: dict
    gpu: str
    target: str
    rows: list[Row] = field(default_factory=list)
    reference: str = ""
    cached: Optional[str] = None  # the cache file it was read from
    saved: Optional[str] = None   # the cache file it was written to

    @property
    def winner(self) -> Optional[Row]:
        timed = [r for r in self.rows if r.ms is not None]
        return min(timed, key=lambda r: r.ms) if timed else None

    def table(self) -> str:
        """The configurations, one a line (time or skip reason), then checks and winner."""
        shape = " ".join(f"{k}={v}" for k, v in self.shape.items())
        head = f"autotune {self.program} [{shape}] on {self.gpu} ({self.target})"
        if self.cached:
            head += f": tuned before, read from {self.cached}"
        names = list(self.rows[0].config) if self.rows else []
        cells = [[str(r.config[n]) for n in names] for r in self.rows]
        width = [max(len(n), *(len(c[i]) for c in cells)) for i, n in enumerate(names)]
        best = self.winner
        lines = [head, "  " + "  ".join(n.ljust(w) for n, w in zip(names, width)) + "  ms"]
        for row, cell in zip(self.rows, cells):
            what = f"{row.ms:.4f}" if row.ms is not None else f"skipped: {row.skipped}"
            what += f" (median of {row.rounds} timings)" if row.rounds > 1 else ""
            mark = "  <- fastest" if row is best else ""
            lines.append("  " + "  ".join(c.ljust(w) for c, w in zip(cell, width))
                         + "  " + what + mark)
        lines.append(f"checked: {self.reference}")
        lines.append(self._verdict(best))
        return "\n".join(lines) + "\n"

    def _verdict(self, best: Optional[Row]) -> str:
        if best is None:
            return "winner: none (no configuration ran)"
        where = f" (cached in {self.saved})" if self.saved else ""
        config = " ".join(f"{k}={v}" for k, v in best.config.items())
        return f"winner: {config}, {best.ms:.4f} ms{where}"

    def as_json(self) -> dict:
        return {"program": self.program, "shape": self.shape, "gpu": self.gpu,
                "target": self.target, "reference": self.reference,
                "rows": [[r.config, r.ms, r.skipped, r.rounds] for r in self.rows]}

    @classmethod
    def from_json(cls, data: dict, cached: str) -> "Report":
        rows = [Row(*row) for row in data["rows"]]
        return cls(data["program"], data["shape"], data["gpu"], data["target"], rows,
                   data["reference"], cached=cached)


class NoConfiguration(ChoreoRuntimeError):
    """No configuration compiled and ran: the table says why for each."""


class Autotuned:
    """`load(path, autotune=space, key=names)`: a callable over torch tensors that tunes
    on the first call for each shape key (see the module docstring).

    `key` names what identifies a shape: symbolic dimensions (`M`), parameters (`A`: its
    whole shape and dtype) or defines; default every symbolic dimension. `timer(run,
    config)` returns milliseconds per call of `run` (a number, or samples whose median is
    taken); the default times CUDA events, and another one (a fake for tests) lets CPU
    tensors be tuned, their launches running in the interpreter (`kernel.op`).
    `.report` is the last tuning's (or cached record's) Report, `.winners` the chosen
    configuration of each shape key seen.
    """

    def __init__(self, path: str, space: dict, key: Optional[Iterable[str]] = None, *,
                 target: Optional[str] = None, include_dirs: Iterable[str] = (),
                 defines: Optional[dict] = None, timer: Optional[Callable] = None,
                 verbose: Optional[bool] = None, rtol: float = RTOL,
                 check_size: int = CHECK_SIZE) -> None:
        from choreo_py import targets

        self.path, self.target = path, targets.resolve(target).name
        self.include_dirs = tuple(include_dirs)
        self.defines = {k: str(v) for k, v in (defines or {}).items()}
        self.space = check_space(space, self.defines)
        self.configs = configurations(self.space)
        self.timer = timer or event_timer()
        self.verbose = bool(os.environ.get(VERBOSE_ENV)) if verbose is None else verbose
        self.rtol, self.check_size = rtol, check_size
        self.report: Optional[Report] = None
        self.winners: dict = {}   # shape key (a tuple) -> the winning configuration
        self._fns: dict = {}      # configuration index -> ChoreoFunction or skip reason
        self._by_key: dict = {}   # shape key -> ChoreoFunction
        self._checked: dict = {}  # (configuration, small shape) -> the interpreter's verdict
        _check_tuned_names(path, self.include_dirs, self.defines, self.space)
        self.signature = self._first_build()
        self.key = self._checked_key(key)

    def __repr__(self) -> str:
        space = ", ".join(f"{k}={v}" for k, v in self.space.items())
        return f"<choreo autotuned {self.signature.name} over {space} for {self.target}>"

    # ------------------------------------------------------------ call
    def __call__(self, *tensors):
        return _launch(self.best(tensors), tensors)

    def best(self, tensors) -> "object":
        """The winning ChoreoFunction for these tensors' shape key (tuning if needed)."""
        key = self.shape_key(tensors)
        fn = self._by_key.get(key)
        if fn is None:
            fn = self._by_key[key] = self._winner(key, tensors)
        return fn

    def shape_key(self, tensors) -> tuple:
        """The values the key names, for these tensors (checked as a call checks them)."""
        sig = self.signature
        dims = sig.bind(tensors, _DEVICES)
        params = {n: t for (n, _, _), t in zip(sig.meta.TENSORS, tensors)}
        out = []
        for name in self.key:
            if name in dims:
                out.append((name, int(dims[name])))
            elif name in params:
                t = params[name]
                out.append((name, f"{list(t.shape)} {str(t.dtype).removeprefix('torch.')}"))
            else:
                out.append((name, self.defines[name]))
        return tuple(out)

    def _winner(self, key: tuple, tensors):
        gpu = _device_name(tensors[0])
        record = self._cache_file(key, gpu)
        fn = self._from_cache(record, key)
        if fn is not None:
            return fn
        if getattr(self.timer, "needs_cuda", False) and not tensors[0].is_cuda:
            raise ChoreoRuntimeError("autotune: timing needs CUDA tensors (pass timer= to "
                                     "tune elsewhere)")
        report = self.tune(tensors, dict(key), gpu)
        best = report.winner
        if best is None:
            raise NoConfiguration("no configuration of the tuning space ran:\n"
                                  + report.table())
        report.saved = _write_record(record, report, best.config)
        self._show(report)
        self.winners[key] = best.config
        return self._fns[self.configs.index(best.config)]

    def _show(self, report: Report) -> None:
        self.report = report
        if self.verbose:
            sys.stderr.write(report.table())

    # ------------------------------------------------------------ cache
    def _cache_file(self, key: tuple, gpu: str) -> Optional[Path]:
        from choreo_py import frontend

        from . import cache

        root = cache.cache_dir()
        if root is None:
            return None
        unit = frontend.preprocess(self.path, self.include_dirs, self.defines or None)
        program = hashlib.sha256(f"{os.path.basename(self.path)}\0{unit.text}".encode())
        blob = json.dumps({"format": FORMAT, "program": program.hexdigest(),
                           "defines": sorted(self.defines.items()),
                           "include": list(map(str, self.include_dirs)),
                           "space": [[k, list(map(str, v))] for k, v in self.space.items()],
                           "key": [list(kv) for kv in key], "gpu": gpu, "target": self.target,
                           "compiler": cache.compiler_version()}, sort_keys=True)
        digest = hashlib.sha256(blob.encode()).hexdigest()
        return root / "autotune" / digest[:2] / f"{digest}.json"

    def _from_cache(self, record: Optional[Path], key: tuple):
        """The cached winner of this key, compiled; None when there is none (or it no
        longer compiles: then it is tuned again)."""
        try:
            data = json.loads(record.read_text(encoding="utf-8")) if record else None
        except (OSError, ValueError):
            return None
        if not data:
            return None
        stored = {k: str(v) for k, v in data.get("winner", {}).items()}
        shown = [c for c in self.configs if {k: str(v) for k, v in c.items()} == stored]
        fn = self._build(self.configs.index(shown[0])) if shown else None
        if not hasattr(fn, "meta"):
            return None
        report = Report.from_json(data["report"], str(record))
        self._show(report)
        self.winners[key] = shown[0]
        return fn

    # ------------------------------------------------------------ tuning
    def tune(self, tensors, shape: dict, gpu: str) -> Report:
        """Compiles, checks and times every configuration on `tensors`; the table."""
        rows = [Row(c) for c in self.configs]
        fns = {}
        for i, row in enumerate(rows):
            got = self._build(i)
            if isinstance(got, str):
                row.skipped = got
            else:
                fns[i] = got
        report = Report(os.path.basename(self.path), shape, gpu, self.target, rows)
        report.reference = self._interpreter_check(rows, fns, tensors)
        saved = _save_outputs(self.signature, tensors)
        try:
            self._time_all(rows, fns, tensors, saved)
            self._final_rounds(rows, fns, tensors)
        finally:
            _restore(saved)
        return report

    def _time_all(self, rows: list[Row], fns: dict, tensors, saved) -> None:
        ref, ref_i = None, None
        for i, fn in fns.items():
            row = rows[i]
            if row.skipped:
                continue
            _restore(saved)
            try:
                out = _run_once(fn, tensors)
            except (ChoreoRuntimeError, LaunchError) as e:  # its asserts; the driver's refusal
                row.skipped = f"the launch was refused: {e}"
                continue
            if ref is None:
                ref, ref_i = out, i
            elif (err := relative_error(out, ref)) > self.rtol:
                row.skipped = (f"output differs from configuration {ref_i + 1}'s "
                               f"(relative error {err:.3g})")
                continue
            row.ms = _median(self.timer(lambda: _launch(fn, tensors), row.config))

    def _final_rounds(self, rows: list[Row], fns: dict, tensors) -> None:
        """The near-fastest configurations (FINAL_MARGIN) timed again in FINAL_ROUNDS
        interleaved rounds, each round in another order; a finalist's time is the median
        of its rounds (the first pass's figure among them)."""
        timed = sorted((i for i, r in enumerate(rows) if r.ms is not None), key=lambda i: rows[i].ms)
        if not timed:
            return
        best = rows[timed[0]].ms
        final = [i for i in timed[:FINALISTS] if rows[i].ms <= best * (1 + FINAL_MARGIN)]
        if len(final) < 2:
            return
        samples = {i: [rows[i].ms] for i in final}
        for r in range(FINAL_ROUNDS):
            order = final[r % len(final):] + final[:r % len(final)]
            for i in (order if r % 2 == 0 else order[::-1]):
                fn = fns[i]
                samples[i].append(_median(self.timer(lambda: _launch(fn, tensors), rows[i].config)))
        for i in final:
            rows[i].ms, rows[i].rounds = statistics.median(samples[i]), FINAL_ROUNDS + 1

    def _interpreter_check(self, rows: list[Row], fns: dict, tensors) -> str:
        """Checks configurations in order against the interpreter until one agrees (the
        ones that differ are skipped); says what was checked."""
        cross = "every configuration's output at the call's shape against the first one's"
        for i, fn in fns.items():
            dims = {d: min(v, self.check_size) for d, v in fn.bind(tensors, _DEVICES).items()}
            memo = (i, tuple(dims.items()))  # once per configuration and small shape
            if memo not in self._checked:
                self._checked[memo] = self._against_interpreter(fn, dims, tensors[0].device)
            err, where = self._checked[memo]
            if err is None:
                return f"{cross}; the interpreter was not run ({where})"
            if err <= self.rtol:
                return (f"configuration {i + 1} against the interpreter at {where} "
                        f"(relative error {err:.2g}); {cross}")
            rows[i].skipped = (f"differs from the interpreter at {where} "
                               f"(relative error {err:.3g})")
        return "nothing: no configuration compiled"

    def _against_interpreter(self, fn, dims: dict, device) -> tuple[Optional[float], str]:
        """(relative error of `fn` against the interpreter at the small shape `dims`, the
        shape), or (None, why the interpreter was not run)."""
        from choreo_py.diagnostics import ChoreoError
        from choreo_py.interp.api import interpret

        where = " ".join(f"{d}={v}" for d, v in dims.items()) or "the call's shape"
        inputs = small_inputs(fn, dims)
        size = sum(t.numel() for t in inputs.values())
        if size > CHEAP_ELEMENTS:
            return None, (f"at {where} its tensors hold {size} elements, more than the "
                          f"{CHEAP_ELEMENTS} it is cheap for")
        expected = {n: t.clone() for n, t in inputs.items()}
        try:
            interpret(fn.path, expected, include_dirs=fn.include_dirs, defines=fn.defines,
                      target=fn.target)
        except (ChoreoError, ChoreoRuntimeError) as e:
            return None, f"it refused {where}: {str(e).splitlines()[0]}"
        run = [inputs[n].to(device) for n, _, _ in fn.meta.TENSORS]
        try:
            got = _run_once(fn, run)
        except (ChoreoRuntimeError, LaunchError) as e:
            return None, f"the kernel refused {where}: {e}"
        want = [expected[n] for n in fn.writes]
        return relative_error([g.cpu() for g in got], want), where

    # ------------------------------------------------------------ building
    def _build(self, i: int):
        """Configuration `i`'s ChoreoFunction, or why it is skipped (a string)."""
        if i not in self._fns:
            self._fns[i] = _build_one(self, self.configs[i])
        got = self._fns[i]
        return _skip_reason(got) if isinstance(got, Exception) else got

    def _first_build(self):
        """The first configuration that compiles: the function's signature (its
        parameters and dimensions, which the key and every call are checked against).
        When none compiles, the first one's error is raised: an error of the program
        shows as load() shows it."""
        for i in range(len(self.configs)):
            got = self._build(i)
            if not isinstance(got, str):
                return got
        raise self._fns[0]

    def _checked_key(self, key) -> tuple:
        sig = self.signature
        dims = [d for _, _, shape in sig.meta.TENSORS for d in shape if isinstance(d, str)]
        dims = list(dict.fromkeys(dims))
        if key is None:
            return tuple(dims)
        key = (key,) if isinstance(key, str) else tuple(key)
        params = [n for n, _, _ in sig.meta.TENSORS]
        for name in key:
            if name not in dims and name not in params and name not in self.defines:
                raise ValueError(f"key: '{name}' is none of {sig.name}'s dimensions "
                                 f"({', '.join(dims) or 'none'}), parameters "
                                 f"({', '.join(params)}) or defines "
                                 f"({', '.join(self.defines) or 'none'})")
        return key


def _build_one(tuner: Autotuned, config: dict):
    """load() with the configuration's defines, and ptxas's resources checked; the
    compiler's refusal (an exception) is returned, to be the skip reason."""
    from .kernel import ChoreoFunction, load

    defines = {**tuner.defines, **{k: str(v) for k, v in config.items()}}
    try:
        fn = load(tuner.path, tuner.target, tuner.include_dirs, defines)
        if isinstance(fn, ChoreoFunction):
            _check_resources(fn)
    except Exception as e:  # noqa: BLE001 - the refusals are kept, anything else raised
        if not _is_refusal(e):
            raise
        return e
    if not isinstance(fn, ChoreoFunction):
        raise ValueError(f"autotune: {os.path.basename(tuner.path)} is a host program "
                         "(several kernels or functions, or host code); autotune takes a "
                         "file of one kernel")
    return fn


class Spills(ChoreoRuntimeError):
    """ptxas spilled registers to local memory: the configuration is skipped."""


def _check_resources(fn) -> None:
    from .build import find_ptxas, ptxas_findings

    if find_ptxas() is None:  # (the CPU without the CUDA toolkit: PTX only)
        return
    fn.cubin()
    spills = [f for f in ptxas_findings(fn.ptxas_log) if "spill" in f]
    if spills:
        raise Spills(f"ptxas: {spills[0]} (registers exceeded)")


def _is_refusal(e: Exception) -> bool:
    from choreo_py.diagnostics import ChoreoError, InternalError

    return isinstance(e, (ChoreoError, InternalError, Spills))


def _skip_reason(e: Exception) -> str:
    """The compiler's own message, its first line (the located head of an error)."""
    from .build import PtxasRejection

    if isinstance(e, PtxasRejection):
        return "ptxas: " + (e.report.strip().splitlines() or ["rejected the PTX"])[0]
    text = str(e).strip().splitlines()
    return text[0] if text else type(e).__name__


def _check_tuned_names(path: str, include_dirs, defines: dict, space: dict) -> None:
    """Each tuned name must change the program: a plain `#define` of it in the file
    overrides the value (an error located there), and a name the file never uses
    would make every configuration the same."""
    from choreo_py import frontend
    from choreo_py.diagnostics import ChoreoError, take_warnings

    base = configurations({k: v[:1] for k, v in space.items()})[0]
    take_warnings()
    texts = {}
    for name, values in space.items():
        for value in values[:2]:
            one = {**defines, **{k: str(v) for k, v in base.items()}, name: str(value)}
            texts[(name, str(value))] = frontend.preprocess(path, include_dirs, one).text
        for w in take_warnings():
            if w.message.startswith(tuple(f"'{n}' redefined" for n in space)):
                tuned = w.message.split("'")[1]
                raise ChoreoError(f"'{tuned}' is tuned, but this #define overrides the "
                                  f"tuned values; guard it with #ifndef {tuned} ... #endif",
                                  w.loc)
        if len(values) > 1 and texts[(name, str(values[0]))] == texts[(name, str(values[1]))]:
            raise ValueError(f"autotune: {os.path.basename(path)} does not use '{name}': "
                             f"{name}={values[0]} and {name}={values[1]} give the same "
                             "program")


def _write_record(record: Optional[Path], report: Report, winner: dict) -> Optional[str]:
    """Best effort, as the kernel cache's writes: a cache that cannot be written only
    costs a tuning."""
    if record is None:
        return None
    data = {"format": FORMAT, "winner": {k: str(v) for k, v in winner.items()},
            "key": [list(kv) for kv in report.shape.items()], "report": report.as_json()}
    try:
        record.parent.mkdir(parents=True, exist_ok=True)
        tmp = record.with_name(f"{record.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True), encoding="utf-8")
        os.replace(tmp, record)
    except OSError:
        return None
    return str(record)


# ---------------------------------------------------------------- launching
def _launch(fn, tensors) -> None:
    """A CUDA launch, or on CPU tensors the kernel's operator (the interpreter)."""
    if tensors and not tensors[0].is_cuda:
        fn.op(*tensors)
    else:
        fn(*tensors)


def _run_once(fn, tensors) -> list:
    """One launch, finished; copies of the tensors it writes."""
    import torch

    _launch(fn, tensors)
    if tensors and tensors[0].is_cuda:
        torch.cuda.synchronize(tensors[0].device)
    by_name = {n: t for (n, _, _), t in zip(fn.meta.TENSORS, tensors)}
    return [by_name[w].clone() for w in fn.writes]


def _save_outputs(fn, tensors) -> list:
    names = [n for n, _, _ in fn.meta.TENSORS]
    return [(t, t.clone()) for n, t in zip(names, tensors) if n in fn.writes]


def _restore(saved: list) -> None:
    for t, copy in saved:
        t.copy_(copy)


def _median(samples) -> float:
    return float(samples if isinstance(samples, (int, float)) else statistics.median(samples))


def _device_name(t) -> str:
    if not t.is_cuda:
        return "cpu"
    import torch

    return torch.cuda.get_device_name(t.device)


def relative_error(got: list, want: list) -> float:
    """max over the outputs of ||got - want|| / ||want|| (in float64; NaN -> inf)."""
    worst = 0.0
    for g, w in zip(got, want):
        g, w = g.double(), w.double()
        diff, norm = (g - w).norm().item(), w.norm().item()
        err = diff / norm if norm else diff
        worst = max(worst, err if math.isfinite(err) else math.inf)
    return worst


def small_inputs(fn, dims: dict, seed: int = 0) -> dict:
    """Seeded CPU tensors for every parameter at `dims`: randn for floating point, 0/1
    for integer types (a value every integer type holds, down to 1 bit)."""
    import torch

    from .kernel import _TORCH_DTYPES

    g = torch.Generator().manual_seed(seed)
    out = {}
    for name, dtype, shape in fn.meta.TENSORS:
        size = [dims[d] if isinstance(d, str) else int(d) for d in shape]
        dt = getattr(torch, _TORCH_DTYPES[dtype])
        if dt.is_floating_point:
            out[name] = torch.randn(size, generator=g).to(dt)
        else:
            out[name] = torch.randint(0, 2, size, generator=g).to(dt)
    return out
