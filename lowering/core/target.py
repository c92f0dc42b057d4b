"""The boundary between the target-independent core and an MMA unit.

Everything a kernel does except matrix multiply-accumulate is lowered by
the core (roles, shared memory, mbarrier events, TMA, scalar code, loops,
fragment arithmetic). An architecture folder supplies one `MmaTarget`:

- Hopper (`lowering/sm90`): wgmma, accumulators in registers, completion
  tracked with `wgmma.commit_group` / `wait_group N`.
- Blackwell (`lowering/sm100`, later): tcgen05.mma, accumulators in tensor
  memory, completion through an mbarrier; `access`/`update` move the tile
  between tensor memory and registers around per-thread code.

The core reaches accumulator elements only through `AccLayout`: per
register k, the element is (row_base + row_off[k], col_base + col_off[k])
of the role instance's [rows, cols] tile, where row_base/col_base are
per-thread values from `thread_bases`. Row vectors (`row`, `row_partial`)
hold one register per distinct row_off; the threads sharing a row combine
partial values with butterfly shuffles over `row_lanes`. Register-operand
fragments (bf16 A operands) pack the accumulator registers 2k, 2k+1 into
register k of a b32 array.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from choreo_py import ir

from .writer import V


@dataclass(frozen=True)
class AccLayout:
    rows: int
    cols: int
    row_off: tuple[int, ...]
    col_off: tuple[int, ...]
    row_lanes: tuple[int, ...]  # shfl.bfly lane masks over the owners of one row
    col_base_max: int  # the largest col_base any thread has

    @property
    def regs(self) -> int:
        return len(self.row_off)

    @property
    def row_slots(self) -> tuple[int, ...]:
        """Distinct row offsets: row-vector register s holds row row_base + row_slots[s]."""
        return tuple(sorted(set(self.row_off)))

    def slot_of(self, k: int) -> int:
        return self.row_slots.index(self.row_off[k])


class MmaTarget(Protocol):
    arch: str

    def acc_layout(self, frag: ir.Frag, loc) -> AccLayout:
        """The per-thread layout of an [M, N] accumulator (or an operand/row of that shape)."""

    def thread_bases(self, lw) -> tuple[V, V]:
        """(row_base, col_base) of the current thread inside its role instance."""

    def declare_acc(self, lw, frag: ir.Frag) -> str:
        """Allocates the accumulator; returns the register array per-thread code uses."""

    def fill(self, lw, frag: ir.Frag, value: V) -> None:
        """`mma.fill`: every element = value (when it could not be folded into the MMA)."""

    def issue(self, lw, mma: ir.Mma, zero_first: bool) -> None:
        """One MMA statement: acc (+)= a @ op(b), asynchronous when `mma.future` is set.

        `zero_first`: the accumulator was just filled with 0, so the first
        k-step overwrites instead of accumulating."""

    def wait(self, lw, groups_after: int) -> None:
        """Waits for an MMA future while `groups_after` later MMA groups stay in flight."""

    def access(self, lw, frag: ir.Frag) -> None:
        """Before per-thread code reads the accumulator (tensor memory -> registers)."""

    def declare_sparse_meta(self, lw, frag: ir.Frag, loc) -> str:
        """A sparse MMA's metadata fragment (ir.SparseMma.meta): its register array, or a
        refusal by name where the target's sparse MMA does not read it from registers."""

    def load_sparse_meta(self, lw, fi, s: ir.MmaLoad) -> None:
        """`mma.load` of that fragment from its shared tile."""

    def update(self, lw, frag: ir.Frag) -> None:
        """After per-thread code wrote the accumulator (registers -> tensor memory)."""


class TargetHooks(Protocol):
    """Optional methods a target may define; the core calls those that exist.

    prepare(kernel) -> kernel     before lowering (e.g. add barriers to the smem plan)
    start(lw)                     after the kernel's analysis
    before_events(lw)             before the mbarrier set-up (and its block barrier)
    after_events(lw)              after it
    before_stmt(lw, s)            around every statement's lowering
    after_stmt(lw, s)
    block_boundary(lw)            at the head of a loop or branch body
    enter_role(lw) / leave_role(lw)  around the statements of a parallel instance
    issue_only_also(lw) -> kinds  statement kinds (or predicates) an issue-only role may
                                  also hold
    role_exit(lw) -> bool         ends a role itself (True), instead of `ret`
    after_roles(lw)               after the last role of a parallel region
    handlers                      {ir statement type: handler(lw, s, last)} overriding the core's
    """
