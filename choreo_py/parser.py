"""The Choreo parser: Lark LALR(1) over grammar/choreo.lark, building the AST
while parsing, and turning Lark's exceptions into Choreo syntax errors.

The Lark object is built once per process (its tables are also cached on
disk by Lark, keyed by the grammar's hash), with the AST builder embedded as
an inline transformer.  That builder holds per-parse state, so parsing is not
re-entrant across threads.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Callable, Optional

from lark import Lark, Token
from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken
from lark.lexer import PatternStr

from . import ast
from .astbuild_exprs import ExprBuilder
from .astbuild_ops import OpBuilder
from .astbuild_stmts import StmtBuilder
from .diagnostics import ChoreoError, Diagnostic
from .source import Loc

GRAMMAR_PATH = Path(__file__).resolve().parent.parent / "grammar" / "choreo.lark"


class ASTBuilder(StmtBuilder, OpBuilder, ExprBuilder):
    """All rule callbacks; see the astbuild_* modules."""


_BUILDER = ASTBuilder()
_LARK: Optional[Lark] = None


def _grammar_path() -> Path:
    if GRAMMAR_PATH.exists():
        return GRAMMAR_PATH
    # installed layout: the grammar folder is the package choreo_py.grammar
    from . import grammar  # type: ignore[attr-defined]
    return Path(grammar.__file__).resolve().parent / "choreo.lark"


def lark_parser() -> Lark:
    """The process-wide parser (built on first use)."""
    global _LARK
    if _LARK is None:
        _LARK = Lark(_grammar_path().read_text(encoding="utf-8"), parser="lalr",
                     lexer="contextual", keep_all_tokens=True, maybe_placeholders=True,
                     transformer=_BUILDER, propagate_positions=False, cache=True)
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


_PREV_WORD = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*$")


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


def _special_case(text, tok, pos, prev_end, expected, texts):
    """Messages for common mistakes: (message, offset) or None."""
    names = {texts.get(n, n) for n in expected}
    if "a statement" in _describe_expected(expected, texts):
        names.discard(";")        # there ';' is an empty body, not a terminator
    before = text[:prev_end]
    word = _PREV_WORD.search(before)
    prev_word = word.group(1) if word else ""
    if ";" in names and tok.type != "$END" and "\n" in text[prev_end:pos]:
        return "expected ';' after statement", prev_end
    if prev_word == "parallel" or before.endswith("parallel.async"):
        return "expected '{', 'by' or a name after 'parallel'", pos
    if tok.type == "RBRACE" and ";" in names:
        return "expected ';' after statement", prev_end
    if tok.type == "RBRACE" and "}" not in names:
        what = _describe_expected(expected, texts)
        return ("unexpected '}'" + (f", expected {what}" if what else "")), pos
    return None
