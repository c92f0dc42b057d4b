"""Arrays of buffers and events, of one or more dimensions (`shared f16[16, 16] s[4][2]`,
`shared event full[2][3]`).

An array is kept in the IR as one buffer (or event) of `count` slots, the
product of its dimensions; a subscription selects the slot at the row-major
position of its indices, `s[i][j]` = slot `i * 2 + j`, as a 1-D array's
`s[i]` selects slot `i`. A partial subscription of a buffer array (`s[i]` of
`s[4][2]`) is the first buffer of that sub-array, slot `i * 2` (the
reference compiler's linearised pointer: its trailing indices are 0); an
event is subscribed fully (a row of events at once is refused by name). Sema keeps the dimensions
(KernelBuilder.array_dims); the IR sees slots only.
"""
from __future__ import annotations

from ..frontend import ast as A
from .. import ir
from ..ir import build as B


def subscripts(node: A.Index) -> tuple[A.Expr, list[A.Expr]] | None:
    """(the array's name node, its subscripts in order) of `a[i][j]...`, each bracket one
    index; None when the chain does not start at a name or a bracket holds several."""
    chain: list[A.Expr] = []
    while isinstance(node, A.Index):
        if len(node.indices) != 1:
            return None
        chain.append(node.indices[0])
        node = node.base
    if not isinstance(node, A.Name):
        return None
    return node, chain[::-1]


def linear(indices: list[ir.Expr], dims: tuple[int, ...]) -> ir.Expr:
    """The slot of `indices` (a prefix of the dimensions; the rest are 0), row-major."""
    slot = indices[0]
    for d, i in zip(dims[1:], list(indices[1:]) + [B.const(0)] * (len(dims) - len(indices))):
        slot = B.add(B.mul(slot, B.const(d)), i)
    return slot


def shape_text(name: str, dims: tuple[int, ...]) -> str:
    return name + "".join(f"[{d}]" for d in dims)
