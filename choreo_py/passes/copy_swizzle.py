"""A shared buffer's swizzle, from the copies that fill it.

TMA writes a tile in the swizzle its copy names; every copy into one buffer
must name the same one, since one buffer has one layout in shared memory.
"""
from __future__ import annotations

from .. import ir
from ..diagnostics import ChoreoError


def resolve_swizzles(kernel: ir.Kernel) -> None:
    chosen: dict[str, tuple[int | None, object]] = {}
    for s in ir.walk(kernel.body):
        if isinstance(s, (ir.TmaLoad, ir.DmaCopy)) and kernel.buffer(s.dst.base):
            name = s.dst.base
            if name in chosen and chosen[name][0] != s.swizzle:
                first = chosen[name][0]
                raise ChoreoError(
                    f"'{name}' is filled with swizzle {s.swizzle or 'none'} here but with "
                    f"swizzle {first or 'none'} at {chosen[name][1]}; a buffer has one layout",
                    s.loc)
            chosen.setdefault(name, (s.swizzle, s.loc))
    for name, (swz, _) in chosen.items():
        kernel.buffer(name).swizzle = swz


def run(kernel: ir.Kernel, target=None) -> None:
    """The same on every target: the program names the swizzle."""
    resolve_swizzles(kernel)
