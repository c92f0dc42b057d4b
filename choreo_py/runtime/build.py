"""From tile IR to pyptx text, PTX and cubin for one target (CPU only).

    pyptx  the generated Python module (lowering/<arch>)
    ptx    that module run: `KERNEL.ptx()` traces the kernel function
    cubin  the PTX assembled by ptxas (-arch=<target>)
"""
from __future__ import annotations

import os
import re
from typing import Optional
import subprocess
import sys
import tempfile
from dataclasses import dataclass

from choreo_py import ir, targets
from choreo_py.diagnostics import ChoreoError, InternalError, warn

from .toolchain import find_ptxas  # noqa: F401  (build.find_ptxas: the project's one lookup)


# The backend package of each targets.Target.backend: plain import statements (an
# edge from the IR to each backend that every tool can see), run on first use so
# that a compile loads only its own backend (~60 ms for the other one). A record
# registered from outside the package brings its unit (targets.register).
def _sm90():
    from choreo_py.lowering import sm90
    return sm90


def _sm100():
    from choreo_py.lowering import sm100
    return sm100


BACKENDS = {"sm90": _sm90, "sm100": _sm100}


def lowering(target: str):
    """The lowering's Target for `target` (lowering/core/target_base.py): the `TARGET` of
    the record's backend folder (choreo_py.lowering.<backend>), made from the record."""
    try:
        record = targets.get(target)
    except targets.UnknownTarget as e:
        raise ChoreoError(str(e)) from None
    load = BACKENDS.get(record.backend)
    unit = load() if load is not None else targets.registered_lowering(record.backend)
    if unit is None:
        raise ChoreoError(f"target '{record.name}': no backend '{record.backend}' (a folder "
                          "of lowering/, or the unit targets.register was given)")
    return unit.TARGET(record)


def refuse_host_code(module: ir.Module, target: str) -> None:
    """What the backend refuses in the functions' host code, refused before any kernel is
    lowered (a call of another `__co__` function: lowering/core/program.py)."""
    from choreo_py.lowering.core import program

    program.refuse_host_calls(module, lowering(target))


def pyptx_text(module: ir.Module, source_path: str, target: str, cooperative=()) -> str:
    """`cooperative`: tensors whose TMA copies the threads make instead (their row strides
    at run time are not 16-byte multiples; lowering/core/tma_fallback.py)."""
    from choreo_py.lowering.core import program, tma_fallback

    from . import pairing

    def lower() -> str:
        with tma_fallback.cooperative(cooperative):
            return program.lower_module(module, lowering(target), os.path.basename(source_path))
    return pairing.lower(module, target, lower, sys.modules[__name__])


def program_text(module: ir.Module, source_path: str, target: str, cooperative=()) -> str:
    """The module as a host program's kernels (`KERNELS`, an entry per kernel), also when it
    holds one MMA kernel (lowering/core/program.py); `cooperative` as for pyptx_text."""
    from choreo_py.lowering.core import program, tma_fallback

    from . import pairing

    def lower() -> str:
        with tma_fallback.cooperative(cooperative):
            return program.lower_program_module(module, lowering(target),
                                                os.path.basename(source_path))
    return pairing.lower(module, target, lower, sys.modules[__name__])


@dataclass
class Loaded:
    """The generated module, executed: its kernel and launch description."""

    namespace: dict

    def __getattr__(self, name):
        try:
            return self.namespace[name]
        except KeyError:
            raise AttributeError(name) from None

    def ptx(self) -> str:
        return _noted(self.namespace, self.namespace["KERNEL"].ptx())


def run_module(text: str, filename: str = "<choreo pyptx>") -> Loaded:
    ns: dict = {"__name__": "choreo_generated"}
    exec(compile(text, filename, "exec"), ns)  # noqa: S102 - our own generated code
    return Loaded(ns)


class LaunchModule(Loaded):
    """A one-kernel module's launch description (ARCH, ENTRY, THREADS, SMEM_BYTES, PARAMS,
    TENSORS, grid(), failed_assertions()) without its kernel function, which is most of the
    text: compiling that is what a launch served from the cache would spend its time on
    (~0.1 s for the seed), and only `ptx()` needs it (the whole module, run on first use)."""

    def __init__(self, text: str, filename: str) -> None:
        head = launch_header(text)
        if head is not None:  # the launch description needs no pyptx (its import: ~50 ms)
            head = "\n".join("" if ln.startswith(("from pyptx", "import pyptx")) else ln
                              for ln in head.split("\n"))
        ns: dict = {"__name__": "choreo_generated"}
        exec(compile(head if head is not None else text, filename, "exec"), ns)  # noqa: S102
        super().__init__(ns)
        self._text, self._filename = text, filename
        self._whole = None if head is not None else self

    def ptx(self) -> str:
        if self._text in _TRACED:  # (the pairing probe traced it)
            return _TRACED[self._text]
        if self._whole is None:
            self._whole = run_module(self._text, self._filename)
        return _noted(self.namespace, self._whole.namespace["KERNEL"].ptx())


def _noted(ns: dict, ptx: str) -> str:
    """The PTX with the module's .f32x2 verdicts (`F32X2`: runtime/pairing.py) as comments."""
    from . import pairing
    return pairing.ptx_note(ptx, ns.get("F32X2", ()))


_KERNEL_NAME = re.compile(r"^(\w+)\.__name__ = ENTRY$", re.M)


def launch_header(text: str) -> str | None:
    """The text before a one-kernel module's kernel function (lowering/core/kernel.py
    writes the launch description first, then `def <kernel>():`, then `KERNEL = ...`);
    None when the text is not of that form."""
    names = _KERNEL_NAME.findall(text)
    if len(names) != 1:
        return None
    start = text.find(f"\ndef {names[0]}():\n")
    return text[:start + 1] if start >= 0 else None


#: (PTX without its `// f32x2:` notes, arch) -> (cubin, ptxas -v report), the last few:
#: the pairing probe's assembly serves `--emit cubin` and the launch of the same PTX
_ASSEMBLED: dict = {}
_NOTES = re.compile(r"^// f32x2: [^\n]*\n", re.M)


def ptxas(ptx: str, arch: str, verbose: bool = False) -> tuple[bytes, str]:
    """Assembles PTX (always with -v; the messages are returned when `verbose`); returns
    (cubin, ptxas messages). The same PTX is assembled once per process."""
    key = (_NOTES.sub("", ptx), arch)
    if key not in _ASSEMBLED:
        if len(_ASSEMBLED) >= 8:
            _ASSEMBLED.pop(next(iter(_ASSEMBLED)))
        _ASSEMBLED[key] = _assemble(ptx, arch)
    binary, report = _ASSEMBLED[key]
    return binary, (report if verbose else "")


def _assemble(ptx: str, arch: str) -> tuple[bytes, str]:
    exe = find_ptxas()
    if exe is None:
        raise ChoreoError("--emit cubin needs ptxas (CUDA toolkit) on PATH")
    with tempfile.TemporaryDirectory(prefix="choreo_") as tmp:
        src, out = os.path.join(tmp, "kernel.ptx"), os.path.join(tmp, "kernel.cubin")
        with open(src, "w", encoding="utf-8") as fh:
            fh.write(ptx)
        cmd = [exe, f"-arch={targets.get(arch).ptxas_arch if arch in targets.TARGETS else arch}",
               src, "-o", out, "-v"]
        res = subprocess.run(cmd, capture_output=True, text=True)
        report = (res.stderr + res.stdout).replace(src, "kernel.ptx")
        if res.returncode != 0:
            raise PtxasRejection(ptx, report)
        with open(out, "rb") as fh:
            return fh.read(), report


_PTX_LINE = re.compile(r"kernel\.ptx, line (\d+);")
_SPILLS = re.compile(r"(\d+) bytes spill stores, (\d+) bytes spill loads")


class PtxasRejection(InternalError):
    """ptxas refused PTX that the compiler generated: a bug in the compiler (exit 3), not
    in the program, so the message quotes the PTX line ptxas names."""

    def __init__(self, ptx: str, report: str) -> None:
        lines = ptx.splitlines()
        quoted = []
        for n in sorted({int(m) for m in _PTX_LINE.findall(report)})[:3]:
            if 1 <= n <= len(lines):
                quoted.append(f"  PTX line {n}: {lines[n - 1].strip()}")
        super().__init__("ptxas rejected the generated PTX:\n" + report.strip()
                         + ("\n" + "\n".join(quoted) if quoted else ""))
        self.report = report


def ptxas_findings(report: str) -> list[str]:
    """What of ptxas -v's report the user should see: its warnings and any spills (each
    spilled register is a local-memory round trip in the hot loop)."""
    out = [line.split("warning", 1)[1].lstrip(" :") for line in report.splitlines()
           if "warning" in line]
    for stores, loads in _SPILLS.findall(report):
        if int(stores) or int(loads):
            out.append(f"{stores} bytes spill stores, {loads} bytes spill loads")
    return out


def _kernel_loc(module: ir.Module):
    for fn in module.functions:
        for k in fn.kernels:
            return k.loc
    return None


_ENTRY = re.compile(r"Compiling entry function '([^']+)'")


def findings_by_entry(report: str) -> list[tuple[Optional[str], str]]:
    """ptxas_findings of each entry function's part of the report, with the entry's name
    (None: the lines before the first entry), so that each is reported at its own kernel
    in a file of several."""
    parts = _ENTRY.split(report)  # [preamble, name1, part1, name2, part2, ...]
    named = [(None, parts[0])] + list(zip(parts[1::2], parts[2::2]))
    return [(name, f) for name, text in named for f in ptxas_findings(text)]


class Cubin(bytes):
    """An assembled module, with what `ptxas -v` said of it (`choreo compile` prints its
    resource line)."""

    ptxas_log: str = ""
    dynamic_smem: int = 0


def cubin(module: ir.Module, ptx: str, target: str) -> Cubin:
    """ptxas -v on our PTX: its warnings and spills become located warnings; a rejection
    is an internal error located at the kernel."""
    loc = _kernel_loc(module)
    try:
        binary, report = ptxas(ptx, target, verbose=True)
    except PtxasRejection as e:
        e.where = loc
        raise
    locs = {k.name: k.loc for fn in module.functions for k in fn.kernels}
    for entry, finding in findings_by_entry(report):
        warn(f"ptxas: {finding}", locs.get(entry) or loc)
    out = Cubin(binary)
    out.ptxas_log = report
    return out


#: module text -> its PTX, the last few (a text traced once: the pairing probe's too)
_TRACED: dict = {}


def remember_ptx(text: str, ptx: str) -> None:
    if len(_TRACED) >= 32:
        _TRACED.pop(next(iter(_TRACED)))
    _TRACED[text] = ptx


def ptx_of(text: str) -> str:
    """The PTX of a module text (traced once per process)."""
    if text not in _TRACED:
        remember_ptx(text, run_module(text).ptx())
    return _TRACED[text]


def _ptx_of(text: str) -> str:
    return ptx_of(text)


def entry_reports(report: str) -> dict:
    """entry -> its part of a ptxas -v report."""
    parts = _ENTRY.split(report)
    return dict(zip(parts[1::2], parts[2::2]))


def emit(module: ir.Module, source_path: str, emit: str, target: str):
    """`--emit pyptx|ptx|cubin`: str for the text forms, bytes for the cubin."""
    text = pyptx_text(module, source_path, target)
    if emit == "pyptx":
        return text
    ptx = _ptx_of(text)
    if emit == "ptx":
        return ptx
    if emit == "cubin":
        out = cubin(module, ptx, target)
        out.dynamic_smem = int(getattr(run_module(text), "SMEM_BYTES", 0))
        return out
    raise ChoreoError(f"unknown --emit {emit}")
