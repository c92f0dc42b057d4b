"""The Choreo syntax tree.

Every node carries `loc`, the position in the original file (through the
preprocessor's map).  Nodes only record what was written; deciding what a
name refers to (an mdspan, a buffer, an event...) is the semantic
analyser's work, so constructs the parser cannot tell apart share one node
(`x.at(i)` is a `MethodCall` whether `x` is a view, a buffer or an event).

Construct with keywords only: `Name(id="a", loc=loc)`.

Long because: it is the one definition of the syntax tree (each construct a
small dataclass with its docstring); the builders and checks read it whole.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Iterator, Optional, Union

from choreo_py.source import Loc


@dataclass(kw_only=True, eq=False)
class Node:
    loc: Loc


@dataclass(kw_only=True, eq=False)
class Expr(Node):
    #: Written inside parentheses; `(0)` in a shape derivation means "dimension 0".
    parenthesized: bool = field(default=False, repr=False)


@dataclass(kw_only=True, eq=False)
class Stmt(Node):
    pass


# --------------------------------------------------------------- top level

@dataclass(kw_only=True, eq=False)
class Program(Node):
    items: list[Node]          # FunctionDef, HostCode and DeviceCode, in file order
    file: str

    @property
    def functions(self) -> list["FunctionDef"]:
        return [it for it in self.items if isinstance(it, FunctionDef)]


@dataclass(kw_only=True, eq=False)
class HostCode(Node):
    """C++ outside any Choreo construct; kept verbatim, never parsed."""
    text: str


@dataclass(kw_only=True, eq=False)
class DeviceCode(Node):
    """Raw device code: the inside of `__cok__ { ... }` or a whole
    `__device__` / `__co_device__` function or declaration."""
    text: str
    kind: str                  # "cok" | "device"


@dataclass(kw_only=True, eq=False)
class FunctionDef(Node):
    name: str
    return_type: "TypeNode"
    params: list["Param"]
    body: "Block"


@dataclass(kw_only=True, eq=False)
class Param(Node):
    name: Optional[str]        # parameters may be unnamed
    type: "TypeNode"
    storage: Optional[str] = None   # "global" when written
    by_ref: bool = False


# --------------------------------------------------------------- types

@dataclass(kw_only=True, eq=False)
class TypeRef(Node):
    """A scalar or special type: s32, f32, bool, void, auto, stream..."""
    name: str                  # canonical name: `int` -> s32, `half` -> f16 ...
    spelling: str              # as written


@dataclass(kw_only=True, eq=False)
class DimWildcard(Node):
    """A parameter dimension left open: `?` (any), `??` (no value), `auto`."""
    kind: str


@dataclass(kw_only=True, eq=False)
class MdSpanType(Node):
    """Element type plus shape: `f32 [M, N]`, `bf16 mdspan<2>`.

    `dims` lists the bracket contents as written (None for `mdspan<N>`); a
    single entry may itself denote a whole shape (`f32 [sp]`, `f32 [a.span]`).
    `rank` is set when the text fixes it: `mdspan<N>`, or several entries.
    """
    elem: TypeRef
    dims: Optional[list[Union[Expr, DimWildcard]]]
    rank: Optional[int] = None


TypeNode = Union[TypeRef, MdSpanType]


# --------------------------------------------------------------- expressions

@dataclass(kw_only=True, eq=False)
class Name(Expr):
    id: str                    # may be qualified: "croq::cuda::setreg_dec"


@dataclass(kw_only=True, eq=False)
class IntLit(Expr):
    value: int                 # unbounded; range checks happen in parse_checks
    suffix: str                # "", "u", "ll", "ull" (lower-cased)
    text: str


@dataclass(kw_only=True, eq=False)
class FloatLit(Expr):
    value: float
    suffix: str                # "f" for single precision, "" for double
    text: str


@dataclass(kw_only=True, eq=False)
class BoolLit(Expr):
    value: bool


@dataclass(kw_only=True, eq=False)
class StringLit(Expr):
    value: str                 # escapes resolved, adjacent literals joined


@dataclass(kw_only=True, eq=False)
class NullPtr(Expr):
    pass


@dataclass(kw_only=True, eq=False)
class Unary(Expr):
    op: str                    # - + ! ~ & ++ -- post++ post--
    operand: Expr


@dataclass(kw_only=True, eq=False)
class Binary(Expr):
    op: str                    # arithmetic, comparison, logical, bitwise, # #+ #- #* #/ #%
    lhs: Expr
    rhs: Expr


@dataclass(kw_only=True, eq=False)
class Ternary(Expr):
    cond: Expr
    then: Expr
    otherwise: Expr


@dataclass(kw_only=True, eq=False)
class UBound(Expr):
    """`#p`: the upper bound of a bounded variable."""
    name: str


@dataclass(kw_only=True, eq=False)
class SizeOf(Expr):
    """`|sp|` (element count of a shape) or `|f32|` (bytes of a type)."""
    operand: Union[Expr, TypeRef]


@dataclass(kw_only=True, eq=False)
class ITupleLit(Expr):
    elements: list[Expr]


@dataclass(kw_only=True, eq=False)
class MdSpanLit(Expr):
    elements: list[Expr]


@dataclass(kw_only=True, eq=False)
class DimIndex(Expr):
    """`(1)` inside a shape or ituple derivation: dimension 1 of the base."""
    index: Expr


@dataclass(kw_only=True, eq=False)
class Index(Expr):
    """`a[i]`, and shape derivations `sp[(1), (0)]`, `x.span[(0)/2, 4]`."""
    base: Expr
    indices: list[Expr]


@dataclass(kw_only=True, eq=False)
class ITupleSelect(Expr):
    """`t {(2), (0)}`: a new ituple from elements of `t`."""
    base: Expr
    indices: list[Expr]


@dataclass(kw_only=True, eq=False)
class DimOf(Expr):
    """`sp(0)`, `x.span(1)`, `index(1)`: one element of a shape or ituple."""
    base: Expr
    index: Expr


@dataclass(kw_only=True, eq=False)
class Member(Expr):
    """`x.span`, `f.data`, `f.mdata`."""
    base: Expr
    name: str


@dataclass(kw_only=True, eq=False)
class MethodCall(Expr):
    """View and access operations: `.subspan(...)`, `.at(...)`, `.chunkat(...)`,
    `.step(...)`, `.sqz()`, `.span_as(...)`, `.view(e : s)`, `.from(...)`...

    `strides` holds what follows ':' in `.subspan(extents : strides)` and
    `.view(extents : strides)`.
    """
    base: Expr
    method: str
    args: list[Expr]
    strides: Optional[list[Expr]] = None


@dataclass(kw_only=True, eq=False)
class CallExpr(Expr):
    """A call of a builtin (`__exp2f`, `cdiv`, `select`, `reduce_max`, atomics...)
    or of an intrinsic declared with `#pragma croq intrinsic`."""
    func: str
    args: list[Expr]
    comptime: bool = False     # `print!(...)`
    template_args: Optional[list[Union[Expr, "TypeRef"]]] = None   # `ns::f<4>(x)`


@dataclass(kw_only=True, eq=False)
class Call(Expr):
    """`call ns::fn<targs>(args)`: a call of a device function."""
    func: str
    template_args: Optional[list[Union[Expr, TypeRef]]]
    args: list[Expr]


@dataclass(kw_only=True, eq=False)
class Cast(Expr):
    """`__to<f16>(x)`; `__to<"T">(x)` (foreign type, kept verbatim); and the
    bare `__to(x)`, which converts to the type of the assignment's target."""
    target: Optional[TypeRef]
    foreign: Optional[str]
    value: Expr


# --------------------------------------------------------------- statements

@dataclass(kw_only=True, eq=False)
class Block(Stmt):
    stmts: list[Stmt]


@dataclass(kw_only=True, eq=False)
class Attribute(Node):
    """`[[launch_bounds(_, 1)]]`, `[[maxnreg(40)]]`, `[[schedule(k_tiles(...))]]`."""
    name: str
    args: list[Expr]


@dataclass(kw_only=True, eq=False)
class ExprStmt(Stmt):
    expr: Expr


@dataclass(kw_only=True, eq=False)
class Assign(Stmt):
    """`x = e`, `a.at(i) += e`.  Whether `x = e` declares `x` is for the
    semantic analyser to decide (Choreo declares on first assignment)."""
    target: Expr
    op: str                    # "=", "+=", "-=", "*=", "/=", "%="
    value: Expr


@dataclass(kw_only=True, eq=False)
class MdSpanDecl(Stmt):
    """`sp : [a, b]`, `mdspan sp : ...`, `mdspan<2> sp : ...`."""
    name: str
    rank: Optional[int]
    value: Expr


@dataclass(kw_only=True, eq=False)
class ITupleDecl(Stmt):
    """`ituple t = {...}`, `ituple<3> t = ...`."""
    name: str
    rank: Optional[int]
    value: Expr


@dataclass(kw_only=True, eq=False)
class ScalarDecl(Stmt):
    """`int a = 1`, `mutable u32 k = 0`, `mutable n = 3` (type inferred)."""
    name: str
    type: Optional[TypeRef]
    init: Optional[Expr]
    mutable: bool = False
    storage: Optional[str] = None


@dataclass(kw_only=True, eq=False)
class BufferDecl(Stmt):
    """`shared bf16[BLOCK_N, DIM] k_buf[K_STAGES] {0};`"""
    name: str
    type: MdSpanType
    storage: Optional[str]
    array_dims: list[Expr]
    init: Optional[Expr] = None


@dataclass(kw_only=True, eq=False)
class FragDecl(Stmt):
    """Register fragments: `frag f32[WG_M] m {-inf};` (typed), or the
    accumulator forms `frag acc {0}` / `frag.f32 acc {0.0f}` whose shape comes
    from the MMA that uses them (then `type` is None)."""
    name: str
    type: Optional[MdSpanType]
    elem: Optional[TypeRef]
    array_dims: list[Expr]
    init: Optional[Expr] = None
    level: Optional[str] = None  # `: block`: the block's tile (an MMA operand roles share)
    host: Optional[str] = None   # `: block in s`: laid over the columns of block accumulator s
    host_loc: Optional[Loc] = None


@dataclass(kw_only=True, eq=False)
class EventDecl(Stmt):
    """`shared event e[N] = ready;`"""
    name: str
    storage: Optional[str]
    array_dims: list[Expr]
    ready: bool = False
    thread_count: Optional[Expr] = None   # `event<N>`


@dataclass(kw_only=True, eq=False)
class ParallelLevel(Node):
    """One `p by N : level` of a parallel-by (several are separated by ',').

    `var` is None for `parallel by N` and `parallel {a, b} by [...]`;
    `elements` are the names inside braces.
    """
    var: Optional[str]
    elements: list[str]
    bounds: list[Expr]
    bracketed: bool            # bounds written as `[...]` after braces
    level: Optional[str] = None          # block, group-4, group, thread, device...
    device_target: Optional[str] = None  # `: device(cpu)`
    cooperative: bool = False            # `: block<cooperative>`


@dataclass(kw_only=True, eq=False)
class ParallelBy(Stmt):
    levels: list[ParallelLevel]
    is_async: bool
    stream: Optional[str]
    attributes: list[Attribute]
    body: Block


@dataclass(kw_only=True, eq=False)
class InThreads(Stmt):
    cond: Expr
    is_async: bool
    body: Block


@dataclass(kw_only=True, eq=False)
class WithBinding(Node):
    """`x in [8]`, `index = {x, y} in sp`, `{x, y} in a.span`."""
    name: Optional[str]
    elements: list[str]
    domain: Expr
    element_locs: list = field(default_factory=list)   # where each of `elements` is written


@dataclass(kw_only=True, eq=False)
class WhereBind(Node):
    lhs: str
    rhs: str


@dataclass(kw_only=True, eq=False)
class With(Stmt):
    bindings: list[WithBinding]
    where: list[WhereBind]
    body: Block


@dataclass(kw_only=True, eq=False)
class LoopRange(Node):
    """`foreach i`, `foreach i(1:-1:2)`, `foreach c = i(1:)`.

    `var` names the loop variable in the body, `bound` the bounded variable
    iterated over (the same name unless written `c = i`)."""
    var: str
    bound: str
    lower: Optional[Expr] = None
    upper: Optional[Expr] = None
    step: Optional[Expr] = None
    sliced: bool = False       # a `(lo:hi[:step])` part was written


@dataclass(kw_only=True, eq=False)
class LoopAttr(Node):
    """`: unroll`, `: unroll(4)`, `: vectorize(x, 4)` after a foreach."""
    name: str
    args: list[Expr]


@dataclass(kw_only=True, eq=False)
class Foreach(Stmt):
    """`foreach i, j {}` iterates bounded variables (`ranges`); the sugar
    `foreach i in [n] {}` declares them as well (`bindings`)."""
    ranges: list[LoopRange]
    bindings: list[WithBinding]
    attrs: list[LoopAttr]
    body: Block


@dataclass(kw_only=True, eq=False)
class Apply(Stmt):
    """`apply {i, j} in acc.span { ... }`: element-wise over a fragment."""
    indices: list[str]
    domain: Expr
    body: Block
    exp2_split: Optional[float] = None         # [[exp2_split(f)]]


@dataclass(kw_only=True, eq=False)
class If(Stmt):
    cond: Expr
    then: Block
    orelse: Optional[Block] = None


@dataclass(kw_only=True, eq=False)
class While(Stmt):
    cond: Expr
    body: Block


@dataclass(kw_only=True, eq=False)
class Return(Stmt):
    value: Optional[Expr] = None


@dataclass(kw_only=True, eq=False)
class Break(Stmt):
    pass


@dataclass(kw_only=True, eq=False)
class Continue(Stmt):
    pass


@dataclass(kw_only=True, eq=False)
class Yield(Stmt):
    pass


@dataclass(kw_only=True, eq=False)
class Wait(Stmt):
    """`wait f, g;`, `wait e.at(order);`"""
    targets: list[Expr]


@dataclass(kw_only=True, eq=False)
class Trigger(Stmt):
    """`trigger e;`, `trigger e.at(k++) after f;`, `trigger.cluster e;`"""
    targets: list[Expr]
    after: list[Expr]
    scope: Optional[str] = None


@dataclass(kw_only=True, eq=False)
class Swap(Stmt):
    """`swap(a, b)` / `rotate(a, b, c)`: exchange futures or buffers."""
    names: list[str]
    rotate: bool = False


@dataclass(kw_only=True, eq=False)
class Sync(Stmt):
    """`sync.shared`, `sync.global`, `sync.barrier : block`,
    `sync.fence : block <shared>`."""
    kind: str
    level: Optional[str] = None
    space: Optional[str] = None


# --------------------------------------------------------------- data movement

@dataclass(kw_only=True, eq=False)
class StorageTarget(Expr):
    """`=> local`: the destination is a fresh buffer in that storage."""
    storage: str


@dataclass(kw_only=True, eq=False)
class BufferMap(Stmt):
    """`m = src.map<local>(offset, size);` maps part of a dense buffer into
    `storage`; `.remap` re-points an existing mapping of the same source."""
    target: str
    source: Expr
    storage: str
    offset: Expr
    size: Expr
    remap: bool = False


@dataclass(kw_only=True, eq=False)
class PadConfig(Node):
    """`dma.pad<{low}, {high}, {mid}, value>`."""
    low: list[Expr]
    high: list[Expr]
    mid: list[Expr]
    value: Expr


@dataclass(kw_only=True, eq=False)
class DmaOp(Stmt):
    """`f = dma.copy.async src => dst after g;`, `tma.load.swiz<128> ...`,
    `f = dma.any;` (a placeholder future, without src and dst).

    `swizzle` is the byte width of an explicit `.swiz<N>`, "auto" for a bare
    `.swiz` (the swizzle that fits the tile's rows), None without one.
    """
    engine: str                # "dma" | "tma"
    operation: str             # "copy" | "load" | "pad" | "transp" | "any"
    future: Optional[str]
    src: Optional[Expr]
    dst: Optional[Expr]
    is_async: bool = False
    after: list[Expr] = field(default_factory=list)
    swizzle: Union[int, str, None] = None
    sparse: Optional[tuple[int, int]] = None   # `.sp<2:4>`; (2, 4) for a bare `.sp`
    evict: Optional[str] = None                # "evict_first" | "evict_last"
    zfill: bool = False
    multicast: bool = False
    promote: Optional[int] = None
    pad: Optional[PadConfig] = None
    transpose: Optional[list[int]] = None
    #: `tma.copy.rows<n> tile => global`: only the box's first n rows (a run-time count)
    rows: Optional[Expr] = None
    #: modifiers in the order written, with their locations (for checks)
    modifiers: list["Modifier"] = field(default_factory=list, repr=False)


@dataclass(kw_only=True, eq=False)
class Modifier(Node):
    """One `.name<args>` of a DMA/TMA/MMA statement, as written."""
    name: str
    args: list[Expr]


@dataclass(kw_only=True, eq=False)
class MmaFill(Stmt):
    """`acc = mma.fill.f32 0.0f;` (declares `acc`) or `mma.fill acc, 0;`;
    `acc = mma.fill.f32 0.0f : block;` declares the block's accumulator (`level`)."""
    target: Expr
    value: Expr
    elem: Optional[TypeRef] = None
    declares: bool = True
    level: Optional[str] = None


@dataclass(kw_only=True, eq=False)
class MmaLoad(Stmt):
    """`a = mma.load[.frag][.swiz<N>][.async] src;` (declares `a`), or
    `mma.load src, a;` (loads into the existing fragment `a`)."""
    target: Optional[Expr]
    source: Expr
    is_async: bool = False
    swizzle: Union[int, str, None] = None
    declares: bool = True


@dataclass(kw_only=True, eq=False)
class MmaOp(Stmt):
    """`mma.row.col acc, a, b;`, `f = mma.row.row.async acc, a, b;`,
    sparse `mma.row.col.sp acc, a, b, meta;`, scaled `mma.row.col.scale ...`."""
    layout: str                # "row.row" | "row.col" | "col.row" | "col.col"
    acc: Expr
    a: Expr
    b: Expr
    is_async: bool = False
    future: Optional[str] = None
    sparse: bool = False
    metadata: Optional[Expr] = None
    scale: list[Expr] = field(default_factory=list)
    issue_order: Optional[list[int]] = None    # [[schedule(k_tiles(...))]]


@dataclass(kw_only=True, eq=False)
class MmaStore(Stmt):
    """`mma.store[.async|.transp|.mask|.direct] acc, dst[, rows[, cols]];`"""
    source: Expr
    dst: Expr
    is_async: bool = False
    transposed: bool = False
    direct: bool = False       # `.direct`: each thread's elements straight to global memory
    mask: list[Expr] = field(default_factory=list)


@dataclass(kw_only=True, eq=False)
class MmaScale(Stmt):
    """`mma.scale acc, scales, value;`"""
    acc: Expr
    scales: Expr
    value: Expr


# --------------------------------------------------------------- escapes

@dataclass(kw_only=True, eq=False)
class AsmOperand(Node):
    constraint: str
    expr: Expr
    symbolic_name: Optional[str] = None


@dataclass(kw_only=True, eq=False)
class AsmStmt(Stmt):
    template: str
    volatile: bool
    outputs: list[AsmOperand]
    inputs: list[AsmOperand]
    clobbers: list[str]


@dataclass(kw_only=True, eq=False)
class InlineCpp(Stmt):
    """`__cpp__("...")`: target code pasted verbatim."""
    code: str


@dataclass(kw_only=True, eq=False)
class IntrinsicDirective(Stmt):
    """`#pragma croq intrinsic prefix p_` / `namespace ns` (scoped)."""
    kind: str                  # "prefix" | "namespace"
    value: str


@dataclass(kw_only=True, eq=False)
class Pragma(Stmt):
    """Any other `#pragma` line inside a Choreo function (kept, not interpreted)."""
    text: str


# --------------------------------------------------------------- traversal

_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def _field_names(cls: type) -> tuple[str, ...]:
    """The field names of a node class, computed once: `dataclasses.fields` rebuilds its
    tuple on every call, and the walks of a 10,000-statement kernel call it 600k times."""
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = tuple(f.name for f in fields(cls))
    return names


def child_nodes(node: Node) -> Iterator[Node]:
    """The direct children of `node`, in field order."""
    for name in _field_names(type(node)):
        value = getattr(node, name)
        if isinstance(value, Node):
            yield value
        elif isinstance(value, list):
            for item in value:
                if isinstance(item, Node):
                    yield item


def walk(node: Node) -> Iterator[Node]:
    """All nodes under `node` (itself included), pre-order, without recursion."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed(list(child_nodes(current))))


# --------------------------------------------------------------- signatures

def declared_result(fn: FunctionDef):
    """The return type a function promises a value of, as written ('int', 'f16 [1, 2]'),
    or None: `void`, and `auto`, which takes what the function returns (or nothing)."""
    rt = fn.return_type
    if isinstance(rt, TypeRef):
        return None if rt.name in ("void", "auto") else rt.spelling
    if isinstance(rt, MdSpanType):
        if not rt.dims:
            return f"{rt.elem.spelling} mdspan<{rt.rank}>"
        dims = [getattr(d, "text", None) or getattr(d, "id", None) or getattr(d, "kind", "…")
                for d in rt.dims]
        return f"{rt.elem.spelling} [{', '.join(str(d) for d in dims)}]"
    return None
