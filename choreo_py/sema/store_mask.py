"""`mma.store.mask acc, <global tile>, rows, cols`: a store of the tile's first rows x cols.

A store into a global tile goes through a shared staging tile and a TMA copy
(passes/global_mma_stores.py), and a TMA store writes nothing outside the
tensor. So a mask that is exactly the part of the tile inside the tensor
(`rows = M - block_m * 64` for the tile at row `block_m * 64` of an [M, N]
tensor) is what the plain store does; a mask as large as the tile is no mask.
That is what this module proves, with affine forms over the names (the guards'
`let` definitions substituted); any other mask is refused by name. The tile
offsets count only in elements of the kept dimensions.
"""
from __future__ import annotations

from typing import Optional

from .. import ir

Affine = tuple[dict, int]  # {name: coefficient}, constant


def affine(e: ir.Expr, defs: dict) -> Optional[Affine]:
    """`e` as sum(coef * name) + const, `let` names replaced by their values; None if not."""
    if isinstance(e, ir.Const) and isinstance(e.value, int) and not isinstance(e.value, bool):
        return {}, e.value
    if isinstance(e, ir.Sym):
        if defs.get(e.name) is not None:  # None: defined more than once, an unknown
            return affine(defs[e.name], defs)
        return {e.name: 1}, 0
    if isinstance(e, ir.Bin) and e.op in ("+", "-"):
        a, b = affine(e.lhs, defs), affine(e.rhs, defs)
        if a is None or b is None:
            return None
        sign = 1 if e.op == "+" else -1
        terms = dict(a[0])
        for k, c in b[0].items():
            terms[k] = terms.get(k, 0) + sign * c
        return {k: c for k, c in terms.items() if c}, a[1] + sign * b[1]
    if isinstance(e, ir.Bin) and e.op == "*":
        for x, y in ((e.lhs, e.rhs), (e.rhs, e.lhs)):
            if isinstance(y, ir.Const) and isinstance(y.value, int):
                lin = affine(x, defs)
                if lin is None:
                    return None
                return {k: c * y.value for k, c in lin[0].items() if c * y.value}, lin[1] * y.value
    return None


def mask_is_the_edge(view: ir.View, param: ir.Param, guards: list, defs: dict) -> Optional[str]:
    """None when the guards cut the tile exactly at the tensor's edge (or not at all); else
    why not, in words."""
    dims = [k for k, keep in enumerate(view.keep) if keep]
    if len(guards) > len(dims):
        return f"{len(guards)} guards for a {len(dims)}-D tile"
    for g, k in zip(guards, dims):
        ext = view.extents[k]
        if isinstance(g, ir.Const) and isinstance(ext, ir.Const) and g.value >= ext.value:
            continue  # the whole extent: no mask in this dimension
        lhs = affine(ir.Bin("+", g, view.offsets[k], "s32"), defs)
        rhs = affine(param.shape[k], defs)
        if lhs is None or rhs is None or lhs != rhs:
            return (f"the guard of dimension {k} is not the tensor's edge (its extent minus "
                    "the tile's offset)")
    return None
