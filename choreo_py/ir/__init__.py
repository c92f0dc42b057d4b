"""The tile IR: what a Choreo kernel means, in a form every backend shares.

A `Module` holds `Function`s (the `__co__` functions); a function's body is
host-side code whose `Launch` statements start `Kernel`s (one per
`parallel ... : block`). A kernel's body is the code one block runs; inside
it, `Parallel` spawns warpgroup (or warp/thread) instances and `Role`
restricts a region to some of them (`inthreads.async`).

Design rules:
- Structured, not SSA: named scalars (`Let`, mutable `Var` + `Assign`),
  structured loops and conditionals. Expressions are small trees.
- Every statement has a `loc` pointing at the source that produced it.
- Shapes of buffers and fragments are concrete integers by the time IR
  exists (the program's `#define`s and literals fix them); only global
  tensors have symbolic dimensions, bound at launch.
- Views are normalised boxes over a base tensor or buffer (`View`), so a
  backend never re-derives `subspan(...).at(...).sqz()` chains.
- Post-increments and other sugar are gone: `trigger e.at(k++)` is a
  `Trigger` on `e.at(k)` followed by `Assign(k, k + 1)`.

Long because: it is the one namespace every stage reads as `ir.Name`: the dtype
facts, some forty node kinds (each a small dataclass with its docstring) and the
walkers over them. Split into modules, each name would need a second spelling (a
re-export here) or every stage's references would change; the stage code that
reads the IR (build, printer, parse, verify, eval) is already apart, in this folder.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field, fields
from functools import cache
from typing import Optional, Union

from choreo_py.source import Loc

# ---------------------------------------------------------------- types

INT_TYPES = ("s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64")
FLOAT_TYPES = ("f16", "bf16", "f32", "f64", "tf32", "f8_e4m3", "f8_e5m2",
               "f6_e2m3", "f6_e3m2", "f4_e2m1")
DTYPE_BITS = {
    "bool": 8, "s8": 8, "u8": 8, "s16": 16, "u16": 16, "s32": 32, "u32": 32,
    "s64": 64, "u64": 64, "f16": 16, "bf16": 16, "f32": 32, "f64": 64, "tf32": 32,
    "f8_e4m3": 8, "f8_e5m2": 8,
    # sub-byte types take one byte per element (their codes: choreo_py/ir/subbyte.py)
    "f6_e2m3": 8, "f6_e3m2": 8, "f4_e2m1": 8, "u6": 8, "s6": 8, "u4": 8, "s4": 8,
    "u2": 8, "s2": 8, "u1": 8, "bin1": 8,
}


def dtype_bytes(dtype: str) -> int:
    return DTYPE_BITS[dtype] // 8


def is_float(dtype: str) -> bool:
    return dtype in FLOAT_TYPES


# ---------------------------------------------------------------- expressions


@dataclass(frozen=True)
class Expr:
    """Base of scalar and fragment-element expressions; `dtype` is its type."""


@dataclass(frozen=True)
class Const(Expr):
    value: Union[int, float, bool]
    dtype: str


@dataclass(frozen=True)
class Sym(Expr):
    """A named scalar: a Let/Var, a symbolic dim, a grid/group/loop/apply index."""

    name: str
    dtype: str = "s32"


@dataclass(frozen=True)
class Bin(Expr):
    op: str  # + - * / % << >> & | ^ && || == != < <= > >=
    lhs: Expr
    rhs: Expr
    dtype: str


@dataclass(frozen=True)
class Un(Expr):
    op: str  # - ! ~
    operand: Expr
    dtype: str


@dataclass(frozen=True)
class Select(Expr):
    cond: Expr
    if_true: Expr
    if_false: Expr
    dtype: str


#: Builtin scalar functions: name -> (arity, result rule). "arg" = type of first arg.
BUILTINS = {
    "cdiv": 2, "min": 2, "max": 2, "exp2": 1, "exp": 1, "log2": 1, "log": 1,
    "sqrt": 1, "rsqrt": 1, "abs": 1, "to": 1,
    "sin": 1, "cos": 1, "tan": 1, "asin": 1, "acos": 1, "atan": 1, "atan2": 2,
    "sinh": 1, "cosh": 1, "tanh": 1, "expm1": 1, "log1p": 1, "pow": 2, "fma": 3, "rcp": 1,
    "ceil": 1, "floor": 1, "round": 1, "sign": 1, "isfinite": 1,
    "gelu": 1, "sigmoid": 1, "softplus": 1,
}


@dataclass(frozen=True)
class Call(Expr):
    """A builtin function (`BUILTINS`); `to` converts to `dtype`."""

    fn: str
    args: tuple[Expr, ...]
    dtype: str


@dataclass(frozen=True)
class Elem(Expr):
    """An element of a fragment, read inside `Apply`: `frag.at(i, j)`."""

    frag: str
    index: tuple[Expr, ...]
    dtype: str


@dataclass(frozen=True)
class BufElem(Expr):
    """An element of a shared/local buffer (or global tensor) view: `buf.at(i, j)`.

    `index` is relative to the view's logical dimensions. `loc` is where the read
    stands (a fault of the access is reported there); it takes no part in equality:
    two reads of one element are the same value wherever they stand.
    """

    view: "View"
    index: tuple[Expr, ...]
    dtype: str
    loc: Optional[Loc] = field(default=None, compare=False, repr=False)


# ---------------------------------------------------------------- places


@dataclass(frozen=True)
class View:
    """A box of a base tensor (global parameter) or buffer (shared/local).

    Per base dimension k: the box starts at `offsets[k]` and spans
    `extents[k]` elements. `keep[k]` says whether dimension k is a
    dimension of the view (squeezed dimensions have extent 1 and are
    dropped). `slot` indexes an array of buffers (`k_buf[slot]`).
    """

    base: str
    offsets: tuple[Expr, ...]
    extents: tuple[Expr, ...]
    keep: tuple[bool, ...]
    slot: Optional[Expr] = None

    @property
    def shape(self) -> tuple[Expr, ...]:
        return tuple(e for e, k in zip(self.extents, self.keep) if k)

    @property
    def rank(self) -> int:
        return sum(self.keep)


@dataclass(frozen=True)
class EventRef:
    """An event: `e` (slot 0 / whole event), `e[i]` (physical slot), `e.at(order)`."""

    event: str
    index: Optional[Expr] = None  # physical slot
    order: Optional[Expr] = None  # logical order: slot = order % N, generation = order / N


@dataclass(frozen=True)
class FutureRef:
    future: str


# ---------------------------------------------------------------- declarations


@dataclass
class Param:
    name: str
    dtype: str
    shape: tuple[Expr, ...]  # Const or Sym (symbolic dims)
    storage: str = "global"
    loc: Optional[Loc] = None
    init: Optional[Const] = None  # a host buffer's initial value (`s32[4] out {0};`)


@dataclass
class Buffer:
    """A shared or local buffer (optionally an array of `count` buffers)."""

    name: str
    storage: str  # "shared" | "local"
    dtype: str
    shape: tuple[int, ...]
    count: Optional[int] = None
    swizzle: Optional[int] = None  # bytes (32/64/128), set by the layout pass
    init: Optional[Const] = None
    loc: Optional[Loc] = None
    offset: Optional[int] = None  # byte offset in the block's shared memory (smem plan)
    free_swizzle: bool = False  # the swizzle was chosen by passes/free_tile_swizzle

    @property
    def nbytes(self) -> int:
        n = dtype_bytes(self.dtype) * (self.count or 1)
        for d in self.shape:
            n *= d
        return n


@dataclass
class RunBuffer:
    """A shared buffer whose shape is only known at run time (`shared s8 [M] x;`, `=> shared`
    of a tile with run-time extents). Kept apart from `Buffer` (whose shape the static plan
    adds up): these lie after the static shared memory (and the per-thread area), in
    declaration order, 16-byte aligned; their offsets and the launch's extra bytes are
    expressions in the kernel's dimensions (`run_offsets`)."""

    name: str
    dtype: str
    shape: tuple[Expr, ...]
    loc: Optional[Loc] = None
    storage: str = "shared"
    count: Optional[int] = None  # never an array; the name `Buffer` readers look for

    def byte_size(self) -> Expr:
        n: Expr = Const(dtype_bytes(self.dtype), "s32")
        for d in self.shape:
            n = Bin("*", n, d, "s32")
        return n


def run_offsets(buffers: list) -> tuple[list[Expr], Expr]:
    """(each run-time-sized buffer's offset from the first one's, the bytes of them all):
    each one's size rounded up to 16 bytes."""
    at: Expr = Const(0, "s32")
    offsets = []
    for b in buffers:
        offsets.append(at)
        size = Bin("+", b.byte_size(), Const(15, "s32"), "s32")
        size = Bin("*", Bin("/", size, Const(16, "s32"), "s32"), Const(16, "s32"), "s32")
        at = size if isinstance(at, Const) and at.value == 0 else Bin("+", at, size, "s32")
    return offsets, at


@dataclass
class Alias:
    """`x.span_as([a, b])` of a whole tensor or buffer: the same elements, in row-major order,
    seen with another shape; views over `name` index that shape."""

    name: str
    base: str  # a parameter or a buffer (never another alias)
    shape: tuple[int, ...]
    loc: Optional[Loc] = None


@dataclass
class Event:
    name: str
    slots: Optional[int]  # None: a single event, not an array
    ready: bool = False  # generation 0 starts ready (`= ready`)
    storage: str = "shared"
    loc: Optional[Loc] = None
    offset: Optional[int] = None  # byte offset of slot 0's barrier (smem plan)
    arrivals: Optional[int] = None  # arrivals completing a generation (passes/event_arrivals)


#: Fragment layouts (the layout pass fills them in; see passes/fragment_layout.py)
#:   "acc"        an MMA accumulator [M, N]: rows spread over owners, columns split among them
#:   "row"        a row vector [M] of an accumulator, replicated over the row's owners
#:   "row_partial" a row vector whose owners hold different partial values (needs all_reduce)
#:   "operand"    an MMA A operand held in registers (cast of an accumulator)
FRAG_LAYOUTS = ("acc", "row", "row_partial", "operand", "plain")


@dataclass
class Frag:
    name: str
    dtype: str
    shape: tuple[int, ...]
    layout: str = "plain"
    loc: Optional[Loc] = None
    # `mma.fill ... : block`: the block's accumulator, one tile every role of the block
    # sees (tensor memory on sm_100a), not one per thread group that runs its code
    block: bool = False
    # `frag bf16[M, K] p : block in s`: the block operand sits in the tensor-memory
    # columns of block accumulator `s` (FA4's P over S) instead of its own
    host: Optional[str] = None


# ---------------------------------------------------------------- statements


@dataclass
class Stmt:
    pass


@dataclass
class Let(Stmt):
    name: str
    value: Expr
    loc: Optional[Loc] = None


@dataclass
class Var(Stmt):
    """A mutable scalar."""

    name: str
    dtype: str
    init: Expr
    loc: Optional[Loc] = None


@dataclass
class Assign(Stmt):
    name: str
    value: Expr
    loc: Optional[Loc] = None


@dataclass
class ViewDef(Stmt):
    """Names a view (`Q_head = Q.subspan(...).at(...).sqz()`)."""

    name: str
    view: View
    loc: Optional[Loc] = None


@dataclass
class For(Stmt):
    """`foreach {var} in [stop]`: var = start, start+step, ... < stop."""

    var: str
    start: Expr
    stop: Expr
    body: list[Stmt]
    step: Expr = field(default_factory=lambda: Const(1, "s32"))
    loc: Optional[Loc] = None


@dataclass
class While(Stmt):
    cond: Expr
    body: list[Stmt]
    loc: Optional[Loc] = None


@dataclass
class If(Stmt):
    cond: Expr
    then: list[Stmt]
    orelse: list[Stmt] = field(default_factory=list)
    loc: Optional[Loc] = None


@dataclass
class Break(Stmt):
    loc: Optional[Loc] = None


@dataclass
class Continue(Stmt):
    loc: Optional[Loc] = None


@dataclass
class Yield(Stmt):
    """`yield`: the thread that runs it leaves the kernel (the rest of the kernel is
    skipped for it; the host program goes on)."""

    loc: Optional[Loc] = None


@dataclass
class Parallel(Stmt):
    """Spawns `extent` instances of `level` inside a block (`parallel p by [3] : group-4`).

    `threads` is the number of threads of one instance (128 for group-4).
    The instances run concurrently and join at the end of the region.
    """

    var: str
    extent: int
    level: str  # "group-4" | "group" | "thread"
    threads: int
    body: list[Stmt]
    loc: Optional[Loc] = None


@dataclass
class Role(Stmt):
    """`inthreads.async (cond)`: only the instances in `members` run `body`."""

    name: str
    cond: Expr
    members: tuple[int, ...]
    body: list[Stmt]
    is_async: bool = True
    max_regs: Optional[int] = None  # from setreg_inc/dec, for setmaxnreg
    loc: Optional[Loc] = None


@dataclass
class SetMaxRegs(Stmt):
    """`call croq::cuda::setreg_inc/dec(n)`."""

    count: int
    increase: bool
    loc: Optional[Loc] = None


@dataclass
class TmaLoad(Stmt):
    """Global -> shared bulk tensor copy. `future` is None for the synchronous form."""

    src: View
    dst: View
    future: Optional[str] = None
    evict: Optional[str] = None  # "evict_first" | "evict_last" | ...
    swizzle: Optional[int] = None  # bytes; resolved from a bare `.swiz` by sema
    loc: Optional[Loc] = None
    leader_only: bool = False  # issued once for the whole role (see RoleSync)


@dataclass
class TmaStore(Stmt):
    """Shared -> global bulk tensor copy (`tma.copy smem => global`).

    With `future`, the store is asynchronous: waiting the future means the
    store has finished reading shared memory (it has no event binding).
    """

    src: View
    dst: View
    loc: Optional[Loc] = None
    leader_only: bool = False  # issued once for the whole role (see RoleSync)
    future: Optional[str] = None
    # `tma.copy.rows<n>`: only the box's first n rows (of a 1-D box, elements) are
    # written, n known at run time (<= 0: none). A TMA store writes its whole box, so
    # the backends store such a box by the threads (lowering/core/tma_fallback.py).
    rows: Optional[Expr] = None


@dataclass
class DmaCopy(Stmt):
    """A general copy; the source box may be smaller than the destination in every
    dimension (it fills the destination's leading corner)."""

    src: View
    dst: View
    future: Optional[str] = None
    swizzle: Optional[int] = None
    loc: Optional[Loc] = None
    leader_only: bool = False  # issued once for the whole role (see RoleSync)
    # `dma.transp<perm>`: destination dimension k is source dimension perm[k].
    transpose: Optional[tuple[int, ...]] = None
    # `dma.pad<{low}, {high}, {0..}, value>`: the source lands at offset `low` of a
    # destination `low + high` larger per dimension; the rest is `value`.
    pad: Optional[tuple[tuple[int, ...], tuple[int, ...], "Const"]] = None


@dataclass
class Wait(Stmt):
    items: list[Union[EventRef, FutureRef]]
    loc: Optional[Loc] = None


@dataclass
class Trigger(Stmt):
    event: EventRef
    after: list[str] = field(default_factory=list)  # futures whose completion publishes it
    loc: Optional[Loc] = None


@dataclass
class RoleSync(Stmt):
    """All instances of the enclosing role (or parallel region) meet here.

    Sema puts one before a collective operation (`leader_only`), such as the
    TMA store of a tile that several warpgroups wrote: the store may start only
    once every instance has written its part, and one instance issues it.
    """

    loc: Optional[Loc] = None


@dataclass
class SyncShared(Stmt):
    loc: Optional[Loc] = None


@dataclass
class SyncWarp(Stmt):
    """`sync.barrier : group` / `: thread`: the threads of one warp meet (`bar.warp.sync`),
    ordering their accesses to shared and global data; threads of other warps do not wait."""

    loc: Optional[Loc] = None


@dataclass
class GridSync(Stmt):
    """`sync.barrier : block` in a `: block<cooperative>` kernel: every thread of every
    block of the grid meets here (the kernel is launched cooperatively, all blocks
    resident), and the writes to global memory before it are seen by the reads after it."""

    loc: Optional[Loc] = None


@dataclass
class Fence(Stmt):
    """`sync.fence : block` (scope "gpu": this thread's earlier writes are seen by other
    blocks before its later ones) / `: thread` (scope "cta": by the block's threads)."""

    scope: str
    loc: Optional[Loc] = None


@dataclass
class NamedBarrier(Stmt):
    """`__bar_sync(id, count)` / `__bar_arrive(id, count)`: hardware named barrier `id`.

    A generation of barrier `id` completes once `count` threads have arrived;
    `sync` arrives and waits for that, `arrive` only arrives. Every thread of
    the executing role instance arrives (the count is in threads), so warpgroups
    can hand turns to each other (one syncs on its barrier, the other arrives on
    it). The compiler's own barriers take ids the program does not name (1..7
    are left to a program that computes its ids at run time).
    """

    op: str  # "sync" | "arrive"
    barrier: Expr
    count: int
    loc: Optional[Loc] = None


@dataclass
class FragDecl(Stmt):
    frag: Frag
    init: Optional[Const] = None
    loc: Optional[Loc] = None


@dataclass
class MmaFill(Stmt):
    """Creates (or re-initialises) accumulator `acc` with `value` everywhere."""

    acc: str
    value: Const
    loc: Optional[Loc] = None


@dataclass
class Mma(Stmt):
    """acc += a @ op(b). `layout` is Choreo's "row.row" / "row.col" / ...

    With "row.row", b is [N, K] (K contiguous); with "row.col", b is [K, N].
    `a` is a shared View or the name of a register fragment (`operand` layout).
    """

    acc: str
    a: Union[View, str]
    b: View
    layout: str
    future: Optional[str] = None  # set for `.async`
    k_schedule: Optional[tuple[int, ...]] = None
    loc: Optional[Loc] = None
    completion: Optional[str] = None  # the event its commit arrives on (passes/mma_barriers)


@dataclass
class SparseMma(Mma):
    """acc += expand(a, meta) @ op(b): an Mma whose A is 2:4 structured sparse.

    `a` is the packed [M, K/2] shared tile (the two kept values of each group of four
    along K, in column order); `meta` names a u8 [M, K/8] register fragment (`mma.load`)
    whose row r, byte j holds groups 2j (low nibble) and 2j + 1 (high nibble) of A's row
    r; a group's nibble is i0 | i1 << 2, the columns (0..3, i0 < i1) of its two values.
    B is dense: [N, K] for "row.row", [K, N] for "row.col" (docs/reference/mma.md).
    A subclass of Mma so that every pass that orders, waits or places MMAs treats it as
    one; the stages that compute it dispatch on this class.
    """

    meta: str = ""


@dataclass
class WarpMma(Stmt):
    """acc += a @ op(b) of one warp (`parallel ... : group`), both operands register
    fragments loaded by `mma.load` (the mma.sync / WMMA form). Same `layout` words as
    Mma: with "row.row" b is [N, K], with "row.col" [K, N]. Synchronous: the warp's
    lanes hold the operands and the result (`mma.sync` tiles of it); in a `: group-4`
    level each of its 4 warps holds a quarter of the rows of A and of the accumulator,
    and all of B."""

    acc: str
    a: str
    b: str
    layout: str
    loc: Optional[Loc] = None


@dataclass
class MmaStore(Stmt):
    """`mma.store acc, tile` (`.transp`: element (i, j) of acc to (j, i) of the tile;
    `.direct`: into a global tile, each thread its elements with plain stores, no staging)."""

    acc: str
    dst: View
    loc: Optional[Loc] = None
    transposed: bool = False
    direct: bool = False


@dataclass
class MmaLoad(Stmt):
    """`f = mma.load tile`: a tile -> register fragment `f`, each thread its elements (the
    register A operand of an MMA: wgmma's RS form; sm_90a lowers tiles in shared memory)."""

    frag: str
    src: View
    loc: Optional[Loc] = None


@dataclass
class ElemStore(Stmt):
    """`frag.at(index) = value` inside an Apply."""

    frag: str
    index: tuple[Expr, ...]
    value: Expr
    loc: Optional[Loc] = None


@dataclass
class BufStore(Stmt):
    """`buf.at(index) = value` on a buffer or tensor view (per-thread code)."""

    view: View
    index: tuple[Expr, ...]
    value: Expr
    loc: Optional[Loc] = None
    # "add": `__atomic_add(buf.at(i), value)`, buf[i] += value as one atomic update
    # (threads of the block may add to the same element); likewise "sub", "min", "max",
    # "and", "or", "xor", "exch" (buf[i] = value) and "cas" (buf[i] = value where
    # buf[i] == compare); None: a plain store.
    atomic: Optional[str] = None
    compare: Optional[Expr] = None
    # An atomic's old value goes to this mutable scalar (`mutable s32 old = __atomic_...`).
    result: Optional[str] = None


@dataclass
class Apply(Stmt):
    """`apply {i, j} in frag.span { body }`: body runs for every index of `shape`."""

    indices: tuple[str, ...]
    shape: tuple[int, ...]
    domain: str  # the fragment whose span is iterated (its owners do the work)
    body: list[Stmt]
    loc: Optional[Loc] = None
    # Pass tmem-row-vote (sm_100a): the body is one `if` on the row alone over a block
    # accumulator in tensor memory; a warp vote skips the warp's tcgen05.ld/st when no
    # lane (row) takes it.
    warp_vote: bool = False
    # `[[exp2_split(f)]]` on the statement: the fraction of __exp2f elements asked to
    # run on the FMA pipes (None: the compiler's default).
    exp2_fraction: Optional[float] = None
    # Pass exp2-split: the elements k (mod 16) of a thread whose __exp2f, rounded to
    # bf16/f16, is the FMA polynomial instead of MUFU ex2.approx (on sm_100a's 32x32b
    # layout, the columns j = k); () none.
    exp2_poly: tuple[int, ...] = ()


@dataclass
class Reduce(Stmt):
    """`reduce_max(dst, src, dim)`: dst = max over `dim` of src (over all owners)."""

    kind: str  # "max" | "sum"
    dst: str
    src: str
    dim: int
    loc: Optional[Loc] = None


@dataclass
class AllReduce(Stmt):
    """`all_reduce_sum(v)`: combine the owners' partial values of a row vector."""

    kind: str  # "sum" | "max"
    frag: str
    loc: Optional[Loc] = None


@dataclass
class FragCopy(Stmt):
    dst: str
    src: str
    loc: Optional[Loc] = None


@dataclass
class Print(Stmt):
    """`println(...)` in a kernel: text and scalar values in turn, then a newline (each
    thread that runs it prints its own line, as a device printf does)."""

    items: list  # str (text, printed as written) or Expr (a value: print_format's spec)
    loc: Optional[Loc] = None
    #: A C `printf` of a device function (its `%f` floats and `%d` conditions as written),
    #: not a `println` (floats as `%g`, conditions as `true` / `false`).
    c_format: bool = False


@dataclass
class AsmOperand:
    """One operand of inline asm: its constraint as written (`=r`, `+r`, `r`, `n`, ...),
    the value (an input) or the place written (an output: a buffer element or a mutable
    scalar), and its symbolic name (`%[name]` in the template) if it has one."""

    constraint: str
    expr: Expr
    name: Optional[str] = None


@dataclass
class Asm(Stmt):
    """`__asm__ [volatile] ("template" : outputs : inputs : clobbers)` in a thread kernel:
    PTX text pasted into the kernel with `%N` / `%[name]` replaced by the operands'
    registers (outputs first, then inputs, as GCC numbers them)."""

    template: str
    outputs: list  # AsmOperand
    inputs: list  # AsmOperand
    volatile: bool = False
    clobbers: list = field(default_factory=list)
    loc: Optional[Loc] = None


_ASM_REFERENCE = re.compile(r"%(%|\d+|\[(\w*)\])")


def asm_letter(constraint: str) -> str:
    """The kind letter of an asm constraint (`=r` -> `r`, `+l` -> `l`; `&` ignored)."""
    return constraint.lstrip("=+&")


def asm_references(template: str) -> list[tuple[str, int, int]]:
    """The operand references of an asm template: (`%` for `%%`, a number, or `[name]`;
    start; end)."""
    return [(m.group(1) if m.group(2) is None else "[" + m.group(2) + "]", m.start(), m.end())
            for m in _ASM_REFERENCE.finditer(template)]


def print_format(items: list, c_format: bool = False) -> tuple[str, list]:
    """(C printf format, the values it reads): integers as `%lld` of a 64-bit value,
    floats as `%g` of a double (C's promotion of a variadic float; `%g` is what C++'s
    `ostream <<` writes, the reference's CPU model's form: tools/co-mock/mock_memory.cpp
    `Value::ToString`), conditions as `%s` of "true" / "false" (its form too). A C printf
    (`c_format`: a device function's `printf`) keeps `%f` and prints conditions as `%lld`."""
    fmt, values = [], []
    for item in items:
        if isinstance(item, str):
            fmt.append(item.replace("%", "%%"))
        else:
            fmt.append(_value_spec(item.dtype, c_format))
            values.append(item)
    return "".join(fmt), values


def _value_spec(dtype: str, c_format: bool) -> str:
    if is_float(dtype):
        return "%f" if c_format else "%g"
    return "%s" if dtype == "bool" and not c_format else "%lld"


@dataclass
class Launch(Stmt):
    kernel: str
    loc: Optional[Loc] = None


@dataclass
class HostCall(Stmt):
    """`b = f(x, n);`, `call f(x, n);` in host code: the host runs the `__co__` function
    `func` of the module (co-mock's call: frontend/co_calls.py). `tensors` binds each of
    its tensor parameters to a tensor of the caller, passed by reference (the callee's
    writes are the caller's); `scalars` names its scalar parameters, `values` their
    values. `result`: the caller's name for what the call returns, a host buffer of the
    caller (`result_dtype` None: rebound to the returned tensor) or a host variable of
    type `result_dtype`; None when the value is dropped. Host code only."""

    func: str
    tensors: tuple[tuple[str, str], ...]  # (the callee's parameter, the caller's tensor)
    scalars: tuple[str, ...]
    values: tuple[Expr, ...]
    result: Optional[str] = None
    result_dtype: Optional[str] = None
    loc: Optional[Loc] = None


@dataclass
class Assert(Stmt):
    """`assert(cond, "message")` on the function's sizes, checked at entry (host side):
    what the kernel assumes of its symbolic dimensions, such as equal sequence lengths."""

    cond: Expr
    message: str
    loc: Optional[Loc] = None


# ---------------------------------------------------------------- tensor memory


#: Lanes of one tensor-memory subpartition: warp w % 4 of a warpgroup reaches lanes
#: [32 * (w % 4), +32) only, so a layout is described per subpartition.
TMEM_SUBPARTITION = 32


@dataclass
class TmemRegion:
    """The tensor-memory cells one instance of the MMA role gives a fragment.

    `layout` is the MMA's data-path layout: "D" (M = 128) puts row r in lane r, so
    the region spans lanes 0..127; "F" (M = 64) puts 16 rows in each 32-lane
    subpartition, from lane `lane` of it (0 or 16) on. Columns are 32-bit and
    relative to the allocation: an accumulator [M, N] takes N, a 16-bit A
    operand [M, K] K / 2 (two elements per column)."""

    frag: str
    instance: int        # 0 = the role's first member
    kind: str            # "acc" | "operand"
    layout: str          # "D" | "F"
    lane: int            # first lane: D 0; F inside each subpartition (0 | 16)
    col: int             # first column
    ncols: int
    # the block accumulator whose region (same instance) this one lies inside, by the
    # program's `frag ... p : block in s` (FA4's P over S); the only cells two regions share
    host: Optional[str] = None

    @property
    def lanes(self) -> tuple[int, ...]:
        if self.layout == "D":
            return tuple(range(self.lane, self.lane + 128))
        return tuple(q * TMEM_SUBPARTITION + self.lane + i for q in range(4) for i in range(16))


@dataclass
class TmemMap:
    """The kernel's tensor-memory plan (pass tmem-plan): one allocation of `alloc`
    columns, made for the role whose MMAs use it (`role`: its members), and every
    region in it. `staged` names register A operands the MMA cannot read from
    tensor memory, with why. `refused` says why no plan could be made (the backend
    refuses the kernel with it, at `loc`); the map then has no regions."""

    role: Optional[tuple[int, ...]]
    alloc: int = 0
    used: int = 0
    regions: list[TmemRegion] = field(default_factory=list)
    staged: dict[str, str] = field(default_factory=dict)
    refused: Optional[str] = None
    loc: Optional[Loc] = None

    def region(self, frag: str, instance: int = 0) -> TmemRegion:
        for r in self.regions:
            if r.frag == frag and r.instance == instance:
                return r
        raise KeyError(f"no TMEM region for {frag}[{instance}]")


# ---------------------------------------------------------------- containers


@dataclass
class GridDim:
    var: str
    extent: Expr


@dataclass
class Kernel:
    name: str
    params: list[Param]
    grid: list[GridDim]
    buffers: list[Buffer] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    frags: list[Frag] = field(default_factory=list)
    body: list[Stmt] = field(default_factory=list)
    launch_bounds: Optional[tuple[Optional[int], Optional[int]]] = None
    loc: Optional[Loc] = None
    cooperative: bool = False  # `: block<cooperative>`: all blocks resident (GridSync)
    smem_total: Optional[int] = None  # bytes of shared memory the plan uses
    tmem_slot: Optional[int] = None  # smem offset of the tensor-memory base address (mma_barriers)
    # Scalar parameters of the function that the kernel reads and that are no shape
    # dimension (`int x`): passed like dimensions, after them, but of any sign.
    scalars: list[Sym] = field(default_factory=list)
    aliases: list[Alias] = field(default_factory=list)  # reshaped views (span_as)
    # "cpu": a `parallel by 1 : device(cpu)` region, which the host runs (the interpreter's
    # executor, on the host's copies of its tensors); None: a GPU kernel.
    device: Optional[str] = None
    # A host region's assignments to host variables (sema/host_copies.py): (host variable,
    # the region's copy), set from the copy when the region ends; empty for GPU kernels.
    writes_back: list[tuple[str, str]] = field(default_factory=list)
    tmem: Optional[TmemMap] = None   # tensor-memory columns of the MMA fragments (tmem_plan)
    run_buffers: list[RunBuffer] = field(default_factory=list)  # shared, sized at run time
    # The function's entry asserts on its sizes (`assert(Q_SEQ <= KV_SEQ, "...")`): every
    # launch satisfies them (they are checked before it), so the static checks take them
    # as assumptions. Filled from the function before the passes run (passes/pipeline.py).
    assumes: list[Expr] = field(default_factory=list)

    def run_buffer(self, name: str) -> Optional[RunBuffer]:
        return next((b for b in self.run_buffers if b.name == name), None)

    def buffer(self, name: str) -> Optional[Buffer]:
        return next((b for b in self.buffers if b.name == name), None)

    def event(self, name: str) -> Optional[Event]:
        return next((e for e in self.events if e.name == name), None)

    def frag(self, name: str) -> Optional[Frag]:
        return next((f for f in self.frags if f.name == name), None)

    def param(self, name: str) -> Optional[Param]:
        return next((p for p in self.params if p.name == name), None)

    def alias(self, name: str) -> Optional[Alias]:
        return next((a for a in self.aliases if a.name == name), None)

    def root(self, name: str) -> str:
        """The tensor or buffer whose memory `name` is (an alias's base, else itself)."""
        a = self.alias(name)
        return a.base if a is not None else name

    @property
    def symbolic_dims(self) -> list[str]:
        seen: list[str] = []
        for p in self.params:
            for d in p.shape:
                if isinstance(d, Sym) and d.name not in seen:
                    seen.append(d.name)
        return seen + [x.name for x in self.scalars if x.name not in seen]

    def is_scalar_arg(self, name: str) -> bool:
        """Whether dimension `name` of `symbolic_dims` is a scalar argument (may be negative)."""
        return any(x.name == name for x in self.scalars) and name not in [
            d.name for p in self.params for d in p.shape if isinstance(d, Sym)]

    @property
    def smem_bytes(self) -> int:
        return sum(b.nbytes for b in self.buffers if b.storage == "shared")


@dataclass
class Function:
    name: str
    params: list[Param]
    kernels: list[Kernel]
    body: list[Stmt]  # host-side statements; `Launch` starts a kernel
    loc: Optional[Loc] = None
    # Global tensors the host allocates (buffers declared outside any parallel region;
    # every kernel of the function sees them after the parameters), and the one the
    # function returns (a name of `params` or `locals`; None for a `void` function).
    locals: list[Param] = field(default_factory=list)
    result: Optional[str] = None
    # Every parameter's name in the order written: tensors (`params`) and scalars
    # (bound as dimensions), so that a caller can pass them positionally.
    arg_names: list[str] = field(default_factory=list)
    # A function declared to return a value (this type, as written) that ends without
    # `return`: a call has no value to give, and what it gives refuses to be used
    # (host/missing_result.py). None when `result` is set or nothing is promised.
    missing_return: Optional[str] = None


@dataclass
class Module:
    functions: list[Function]
    source: str = ""

    def function(self, name: str) -> Optional[Function]:
        return next((f for f in self.functions if f.name == name), None)

    def kernel(self, name: str) -> Optional[Kernel]:
        for f in self.functions:
            for k in f.kernels:
                if k.name == name:
                    return k
        return None


#: Statements that make a kernel an MMA/TMA kernel (lowering/core/kernel.py); a kernel
#: without them, events and fragments is a thread kernel (lowering/core/simt.py).
ASYNC_KINDS = (TmaLoad, TmaStore, Mma, MmaFill, MmaStore, MmaLoad, FragDecl, Apply, Reduce,
               AllReduce, FragCopy, Trigger, Role, SetMaxRegs, NamedBarrier, ElemStore)
#: The fragment statements a warp-MMA kernel (is_warp_mma_kernel) may hold.
WARP_FRAG_KINDS = (WarpMma, MmaFill, MmaStore, MmaLoad, FragDecl, Apply, ElemStore)


def is_warp_mma_kernel(k: Kernel) -> bool:
    """A kernel whose fragments are only the warp form's (WarpMma and its loads, fills,
    stores and element-wise applies) and that has no event and no asynchronous TMA copy:
    its lanes hold them in registers, so it is lowered thread by thread like a kernel
    without fragments."""
    if k.events:
        return False
    kinds = [s for s in walk(k.body) if isinstance(s, ASYNC_KINDS + (WarpMma,))]
    return any(isinstance(s, WarpMma) for s in kinds) and \
        all(isinstance(s, WARP_FRAG_KINDS) or _sync_tma(s) for s in kinds)


def _sync_tma(s: Stmt) -> bool:
    """A synchronous TMA copy (pass warp-copies makes it a dma.copy in a warp-MMA kernel)."""
    return isinstance(s, (TmaLoad, TmaStore)) and s.future is None


#: TMA copies a thread kernel may hold: with no MMA, event or role beside them nothing
#: observes how a tile moves, and the thread lowering moves it with cooperative loads.
THREAD_TMA_KINDS = (TmaLoad, TmaStore)
#: Of ASYNC_KINDS, those a thread kernel lowers too (TMA copies as thread copies; a named
#: barrier outside any role is one every thread of its `: thread` region meets).
THREAD_KINDS = THREAD_TMA_KINDS + (NamedBarrier,)


def is_thread_kernel(k: Kernel) -> bool:
    """Whether `k` is lowered thread by thread: no MMA, fragment, event or other
    asynchronous statement (TMA copies alone do not make an MMA kernel), or only the
    warp form's fragments (is_warp_mma_kernel)."""
    if is_warp_mma_kernel(k):
        return True
    own = per_thread_frags(k)  # a `: thread` region's arrays (lowering/core/thread_frags.py)
    if k.events or (k.frags and not own):
        return False
    allowed = THREAD_KINDS + ((FragDecl, Apply, ElemStore) if own else ())
    return not any(isinstance(s, ASYNC_KINDS) and not isinstance(s, allowed)
                   for s in walk(k.body))


def per_thread_frags(k: Kernel) -> bool:
    """Whether every fragment of `k` is declared in a `parallel t by n : thread` region
    (one thread per instance, one variable: not a `: group` level flattened into threads,
    whose fragments are the group's) and only declared, applied and read element-wise
    there: each thread's own array."""
    if not k.frags or any(f.block or f.host for f in k.frags):
        return False
    if any(isinstance(s, (Mma, MmaFill, MmaStore, MmaLoad, Reduce, AllReduce, FragCopy,
                          WarpMma)) for s in walk(k.body)):
        return False
    declared = set()
    for s in walk(k.body):
        if isinstance(s, Parallel) and s.level == "thread" and s.threads == 1 \
                and "__" not in s.var:
            declared |= {t.frag.name for t in walk(s.body) if isinstance(t, FragDecl)}
    names = {b.name for b in k.buffers} | {p.name for p in k.params}
    frags = {f.name for f in k.frags}
    return declared == frags and not frags & names


# ---------------------------------------------------------------- walking


#: Annotations of the fields a walk descends into: one sub-expression, a sequence of them,
#: a nested statement list. Read from each kind's fields, so a new kind is walked without
#: being listed here (tests/test_ir_coverage.py checks no Expr or Stmt field escapes them).
EXPR_FIELD = ("Expr", "Optional[Expr]")
EXPRS_FIELD = ("tuple[Expr, ...]", "list[Expr]")
BLOCK_FIELD = ("list[Stmt]",)


@cache
def _walked_fields(kind: type, annotations: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(f.name for f in fields(kind) if f.type in annotations)


def expr_children(e: Expr) -> list[Expr]:
    """The direct sub-expressions of `e` (view offsets of a BufElem not included)."""
    kind = type(e)
    out = [x for x in (getattr(e, n) for n in _walked_fields(kind, EXPR_FIELD)) if x is not None]
    for n in _walked_fields(kind, EXPRS_FIELD):
        out.extend(getattr(e, n))
    return out


def expr_walk(e: Expr):
    """Pre-order walk over an expression tree."""
    stack = [e]
    while stack:
        x = stack.pop()
        yield x
        stack.extend(reversed(expr_children(x)))


def sym_names(e: Expr) -> set[str]:
    """Every scalar name `e` reads."""
    return {x.name for x in expr_walk(e) if isinstance(x, Sym)}


def elem_reads(stmts: list[Stmt]) -> set[str]:
    """Fragments read through `frag.at(...)` by the values and conditions of `stmts`."""
    out: set[str] = set()
    for s in walk(stmts):
        for attr in ("value", "cond"):
            e = getattr(s, attr, None)
            if isinstance(e, Expr):
                out |= {x.frag for x in expr_walk(e) if isinstance(x, Elem)}
    return out


def child_blocks(stmt: Stmt) -> list[list[Stmt]]:
    """The statement lists nested directly in `stmt`."""
    return [getattr(stmt, n) for n in _walked_fields(type(stmt), BLOCK_FIELD)]


def walk(stmts: list[Stmt]):
    """Pre-order walk over a statement tree."""
    for s in stmts:
        yield s
        for block in child_blocks(s):
            yield from walk(block)
