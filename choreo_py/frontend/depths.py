"""The depth limits of choreo_py/limits.py, checked on a function's syntax tree."""
from __future__ import annotations

from . import ast
from choreo_py.diagnostics import Diagnostic
from choreo_py.limits import MAX_BLOCK_DEPTH, MAX_EXPR_DEPTH


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
        if blocks > MAX_BLOCK_DEPTH and "block" not in found:
            found["block"] = Diagnostic("error", f"statements nested more than {MAX_BLOCK_DEPTH} "
                                        "deep (the limit of choreo-py)", node.loc)
        if exprs > MAX_EXPR_DEPTH and "expr" not in found:
            found["expr"] = Diagnostic("error", f"an expression nested more than {MAX_EXPR_DEPTH} "
                                       "levels deep (the limit of choreo-py)", node.loc)
        stack.extend((child, blocks, exprs) for child in ast.child_nodes(node))
    return sorted(found.values(), key=lambda d: (d.loc.line, d.loc.col))
