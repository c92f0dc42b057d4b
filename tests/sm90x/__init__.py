"""A backend folder outside the package: the lowering unit of tests/test_new_target.py.

What a folder of lowering/ holds, at its smallest: `TARGET`, the core's Target
subclass (lowering/core/target_base.py). Its record (sm_90a's facts under the
name sm_90x) is the test's, given to targets.register with this unit. It
overrides no hook: the base's defaults are a target without an MMA unit, which
lowers thread kernels and refuses MMAs by name.
"""
from __future__ import annotations

from choreo_py.lowering.core.target_base import Target


class Sm90xTarget(Target):
    """sm_90a's facts under another name, and the core's defaults for every hook."""


TARGET = Sm90xTarget
