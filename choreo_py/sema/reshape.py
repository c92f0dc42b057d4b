"""`x.span_as([a, b])`: a tensor or buffer seen with another shape.

The IR names the reshaped data as an `ir.Alias` of the kernel (its elements
are the base's, in row-major order), and the result is the whole alias, so
that the usual view chain follows (`a.span_as([16, 9, 36]).chunkat(x, p, y)`).
Only the whole of a tensor or buffer is reshaped here: a part of one
(`a.subspan(...).at(...).span_as(...)`) is refused by name, as is an array
of buffers. A span_as written on the host side, over a parameter or a host
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
        if base is None or v.slot is not None or not _whole(v, base[1]):
            raise Unsupported("'span_as' of a part of a tensor or buffer", node.loc)
        root = base[0]
        in_kernel = self.kernel is not None and self.kernel not in self.kernels
        known = (self.kernel.aliases if in_kernel else []) + self.aliases
        alias = next((a for a in known if (a.base, a.shape) == (root, shape)), None)
        if alias is None:  # one alias per base and shape
            alias = ir.Alias(f"{root}__as{len(known)}", root, shape, loc=node.loc)
            (self.kernel.aliases if in_kernel else self.aliases).append(alias)
        return ViewValue(V.whole(alias.name, tuple(B.const(d) for d in shape)), view.dtype)

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
