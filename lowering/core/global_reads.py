"""Elements of global tensors read by the scalar and fragment code of an MMA kernel.

An MMA kernel reaches its tensors through TMA descriptors; a program that reads
single elements as well (a persistent kernel's tile schedule `schedule.at(t)`, a
per-row bias inside an `apply` over an accumulator) needs the tensor's address:
it becomes a kernel parameter of its own (`ptr_<tensor>`, PARAMS kind "ptr",
after the dimensions), loaded once in the prologue and converted to a global
address there. Each read is one `ld.global` per thread at the element's
address (row-major over the shape the function declares), widened to its
register type as in thread kernels (threads.py).

A tensor the kernel also writes is read this way only when every write of it is a
TMA store (`mma.store` to a global tile becomes one) of the one role instance
that reads it, and each block reads and writes a slice of its own (a dimension
the read indexes by a grid variable, where every store's tile is the one slice of
that variable: `State.at(bh, dv, dk)` beside stores into `State<bh, 0+:64, 0+:64>`): its issuing thread waits for the store's writes, fences them
toward the generic proxy (memory.tma_store) and the instance's threads meet
(roles.tma_store) before any of them reads on (gdn_recurrence.co: a state
stored at the end of each chunk and read at the start of the next). Another
write (by other threads, other instances, or through other paths) goes through
another proxy or another thread, and nothing here orders the read after it.

An unswizzled shared buffer's element outside `apply` (`g_last = g_s.at(63)`, a
vector a TMA load filled) is one `ld.shared` at its row-major address; the
program's events order it after the load that wrote it (the wait on the load's
event makes its data visible), and the read marks the role's shared memory read,
so its threads meet before one of them lets a copy overwrite it.
"""
from __future__ import annotations

import dataclasses

from choreo_py import ir

from .threads import Places
from .writer import V
from .names import ptr_param


def load(lw, x, e: ir.BufElem, loc) -> V:
    """The value of `e` (a global element) with its indices lowered by `x`."""
    root = lw.k.root(e.view.base)
    b = lw.k.buffer(root)
    if b is not None and b.storage == "shared" and not b.swizzle:
        lw.smem_read = True  # a copy one thread issues next may overwrite it
        return Places.of_mma_kernel(lw).load(e.view, e.index, e.dtype, loc, expr=x,
                                             at=e.loc or loc)
    if lw.k.param(root) is None:
        raise lw.refuse(f"reading an element of the {_storage(lw, root)} buffer '{root}' "
                        "in an MMA kernel", loc)
    if root in _written(lw) and not (_stored_by_this_instance(lw, root)
                                     and _blocks_apart(lw, root, e)):
        raise lw.refuse(f"reading elements of '{root}', which this kernel also writes", loc)
    places = Places.of_mma_kernel(lw)
    places.pointers.setdefault(root, pointer(lw, root))
    return places.load(e.view, e.index, e.dtype, loc, expr=x, at=e.loc or loc)


def params(lw) -> list[str]:
    """Tensors read by element, in the order their parameters follow the dimensions."""
    return sorted(lw.global_pointers)


def pointer(lw, name: str) -> V:
    """The global address of tensor `name` (a kernel parameter of its own, loaded once)."""
    ptrs = lw.global_pointers
    if name not in ptrs:
        w = lw.w
        with w.into(lw.prologue_mark):
            raw = w.reg("u64", f"{name}_ptr")
            w.call("ptx.param", "u64", f'"{ptr_param(name)}"', f"dst={raw.text}")
            g = w.reg("u64", f"{name}_g")
            w.op("cvta.to.global.u64", g, raw)
        ptrs[name] = g
    return ptrs[name]


def _stored_by_this_instance(lw, root: str) -> bool:
    """Whether every write of `root` is a TMA store of the role instance lowered now, the
    only instance of its role (see the module docstring)."""
    role = lw.role
    if role is None or len(role.members) != 1:
        return False
    stores = _stores(lw.k.body, None)
    if any(lw.k.root(s.dst.base) == root and members != role.members
           for s, members in stores):
        return False
    ours = {id(s) for s, _ in stores}
    return not any(id(s) not in ours and lw.k.root(getattr(s, f.name).base) == root
                   for s in ir.walk(lw.k.body) for f in dataclasses.fields(s)
                   if _writes(s, f.name) and isinstance(getattr(s, f.name), ir.View))


def _blocks_apart(lw, root: str, e: ir.BufElem) -> bool:
    """Whether the read and every TMA store of `root` stay in the slice of one block: in some
    dimension the read's position is a grid variable and each store's tile is one element
    wide at that variable (see the module docstring)."""
    grid = {g.var for g in lw.k.grid}
    it = iter(e.index)
    pos = [_plus(off, next(it)) if keep else off for off, keep in zip(e.view.offsets,
                                                                        e.view.keep)]
    stores = [s for s, _ in _stores(lw.k.body, None) if lw.k.root(s.dst.base) == root]
    if e.view.base != root or any(s.dst.base != root for s in stores):
        return False  # (an alias's dimensions are not the tensor's)
    for d, p in enumerate(pos):
        if isinstance(p, ir.Sym) and p.name in grid and all(
                _at(s.dst.offsets[d], p.name) and _const(s.dst.extents[d]) == 1
                for s in stores):
            return True
    return False


def _plus(a: ir.Expr, b: ir.Expr) -> ir.Expr:
    return b if _const(a) == 0 else a if _const(b) == 0 else ir.Bin("+", a, b, "s32")


def _at(e: ir.Expr, name: str) -> bool:
    return isinstance(e, ir.Sym) and e.name == name


def _const(e: ir.Expr):
    return e.value if isinstance(e, ir.Const) else None


def _stores(stmts, members) -> list:
    """(TMA store, the instances that run it: those of the role around it, else of the
    parallel region) of every TMA store in `stmts`."""
    out = []
    for s in stmts:
        if isinstance(s, ir.TmaStore):
            out.append((s, members))
        inner = tuple(s.members) if isinstance(s, ir.Role) else \
            tuple(range(s.extent)) if isinstance(s, ir.Parallel) else members
        for block in ir.child_blocks(s):
            out += _stores(block, inner)
    return out


def _writes(s, field: str) -> bool:
    return field.startswith("dst") or (isinstance(s, ir.BufStore) and field == "view")


def _storage(lw, name: str) -> str:
    b = lw.k.buffer(name)
    return b.storage if b is not None else "unknown"


def _written(lw) -> set:
    """Roots of the views any statement of the kernel writes (a `dst`, a BufStore's view)."""
    memo = lw.written_roots
    if memo is None:
        memo = set()
        for s in ir.walk(lw.k.body):
            for f in dataclasses.fields(s):
                v = getattr(s, f.name)
                if _writes(s, f.name) and isinstance(v, ir.View):
                    memo.add(lw.k.root(v.base))
        lw.written_roots = memo
    return memo
