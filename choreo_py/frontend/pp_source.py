"""Source files for the preprocessor: reading (`read_source`), splicing, comments, tokens,
a cursor.

A `_File` is a file's text with backslash-newlines spliced out and comments
blanked to spaces of the same length (so offsets survive), with the map from
its offsets back to the original file's lines and columns; `_Cursor` walks its
tokens (`_LEX`). preprocessor.py runs the directives and expands macros over them.
"""
from __future__ import annotations

import re
from bisect import bisect_right

from choreo_py.diagnostics import ChoreoError
from choreo_py.source import SOURCES, Loc, UnreadableSource, decode_source

# ----------------------------------------------------------------- lexing --
_PREFIX = r'(?:u8|[uUL])?'
_RAW = _PREFIX + r'R"(?P<d>[^()\\\s"]{0,16})\(.*?\)(?P=d)"'
_STR = _PREFIX + r'"(?:[^"\\\n]|\\.)*"'
_CHR = _PREFIX + r"'(?:[^'\\\n]|\\.)*'"
# A pp-number swallows letters and digit separators: `1e5`, `0x1F`, `1'000`.
_NUM = r"\.?\d(?:[eEpP][+-]|[\w.]|'\w)*"
_PUNCTS = ['...', '<<=', '>>=', '->*', '<=>', '##', '::', '->', '++', '--', '<<', '>>',
           '<=', '>=', '==', '!=', '&&', '||', '*=', '/=', '%=', '+=', '-=', '&=', '^=',
           '|=', '.*'] + list('#()[]{};:,.?~!+-*/%<>=&^|')
# Finds comments; literals are matched leniently (an unterminated one ends at
# the line end) only so that nothing inside them is taken for a comment.
_SCAN = re.compile('|'.join([r'(?P<lc>//[^\n]*)', r'(?P<bc>/\*.*?\*/)', r'(?P<bo>/\*)',
                             _RAW, _STR + '?', _CHR + '?', _NUM, r'\w+',
                             r'[^/"\'\w.]+', '.']), re.S)
_LEX = re.compile('|'.join([
    r'(?P<ws>[ \t\r\f\v\ufeff]+)', r'(?P<nl>\n)', f'(?P<str>{_RAW}|{_STR}|{_CHR})',
    r'(?P<bad>["\'])', f'(?P<num>{_NUM})', r'(?P<id>[^\W\d]\w*)',
    '(?P<punct>' + '|'.join(map(re.escape, _PUNCTS)) + ')', r'(?P<other>.)']), re.S)
_IDENT = re.compile(r'[^\W\d]\w*')
_DIRECTIVE = re.compile(r'[ \t\f\v\r\ufeff]*(#)[ \t\f\v\r]*([^\W\d]\w*)?[ \t\f\v\r]*(\n|$)?')
_DIRECTIVES = {'define', 'undef', 'include', 'if', 'ifdef', 'ifndef', 'elif', 'elifdef',
               'elifndef', 'else', 'endif', 'pragma', 'line', 'error', 'warning'}
_BUILTINS = ('__FILE__', '__LINE__')


class _Tok:
    """A preprocessing token; `hide` is its hide set (macros it may not expand),
    `pos` its offset in the cleaned text of the file being read."""
    __slots__ = ('kind', 'text', 'pos', 'ws', 'hide')

    def __init__(self, kind, text, pos=-1, ws=False, hide=frozenset()):
        self.kind, self.text, self.pos, self.ws, self.hide = kind, text, pos, ws, hide

    def but(self, **changes) -> "_Tok":
        t = _Tok(self.kind, self.text, self.pos, self.ws, self.hide)
        for k, v in changes.items():
            setattr(t, k, v)
        return t


_PLACEMARKER = _Tok('pm', '')


def _directive_at(lx: str, pos: int):
    """(name, offset of '#', end of name) if the line at `pos` is a directive;
    the name is '' for a lone `#`."""
    m = _DIRECTIVE.match(lx, pos)
    if m is None or (m.group(2) or '') not in _DIRECTIVES | {''}:
        return None
    if m.group(2) is None and m.group(3) is None:
        return None  # `#` followed by something else: Choreo text such as `#p`
    return m.group(2) or '', m.start(1), m.end(2) if m.group(2) else m.end(1)


def _pastes(a: str, b: str) -> bool:
    """Would texts `a` and `b` written side by side lex differently?"""
    m = _LEX.match(a + b)
    return m is not None and m.end() > len(a) and m.lastgroup not in ('ws', 'nl')


def _render(toks) -> str:
    parts, prev = [], None
    for t in toks:
        if prev is not None and (t.ws or _pastes(prev.text, t.text)):
            parts.append(' ')
        parts.append(t.text)
        prev = t
    return ''.join(parts)


def _stringize(arg, ws: bool) -> _Tok:
    parts = [(' ' if i and a.ws else '') +
             (a.text.replace('\\', '\\\\').replace('"', '\\"') if a.kind == 'str' else a.text)
             for i, a in enumerate(arg)]
    return _Tok('str', '"' + ''.join(parts) + '"', ws=ws)


# ------------------------------------------------------------- source map --
class _FileMap:
    """Offsets of one included instance of a file -> Loc, honouring `#line`."""

    def __init__(self, name: str, text: str) -> None:
        self.name = name
        self.starts = [0] + [m.end() for m in re.finditer('\n', text)]
        self.remap_lines: list[int] = []
        self.remaps: list[tuple[int, str]] = []  # (line delta, presumed file name)

    def phys_line(self, off: int) -> int:
        return bisect_right(self.starts, off)

    def loc(self, off: int) -> Loc:
        line = self.phys_line(off)
        col = off - self.starts[line - 1] + 1
        j = bisect_right(self.remap_lines, line) - 1
        delta, name = self.remaps[j] if j >= 0 else (0, self.name)
        return Loc(name, line + delta, col)


class _File:
    """One file instance: the cleaned text `c` (spliced, comments blanked), the
    same with comment line breaks blanked too (`lx`, for lexing), and a piece
    map from offsets in `c` back to offsets in the original text."""

    def __init__(self, name: str, text: str) -> None:
        self.name, self.fmap = name, _FileMap(name, text)
        self.starts, self.origs, self.copies, self._n = [], [], [], 0
        self.c = self._splice(text)
        self._blank_comments()

    def _put(self, parts, s, orig, copy):
        if s:
            self.starts.append(self._n)
            self.origs.append(orig)
            self.copies.append(copy)
            parts.append(s)
            self._n += len(s)

    def _splice(self, text: str) -> str:
        # Each removed line break is given back after the next kept one, so
        # that the lines that follow keep their line numbers in the output.
        parts, pos, pending = [], 0, 0
        for m in list(re.finditer(r'\\\r?\n', text)) + [None]:
            end = m.start() if m else len(text)
            nl = text.find('\n', pos, end) if pending else -1
            if nl >= 0:
                self._put(parts, text[pos:nl + 1], pos, True)
                self._put(parts, '\n' * pending, nl, False)
                pending, pos = 0, nl + 1
            self._put(parts, text[pos:end], pos, True)
            if m:
                pending, pos = pending + 1, m.end()
        self._put(parts, '\n' * pending, max(len(text) - 1, 0), False)
        return ''.join(parts)

    def _blank_comments(self) -> None:
        # `c` keeps the line breaks of comments, for the output; `lx` has none,
        # so that a comment spanning lines does not end a directive (C turns
        # each comment into one space before it looks for directives).
        c, out, lx, last = self.c, [], [], 0
        for m in _SCAN.finditer(c):
            if m.lastgroup == 'bo':
                raise ChoreoError('unterminated comment', self.loc(m.start()))
            if m.lastgroup in ('lc', 'bc'):
                out += [c[last:m.start()], re.sub(r'[^\n]', ' ', m.group())]
                lx += [c[last:m.start()], ' ' * len(m.group())]
                last = m.end()
        self.c, self.lx = ''.join(out) + c[last:], ''.join(lx) + c[last:]

    def orig(self, cpos: int) -> int:
        if not self.starts:
            return 0
        i = max(bisect_right(self.starts, cpos) - 1, 0)
        return self.origs[i] + (cpos - self.starts[i] if self.copies[i] else 0)

    def loc(self, cpos: int) -> Loc:
        return self.fmap.loc(self.orig(cpos))


class _Cursor:
    """Reads the tokens of a file one logical line at a time; with `cross`,
    line breaks are whitespace, but a directive line is a wall."""

    def __init__(self, f: _File, pos: int) -> None:
        self.f, self.pos = f, pos

    def next(self, cross: bool = False) -> _Tok:
        lx, ws = self.f.lx, False
        while (m := _LEX.match(lx, self.pos)) is not None:
            kind = m.lastgroup
            if kind == 'nl' and cross and _directive_at(lx, m.end()) is not None:
                break
            if kind == 'ws' or (kind == 'nl' and cross):
                self.pos, ws = m.end(), True
                continue
            if kind == 'bad':
                raise ChoreoError(f'missing terminating {m.group()} character',
                                  self.f.loc(m.start()))
            self.pos = m.end()
            return _Tok(kind, m.group(), m.start(), ws)
        return _Tok('eof', '', self.pos, ws)

    def peek_paren(self) -> bool:
        pos = self.pos
        t = self.next(cross=True)
        self.pos = pos
        return t.text == '(' and t.kind == 'punct'


def read_source(path: str, where: Loc | None = None) -> str:
    """The text of a source file (the main file or an include), decoded as
    source.decode_source says; what cannot be read is an error at the file's first bad
    character, or at `where` (the #include) when the file cannot be opened."""
    try:
        with open(path, 'rb') as fh:
            data = fh.read()
    except OSError as e:
        raise ChoreoError(f"cannot read '{path}': {e.strerror or e}", where) from None
    try:
        text = decode_source(path, data)
    except UnreadableSource as e:
        SOURCES.add(path, e.shown)
        raise ChoreoError(e.message, e.loc) from None
    SOURCES.add(path, text)
    return text
