"""Fragment layouts, the register layout each fragment has on the GPU.

- Fragment layouts: `acc` for MMA accumulators (and for declared f32 fragments of
  a 64-row accumulator's shape, whose layout nothing observes), `operand` for register A
  operands of an MMA, `row` for row vectors that every owner of a row holds
  whole, and `row_partial` for row vectors that at some point hold per-owner
  partial values (accumulated in an `apply` over an accumulator, or computed
  from such a vector) until an `all_reduce_sum` combines them.
"""
from __future__ import annotations

from .. import ir
from ..diagnostics import ChoreoError


class _RowStates:
    """Which row vectors hold per-owner partial values, statement by statement.

    A vector becomes partial when an `apply` over an accumulator writes it
    with fewer indices than the accumulator has (each owner sums only its
    columns) or from a partial vector; `all_reduce` makes it whole again.
    Loops are walked twice so that loop-carried states settle.
    """

    def __init__(self, kernel: ir.Kernel) -> None:
        self.k = kernel
        self.partial: set[str] = set()
        self.ever_partial: set[str] = set()

    def block(self, stmts: list[ir.Stmt]) -> None:
        for s in stmts:
            if isinstance(s, ir.AllReduce):
                if s.frag not in self.ever_partial:
                    raise ChoreoError(
                        f"'all_reduce_{s.kind}({s.frag})': '{s.frag}' holds no per-owner partial "
                        "values here; it combines a row vector accumulated in an 'apply' over an "
                        "MMA accumulator", s.loc)
                self.partial.discard(s.frag)
            elif isinstance(s, ir.Apply):
                self.apply(s)
            elif isinstance(s, ir.FragCopy):
                self._set(s.dst, s.src in self.partial)
            elif isinstance(s, ir.Reduce):
                self._set(s.dst, False)
            elif isinstance(s, (ir.For, ir.While)):
                self.block(s.body)
                self.block(s.body)
            else:
                for body in ir.child_blocks(s):
                    self.block(body)

    def _set(self, name: str, partial: bool) -> None:
        if partial:
            self.partial.add(name)
            self.ever_partial.add(name)
        else:
            self.partial.discard(name)

    def apply(self, a: ir.Apply) -> None:
        dom = self.k.frag(a.domain)
        over_acc = dom is not None and dom.layout == "acc"
        for s in ir.walk(a.body):
            if not isinstance(s, ir.ElemStore):
                continue
            target = self.k.frag(s.frag)
            if target is None or len(target.shape) != 1:
                continue
            folds = over_acc and len(s.index) < len(a.indices)
            self._set(s.frag, folds or bool(ir.elem_reads([s]) & self.partial))


def assign_frag_layouts(kernel: ir.Kernel) -> None:
    loaded = {s.frag for s in ir.walk(kernel.body) if isinstance(s, ir.MmaLoad)}
    for s in ir.walk(kernel.body):
        if isinstance(s, ir.MmaFill):
            kernel.frag(s.acc).layout = "acc"
        elif isinstance(s, ir.FragDecl) and _tile_shaped(s.frag) and s.frag.name not in loaded:
            # `frag f32[64, N] x {v};`: no statement observes how a fragment's elements
            # sit in registers, so a tile of an accumulator's shape takes that layout
            # (and its reductions and `apply`s the accumulator's code).
            s.frag.layout = "acc"
    for s in ir.walk(kernel.body):
        if isinstance(s, ir.Mma) and isinstance(s.a, str):
            kernel.frag(s.a).layout = "operand"
        if isinstance(s, ir.SparseMma):  # placed as the target's sparse MMA reads it
            kernel.frag(s.meta).layout = "sparse_meta"
    states = _RowStates(kernel)
    states.block(kernel.body)
    for f in kernel.frags:
        if len(f.shape) == 1:
            f.layout = "row_partial" if f.name in states.ever_partial else "row"


def _tile_shaped(f: ir.Frag) -> bool:
    return f.layout == "plain" and f.dtype == "f32" and len(f.shape) == 2 \
        and f.shape[0] == 64 and f.shape[1] % 8 == 0 and 8 <= f.shape[1] <= 256


def run(kernel: ir.Kernel, target=None) -> None:
    """The same on every target: the layouts name roles, not instruction shapes."""
    assign_frag_layouts(kernel)
