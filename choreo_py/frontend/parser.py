"""The Choreo parser: Lark LALR(1) over grammar/choreo.lark, building the AST
while parsing, and turning Lark's exceptions into Choreo syntax errors.

The Lark object is built once per process, with the AST builder embedded as
an inline transformer.  That builder holds per-parse state, so parsing is not
re-entrant across threads.

Start-up cost matters (`choreo check` runs one process per file), so:

* the built parser is pickled in a per-user cache folder (see `_cache_file`),
  keyed by the grammar, this file, the Lark version and the Python version;
  loading it takes a fraction of Lark's own cache load (which rebuilds every
  object from a JSON-like form).  Any problem with the cache (missing,
  unreadable, stale, read-only folder) falls back to building the parser;
* the contextual lexer scans with the one regex of all terminals (the root
  scanner) and uses its answer wherever it provably equals the answer of the
  current parser state's own regex, so the per-state regexes (slow to compile:
  76 of them, ~45 ms, for examples/flash_atten_causal.co) are only built for
  states where the two can differ (10 there).  See `_ContextualLexer`.
"""
from __future__ import annotations

import gc
import hashlib
import io
import os
import pickle
import re
import sys
import time
import types
from pathlib import Path
from typing import Callable, Optional

from lark import Lark, Token
from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken
from lark.lexer import ContextualLexer, PatternStr, UnlessCallback
from lark.parsers import lalr_analysis

from . import ast
from .astbuild_exprs import ExprBuilder
from .astbuild_ops import OpBuilder
from .astbuild_stmts import StmtBuilder
from choreo_py.diagnostics import ChoreoError, Diagnostic
from choreo_py.source import Loc

GRAMMAR_PATH = Path(__file__).resolve().parents[2] / "grammar" / "choreo.lark"


class ASTBuilder(StmtBuilder, OpBuilder, ExprBuilder):
    """All rule callbacks; see the astbuild_* modules."""


_BUILDER = ASTBuilder()
_LARK: Optional[Lark] = None


def _grammar_path() -> Path:
    if GRAMMAR_PATH.exists():
        return GRAMMAR_PATH
    # installed layout: the grammar folder is the package choreo_py.grammar, read as the
    # package's data (the file, not a module of the compiler)
    from importlib import resources

    return Path(str(resources.files("choreo_py.grammar").joinpath("choreo.lark")))


# ------------------------------------------------------------ the contextual lexer

# Regex constructs after which "R fully matches the word w, and w is at the
# scan position" no longer implies "R matches at the scan position": anchors,
# look-around, back-references, conditionals, atomic groups, possessive repeats.
_CONTEXT_SENSITIVE = re.compile(r"\\(?:[bBAZ]|\d)|[\^$]|\(\?(?:[=!<(>]|P=)|[*+?}]\+")


class _StateLexer:
    """One parser state's lexer: the root scanner's match when it is the
    state's own answer, else the state's own Lark lexer (`lexer`).

    Why the root's first match T (in Lark's terminal order) is the state's
    answer when T is one of the state's terminals: a terminal ahead of T that
    the state tries is either tried by the root too (and did not match), or a
    keyword the root folds into a name-like regex R ("unless"); such a keyword
    matching would make R match, and R comes before it, hence before T:
    impossible.  `_ContextualLexer._install` checks the assumptions (R has no
    look-around or anchors, R sorts first, plain keywords, no user callbacks).
    The keyword fold is then the state's own: the word's keyword if the state
    accepts it, else T."""

    __slots__ = ("lexer", "allowed", "match", "unless", "ignore_types", "newline_types")

    def __init__(self, lexer, root, unless):
        self.lexer = lexer
        self.allowed = frozenset(t.name for t in lexer.terminals)
        self.match = root.match
        self.unless = unless
        self.ignore_types = lexer.ignore_types
        self.newline_types = root.newline_types

    def next_token(self, lex_state, parser_state=None):
        # Mirrors lark.lexer.BasicLexer.next_token.
        line_ctr = lex_state.line_ctr
        text = lex_state.text
        allowed = self.allowed
        while line_ctr.char_pos < text.end:
            res = self.match(text, line_ctr.char_pos)
            if res is None or res[1] not in allowed:
                return self.lexer.next_token(lex_state, parser_state)
            value, type_ = res
            if type_ in self.ignore_types:
                line_ctr.feed(value, type_ in self.newline_types)
                continue
            t = Token(type_, value, line_ctr.char_pos, line_ctr.line, line_ctr.column)
            line_ctr.feed(value, type_ in self.newline_types)
            t.end_line = line_ctr.line
            t.end_column = line_ctr.column
            t.end_pos = line_ctr.char_pos
            words = self.unless.get(type_)
            if words is not None:
                word = words.get(value)
                if word is not None and word in allowed:
                    t.type = word
            lex_state.last_token = t
            return t
        raise EOFError(self)


class _ContextualLexer(ContextualLexer):
    """Lark's contextual lexer (same tokens, same errors) whose per-state
    lexers use the root scanner where that is exact; see `_StateLexer`.
    Set up on first use, so a pickled parser holds only Lark's own objects."""

    def lex(self, lexer_state, parser_state):
        if "_installed" not in self.__dict__:
            self._install()
        return super().lex(lexer_state, parser_state)

    def _install(self) -> None:
        self._installed = True
        root = self.root_lexer
        root.scanner  # noqa: B018 - builds the root scanner and its keyword callbacks
        if root.user_callbacks or root.g_regex_flags or root.use_bytes:
            return
        order = {t.name: i for i, t in enumerate(root.terminals)}
        unless: dict[str, dict[str, str]] = {}
        for name, callback in root.callback.items():
            if type(callback) is not UnlessCallback or name in root.ignore_types:
                return
            regex = root.terminals_by_name[name].pattern
            if regex.flags or _CONTEXT_SENSITIVE.search(regex.to_regexp()):
                return
            words = {}
            for word in callback.scanner.terminals:
                if (not isinstance(word.pattern, PatternStr) or word.pattern.flags
                        or order[word.name] <= order[name] or word.pattern.value in words):
                    return
                words[word.pattern.value] = word.name
            unless[name] = words
        self.lexers = _StateLexers(self.lexers, root, unless)


class _StateLexers(dict):
    """state -> _StateLexer, made on first use (a file visits a fraction of the states)."""

    def __init__(self, lexers: dict, root, unless: dict):
        super().__init__()
        self._lexers, self._root, self._unless = lexers, root, unless
        self._made: dict[int, _StateLexer] = {}

    def __missing__(self, state):
        lexer = self._lexers[state]
        made = self._made.get(id(lexer))
        if made is None:
            made = self._made[id(lexer)] = _StateLexer(lexer, self._root, self._unless)
        self[state] = made
        return made


# ------------------------------------------------------------ building and caching

_LARK_OPTIONS = dict(parser="lalr", lexer="contextual", keep_all_tokens=True,
                     maybe_placeholders=True, propagate_positions=False)
_CACHE_FORMAT = b"choreo-py parser cache 1"
_SHIFT_REDUCE = {"Shift": lalr_analysis.Shift, "Reduce": lalr_analysis.Reduce}


def _build(grammar: str) -> Lark:
    """Builds the parser from the grammar (~0.7 s), then takes it through Lark's
    own save and load, which leaves only what parsing needs: that is the object
    cached (the same one Lark's `cache=True` would give)."""
    from lark.lark import _LOAD_ALLOWED_OPTIONS

    kwargs = dict(transformer=_BUILDER, _plugins={"ContextualLexer": _ContextualLexer})
    built = Lark(grammar, **kwargs, **_LARK_OPTIONS)
    buf = io.BytesIO()
    built.save(buf, _LOAD_ALLOWED_OPTIONS)
    buf.seek(0)
    return Lark.__new__(Lark)._load(buf, **kwargs)


def _cache_file(grammar: str) -> Optional[Path]:
    """Where the pickled parser lives: $XDG_CACHE_HOME/choreo-py (default
    ~/.cache/choreo-py), named by a hash of everything it depends on;
    None when there is no usable home (CHOREO_PY_NO_CACHE=1 also turns it off)."""
    if os.environ.get("CHOREO_PY_NO_CACHE"):
        return None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    if not os.path.isabs(base):
        return None
    import lark

    key = hashlib.sha256()
    for part in (_CACHE_FORMAT, grammar.encode("utf-8"), Path(__file__).read_bytes(),
                 lark.__version__.encode(), sys.version.encode(), repr(_LARK_OPTIONS).encode()):
        key.update(len(part).to_bytes(8, "little") + part)
    return Path(base) / "choreo-py" / f"parser-{key.hexdigest()[:32]}.pickle"


class _Pickler(pickle.Pickler):
    """Leaves out what is not data: the `re` module, Lark's action singletons
    (compared with `is`), the AST builder and the callbacks bound to it."""

    def __init__(self, fh, parser: Lark):
        super().__init__(fh, protocol=pickle.HIGHEST_PROTOCOL)
        self._ids = {id(lalr_analysis.Shift): "Shift", id(lalr_analysis.Reduce): "Reduce",
                     id(_BUILDER): "builder", id(parser._callbacks): "callbacks"}
        if getattr(parser, "_parse_tree_builder", None) is not None:   # remade on load
            self._ids[id(parser._parse_tree_builder)] = "tree_builder"

    def persistent_id(self, obj):
        if isinstance(obj, types.ModuleType):
            if obj is not re:
                raise pickle.PicklingError(f"module {obj.__name__}")
            return "re"
        return self._ids.get(id(obj))


class _Unpickler(pickle.Unpickler):
    def __init__(self, fh, callbacks: dict):
        super().__init__(fh)
        self._objs = {"re": re, "builder": _BUILDER, "callbacks": callbacks,
                      "tree_builder": None, **_SHIFT_REDUCE}

    def persistent_load(self, pid):
        return self._objs[pid]


def _load(path: Path) -> Lark:
    callbacks: dict = {}
    enabled = gc.isenabled()
    gc.disable()   # unpickling makes ~10^5 objects, no garbage: collections would only rescan them
    try:
        with open(path, "rb") as fh:
            parser = _Unpickler(fh, callbacks).load()
    finally:
        if enabled:
            gc.enable()
    if not isinstance(parser, Lark):
        raise TypeError(type(parser).__name__)
    parser._prepare_callbacks()          # the builder's methods, bound now
    callbacks.update(parser._callbacks)  # fills the dict the LALR parser holds
    parser._callbacks = callbacks
    if parser.parser.parser.parser.callbacks is not callbacks:
        raise TypeError("unexpected Lark layout")
    return parser


def _save(path: Path, parser: Lark) -> None:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as fh:
            _Pickler(fh, parser).dump(parser)
        os.replace(tmp, path)   # atomic: readers see the old file or the whole new one
    finally:
        if tmp.exists():
            tmp.unlink()
    # Each grammar edit makes a new file; forget those unchanged for a week
    # (one still in use is just made again).
    for old in path.parent.glob("parser-*.pickle"):
        try:
            if old != path and time.time() - old.stat().st_mtime > 7 * 86400:
                old.unlink()
        except OSError:
            pass


def lark_parser() -> Lark:
    """The process-wide parser (built on first use)."""
    global _LARK
    if _LARK is None:
        grammar = _grammar_path().read_text(encoding="utf-8")
        try:
            path = _cache_file(grammar)
        except OSError:
            path = None
        parser = None
        if path is not None:
            try:
                parser = _load(path)
            except Exception:  # noqa: BLE001 - no cache, or an unusable one: build
                parser = None
        if parser is None:
            parser = _build(grammar)
            if path is not None:
                try:
                    _save(path, parser)
                except Exception:  # noqa: BLE001 - e.g. a read-only folder: nothing to keep
                    pass
        _LARK = parser
    return _LARK


def parse_function(text: str, base: int, loc_of: Callable[[int], Loc]) -> ast.FunctionDef:
    """Parse one `__co__` function whose text starts at offset `base` of the
    preprocessed unit; `loc_of` maps unit offsets to original locations.
    Raises ChoreoError with every error found in the function."""
    parser = lark_parser()
    _BUILDER.reset(base, loc_of)
    try:
        fn = parser.parse(text)
    except UnexpectedInput as err:
        diags = _BUILDER.errors + [syntax_error(err, text, base, loc_of)]
        raise ChoreoError(diagnostics=diags) from None
    if _BUILDER.errors:
        raise ChoreoError(diagnostics=list(_BUILDER.errors))
    return fn


# ----------------------------------------------------------------- syntax errors

_REGEX_TERMINALS = {
    "NAME": "a name",
    "INT_LIT": "an integer",
    "FLOAT_LIT": "a floating-point number",
    "STRING": "a string",
    "PRAGMA": "'#pragma'",
    "MUTABLE": "'mutable'",
    "ASM_VOLATILE": "'volatile'",
    "$END": "end of input",
}

#: Tokens that can begin an expression; when most are acceptable the error
#: says "an expression" instead of listing them.
_EXPR_STARTS = {"NAME", "INT_LIT", "FLOAT_LIT", "STRING", "(", "{", "[", "!", "-", "+", "++",
                "--", "~", "|", "#", "&", "true", "false", "inf", "nullptr", "__to", "call"}
_TYPE_WORDS = {"f64", "tf32", "f32", "f16", "bf16", "f8", "f8_e4m3", "f8_e5m2", "f8_ue4m3",
               "f8_ue8m0", "f6_e2m3", "f6_e3m2", "f4_e2m1", "bin1", "u1", "u2", "s2", "u4", "s4",
               "u6", "s6", "u8", "s8", "u16", "s16", "u32", "s32", "u64", "s64", "int", "bool",
               "half", "bfp16", "float", "double"}
_STMT_WORDS = {"parallel", "with", "foreach", "apply", "inthreads", "while", "if", "wait",
               "trigger", "return", "break", "continue", "yield", "sync", "dma", "tma", "mma",
               "mdspan", "ituple", "frag", "event", "mutable", "global", "shared", "local",
               "swap", "rotate", "__asm__", "asm", "__cpp__", "#pragma", "call"}
#: Operators that may continue an expression: rarely what is missing, so they
#: are left out of "expected ..." lists unless nothing else is acceptable.
_OPERATORS = {"+", "-", "*", "/", "%", "<", ">", "<=", ">=", "==", "!=", "&&", "||", "&", "|",
              "^", "#", "#+", "#-", "#*", "#/", "#%", "<<", ">>", "?", ".", "++", "--"}
# Shown first when listed, since they are what usually is missing.
_ORDER = [";", ")", "]", "}", ",", ">", ":", "{", "=", "=>", "(", "["]


def _terminal_texts(parser: Lark) -> dict[str, str]:
    """Terminal name -> the literal text it stands for (or its description)."""
    out = dict(_REGEX_TERMINALS)
    for term in parser.terminals:
        if isinstance(term.pattern, PatternStr):
            out[term.name] = term.pattern.value
    return out


def _describe_expected(names: set[str], texts: dict[str, str]) -> str:
    words = {texts.get(n, n) for n in names}
    parts = []
    if "parallel" in words and "with" in words and "NAME" in names:
        parts.append("a statement")
        words -= _STMT_WORDS | _TYPE_WORDS | _EXPR_STARTS | {"a name", "'#pragma'", "'mutable'"}
        words -= {"__asm__", "asm", "[", ";", "}"}
    if len(words & _TYPE_WORDS) >= 20:
        parts.append("a type")
        words -= _TYPE_WORDS
    if {"a name", "an integer", "a floating-point number"} <= words:
        parts.append("an expression")
        words -= _EXPR_STARTS | {"a name", "an integer", "a floating-point number", "a string"}
        words -= {"dma", "tma", "mma"}     # operations allowed where values are
    if len(words & _OPERATORS) >= 3 and (parts or words - _OPERATORS):
        words -= _OPERATORS     # an expression could go on: not the point here
    listed = sorted(words, key=lambda w: (_ORDER.index(w) if w in _ORDER else len(_ORDER), w))
    parts += [w if w.startswith(("a ", "an ", "'", "end of")) else f"'{w}'" for w in listed]
    if len(parts) > 6:
        parts = parts[:5] + ["..."]
    if len(parts) <= 1:
        return "".join(parts)
    return ", ".join(parts[:-1]) + " or " + parts[-1]


def _describe_token(tok: Token) -> str:
    if tok.type == "$END":
        return "end of input"
    if tok.type == "NAME":
        return f"name '{tok}'"
    if tok.type == "STRING":
        return "a string"
    return f"'{tok}'"


def _acceptable(err: UnexpectedToken) -> set[str]:
    """Terminals that could really come next.  The state's own list is wider
    (LALR states are shared between contexts), so ask the parser which
    terminals it would shift after performing its pending reductions."""
    expected = set(err.expected)
    ip = getattr(err, "interactive_parser", None)
    if ip is None:
        return expected
    saved = list(_BUILDER.errors)
    try:
        accepted = set(ip.accepts())
    except Exception:  # noqa: BLE001 - best effort; fall back to the state's list
        return expected
    finally:
        _BUILDER.errors[:] = saved   # trial reductions may have reported errors
    return accepted or expected


def _prev_token_end(text: str, pos: int) -> int:
    """Offset just past the last non-blank character before `pos`."""
    i = min(pos, len(text))
    while i > 0 and text[i - 1].isspace():
        i -= 1
    return i


_WORD_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")


def _prev_word(before: str) -> str:
    """The identifier that ends `before` (trailing space aside), or "". Scanned backwards
    from the end: a regex search for it retries at every start and is quadratic in a long
    run of word characters (a 30,000-character string literal took 16 s)."""
    end = len(before.rstrip())
    start = end
    while start > 0 and before[start - 1] in _WORD_CHARS:
        start -= 1
    while start < end and before[start].isdigit():
        start += 1
    return before[start:end]


def syntax_error(err: UnexpectedInput, text: str, base: int, loc_of) -> Diagnostic:
    """A readable diagnostic for a Lark parse or lex error."""
    if isinstance(err, UnexpectedCharacters):
        ch = text[err.pos_in_stream] if err.pos_in_stream < len(text) else ""
        shown = ch if ch.isprintable() else f"U+{ord(ch):04X}"
        return Diagnostic("error", f"unexpected character '{shown}'",
                          loc_of(base + err.pos_in_stream))
    assert isinstance(err, UnexpectedToken)
    tok = err.token
    pos = tok.start_pos if tok.type != "$END" and tok.start_pos is not None else len(text)
    texts = _terminal_texts(lark_parser())
    expected = _acceptable(err)
    prev_end = _prev_token_end(text, pos)
    message = _special_case(text, tok, pos, prev_end, expected, texts)
    if message is not None:
        msg, at = message
        return Diagnostic("error", msg, loc_of(base + at))
    what = _describe_expected(expected, texts)
    got = _describe_token(tok)
    if tok.type == "$END":
        if "RBRACE" in expected:   # the usual cause: an unclosed block
            what = "'}'"
        msg = f"expected {what} at end of input" if what else "unexpected end of input"
        return Diagnostic("error", msg, loc_of(base + prev_end))
    msg = f"expected {what}, got {got}" if what else f"unexpected {got}"
    return Diagnostic("error", msg, loc_of(base + pos))


#: Element and scalar type names: reserved words, so `s2 = ...` does not parse.
TYPE_NAMES = frozenset("""f64 tf32 f32 f16 bf16 f8 f8_e4m3 f8_e5m2 f8_ue4m3 f8_ue8m0 f6_e2m3
    f6_e3m2 f4_e2m1 bin1 u1 u2 s2 u4 s4 u6 s6 u8 s8 u16 s16 u32 s32 u64 s64 int bool half bfp16
    float double""".split())


def _reserved_type_name(tok, prev_word: str, prev_end: int):
    """(word, offset) when a type name stands where the program wants a name: the
    word just before the error followed by `=` (`s2 = 3;`), or the unexpected token
    itself in a name's place (`foreach {s2} ...`)."""
    if tok.type != "$END" and str(tok) in TYPE_NAMES and tok.start_pos is not None:
        return str(tok), tok.start_pos
    if prev_word in TYPE_NAMES and str(tok) in ("=", "+=", "-=", "*=", "/=", "%=", ".", ";"):
        return prev_word, prev_end - len(prev_word)
    return None


def _special_case(text, tok, pos, prev_end, expected, texts):
    """Messages for common mistakes: (message, offset) or None."""
    names = {texts.get(n, n) for n in expected}
    if "a statement" in _describe_expected(expected, texts):
        names.discard(";")        # there ';' is an empty body, not a terminator
    before = text[:prev_end]
    prev_word = _prev_word(before)
    if ";" in names and tok.type != "$END" and "\n" in text[prev_end:pos]:
        return "expected ';' after statement", prev_end
    reserved = _reserved_type_name(tok, prev_word, prev_end)
    if reserved is not None:
        word, at = reserved
        return (f"'{word}' is a type name (a reserved word) and cannot name a variable; "
                f"choose another name, e.g. '{word}_'", at)
    if prev_word == "parallel" or before.endswith("parallel.async"):
        return "expected '{', 'by' or a name after 'parallel'", pos
    if tok.type == "RBRACE" and ";" in names:
        return "expected ';' after statement", prev_end
    if tok.type == "RBRACE" and "}" not in names:
        what = _describe_expected(expected, texts)
        return ("unexpected '}'" + (f", expected {what}" if what else "")), pos
    return None
