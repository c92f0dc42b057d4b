"""sm_100a (Blackwell) backend: the lowering core plus tcgen05 and tensor memory.

`lower_module(module, source_name)` returns the pyptx module text of the
file's kernel (lower.py); descriptors.py, tmem_plan.py and emit.py hold the
hardware math, handwritten_fa.py the reference kernel it was shaped after.
"""
from .lower import ARCH, lower_module

__all__ = ["ARCH", "lower_module"]
