"""Per-thread code run for all instances of a `parallel` at once.

A `parallel r by N` whose body is plain per-thread code (scalars, loops,
conditionals, buffer element reads and stores, and `sync.shared` at the top
level of the body) is run once, SIMT style, with `r` bound to a tensor of the
N lane indices: every scalar that depends on `r` becomes a tensor of N lanes,
and a statement runs for all lanes with one torch operation instead of N
Python interpretations. A lane-dependent condition runs each branch under a
lane mask (a loop runs until no lane is left in it); stores and assignments
touch the active lanes only, and element reads and checks ignore inactive
lanes, so an out-of-range index in a lane that skips the read is no error.

Instances of a parallel are unordered with respect to each other: a lane
reading an element another lane wrote, or writing one another lane read or
wrote, with no `sync.shared` in between, is a data race and is reported
with both statements (lane_races.py).
Against other agents (asynchronous copies, other roles) the region's
accesses count as its parent thread's, which the instances are ordered
exactly like: after what the parent did before the region, before what it
does after.

A body whose `sync.shared` / `sync.barrier : block` sits inside a loop or a
conditional (tree reductions, LayerNorm; `mode` says "guarded"; plain code
and barriers only: no atomics, `sync.warp` or `yield`) ran as one
thread per instance before it ran as lanes, and keeps what it gave then:
its lanes compute the threads' scalar bits (`ExactEval`), a barrier must be
reached by every lane (a lane-dependent branch that all lanes take is fine),
and on any fault, at such a barrier, or at an operation without a lane form,
the run puts back every element it stored (`LaneRun.attempt`) and the threads
run the body, giving their report of the race, the deadlock or the bound.

Bodies with anything else (waits, triggers, copies, MMAs, roles, nested
parallels, `break`/`continue`) run as one cooperative thread per instance.
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import fields

import numpy as np
import torch

from .. import ir
from . import atomics
from .errors import InterpError
from .lane_eval import ExactEval, LaneEval, convertible, lane_dtype
from .lane_facts import bound_names, fixed_view, stored_bases
from .lane_races import LaneAccesses
from .memory import Box, _compose
from .scalars import round_to
from ..ir import subbyte

_PLAIN = (ir.Let, ir.Var, ir.Assign, ir.If, ir.For, ir.While, ir.BufStore, ir.ViewDef,
          ir.SetMaxRegs, ir.SyncWarp, ir.Yield)


def eligible(body: list[ir.Stmt], top: bool = True, private=frozenset()) -> bool:
    """Whether a parallel body is plain per-thread code (see the module docstring) that
    touches no name of `private` (local buffers: each lane would need its own copy; such
    bodies run as one thread per instance, Memory.own)."""
    if private and _touches(body, private):
        return False
    for s in body:
        if isinstance(s, ir.SyncShared) and top:
            continue
        if not isinstance(s, _PLAIN):
            return False
        if not all(eligible(b, False) for b in ir.child_blocks(s)):
            return False
    return True


#: What a guarded body may hold (see `mode`): plain code and block barriers at any depth.
_GUARDED = (ir.Let, ir.Var, ir.Assign, ir.If, ir.For, ir.While, ir.BufStore, ir.ViewDef,
            ir.SetMaxRegs, ir.SyncShared)


#: Whether guarded bodies run as lanes (False: as threads, as they did before: for
#: bench/interp.py, which times both, and tests/test_run_guarded_lanes.py, which
#: compares them).
GUARDED_LANES = True


def mode(body: list[ir.Stmt], private=frozenset()) -> str | None:
    """How a parallel body runs: "lanes" (eligible: every instance at once), "guarded"
    (every instance at once, falling back to one thread per instance on any fault, see
    `LaneRun.attempt`), or None (one thread per instance)."""
    key = (id(body), private, GUARDED_LANES)
    hit = _MODES.get(key)
    if hit is not None and hit[0] is body:
        return hit[1]
    _MODES[key] = body, _mode(body, private)
    return _MODES[key][1]


#: mode's answers: (id(body), private, GUARDED_LANES) -> (body, mode); each block asks
_MODES: dict = {}


def _mode(body, private) -> str | None:
    if eligible(body, private=private):
        return "lanes"
    if private and _touches(body, private):
        return None
    if GUARDED_LANES and all(isinstance(s, _GUARDED) and not getattr(s, "atomic", None)
                             for s in ir.walk(body)):
        return "guarded"  # (atomics: the threads' order of them is not the lanes')
    return None


def _touches(body: list[ir.Stmt], names) -> bool:
    """Whether a statement of `body` reads or writes a view of one of `names`."""
    for s in ir.walk(body):
        for f in fields(s):
            v = getattr(s, f.name)
            for x in (v if isinstance(v, (list, tuple)) else (v,)):
                if isinstance(x, ir.View) and x.base in names:
                    return True
                if isinstance(x, ir.Expr) and any(
                        isinstance(e, ir.BufElem) and e.view.base in names
                        for e in ir.expr_walk(x)):
                    return True
    return False


#: What torch raises for an operation that has no lane form (the threads' scalars do).
_NO_LANE_FORM = (TypeError, ValueError, RuntimeError)


class _Diverged(Exception):
    """A guarded run reached a block barrier with only some of its lanes: on the GPU (and
    for the threads) those wait for the others, which never come; the threads report it."""


class LaneRun:
    """One execution of an eligible `parallel` body for all its instances."""

    def __init__(self, block, s: ir.Parallel, th, guarded: bool = False) -> None:
        self.block, self.mem, self.sched = block, block.mem, block.sched
        self.s, self.th = s, th
        self.n = s.extent
        self.lanes = torch.arange(self.n)
        self.lanes_np = np.arange(self.n, dtype=np.int32)  # for the race records
        self.bound = bound_names(s)
        self.views: dict = {}  # id(View) -> its box, for views nothing in the body changes
        self.env = dict(th.env, **{s.var: self.lanes})
        self.types = dict(th.types)
        self.mask: torch.Tensor | None = None
        self.count = self.n  # active lanes
        self.guarded = guarded
        self.journal: list | None = [] if guarded else None  # (tensor, index, old values)
        self.ev = (ExactEval if guarded else LaneEval)(self)
        self.accesses = LaneAccesses(s.var, block.mem.tensors, block.mem.counts,
                                     stored_bases(s, self.env))
        self.what = f"per-thread code of parallel {s.var}"
        self.gone: torch.Tensor | None = None  # the lanes that yielded (left the kernel)
        self.yield_loc = None

    # ---------------------------------------------------------------- driver
    def attempt(self):
        """A guarded run: its result, or None (and nothing it did is left) when it faulted
        or diverged at a barrier. The threads then run the body instead and give the
        report they always gave: these bodies ran as threads before they ran as lanes."""
        saved = self.sched.steps, self.th.loc, dict(self.mem.history)
        try:
            return self.run()
        except (InterpError, _Diverged, *_NO_LANE_FORM):
            for t, index, old in reversed(self.journal):
                t[index] = old
            self.sched.steps, self.th.loc = saved[:2]
            self.mem.history.clear()
            self.mem.history.update(saved[2])
            return None

    def run(self) -> tuple[int, object]:
        """Runs the body; returns how many instances yielded and where the first did."""
        self.exec(self.s.body)
        # Against other agents the region acts as its parent thread: reads, then writes.
        boxes = self.accesses.boxes_touched()
        for write in (False, True):
            for (base, slot, w), (lo, hi, loc) in boxes.items():
                if w == write:
                    box = Box(base, slot, tuple(lo), tuple(h - l for l, h in zip(lo, hi)),
                              (True,) * len(lo))
                    self.mem.access(box, write, self.th, loc, self.what,
                                    ranges=tuple(zip(lo, hi)))
        return (0 if self.gone is None else int(self.gone.sum())), self.yield_loc

    def exec(self, stmts) -> None:
        for s in stmts:
            if self.count == 0:  # every lane here yielded
                return
            loc = s.loc if s.loc is not None else self.th.loc
            self.th.loc = loc
            self.sched.step(loc)
            self.sched.steps += self.count - 1
            t = type(s)
            if t is ir.Let:
                self.env[s.name] = self.ev(s.value, self.env, loc)
            elif t is ir.Var:
                self.types[s.name] = s.dtype
                self.env[s.name] = self._round(self.ev(s.init, self.env, loc), s.dtype, loc)
            elif t is ir.Assign:
                self.assign(s, loc)
            elif t is ir.If:
                self.s_if(s, loc)
            elif t is ir.For:
                self.s_for(s, loc)
            elif t is ir.While:
                self.s_while(s, loc)
            elif t is ir.BufStore:
                box = self.resolve(s.view, loc)
                idx = [self.ev(i, self.env, loc) for i in s.index]
                if s.atomic:
                    cmp = self.ev(s.compare, self.env, loc) if s.compare is not None else None
                    self.atomic(s, box, idx, self.ev(s.value, self.env, loc), cmp, loc)
                else:
                    self.store(box, idx, self.ev(s.value, self.env, loc), loc)
            elif t is ir.ViewDef:
                self.env[s.name] = self.resolve(s.view, loc)
            elif t is ir.SyncShared:  # every lane is here: earlier accesses are ordered
                if self.guarded and self.count != self.n:  # some lanes only: see _Diverged
                    raise _Diverged
                self.accesses.settle()
            elif t is ir.Yield:
                self.s_yield(loc)
            elif t is ir.SyncWarp and self.n * self.s.threads <= 32:
                # The region's instances are one warp: its barrier orders them all. In a
                # wider region it orders nothing here (a race across warps stays one; one
                # inside a warp is then reported too: stricter than the GPU).
                self.accesses.settle()

    # ---------------------------------------------------------------- masks
    def active_any(self, cond) -> bool:
        if not isinstance(cond, torch.Tensor):
            return bool(cond) and self.count > 0
        if self.mask is not None:
            cond = cond & self.mask
        return bool(cond.any())

    def first_lane(self, cond) -> int:
        c = cond if self.mask is None else cond & self.mask
        return int(torch.nonzero(c.expand(self.n))[0])

    def lane_names(self, cond) -> str:
        c = cond if self.mask is None else cond & self.mask
        lanes = torch.nonzero(c.expand(self.n)).flatten().tolist()
        more = f" (and {len(lanes) - 1} more)" if len(lanes) > 1 else ""
        return f"{self.s.var}={lanes[0]}{more}"

    @contextmanager
    def reads_under(self, cond):
        """The reads evaluated inside touch only the lanes `cond` selects (an arm of a
        `?:`, the right side of `&&`/`||`: C evaluates it only there)."""
        saved = self.mask, self.count
        c = torch.as_tensor(cond, dtype=torch.bool).expand(self.n)
        self.mask = c if self.mask is None else self.mask & c
        self.count = int(self.mask.sum())
        if self.guarded and self.count == self.n:
            self.mask = None
        try:
            yield
        finally:
            self.mask, self.count = saved

    def _masked(self, mask, fn) -> None:
        saved = self.mask, self.count
        self.mask = mask if self.gone is None else mask & ~self.gone
        self.count = int(self.mask.numpy().sum())
        if self.guarded and self.count == self.n:  # every lane: no mask to apply
            self.mask = None
        try:
            if self.count:
                fn()
        finally:
            self.mask, self.count = saved
            if self.gone is not None:  # lanes that yielded inside stay out
                self._leave_out()

    def _leave_out(self) -> None:
        base = self.mask if self.mask is not None else torch.ones(self.n, dtype=torch.bool)
        self.mask = base & ~self.gone
        self.count = int(self.mask.sum())

    def s_yield(self, loc) -> None:
        """The active lanes leave the kernel: no later statement runs for them."""
        active = self.mask if self.mask is not None else torch.ones(self.n, dtype=torch.bool)
        self.gone = active if self.gone is None else self.gone | active
        if self.yield_loc is None:
            self.yield_loc = loc
        self._leave_out()

    def _cond(self, e, loc):
        c = self.ev(e, self.env, loc)
        if isinstance(c, torch.Tensor):
            c = c != 0 if c.dtype != torch.bool else c
            return c if self.mask is None else c & self.mask
        if not isinstance(c, (bool, int, float)):
            raise InterpError("a condition must be a scalar", loc)
        return bool(c)

    # ---------------------------------------------------------------- statements
    def assign(self, s, loc) -> None:
        if s.name not in self.env:
            raise InterpError(f"assignment to '{s.name}', which has no value here", loc)
        dtype = self.types.get(s.name, s.value.dtype)
        v = self._round(self.ev(s.value, self.env, loc), dtype, loc)
        if self.mask is not None:
            lt = lane_dtype(dtype)
            v = torch.where(self.mask, torch.as_tensor(v, dtype=lt),
                            torch.as_tensor(self.env[s.name], dtype=lt))
        self.env[s.name] = v

    def _round(self, v, dtype: str, loc):
        """`round_to`; in a guarded run a float the threads could not convert to an
        integer type (NaN, infinite, 2^63 or more) is a fault, as it is for them."""
        if self.guarded:
            convertible(self, v, dtype, loc)
        return round_to(v, dtype)

    def s_if(self, s, loc) -> None:
        c = self._cond(s.cond, loc)
        if not isinstance(c, torch.Tensor):
            self.exec(s.then if c else s.orelse)
            return
        base = self.mask
        self._masked(c, lambda: self.exec(s.then))
        if s.orelse:
            self._masked(~c if base is None else base & ~c, lambda: self.exec(s.orelse))

    def s_for(self, s, loc) -> None:
        i, stop, step = (self.ev(e, self.env, loc) for e in (s.start, s.stop, s.step))
        for v in (i, stop, step):
            if isinstance(v, float) or (isinstance(v, torch.Tensor) and v.is_floating_point()):
                raise InterpError(f"foreach bound {v!r} is not an integer", loc)
        if isinstance(step, torch.Tensor):
            if bool(self.active_any(step == 0)):
                raise InterpError("foreach with a zero step", loc)
        elif step == 0:
            raise InterpError("foreach with a zero step", loc)
        if not any(isinstance(v, torch.Tensor) for v in (i, stop, step)):
            i, stop, step = int(i), int(stop), int(step)
            while i < stop if step > 0 else i > stop:
                self.env[s.var] = i
                self.exec(s.body)
                i += step
            return
        i = torch.as_tensor(i).expand(self.n).clone()
        mask = self.mask
        while True:
            go = torch.where(torch.as_tensor(step) > 0, i < stop, i > stop)
            mask = go if mask is None else mask & go
            if not bool(mask.any()):
                return
            self.env[s.var] = i
            self._masked(mask, lambda: self.exec(s.body))
            i = i + step

    def s_while(self, s, loc) -> None:
        mask = self.mask  # the lanes still in the loop; None: all of them
        while True:
            c = self._cond(s.cond, loc)
            if isinstance(c, torch.Tensor):
                mask = c if mask is None else mask & c
            elif not c:
                return
            if mask is None:
                self.exec(s.body)
            elif not bool(mask.any()):
                return
            else:
                self._masked(mask, lambda: self.exec(s.body))

    # ---------------------------------------------------------------- evaluator hooks
    def buf_elem(self, e: ir.BufElem, env):
        # an index out of bounds is the read's own fault; a race names its statement
        at = e.loc or self.th.loc
        return self.read(self.resolve(e.view, at), [self.ev(i, env, at) for i in e.index],
                         self.th.loc, at)

    def elem(self, e: ir.Elem, env):
        raise InterpError(f"element of fragment '{e.frag}' read in per-thread code", self.th.loc)

    # ---------------------------------------------------------------- views and elements
    def _int(self, e, loc):
        v = self.ev(e, self.env, loc)
        if isinstance(v, torch.Tensor):
            if v.is_floating_point() or v.dtype == torch.bool:
                raise InterpError(f"expected an integer, got {v.dtype} lanes", loc)
            return v
        if isinstance(v, float):
            raise InterpError(f"expected an integer, got {v!r}", loc)
        return int(v)

    def resolve(self, view: ir.View, loc):
        """A view as (base, slot, starts, sizes, keep); starts and slot may be lane tensors.
        A view that nothing in the body changes (`fixed_view`) is resolved once per run."""
        box = self.views.get(id(view))
        if box is None:
            box = self._resolve(view, loc)
            if self.count and fixed_view(view, self.bound):
                self.views[id(view)] = box
        return box

    def _resolve(self, view: ir.View, loc):
        offs = [self._int(e, loc) for e in view.offsets]
        sizes = []
        for e in view.extents:
            n = self._int(e, loc)
            if isinstance(n, torch.Tensor):
                raise InterpError("a view's extent differs between the instances of "
                                  f"parallel {self.s.var}", loc)
            sizes.append(n)
        slot = None if view.slot is None else self._int(view.slot, loc)
        keep = list(view.keep)
        parent = self.env.get(view.base)
        if isinstance(parent, (Box, _LaneBox)):
            box = _compose(parent, offs, sizes, keep, slot, loc, make=_LaneBox)
        elif view.base in self.mem.tensors:
            box = _LaneBox(view.base, slot, offs, sizes, keep)
        else:
            raise InterpError(f"'{view.base}' is not a tensor, buffer or view", loc)
        self._check(box, loc)
        return box

    def _check(self, box: "_LaneBox", loc) -> None:
        t = self.mem.tensors[box.base]
        count = self.mem.counts[box.base]
        if count is not None:
            if box.slot is None:
                raise InterpError(f"'{box.base}' is an array of {count} buffers; a slot is needed", loc)
            bad = (box.slot < 0) | (box.slot >= count)
            if self.active_any(bad):
                raise InterpError(f"slot of '{box.base}' is out of range [0, {count}) in "
                                  f"{self._names(bad)}", loc)
            t = t[0]
        elif box.slot is not None:
            raise InterpError(f"'{box.base}' is not an array of buffers", loc)
        if len(box.starts) != t.dim():
            raise InterpError(f"view of rank {len(box.starts)} over '{box.base}' of rank {t.dim()}", loc)
        if any(n < 0 for n in box.sizes):
            raise InterpError(f"negative extent in a view of '{box.base}'", loc)
        if self.mem.storage[box.base] != "global":
            for s, n, d in zip(box.starts, box.sizes, t.shape):
                bad = (s < 0) | (s + n > d)
                if self.active_any(bad):
                    raise InterpError(f"a view of buffer '{box.base}' {list(t.shape)} is out of "
                                      f"bounds in {self._names(bad)}", loc)

    def _names(self, cond) -> str:
        if isinstance(cond, torch.Tensor):
            return "instance " + self.lane_names(cond)
        return f"every instance of parallel {self.s.var}"

    def _positions(self, box: "_LaneBox", idx, loc):
        """Per base dimension (slot first, if any), the element's index: an int or lanes."""
        if len(idx) != sum(box.keep):
            raise InterpError(f"{len(idx)} indices for a view of rank {sum(box.keep)} "
                              f"of '{box.base}'", loc)
        for i in idx:
            if isinstance(i, float) or (isinstance(i, torch.Tensor) and i.is_floating_point()):
                raise InterpError(f"element index {i!r} is not an integer", loc)
        t = self.mem.tensors[box.base]
        shape = t.shape[1:] if box.slot is not None else t.shape
        pos, checks, it = [], [], iter(idx)
        for d, (s, n, k) in enumerate(zip(box.starts, box.sizes, box.keep)):
            if k:
                i = next(it)
                checks.append((i, n, d, True))
                s = i if type(s) is int and s == 0 else s + i  # (a torch op saved)
            pos.append(s)
            if not (k and isinstance(box.starts[d], int) and 0 <= box.starts[d]
                    and box.starts[d] + n <= shape[d]):  # else implied by the view's check
                checks.append((s, shape[d], d, False))
        if any(self._outside(v, n) for v, n, _, _ in checks):
            self._bounds_fault(box, shape, checks, loc)
        if box.slot is not None:
            pos.insert(0, box.slot)
        if self.mask is not None:  # inactive lanes may hold any index: make it a valid one
            pos = [torch.where(self.mask, p, 0) if isinstance(p, torch.Tensor) else p for p in pos]
        return pos

    def _outside(self, v, n: int) -> bool:
        """Whether an active lane's index `v` is outside [0, n): one reduction over the
        lanes (its lowest and highest index), not a test per lane."""
        if not isinstance(v, torch.Tensor):
            return self.count > 0 and not 0 <= v < n
        if self.mask is not None:
            v = v.expand(self.n)[self.mask]
        if v.numel() == 0:
            return False
        lo, hi = torch.aminmax(v)
        return int(lo) < 0 or int(hi) >= n

    def _bounds_fault(self, box, shape, checks, loc):
        """Names the first failing check and the first lane that fails it."""
        for v, n, d, in_view in checks:
            c = (v < 0) | (v >= n)
            if self.active_any(c):
                what = (f"outside extent {n} of dimension {d} of a view of '{box.base}'"
                        if in_view else f"outside '{box.base}' {list(shape)} (dimension {d})")
                if isinstance(v, torch.Tensor):
                    v = int(v.expand(self.n)[self.first_lane(c)])
                raise InterpError(f"index {v} {what} in {self._names(c)}", loc)

    def read(self, box: "_LaneBox", idx, loc, at=None):
        """`at`: where a fault of the index is reported (the read itself; default `loc`)."""
        pos = self._positions(box, idx, at or loc)
        t = self.mem.tensors[box.base]
        self._account(box, pos, False, loc)
        code_type = self.mem.codes.get(box.base)
        if code_type is not None:  # a sub-byte type's codes (choreo_py/ir/subbyte.py)
            v = subbyte.decode(t[tuple(pos)], code_type)
            return v.item() if v.dim() == 0 else v
        if not any(isinstance(p, torch.Tensor) for p in pos):
            return t[tuple(pos)].item()
        v = t[tuple(pos)]
        if v.dtype == torch.bool or v.dtype == torch.float64:
            return v
        return v.float() if v.is_floating_point() else v.to(torch.int64)

    def store(self, box: "_LaneBox", idx, value, loc) -> None:
        pos = self._positions(box, idx, loc)
        t = self.mem.tensors[box.base]
        self._account(box, pos, True, loc)
        code_type = self.mem.codes.get(box.base)
        if code_type is not None:
            value = subbyte.encode(torch.as_tensor(value), code_type)
        if not any(isinstance(p, torch.Tensor) for p in pos) and not isinstance(value, torch.Tensor):
            self._keep(t, tuple(pos))
            t[tuple(pos)] = value
            return
        if self.mask is None:
            self._keep(t, tuple(pos))
            t[tuple(pos)] = torch.as_tensor(value).to(t.dtype)
            return
        lanes = torch.nonzero(self.mask).flatten()
        full = tuple(torch.as_tensor(p).expand(self.n)[lanes] for p in pos)
        self._keep(t, full)
        t[full] = torch.as_tensor(value).expand(self.n)[lanes].to(t.dtype)

    def _keep(self, t: torch.Tensor, index: tuple) -> None:
        """A guarded run notes what a store overwrites, to put it back (`attempt`)."""
        if self.journal is not None:
            self.journal.append((t, index, t[index].clone()))

    def atomic(self, s: ir.BufStore, box: "_LaneBox", idx, value, cmp, loc) -> None:
        """Every active lane updates its element; lanes updating the same element all
        count (atomics do not race with each other). An add is one accumulating scatter;
        the other operations run lane by lane in lane order (one order the hardware may
        take: only exch and cas to a shared element depend on it)."""
        pos = self._positions(box, idx, loc)
        t = self.mem.tensors[box.base]
        lanes = self.lanes if self.mask is None else torch.nonzero(self.mask).flatten()
        full = tuple(torch.as_tensor(p).expand(self.n)[lanes] for p in pos)
        self._keep(t, full)
        vals = torch.as_tensor(value).expand(self.n)[lanes]
        dtype = s.value.dtype
        if s.atomic == "add" and dtype not in ("u32", "u64") and s.result is None:
            t.index_put_(full, vals.to(t.dtype), accumulate=True)  # s32, s64, f32
            return
        cmps = torch.as_tensor(cmp).expand(self.n)[lanes] if cmp is not None else None
        olds = []
        for k in range(len(lanes)):
            at = tuple(int(p[k]) for p in full)
            olds.append(atomics.c_value(t[at].item(), dtype))
            t[at] = atomics.combine(s.atomic, t[at].item(), vals[k].item(),
                                    None if cmps is None else cmps[k].item(), dtype)
        if s.result is not None:  # each active lane's old value, the others keep theirs
            lt = lane_dtype(dtype)
            got = torch.as_tensor(self.env[s.result], dtype=lt).expand(self.n).clone()
            got[lanes] = torch.tensor(olds, dtype=lt)
            self.env[s.result] = got

    # ---------------------------------------------------------------- races
    def _account(self, box: "_LaneBox", pos, write: bool, loc) -> None:
        """Records an element access of the active lanes (lane_races.py)."""
        if self.count == 0:
            return
        if self.mask is None:
            lanes = self.lanes_np
            full = [p.expand(self.n).numpy() if isinstance(p, torch.Tensor) else p for p in pos]
        else:
            on = self.mask.numpy()
            lanes = self.lanes_np[on]
            full = [(p.numpy()[on] if p.dim() else int(p)) if isinstance(p, torch.Tensor)
                    else p for p in pos]
        self.accesses.record(box.base, full, lanes, write, loc)


class _LaneBox:
    """A Box whose starts (and slot) may differ between lanes."""

    __slots__ = ("base", "slot", "starts", "sizes", "keep")

    def __init__(self, base, slot, starts, sizes, keep) -> None:
        self.base, self.slot = base, slot
        self.starts, self.sizes, self.keep = list(starts), list(sizes), list(keep)
