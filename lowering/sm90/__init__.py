"""sm_90a (Hopper) backend: the lowering core plus wgmma (wgmma.py).

`lower_module(module, source_name)` returns the pyptx module text of the
file's kernel. The hand-written kernels beside this file are the
references the generated code was shaped after.
"""
from __future__ import annotations

from choreo_py import ir
from choreo_py.diagnostics import ChoreoError

from ..core.kernel import lower_kernel
from .wgmma import Sm90Target

ARCH = "sm_90a"


def lower_module(module: ir.Module, source_name: str) -> str:
    found = [(f, k) for f in module.functions for k in f.kernels]
    if not found:
        raise ChoreoError("the file has no kernel (no `parallel ... : block`) to compile")
    if len(found) > 1:
        raise ChoreoError(f"a file with several kernels is not lowered for {ARCH} yet",
                          found[1][1].loc)
    fn, kernel = found[0]
    for s in fn.body:
        if not isinstance(s, ir.Launch):
            raise ChoreoError(f"host code other than launching the kernel is not lowered for "
                              f"{ARCH} yet", getattr(s, "loc", fn.loc))
    return lower_kernel(kernel, fn, Sm90Target(), source_name)
