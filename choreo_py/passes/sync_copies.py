"""Synchronous copies into shared memory in an MMA kernel become TMA loads on an event.

(`dma.copy` and the synchronous `tma.copy` alike.)

`lhs_s = dma.copy.swiz<128> lhs.chunkat(m, k) => shared;` at block level, in a
kernel whose tiles feed MMAs, means: the tile is in shared memory, in the named
swizzle, for every thread, at the next statement. The MMA lowering moves tiles
into shared memory with TMA and publishes them on mbarriers, so the copy is
rewritten into that form, which the lowering, the interpreter and the pipeline
check already know:

    role.sync                                  (the block's earlier reads of the tiles are done)
    __copy0 = tma.load src => dst;  ...        (each run of adjacent copies: one group)
    trigger __copied.at(__copies) after __copy0, ...;
    wait __copied.at(__copies);
    __copies = __copies + 1;

with one event `__copied` and one counter `__copies` (its generation) per
kernel. A synchronous `dma.copy tile_s => out.subspan(...)` from a shared
buffer into a global tensor, of the same static shape, is a synchronous TMA
store (`tma.copy tile_s => ...`), which the lowering issues from one thread and
waits for, after the threads' writes of the tile are fenced for the TMA engine.
Only copies the TMA can make are rewritten: from a global tensor into a
whole shared buffer view of the same static shape, without transpose or
padding, at block level (outside parallel regions and roles, where one issuing
thread stands for the block, or inside the kernel's only region when it has one
instance and no roles: its threads are the block's). The others stay as they are
(and are refused by name by a backend that cannot lower them). Thread kernels (no MMA, no event; TMA
copies alone, `ir.is_thread_kernel`) keep their copies: they are lowered as
cooperative loads there.

The synchronous loads left (a copy that several instances of a region make
together, issued once by their leader, `tma.load [leader]` between two
`role.sync`s, or one inside a role) keep their form; each gets a slot of the
event `__tma_sync` (one arrival per generation) that the lowering arms, the
load completes and the issuing threads wait on before the next statement
(lowering/core/roles.py). The interpreter does not look at the event.

A copy that names no swizzle into a tile that only MMAs read (no element access,
no other copy observes its layout) gets the widest swizzle that divides its
rows: the MMA units read shared tiles through swizzled descriptors here, and no
statement of the program can tell the layout apart.
"""
from __future__ import annotations

from .. import ir
from ..ir.sync_slots import SYNC_EVENT, sync_loads

EVENT = "__copied"
COUNTER = "__copies"
_MMA_KINDS = (ir.Mma, ir.MmaFill, ir.MmaStore, ir.FragDecl, ir.TmaLoad, ir.TmaStore)


def run(kernel: ir.Kernel, target=None) -> None:
    if ir.is_thread_kernel(kernel) or not (kernel.events or kernel.frags
                                           or any(isinstance(s, _MMA_KINDS) for s in ir.walk(kernel.body))):
        return
    if any(ev.name == EVENT for ev in kernel.events) or COUNTER in _names(kernel):
        return  # (a program's own names: leave its copies alone)
    names = iter(f"__copy{i}" for i in range(1 << 30))
    free = _mma_only(kernel)
    body, changed = _rewrite(kernel, kernel.body, names, free)
    _sync_event(kernel, body)
    if not changed:
        return
    kernel.body = body
    if not any(isinstance(s, ir.Trigger) and s.event.event == EVENT for s in ir.walk(body)):
        return  # only stores: no event, no counter
    kernel.events.append(ir.Event(EVENT, None, loc=kernel.loc))
    kernel.body = [ir.Var(COUNTER, "u32", ir.Const(0, "u32"), loc=kernel.loc)] + body


def _sync_event(kernel: ir.Kernel, body: list) -> None:
    n = len(sync_loads(body))
    if n and not any(ev.name == SYNC_EVENT for ev in kernel.events):
        kernel.events.append(ir.Event(SYNC_EVENT, n if n > 1 else None, loc=kernel.loc,
                                      arrivals=1))


def _names(kernel: ir.Kernel) -> set:
    return {getattr(s, "name", None) for s in ir.walk(kernel.body)}


def _tma_store(kernel: ir.Kernel, s: ir.Stmt) -> bool:
    """A synchronous dma.copy of a shared tile into a global tensor, of one static shape."""
    if not isinstance(s, ir.DmaCopy) or s.future is not None or s.transpose or s.pad:
        return False
    src, dst = kernel.buffer(s.src.base), kernel.buffer(s.dst.base)
    if src is None or src.storage != "shared" or dst is not None:
        return False
    return _static_shape(s.src) is not None and _static_shape(s.src) == _static_shape(s.dst)


def _static_shape(v: ir.View):
    shape = tuple(e.value if isinstance(e, ir.Const) else None for e in v.shape)
    return None if None in shape else shape


def _tma_copy(kernel: ir.Kernel, s: ir.Stmt) -> bool:
    if isinstance(s, ir.TmaLoad):  # `tma.copy src => dst;`: synchronous as well
        if s.future is not None or s.leader_only:
            return False
    elif not isinstance(s, ir.DmaCopy) or s.future is not None or s.transpose or s.pad:
        return False
    if kernel.buffer(s.src.base) is not None or kernel.buffer(s.dst.base) is None:
        return False
    if kernel.buffer(s.dst.base).storage != "shared":
        return False
    shapes = [tuple(e.value if isinstance(e, ir.Const) else None for e in v.shape)
              for v in (s.src, s.dst)]
    return None not in shapes[0] and shapes[0] == shapes[1]


def _mma_only(kernel: ir.Kernel) -> set[str]:
    """Buffers read by MMAs only and written by copies that name no swizzle."""
    operands, observed = set(), set()
    for s in ir.walk(kernel.body):
        if isinstance(s, ir.Mma):
            operands |= {v.base for v in (s.a, s.b) if isinstance(v, ir.View)}
        elif isinstance(s, ir.DmaCopy) and s.swizzle is None and s.future is None \
                and not (s.transpose or s.pad):
            observed.add(s.src.base)
        else:
            observed |= _views_of(s)
    return operands - observed


def _views_of(s) -> set[str]:
    """The bases of every view and element access a statement (not its body) names."""
    out = set()
    for value in vars(s).values():
        for v in value if isinstance(value, (list, tuple)) else [value]:
            if isinstance(v, ir.View):
                out.add(v.base)
            elif isinstance(v, ir.Expr):
                out |= {x.view.base for x in ir.expr_walk(v) if isinstance(x, ir.BufElem)}
    return out


def _swizzle(kernel: ir.Kernel, c: ir.DmaCopy, free: set[str]):
    if c.swizzle is not None or c.dst.base not in free:
        return c.swizzle
    b = kernel.buffer(c.dst.base)
    row_bytes = b.shape[-1] * ir.dtype_bytes(b.dtype) if len(b.shape) == 2 else 0
    return next((w for w in (128, 64, 32) if row_bytes and row_bytes % w == 0), None)


def _rewrite(kernel: ir.Kernel, stmts: list, names, free) -> tuple[list, bool]:
    out, changed, i = [], False, 0
    while i < len(stmts):
        s = stmts[i]
        if _tma_store(kernel, s):
            out.append(ir.TmaStore(s.src, s.dst, loc=s.loc, leader_only=s.leader_only))
            changed = True
            i += 1
            continue
        if _tma_copy(kernel, s):
            run = []
            while i < len(stmts) and _tma_copy(kernel, stmts[i]):
                run.append(stmts[i])
                i += 1
            out += _group(run, names, [_swizzle(kernel, c, free) for c in run])
            changed = True
            continue
        for attr in ("body", "then", "orelse"):
            sub = getattr(s, attr, None)
            inside = not isinstance(s, (ir.Parallel, ir.Role)) or _the_block(kernel, s)
            if isinstance(sub, list) and inside:
                new, ch = _rewrite(kernel, sub, names, free)
                if ch:
                    setattr(s, attr, new)
                    changed = True
        out.append(s)
        i += 1
    return out, changed


def _the_block(kernel: ir.Kernel, s) -> bool:
    """A kernel's only parallel region, of one instance and without roles: its threads are
    the block's (passes/one_region.py makes it the whole kernel), so a copy in it is a copy
    at block level."""
    if not isinstance(s, ir.Parallel) or s.extent != 1:
        return False
    if any(isinstance(x, ir.Role) for x in s.body):
        return False
    return [x for x in ir.walk(kernel.body) if isinstance(x, ir.Parallel)] == [s]


def _group(copies: list, names, swizzles: list) -> list:
    loc = copies[0].loc
    order = ir.Sym(COUNTER, "u32")
    loads = [ir.TmaLoad(c.src, c.dst, next(names), swizzle=swz, loc=c.loc,
                        evict=getattr(c, "evict", None)) for c, swz in zip(copies, swizzles)]
    ev = ir.EventRef(EVENT, order=order)
    return [ir.RoleSync(loc=loc), *loads,
            ir.Trigger(ev, [x.future for x in loads], loc=loc),
            ir.Wait([ir.EventRef(EVENT, order=order)], loc=loc),
            ir.Assign(COUNTER, ir.Bin("+", order, ir.Const(1, "u32"), "u32"), loc=loc)]
