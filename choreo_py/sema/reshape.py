"""`x.span_as([a, b])`: a tensor or buffer seen with another shape.

The IR names the reshaped data as an `ir.Alias` of the kernel (its elements
are the base's, in row-major order), and the result is the whole alias, so
that the usual view chain follows (`a.span_as([16, 9, 36]).chunkat(x, p, y)`).
A part of one is reshaped when it is one of equal contiguous tiles
(`a.subspan(2, 9, 8).at(p, 0, 0).span_as([16, 9])` of an [10, 9, 8] `a`: the
base is seen as [5, 16, 9] and the view is its tile p); any other part, and
an array of buffers, is refused by name. A span_as written on the host side, over a parameter or a host
buffer, belongs to every kernel launched after it.
"""
from __future__ import annotations

from .. import ir
from ..ir import build as B
from . import views as V
from .values import Unsupported, ViewValue


class ReshapeBuilder:
    """Mixin of the statement builder (needs kernel, kernels, params, locals, aliases)."""

    def reshaped(self, view: ViewValue, shape: tuple[int, ...], node) -> ViewValue:
        v = view.view
        base = self._reshape_base(v.base)
        if base is None or v.slot is not None:
            raise Unsupported("'span_as' of a part of a tensor or buffer", node.loc)
        root, dims = base
        if _whole(v, dims):
            alias = self._alias(root, shape, node)
            return ViewValue(V.whole(alias.name, tuple(B.const(d) for d in shape)), view.dtype)
        tile = _tile_index(v, dims)  # a contiguous run of whole tiles: base seen as [n] + shape
        if tile is None:
            raise Unsupported("'span_as' of a part of a tensor or buffer that is not a "
                              "contiguous tile of it", node.loc)
        count, index = tile
        alias = self._alias(root, (count,) + shape, node)
        n = len(shape)
        return ViewValue(ir.View(alias.name, (index,) + (B.const(0),) * n,
                                 (B.const(1),) + tuple(B.const(d) for d in shape),
                                 (False,) + (True,) * n), view.dtype)

    def _alias(self, root: str, shape: tuple[int, ...], node) -> ir.Alias:
        in_kernel = self.kernel is not None and self.kernel not in self.kernels
        known = (self.kernel.aliases if in_kernel else []) + self.aliases
        alias = next((a for a in known if (a.base, a.shape) == (root, shape)), None)
        if alias is None:  # one alias per base and shape
            alias = ir.Alias(f"{root}__as{len(known)}", root, shape, loc=node.loc)
            (self.kernel.aliases if in_kernel else self.aliases).append(alias)
        return alias

    def _reshape_base(self, name: str):
        """(root tensor or buffer, the shape views of `name` index), or None."""
        for p in list(self.params) + list(self.locals):
            if p.name == name:
                return name, tuple(p.shape)
        k = self.kernel
        for a in (k.aliases if k is not None else []) + self.aliases:
            if a.name == name:
                return a.base, tuple(B.const(d) for d in a.shape)
        b = k.buffer(name) if k is not None else None
        if b is not None and not b.count:
            return name, tuple(B.const(d) for d in b.shape)
        return None


def _whole(v: ir.View, shape: tuple) -> bool:
    return (all(B.as_int(o) == 0 for o in v.offsets) and all(v.keep)
            and len(v.extents) == len(shape)
            and all(B.as_int(e) is not None and B.as_int(e) == B.as_int(d)
                    for e, d in zip(v.extents, shape)))


def _tile_index(v: ir.View, dims: tuple) -> tuple[int, ir.Expr] | None:
    """(tiles in the base, this view's tile) when the view is the i-th of equal contiguous
    tiles of its base: extent 1 before some dimension k, whole dimensions after it, and an
    extent at k that divides the base's, at an offset that is a multiple of it."""
    sizes = [B.as_int(d) for d in dims]
    exts = [B.as_int(e) for e in v.extents]
    if None in sizes or None in exts:
        return None
    k = next((i for i, e in enumerate(exts) if e != 1), len(exts) - 1)
    if sizes[k] % exts[k] or any(B.as_int(v.offsets[i]) != 0 or exts[i] != sizes[i]
                                 for i in range(k + 1, len(sizes))):
        return None
    index = _exact_div(v.offsets[k], exts[k])
    if index is None:
        return None
    scale = sizes[k] // exts[k]  # tiles per step of the dimension before k
    for i in range(k - 1, -1, -1):
        index = B.add(index, B.mul(v.offsets[i], B.const(scale)))
        scale *= sizes[i]
    return scale, index


def _exact_div(e: ir.Expr, n: int) -> ir.Expr | None:
    """e / n where e is visibly a multiple of n (a constant, x * m with n | m, or a sum)."""
    c = B.as_int(e)
    if c is not None:
        return B.const(c // n) if c % n == 0 else None
    if isinstance(e, ir.Bin) and e.op == "*":
        for a, b in ((e.lhs, e.rhs), (e.rhs, e.lhs)):
            m = B.as_int(b)
            if m is not None and m % n == 0:
                return a if m == n else B.mul(a, B.const(m // n))
    if isinstance(e, ir.Bin) and e.op == "+":
        a, b = _exact_div(e.lhs, n), _exact_div(e.rhs, n)
        if a is not None and b is not None:
            return B.add(a, b)
    return None
