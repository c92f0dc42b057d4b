"""sm_90a (Hopper) backend: the lowering core plus wgmma (wgmma.py).

`lower_module(module, source_name)` returns the pyptx module text of the
file's kernel. The hand-written kernels the generated code was shaped
after are references, in bench/reference/.
"""
from __future__ import annotations

from choreo_py import ir

from ..core.program import lower_module as _lower_module
from ..core.program import lower_program_module
from .wgmma import Sm90Target

ARCH = "sm_90a"


def lower_module(module: ir.Module, source_name: str) -> str:
    return _lower_module(module, Sm90Target(), source_name)


def lower_program(module: ir.Module, source_name: str) -> str:
    """Every kernel as an entry of `KERNELS` (a host program's module: core/program.py)."""
    return lower_program_module(module, Sm90Target(), source_name)
