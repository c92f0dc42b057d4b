"""`parallel {c} by [n] : cluster { parallel {x, y} by [...] : block { ... } }`: block clusters.

A cluster level groups the blocks of the grid that its one `: block` region
launches: n consecutive blocks along the grid's first dimension form a
cluster (the hardware's thread-block cluster of n x 1 x 1 blocks), and `c` is
a block's rank in its cluster, `x % n`. The grid is the block level's, so its
first extent must be a multiple of n (a cluster launch of another grid is
invalid): checked here when it is a number, at the function's entry (an
assert on the sizes) otherwise.

What the cluster changes in the blocks' code:

- `tma.copy.multicast src => dst`: one block of the cluster loads the tile
  and the copy lands in every block's `dst`. The tile the program names must
  then be the same for every block of the cluster: its coordinates may not
  depend on the cluster rank or on the grid's first index (which tell the
  blocks of a cluster apart); such a copy is refused by name. The tile IR
  holds it as the load each block makes of that same tile (the same bytes in
  the same buffer, so the same values): the backends issue those loads per
  block, not as one multicast.
- `trigger.cluster e`: the program's consumers release a buffer to every
  block's producer, which a multicast into that buffer needs. With each
  block loading its own tiles, only the block's own producer writes its
  buffers, so the release is the block's own `trigger e`.

Several cluster dimensions, code in the cluster region around its block
region, and a cluster of more than 8 blocks (the portable limit) are refused
by name.
"""
from __future__ import annotations

from ..frontend import ast as A
from .. import ir
from ..diagnostics import ChoreoError
from ..ir import build as B
from .exprs import err
from .values import Scalar, Unsupported

MAX_CLUSTER = 8  # blocks in a portable cluster


class ClusterBuilder:
    """Mixed into the kernel builder: the cluster level of the kernel being built."""

    #: (rank variable or None, blocks per cluster, location) while a cluster's kernel is built
    cluster: tuple | None = None

    def cluster_launch(self, s: A.ParallelBy, host: list) -> None:
        lvl = s.levels[0]
        if len(s.levels) != 1:
            raise Unsupported("levels after ': cluster' in the same 'parallel' statement",
                              s.levels[1].loc)
        bounds = self._bounds(lvl)
        names = lvl.elements or ([lvl.var] if lvl.var else [])
        if len(bounds) != 1 or len(names) > 1:
            raise Unsupported("a cluster of more than one dimension", lvl.loc)
        size = B.as_int(bounds[0])
        if size is None:
            raise err("the number of blocks in a cluster must be a compile-time integer", lvl)
        if size > MAX_CLUSTER:
            raise Unsupported(f"a cluster of {size} blocks (more than {MAX_CLUSTER})", lvl.loc)
        stmts = s.body.stmts
        if len(stmts) != 1 or not isinstance(stmts[0], A.ParallelBy) \
                or stmts[0].levels[0].level != "block":
            where = stmts[0].loc if stmts else s.loc
            raise Unsupported("a ': cluster' region whose body is not one ': block' region", where)
        self.cluster = (names[0] if names else None, size, lvl.loc)
        outer = self.scope
        self.scope = outer.child()  # the rank, seen by the kernel (a child of this scope)
        try:
            self._bind_rank(stmts[0])
            self.launch(stmts[0], host)
        finally:
            self.cluster, self.scope = None, outer

    def _bind_rank(self, blocks: A.ParallelBy) -> None:
        """The rank variable, `x % n` of the block level's first variable x; the block
        level's first extent must be a multiple of n."""
        name, size, loc = self.cluster
        lvl = blocks.levels[0]
        bounds = self._bounds(lvl)
        first = (lvl.elements or ([lvl.var] if lvl.var else ["_b0"]))[0]
        n = B.as_int(bounds[0])
        if n is not None and n % size:
            raise ChoreoError(f"a cluster of {size} blocks needs a grid whose first dimension "
                              f"is a multiple of {size}; this one has {n} blocks", loc)
        if n is None:
            cond = B.binop("==", B.binop("%", bounds[0], B.const(size)), B.const(0))
            self.entry_asserts.append(ir.Assert(
                cond, f"a cluster of {size} blocks needs a grid whose first dimension is a "
                f"multiple of {size}", loc=loc))
        if name is not None:
            rank = B.binop("%", ir.Sym(first, "s32"), B.const(size))
            self.scope.bind(name, Scalar(rank, bound=B.const(size), kind="index"))

    def cluster_varying(self) -> set[str]:
        """Names whose value differs between the blocks of a cluster."""
        if self.cluster is None or not self.kernel.grid:
            return set()
        return {self.kernel.grid[0].var}

    def multicast_source(self, s: A.DmaOp, src) -> None:
        """A multicast copy: allowed in a cluster, of a tile every block of it names alike."""
        if s.engine != "tma" or s.operation != "copy":
            raise Unsupported(f"'{s.engine}.{s.operation}.multicast'", s.loc)
        if self.cluster is None:
            raise Unsupported("'tma.copy.multicast' outside a ': cluster' region", s.loc)
        v = src.view
        if self._storage(v) != "global":  # (a multicast lands a global tile in the blocks)
            raise Unsupported(f"'tma.copy.multicast' from {self._storage(v)} memory", s.loc)
        varying = self.cluster_varying()
        for e in (*v.offsets, *v.extents, *((v.slot,) if v.slot is not None else ())):
            for n in sorted(ir.sym_names(e)):
                known = self.scope.lookup(n)
                if n in varying or getattr(known, "kind", "index") not in ("index", "dim", "const"):
                    raise Unsupported(f"a multicast copy whose tile depends on '{n}' (the blocks "
                                      "of a cluster would name different tiles)", s.loc)
