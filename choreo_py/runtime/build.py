"""From tile IR to pyptx text, PTX and cubin for one target (CPU only).

    pyptx  the generated Python module (lowering/<arch>)
    ptx    that module run: `KERNEL.ptx()` traces the kernel function
    cubin  the PTX assembled by ptxas (-arch=<target>)
"""
from __future__ import annotations

import functools
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass

from choreo_py import ir, targets
from choreo_py.diagnostics import ChoreoError


# The backend package of each targets.Target.backend: plain import statements (an
# edge from the IR to each backend that every tool can see), run on first use so
# that a compile loads only its own backend (~60 ms for the other one).
def _sm90():
    from choreo_py.lowering import sm90
    return sm90


def _sm100():
    from choreo_py.lowering import sm100
    return sm100


BACKENDS = {"sm90": _sm90, "sm100": _sm100}


def lowering(target: str):
    """The backend package that lowers the IR for `target` (choreo_py.lowering.<arch>)."""
    try:
        return BACKENDS[targets.get(target).backend]()
    except targets.UnknownTarget as e:
        raise ChoreoError(str(e)) from None


def pyptx_text(module: ir.Module, source_path: str, target: str) -> str:
    return lowering(target).lower_module(module, os.path.basename(source_path))


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
        return self.namespace["KERNEL"].ptx()


def run_module(text: str, filename: str = "<choreo pyptx>") -> Loaded:
    ns: dict = {"__name__": "choreo_generated"}
    exec(compile(text, filename, "exec"), ns)  # noqa: S102 - our own generated code
    return Loaded(ns)


def find_ptxas() -> str | None:
    """The ptxas the project uses, everywhere: the one on PATH, else the CUDA default."""
    for cand in (shutil.which("ptxas"), "/usr/local/cuda/bin/ptxas"):
        if cand and os.path.isfile(cand):
            return cand
    return None


def ptxas(ptx: str, arch: str, verbose: bool = False) -> tuple[bytes, str]:
    """Assembles PTX; returns (cubin, ptxas messages)."""
    exe = find_ptxas()
    if exe is None:
        raise ChoreoError("--emit cubin needs ptxas (CUDA toolkit) on PATH")
    with tempfile.TemporaryDirectory(prefix="choreo_") as tmp:
        src, out = os.path.join(tmp, "kernel.ptx"), os.path.join(tmp, "kernel.cubin")
        with open(src, "w", encoding="utf-8") as fh:
            fh.write(ptx)
        cmd = [exe, f"-arch={targets.get(arch).ptxas_arch if arch in targets.TARGETS else arch}",
               src, "-o", out] + (["-v"] if verbose else [])
        res = subprocess.run(cmd, capture_output=True, text=True)
        if res.returncode != 0:
            raise ChoreoError(f"ptxas rejected the generated PTX:\n{res.stderr.strip()}")
        with open(out, "rb") as fh:
            return fh.read(), (res.stderr + res.stdout).replace(src, "kernel.ptx")


@functools.lru_cache(maxsize=32)
def _ptx_of(text: str) -> str:
    return run_module(text).ptx()


def emit(module: ir.Module, source_path: str, emit: str, target: str):
    """`--emit pyptx|ptx|cubin`: str for the text forms, bytes for the cubin."""
    text = pyptx_text(module, source_path, target)
    if emit == "pyptx":
        return text
    ptx = _ptx_of(text)
    if emit == "ptx":
        return ptx
    if emit == "cubin":
        return ptxas(ptx, target)[0]
    raise ChoreoError(f"unknown --emit {emit}")
