"""View algebra: `subspan`, `step`, `at`, `sqz`, `chunkat`, `view().from()`, slots.

Every chain normalises to an `ir.View`, a box over its base. Tile indices
given to `.at()` count tiles, not elements: `x.subspan(64, 128).at(i, 0)`
starts at row 64*i. Indices apply to the view's logical dimensions (the
kept ones), so chains compose: `Q.subspan(1, S, 1, D).at(b, 0, h, 0).sqz()`
is a 2-D view whose `.subspan(128, D).at(t, 0)` lands on base dimension 1.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from .. import ir
from ..ir import build as B


@dataclass(frozen=True)
class Tiling:
    """A view cut into tiles of `tile` elements (per logical dim), awaiting `.at()`."""

    view: ir.View
    tile: tuple[ir.Expr, ...]
    step: tuple[ir.Expr, ...] | None = None


class ViewError(Exception):
    """A malformed view chain; sema turns it into a located ChoreoError."""


def whole(base: str, shape: tuple[ir.Expr, ...], slot: ir.Expr | None = None) -> ir.View:
    n = len(shape)
    return ir.View(base, (B.const(0),) * n, tuple(shape), (True,) * n, slot)


def _kept(view: ir.View) -> list[int]:
    return [k for k, keep in enumerate(view.keep) if keep]


def _check_rank(view: ir.View, n: int, what: str) -> None:
    if n != view.rank:
        raise ViewError(f"{what} takes {view.rank} values for this {view.rank}-D view, not {n}")


def subspan(view: ir.View, extents: list[ir.Expr | None]) -> Tiling:
    """`None` in `extents` (written `_`) keeps that dimension whole."""
    _check_rank(view, len(extents), "subspan")
    tile = tuple(view.shape[i] if e is None else e for i, e in enumerate(extents))
    return Tiling(view, tile)


def step(t: Tiling, steps: list[ir.Expr]) -> Tiling:
    _check_rank(t.view, len(steps), "step")
    return replace(t, step=tuple(steps))


def at(t: Tiling, index: list[ir.Expr | None]) -> ir.View:
    v = t.view
    _check_rank(v, len(index), "at")
    offsets, extents = list(v.offsets), list(v.extents)
    stride = t.step or t.tile
    for i, k in enumerate(_kept(v)):
        idx = B.const(0) if index[i] is None else index[i]
        offsets[k] = B.add(offsets[k], B.mul(idx, stride[i]))
        extents[k] = t.tile[i]
    return replace(v, offsets=tuple(offsets), extents=tuple(extents))


def window(view: ir.View, extents: list[ir.Expr | None], origin: list[ir.Expr]) -> ir.View:
    """`view(extents).from(origin)`: an explicit box in element coordinates."""
    _check_rank(view, len(extents), "view")
    _check_rank(view, len(origin), "from")
    offsets, ext = list(view.offsets), list(view.extents)
    for i, k in enumerate(_kept(view)):
        offsets[k] = B.add(offsets[k], origin[i])
        if extents[i] is not None:
            ext[k] = extents[i]
    return replace(view, offsets=tuple(offsets), extents=tuple(ext))


def chunkat(view: ir.View, index: list[tuple[ir.Expr, ir.Expr] | None]) -> ir.View:
    """Split each dimension into `count` equal chunks and take chunk `idx`.

    `index[i]` is (idx, count) for a bounded variable, or None (`_`) for the
    whole dimension.
    """
    _check_rank(view, len(index), "chunkat")
    tile, idx = [], []
    for i, item in enumerate(index):
        if item is None:
            tile.append(view.shape[i])
            idx.append(None)
        else:
            pos, count = item
            tile.append(B.cdiv(view.shape[i], count))
            idx.append(pos)
    return at(Tiling(view, tuple(tile)), idx)


def sqz(view: ir.View) -> ir.View:
    """Drop the dimensions of extent 1."""
    keep = tuple(k and B.as_int(e) != 1 for k, e in zip(view.keep, view.extents))
    if not any(keep):  # a 1-element view keeps its last dimension
        keep = keep[:-1] + (True,)
    return replace(view, keep=keep)


def with_slot(view: ir.View, slot: ir.Expr) -> ir.View:
    if view.slot is not None:
        raise ViewError("this buffer is already indexed")
    return replace(view, slot=slot)


def static_shape(view: ir.View) -> tuple[int, ...] | None:
    """The view's shape as integers, or None when a dimension is symbolic."""
    dims = [B.as_int(e) for e in view.shape]
    return None if any(d is None for d in dims) else tuple(dims)
