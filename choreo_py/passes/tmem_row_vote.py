"""sm_100a: a row-guarded update of a block accumulator skips a warp's whole TMEM round trip.

FA4's conditional O correction is ordinary code: `apply {i, j} in o.span { if
(scale.at(i) != 1.0f) o.at(i, j) = o.at(i, j) * scale.at(i); }`. A reader role
loads the block's accumulator from tensor memory for such an apply and stores it
back after it (block_acc.py). tcgen05.ld/st are warp-collective (`.sync.aligned`),
so a per-thread branch cannot go around them; but in tensor memory's layouts
(32x32b, 16x32bx2) a thread holds one row, so a guard that depends on the row
alone is one predicate per thread. This pass marks such applies (`warp_vote`,
printed by `--emit ir` as `warp-vote`); the lowering then votes
(`vote.sync.any.pred`) and the warp skips the load, the arithmetic and the store
when none of its lanes takes the branch, else loads, selects per lane and stores.

Marked: an apply over a block accumulator (`mma.fill ... : block`) outside the
role that issues its MMAs, whose body is one `if` without `else`, whose
condition reads no column index and no element of a 2-D fragment (row vectors,
the row index, scalars), and whose branch stores only into block accumulators.
"""
from __future__ import annotations

from .. import ir


def run(kernel: ir.Kernel, target) -> None:
    if not target.tmem_columns:  # registers (sm_90a): the guard is a per-thread select
        return
    block = {f.name for f in kernel.frags if f.block and f.layout == "acc"}
    if not block:
        return
    for role in (s for s in ir.walk(kernel.body) if isinstance(s, ir.Role)):
        if any(isinstance(t, ir.Mma) and t.acc in block for t in ir.walk(role.body)):
            continue  # the issuing role keeps its own copies (lower_flow.py)
        for a in ir.walk(role.body):
            if isinstance(a, ir.Apply) and a.domain in block:
                a.warp_vote = row_guarded(kernel, a, block)


def row_guarded(kernel: ir.Kernel, a: ir.Apply, block: set) -> bool:
    if len(a.body) != 1 or not isinstance(a.body[0], ir.If) or len(a.indices) != 2:
        return False
    guard = a.body[0]
    if guard.orelse or not guard.then:
        return False
    stores = list(ir.walk(guard.then))
    if not all(isinstance(s, ir.ElemStore) and s.frag in block for s in stores):
        return False
    return _row_only(kernel, guard.cond, a.indices[1])


def _row_only(kernel: ir.Kernel, e: ir.Expr, col: str) -> bool:
    ranks = {f.name: len(f.shape) for f in kernel.frags}
    ranks.update((s.frag.name, len(s.frag.shape)) for s in ir.walk(kernel.body)
                 if isinstance(s, ir.FragDecl))
    for x in ir.expr_walk(e):
        if isinstance(x, ir.Sym) and x.name == col:
            return False
        if isinstance(x, ir.Elem) and ranks.get(x.frag) != 1:
            return False
    return True
