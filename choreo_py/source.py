"""Source files and locations.

Every AST node and every diagnostic carries a `Loc` that points into an
original file (never into preprocessed text), so that errors inside macro
expansions and included files still name the line the user wrote.
"""
from __future__ import annotations

import codecs
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


class UnreadableSource(ValueError):
    """A source file whose bytes are not Choreo text (not UTF-8, a NUL); `loc` is the first
    offending character. The preprocessor, which reads every file, reports it located."""

    def __init__(self, message: str, loc: Loc, shown: str) -> None:
        super().__init__(message)
        self.message, self.loc, self.shown = message, loc, shown


#: Byte-order marks of encodings other than UTF-8, longest first (UTF-32 LE starts as UTF-16 LE).
_WIDE_BOMS = ((codecs.BOM_UTF32_BE, "utf-32-be", "UTF-32"), (codecs.BOM_UTF32_LE, "utf-32-le",
              "UTF-32"), (codecs.BOM_UTF16_BE, "utf-16-be", "UTF-16"),
              (codecs.BOM_UTF16_LE, "utf-16-le", "UTF-16"))


def decode_source(name: str, data: bytes) -> str:
    """The text of a source file's bytes, for every read of one (main file and includes).

    Choreo source is UTF-8, as for the C++ compilers that read its host code; a UTF-8
    byte-order mark is dropped. Another encoding is refused, not guessed: read as UTF-8,
    UTF-16 text is NULs between letters, which lexes as nothing and would silently check as
    a file without functions. Line ends are made `\n` (see `normalize_source`)."""
    for bom, codec, label in _WIDE_BOMS:
        if data.startswith(bom):
            shown = normalize_lines(data[len(bom):].decode(codec, errors="replace"))
            raise UnreadableSource(f"the file is not UTF-8 (it starts with a {label} byte-order "
                                   f"mark): save it as UTF-8", Loc(name, 1, 1), shown)
    if data.startswith(codecs.BOM_UTF8):
        data = data[len(codecs.BOM_UTF8):]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        shown = normalize_lines(data.decode("utf-8", errors="replace"))
        before = normalize_lines(data[:e.start].decode("utf-8"))
        raise UnreadableSource(f"the file is not UTF-8 (byte 0x{data[e.start]:02x} here "
                               f"is not valid UTF-8): save it as UTF-8",
                               _loc_at(name, before, len(before)), shown) from None
    return normalize_source(name, text)


def normalize_lines(text: str) -> str:
    """Every line end as `\n`: CRLF (Windows) and a lone CR (classic Mac OS) too, as C
    compilers accept them; else a CR-only file would be one line, and its first `#define`
    would swallow the rest."""
    return text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text


def normalize_source(name: str, text: str) -> str:
    """Source text as the preprocessor reads it: line ends normalized, no NUL.

    A NUL is refused wherever it is (in code, a comment, a string): it is no character of
    C or Choreo source, a C string cannot hold it, and a file of NULs is binary data."""
    text = normalize_lines(text)
    at = text.find("\0")
    if at >= 0:
        wide = text.count("\0") * 4 >= len(text)
        hint = (" (the file may be UTF-16 without a byte-order mark: save it as UTF-8)"
                if wide and len(text) > 1 else "")
        raise UnreadableSource(f"a NUL character (U+0000) in the source{hint}",
                               _loc_at(name, text, at), text.replace("\0", "\ufffd"))
    return text


def _loc_at(name: str, text: str, offset: int) -> Loc:
    line = text.count("\n", 0, offset) + 1
    return Loc(name, line, offset - (text.rfind("\n", 0, offset) + 1) + 1)


class SourceManager:
    """Caches the text of every file read, for diagnostics that quote lines."""

    def __init__(self) -> None:
        self._texts: dict[str, str] = {}
        self._lines: dict[str, list[str]] = {}  # split once: diagnostics quote many lines

    def add(self, name: str, text: str) -> None:
        self._texts[name] = text
        self._lines.pop(name, None)

    def read(self, path: str | Path) -> str:
        key = str(path)
        if key not in self._texts:
            try:
                self._texts[key] = decode_source(key, Path(path).read_bytes())
            except UnreadableSource as e:
                self._texts[key] = e.shown
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
        lines = self._lines.get(loc.file)
        if lines is None:
            lines = self._lines[loc.file] = text.splitlines()
        if 1 <= loc.line <= len(lines):
            return lines[loc.line - 1]
        return None


#: One manager per process is enough: file contents do not change under us.
SOURCES = SourceManager()
