"""The slots of `__tma_sync`: where a synchronous `tma.load` of an MMA kernel waits.

The pass sync-copies (passes/sync_copies.py) gives an MMA kernel with
synchronous TMA loads one event, `__tma_sync`, with a slot per load (an
mbarrier each); slot i is the i-th synchronous load of the kernel body in walk
order. The pass sizes the event by this rule and the backends arm and wait the
slots by it, so the rule is the IR's, here.
"""
from __future__ import annotations

from . import TmaLoad, walk

SYNC_EVENT = "__tma_sync"


def sync_loads(stmts: list) -> list:
    """The synchronous TMA loads of a kernel body, in the order of their event slots."""
    return [s for s in walk(stmts) if isinstance(s, TmaLoad) and s.future is None]
