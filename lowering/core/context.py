"""State shared by the lowering of one kernel: names in scope, regions, roles.

Regions and hoisting. A region is a straight-line list of statements run by
the same threads (the kernel body, a parallel body, a role body). Before
each of its top-level statements the writer leaves a mark. A value that
depends only on names bound at the region's top level (or outside it) and
never reassigned is *invariant*: it is computed once, at the mark before
the statement that first needs it, and reused by every later statement of
the region. That keeps descriptor bases, thread geometry and policies out
of loops without a separate optimisation pass.
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Optional

from choreo_py import ir
from choreo_py.diagnostics import ChoreoError

from .target_base import Target
from .writer import Mark, V, Writer


@dataclass
class Binding:
    value: V
    invariant: bool  # immutable and bound at a region's top level (or outside)
    mutable: bool = False
    nonneg: bool = False  # provably >= 0 (selects shifts/masks for / and %)
    uniform: bool = False  # the same in every thread of a warp that computes it


@dataclass
class RoleCtx:
    """The threads running the current code."""

    members: tuple[int, ...]  # instances of the Parallel that run it
    threads: int  # threads of one instance
    instance: V  # the instance index (the Parallel variable)
    local_tid: V  # thread index inside the instance
    single_thread: bool  # issue-only role: one thread per instance runs the body
    role_leader: Optional[V] = None  # pred: the first thread of the first member
    inst_leader: Optional[V] = None  # pred: thread 0 of this instance
    exit_label: str = ""


@dataclass
class Region:
    mark: Optional[Mark] = None
    cache: dict = field(default_factory=dict)
    # Keys cached by the statement being lowered, not at its mark: their registers are set
    # after the mark, so a value hoisted to that mark from inside the statement (a branch in
    # it) must not read them; it computes its own there. Code after them reuses them.
    fresh: set = field(default_factory=set)


class Lowering:
    def __init__(self, kernel: ir.Kernel, target: Target, writer: Writer) -> None:
        self.k = kernel
        self.target = target
        self.w = writer
        self.scopes: list[dict[str, Binding]] = [{}]
        self.regions: list[Region] = []
        self.depth = 0  # nesting of loops/branches inside the current region
        self.role: Optional[RoleCtx] = None
        self.loops: list[tuple[str, str]] = []  # (continue label, exit label)
        self.frags: dict[str, str] = {}  # fragment name -> register array name
        self.var_types: dict[str, str] = {}  # mutable scalar -> its declared type (exprs.narrow)
        self.smem_base: Optional[V] = None
        self.tid: Optional[V] = None
        # Named barrier ids the compiler may not hand out: 0 (bar.sync 0, the whole
        # block) and those the program names (all of 1..7 if it computes one at run time).
        self.reserved_barriers = _program_barriers(kernel)
        self.facts = None  # analysis.Facts
        self.memory = None  # memory.Memory
        self.stmt_memo: dict = {}  # values of the statement being lowered
        self.plain_waits: dict[str, int] = {}  # event -> generations waited on this path
        self.sync_load_phase: dict[int, V] = {}  # __tma_sync slot -> phase register (events.py)
        self.leader_waits: Optional[list] = None  # in a leader block: waits after it (roles.py)
        self.smem_dirty = False  # threads wrote shared memory since the last barrier
        self.smem_read = False  # threads read shared memory (mma.load) since the last barrier
        self.instance_barrier_base: Optional[int] = None
        self.parallel_extent = 1
        self.role_barriers: dict = {}  # role members -> named barrier id
        self.armed: dict = {}  # id(TMA group) -> mbarrier address its loads complete
        # MMA kernels: where the prologue loads the pointers of tensors read by element
        # (global_reads.py); None in thread kernels, which load every pointer up front
        self.prologue_mark: Optional[Mark] = None
        self.element_reader = None  # MMA kernels: global_reads.load (set by kernel.py)
        self.global_pointers: dict = {}  # tensor -> its global address (global_reads.py)
        self.element_places = None  # threads.Places of those reads
        self.written_roots: Optional[set] = None  # what the kernel writes (global_reads.py)
        # the predicate under which the element reads being lowered may run: the condition
        # around them when it is if-converted (None: they run wherever the code runs)
        self.read_guard: Optional[V] = None
        self.outer_guards: list[Optional[V]] = []  # the guards around it, outermost first

    # ------------------------------------------------------------ errors
    def refuse(self, what: str, loc) -> ChoreoError:
        return ChoreoError(f"{what} is not lowered for {self.target.arch} yet", loc)

    # ------------------------------------------------------------ names
    def bind(self, name: str, value: V, *, mutable: bool = False, nonneg: bool = False,
             uniform: bool = False) -> None:
        inv = not mutable and self.depth == 0
        self.scopes[-1][name] = Binding(value, inv, mutable, nonneg, uniform and not mutable)

    def holds_mutable(self, v: V) -> bool:
        """Whether `v` is the register of a mutable variable (a name bound to it would see
        the variable's later assignments)."""
        return not v.is_const and any(b.mutable and b.value.text == v.text
                                      for scope in self.scopes for b in scope.values())

    def lookup(self, name: str) -> Optional[Binding]:
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        return None

    def push(self) -> None:
        self.scopes.append({})

    def pop(self) -> None:
        self.scopes.pop()

    @contextmanager
    def skippable(self):
        """Code some threads, or every thread at times, branch around (a zero fill's load,
        a copy loop that may run no iteration, a leader's block): the statement's values
        computed inside are forgotten after it, since a register set there is not set on
        the path that skipped it (a store that reused the load's index wrote the zero of
        a padded row over the row before it)."""
        saved = dict(self.stmt_memo)
        self.depth += 1
        try:
            yield
        finally:
            self.depth -= 1
            self.stmt_memo = saved

    def element_load(self, opcode: str, out: V, addr: str, at=None) -> None:
        """The `ld` of an element the program reads. Under `read_guard` it is predicated:
        code if-converted to `selp` (a guarded store inside `apply`, a `?:` arm, the right
        side of `&&`/`||`) computes its values on every path, and a load on the path the
        condition excludes would read memory the program never touches (a column past a
        tensor's end). The register is zeroed first: a lane that skips the load holds a
        defined value, which the `selp` then drops. `at`: the read's source (writer.op)."""
        g = self.read_guard
        if g is None:
            self.w.op(opcode, out, addr, at=at)
            return
        self.w.op(f"mov.{out.ty}", out, V.imm(0, out.ty))
        self.w.op(opcode, out, addr, pred=g, at=at)

    # ------------------------------------------------------------ regions
    def enter_region(self) -> None:
        self.regions.append(Region())

    def leave_region(self) -> None:
        self.regions.pop()

    def next_statement(self) -> None:
        """Called before each top-level statement of the current region."""
        if self.depth == 0 and self.regions:
            self.regions[-1].mark = self.w.mark()
            self.regions[-1].fresh = set()

    def cached(self, key) -> Optional[V]:
        for r in reversed(self.regions):
            if key in r.cache and not (key in r.fresh and self.w.writing_into(r.mark)):
                return r.cache[key]
        return None

    def remember(self, key, value: V) -> None:
        if self.regions:
            r = self.regions[-1]
            r.cache[key] = value
            if self.hoist_mark() is None and not self.w.writing_into(r.mark):
                r.fresh.add(key)  # computed here, at the statement's top level
            else:
                r.fresh.discard(key)  # computed at the mark (where invariants go)

    def hoist_mark(self) -> Optional[Mark]:
        """Where invariant values go: None when already at the region's top level."""
        if self.depth == 0 or not self.regions:
            return None
        return self.regions[-1].mark

    def once(self, key, make) -> V:
        """A region-wide value computed at the first use (at the hoist point) and reused."""
        v = self.cached(key)
        if v is None:
            with self.w.into(self.hoist_mark()):
                v = make()
            self.remember(key, v)
        return v

    def invariant(self, e: ir.Expr) -> bool:
        """Whether `e` reads only invariant names (so it can be hoisted and shared)."""
        if isinstance(e, ir.Const):
            return True
        if isinstance(e, ir.Sym):
            b = self.lookup(e.name)
            return b is not None and b.invariant
        if isinstance(e, (ir.Elem, ir.BufElem)):
            return False
        return all(self.invariant(c) for c in children(e))

    def uniform(self, e: ir.Expr) -> bool:
        """Whether `e` is warp-uniform: it reads constants and warp-uniform names only.

        Symbolic dims, grid indices, the index of a parallel instance of a warp
        or more, and immutable names computed from them are; mutable scalars,
        thread-indexed values and element reads are not (conservatively)."""
        if isinstance(e, ir.Const):
            return True
        if isinstance(e, ir.Sym):
            b = self.lookup(e.name)
            return b is not None and b.uniform
        if isinstance(e, (ir.Elem, ir.BufElem)):
            return False
        return all(self.uniform(c) for c in children(e))

    # ------------------------------------------------------------ role threads
    def inst_leader(self) -> V:
        """Predicate: thread 0 of the current role instance."""
        def make() -> V:
            p = self.w.reg("pred", "is_inst_leader")
            self.w.op("setp.eq.u32", p, self.role.local_tid, 0)
            return p
        return self.once(("inst_leader",), make)

    def role_leader(self) -> V:
        """Predicate: the first thread of the role's first instance."""
        def make() -> V:
            p = self.w.reg("pred", "is_role_leader")
            self.w.op("setp.eq.u32", p, self.tid, self.role.members[0] * self.role.threads)
            return p
        return self.once(("role_leader",), make)

    def issuer(self) -> Optional[V]:
        """Predicate of the thread that issues an instance-wide operation (None: this one)."""
        role = self.role
        if role is None:
            def make() -> V:
                p = self.w.reg("pred", "is_block_leader")
                self.w.op("setp.eq.u32", p, self.tid, 0)
                return p
            return self.once(("block_leader",), make)
        if role.single_thread or role.threads == 1:
            return None
        return self.inst_leader()

    def instance_sync_if_dirty(self) -> None:
        """Before one thread acts for its instance: the others' shared-memory work is done.

        The writes are fenced into the async proxy first: what the thread then
        publishes (an event, a copy) may be read by the TMA engine. Reads
        (`mma.load`) need only the barrier: what the thread publishes may free
        the tile for the TMA engine to overwrite, so every thread's loads come first."""
        if not (self.smem_dirty or self.smem_read) or self.role is None or self.role.single_thread:
            return
        if self.smem_dirty:
            self.w.comment("thread-written shared memory -> visible to the async (TMA) proxy")
            self.w.call("ptx.fence.proxy_async_shared_cta")
        else:
            self.w.comment("every thread's shared-memory loads are done before one publishes")
        self.instance_barrier()

    def instance_barrier(self) -> None:
        """The threads of this role instance meet (a named barrier of the instance)."""
        if self.instance_barrier_base is None:
            self.instance_barrier_base = self.new_barrier_id(self.parallel_extent)
        bid = self.w.reg("u32", "inst_bar")
        self.w.op("add.u32", bid, self.role.instance, self.instance_barrier_base)
        self.w.call("ptx.bar.sync", bid.text, str(self.role.threads))
        self.smem_dirty = self.smem_read = False

    # ------------------------------------------------------------ barriers
    def new_barrier_id(self, count: int = 1) -> int:
        """`count` consecutive named barrier ids for role/instance syncs, the first returned."""
        for first in range(1, 17 - count):
            ids = set(range(first, first + count))
            if not ids & self.reserved_barriers:
                self.reserved_barriers |= ids
                return first
        raise ChoreoError(f"the compiler's synchronisation needs {count} more named barrier(s) "
                          "than the ids 1..15 the program leaves free", self.k.loc)


#: The direct sub-expressions of an IR expression.
children = ir.expr_children


def _program_barriers(kernel: ir.Kernel) -> set[int]:
    ids = {0}
    for s in ir.walk(kernel.body):
        if isinstance(s, ir.NamedBarrier):
            ids |= {s.barrier.value} if isinstance(s.barrier, ir.Const) else set(range(1, 8))
    return ids
