"""Races between the instances (lanes) of a `parallel` run as lanes (lanes.py).

The instances of a parallel are unordered: an element one lane writes and
another lane reads or writes, with no `sync.shared` between the two
accesses, is a data race. Every element access of the active lanes is
recorded per base (tensor or buffer):

- bases of up to DENSE_LIMIT elements (shared buffers, small tensors) keep a
  map per element (the lane that wrote it, the lane that read it or "several")
  and a conflict is found at the access that makes it;
- larger bases keep a list of (element, lane, read/write, statement) records,
  checked when the region ends or reaches a `sync.shared`, and compacted
  (one record per element, lane and kind) when it grows long.

Either way the report names both statements. `boxes_touched()` returns the
bounding box of what the region read and wrote per base, which the caller
checks against the other agents (asynchronous copies, other roles).
"""
from __future__ import annotations

import numpy as np
import torch

from .errors import RaceError

DENSE_LIMIT = 1 << 18
COMPACT_AT = 1 << 22


class _Dense:
    """Per element: the lane that wrote it, the lane that read it (-2: several), and where;
    numpy arrays (a few microseconds an operation, where torch's small ones take tens).
    Kept across `sync.shared`s: only the elements accessed since are reset."""

    def __init__(self, shape) -> None:
        n = 1
        for d in shape:
            n *= d
        self.shape = tuple(shape)
        self.writer = np.full(n, -1, dtype=np.int32)
        self.reader = np.full(n, -1, dtype=np.int32)
        self.wloc = np.zeros(n, dtype=np.int32)
        self.rloc = np.zeros(n, dtype=np.int32)
        self.seen: tuple[list, list] = ([], [])  # flat indices read, written since the reset

    def reset(self) -> None:
        reads, writes = self.seen
        for flat in reads:
            self.reader[flat] = -1
        for flat in writes:
            self.writer[flat] = -1
        self.seen = ([], [])


class _Unstored:
    """A base the region never stores to: its reads cannot race with each other, only
    their extent is kept (for `boxes_touched`)."""

    def __init__(self, shape) -> None:
        self.shape = tuple(shape)
        self.seen: tuple[list, list] = ([], [])

    def reset(self) -> None:
        self.seen = ([], [])


class _Sparse:
    def __init__(self, shape) -> None:
        self.shape = tuple(shape)
        self.parts: list[tuple] = []  # (flat, lane, write, loc id), in program order
        self.size = 0

    def add(self, flat, lanes, write: bool, lid: int) -> None:
        n = flat.numel()
        self.parts.append((flat, lanes, torch.full((n,), write), torch.full((n,), lid,
                                                                              dtype=torch.int32)))
        self.size += n
        if self.size >= COMPACT_AT:
            self.compact()

    def arrays(self):
        if len(self.parts) != 1:
            self.parts = [tuple(torch.cat(x) for x in zip(*self.parts))] if self.parts else \
                [(torch.zeros(0, dtype=torch.int64), torch.zeros(0, dtype=torch.int32),
                  torch.zeros(0, dtype=torch.bool), torch.zeros(0, dtype=torch.int32))]
        return self.parts[0]

    def compact(self) -> None:
        """Keeps the first record of each (element, lane, kind): enough to find any race."""
        f, ln, w, d = self.arrays()
        key = (f * (int(ln.max()) + 1) + ln) * 2 + w
        uniq, inv = torch.unique(key, return_inverse=True)
        first = torch.full((uniq.numel(),), key.numel(), dtype=torch.int64)
        first.scatter_reduce_(0, inv, torch.arange(key.numel()), "amin")
        keep = torch.sort(first).values
        self.parts = [(f[keep], ln[keep], w[keep], d[keep])]
        self.size = keep.numel()

    def conflict(self):
        """The first element accessed by two lanes, one writing: (flat, j, i) records, or None."""
        f, ln, w, d = self.arrays()
        if f.numel() < 2:
            return None
        order = torch.sort(f, stable=True).indices  # program order within an element
        fs, ls, ws = f[order], ln[order], w[order]
        start = torch.ones_like(fs, dtype=torch.bool)
        start[1:] = fs[1:] != fs[:-1]
        gid = torch.cumsum(start.to(torch.int64), 0) - 1
        groups = int(gid[-1]) + 1
        other = (ls != ls[start][gid]).to(torch.int64)
        multi = torch.zeros(groups, dtype=torch.int64).index_add_(0, gid, other) > 0
        wrote = torch.zeros(groups, dtype=torch.int64).index_add_(0, gid, ws.to(torch.int64)) > 0
        bad = torch.nonzero(multi & wrote).flatten()
        if bad.numel() == 0:
            return None
        g = int(bad[0])
        rows = order[gid == g].tolist()
        first_write, readers = None, {}
        for j in rows:
            lane, write = int(ln[j]), bool(w[j])
            if first_write is not None and int(ln[first_write]) != lane:
                return int(f[j]), j, first_write
            if write:
                i = next((i for r, i in readers.items() if r != lane), None)
                if i is not None:
                    return int(f[j]), j, i
                first_write = j if first_write is None else first_write
            else:
                readers.setdefault(lane, j)
        return None  # not reached: the group has two lanes and a write


class LaneAccesses:
    """The element accesses of one lane region (see the module docstring)."""

    def __init__(self, var: str, tensors: dict, counts: dict, stored=None) -> None:
        """`stored`: the bases the region may store to (None: any)."""
        self.var, self.tensors, self.counts = var, tensors, counts
        self.stored = stored
        self.tracks: dict = {}
        self.locs: list = []
        self.loc_ids: dict = {}
        self.first: dict = {}  # (base, write) -> the first such access's location
        self.boxes: dict = {}  # (base, slot, write) -> [lo, hi, loc]
        self.deferred: dict = {}  # (base, write) -> (shape, flat index arrays) to fold
        self.deferred_size = 0
        self.epoch: dict = {}  # the bases touched since the last settle, in that order

    def record(self, base: str, full, lanes, write: bool, loc) -> None:
        """`full`: per dimension of the base tensor (slot first), the active lanes' indices
        (numpy arrays or ints); `lanes`: those lanes (a numpy int32 array)."""
        tr = self.tracks.get(base)
        if tr is None:
            t = self.tensors[base]
            kind = (_Unstored if self.stored is not None and base not in self.stored else
                    _Dense if t.numel() <= DENSE_LIMIT else _Sparse)
            tr = self.tracks[base] = kind(t.shape)
        self.first.setdefault((base, write), loc)
        self.epoch.setdefault(base)
        lanes32 = lanes
        flat = 0
        for p, n in zip(full, tr.shape):
            flat = flat * n + p
        if np.ndim(flat) == 0:  # the same element for every lane
            flat = np.full(lanes32.shape, flat, dtype=np.int64)
        lid = self.loc_ids.get(id(loc))
        if lid is None:
            lid = self.loc_ids[id(loc)] = len(self.locs)
            self.locs.append(loc)
        if isinstance(tr, _Sparse):
            tr.add(torch.from_numpy(np.array(flat, dtype=np.int64)), torch.from_numpy(lanes32.copy()),
                   write, lid)
            return
        tr.seen[write].append(flat)
        if type(tr) is _Unstored:
            if write:  # lanes._stored_bases missed a store: its races would go unseen
                raise RuntimeError(f"a store to '{base}', which the region was not to store to")
            return
        if write:
            self._dense_write(base, tr, flat, lanes32, lid, loc)
        else:
            self._dense_read(base, tr, flat, lanes32, lid, loc)

    def _dense_write(self, base, tr: _Dense, flat, lanes, lid, loc) -> None:
        w_old, r = tr.writer[flat], tr.reader[flat]
        tr.writer[flat] = lanes
        dup = tr.writer[flat] != lanes  # another lane of this statement won the store
        bad_w = dup | ((w_old >= 0) & (w_old != lanes))
        bad_r = (r == -2) | ((r >= 0) & (r != lanes))
        bad = bad_w | bad_r
        if bad.any():
            k = int(np.flatnonzero(bad)[0])
            f, lane = int(flat[k]), int(lanes[k])
            if dup[k]:
                self._race(base, tr.shape, f, lane, int(tr.writer[f]), True, True, loc, loc, True)
            if bad_w[k]:
                self._race(base, tr.shape, f, lane, int(w_old[k]), True, True, loc,
                           self.locs[int(tr.wloc[f])])
            self._race(base, tr.shape, f, lane, int(r[k]), True, False, loc,
                       self.locs[int(tr.rloc[f])])
        tr.wloc[flat] = lid

    def _dense_read(self, base, tr: _Dense, flat, lanes, lid, loc) -> None:
        w = tr.writer[flat]
        bad = (w >= 0) & (w != lanes)
        if bad.any():
            k = int(np.flatnonzero(bad)[0])
            f = int(flat[k])
            self._race(base, tr.shape, f, int(lanes[k]), int(w[k]), False, True, loc,
                       self.locs[int(tr.wloc[f])])
        r_old = tr.reader[flat]
        tr.reader[flat] = lanes
        several = (tr.reader[flat] != lanes) | (r_old == -2) | ((r_old >= 0) & (r_old != lanes))
        if several.any():
            tr.reader[flat[several]] = -2
        tr.rloc[flat] = lid

    def settle(self) -> None:
        """Checks the deferred records and starts afresh (a `sync.shared` orders everything
        before it). What was touched is kept for `boxes_touched`: its box's place in their order
        is fixed here, its extent computed there (once, not at every barrier)."""
        for base in self.epoch:  # in the order this epoch first touched them
            tr = self.tracks[base]
            if isinstance(tr, _Sparse):
                hit = tr.conflict()
                if hit is not None:
                    f, j, i = hit
                    _, ln, w, d = tr.arrays()
                    self._race(base, tr.shape, f, int(ln[j]), int(ln[i]), bool(w[j]), bool(w[i]),
                               self.locs[int(d[j])], self.locs[int(d[i])])
                f, _, w, _ = tr.arrays()
                seen = ([f[~w].numpy()], [f[w].numpy()])
                del self.tracks[base]
            else:
                seen = tr.seen
                tr.reset()
            for write, flats in ((False, seen[0]), (True, seen[1])):
                flats = [f for f in flats if f.size]
                if flats:
                    self._defer(base, tr.shape, flats, write)
        self.epoch.clear()
        if self.deferred_size >= COMPACT_AT:
            self._fold_deferred()

    def _defer(self, base, shape, flats: list, write: bool) -> None:
        if self.counts[base] is None:
            slots = [None]
        else:  # the slots touched, in the order the boxes of this settle took them
            inner = 1
            for n in shape[1:]:
                inner *= n
            slots = [int(k) for k in np.unique(np.concatenate(flats) // inner)]
        for slot in slots:
            self.boxes.setdefault((base, slot, write), None)
        self.deferred.setdefault((base, write), (shape, []))[1].extend(flats)
        self.deferred_size += sum(f.size for f in flats)

    def _fold_deferred(self) -> None:
        for (base, write), (shape, flats) in self.deferred.items():
            self._fold(base, shape, np.concatenate(flats), write)
        self.deferred.clear()
        self.deferred_size = 0

    def boxes_touched(self) -> dict:
        """After the last statement: (base, slot, write) -> [lo, hi, loc], the bounding
        box of what the region read and wrote of each base, in the order first touched."""
        self.settle()
        self._fold_deferred()
        return self.boxes

    def _fold(self, base, shape, flat, write: bool) -> None:
        idx = np.stack(np.unravel_index(flat, shape), axis=1)
        if self.counts[base] is None:
            groups = [(None, idx)]
        else:
            groups = [(int(k), idx[idx[:, 0] == k][:, 1:]) for k in np.unique(idx[:, 0])]
        loc = self.first[(base, write)]
        for slot, rows in groups:
            lo, hi = rows.min(0).tolist(), (rows.max(0) + 1).tolist()
            rec = self.boxes.get((base, slot, write))
            if rec is None:
                self.boxes[(base, slot, write)] = [lo, hi, loc]
            else:
                rec[0] = [min(a, b) for a, b in zip(rec[0], lo)]
                rec[1] = [max(a, b) for a, b in zip(rec[1], hi)]

    def _race(self, base, shape, flat: int, lane: int, other: int, write: bool,
              other_write: bool, loc, other_loc, same: bool = False) -> None:
        idx = [int(i) for i in np.unravel_index(flat, shape)]
        name = base
        if self.counts[base] is not None:
            name, idx = f"{base}[{idx[0]}]", idx[1:]
        v = self.var
        who = f"instance {v}={other}" if other >= 0 else "other instances"
        mine = "writes" if write else "reads"
        theirs = "writes it too" if same else f"{'wrote' if other_write else 'read'} it"
        raise RaceError(
            f"data race on {name}: instance {v}={lane} of parallel {v} {mine} {name}{idx} "
            f"while {who} {theirs}; the instances of a parallel are unordered and no "
            f"sync.shared separates the two accesses", loc,
            [(f"the conflicting {'write' if other_write else 'read'} by {who}", other_loc)])
