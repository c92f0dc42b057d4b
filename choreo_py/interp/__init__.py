"""Reference interpreter: runs tile-IR kernels on the CPU with torch tensors.

It executes the concurrency of a kernel, not just its arithmetic: every role
instance is a cooperatively scheduled thread, asynchronous copies and MMAs
complete after their issue, events count arrivals per generation, and the
interpreter reports deadlocks, data races (by happens-before) and event
protocol faults. Fragments follow the wgmma ownership model (see
fragments.py), so a missing cross-thread reduction gives a wrong result.
"""
from .errors import (DeadlockError, EventError, FutureError, InterpError, RaceError,
                     StepLimitError)
from .runner import RunStats, interpret_module, run_kernel, static_counts

__all__ = [
    "run_kernel", "interpret_module", "static_counts", "RunStats", "InterpError",
    "DeadlockError", "RaceError", "EventError", "FutureError", "StepLimitError",
]
