"""sm_100a (Blackwell) backend: the lowering core plus tcgen05 and tensor memory.

`TARGET` is the core's Target for this folder (lowering/core/target_base.py;
lower.py: the tcgen05 target with the hooks it needs); runtime/build.py makes
one from the record of choreo_py/targets.py whose `backend` is "sm100".
descriptors.py holds the hardware math. Where each fragment sits in tensor
memory is an IR fact (the kernel's `tmem` map, from the pass
choreo_py/passes/tmem_plan.py): the backend reads it. The reference kernel it
was shaped after is in bench/reference/.
"""
from .lower import Sm100Lowering

TARGET = Sm100Lowering

__all__ = ["TARGET"]
