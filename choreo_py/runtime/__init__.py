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

from .kernel import ChoreoFunction, ChoreoRuntimeError, load

__all__ = ["ChoreoFunction", "ChoreoRuntimeError", "load"]
