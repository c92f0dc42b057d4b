"""The grid-wide barrier of a cooperative launch (`sync.barrier : block` in a
`parallel ... : block<cooperative>` kernel), in thread kernels.

The launcher gives the kernel two zeroed 32-bit words in global memory
(`ptr___grid_sync`: arrivals, then the generation) and launches it with
cuLaunchCooperativeKernel, which refuses a grid whose blocks cannot all be
resident: every block runs, so each can wait for the others. One barrier:

    bar.sync 0                          the block's threads are here, their writes before
    thread 0:
      fence.acq_rel.gpu                 ... those writes ordered before the arrival, gpu-wide
      gen = ld.relaxed [generation]     read before arriving: the last arrival bumps it
      old = atom.acq_rel.add [arrivals], 1
      last (old == blocks - 1):         every other block has arrived
        st.relaxed [arrivals], 0        reset for the next barrier, before the release below
        red.release.add [generation], 1
      others: spin on ld.acquire [generation] until it differs from gen
      fence.acq_rel.gpu
    bar.sync 0                          the block's threads leave together

The generation makes the barrier reusable (a loop, several barriers): a block
arriving at the next one has seen the new generation, and with it the reset
count. The acquire/release pairs carry every block's writes before the barrier
to every read after it (the fences extend them to the block's other threads,
ordered by bar.sync at block scope).
"""
from __future__ import annotations

from .threads import barrier
from .writer import V

PARAM = "__grid_sync"


def pointer(lw) -> None:
    """The scratch words' global address (prologue of a cooperative kernel)."""
    w = lw.w
    r = w.reg("u64", "grid_sync_ptr")
    w.call("ptx.param", "u64", f'"ptr_{PARAM}"', f"dst={r.text}")
    lw.grid_sync = w.reg("u64", "grid_sync_g")
    w.op("cvta.to.global.u64", lw.grid_sync, r)


def _blocks(lw) -> V:
    w = lw.w
    n = w.reg("u32", "grid_blocks")
    w.op("mov.u32", n, 'ptx.sreg("%nctaid.x")')
    for axis in "yz":
        d = w.reg("u32", f"grid_n{axis}")
        w.op("mov.u32", d, f'ptx.sreg("%nctaid.{axis}")')
        w.op("mul.lo.u32", n, n, d)
    return n


def grid_sync(lw, s) -> None:
    w = lw.w
    barrier(lw)
    done = w.label("grid_synced")
    leader = w.reg("pred", "grid_leader")
    w.op("setp.ne.u32", leader, lw.tid, 0)
    w.bra(done, leader)
    base = lw.grid_sync
    gen_at = w.reg("u64", "grid_gen_at")
    w.op("add.u64", gen_at, base, 4)
    w.op("fence.acq_rel.gpu")
    gen = w.reg("u32", "grid_gen")
    w.op("ld.relaxed.gpu.global.u32", gen, f"ptx.addr({gen_at.text})")
    old = w.reg("u32", "grid_arrived")
    w.op("atom.acq_rel.gpu.global.add.u32", old, f"ptx.addr({base.text})", 1)
    last_n = _blocks(lw)
    w.op("sub.u32", last_n, last_n, 1)
    last = w.reg("pred", "grid_last")
    w.op("setp.eq.u32", last, old, last_n)
    spin, released = w.label("grid_spin"), w.label("grid_released")
    w.bra(spin, last, negate=True)
    w.op("st.relaxed.gpu.global.u32", f"ptx.addr({base.text})", 0)
    w.op("red.release.gpu.global.add.u32", f"ptx.addr({gen_at.text})", 1)
    w.bra(released)
    w.put_label(spin)
    now = w.reg("u32", "grid_gen_now")
    w.op("ld.acquire.gpu.global.u32", now, f"ptx.addr({gen_at.text})")
    same = w.reg("pred", "grid_same")
    w.op("setp.eq.u32", same, now, gen)
    w.bra(spin, same)
    w.put_label(released)
    w.op("fence.acq_rel.gpu")
    w.put_label(done)
    barrier(lw)


def fence(lw, s) -> None:
    """`sync.fence : block` / `: thread`: the thread's writes before it are seen before its
    later ones by the other blocks (`membar.gl`) / by the block's threads (`membar.cta`)."""
    lw.w.op("membar.gl" if s.scope == "gpu" else "membar.cta")
