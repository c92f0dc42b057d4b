"""Faults the emulator reports, in the user's terms.

Every report names the PTX line (number and text) and, where the PTX
carries `// file.co:N` comments, the Choreo statement it comes from. A
race names both instructions; a deadlock lists every warp and what it
waits on.
"""
from __future__ import annotations

from typing import Optional

from choreo_py.diagnostics import Diagnostic
from choreo_py.source import Loc


class EmuError(Exception):
    """A fault of the emulated program (race, deadlock, misuse, unsupported form)."""

    kind = "error"

    def __init__(self, message: str, where: str = "", details: Optional[list] = None) -> None:
        super().__init__(message)
        self.message = message
        self.where = where
        self.details = details or []

    def render(self) -> str:
        head = f"{self.where}: " if self.where else ""
        lines = [f"{head}{self.kind}: {self.message}"]
        lines += [f"  {d}" for d in self.details]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.render()


class RaceError(EmuError):
    kind = "race"


class DeadlockError(EmuError):
    kind = "deadlock"


class MisuseError(EmuError):
    kind = "error"


class UnsupportedError(EmuError):
    kind = "unsupported"


class HostProgramModule(UnsupportedError):
    """A generated module of several entries (a host program's) where one kernel's is needed."""


class StepLimitError(EmuError):
    kind = "step limit"


class MemoryFault(EmuError):
    """An access outside memory. Where the PTX names the element access of the program it
    lowers (`at`, "path.co:N:C": the lowering's `// at` comments), the report stands there,
    as a compiler's error does (the source line, a caret), the instruction after it."""

    kind = "error"

    def __init__(self, message: str, where: str = "", details: Optional[list] = None,
                 at: Optional[str] = None) -> None:
        super().__init__(message, where, details)
        self.at = at

    @property
    def loc(self) -> Optional[Loc]:
        if not self.at:
            return None
        file, line, col = self.at.rsplit(":", 2)
        return Loc(file, int(line), int(col))

    def render(self) -> str:
        loc = self.loc
        if loc is None:
            return super().render()
        lines = [Diagnostic("error", self.message, loc).render()]
        lines += [f"  {d}" for d in self.details]
        return "\n".join(lines)


def where(inst, ptx_name: str) -> str:
    """`kernel.ptx:123 (flash_atten.co:45)`."""
    if inst is None:
        return ptx_name
    co = f" ({inst.co})" if inst.co else ""
    return f"{ptx_name}:{inst.line}{co}"


def show(inst, ptx_name: str) -> str:
    """`kernel.ptx:123 (flash_atten.co:45): <instruction>`."""
    return f"{where(inst, ptx_name)}: {inst.text}"
