"""Host statements that only a kernel's statement forms express, gathered into one region.

The reference's model (co-mock) runs host code as it runs a kernel's: a host
`f = dma.copy.async a => b;` followed by `wait f;`, a copy into a fresh
buffer (`=> local`), a tiled copy (`a.chunkat(i)`), placeholder futures (`dma.any`)
and `swap` / `rotate` of futures, an MMA on host tiles.
The host program here runs launches, scalars and whole-tensor copies only
(host/execute.py); everything else runs in a region of one instance that the
host runs (`device cpu`: sema/host_code.py, host_data_region), where the
kernel builders give those statements their meaning.

A future is a name of the statement that starts the copy, read by a later
`wait` or `f.data`: so the region starting at such a statement extends to
the last later statement that reads a name declared in it, or that itself
needs a region, over statements between that declare nothing (a print of a
host variable, say); a scalar declaration between that reads nothing of the
region is declared before it. A statement the host must run (a launch, a buffer or
event declaration, a `return`, an assert on the sizes, a call of a `__co__`
function), or one that declares
a name the region does not read, ends it. The host variables the region
assigns are written back when it ends (sema/host_copies.py).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..frontend import ast as A
from .host import nested_parallels
from .values import declared_names

#: Statements on the host that only a region of the host expresses.
_MMA = (A.MmaFill, A.MmaLoad, A.MmaOp, A.MmaStore)


@dataclass(kw_only=True, eq=False)
class HostRegion(A.Block):
    """Consecutive host statements run as one region of the host (its `stmts`);
    `region_names`: the names they declare (which a refused region leaves opaque)."""
    region_names: list[str] = field(default_factory=list)


def plain_host_copy(s: A.DmaOp) -> bool:
    """`dma.copy a => b;` of two named tensors: a copy the host program runs itself."""
    return (s.operation == "copy" and not s.is_async and not s.future
            and isinstance(s.src, A.Name) and isinstance(s.dst, A.Name))


def starts_region(s: A.Stmt) -> bool:
    """A host DMA other than a plain copy (`dma.any` too), a `wait`, a `swap` / `rotate`,
    an MMA statement."""
    if isinstance(s, A.DmaOp):
        return not plain_host_copy(s)
    return isinstance(s, (A.Wait, A.Swap) + _MMA)


def _joinable(s: A.Stmt) -> bool:
    return not isinstance(s, (A.ParallelBy, A.BufferDecl, A.EventDecl, A.Return)) and \
        not nested_parallels([s]) and not _is_assert(s)


def _is_assert(s: A.Stmt) -> bool:
    return isinstance(s, A.ExprStmt) and isinstance(s.expr, A.CallExpr) and \
        s.expr.func == "assert"


def _declares(s: A.Stmt) -> set[str]:
    """The names `s` declares in the scope it is in (not those of its own blocks)."""
    return set(declared_names(s))


def _reads(s: A.Stmt) -> set[str]:
    return {x.id for x in A.walk(s) if isinstance(x, A.Name)}


def _hoistable(s: A.Stmt, declared: set[str]) -> bool:
    """A host scalar declaration that reads nothing of the region and has no effect
    (`mutable int n = 0;`): declared before the region, so the host keeps the name."""
    return isinstance(s, A.ScalarDecl) and not (_reads(s) & declared) and not any(
        isinstance(x, (A.Unary, A.CallExpr, A.Call)) and (not isinstance(x, A.Unary) or
                                                          "++" in x.op or "--" in x.op)
        for x in A.walk(s))


def _region(stmts: list[A.Stmt], i: int, calls) -> tuple[int, list[int]]:
    """(the index after the last statement of the region that starts at `stmts[i]`, the
    indices of the declarations before it that are hoisted out of it)."""
    end, declared, hoisted = i + 1, _declares(stmts[i]), []
    pending: list[int] = []
    k = end
    while k < len(stmts) and _joinable(stmts[k]) and not calls(stmts[k]):
        s = stmts[k]
        if starts_region(s) or _reads(s) & declared:
            for j in pending + [k]:
                declared |= _declares(stmts[j])
            end, pending = k + 1, []
        elif _hoistable(s, declared):
            hoisted.append(k)
        elif _declares(s):
            break
        else:
            pending.append(k)
        k += 1
    return end, [j for j in hoisted if j < end]


def gather(stmts: list[A.Stmt], calls=lambda s: False) -> list[A.Stmt]:
    """`stmts` with each run that needs a host region replaced by one HostRegion (the
    scalar declarations it spans that it does not need before it). `calls(s)`: whether
    `s` calls a `__co__` function, which the host runs (a region ends before it)."""
    out: list[A.Stmt] = []
    i = 0
    while i < len(stmts):
        s = stmts[i]
        if not (_joinable(s) and starts_region(s)):
            out.append(s)
            i += 1
            continue
        end, hoisted = _region(stmts, i, calls)
        out += [stmts[j] for j in hoisted]
        body = [stmts[j] for j in range(i, end) if j not in hoisted]
        out.append(HostRegion(stmts=body, loc=s.loc,
                              region_names=sorted(set().union(*map(_declares, body)))))
        i = end
    return out
