"""Splitting preprocessed text into Choreo functions, device code and host code.

A `.co` file mixes three kinds of text:

* Choreo functions: from the word `__co__` to the `}` that closes the
  function body; these are parsed.
* device code: the inside of `__cok__ { ... }` blocks, and `__device__` /
  `__co_device__` functions or declarations (from the marker to the closing
  `}` of the body, or to the `;` of a declaration); kept verbatim.
* host code: everything else (`int main`, includes, templates...); kept
  verbatim, never parsed.

The markers are recognised anywhere outside literals and comments, as whole
words, the way the reference scanner recognises them in any host context.
Brace matching skips string, character and raw-string literals and comments,
so a `}` inside `"..."` never closes a function.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from choreo_py.diagnostics import ChoreoError
from choreo_py.source import Loc

CHOREO, DEVICE, HOST = "choreo", "device", "host"


@dataclass(frozen=True)
class Segment:
    kind: str        # CHOREO | DEVICE | HOST
    start: int       # offset of the segment's text in the preprocessed unit
    text: str
    device_kind: str = ""   # "cok" or "device" for DEVICE segments


# Things to step over as a whole while scanning: literals and comments.
_SKIP = re.compile(
    r'R"(?P<d>[^()\\\s"]{0,16})\((?:.|\n)*?\)(?P=d)"'   # raw string
    r'|"(?:[^"\\\n]|\\.)*"?'                            # string (unterminated: to end of line)
    r"|'(?:[^'\\\n]|\\.){1,8}'"                        # character literal
    r"|//[^\n]*"
    r"|/\*(?:.|\n)*?(?:\*/|\Z)"
)
_MARKER = re.compile(r"(?<![A-Za-z0-9_])(__co__|__cok__|__real_cok__|__device__|__co_device__)(?![A-Za-z0-9_])")
_INTERESTING = re.compile(_SKIP.pattern + r"|" + _MARKER.pattern + r"|[{}();<>]")


def split(text: str, loc_of) -> list[Segment]:
    """Segments of `text` in order; `loc_of(offset)` gives locations for errors."""
    segments: list[Segment] = []
    host_start = 0
    pos = 0
    while True:
        m = _find_marker(text, pos)
        if m is None:
            break
        start, word = m.start(), m.group(0)
        if word == "__co__":
            end = _function_end(text, m.end())
            kind, body = CHOREO, (start, end)
        elif word in ("__cok__", "__real_cok__"):
            open_at, end = _block_bounds(text, m.end(), loc_of, word)
            kind, body = DEVICE, (open_at + 1, end - 1)
        else:
            end = _device_function_end(text, m.end())
            if end < 0:
                raise ChoreoError(f"missing '}}' for the device function started by '{word}'",
                                  loc_of(start))
            kind, body = DEVICE, (start, end)
        _add_host(segments, text, host_start, start)
        device_kind = "" if kind == CHOREO else ("cok" if "cok" in word else "device")
        segments.append(Segment(kind, body[0], text[body[0]:body[1]], device_kind))
        host_start = pos = end
    _add_host(segments, text, host_start, len(text))
    return segments


def _find_marker(text: str, pos: int):
    """The next marker word at or after `pos`, skipping literals and comments."""
    for m in _INTERESTING.finditer(text, pos):
        if m.group(0).startswith("__"):
            return m
    return None


def _add_host(segments: list[Segment], text: str, a: int, b: int) -> None:
    chunk = text[a:b]
    if chunk.strip():
        segments.append(Segment(HOST, a, chunk))


def _function_end(text: str, pos: int) -> int:
    """End of a `__co__` function: after the `}` matching the first `{` outside
    parentheses; a `;` before any body ends the segment there (a declaration,
    which the parser then rejects); an unclosed body runs to the end."""
    parens = 0
    for m in _INTERESTING.finditer(text, pos):
        ch = m.group(0)
        if ch == "(":
            parens += 1
        elif ch == ")":
            parens = max(parens - 1, 0)
        elif ch == ";" and parens == 0:
            return m.end()
        elif ch == "{" and parens == 0:
            return _matching_brace(text, m.start())
    return len(text)


def _matching_brace(text: str, open_at: int) -> int:
    """Offset just past the `}` matching the `{` at `open_at` (or the text's end)."""
    depth = 0
    for m in _INTERESTING.finditer(text, open_at):
        ch = m.group(0)
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return m.end()
    return len(text)


def _block_bounds(text: str, pos: int, loc_of, word: str) -> tuple[int, int]:
    """`__cok__ { ... }`: the offsets of its `{` and just past its `}`."""
    m = re.compile(r"\s*").match(text, pos)
    open_at = m.end()
    if open_at >= len(text) or text[open_at] != "{":
        raise ChoreoError(f"expected '{{' after '{word}'", loc_of(open_at))
    end = _matching_brace(text, open_at)
    if text[end - 1:end] != "}":
        raise ChoreoError(f"missing '}}' for the '{word}' block", loc_of(open_at))
    return open_at, end


def _device_function_end(text: str, pos: int) -> int:
    """End of a `__device__` function (its body's closing `}`) or declaration
    (a `;` outside any parentheses, braces and angle brackets); -1 if the
    text ends first."""
    parens = braces = angles = 0
    saw_brace = False
    for m in _INTERESTING.finditer(text, pos):
        ch = m.group(0)
        if ch == "(":
            parens += 1
        elif ch == ")":
            parens = max(parens - 1, 0)
        elif ch == "<":
            angles += 1
        elif ch == ">":
            angles = max(angles - 1, 0)
        elif ch == "{":
            braces += 1
            saw_brace = True
        elif ch == "}":
            braces = max(braces - 1, 0)
            if braces == 0 and saw_brace:
                return m.end()
        elif ch == ";" and parens == braces == angles == 0:
            return m.end()
    return -1


def first_text_loc(segment: Segment, loc_of) -> Loc:
    """Location of the first non-blank character of a segment."""
    stripped = len(segment.text) - len(segment.text.lstrip())
    return loc_of(segment.start + stripped)
