"""Register fragments and their owners: accumulators, row vectors, `apply`.

A 2-D fragment [M, N] (an MMA accumulator or a cast of one) is distributed:
each row is split among the threads that own it, as the target's lowering
loads it (`RowOwners` below reads the target's `acc_rows`, the same entry the
backend builds its registers from): on sm_90a the 4 threads of a quad,
thread t holding columns {8k + 2t, 8k + 2t + 1}; on sm_100a a 64-row
accumulator's two half-warps, one half of the row each, and a 128-row one's
single thread per row. Every element has exactly one owner, so the value is
kept as one logical [M, N] tensor.

A 1-D fragment (a row vector) has one copy per owner, kept as [owners, M].
Elementwise code runs on each copy independently; code inside a 2-D apply
that accumulates into a row vector (`s.at(i) = s.at(i) + acc.at(i, j)`)
sees only the owner's own columns, so it leaves a *partial* value in each
copy. `all_reduce_sum` combines the copies; `reduce_max`/`reduce_sum` read
all owners and give a replicated result. A program that forgets its
all-reduce therefore computes with partial sums, as the hardware would.
A uniform count (`owners=n`, `--owners`) splits every row among n threads
(runs of 2 columns, as wgmma). Fragments that are each thread's own array
(ir.per_thread_frags) have one owner.

`apply` bodies are evaluated with tensors over the whole index space. A
body that writes only fragments of the domain's rank is elementwise and
runs once over [M, N]. A body that folds into a lower-rank fragment runs
once per column position of an owner (N / owners steps, each vectorised
over rows and owners), which keeps each owner's sequential order.
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import fields
from functools import lru_cache
from typing import Union

import torch

from .. import ir, targets
from .errors import InterpError
from .scalars import round_to
from ..construct_names import describe

PAIR = 2  # adjacent columns a thread holds together (wgmma: 2 consecutive f32)


class FragState:
    """One fragment of one thread. `data` is [M, N] (2-D) or [owners, L] (1-D)."""

    def __init__(self, name: str, dtype: str, shape: tuple[int, ...],
                 owners: "Union[int, RowOwners]") -> None:
        if len(shape) not in (1, 2):
            raise InterpError(f"fragment '{name}' of rank {len(shape)}: only 1-D and 2-D are modelled")
        self.name, self.dtype, self.shape = name, dtype, tuple(shape)
        self.rank = len(shape)
        copies = RowOwners.of(owners).count(shape[0])
        self.storage = tuple(shape) if self.rank == 2 else (copies, shape[0])
        self.data = torch.full(self.storage, float("nan"))  # an uninitialised register

    def fill(self, value) -> None:
        self.data = torch.full(self.storage, float(round_to(float(value), self.dtype)))

    def set(self, value) -> None:
        """Replaces the whole value (broadcast to the storage shape, rounded to dtype)."""
        # (integers in f64: an s32 accumulator's sums are exact past 2^24)
        v = torch.as_tensor(value, dtype=torch.float32 if ir.is_float(self.dtype) else torch.float64)
        self.data = round_to(v.expand(self.storage), self.dtype).contiguous()


@lru_cache(maxsize=None)
def column_layout(n: int, owners: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(owner of each column [n], columns of each owner in order [owners, n // owners])."""
    if n % owners:
        raise InterpError(f"{n} columns cannot be split among {owners} owners")
    if n % (PAIR * owners) == 0:
        owner = (torch.arange(n) // PAIR) % owners
    else:
        owner = torch.arange(n) % owners
    cols = torch.stack([torch.nonzero(owner == t).flatten() for t in range(owners)])
    return owner, cols


@lru_cache(maxsize=None)
def split_layout(split: targets.RowSplit, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """column_layout's pair for a target's split of an N-wide row."""
    if n % (split.owners * split.run_of(n)):
        raise InterpError(f"{n} columns cannot be split among {split.owners} owners in runs of "
                          f"{split.run_of(n)} columns")
    owner = torch.tensor([split.owner(n, c) for c in range(n)])
    cols = torch.tensor([split.columns(n, t) for t in range(split.owners)])
    return owner, cols


class RowOwners:
    """The owners of each fragment row, by the fragment's row count: a target's split
    (targets.Target.acc_rows: the layout its lowering loads an accumulator in, so a
    kernel that is wrong on the target is wrong here) or `n` threads for every row."""

    def __init__(self, target: "targets.Target | None", uniform: int = 1) -> None:
        self.target, self.uniform = target, uniform

    @staticmethod
    def of(owners: "Union[int, targets.Target, RowOwners]") -> "RowOwners":
        if isinstance(owners, RowOwners):
            return owners
        if isinstance(owners, targets.Target):
            return RowOwners(owners)
        return RowOwners(None, int(owners))

    def count(self, rows: int) -> int:
        """How many threads hold a piece of each of a `rows`-row fragment's rows."""
        return self.target.row_split(rows).owners if self.target else self.uniform

    def layout(self, rows: int, n: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(owner of each column [n], columns of each owner in order [owners, n/owners])."""
        if self.target is None:
            return column_layout(n, self.uniform)
        return split_layout(self.target.row_split(rows), n)

    def __str__(self) -> str:
        """The run line's `owners=`: the count, or the target's per row count."""
        if self.target is None:
            return str(self.uniform)
        per = ", ".join(f"{s.owners} per {m} rows" for m, s in sorted(self.target.acc_rows.items()))
        return f"{per} ({self.target.name})"


# ---------------------------------------------------------------- apply


def _stores(stmts) -> list[ir.ElemStore]:
    out = []
    for s in ir.walk(stmts):
        if isinstance(s, ir.ElemStore):
            out.append(s)
    return out


class ApplyRun:
    """Evaluation of one `apply` statement for one thread."""

    def __init__(self, stmt: ir.Apply, frags: dict, owners, ev, env: dict,
                 buffers=None) -> None:
        self.stmt, self.frags, self.ev = stmt, frags, ev
        self.loc = stmt.loc
        dom = self.frag(stmt.domain)
        self.row_owners = RowOwners.of(owners)
        self.owners = self.row_owners.count(dom.shape[0])  # copies of a row vector
        if tuple(stmt.shape) != dom.shape:
            raise InterpError(f"apply over shape {list(stmt.shape)} of '{dom.name}' "
                              f"{list(dom.shape)}", self.loc)
        if len(stmt.indices) != dom.rank:
            raise InterpError(f"apply binds {len(stmt.indices)} indices over a "
                              f"{dom.rank}-D fragment", self.loc)
        self.dom = dom
        self.buffers = buffers  # (memory, thread) for buffer elements, None: no access
        self.env = dict(env)
        self.copied: set[str] = set()
        # the points the conditions around the expression being evaluated select: its
        # buffer reads touch only those (None: every point)
        self.read_mask = None
        folds = any(self.frag(s.frag).rank < dom.rank for s in _stores(stmt.body))
        self.mode = "fold" if folds else ("full" if dom.rank == 2 else "row")

    def frag(self, name: str) -> FragState:
        f = self.frags.get(name)
        if f is None:
            raise InterpError(f"fragment '{name}' is not declared in this role", self.loc)
        return f

    def run(self) -> None:
        i = self.stmt.indices[0]
        if self.mode == "row":
            self.env[i] = torch.arange(self.dom.shape[0])[None, :]
            self.body(self.stmt.body, None)
        elif self.mode == "full":
            m, n = self.dom.shape
            self.owner_of_col, _ = self.row_owners.layout(m, n)
            self.env[i] = torch.arange(m)[:, None]
            self.env[self.stmt.indices[1]] = torch.arange(n)[None, :]
            self.body(self.stmt.body, None)
        else:
            m, n = self.dom.shape
            _, cols = self.row_owners.layout(m, n)
            self.env[i] = torch.arange(m)[None, :]
            for c in range(cols.shape[1]):
                self.cols = cols[:, c]
                self.env[self.stmt.indices[1]] = self.cols[:, None]
                self.body(self.stmt.body, None)

    def body(self, stmts, mask) -> None:
        """`mask`: the points the conditions around `stmts` select; the statements' reads
        touch only those (the target predicates them: an `if` in apply is if-converted)."""
        for s in stmts:
            if isinstance(s, ir.ElemStore):
                self.store(s, self.value(s.value, mask, s.loc), mask)
            elif isinstance(s, ir.If):
                c = torch.as_tensor(self.value(s.cond, mask, s.loc), dtype=torch.bool)
                self.body(s.then, c if mask is None else mask & c)
                if s.orelse:
                    self.body(s.orelse, ~c if mask is None else mask & ~c)
            elif isinstance(s, ir.Let):
                self.env[s.name] = self.value(s.value, mask, s.loc)
            elif isinstance(s, ir.BufStore) and not s.atomic and self.buffers is not None:
                self.buf_store(s, mask)
            elif isinstance(s, ir.BufStore) and s.atomic == "add" and self.mode == "full" \
                    and self.buffers is not None:
                self.atomic_add(s, mask)
            else:
                raise InterpError(f"{describe(s)} is not allowed inside apply", s.loc)

    def value(self, e: ir.Expr, mask, loc):
        """`e` at every point, reading memory only at the points of `mask`."""
        outer, self.read_mask = self.read_mask, mask
        try:
            return self.ev(e, self.env, loc)
        finally:
            self.read_mask = outer

    @contextmanager
    def reads_under(self, cond):
        outer = self.read_mask
        c = torch.as_tensor(cond, dtype=torch.bool)
        self.read_mask = c if outer is None else outer & c
        try:
            yield
        finally:
            self.read_mask = outer

    # -- a 1-D buffer indexed by the apply's row index: one element per row (`buf.at(i)`)
    def _row_box(self, view: ir.View, index, loc):
        mem, _ = self.buffers
        box = mem.resolve(view, self.env, self.ev, loc)
        got = tuple(x.name if isinstance(x, ir.Sym) else None for x in index)
        if got != (self.stmt.indices[0],) or box.shape != (self.dom.shape[0],):
            raise InterpError(f"'{view.base}' inside apply other than as a vector of the "
                              f"{self.dom.shape[0]} rows indexed by the apply's row index "
                              f"'{self.stmt.indices[0]}'", loc)
        return box

    def buf_load(self, e: ir.BufElem):
        """Row i's element of the buffer, shaped as a row vector of this mode."""
        mem, agent = self.buffers
        box = self._row_box(e.view, e.index, self.loc)
        mem.access(box, False, agent, self.loc, "read")
        data = mem.read(box)
        return data[:, None] if self.mode == "full" else data[None, :]

    def buf_store(self, s: ir.BufStore, mask) -> None:
        """`buf.at(i) = row value` in an apply over a row vector: each row's one value
        (copies of the row in several owners must agree: a partial value has no one)."""
        if self.mode != "row":
            raise InterpError(f"a store to '{s.view.base}' inside an apply over the 2-D "
                              f"'{self.dom.name}' (each row's element is written by the "
                              f"owners of its columns)", s.loc)
        mem, agent = self.buffers
        box = self._row_box(s.view, s.index, s.loc)
        v = torch.as_tensor(self.value(s.value, mask, s.loc), dtype=torch.float32)
        v = v.expand(self.owners, self.dom.shape[0])
        if not torch.equal(v.isnan(), v[:1].isnan().expand_as(v)) or \
                not torch.equal(v.nan_to_num(), v[:1].nan_to_num().expand_as(v)):
            raise InterpError(f"the owners of a row store different values into "
                              f"'{s.view.base}' (a partial row value)", s.loc)
        new = v[0]
        if mask is not None:
            keep = torch.as_tensor(mask, dtype=torch.bool).expand(self.owners, -1)[0]
            new = torch.where(keep, new, mem.read(box))
        mem.access(box, True, agent, s.loc, "write")
        mem.write(box, new, s.loc)

    # -- element access: only the executing owner's own elements
    def atomic_add(self, s: ir.BufStore, mask) -> None:
        """`__atomic_add(T.at(...), v)` in an apply over a 2-D fragment: each point (each
        element, held by one thread) adds its value to a global element. Atomics do not
        race with each other, so the update is not recorded as an access."""
        mem, _ = self.buffers
        box = mem.resolve(s.view, self.env, self.ev, s.loc)
        if mem.storage[box.base] != "global":
            raise InterpError(f"'__atomic_add' inside apply on '{s.view.base}', which is not "
                              f"a global tensor", s.loc)
        shape = torch.Size(self.dom.shape)  # every point, even of indices constant in i or j
        idx = [torch.as_tensor(self.value(i, mask, s.loc)).expand(shape) for i in s.index]
        v = torch.as_tensor(self.value(s.value, mask, s.loc), dtype=torch.float32)
        mem.scatter_add(box, idx, v.expand(shape), s.loc, mask)

    def _check_index(self, f: FragState, index, loc) -> None:
        want = self.stmt.indices[: f.rank] if f.rank == 1 else self.stmt.indices
        got = tuple(x.name if isinstance(x, ir.Sym) else None for x in index)
        if f.rank > self.dom.rank or got != tuple(want) or f.shape[0] != self.dom.shape[0] \
                or (f.rank == 2 and f.shape != self.dom.shape):
            raise InterpError(f"'{f.name}' indexed other than by the apply's own indices "
                              f"({', '.join(want)}): the element may belong to another thread", loc)

    def load(self, e: ir.Elem):
        f = self.frag(e.frag)
        self._check_index(f, e.index, self.loc)
        if self.mode == "row":
            return f.data
        if self.mode == "full":
            return f.data if f.rank == 2 else f.data.T[:, self.owner_of_col]
        return f.data[:, self.cols].T if f.rank == 2 else f.data

    def store(self, s: ir.ElemStore, value, mask) -> None:
        f = self.frag(s.frag)
        self._check_index(f, s.index, s.loc)
        if self.mode == "fold" and f.rank == 2:
            if f.name not in self.copied:  # values may be shared with other fragments
                f.data = f.data.clone()
                self.copied.add(f.name)
            old = f.data[:, self.cols].T
            new = _masked(value, old, mask, f.dtype)
            f.data[:, self.cols] = new.T
            return
        f.data = _masked(value, f.data, mask, f.dtype)


def _masked(value, old: torch.Tensor, mask, dtype: str) -> torch.Tensor:
    v = round_to(torch.as_tensor(value, dtype=torch.float32), dtype)
    if mask is not None:
        return torch.where(mask, v, old)
    return v.expand(old.shape).contiguous() if tuple(v.shape) != tuple(old.shape) else v


def _elems(e: ir.Expr, out: set) -> None:
    if isinstance(e, ir.Elem):
        out.add(e.frag)
    for f in fields(e):
        v = getattr(e, f.name)
        for x in (v if isinstance(v, tuple) else (v,)):
            if isinstance(x, ir.Expr):
                _elems(x, out)


def apply_frags(stmt: ir.Apply) -> tuple[set[str], set[str]]:
    """(fragments read, fragments written) by an apply body."""
    reads: set[str] = set()
    writes: set[str] = set()
    for s in ir.walk(stmt.body):
        if isinstance(s, ir.ElemStore):
            writes.add(s.frag)
            _elems(s.value, reads)
        elif isinstance(s, ir.If):
            _elems(s.cond, reads)
        elif isinstance(s, ir.Let):
            _elems(s.value, reads)
    return reads, writes


# ---------------------------------------------------------------- whole-fragment ops


def reduce(dst: FragState, src: FragState, kind: str, dim: int, loc) -> None:
    """`reduce_max/sum(dst, src, dim)`: over every owner, replicated to all copies; `dim`
    1 reduces each row (a row vector), 0 each column (a vector of the columns)."""
    if src.rank != 2 or dim not in (0, 1) or dst.rank != 1 or \
            dst.shape[0] != src.shape[1 - dim]:
        raise InterpError(f"reduce_{kind}({dst.name}, {src.name}, {dim}): only reducing a "
                          f"dimension of a 2-D fragment into a vector is modelled", loc)
    if kind == "max":
        r = src.data.amax(dim=dim)
    elif kind == "sum":
        r = src.data.sum(dim=dim)
    else:
        raise InterpError(f"unknown reduction '{kind}'", loc)
    dst.set(r[None, :])


def all_reduce(f: FragState, kind: str, loc) -> None:
    if f.rank != 1:
        raise InterpError(f"all_reduce_{kind} of '{f.name}': the operand must be a row vector", loc)
    if kind == "sum":
        r = f.data.sum(dim=0, keepdim=True)
    elif kind == "max":
        r = f.data.amax(dim=0, keepdim=True)
    else:
        raise InterpError(f"unknown all-reduce '{kind}'", loc)
    f.set(r)


def copy(dst: FragState, src: FragState, loc) -> None:
    if dst.shape != src.shape:
        raise InterpError(f"copy of '{src.name}' {list(src.shape)} into '{dst.name}' "
                          f"{list(dst.shape)}", loc)
    dst.set(src.data)


def mma_product(layout: str, a: torch.Tensor, b: torch.Tensor, acc: FragState, loc,
                wide=torch.float32) -> torch.Tensor:
    """a @ op(b) in f32 for Choreo's layout suffix (operands already rounded to their dtype)."""
    parts = layout.split(".")
    if len(parts) != 2 or any(p not in ("row", "col") for p in parts):
        raise InterpError(f"unknown MMA layout '{layout}'", loc)
    a = a if parts[0] == "row" else a.T  # col: A is [K, M]
    b = b.T if parts[1] == "row" else b  # row: B is [N, K]; col: B is [K, N]
    if a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[0] or \
            (a.shape[0], b.shape[1]) != acc.shape:
        raise InterpError(f"mma.{layout}: operands {list(a.shape)} x {list(b.shape)} do not "
                          f"fit accumulator '{acc.name}' {list(acc.shape)}", loc)
    return a.to(wide) @ b.to(wide)


def warp_product(layout: str, a: FragState, b: FragState, acc: FragState, loc) -> torch.Tensor:
    """The mma.sync form's a @ op(b): f32 operands are multiplied as tf32 (the tensor
    cores' f32 input, rounded to nearest as cvt.rna does), integer ones exactly (in f64:
    8-bit products, sums far below 2^53)."""
    x, y = a.data, b.data
    if a.dtype == "f32":
        x, y = tf32_rna(x), tf32_rna(y)
    wide = torch.float32 if ir.is_float(a.dtype) else torch.float64
    return mma_product(layout, x.to(wide), y.to(wide), acc, loc, wide)


def tf32_rna(x: torch.Tensor) -> torch.Tensor:
    """f32 -> tf32 (10 mantissa bits), to nearest with ties away from zero."""
    bits = x.to(torch.float32).contiguous().view(torch.int32)
    return ((bits + 0x1000) & ~0x1FFF).view(torch.float32)
