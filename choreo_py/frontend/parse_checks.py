"""Parse-level rejections: rules the grammar does not express but that need
no type information, checked on the AST right after parsing.

* integer literals must fit 64 bits (signed unless suffixed `u`);
* mdspan sizes written as constants must be positive;
* `{a, b} by [x, y]`: as many parallel variables as bounds;
* device targets must be known; parallel levels unique in one parallel-by;
* DMA/TMA modifiers: `.load` is TMA-only, eviction hints only on
  `tma.load` and before `.swiz`, only 2:4 sparsity;
* removed syntax (`stage<N>(x)`);
* calls: builtins, or intrinsics declared by `#pragma croq intrinsic`
  (function-, block- or file-scoped); a call-looking `f(x)` of an unknown
  `f` is a dimension access and is left alone.

All errors are collected and raised together, in source order.
"""
from __future__ import annotations

import re
from dataclasses import fields
from typing import Optional

from . import ast, builtins, co_calls
from .astbuild_exprs import is_builtin_function
from .literals import out_of_range
from choreo_py.diagnostics import ChoreoError, Diagnostic

DEVICE_TARGETS = ("cpu", "gpu")


def check(program: ast.Program) -> None:
    errors: list[Diagnostic] = []
    file_scope = _file_scope_intrinsics(program)
    for fn in program.functions:
        errors += FunctionChecker(fn, file_scope).run()
    if errors:
        errors.sort(key=lambda d: (d.loc.file, d.loc.line, d.loc.col) if d.loc else ("", 0, 0))
        raise ChoreoError(diagnostics=errors)


# ----------------------------------------------------------------- literals

def int_literal_error(lit: ast.IntLit) -> Optional[str]:
    """The reference compiler's message for an out-of-range literal, or None."""
    return out_of_range(lit.text, lit.value, "u" in lit.suffix)


def fold_int(expr) -> Optional[int]:
    """The value of an integer constant expression (C semantics), or None."""
    try:
        return _fold(expr)
    except RecursionError:     # absurdly deep: not a constant worth checking
        return None


def _fold(expr) -> Optional[int]:
    if isinstance(expr, ast.IntLit):
        return expr.value
    if isinstance(expr, ast.Unary) and expr.op in _UNARY:
        v = _fold(expr.operand)
        return None if v is None else _UNARY[expr.op](v)
    if isinstance(expr, ast.Binary) and expr.op in _BINARY:
        a, b = _fold(expr.lhs), _fold(expr.rhs)
        if a is None or b is None:
            return None
        if expr.op in ("/", "%") and b == 0:
            return None
        if expr.op in ("<<", ">>") and not 0 <= b < 64:  # undefined in C: not folded
            return None
        return _BINARY[expr.op](a, b)
    return None


def _c_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def _c_rem(a: int, b: int) -> int:
    r = abs(a) % abs(b)
    return r if a >= 0 else -r


#: C's integer operators, as constant folding evaluates them (`!128` is 0, `3 > 2` is 1)
_UNARY = {"-": lambda v: -v, "+": lambda v: v, "!": lambda v: int(v == 0), "~": lambda v: ~v}
_BINARY = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
           "/": _c_div, "%": _c_rem, "<<": lambda a, b: a << b, ">>": lambda a, b: a >> b,
           "&": lambda a, b: a & b, "|": lambda a, b: a | b, "^": lambda a, b: a ^ b,
           "<": lambda a, b: int(a < b), ">": lambda a, b: int(a > b),
           "<=": lambda a, b: int(a <= b), ">=": lambda a, b: int(a >= b),
           "==": lambda a, b: int(a == b), "!=": lambda a, b: int(a != b),
           "&&": lambda a, b: int(bool(a and b)), "||": lambda a, b: int(bool(a or b))}


def non_integer(expr) -> Optional[ast.Node]:
    """A floating-point literal that an integer expression (a dimension, a bound) is made
    of, through its operators (`[inf]`, `[2.5 * N]`), or None."""
    stack = [expr]
    while stack:
        e = stack.pop()
        if isinstance(e, ast.FloatLit):
            return e
        if isinstance(e, ast.Unary):
            stack.append(e.operand)
        elif isinstance(e, ast.Binary):
            stack += [e.lhs, e.rhs]
        elif isinstance(e, ast.Ternary):
            stack += [e.then, e.otherwise]
    return None


# ----------------------------------------------------------------- intrinsics

_PRAGMA = re.compile(r"^[ \t]*#[ \t]*pragma[ \t]+(?:croq|choreo)[ \t]+intrinsic[ \t]+"
                     r"(prefix|namespace)[ \t]+([A-Za-z_]\w*)", re.M)
_PRAGMA_CALL = re.compile(r'__pragma_croq_intrinsic_(prefix|namespace)\s*\(\s*"(\w+)"\s*\)')


def _file_scope_intrinsics(program: ast.Program) -> dict:
    """Intrinsic prefixes/namespaces declared in host code before each function:
    function name -> (prefixes, namespaces) visible at file scope."""
    prefixes: list[str] = []
    namespaces: list[str] = []
    visible = {}
    for item in program.items:
        if isinstance(item, ast.HostCode):
            for pattern in (_PRAGMA, _PRAGMA_CALL):
                for m in pattern.finditer(item.text):
                    (prefixes if m.group(1) == "prefix" else namespaces).append(m.group(2))
        elif isinstance(item, ast.FunctionDef):
            visible[id(item)] = (tuple(prefixes), tuple(namespaces))
    return visible


class _Scope:
    def __init__(self, parent: Optional["_Scope"] = None) -> None:
        self.parent = parent
        self.prefixes: list[str] = []
        self.namespaces: list[str] = []

    def is_intrinsic(self, name: str) -> bool:
        scope = self
        while scope is not None:
            if "::" in name and name.split("::")[0] in scope.namespaces:
                return True
            if any(name.startswith(p) for p in scope.prefixes):
                return True
            scope = scope.parent
        return False


# ----------------------------------------------------------------- the checker

class FunctionChecker:
    def __init__(self, fn: ast.FunctionDef, file_scope: dict) -> None:
        self.fn = fn
        self.errors: list[Diagnostic] = []
        self.shape_ranks: dict[str, int] = {}
        self.root = _Scope()
        self.root.prefixes, self.root.namespaces = map(list, file_scope.get(id(fn), ((), ())))

    def error(self, message: str, loc) -> None:
        self.errors.append(Diagnostic("error", message, loc))

    def run(self) -> list[Diagnostic]:
        for p in self.fn.params:
            self._param(p)
        self._type(self.fn.return_type)
        self._block(self.fn.body, _Scope(self.root))
        return self.errors

    # ---------------------------------------------------------- walking

    def _block(self, block: ast.Block, scope: _Scope) -> None:
        """Visit statements in source order (iteratively: blocks may nest deeply).

        A `#pragma croq intrinsic` adds to the scope it appears in, so it
        affects the statements after it there and in the blocks they contain.
        """
        stack: list[tuple[ast.Stmt, _Scope]] = [(st, scope) for st in reversed(block.stmts)]
        while stack:
            stmt, scope = stack.pop()
            if isinstance(stmt, ast.IntrinsicDirective):
                (scope.prefixes if stmt.kind == "prefix" else scope.namespaces).append(stmt.value)
                continue
            nested = self._stmt_fields(stmt, scope)
            handler = getattr(self, "_" + type(stmt).__name__, None)
            if handler is not None:   # after the fields: intrinsic calls are resolved
                handler(stmt)
            for inner in reversed(nested):     # each nested block is a new scope
                inner_scope = _Scope(scope)
                stack += [(st, inner_scope) for st in reversed(inner.stmts)]

    def _stmt_fields(self, stmt: ast.Stmt, scope: _Scope) -> list[ast.Block]:
        """Check the expressions of `stmt`; return its nested blocks."""
        blocks = []
        for f in fields(stmt):
            value = getattr(stmt, f.name)
            if isinstance(value, ast.Block):
                blocks.append(value)
            elif isinstance(value, ast.Node) and not isinstance(value, ast.Stmt):
                self._exprs(stmt, f.name, value, scope)
            elif isinstance(value, list):
                for i, item in enumerate(value):
                    if isinstance(item, ast.Node) and not isinstance(item, ast.Stmt):
                        self._exprs(value, i, item, scope)
        return blocks

    def _exprs(self, holder, key, root: ast.Node, scope: _Scope) -> None:
        """Check every expression node under `root`; resolve intrinsic calls
        written `p_name(x)`, which parse as dimension accesses."""
        for node in ast.walk(root):
            if isinstance(node, ast.IntLit):
                msg = int_literal_error(node)
                if msg:
                    self.error(msg, node.loc)
            elif isinstance(node, ast.MdSpanLit):
                self._sizes(node.elements)
            elif isinstance(node, ast.MdSpanType):
                self._type(node)
            elif isinstance(node, ast.CallExpr):
                self._call(node, scope)
            elif isinstance(node, ast.Binary):
                self._removed_stage(node)
        self._rewrite_intrinsics(holder, key, root, scope)

    def _rewrite_intrinsics(self, holder, key, root, scope: _Scope) -> None:
        stack = [(holder, key, root)]
        while stack:
            parent, k, node = stack.pop()
            if isinstance(node, ast.DimOf) and isinstance(node.base, ast.Name) \
                    and scope.is_intrinsic(node.base.id):
                call = ast.CallExpr(func=node.base.id, args=[node.index], loc=node.loc)
                if isinstance(parent, list):
                    parent[k] = call
                else:
                    setattr(parent, k, call)
                node = call
            for f in fields(node):
                value = getattr(node, f.name)
                if isinstance(value, ast.Node):
                    stack.append((node, f.name, value))
                elif isinstance(value, list):
                    stack += [(value, i, v) for i, v in enumerate(value) if isinstance(v, ast.Node)]

    # ---------------------------------------------------------- types and shapes

    def _param(self, p: ast.Param) -> None:
        self._type(p.type)
        t = p.type
        if p.name and isinstance(t, ast.MdSpanType):
            # parameter dimensions are always scalars: one entry per dimension
            rank = t.rank if t.rank is not None else len(t.dims or [])
            if rank:
                self.shape_ranks[p.name] = rank

    def _type(self, t) -> None:
        if isinstance(t, ast.MdSpanType) and t.dims is not None:
            self._sizes(t.dims)

    def _sizes(self, dims) -> None:
        for d in dims:
            if isinstance(d, ast.DimWildcard):
                continue
            if (bad := non_integer(d)) is not None:
                self.error(f"an mdspan size is an integer: '{bad.text}' is a floating-point "
                           "value", bad.loc)
                continue
            value = fold_int(d)
            if value is not None and value <= 0:
                self.error(f'The mdspan size "{value}" is invalid!', d.loc)

    def _rank_of(self, expr) -> int:
        """How many bounds an expression in `by [...]` stands for: a known
        shape counts its rank, a literal list its elements, anything else 1."""
        total, stack = 0, [expr]
        while stack:
            e = stack.pop()
            if isinstance(e, ast.MdSpanLit):
                stack += e.elements
            elif isinstance(e, ast.Name) and e.id in self.shape_ranks:
                total += self.shape_ranks[e.id]
            elif isinstance(e, ast.Member) and e.name == "span" \
                    and isinstance(e.base, ast.Name) and e.base.id in self.shape_ranks:
                total += self.shape_ranks[e.base.id]
            else:
                total += 1
        return total

    # ---------------------------------------------------------- statements

    def _MdSpanDecl(self, d: ast.MdSpanDecl) -> None:
        if d.rank is not None:
            self.shape_ranks[d.name] = d.rank
        elif isinstance(d.value, ast.MdSpanLit):
            self.shape_ranks[d.name] = self._rank_of(d.value)

    def _BufferDecl(self, d: ast.BufferDecl) -> None:
        if d.type.dims is not None and len(d.type.dims) > 1:
            self.shape_ranks[d.name] = len(d.type.dims)

    def _ParallelBy(self, pb: ast.ParallelBy) -> None:
        seen: set[str] = set()
        for level in pb.levels:
            for name in ([level.var] if level.var else []) + level.elements:
                if name in seen:
                    self.error(f"The parallel variable '{name}' has been used in the same "
                               "parallelby block.", level.loc)
                seen.add(name)
            self._parallel_level(level)

    def _parallel_level(self, level: ast.ParallelLevel) -> None:
        if level.elements:
            nvars = len(level.elements)
            nbounds = sum(self._rank_of(b) for b in level.bounds)
            if nvars > nbounds:
                self.error(f"parallel variables are more than their bounds ({nvars} vs. "
                           f"{nbounds}).", level.loc)
            elif nvars < nbounds:
                self.error(f"parallel variables are less than their bounds ({nvars} vs. "
                           f"{nbounds}).", level.loc)
        for b in level.bounds:
            if (bad := non_integer(b)) is not None:
                self.error(f"a parallel bound is an integer: '{bad.text}' is a floating-point "
                           "value", bad.loc)
                continue
            value = fold_int(b)
            if value is not None and value <= 0:
                self.error(f"bound {value} in parallelby is invalid: should be greater "
                           "than 0.", b.loc)
        if level.device_target is not None and level.device_target not in DEVICE_TARGETS:
            self.error(f"unknown device target '{level.device_target}'; available targets: "
                       f"{', '.join(DEVICE_TARGETS)}", level.loc)

    def _DmaOp(self, op: ast.DmaOp) -> None:
        mods = op.modifiers
        if not mods:
            return
        op_mod = mods[0]
        if op.operation == "load" and op.engine != "tma":
            self.error("'.load' is a TMA-only operation.", op_mod.loc)
        saw_swizzle = saw_evict = False
        for mod in mods[1:]:
            if mod.name in ("swiz", "swizzle"):
                saw_swizzle = True
            elif mod.name in ("evict_first", "evict_last"):
                if not (op.engine == "tma" and op.operation == "load"):
                    self.error("TMA L2 eviction modifiers are only valid on 'tma.load'.",
                               op_mod.loc)
                elif saw_swizzle:
                    self.error("TMA eviction modifier must precede '.swiz'.", mod.loc)
                elif saw_evict:
                    self.error("only one TMA eviction modifier is allowed.", mod.loc)
                saw_evict = True
        if op.sparse is not None:
            if op.operation != "copy":
                self.error("Sparse DMA only supports dma.copy.sp currently.", op.loc)
            elif op.sparse != (2, 4):
                n, m = op.sparse
                self.error(f"Only 2:4 structured sparsity is supported; got {n}:{m}.", op.loc)

    def _ExprStmt(self, s: ast.ExprStmt) -> None:
        e = s.expr
        if self._co_function(e):  # `f(x);`: a call of a __co__ function (frontend/co_calls.py)
            return
        if isinstance(e, ast.DimOf) and isinstance(e.base, ast.Name):
            # `f(x);` left as a dimension access: `f` is no builtin nor intrinsic
            self.error(f"'{e.base.id}' is neither a builtin function nor a declared intrinsic "
                       f"(device functions are called with 'call {e.base.id}(...)')", e.loc)
        elif isinstance(e, ast.DimOf):
            self.error("this expression is not a statement", e.loc)

    # ---------------------------------------------------------- calls

    def _call(self, call: ast.CallExpr, scope: _Scope) -> None:
        name = call.func
        if is_builtin_function(name) or scope.is_intrinsic(name) or self._co_function(call):
            return
        hint = builtins.spelling_hint(name)
        if hint:  # a C spelling of a builtin (`__powf(x, y)`): as its one-argument form
            self.error(f"'{name}' is not declared{hint}", call.loc)
            return
        self.error(f"'{name}' is neither a builtin function nor a declared intrinsic "
                   f"(device functions are called with 'call {name}(...)')", call.loc)

    def _co_function(self, e) -> bool:
        """Whether `e` has the form of a call of a `__co__` function of the file (the names
        it declares are sema's to tell apart: frontend/co_calls.py)."""
        return co_calls.callee(self.fn, e, lambda name: False) is not None

    def _removed_stage(self, node: ast.Binary) -> None:
        """`stage<N>(x)` parses as `stage < N > (x)`; it is removed syntax."""
        lhs = node.lhs
        if node.op == ">" and isinstance(lhs, ast.Binary) and lhs.op == "<" \
                and isinstance(lhs.lhs, ast.Name) and lhs.lhs.id == "stage" \
                and not lhs.parenthesized and node.rhs.parenthesized:
            self.error("'stage<N>(x)' has been removed; compute the slot explicitly, "
                       "e.g. 'x % N'", lhs.loc)
