"""Running compiled Choreo kernels on torch tensors.

    f = choreo_py.load("examples/flash_atten_causal.co", target="sm_90a")
    f(q, k, v, o)          # the function's parameters, in order (outputs included)

`load` compiles the file's kernel once (CPU: lowering, pyptx trace); the
first call on a device assembles it with ptxas and loads it there. A
call binds the symbolic dimensions (B, Q_SEQ, ...) from the tensors'
shapes, checks dtypes, shapes, contiguity and device, builds the TMA
tensor maps and launches on torch's current stream. The generated code is
shape-generic (dimensions are kernel parameters), so one compiled kernel
per device serves every shape.
"""
from __future__ import annotations

from typing import Iterable, Optional

from . import kernel
from .kernel import ChoreoFunction, ChoreoRuntimeError

__all__ = ["ChoreoFunction", "ChoreoRuntimeError", "load"]


def load(path: str, target: Optional[str] = None, include_dirs: Iterable[str] = (),
         defines: Optional[dict] = None, function: Optional[str] = None,
         autotune: Optional[dict] = None, key: Optional[Iterable[str]] = None,
         **tune_options):
    """`kernel.load` (the compiled kernel or library); with `autotune={"BN": [64, 128],
    ...}`, an `autotune.Autotuned` instead: a callable that picks the fastest
    configuration per shape `key` on its first call for it (runtime/autotune.py;
    `tune_options`: timer, verbose, rtol, check_size)."""
    if autotune is None:
        if key is not None or tune_options:
            given = ", ".join(["key"] * (key is not None) + sorted(tune_options))
            raise TypeError(f"load(): {given} only go with autotune=")
        return kernel.load(path, target, include_dirs, defines, function)
    if function is not None:
        raise ValueError("autotune takes a file of one kernel; function= names one of a "
                         "host program's functions")
    from .autotune import Autotuned

    return Autotuned(path, autotune, key, target=target, include_dirs=include_dirs,
                     defines=defines, **tune_options)
