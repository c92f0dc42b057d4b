"""sm_90a (Hopper) backend: the lowering core plus wgmma (wgmma.py).

`TARGET` is the core's Target for this folder (lowering/core/target_base.py):
runtime/build.py makes one from the record of choreo_py/targets.py whose
`backend` is "sm90", and lowering/core/program.py lowers the file with it. The
hand-written kernels the generated code was shaped after are references, in
bench/reference/.
"""
from __future__ import annotations

from .wgmma import Sm90Target

TARGET = Sm90Target

__all__ = ["TARGET"]
