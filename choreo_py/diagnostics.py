"""Diagnostics: `file:line:col: error: message`, the source line, a caret.

Program errors are raised as `ChoreoError` (or collected in a `Diagnostics`
and raised together); the command line turns them into exit status 1.
Anything else escaping a stage is an internal error (exit status 3).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .source import SOURCES, Loc, SourceManager


@dataclass
class Diagnostic:
    severity: str  # "error" | "warning" | "note"
    message: str
    loc: Loc | None = None
    notes: list["Diagnostic"] = field(default_factory=list)

    def render(self, sources: SourceManager = SOURCES) -> str:
        out = [_render_one(self.severity, self.message, self.loc, sources)]
        out += [n.render(sources) for n in self.notes]
        return "\n".join(out)


def _render_one(severity: str, message: str, loc: Loc | None, sources: SourceManager) -> str:
    if loc is None:
        return f"{severity}: {message}"
    head = f"{loc}: {severity}: {message}"
    line = sources.line(loc)
    if line is None:
        return head
    # Keep tabs so that the caret lines up under the same column in a terminal.
    pad = "".join(ch if ch == "\t" else " " for ch in line[: max(loc.col - 1, 0)])
    return f"{head}\n{line}\n{pad}^"


class ChoreoRuntimeError(ValueError):
    """A call that does not fit the kernel (wrong dtype, shape, device, layout)."""


class UsageError(Exception):
    """Arguments that do not fit the program (missing dimensions, unknown names)."""


class ChoreoError(Exception):
    """One or more errors in the user's program.

    `str()` is the located report a compiler prints (`file:line:col: error:
    message`, the source line, a caret; every diagnostic), so that an error
    raised through the Python API reads as the command line's; `.file`,
    `.line`, `.col` locate the first error, `.message` is its text alone.
    """

    def __init__(self, message: str | None = None, loc: Loc | None = None,
                 diagnostics: list[Diagnostic] | None = None) -> None:
        self.diagnostics = list(diagnostics or [])
        if message is not None:
            self.diagnostics.insert(0, Diagnostic("error", message, loc))
        super().__init__(self.diagnostics[0].message if self.diagnostics else "error")

    @property
    def loc(self) -> Loc | None:
        return self.diagnostics[0].loc if self.diagnostics else None

    @property
    def message(self) -> str:
        return self.diagnostics[0].message if self.diagnostics else ""

    @property
    def file(self) -> str | None:
        return self.loc.file if self.loc is not None else None

    @property
    def line(self) -> int | None:
        return self.loc.line if self.loc is not None else None

    @property
    def col(self) -> int | None:
        return self.loc.col if self.loc is not None else None

    def __str__(self) -> str:
        return self.render() if self.diagnostics else super().__str__()

    def render(self, sources: SourceManager = SOURCES) -> str:
        return "\n".join(d.render(sources) for d in self.diagnostics)


class Diagnostics:
    """Collects errors of one stage so that several are reported at once."""

    def __init__(self, limit: int = 20) -> None:
        self.items: list[Diagnostic] = []
        self.limit = limit

    def error(self, message: str, loc: Loc | None = None) -> None:
        self.items.append(Diagnostic("error", message, loc))
        if len(self.errors) >= self.limit:
            self.raise_if_errors()

    def warning(self, message: str, loc: Loc | None = None) -> None:
        self.items.append(Diagnostic("warning", message, loc))

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.items if d.severity == "error"]

    def raise_if_errors(self) -> None:
        if self.errors:
            raise ChoreoError(diagnostics=self.errors)


class InternalError(Exception):
    """A bug in the compiler; `where` names what was being processed."""

    def __init__(self, message: str, where: Loc | None = None) -> None:
        super().__init__(message)
        self.where = where


class ChoreoWarning(UserWarning):
    """A warning about a program, as the Python API issues it (`choreo_py.load`, the
    interpreter, the emulator); the command line prints the same text."""


#: Warnings reported while processing the current command; the CLI prints them.
WARNINGS: list[Diagnostic] = []


def warn(message: str, loc: Loc | None = None) -> None:
    WARNINGS.append(Diagnostic("warning", message, loc))


#: Errors that may explain later ones, reported only with them: a quoted `#include` that
#: was not found is harmless in host code but the cause of "'BN' is not declared" when
#: it held Choreo code, so the command line prints it first when the program has errors.
CAUSES: list[Diagnostic] = []


def possible_cause(message: str, loc: Loc | None = None) -> None:
    CAUSES.append(Diagnostic("error", message, loc))


def take_causes() -> list[Diagnostic]:
    out = list(CAUSES)
    CAUSES.clear()
    return out


def take_warnings() -> list[Diagnostic]:
    out = list(WARNINGS)
    WARNINGS.clear()
    return out


def did_you_mean(name: str, candidates) -> str:
    """" (did you mean 'x'?)" when a candidate is a likely misspelling of `name`, else ""."""
    import difflib

    close = difflib.get_close_matches(name, sorted(set(candidates) - {name}), n=1, cutoff=0.7)
    return f" (did you mean '{close[0]}'?)" if close else ""
