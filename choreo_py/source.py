"""Source files and locations.

Every AST node and every diagnostic carries a `Loc` that points into an
original file (never into preprocessed text), so that errors inside macro
expansions and included files still name the line the user wrote.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, order=True)
class Loc:
    """A position in an original source file; line and col are 1-based."""

    file: str
    line: int
    col: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


@dataclass(frozen=True)
class Span:
    """A half-open range [start, end) of one file."""

    start: Loc
    end: Loc

    def __str__(self) -> str:
        return str(self.start)


class SourceManager:
    """Caches the text of every file read, for diagnostics that quote lines."""

    def __init__(self) -> None:
        self._texts: dict[str, str] = {}

    def add(self, name: str, text: str) -> None:
        self._texts[name] = text

    def read(self, path: str | Path) -> str:
        key = str(path)
        if key not in self._texts:
            self._texts[key] = Path(path).read_text(encoding="utf-8", errors="replace")
        return self._texts[key]

    def has(self, name: str) -> bool:
        return name in self._texts

    def line(self, loc: Loc) -> str | None:
        """The source line `loc` points into, without its newline."""
        text = self._texts.get(loc.file)
        if text is None:
            try:
                text = self.read(loc.file)
            except OSError:
                return None
        lines = text.splitlines()
        if 1 <= loc.line <= len(lines):
            return lines[loc.line - 1]
        return None


#: One manager per process is enough: file contents do not change under us.
SOURCES = SourceManager()
