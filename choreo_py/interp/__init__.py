"""Reference interpreter: runs tile-IR kernels on the CPU with torch tensors.

It executes the concurrency of a kernel, not just its arithmetic: every role
instance is a cooperatively scheduled thread, asynchronous copies and MMAs
complete after their issue, events count arrivals per generation, and the
interpreter reports deadlocks, data races (by happens-before) and event
protocol faults. Fragments follow the wgmma ownership model (see
fragments.py), so a missing cross-thread reduction gives a wrong result.
Per-thread code (`parallel r by N : thread` bodies of plain scalar code:
scalars, loops, conditionals, element reads and stores, barriers) runs for
all N threads at once as tensor lanes, one torch operation a statement for
every thread, a lane-dependent branch or loop under a lane mask, with races
between threads reported (lanes.py, lane_races.py). A body whose block
barriers sit inside loops or conditionals (a tree reduction) runs as guarded
lanes: the threads' scalar arithmetic bit for bit, and one thread per
instance instead on any fault or a barrier that only some threads reach, so
that its reports are the threads'. Bodies with waits, triggers, copies, MMAs,
roles, nested regions, prints, `break`/`continue` or local buffers run as one
cooperative thread per instance.

`interpret(path, tensors)` runs a `.co` file's kernels in place (api.py);
`choreo run` fills inputs and compares with a reference (command.py,
checks.py).
"""
from .errors import (DeadlockError, EventError, FutureError, InterpError, RaceError,
                     StepLimitError)
from .runner import RunStats, interpret_module, run_kernel, static_counts
from .api import ChoreoWarning, UsageError, interpret, load_module

__all__ = [
    "run_kernel", "interpret_module", "static_counts", "RunStats", "InterpError",
    "DeadlockError", "RaceError", "EventError", "FutureError", "StepLimitError",
    "interpret", "load_module", "UsageError", "ChoreoWarning",
]
