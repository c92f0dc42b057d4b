"""Evaluation of `#if` expressions: C integer constant expressions, signed 64-bit.

The preprocessor has already replaced `defined X` and expanded macros; what is
left are number, character and identifier tokens (identifiers count as 0,
`true` as 1) and operators. Evaluation happens while parsing, and operands
that C does not evaluate (`0 && 1/0`) are parsed but not computed.
"""
from __future__ import annotations

import operator
import re

from choreo_py.diagnostics import ChoreoError
from .literals import int_value, shown

_BINARY = {'*': 10, '/': 10, '%': 10, '+': 9, '-': 9, '<<': 8, '>>': 8, '<': 7, '>': 7,
           '<=': 7, '>=': 7, '==': 6, '!=': 6, '&': 5, '^': 4, '|': 3, '&&': 2, '||': 1}
_ARITH = {'*': operator.mul, '+': operator.add, '-': operator.sub, '&': operator.and_,
          '^': operator.xor, '|': operator.or_, '<': operator.lt, '>': operator.gt,
          '<=': operator.le, '>=': operator.ge, '==': operator.eq, '!=': operator.ne,
          '&&': lambda a, b: a and b, '||': lambda a, b: a or b}
_INT = re.compile(r"(0[xX][0-9a-fA-F']+|0[bB][01']+|0[0-7']*|[1-9][0-9']*)"
                  r"(?:[uU](?:ll|LL|l|L)?|(?:ll|LL|l|L)[uU]?)?")


def _wrap(v: int) -> int:
    return ((v + (1 << 63)) & ((1 << 64) - 1)) - (1 << 63)


def _number(t) -> int | None:
    if t.kind == 'num' and (m := _INT.fullmatch(t.text)):
        return _int_literal(t, m.group(1).replace("'", ''))
    if t.kind == 'str' and t.text.endswith("'"):  # a character constant
        try:
            body = t.text[t.text.index("'") + 1:-1]
            chars = body.encode('latin-1', 'backslashreplace').decode('unicode_escape')
        except UnicodeDecodeError:
            return None
        return ord(chars) if len(chars) == 1 else None
    if t.kind == 'id':  # identifiers left after expansion are 0 (C++: true is 1)
        return int(t.text == 'true')
    return None


_BASES = {'0x': 16, '0X': 16, '0b': 2, '0B': 2}


def _int_literal(t, digits: str) -> int:
    """A literal's value, wrapped to signed 64 bits; one beyond 64 bits is an error, as in
    C ("too large for any integer type"), raised as ValueError for _IfExpr to locate."""
    base = _BASES.get(digits[:2], 8 if len(digits) > 1 and digits[0] == '0' else 10)
    value = int_value(digits[2:] if base in (2, 16) else digits, base)
    if value is None:
        raise _TooLarge(t)
    return _wrap(value)


class _TooLarge(Exception):
    def __init__(self, tok) -> None:
        super().__init__(tok.text)
        self.tok = tok


class _IfExpr:
    """Recursive descent over `#if` tokens that evaluates as it parses; `live`
    is False in operands that C does not evaluate (so `0 && 1/0` is fine)."""

    def __init__(self, toks, where) -> None:
        self.toks, self.i, self.where = toks, 0, where

    def run(self) -> int:
        v = self.comma(True)
        if self.i < len(self.toks):
            t = self.toks[self.i]
            self.fail(t, f"missing binary operator before '{t.text}'")
        return v

    def fail(self, t, msg):
        raise ChoreoError(msg + ' in #if expression', self.where(t))

    def take(self, want=None):
        if self.i >= len(self.toks):
            self.fail(None, f"expected '{want}'" if want else 'missing value')
        t = self.toks[self.i]
        if want is not None and t.text != want:
            self.fail(t, f"expected '{want}' before '{t.text}'")
        self.i += 1
        return t

    def accept(self, text) -> bool:
        ok = self.i < len(self.toks) and self.toks[self.i].text == text
        self.i += ok
        return ok

    def comma(self, live) -> int:
        v = self.cond(live)
        while self.accept(','):
            v = self.cond(live)
        return v

    def cond(self, live) -> int:
        c = self.binary(1, live)
        if not self.accept('?'):
            return c
        a = self.comma(live and c != 0)
        self.take(':')
        b = self.cond(live and c == 0)
        return a if c else b

    def binary(self, min_prec, live) -> int:
        left = self.unary(live)
        while self.i < len(self.toks):
            t = self.toks[self.i]
            prec = _BINARY.get(t.text, 0) if t.kind == 'punct' else 0
            if prec < min_prec or prec == 0:
                break
            self.i += 1
            skip = (t.text == '&&' and not left) or (t.text == '||' and left)
            left = self.apply(t, left, self.binary(prec + 1, live and not skip), live)
        return left

    def unary(self, live) -> int:
        t = self.take()
        if t.kind == 'punct' and t.text in ('+', '-', '!', '~'):
            v = self.unary(live)
            return _wrap({'+': v, '-': -v, '!': int(not v), '~': ~v}[t.text])
        if t.kind == 'punct' and t.text == '(':
            v = self.comma(live)
            self.take(')')
            return v
        try:
            v = _number(t)
        except _TooLarge:
            self.fail(t, f"integer literal '{shown(t.text)}' is too large for any integer type")
        if v is None:
            self.fail(t, f"invalid token '{t.text}'")
        return v

    def apply(self, t, a: int, b: int, live: bool) -> int:
        op = t.text
        if op in ('/', '%'):
            if b == 0:
                if live:
                    self.fail(t, 'division by zero')
                return 0
            q = abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)  # C truncates
            return _wrap(q if op == '/' else a - b * q)
        if op in ('<<', '>>'):  # as GCC: a negative count shifts the other way
            left = (op == '<<') == (b >= 0)
            if abs(b) >= 64:
                return 0 if left or a >= 0 else -1
            return _wrap(a << abs(b) if left else a >> abs(b))
        return _wrap(int(_ARITH[op](a, b) != 0) if op in ('&&', '||') else int(_ARITH[op](a, b)))
