"""Building the AST from the parser's reductions: shared helpers, types and
expressions.

The builder runs inside Lark's LALR parser (an inline transformer): each
method is called with the children of one reduced rule, tokens included
(the grammar is parsed with keep_all_tokens and maybe_placeholders, so an
optional part that is absent shows up as None).  Being called bottom-up by
the parser loop, nothing here recurses over the tree, so deep nesting in the
input cannot exhaust Python's stack at this stage.
"""
from __future__ import annotations

from typing import Any, Callable, Optional

from lark import Token

from . import ast, builtins
from choreo_py.limits import MAX_RANK
from .literals import out_of_range, source_int_value
from choreo_py.diagnostics import Diagnostic
from choreo_py.source import Loc

#: Spellings accepted for types, mapped to their canonical names.
TYPE_ALIASES = {
    "int": "s32", "half": "f16", "bfp16": "bf16", "float": "f32", "double": "f64",
    "f8": "f8_e4m3",
}

#: Functions callable by name inside Choreo code (everything else that looks
#: like `f(x)` is a dimension access `sp(0)`, or an intrinsic): the one table of
#: frontend/builtins.py.
BUILTIN_FUNCTIONS = frozenset(builtins.FUNCTIONS)
is_builtin_function = builtins.is_builtin


def is_token(x: Any) -> bool:
    return isinstance(x, Token)


def nodes(children: list) -> list:
    """The non-token, non-placeholder children."""
    return [c for c in children if c is not None and not isinstance(c, Token)]


def tokens(children: list, kind: Optional[str] = None) -> list[Token]:
    return [c for c in children if isinstance(c, Token) and (kind is None or c.type == kind)]


def unescape(literal: str) -> str:
    """The value of a C string literal (quotes included in `literal`); a raw
    string `R"d(...)d"` is taken as written, without escapes."""
    if literal.startswith('R"'):
        open_paren = literal.index("(")
        return literal[open_paren + 1:len(literal) - open_paren]  # `)d"` is as long as `R"d`
    body = literal[1:-1]
    simple = {"n": "\n", "t": "\t", '"': '"', "\\": "\\", "'": "'", "r": "\r", "0": "\0"}
    out, i = [], 0
    while i < len(body):
        ch = body[i]
        if ch == "\\" and i + 1 < len(body) and body[i + 1] in simple:
            out.append(simple[body[i + 1]])
            i += 2
        else:
            out.append(ch)
            i += 1
    return "".join(out)


class BuilderBase:
    """Location mapping and error collection shared by the builder mixins."""

    def reset(self, base: int, loc_of: Callable[[int], Loc]) -> None:
        """Prepare for parsing one segment starting at offset `base`."""
        self._base = base
        self._loc_of = loc_of
        self.errors: list[Diagnostic] = []

    def error(self, message: str, loc: Loc) -> None:
        """Record an error; parsing goes on so that several can be reported."""
        self.errors.append(Diagnostic("error", message, loc))

    def tloc(self, tok: Token) -> Loc:
        return self._loc_of(self._base + tok.start_pos)

    def loc(self, children: list) -> Loc:
        """Location of the first child that has one."""
        for c in children:
            if isinstance(c, Token):
                return self.tloc(c)
            if isinstance(c, ast.Node):
                return c.loc
            if isinstance(c, list) and c:
                return self.loc(c)
        return self._loc_of(self._base)


class ExprBuilder(BuilderBase):
    """Types and expressions."""

    # ------------------------------------------------------------ types

    def type_name(self, c):
        spelling = str(c[0])
        return ast.TypeRef(name=TYPE_ALIASES.get(spelling, spelling), spelling=spelling,
                           loc=self.tloc(c[0]))

    def return_type(self, c):
        if isinstance(c[0], Token):   # void | auto
            return ast.TypeRef(name=str(c[0]), spelling=str(c[0]), loc=self.tloc(c[0]))
        return c[0]

    def value_type(self, c):
        if isinstance(c[0], Token):   # stream
            return ast.TypeRef(name="stream", spelling="stream", loc=self.tloc(c[0]))
        elem, dims = c[0], c[1]
        if dims is None:
            return elem
        shape, rank = dims
        return ast.MdSpanType(elem=elem, dims=shape, rank=rank, loc=elem.loc)

    def dims(self, c):
        """(dims, rank) for `[...]`, `mdspan<N>` and `mdspan[...]`."""
        if str(c[0]) == "mdspan" and str(c[1]) == "<":
            return None, self.rank_value(c[2])
        items = c[1] if str(c[0]) == "[" else c[2]
        if len(items) > MAX_RANK:
            self.rank_error(len(items), items[MAX_RANK].loc)
        # One entry may stand for a whole shape (`f32 [sp]`): rank unknown then.
        single_scalar = len(items) == 1 and isinstance(items[0], (ast.IntLit, ast.DimWildcard))
        return items, (len(items) if len(items) > 1 or single_scalar else None)

    def rank_value(self, tok: Token) -> int:
        """The N of `mdspan<N>`; one beyond limits.MAX_RANK is an error here, before any
        stage makes N dimensions of it."""
        rank = self.int_lit([tok]).value
        if rank > MAX_RANK:
            self.rank_error(rank, self.tloc(tok))
            return MAX_RANK
        return rank

    def rank_error(self, rank: int, loc: Loc) -> None:
        self.error(f"an mdspan of more than {MAX_RANK} dimensions (the limit of choreo-py): "
                   f"rank {rank}", loc)

    def dim_items(self, c):
        return nodes(c)

    def dim_item(self, c):
        if isinstance(c[0], Token):
            return ast.DimWildcard(kind=str(c[0]), loc=self.tloc(c[0]))
        return c[0]

    def storage(self, c):
        return c[0]

    # ------------------------------------------------------------ literals

    def int_lit(self, c):
        tok = c[0]
        text = str(tok)
        body = text.rstrip("uUlL")
        suffix = text[len(body):].lower()
        hexa = body[:2] in ("0x", "0X")
        value = source_int_value(body[2:] if hexa else body, 16 if hexa else 10)
        if value is None:  # far beyond 64 bits, not computed (literals.py says why)
            self.error(out_of_range(text, None, "u" in suffix), self.tloc(tok))
            value = 0
        return ast.IntLit(value=value, suffix=suffix, text=text, loc=self.tloc(tok))

    def float_lit(self, c):
        text = str(c[0])
        suffix = "f" if text[-1] in "fF" else ""
        return ast.FloatLit(value=float(text.rstrip("fF")), suffix=suffix, text=text,
                            loc=self.tloc(c[0]))

    def inf_lit(self, c):
        return ast.FloatLit(value=float("inf"), suffix="f", text="inf", loc=self.tloc(c[0]))

    def bool_lit(self, c):
        return ast.BoolLit(value=str(c[0]) == "true", loc=self.tloc(c[0]))

    def null_lit(self, c):
        return ast.NullPtr(loc=self.tloc(c[0]))

    def strings(self, c):
        return ast.StringLit(value="".join(unescape(str(t)) for t in c), loc=self.tloc(c[0]))

    def string_lit(self, c):
        return c[0]

    # ------------------------------------------------------------ names

    def name(self, c):
        return ast.Name(id=str(c[0]), loc=self.tloc(c[0]))

    def qualified_name(self, c):
        return ast.Name(id="::".join(str(t) for t in c if t.type == "NAME"), loc=self.tloc(c[0]))

    def callee(self, c):
        if isinstance(c[0], ast.Name):
            return c[0]
        return ast.Name(id=str(c[0]), loc=self.tloc(c[0]))

    def span_of(self, c):
        base = ast.Name(id=str(c[0]), loc=self.tloc(c[0]))
        return ast.Member(base=base, name="span", loc=base.loc)

    def ubound(self, c):
        return ast.UBound(name=str(c[1]), loc=self.tloc(c[0]))

    # ------------------------------------------------------------ operators

    def binary(self, c):
        lhs, op, rhs = c
        return ast.Binary(op=str(op), lhs=lhs, rhs=rhs, loc=lhs.loc)

    def prefix(self, c):
        op, operand = c
        return ast.Unary(op=str(op), operand=operand, loc=self.tloc(op))

    def postfix_op(self, c):
        return ast.Unary(op="post" + str(c[1]), operand=c[0], loc=c[0].loc)

    def address_of(self, c):
        return ast.Unary(op="&", operand=c[1], loc=self.tloc(c[0]))

    def ternary(self, c):
        return ast.Ternary(cond=c[0], then=c[2], otherwise=c[4], loc=c[0].loc)

    def paren(self, c):
        inner = c[1]
        inner.parenthesized = True
        return inner

    def expr_list(self, c):
        return nodes(c)

    # ------------------------------------------------------------ aggregates

    def ituple_lit(self, c):
        return ast.ITupleLit(elements=c[1], loc=self.tloc(c[0]))

    def mdspan_lit(self, c):
        return ast.MdSpanLit(elements=c[1], loc=self.tloc(c[0]))

    def shape_derive(self, c):
        base = ast.Name(id=str(c[0]), loc=self.tloc(c[0]))
        if str(c[1]) == ".":
            base = ast.Member(base=base, name="span", loc=base.loc)
        return ast.Index(base=base, indices=mark_dim_indices(c[-2]), loc=base.loc)

    def size_of(self, c):
        return ast.SizeOf(operand=c[1], loc=self.tloc(c[0]))

    def size_of_type(self, c):
        return ast.SizeOf(operand=c[1], loc=self.tloc(c[0]))

    def size_cdiv(self, c):
        return ast.CallExpr(func="cdiv", args=[c[2], c[4]], loc=self.tloc(c[0]))

    # ------------------------------------------------------------ postfix

    def member(self, c):
        return ast.Member(base=c[0], name=str(c[2]), loc=c[0].loc)

    def method_args(self, c):
        return c[0], c[2]

    def method_call(self, c):
        base, name = c[0], str(c[2])
        args, strides = c[4] if c[4] is not None else ([], None)
        if name == "span" and len(args) == 1 and strides is None:
            # `x.span(1)`: a dimension of x's shape
            span = ast.Member(base=base, name="span", loc=base.loc)
            return ast.DimOf(base=span, index=args[0], loc=base.loc)
        return ast.MethodCall(base=base, method=name, args=args, strides=strides, loc=base.loc)

    def apply_call(self, c):
        """`f(args)`: a builtin call, or `sp(i)` picking one dimension.
        Intrinsic calls are told apart later, once `#pragma`s are known."""
        base, args = c[0], c[2] or []
        if isinstance(base, ast.Name) and (is_builtin_function(base.id) or "::" in base.id
                                           or len(args) != 1):
            return ast.CallExpr(func=base.id, args=args, loc=base.loc)
        if len(args) != 1:
            self.error("a dimension access takes exactly one index", base.loc)
            return base
        return ast.DimOf(base=base, index=args[0], loc=base.loc)

    def index(self, c):
        base, indices = c[0], c[2]
        return ast.Index(base=base, indices=indices, loc=base.loc)

    # ------------------------------------------------------------ calls and casts

    def cast_target(self, c):
        return c[1]

    def cast(self, c):
        target = c[1]
        if isinstance(target, ast.StringLit):
            return ast.Cast(target=None, foreign=target.value, value=c[3], loc=self.tloc(c[0]))
        return ast.Cast(target=target, foreign=None, value=c[3], loc=self.tloc(c[0]))

    def template_arg(self, c):
        return c[0]

    def template_args(self, c):
        return nodes(c)

    def device_call(self, c):
        _, callee, targs, _, args, _ = c
        return ast.Call(func=callee.id, template_args=targs, args=args or [], loc=self.tloc(c[0]))

    def intrinsic_template_call(self, c):
        """`ns::f<4, T>(x);`: an intrinsic with template arguments (statements only)."""
        callee, targs, _, args, _ = c
        return ast.CallExpr(func=callee.id, args=args or [], template_args=targs,
                            loc=callee.loc)

    def map_kw(self, c):
        return c[0]

    def buffer_map(self, c):
        source, _, kw, _, storage, _, _, offset, _, size, _ = c
        return ast.BufferMap(target="", source=source, storage=str(storage), offset=offset,
                             size=size, remap=str(kw) == "remap", loc=source.loc)

    def ituple_select(self, c):
        base = ast.Name(id=str(c[0]), loc=self.tloc(c[0]))
        return ast.ITupleSelect(base=base, indices=mark_dim_indices(c[2]), loc=base.loc)


def mark_dim_indices(exprs: list) -> list:
    """In a derivation `sp[(1), (0)/2]` or `t {(2), (0)}`, a parenthesised
    integer or name denotes a dimension of the base: wrap it in DimIndex."""
    return [_mark(e) for e in exprs]


def _mark(e):
    """Wrap dimension picks in `e`, looking through + - * / and unary ops."""
    if _is_pick(e):
        return ast.DimIndex(index=e, loc=e.loc)
    stack = [e]
    while stack:                      # iterative: long sums must not recurse
        node = stack.pop()
        if isinstance(node, ast.Binary):
            for side in ("lhs", "rhs"):
                child = getattr(node, side)
                if _is_pick(child):
                    setattr(node, side, ast.DimIndex(index=child, loc=child.loc))
                else:
                    stack.append(child)
        elif isinstance(node, ast.Unary):
            if _is_pick(node.operand):
                node.operand = ast.DimIndex(index=node.operand, loc=node.operand.loc)
            else:
                stack.append(node.operand)
    return e


def _is_pick(e) -> bool:
    return e.parenthesized and isinstance(e, (ast.IntLit, ast.Name))
