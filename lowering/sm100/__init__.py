"""sm_100a (Blackwell) backend: the lowering core plus tcgen05 and tensor memory.

`lower_module(module, source_name)` returns the pyptx module text of the
file's kernel (lower.py); descriptors.py and tmem_plan.py hold the hardware
math; the reference kernel it was shaped after is in bench/reference/.
"""
from .lower import ARCH, lower_module, lower_program

__all__ = ["ARCH", "lower_module", "lower_program"]
