"""Host-only C++ programs over CUTLASS's CuTe headers: find the headers, build, cache.

CuTe's descriptor and layout code is constexpr C++ that runs on the host too; the
`nvidia-cutlass` wheel ships the headers (a test tool, not a dependency of the
compiler). bench/desc_crosscheck.py generates the programs; this module compiles each
source text once (g++ or $CXX, host code only) into the temp directory.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

INSTALL = "pip install nvidia-cutlass==4.2.0"


class Missing(RuntimeError):
    """A tool the cross-check needs is absent (the message says how to get it)."""


def cutlass_include() -> Path:
    try:
        import cutlass_library
    except ImportError:
        raise Missing(f"CUTLASS's headers are not installed ({INSTALL})") from None
    inc = Path(cutlass_library.__file__).parent / "source" / "include"
    if not (inc / "cute" / "arch" / "mma_sm100_desc.hpp").is_file():
        raise Missing(f"{inc} has no cute/arch/mma_sm100_desc.hpp ({INSTALL})")
    return inc


def _cuda_includes() -> list:
    """cutlass.h includes <cuda/std/...> (CCCL, shipped with the CUDA toolkit)."""
    roots = [os.environ.get("CUDA_HOME", ""), "/usr/local/cuda"]
    nvcc = shutil.which("nvcc")
    if nvcc:
        roots.append(str(Path(nvcc).resolve().parent.parent))
    for r in filter(None, roots):
        inc = Path(r) / "include"
        for cccl in (inc / "cccl", inc):
            if (cccl / "cuda" / "std" / "utility").is_file():
                return [str(inc), str(cccl)]
    raise Missing("the CUDA toolkit's headers (cuda/std/utility) were not found: set CUDA_HOME")


def build(source: str) -> Path:
    """Compile the program (host code only) once per source text, cached in the temp dir."""
    cxx = shutil.which(os.environ.get("CXX", "g++")) or shutil.which("c++")
    if cxx is None:
        raise Missing("no C++ compiler (g++) on PATH")
    inc = cutlass_include()
    flags = ["-std=c++17", "-O0", "-w", f"-I{inc}"] + [f"-I{p}" for p in _cuda_includes()]
    key = hashlib.sha256("\0".join([source, cxx, *flags]).encode()).hexdigest()[:16]
    cache = Path(tempfile.gettempdir()) / "choreo_desc_cutlass"
    exe = cache / f"umma_{key}"
    if exe.is_file():
        return exe
    cache.mkdir(parents=True, exist_ok=True)
    src = cache / f"umma_{key}.cpp"
    src.write_text(source)
    tmp = exe.with_suffix(f".{os.getpid()}")
    r = subprocess.run([cxx, *flags, str(src), "-o", str(tmp)], capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError(f"building {src} failed:\n{r.stderr[-4000:]}")
    os.replace(tmp, exe)
    return exe
