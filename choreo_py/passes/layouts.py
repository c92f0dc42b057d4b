"""Layout facts the backends need: buffer swizzles and fragment layouts.

- A buffer's swizzle comes from the copies that fill it; they must agree,
  since one buffer has one layout in shared memory.
- Fragment layouts: `acc` for MMA accumulators, `operand` for register A
  operands of an MMA, `row` for vectors produced by reductions or kept
  replicated, and `row_partial` for vectors accumulated in an `apply` over
  an accumulator: each owner of a row holds a partial value there until an
  `all_reduce_sum` combines them.
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


def _accumulated_rows(kernel: ir.Kernel, apply: ir.Apply) -> set[str]:
    """Vectors written with fewer indices than the accumulator domain of `apply` has."""
    out = set()
    dom = kernel.frag(apply.domain)
    if dom is None or dom.layout != "acc":
        return out
    for s in ir.walk(apply.body):
        if isinstance(s, ir.ElemStore) and len(s.index) < len(apply.indices):
            out.add(s.frag)
    return out


def assign_frag_layouts(kernel: ir.Kernel) -> None:
    for s in ir.walk(kernel.body):
        if isinstance(s, ir.MmaFill):
            kernel.frag(s.acc).layout = "acc"
    partial: set[str] = set()
    for s in ir.walk(kernel.body):
        if isinstance(s, ir.Mma) and isinstance(s.a, str):
            kernel.frag(s.a).layout = "operand"
        elif isinstance(s, ir.Reduce):
            kernel.frag(s.dst).layout = "row"
        elif isinstance(s, ir.Apply):
            partial |= _accumulated_rows(kernel, s)
    for name in sorted(partial):
        kernel.frag(name).layout = "row_partial"
    for f in kernel.frags:
        if f.layout == "plain" and len(f.shape) == 1:
            f.layout = "row"


def run(kernel: ir.Kernel) -> None:
    resolve_swizzles(kernel)
    assign_frag_layouts(kernel)
