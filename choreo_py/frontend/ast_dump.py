"""A stable, readable text form of the AST (`choreo parse --dump-ast`).

One node per line: the class name, its scalar fields as `name=value`, and
`@line:col`; child nodes follow, indented, under the name of the field that
holds them.  Fields left at their defaults (None, False, empty lists) are
omitted.  The walk is iterative, so very deep trees print fine.
"""
from __future__ import annotations

from dataclasses import fields

from . import ast

_HIDDEN = {"loc", "parenthesized", "modifiers"}


def dump(node: ast.Node) -> str:
    lines: list[str] = []
    # stack of (label, node-or-text, depth); text entries are printed verbatim
    stack: list[tuple[str, object, int]] = [("", node, 0)]
    while stack:
        label, item, depth = stack.pop()
        pad = "  " * depth
        if not isinstance(item, ast.Node):
            lines.append(f"{pad}{label}{item}")
            continue
        head, children = _describe(item)
        lines.append(f"{pad}{label}{head}")
        pending = []
        for name, value in children:
            if isinstance(value, list):
                pending.append((f"{name}:", "", depth + 1))
                pending += [("", v, depth + 2) for v in value]
            else:
                pending.append((f"{name}: ", value, depth + 1))
        stack.extend(reversed(pending))
    return "\n".join(lines) + "\n"


def _describe(node: ast.Node) -> tuple[str, list]:
    scalars, children = [], []
    for f in fields(node):
        if f.name in _HIDDEN:
            continue
        value = getattr(node, f.name)
        if value is None or value is False or (isinstance(value, list) and not value):
            continue
        if isinstance(value, ast.Node):
            children.append((f.name, value))
        elif isinstance(value, list) and any(isinstance(v, ast.Node) for v in value):
            children.append((f.name, value))
        else:
            scalars.append(f"{f.name}={_scalar(value)}")
    head = " ".join([type(node).__name__] + scalars) + f" @{node.loc.line}:{node.loc.col}"
    return head, children


def _scalar(value) -> str:
    if isinstance(value, str):
        return repr(value) if len(value) <= 60 else repr(value[:57] + "...")
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_scalar(v) for v in value) + "]"
    return str(value)
