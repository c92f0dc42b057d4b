"""Global tensors and shared buffers, the boxes views select, and race detection.

A `Box` is a view with every expression evaluated: a start and a size per
dimension of its base (a kernel parameter or a buffer, plus the buffer's
array slot). TMA/DMA reads of global tensors zero-fill the part of the box
outside the tensor and writes clip it, as the hardware's tensor copies do;
boxes on shared buffers must lie inside them.

Race detection is by happens-before, not by timing, so that a missing wait is
reported under every schedule: every access is recorded with the epoch of
the agent making it (a role thread, or the asynchronous operation behind a
future), and a later access conflicts with an earlier one that it overlaps
when at least one writes and the earlier one is not ordered before it in the
later agent's vector clock.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch

from .. import ir
from ..ir import subbyte
from .errors import InterpError, RaceError
from .scalars import TORCH_DTYPES, Evaluator


@dataclass(frozen=True)
class Box:
    base: str
    slot: Optional[int]
    starts: tuple[int, ...]
    sizes: tuple[int, ...]
    keep: tuple[bool, ...]

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(n for n, k in zip(self.sizes, self.keep) if k)

    def __str__(self) -> str:
        base = self.base if self.slot is None else f"{self.base}[{self.slot}]"
        dims = ", ".join(f"{s}:{s + n}" if k else str(s)
                         for s, n, k in zip(self.starts, self.sizes, self.keep))
        return f"{base}[{dims}]"


@dataclass
class Access:
    write: bool
    ranges: tuple[tuple[int, int], ...]
    agent: int
    epoch: int
    loc: object
    what: str


def _overlap(a, b) -> bool:
    return all(lo1 < hi2 and lo2 < hi1 for (lo1, hi1), (lo2, hi2) in zip(a, b))


def _covers(a, b) -> bool:
    """Whether ranges `a` contain ranges `b`."""
    return all(lo1 <= lo2 and hi2 <= hi1 for (lo1, hi1), (lo2, hi2) in zip(a, b))


class Memory:
    """The data one block sees: the launch's global tensors and its own buffers."""

    def __init__(self, kernel: ir.Kernel, tensors: dict[str, torch.Tensor],
                 dims: Optional[dict] = None) -> None:
        self.tensors: dict[str, torch.Tensor] = {}
        self.storage: dict[str, str] = {}
        self.counts: dict[str, Optional[int]] = {}
        for p in kernel.params:
            self.tensors[p.name] = tensors[p.name]
            self.storage[p.name] = p.storage
            self.counts[p.name] = None
        for b in kernel.buffers:
            self.tensors[b.name] = _alloc(b)
            self.storage[b.name] = b.storage
            self.counts[b.name] = b.count
        for b in kernel.run_buffers:  # shared buffers sized by the launch's dimensions
            self.tensors[b.name] = _alloc(b, _run_shape(b, dims or {}))
            self.storage[b.name] = "shared"
            self.counts[b.name] = None
        for a in kernel.aliases:  # span_as: the base's storage, seen with the alias's shape
            self.tensors[a.name] = self.tensors[a.base].view(a.shape)
            self.storage[a.name] = self.storage[a.base]
            self.counts[a.name] = None
        self.history: dict[tuple[str, Optional[int]], list[Access]] = {}
        # per-thread element accesses of shared buffers: (base, slot) -> {pos: _Cell}
        self.cells: dict[tuple[str, Optional[int]], dict] = {}
        # tensors of sub-byte types hold codes: decoded on reads, encoded on writes
        self.codes: dict[str, str] = {
            x.name: x.dtype for x in list(kernel.params) + list(kernel.buffers)
            + list(kernel.run_buffers) if subbyte.is_subbyte(x.dtype)}
        for a in kernel.aliases:
            if a.base in self.codes:
                self.codes[a.name] = self.codes[a.base]
        self.kernel = kernel
        self.private = private_names(kernel)
        # the variables that tell one thread instance from another (grid variables too:
        # harmless, each block has its own Memory)
        self.instance_vars = tuple(dict.fromkeys(
            s.var for s in ir.walk(kernel.body) if isinstance(s, ir.Parallel)))

    # -- views
    def resolve(self, view: ir.View, env: dict, ev, loc=None) -> Box:
        offs = tuple(ev.integer(e, env, loc) for e in view.offsets)
        exts = tuple(ev.integer(e, env, loc) for e in view.extents)
        slot = None if view.slot is None else ev.integer(view.slot, env, loc)
        parent = env.get(view.base)
        if isinstance(parent, Box):  # a view over a named view (`ViewDef`)
            box = _compose(parent, offs, exts, tuple(view.keep), slot, loc)
        elif view.base in self.tensors:
            base = self.own(view.base, env) if view.base in self.private else view.base
            box = Box(base, slot, offs, exts, tuple(view.keep))
        else:
            raise InterpError(f"'{view.base}' is not a tensor, buffer or view", loc)
        self._check(box, loc)
        return box

    def own(self, name: str, env: dict) -> str:
        """The copy of the local buffer (or alias of one) `name` that the thread instance
        running with `env` has: a local buffer is per thread on the GPU. Each instance's copy
        is a tensor of its own, made at its first use, named for the instance
        (`buffer{q=3}`): its accesses never meet another instance's, as on the GPU. It
        starts as the enclosing instance's copy (what the outer code, which each of the
        instance's threads ran on its own copy, left there), else as a fresh buffer."""
        key = [(v, env[v]) for v in self.instance_vars if isinstance(env.get(v), int)]
        if not key:
            return name
        own = _named(name, key)
        if own not in self.tensors:
            alias = self.kernel.alias(name)
            if alias is not None:
                self.tensors[own] = self.tensors[self.own(alias.base, env)].view(alias.shape)
            else:
                outer = next(n for n in (_named(name, key[:i]) for i in
                                         reversed(range(len(key)))) if n in self.tensors)
                self.tensors[own] = self.tensors[outer].clone()
            self.storage[own], self.counts[own] = self.storage[name], self.counts[name]
            if name in self.codes:
                self.codes[own] = self.codes[name]
        return own

    def _check(self, box: Box, loc) -> None:
        t = self.tensors[box.base]
        count = self.counts[box.base]
        if count is not None:
            if box.slot is None:
                raise InterpError(f"'{box.base}' is an array of {count} buffers; a slot is needed", loc)
            if not 0 <= box.slot < count:
                raise InterpError(f"slot {box.slot} of '{box.base}' is out of range [0, {count})", loc)
            t = t[0]
        elif box.slot is not None:
            raise InterpError(f"'{box.base}' is not an array of buffers", loc)
        if len(box.starts) != t.dim():
            raise InterpError(f"view of rank {len(box.starts)} over '{box.base}' of rank {t.dim()}", loc)
        if any(n < 0 for n in box.sizes):
            raise InterpError(f"negative extent in view {box}", loc)
        if self.storage[box.base] != "global":
            for s, n, d in zip(box.starts, box.sizes, t.shape):
                if s < 0 or s + n > d:
                    raise InterpError(f"view {box} is out of bounds of buffer "
                                      f"'{box.base}' {list(t.shape)}", loc)

    def _base(self, box: Box) -> torch.Tensor:
        t = self.tensors[box.base]
        return t if box.slot is None else t[box.slot]

    def clipped(self, box: Box) -> tuple[tuple[int, int], ...]:
        t = self._base(box)
        return tuple((max(s, 0), min(s + n, d)) for s, n, d in zip(box.starts, box.sizes, t.shape))

    # -- data
    def read(self, box: Box, as_float: bool = True) -> torch.Tensor:
        """The box's values (zero outside a global tensor), shaped as the view."""
        t = self._base(box)
        rng = self.clipped(box)
        inner = tuple(slice(lo, hi) for lo, hi in rng)
        if all(lo == s and hi == s + n for (lo, hi), s, n in zip(rng, box.starts, box.sizes)):
            out = t[inner].clone()
        else:
            out = torch.zeros(box.sizes, dtype=t.dtype)
            if all(hi > lo for lo, hi in rng):
                dst = tuple(slice(lo - s, hi - s) for (lo, hi), s in zip(rng, box.starts))
                out[dst] = t[inner]
        out = out.reshape(box.shape)
        if box.base in self.codes:
            return subbyte.decode(out, self.codes[box.base])
        return out.to(torch.float32) if as_float and out.is_floating_point() else out

    def write(self, box: Box, value: torch.Tensor, loc=None) -> None:
        """Stores `value` (the view's shape) into the box, clipped to a global tensor."""
        if tuple(value.shape) != box.shape:
            raise InterpError(f"shape {list(value.shape)} does not fit view {box} "
                              f"of shape {list(box.shape)}", loc)
        t = self._base(box)
        rng = self.clipped(box)
        if not all(hi > lo for lo, hi in rng):
            return
        value = value.reshape(box.sizes)
        if box.base in self.codes:
            value = subbyte.encode(value, self.codes[box.base])
        src = tuple(slice(lo - s, hi - s) for (lo, hi), s in zip(rng, box.starts))
        t[tuple(slice(lo, hi) for lo, hi in rng)] = value[src].to(t.dtype)

    def element(self, box: Box, index: tuple[int, ...], loc=None):
        pos = _element_pos(box, index, loc)
        t = self._base(box)
        if any(not 0 <= p < d for p, d in zip(pos, t.shape)):
            raise InterpError(f"element {list(index)} of {box} is outside '{box.base}'", loc)
        if box.base in self.codes:
            return subbyte.decode_one(t[pos].item(), self.codes[box.base]), pos
        return t[pos].item(), pos

    def gather(self, box: Box, index: list, loc=None, mask=None) -> torch.Tensor:
        """`element` at every point of broadcast index tensors (an `apply`'s indices): the
        values as float32 (floating data) or int64. `mask`: the points a condition around
        the read selects (None: all); only those are read (and must be inside the view), the
        others are 0 (the guarded code never touches them)."""
        pos, on = self._points(box, index, loc, mask)
        t = self._base(box)
        if on is None:
            v = t[tuple(pos)]
        else:
            v = torch.zeros(on.shape, dtype=t.dtype)
            v[on] = t[tuple(p[on] for p in pos)]
        if box.base in self.codes:
            return subbyte.decode(v, self.codes[box.base])
        return v.to(torch.float32) if v.is_floating_point() else v.to(torch.int64)

    def scatter_add(self, box: Box, index: list, values, loc=None, mask=None) -> None:
        """`__atomic_add` at every point of broadcast index tensors (an `apply` over an
        accumulator): each selected point's value added to its element in float32, as
        the GPU's `red.global.add.f32`, repeated positions summed."""
        pos, on = self._points(box, index, loc, mask)
        t = self._base(box)
        v = torch.as_tensor(values, dtype=torch.float32).expand(pos[0].shape)
        if on is not None:
            pos, v = [p[on] for p in pos], v[on]
        t.index_put_(tuple(p.flatten() for p in pos), v.flatten().to(t.dtype), accumulate=True)

    def _points(self, box: Box, index: list, loc, mask):
        """(positions in the base tensor, the selected points or None) of broadcast index
        tensors; a selected point outside the view or the tensor is an error."""
        if len(index) != len(box.shape):
            raise InterpError(f"{len(index)} indices for view {box} of rank {len(box.shape)}",
                              loc)
        parts = [torch.as_tensor(i, dtype=torch.int64) for i in index]
        if mask is not None:
            parts.append(torch.as_tensor(mask, dtype=torch.bool))
        idx = torch.broadcast_tensors(*parts)
        on = idx[-1] if mask is not None else None
        pos, it = [], iter(idx)
        for s, n, k in zip(box.starts, box.sizes, box.keep):
            if not k:
                pos.append(torch.full_like(idx[0], s))
                continue
            i = next(it)
            out = _selected((i < 0) | (i >= n), on)
            if bool(out.any()):
                raise InterpError(f"index {int(i[out].flatten()[0])} outside extent {n} of "
                                  f"view {box}", loc)
            pos.append(s + i)
        t = self._base(box)
        for p, d in zip(pos, t.shape):
            if bool(_selected((p < 0) | (p >= d), on).any()):
                raise InterpError(f"an element of {box} is outside '{box.base}'", loc)
        return pos, on

    def set_element(self, box: Box, index: tuple[int, ...], value, loc=None) -> None:
        pos = _element_pos(box, index, loc)
        t = self._base(box)
        if any(not 0 <= p < d for p, d in zip(pos, t.shape)):
            raise InterpError(f"element {list(index)} of {box} is outside '{box.base}'", loc)
        if box.base in self.codes:
            value = (subbyte.encode(value, self.codes[box.base]) if isinstance(value, torch.Tensor)
                     else subbyte.encode_one(value, self.codes[box.base]))
        t[pos] = value

    # -- races
    def access(self, box: Box, write: bool, agent, loc, what: str, ranges=None) -> None:
        """Records an access by `agent`; raises RaceError on an unordered conflict."""
        rng = ranges if ranges is not None else self.clipped(box)
        if not all(hi > lo for lo, hi in rng):
            return
        key = (box.base, box.slot)
        clock = agent.clock
        kept = []
        for a in self.history.get(key, ()):
            if not _overlap(a.ranges, rng):
                kept.append(a)
                continue
            ordered = clock.get(a.agent, 0) >= a.epoch
            if not ordered and (write or a.write):
                _race(box, key, write, what, loc, a)
            # An earlier access ordered before this one and covered by it can
            # be forgotten: any later access racing with it races with this one
            # too (a write covers everything; a read covers reads only).
            if not (ordered and (write or not a.write) and _covers(rng, a.ranges)):
                kept.append(a)
        kept.append(Access(write, rng, agent.id, clock[agent.id], loc, what))
        self.history[key] = kept
        cells = self.cells.get(key)
        if cells:
            self._box_against_cells(box, key, cells, rng, write, clock, loc, what)

    def element_access(self, box: Box, pos: tuple, write: bool, agent, loc) -> None:
        """Records one element read or write of a shared buffer by a thread (per-thread
        code run one thread at a time: `buf[i]`, `buf[i] = v`). Threads of a block share
        shared memory, so two threads' accesses of an element, one a write, race unless a
        barrier, event or join orders the first before the second (FastTrack's rule: the
        element's last write, and its reads since, each with the epoch of its thread)."""
        if self.storage.get(box.base) != "shared":
            return
        key = (box.base, box.slot)
        clock, me = agent.clock, agent.id
        who = f"thread {agent.name}"
        for a in self.history.get(key, ()):  # asynchronous copies and per-lane regions
            if (write or a.write) and clock.get(a.agent, 0) < a.epoch and all(
                    lo <= p < hi for p, (lo, hi) in zip(pos, a.ranges)):
                _race(box, key, write, who, loc, a, pos)
        cell = self.cells.setdefault(key, {}).get(pos)
        if cell is None:
            cell = self.cells[key][pos] = _Cell()
        w = cell.write
        if w is not None and w.agent != me and clock.get(w.agent, 0) < w.epoch:
            _race(box, key, write, who, loc, w, pos)
        if not write:
            cell.reads[me] = Access(False, (), me, clock[me], loc, who)
            return
        for r in cell.reads.values():
            if r.agent != me and clock.get(r.agent, 0) < r.epoch:
                _race(box, key, True, who, loc, r, pos)
        cell.write = Access(True, (), me, clock[me], loc, who)
        cell.reads = {}

    def _box_against_cells(self, box, key, cells, rng, write, clock, loc, what) -> None:
        """A copy (or a lane region's box) against the threads' element accesses in it."""
        for pos, cell in cells.items():
            if not all(lo <= p < hi for p, (lo, hi) in zip(pos, rng)):
                continue
            for a in ([cell.write] if cell.write is not None else []) + (
                    list(cell.reads.values()) if write else []):
                if clock.get(a.agent, 0) < a.epoch:
                    _race(box, key, write, what, loc, a, pos)


def _named(name: str, key: list) -> str:
    """The name of an instance's copy of a local buffer (the buffer's own for no key)."""
    return name + "{" + ", ".join(f"{v}={i}" for v, i in key) + "}" if key else name


def private_names(kernel: ir.Kernel) -> frozenset[str]:
    """The kernel's local buffers, with the aliases (`span_as`) and named views over them:
    the names whose memory is each thread's own."""
    names = {b.name for b in kernel.buffers if b.storage == "local"}
    names |= {a.name for a in kernel.aliases if a.base in names}
    defs = [s for s in ir.walk(kernel.body) if isinstance(s, ir.ViewDef)]
    grown = True
    while grown:  # a named view over a named view over a local buffer...
        new = {s.name for s in defs if s.view.base in names} - names
        names |= new
        grown = bool(new)
    return frozenset(names)


class _Cell:
    """One shared-buffer element: its last write and the reads since (per thread)."""

    __slots__ = ("write", "reads")

    def __init__(self) -> None:
        self.write: Optional[Access] = None
        self.reads: dict = {}


def _race(box: Box, key, write: bool, what: str, loc, a: Access, pos=None) -> None:
    name = key[0] if key[1] is None else f"{key[0]}[{key[1]}]"
    mine = "writes" if write else "reads"
    theirs = "write" if a.write else "read"
    where = box if pos is None else f"{name}{list(pos)}"
    raise RaceError(
        f"data race on {name}: {what} {mine} {where} while the {theirs} by {a.what} "
        f"(at {a.loc}) is not ordered before it: no wait, event or role barrier orders them",
        loc, [(f"the conflicting {theirs}: {a.what}", a.loc)])


def _selected(bad: torch.Tensor, on) -> torch.Tensor:
    """The faulting points a read touches (all of them when no condition selects)."""
    return bad if on is None else bad & on


def _element_pos(box: Box, index: tuple[int, ...], loc) -> tuple[int, ...]:
    if len(index) != len(box.shape):
        raise InterpError(f"{len(index)} indices for view {box} of rank {len(box.shape)}", loc)
    pos, it = [], iter(index)
    for s, n, k in zip(box.starts, box.sizes, box.keep):
        if k:
            i = next(it)
            if not 0 <= i < n:
                raise InterpError(f"index {i} outside extent {n} of view {box}", loc)
            pos.append(s + i)
        else:
            pos.append(s)
    return tuple(pos)


def _compose(parent, offs, exts, keep, slot, loc, make=None):
    """The box of a view over `parent` (a Box, or a lane box when `make` builds one)."""
    kept = [d for d, k in enumerate(parent.keep) if k]
    if len(offs) != len(kept):
        raise InterpError(f"view of rank {len(offs)} over a view of rank {len(kept)}", loc)
    if slot is not None and parent.slot is not None:
        raise InterpError(f"'{parent.base}' is already indexed", loc)
    starts, sizes = list(parent.starts), list(parent.sizes)
    new_keep = [False] * len(starts)
    for n, d in enumerate(kept):
        starts[d] = starts[d] + offs[n]  # never in place: a lane tensor may be shared
        sizes[d] = exts[n]
        new_keep[d] = keep[n]
    return (make or Box)(parent.base, parent.slot if slot is None else slot,
                         tuple(starts), tuple(sizes), tuple(new_keep))


def _run_shape(b: ir.RunBuffer, dims: dict) -> tuple[int, ...]:
    ev = Evaluator(None)
    shape = tuple(ev.integer(d, dims, b.loc) for d in b.shape)
    if any(n <= 0 for n in shape):
        raise InterpError(f"the shared buffer '{b.name}' is [{', '.join(map(str, shape))}] for "
                          "these dimensions: its dimensions must be positive", b.loc)
    return shape


def _alloc(b, shape=None) -> torch.Tensor:
    shape = ((b.count,) if b.count else ()) + tuple(b.shape if shape is None else shape)
    dt = TORCH_DTYPES[b.dtype]
    if getattr(b, "init", None) is not None:  # a RunBuffer has none
        return torch.full(shape, b.init.value, dtype=dt)
    # Uninitialised shared memory reads as NaN, so that a read before any
    # write shows up in the results even where no race is reported.
    if dt.is_floating_point and dt.itemsize >= 2:
        return torch.full(shape, float("nan"), dtype=dt)
    return torch.zeros(shape, dtype=dt)
