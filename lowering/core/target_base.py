"""The interface between the target-independent core and one architecture's folder.

Everything a kernel does except matrix multiply-accumulate is lowered by the
core (roles, shared memory, mbarrier events, TMA, scalar code, loops, fragment
arithmetic). An architecture folder (lowering/sm90: wgmma, accumulators in
registers; lowering/sm100: tcgen05, accumulators in tensor memory) subclasses
`Target` and names the subclass `TARGET` in its `__init__.py`; runtime/build.py
makes one from the architecture's record (choreo_py/targets.py: its name, its
limits, how the threads share an accumulator's rows), which is where every fact
of the architecture comes from. A `Target` is made per kernel (it keeps state
such as the tensor-memory plan: `for_kernel`).

Every method the core calls is declared here with the default a target without
the feature gets. The MMA unit's methods refuse by name: a target without an MMA
unit lowers thread kernels (per-thread code, lowering/core/simt.py) only. The
hooks around statements, roles and events do nothing by default: they exist for
targets whose hardware needs work there (tcgen05 allocates tensor memory before
the block barrier and frees it as the MMA role ends).

The core reaches accumulator elements only through `AccLayout`: per register k,
the element is (row_base + row_off[k], col_base + col_off[k]) of the role
instance's [rows, cols] tile, where row_base/col_base are per-thread values from
`thread_bases`. Row vectors (`row`, `row_partial`) hold one register per distinct
row_off; the threads sharing a row combine partial values with butterfly
shuffles over `row_lanes`. Register-operand fragments (bf16 A operands) pack the
accumulator registers 2k, 2k+1 into register k of a b32 array.
"""
from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Callable, Mapping, Optional

from choreo_py import ir, targets
from choreo_py.diagnostics import ChoreoError, InternalError

from .writer import V

# `Lowering` (context.py, which holds a Target) is named in annotations only, as text: an
# import, even one for type checkers, would make the two modules a circle.


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


#: a statement handler: (the lowering, the statement, whether it ends its block)
Handler = Callable[["Lowering", ir.Stmt, bool], None]


class Target:
    """One architecture as the core sees it; `record` holds its facts (targets.py)."""

    #: `mma.fill.f16` accumulators can be lowered: the target keeps them as f32 cells and
    #: rounds them to f16 after every synchronous MMA, where the interpreter rounds (an MMA
    #: unit's own f16 accumulation would round inside a K loop instead). Without it an f16
    #: accumulator is refused by name.
    f16_accumulators = False

    #: The index of a parallel instance of a warp or more is passed through
    #: `shfl.sync.idx` from lane 0, which tells ptxas that it is warp-uniform: values
    #: computed from it (a warpgroup's wgmma operand descriptors) stay in uniform registers
    #: instead of a conversion (R2UR) before every wgmma. Off where it costs registers
    #: (sm_100a: the Blackwell example spills 16 bytes with it).
    uniform_instance_index = False

    #: {IR statement type: handler} the target lowers itself instead of the core: where
    #: the hardware does a statement another way (tcgen05: `mma.store` reads tensor
    #: memory; a `wait` on an event only MMAs read is one thread's).
    handlers: Mapping[type, Handler] = MappingProxyType({})

    def __init__(self, record: targets.Target) -> None:
        self.record = record

    @property
    def arch(self) -> str:
        """The target's name (`--target`, ARCH of the generated module, `.target` of the
        PTX): the record's, never spelled in a backend."""
        return self.record.name

    def for_kernel(self) -> "Target":
        """A fresh target for the next kernel of a file: a target keeps per-kernel state
        (the tensor-memory plan, the MMA role), so no two kernels share one."""
        return type(self)(self.record)

    def refuse(self, what: str, loc) -> ChoreoError:
        """The refusal of a construct this target does not lower (the core's wording)."""
        return ChoreoError(f"{what} is not lowered for {self.arch} yet", loc)

    def _missing(self, hook: str) -> InternalError:
        """A hook that only a target opting into a feature calls, called on one without."""
        return InternalError(f"the {self.arch} target has no '{hook}' (its other hooks ask "
                             "for it)")

    # ------------------------------------------------------------ kernel
    def prepare(self, k: ir.Kernel) -> ir.Kernel:
        """Before the kernel is lowered: read the IR facts the target's unit needs (tcgen05:
        the tensor-memory map, the MMA barriers) and refuse what it cannot lower, before any
        code is written. Returns the kernel to lower."""
        return k

    def start(self, lw: Lowering) -> None:
        """After the core's analysis of the kernel (lw.facts): decisions that need it."""

    def before_events(self, lw: Lowering) -> None:
        """Before the mbarrier set-up, whose block barrier publishes what is done here
        (tcgen05: the tensor-memory allocation writes its address to shared memory)."""

    def after_events(self, lw: Lowering) -> None:
        """After that block barrier (tcgen05: the fence that orders the allocation)."""

    def min_blocks_per_sm(self, launch_bounds: Optional[tuple]) -> Optional[int]:
        """The `.minnctapersm` of an MMA kernel's entry (None: none): the program's
        `launch_bounds(_, n)`. ptxas sizes each thread's registers at entry from it, which
        is what `setmaxnreg` then repartitions."""
        lb = launch_bounds
        return lb[1] if lb and len(lb) > 1 and lb[1] else None

    # ------------------------------------------------------------ statements
    def before_stmt(self, lw: Lowering, s: ir.Stmt) -> None:
        """Before each statement's lowering: where the target tracks state per statement
        (tcgen05: whether its tensor-memory copies are current)."""

    def after_stmt(self, lw: Lowering, s: ir.Stmt) -> None:
        """After each statement's lowering."""

    def block_boundary(self, lw: Lowering) -> None:
        """At the head of a loop or branch body, which is reached from elsewhere too:
        straight-line state the target keeps is unknown there."""

    # ------------------------------------------------------------ roles
    def enter_role(self, lw: Lowering) -> None:
        """Before the statements of one instance of a parallel region."""

    def leave_role(self, lw: Lowering) -> None:
        """After them, still inside the instance's region (its registers are live): where
        the target releases what the role held (tcgen05: the allocating warp frees tensor
        memory). A target that writes code here starts it as the region's next statement
        (`lw.next_statement()`), as the core does before each of the role's statements."""

    def roles_may_join(self, lw: Lowering) -> bool:
        """Whether a parallel region's roles may meet after it (code follows it, or a loop
        or branch holds it). Not where the roles free something as they end that a later
        pass would need again (tcgen05's tensor memory)."""
        return True

    def issue_only_also(self, lw: Lowering) -> tuple:
        """Statement kinds (or predicates on a statement) one thread per instance can also
        run, besides asynchronous copies and event arrivals (core/analysis.issue_only):
        tcgen05's MMAs are issued by one thread."""
        return ()

    def role_exit(self, lw: Lowering) -> bool:
        """Ends a role's code itself (True), instead of the core's `ret`: where the roles
        meet at the kernel's end to release what they share."""
        return False

    def after_roles(self, lw: Lowering) -> None:
        """After the last role of a parallel region that does not join."""

    # ------------------------------------------------------------ the MMA unit
    def acc_layout(self, frag: ir.Frag, loc) -> AccLayout:
        """The per-thread layout of an [M, N] accumulator (or an operand/row of that shape):
        the registers the MMA unit leaves each thread."""
        raise self.refuse(f"the MMA fragment '{frag.name}' (this target has no MMA unit)", loc)

    def thread_bases(self, lw: Lowering) -> tuple[V, V]:
        """(row_base, col_base) of the current thread inside its role instance."""
        raise self.refuse("per-thread code on MMA fragments", None)

    def declare_acc(self, lw: Lowering, frag: ir.Frag) -> str:
        """Allocates the accumulator; returns the register array per-thread code uses."""
        raise self.refuse(f"the accumulator '{frag.name}'", frag.loc)

    def fill(self, lw: Lowering, frag: ir.Frag, value: V) -> None:
        """`mma.fill`: every element = value (when it could not be folded into the MMA)."""
        raise self.refuse(f"filling the accumulator '{frag.name}'", frag.loc)

    def issue(self, lw: Lowering, mma: ir.Mma, zero_first: bool) -> None:
        """One MMA statement: acc (+)= a @ op(b), asynchronous when `mma.future` is set.

        `zero_first`: the accumulator was just filled with 0, so the first k-step
        overwrites instead of accumulating."""
        raise self.refuse("an MMA", mma.loc)

    def wait(self, lw: Lowering, groups_after: int) -> None:
        """Waits for an MMA future while `groups_after` later MMA groups stay in flight."""
        raise self._missing("wait")  # (only a target that issued MMAs has futures)

    def access(self, lw: Lowering, frag: ir.Frag) -> None:
        """Before per-thread code reads the accumulator (tcgen05: tensor memory ->
        registers); an accumulator that lives in registers needs nothing."""

    def update(self, lw: Lowering, frag: ir.Frag) -> None:
        """After per-thread code wrote the accumulator (tcgen05: registers -> tensor
        memory)."""

    def check_block_frag(self, frag: ir.Frag, loc) -> None:
        """A non-accumulator `frag ... : block` (one tile the block's roles share): only a
        target with memory the roles share for it (tensor memory) lowers one."""
        raise self.refuse(f"the ': block' fragment '{frag.name}'", loc)

    def declare_sparse_meta(self, lw: Lowering, frag: ir.Frag, loc) -> str:
        """A sparse MMA's metadata fragment (ir.SparseMma.meta): its register array, or a
        refusal by name where the target's sparse MMA does not read it from registers."""
        raise self.refuse(f"the metadata fragment '{frag.name}' of a sparse MMA", loc)

    def load_sparse_meta(self, lw: Lowering, fi, s: ir.MmaLoad) -> None:
        """`mma.load` of that fragment from its shared tile."""
        raise self._missing("load_sparse_meta")  # (declare_sparse_meta made the fragment)

    def commit_trigger(self, lw: Lowering, s: ir.Trigger) -> None:
        """`trigger e after <MMA future>` on a target whose MMAs complete on an mbarrier
        (the record's `mma_barriers`; core/analysis.py admits it only there)."""
        raise self._missing("commit_trigger")

    # ------------------------------------------------------------ applies
    def row_vote(self, lw: Lowering, guard: V, a: ir.Apply) -> str:
        """An apply the pass tmem-row-vote marked (targets with tensor memory): the warp
        votes on its lanes' row guards and branches past the warp-collective tile moves
        when none holds; returns the label the core puts after them."""
        raise self.refuse("a warp-voted apply (pass tmem-row-vote)", a.loc)

    def column_chunk(self, lw: Lowering, frags: list) -> int:
        """Registers per piece when an elementwise apply over these accumulators is moved
        piece by piece (0: the whole tile at once): a role with a small register budget then
        holds a piece, not the tile. Only a target whose accumulators live outside the
        registers (tensor memory) gains by it."""
        return 0

    def access_columns(self, lw: Lowering, frag: ir.Frag, first: int, n: int) -> None:
        """`access` of registers first..first+n (a piece `column_chunk` asked for)."""
        raise self._missing("access_columns")

    def update_columns(self, lw: Lowering, frag: ir.Frag, first: int, n: int) -> bool:
        """`update` of that piece; True if it stored the piece back."""
        raise self._missing("update_columns")

    def wrote_back(self, lw: Lowering) -> None:
        """After an apply in pieces stored some back (the readers' publication)."""
        raise self._missing("wrote_back")
