"""The C subset of the device functions a file defines (`__device__` functions and the
functions of `__cok__ { ... }` blocks), read so that a kernel's `call f(...)` can be
lowered (choreo_py/sema/device_funcs.py inlines them).

The subset: functions of scalar parameters (`int`, `unsigned`, `float`, `bool`),
optionally `template<int m, ...>`, returning one of those or `void`; bodies of local
declarations, assignments (`=`, `+=`, ..., `++`), `if`/`else`, `printf("...", ...)` and
a final `return`; expressions of literals, names, unary and binary operators and `?:`.
Anything else is not an error of the program (it is C++ for another compiler): the
function is recorded with the reason it is outside the subset, and a call of it is
refused by name with that reason. Text between functions (includes, types,
declarations) is skipped.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Optional

C_TYPES = {"int": "s32", "signed": "s32", "signed int": "s32", "unsigned": "u32",
           "unsigned int": "u32", "int32_t": "s32", "uint32_t": "u32", "float": "f32",
           "bool": "bool", "void": "void"}
_QUALIFIERS = {"__device__", "__forceinline__", "inline", "static", "__host__",
               "__noinline__", "constexpr"}
_TOKEN = re.compile(r"""
    (?P<ws>\s+|//[^\n]*|/\*.*?\*/|\#[^\n]*)
  | (?P<float>(?:\d+\.\d*|\.\d+)(?:[eE][+-]?\d+)?[fF]?|\d+[eE][+-]?\d+[fF]?)
  | (?P<int>0[xX][0-9a-fA-F]+[uU]?|\d+[uU]?)
  | (?P<str>"(?:[^"\\\n]|\\.)*")
  | (?P<name>[A-Za-z_]\w*(?:::[A-Za-z_]\w*)*)
  | (?P<op><<=|>>=|<=|>=|==|!=|&&|\|\||<<|>>|\+=|-=|\*=|/=|%=|&=|\|=|\^=|\+\+|--|[-+*/%<>=!~&|^?:;,(){}\[\].])
""", re.X | re.S)


class Outside(Exception):
    """A construct outside the subset (the message names it)."""


@dataclass
class DeviceFunc:
    name: str
    ret: str  # an IR dtype or "void"
    params: list[tuple[str, str]]  # (name, dtype)
    template: list[str] = field(default_factory=list)  # int template parameters
    body: Optional[list] = None  # statements, or None where `outside` says why
    outside: Optional[str] = None


def tokens(text: str) -> list[tuple[str, str]]:
    out, pos = [], 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            out.append(("bad", text[pos]))
            pos += 1
            continue
        pos = m.end()
        if m.lastgroup != "ws":
            out.append((m.lastgroup, m.group()))
    out.append(("end", ""))
    return out


def functions(text: str) -> dict[str, DeviceFunc]:
    """The functions `text` defines (by name; a later definition of a name wins)."""
    p = _Parser(tokens(text))
    out: dict[str, DeviceFunc] = {}
    while p.peek() != "":
        start = p.i
        try:
            f = p.function()
        except Outside:
            f = None
        if f is None:
            p.i = start
            p.skip_item()
        else:
            out[f.name] = f
    return out


class _Parser:
    def __init__(self, toks) -> None:
        self.t, self.i = toks, 0

    def peek(self, k: int = 0) -> str:
        return self.t[min(self.i + k, len(self.t) - 1)][1]

    def kind(self) -> str:
        return self.t[self.i][0]

    def take(self, want: Optional[str] = None) -> str:
        tok = self.peek()
        if want is not None and tok != want:
            raise Outside(f"'{want}' expected, got '{tok}'")
        self.i += 1
        return tok

    def skip_item(self) -> None:
        """Past the next `;` or balanced `{...}` at this level."""
        depth = 0
        while self.peek() != "":
            tok = self.take()
            if tok == "{":
                depth += 1
            elif tok == "}":
                depth -= 1
                if depth <= 0:
                    if self.peek() == ";":
                        self.take()
                    return
            elif tok == ";" and depth == 0:
                return

    # ------------------------------------------------------------ headers
    def ctype(self) -> str:
        words = []
        while self.peek() in ("unsigned", "signed", "int", "float", "bool", "void",
                              "int32_t", "uint32_t", "const"):
            w = self.take()
            if w != "const":
                words.append(w)
        name = " ".join(words)
        if name not in C_TYPES:
            raise Outside(f"the type '{name or self.peek()}'")
        if self.peek() in ("*", "&"):
            raise Outside(f"a {'pointer' if self.peek() == '*' else 'reference'} type")
        return C_TYPES[name]

    def function(self) -> Optional[DeviceFunc]:
        template = []
        if self.peek() == "template":
            self.take()
            self.take("<")
            while True:
                if self.peek() != "int":
                    raise Outside("a template parameter other than 'int'")
                self.take()
                template.append(self.take())
                if self.take() == ">":
                    break
        while self.peek() in _QUALIFIERS:
            self.take()
        if self.peek() not in ("unsigned", "signed", "int", "float", "bool", "void", "int32_t",
                               "uint32_t", "const"):
            return None
        try:
            ret = self.ctype()
        except Outside:
            return None
        if self.kind() != "name" or self.peek(1) != "(":
            return None
        name = self.take()
        self.take("(")
        params, outside = [], None
        if self.peek() == "void" and self.peek(1) == ")":
            self.take()
        while self.peek() != ")":
            try:
                dt = self.ctype()
            except Outside as o:
                outside = outside or f"its parameter of {o}"
                while self.peek() not in (",", ")", ""):
                    self.take()
                dt = None
            pname = self.take() if self.kind() == "name" else ""
            params.append((pname, dt))
            if self.peek() == ",":
                self.take()
        self.take(")")
        if self.peek() != "{":
            return None  # a declaration: no definition here
        f = DeviceFunc(name, ret, params, template)
        body_start = self.i
        if outside is None:
            try:
                f.body = self.block()
                return f
            except Outside as o:
                outside = str(o)
        self.i = body_start
        self.skip_item()
        f.outside = outside
        return f

    # ------------------------------------------------------------ statements
    def block(self) -> list:
        self.take("{")
        out = []
        while self.peek() != "}":
            if self.peek() == "":
                raise Outside("an unclosed '{'")
            out.append(self.statement())
        self.take("}")
        return out

    def body_of(self) -> list:
        return self.block() if self.peek() == "{" else [self.statement()]

    def statement(self):
        tok = self.peek()
        if tok == "{":
            return ("block", self.block())
        if tok == "if":
            self.take()
            self.take("(")
            cond = self.expr()
            self.take(")")
            then = self.body_of()
            orelse = []
            if self.peek() == "else":
                self.take()
                orelse = self.body_of()
            return ("if", cond, then, orelse)
        if tok == "return":
            self.take()
            value = None if self.peek() == ";" else self.expr()
            self.take(";")
            return ("return", value)
        if tok == "printf":
            self.take()
            self.take("(")
            if self.kind() != "str":
                raise Outside("a printf format that is not a string literal")
            fmt = self.take()
            args = []
            while self.peek() == ",":
                self.take()
                args.append(self.expr())
            self.take(")")
            self.take(";")
            return ("printf", _unescape(fmt[1:-1]), args)
        if tok in ("unsigned", "signed", "int", "float", "bool", "int32_t", "uint32_t", "const"):
            dt = self.ctype()
            decls = []
            while True:
                name = self.take()
                init = None
                if self.peek() == "=":
                    self.take()
                    init = self.expr()
                decls.append(("decl", dt, name, init))
                if self.take() == ";":
                    break
            return decls[0] if len(decls) == 1 else ("seq", decls)
        if tok in ("++", "--"):
            self.take()
            name = self.take()
            self.take(";")
            return ("assign", name, tok[0] + "=", ("num", 1, "s32"))
        if self.kind() == "name":
            name = self.take()
            op = self.take()
            if op in ("++", "--"):
                self.take(";")
                return ("assign", name, op[0] + "=", ("num", 1, "s32"))
            if op in ("=", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "<<=", ">>="):
                value = self.expr()
                self.take(";")
                return ("assign", name, op, value)
            raise Outside(f"the statement '{name} {op} ...'")
        raise Outside(f"the statement starting with '{tok}'")

    # ------------------------------------------------------------ expressions
    _BINARY = [("||",), ("&&",), ("|",), ("^",), ("&",), ("==", "!="), ("<", "<=", ">", ">="),
               ("<<", ">>"), ("+", "-"), ("*", "/", "%")]

    def expr(self):
        cond = self.binary(0)
        if self.peek() == "?":
            self.take()
            a = self.expr()
            self.take(":")
            return ("tern", cond, a, self.expr())
        return cond

    def binary(self, level: int):
        if level == len(self._BINARY):
            return self.unary()
        lhs = self.binary(level + 1)
        while self.peek() in self._BINARY[level]:
            op = self.take()
            lhs = ("bin", op, lhs, self.binary(level + 1))
        return lhs

    def unary(self):
        if self.peek() in ("-", "!", "~", "+"):
            op = self.take()
            return ("un", op, self.unary())
        return self.primary()

    def primary(self):
        kind, tok = self.t[self.i]
        if tok == "(":
            self.take()
            e = self.expr()
            self.take(")")
            return e
        if kind == "int":
            self.take()
            unsigned = tok[-1] in "uU"
            return ("num", int(tok.rstrip("uU"), 0), "u32" if unsigned else "s32")
        if kind == "float":
            self.take()
            if tok[-1] not in "fF":
                raise Outside(f"the double literal '{tok}' (write '{tok}f')")
            return ("num", float(tok[:-1]), "f32")
        if tok in ("true", "false"):
            self.take()
            return ("num", tok == "true", "bool")
        if kind == "name":
            self.take()
            if self.peek() in ("(", "[", "."):
                raise Outside(f"'{tok}{self.peek()}...' (calls, indexing and members)")
            return ("name", tok)
        raise Outside(f"the expression '{tok}'")


def _unescape(s: str) -> str:
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t", "\\": "\\", '"': '"',
                                       "%": "%"}.get(m.group(1), "\\" + m.group(1)), s)
