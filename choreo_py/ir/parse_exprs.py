"""Reading the IR printer's expressions back: tokens, precedence, views, and the names
in scope that give each expression its type (the statements are read in ir/parse.py).

A name's type comes from its declaration (`let` takes its value's, `var` says it,
indices and dimensions are s32), an operator's by the usual arithmetic conversions
(ir.build.result_type), a comparison's is bool.
"""
from __future__ import annotations

import re
from typing import Optional

from choreo_py import ir
from .build import COMPARISONS, result_type

_PREC = {
    "||": 1, "&&": 2, "|": 3, "^": 4, "&": 5, "==": 6, "!=": 6,
    "<": 7, "<=": 7, ">": 7, ">=": 7, "<<": 8, ">>": 8,
    "+": 9, "-": 9, "*": 10, "/": 10, "%": 10,
}
_TOKEN = re.compile(r"\s*(?:(\d+\.\d*(?:e[+-]?\d+)?|\d+e[+-]?\d+|\d+)|([A-Za-z_][\w.]*)"
                    r"|(\|\||&&|==|!=|<=|>=|<<|>>|\+:|\.\.|[-+*/%<>&|^!~?:()\[\]{},=]))")


class IRParseError(ValueError):
    """Text that is not the printer's format, with its line number."""


# ---------------------------------------------------------------- expressions


class Exprs:
    """Expressions of one line, typed from the names declared so far (`scope`)."""

    def __init__(self, text: str, scope: "Scope") -> None:
        self.toks = self._lex(text)
        self.i = 0
        self.scope = scope

    @staticmethod
    def _lex(text: str) -> list[str]:
        out, pos = [], 0
        text = text.rstrip()
        while pos < len(text):
            m = _TOKEN.match(text, pos)
            if m is None or m.end() == pos:
                raise IRParseError(f"unexpected text '{text[pos:pos + 12]}'")
            out.append(m.group(m.lastindex))
            pos = m.end()
        return out

    # -- tokens
    def peek(self, k: int = 0) -> Optional[str]:
        j = self.i + k
        return self.toks[j] if j < len(self.toks) else None

    def take(self, expect: Optional[str] = None) -> str:
        tok = self.peek()
        if tok is None or (expect is not None and tok != expect):
            raise IRParseError(f"expected '{expect or 'more'}', found '{tok}'")
        self.i += 1
        return tok

    def accept(self, tok: str) -> bool:
        if self.peek() == tok:
            self.i += 1
            return True
        return False

    def done(self) -> None:
        if self.peek() is not None:
            raise IRParseError(f"unexpected '{self.peek()}' at the end of the line")

    # -- expressions (precedence climbing, as the printer parenthesises)
    def expr(self, min_prec: int = 0) -> ir.Expr:
        """An expression; `c ? a : b` only at the top (the printer parenthesises it
        everywhere else)."""
        lhs = self.binary(max(min_prec, 1))
        if min_prec == 0 and self.accept("?"):
            t = self.binary(1)
            self.take(":")
            f = self.binary(1)
            return ir.Select(lhs, t, f, result_type(t, f))
        return lhs

    def binary(self, min_prec: int) -> ir.Expr:
        lhs = self.unary()
        while self.peek() in _PREC and _PREC[self.peek()] >= min_prec:
            op = self.take()
            rhs = self.binary(_PREC[op] + 1)
            dtype = "bool" if op in COMPARISONS else result_type(lhs, rhs)
            lhs = ir.Bin(op, lhs, rhs, dtype)
        return lhs

    def unary(self) -> ir.Expr:
        tok = self.peek()
        if tok == "-" and self._number(self.peek(1)):
            self.take()
            c = self.const()
            return ir.Const(-c.value, c.dtype)
        if tok == "-" and self.peek(1) == "inf":
            self.i += 2
            return ir.Const(float("-inf"), "f32")
        if tok in ("-", "!", "~"):
            self.take()
            x = self.unary()
            return ir.Un(tok, x, "bool" if tok == "!" else x.dtype)
        return self.primary()

    @staticmethod
    def _number(tok: Optional[str]) -> bool:
        return tok is not None and tok[0].isdigit()

    def const(self) -> ir.Const:
        tok = self.take()
        is_float = any(c in tok for c in ".e")
        value = float(tok) if is_float else int(tok)
        if self.peek() == ":" and self.peek(1) in ir.DTYPE_BITS:
            self.take(":")
            return ir.Const(value, self.take())
        return ir.Const(value, "f32" if is_float else "s32")

    def primary(self) -> ir.Expr:
        tok = self.peek()
        if tok == "(":
            self.take()
            e = self.expr(0)
            self.take(")")
            return e
        if self._number(tok):
            return self.const()
        if tok in ("true", "false"):
            self.take()
            return ir.Const(tok == "true", "bool")
        if tok in ("nan", "inf"):
            self.take()
            return ir.Const(float(tok), "f32")
        if tok is None or not (tok[0].isalpha() or tok[0] == "_"):
            raise IRParseError(f"expected an expression, found '{tok}'")
        return self.name()

    def name(self) -> ir.Expr:
        name = self.take()
        if name == "to" and self.peek() == "<":
            self.take("<")
            dtype = self.take()
            self.take(">")
            self.take("(")
            x = self.expr()
            self.take(")")
            return ir.Call("to", (x,), dtype)
        if name in ir.BUILTINS and self.peek() == "(":
            return self.call(name)
        if self.scope.frag(name) is not None and self.peek() == "[":
            f = self.scope.frag(name)
            return ir.Elem(name, self.index(), f.dtype)
        if self.scope.is_place(name) and self.peek() in ("<", "["):
            v = self.view_after(name)
            return ir.BufElem(v, self.index(), self.scope.place_dtype(v.base))
        return ir.Sym(name, self.scope.sym_dtype(name))

    def call(self, fn: str) -> ir.Expr:
        self.take("(")
        args = [self.expr()]
        while self.accept(","):
            args.append(self.expr())
        self.take(")")
        if fn == "cdiv":
            return ir.Call(fn, tuple(args), result_type(*args))
        dtype = result_type(*args) if len(args) == 2 else args[0].dtype
        if fn not in ("min", "max", "abs") and not ir.is_float(dtype):
            dtype = "f32"
        return ir.Call(fn, tuple(args), dtype)

    def index(self) -> tuple[ir.Expr, ...]:
        self.take("[")
        out = [self.expr()]
        while self.accept(","):
            out.append(self.expr())
        self.take("]")
        return tuple(out)

    # -- places
    def view(self) -> ir.View:
        return self.view_after(self.take())

    def view_after(self, base: str) -> ir.View:
        slot = None
        if self.accept("["):
            slot = self.expr()
            self.take("]")
        self.take("<")
        offsets, extents, keep = [], [], []
        while True:
            off = self.binary(_PREC[">"] + 1)  # a `>` here closes the view
            if self.accept("+:"):
                offsets.append(off)
                extents.append(self.binary(_PREC[">"] + 1))
                keep.append(True)
            else:
                offsets.append(off)
                extents.append(ir.Const(1, "s32"))
                keep.append(False)
            if not self.accept(","):
                break
        self.take(">")
        return ir.View(base, tuple(offsets), tuple(extents), tuple(keep), slot)

    def event_ref(self) -> ir.EventRef:
        name = self.take()
        if name.endswith(".at") and self.peek() == "(":
            self.take("(")
            order = self.expr()
            self.take(")")
            return ir.EventRef(name[:-3], order=order)
        if self.accept("["):
            index = self.expr()
            self.take("]")
            return ir.EventRef(name, index=index)
        return ir.EventRef(name)

    def names(self, close: str) -> list[str]:
        out = [self.take()]
        while self.accept(","):
            out.append(self.take())
        self.take(close)
        return out

    def ints(self, close: str) -> list[int]:
        out = []
        while self.peek() != close:
            c = self.unary()
            out.append(c.value)
            self.accept(",")
        self.take(close)
        return out


# ---------------------------------------------------------------- names in scope


class Scope:
    """The kernel's declarations and the scalars visible at a line."""

    def __init__(self, kernel: Optional[ir.Kernel], params: list[ir.Param]) -> None:
        self.k = kernel
        self.params = {p.name: p for p in params}
        self.syms: dict[str, str] = {}
        self.views: dict[str, str] = {}  # ViewDef name -> element type
        for p in params:
            for d in p.shape:
                if isinstance(d, ir.Sym):
                    self.syms[d.name] = d.dtype

    def sym_dtype(self, name: str) -> str:
        return self.syms.get(name, "s32")

    def frag(self, name: str) -> Optional[ir.Frag]:
        return self.k.frag(name) if self.k is not None else None

    def is_place(self, name: str) -> bool:
        return name in self.params or (self.k is not None and self.k.buffer(name) is not None) \
            or (self.k is not None and self.k.run_buffer(name) is not None) \
            or name in self.views or (self.k is not None and self.k.alias(name) is not None)

    def place_dtype(self, base: str) -> str:
        if self.k is not None and self.k.alias(base) is not None:
            base = self.k.alias(base).base
        if base in self.params:
            return self.params[base].dtype
        b = (self.k.buffer(base) or self.k.run_buffer(base)) if self.k is not None else None
        return b.dtype if b is not None else self.views.get(base, "f32")
