"""TMA: cp.async.bulk.tensor loads (global -> shared, completing on an mbarrier) and
stores (shared -> global, bulk groups), with the tensor map's box, swizzle and
zero fill out of bounds.

A load's box lands in shared memory, swizzled, when its transaction
completes: then the mbarrier's tx-count drops by the box's bytes (always the
full box, out-of-bounds elements included, as the hardware counts). Until
then the destination is an in-flight asynchronous write (races.py). A store
reads its shared source when it completes, at the latest when the issuing
thread's cp.async.bulk.wait_group(.read) retires its bulk async-group (until
then the source is an in-flight asynchronous read), and writes the in-bounds
part of the box to global memory when it completes (at the latest at
cp.async.bulk.wait_group, or at the end of the CTA). A wait_group after a
store that no commit_group committed, and a CTA that exits with a store's
source read not retired, are reported (_dec_bulk_wait, check_exit).
"""
from __future__ import annotations

import numpy as np

from .isa_table import Unsupported, decoder
from .operands import address_reader, operand_reader, symbol_value
from .swizzle import swizzle


def _box_slices(tmap, coords):
    """(box slices, global slices) of the in-bounds part, outermost first; None if empty."""
    bs, gs = [], []
    for c, b, d in zip(reversed(coords), reversed(tmap.box), reversed(tmap.dims)):
        lo, hi = max(c, 0), min(c + b, d)
        if hi <= lo:
            return None
        bs.append(slice(lo - c, hi - c))
        gs.append(slice(lo, hi))
    return tuple(bs), tuple(gs)


def box_smem_addrs(tmap, dst: int) -> np.ndarray:
    """Shared byte address of each byte of the box (outermost-first order), swizzled."""
    return swizzle(dst + np.arange(tmap.box_bytes, dtype=np.int64), tmap.swizzle)


def _check_tmap(w, tmap, coords, inst) -> None:
    if len(coords) != len(tmap.dims):
        raise w.machine.misuse(f"{len(coords)} coordinates for the {len(tmap.dims)}-d tensor map "
                               f"{tmap.name}", inst)
    if (coords[0] * tmap.esize) % 16:
        # PTX ISA 5.5.3.1 (tiled mode, bounding box): "the address of the bounding box must
        # be aligned to 16 bytes"; the strides are 16-byte multiples (the driver checks), so
        # the innermost coordinate decides. The H200 stops such a store with an illegal
        # instruction (the varlen example's LSE store at a sequence's first row, 1078)
        raise w.machine.misuse(f"tensor map {tmap.name}: the box starts at innermost "
                               f"coordinate {coords[0]}, {coords[0] * tmap.esize} bytes into "
                               f"its row, not a multiple of 16 (PTX ISA 5.5.3.1)", inst)
    if tmap.swizzle and tmap.box[0] * tmap.esize > tmap.swizzle:
        raise w.machine.misuse(f"tensor map {tmap.name}: inner box of {tmap.box[0] * tmap.esize} "
                               f"bytes exceeds the {tmap.swizzle}B swizzle span", inst)


def _operands(inst, m):
    tm = next(op for op in inst.operands if op.kind == "tmap")
    base = operand_reader(tm.base, "u64", m) if tm.base.kind == "reg" else None
    if base is None:
        c = np.full(32, symbol_value(tm.base.value, m), dtype=np.uint64)
        base = lambda w: c  # noqa: E731
    coords = [operand_reader(c, "s32", m) for c in tm.items]
    return tm, base, coords


def _tmap_of(w, base, lane, inst):
    t = w.machine.launch.params.tmap_at(int(base(w)[lane]))
    if t is None:
        raise w.machine.misuse(f"no tensor map at address {int(base(w)[lane]):#x}", inst)
    return t


@decoder("cp.async.bulk.tensor")
def _dec_tma(inst):
    from .isa_support import machine
    m = machine()
    parts = inst.parts
    if parts[5].startswith("shared") and parts[6] == "global":
        return _tma_load(inst, m)
    if parts[5] == "global" and parts[6].startswith("shared"):
        return _tma_store(inst, m)
    raise Unsupported(f"'{inst.opcode}'")


def _tma_load(inst, m):
    if any(p.startswith("multicast") for p in inst.parts) or "im2col" in inst.parts:
        raise Unsupported(f"'{inst.opcode}' (multicast / im2col)")
    dst = address_reader(inst.operands[0], m)
    tm, base, coords = _operands(inst, m)
    mbar = address_reader(inst.operands[2], m)

    def ex(w):
        cta = w.cta
        issued = cta.hb.release(w.warp_id)  # the copy is ordered after what w did before
        for lane in np.flatnonzero(w.mask):
            tmap = _tmap_of(w, base, lane, inst)
            cs = [int(c(w)[lane]) for c in coords]
            _check_tmap(w, tmap, cs, inst)
            d = int(dst(w)[lane])
            bar = cta.mbarrier(int(mbar(w)[lane]))
            n = tmap.box_bytes
            if d < cta.smem_base or d + n > cta.smem.size or d % 128:
                raise w.machine.misuse(f"TMA destination {d:#x} ({n} bytes) outside shared memory "
                                       f"or not 128-byte aligned", inst)
            what = f"the TMA copy of {tmap.name} at {m.where(inst)}"
            rec = cta.races.async_write_begin(inst, d, d + n, what)

            def land(tmap=tmap, cs=cs, d=d, bar=bar, rec=rec, what=what):
                cta.races.async_write_end(rec)
                box = np.zeros(tuple(reversed(tmap.box)) + (tmap.esize,), dtype=np.uint8)
                sl = _box_slices(tmap, cs)
                if sl is not None:
                    box[sl[0]] = m.launch.gmem.elements(tmap)[sl[1]]
                addrs = box_smem_addrs(tmap, d)
                cta.smem[addrs] = box.reshape(-1)
                clock = _landed(cta, inst, bar, addrs, issued, what)
                bar.complete_tx(n, clock)
            cta.schedule(land, what, inst)
    return ex


def _landed(cta, inst, bar, addrs, issued, what):
    """A TMA load's writes, by the ("tma", mbarrier) agent at the phase its complete_tx
    counts toward, checked against the accesses its issue was ordered after; returns the
    clock its complete_tx releases into the mbarrier (hb.py)."""
    hb = cta.hb
    agent = hb.agent(("tma", bar.addr), f"the TMA loads completing on the mbarrier at "
                                        f"{bar.addr:#x}")
    epoch = bar.phase + 1
    clock = hb.padded(issued).copy()
    clock[agent] = max(int(clock[agent]), epoch)
    cells = np.unique(addrs[::4] >> 2)
    cta.races.hb_check(inst, cells, True, agent, epoch, clock, what)
    return clock


def _bulk_groups(w):
    return w.async_state.setdefault("bulk", {"open": [], "groups": []})


def _tma_store(inst, m):
    tm, base, coords = _operands(inst, m)
    src = address_reader(inst.operands[1], m)

    def ex(w):
        cta = w.cta
        st = _bulk_groups(w)
        for lane in np.flatnonzero(w.mask):
            tmap = _tmap_of(w, base, lane, inst)
            cs = [int(c(w)[lane]) for c in coords]
            _check_tmap(w, tmap, cs, inst)
            s = int(src(w)[lane])
            n = tmap.box_bytes
            key = ("bulk", w.warp_id, id(inst), cta.step, int(lane))
            cta.races.async_read(inst, s, s + n, f"the TMA store at {m.where(inst)}", key)
            epoch = _bulk_read(cta, w, inst, tmap, s)
            op = {"done": False, "read_done": False, "key": key, "epoch": epoch,
                  "data": None, "inst": inst}

            def read(tmap=tmap, s=s, op=op):
                """The source read, when it completes (at the latest when retired)."""
                if op["data"] is None:
                    shape = tuple(reversed(tmap.box)) + (tmap.esize,)
                    op["data"] = cta.smem[box_smem_addrs(tmap, s)].reshape(shape).copy()

            def land(tmap=tmap, cs=cs, op=op, read=read):
                if op["done"]:
                    return
                op["done"] = True
                read()
                # the source stays an in-flight read until the thread's wait_group(.read):
                # the only completion the program can observe
                sl = _box_slices(tmap, cs)
                if sl is not None:
                    m.launch.gmem.elements(tmap)[sl[1]] = op["data"][sl[0]]
            op["read"], op["land"] = read, land
            st["open"].append(op)
            cta.schedule(land, f"the TMA store of {tmap.name}", inst)
    return ex


def _bulk_agent(cta, w) -> int:
    return cta.hb.agent(("bulk", w.warp_id), f"the bulk stores of warp {w.warp_id}")


def _bulk_read(cta, w, inst, tmap, s: int) -> int:
    """A bulk store's read of its source: by the ("bulk", warp) agent, ordered after what
    the issuing warp did before (a st.shared of another warp must be ordered before the
    issue); retired for the issuing warp only, by its wait_group(.read) (hb.py)."""
    hb = cta.hb
    agent = _bulk_agent(cta, w)
    epoch = hb.epochs[agent] = hb.epochs.get(agent, 0) + 1
    clock = hb.padded(hb.vc[w.warp_id]).copy()
    clock[agent] = epoch
    cells = np.unique(box_smem_addrs(tmap, s)[::4] >> 2)
    cta.races.hb_check(inst, cells, False, agent, epoch, clock, "the TMA store")
    return epoch


def _bulk_retired(w, epoch: int) -> None:
    """wait_group(.read) retiring a bulk store: the waiting warp is ordered after its read."""
    hb = w.cta.hb
    agent = _bulk_agent(w.cta, w)
    c = hb.vc[w.warp_id]
    if agent >= c.size:
        c = hb.vc[w.warp_id] = hb.padded(c)
    c[agent] = max(int(c[agent]), epoch)


@decoder("cp.async.bulk.commit_group")
def _dec_bulk_commit(inst):
    def ex(w):
        st = _bulk_groups(w)
        st["groups"].append(st["open"])
        st["open"] = []
    return ex


@decoder("cp.async.bulk.wait_group")
def _dec_bulk_wait(inst):
    """PTX ISA, "cp.async.bulk.commit_group": the bulk stores a thread issued and did not
    commit yet form a bulk async-group at its next commit_group; "cp.async.bulk.wait_group":
    `wait_group N` waits until at most the N most recent bulk async-groups of the thread
    are pending, `.read` only until their reads of the source are complete. A wait covers
    committed groups only: a store issued before it and not committed is not waited for,
    which strict mode reports (relaxed: a note; its source read stays in flight)."""
    from .isa_support import machine
    n = operand_reader(inst.operands[0], "u32", machine())
    read_only = "read" in inst.parts

    def ex(w):
        st = _bulk_groups(w)
        keep = int(n(w)[0])
        if st["open"]:
            _uncommitted(w, inst, st["open"][0]["inst"], keep)
        older = st["groups"][:len(st["groups"]) - keep] if keep else st["groups"]
        for group in older:
            for op in group:
                if not op["read_done"]:
                    _retire(w, op)
                if not read_only:
                    op["land"]()
        if not read_only:
            st["groups"] = st["groups"][len(older):]
    return ex


def _retire(w, op) -> None:
    op["read"]()
    op["read_done"] = True
    w.cta.races.release(op["key"])
    _bulk_retired(w, op["epoch"])


def _uncommitted(w, inst, store, keep: int) -> None:
    w.machine.race(
        f"{inst.opcode} {keep} waits for committed bulk async-groups only, and the TMA store "
        f"at {w.machine.where(store)} was issued and not committed (no "
        f"cp.async.bulk.commit_group between them): its source may still be read after the "
        f"wait (PTX ISA, cp.async.bulk.commit_group / wait_group)", inst, store,
        relaxable=True)


def check_exit(cta) -> None:
    """At the CTA's exit every bulk store's source read must have been retired by its
    thread's wait_group(.read): the CTA's shared memory is released at exit (PTX ISA,
    "cp.async.bulk.wait_group": only the wait makes the source reads complete)."""
    for w in cta.warps:
        st = w.async_state.get("bulk")
        if not st:
            continue
        for op in [op for g in st["groups"] for op in g] + st["open"]:
            if not op["read_done"]:
                committed = op not in st["open"]
                cta.machine.race(
                    f"the CTA exits while the TMA store at {cta.machine.where(op['inst'])} "
                    f"(warp {w.warp_id}) may still read its shared-memory source: "
                    + ("no cp.async.bulk.wait_group.read retired its bulk async-group"
                       if committed else "it was never committed to a bulk async-group, "
                       "so no cp.async.bulk.wait_group waits for it")
                    + " (PTX ISA, cp.async.bulk.wait_group)", op["inst"], relaxable=True)
