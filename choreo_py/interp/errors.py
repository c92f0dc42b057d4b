"""Errors the reference interpreter reports about a running program.

All are `ChoreoError`s: they are faults of the program (a deadlock, a data
race, a broken event protocol), located at the statement that exposed them,
with notes pointing at the other statements involved.
"""
from __future__ import annotations

from ..diagnostics import ChoreoError, Diagnostic
from ..source import Loc


class InterpError(ChoreoError):
    """A program fault found while interpreting a kernel."""

    def __init__(self, message: str, loc: Loc | None = None,
                 notes: list[tuple[str, Loc | None]] | None = None) -> None:
        diag = Diagnostic("error", message, loc,
                          [Diagnostic("note", text, where) for text, where in notes or []])
        super().__init__(diagnostics=[diag])

    @property
    def locs(self) -> list[Loc]:
        """Every location the report names: the main one, then the notes'."""
        d = self.diagnostics[0]
        return [x for x in [d.loc] + [n.loc for n in d.notes] if x is not None]


class DeadlockError(InterpError):
    """Every role of a block is blocked and no pending operation can wake one."""


class RaceError(InterpError):
    """Two accesses to the same data, at least one a write, not ordered by synchronisation."""


class EventError(InterpError):
    """An event protocol fault: a generation overrun, an early pass, a stray arrival."""


class FutureError(InterpError):
    """A future waited or bound twice, or used before it was issued."""


class StepLimitError(InterpError):
    """The block executed more statements than the step limit allows."""
