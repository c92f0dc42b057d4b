"""sm_100a (Blackwell) backend: the lowering core plus tcgen05 and tensor memory.

`lower_module(module, source_name)` returns the pyptx module text of the
file's kernel (lower.py); descriptors.py holds the hardware math. Where each
fragment sits in tensor memory is an IR fact (the kernel's `tmem` map, from
the pass choreo_py/passes/tmem_plan.py): the backend reads it. The reference
kernel it was shaped after is in bench/reference/.
"""
from .lower import ARCH, lower_module, lower_program

__all__ = ["ARCH", "lower_module", "lower_program"]
