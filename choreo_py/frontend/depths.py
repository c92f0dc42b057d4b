"""The depth limits of choreo_py/limits.py, checked on a function's syntax tree."""
from __future__ import annotations

from . import ast
from choreo_py.diagnostics import Diagnostic
from choreo_py.limits import LIMITS, message


def depth_errors(fn: ast.Node) -> list[Diagnostic]:
    """Errors at the first statement nested beyond MAX_BLOCK_DEPTH and the first expression
    beyond MAX_EXPR_DEPTH of a function; one walk, without recursion."""
    found: dict[str, Diagnostic] = {}
    stack: list[tuple[ast.Node, int, int]] = [(fn, 0, 0)]
    while stack and len(found) < 2:
        node, blocks, exprs = stack.pop()
        if isinstance(node, ast.Block):
            blocks += 1
        exprs = exprs + 1 if isinstance(node, ast.Expr) else 0
        for kind, depth in (("block", blocks), ("expr", exprs)):
            if depth > LIMITS[kind][0] and kind not in found:
                found[kind] = Diagnostic("error", message(kind), node.loc)
        stack.extend((child, blocks, exprs) for child in ast.child_nodes(node))
    return sorted(found.values(), key=lambda d: (d.loc.line, d.loc.col))
