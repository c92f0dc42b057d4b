"""The design kernel's census for the performance model (bench/model.py): the seed's
hand-written Blackwell FlashAttention (/work/shared/seeds/pyptx_flash_attention_blackwell.txt,
its 1-CTA builder; bench/reference/pyptx_fa_blackwell.py restores it), described from
its source and checked against its PTX. Its PTX (traced with the installed pyptx, as
bench/emu_design_kernel.py does) is hand-written control flow: roles are if/else on
the warp index and barrier addresses are computed registers, so bench/model_ptx.py
finds its step loops and counts them (`counts_from_ptx`; tests/test_model.py checks the
numbers below against it) but cannot pair its waits with their signals: the role
programs are read off the source by hand (line numbers of the restored source,
`python bench/reference/pyptx_fa_blackwell.py -o F`).

Per K/V step (one 128-key tile for both 128-row Q stages):
- MMA warp, one thread (`pv_mma` l. 475-499, the steady loop l. 536-563): per stage
  pv_mma (4 quarter waits, 8 x M128 N128 K16 with A = P in tensor memory) then
  qk_mma (8 x M128 N128 K16, A = Q and B = K in shared memory), each committed; the
  K/V waits are hoisted before both stages; 12 waits. Its PTX loop (`mma_loop`) does
  two K/V steps a trip: 363 instructions, 181.5 a step.
- load warp, one thread (`load_kv`): a K and a V tile, 2 x 32 KB; its loop
  (`kv_load_loop`) loads two steps a trip: 71 instructions, 35.5 a step.
- softmax, 2 warpgroups (one per stage), one row per thread, 128 columns in 4 chunks:
  per chunk 12 pairs through ex2 (fma + ex2 each) and 4 pairs through the degree-3
  polynomial (emu_pairs=(1,3,5,7): 18 instructions a pair), 16 cvt.bf16x2,
  tcgen05.ld/st, wait, fence, arrive, and the running max/sum (52); plus the deferred
  tail (about 30): 814 instructions and 96 ex2 a thread (its PTX loop `softmax_loop`:
  814 and 96, less a 4-instruction branch it skips). It releases O_RESC itself
  when no row rescales (l. 1037: "softmax already released O_RESC when nothing
  rescales"), so in that case PV waits only for P.
- correction, 1 warpgroup (`corr_loop` l. 1009-1052), the skip case (a row max that
  grew by less than 2^8 leaves O alone; for N(0,1) inputs after the first tiles that
  is every row): per stage it reads alpha after the softmax's stats barrier, frees
  the stats slot, waits for PV's completion; 36 instructions a step (`corr_loop` less
  its two rescale branches). Nothing on the MMA path waits for it in that case.
Once per item: the peeled first QK of both stages and the last PV of both (one step's
MMAs), the first softmax body, no round trip on the path (persistent: the next item's
Q is loaded while the last PVs run).

The role programs index trips as the MMA loop does: MMA trip j issues PV(j) and
QK(j+1) for both stages; the peeled prologue (QK(0) of both stages, K(0) consumed)
is the programs' `pre` counts.
"""
from __future__ import annotations

import model_ptx
from model_ptx import Mix, Mma, Op, Role


# Per K/V step, from the PTX loops (see the docstring; `counts_from_ptx` measures them;
# the softmax's 49 `mov.b64` of f32x2 operand pairs are not instructions: model_ptx.PAIR_MOVE).
LOAD_INSTR, MMA_INSTR, SOFTMAX_INSTR, SOFTMAX_EX2, CORR_INSTR = 35.5, 181.5, 765, 96, 36


def _work(n: float, sfu: int = 0) -> Op:
    return Op("work", mix=Mix(instr=n, ex2=sfu, sfu=sfu))


def _programs() -> dict:
    pv = {s: tuple(Mma(128, 128, 16, "tmem", 2 * s) for _ in range(8)) for s in (0, 1)}
    qk = {s: tuple(Mma(128, 128, 16, "smem", 2 * s + 1) for _ in range(8)) for s in (0, 1)}
    third = LOAD_INSTR / 3   # the load's instructions spread over its three gaps
    load = [_work(third), Op("wait", "k_free", lag=2), Op("tma", "k_full", nbytes=32768),
            _work(third), Op("wait", "v_free", lag=2), Op("tma", "v_full", nbytes=32768),
            _work(third)]
    fifth = MMA_INSTR / 5    # before the stages, each stage's PV and QK issue, after
    mma = [_work(fifth / 2), Op("wait", "k_full"), Op("wait", "v_full")]
    for s in (0, 1):
        mma += [Op("wait", f"p_full{s}"), _work(fifth), Op("mma", mmas=pv[s]),
                Op("commit", f"pv_done{s}"), _work(fifth), Op("mma", mmas=qk[s]),
                Op("commit", f"s_full{s}")]
    mma += [Op("commit", "k_free"), Op("commit", "v_free"), _work(fifth / 2)]
    softmax = {s: [Op("wait", f"s_full{s}"), Op("wait", f"stats_free{s}", lag=1),
                   _work(SOFTMAX_INSTR, SOFTMAX_EX2), Op("arrive", f"p_full{s}"),
                   Op("arrive", f"stats{s}")] for s in (0, 1)}
    corr = []
    for s in (0, 1):
        corr += [Op("wait", f"stats{s}"), _work(CORR_INSTR / 6), Op("arrive", f"stats_free{s}"),
                 Op("wait", f"pv_done{s}"), _work(CORR_INSTR / 3)]
    return {"load": load, "mma": mma, "softmax0": softmax[0], "softmax1": softmax[1],
            "correction": corr}


def census() -> model_ptx.KernelCensus:
    prog = _programs()
    mmas = [x for op in prog["mma"] if op.kind == "mma" for x in op.mmas]
    pre_mma = {"k_full": (1, 0), "s_full0": (0, 1), "s_full1": (0, 1), "k_free": (0, 1)}

    def soft():
        return Mix(instr=SOFTMAX_INSTR, ex2=SOFTMAX_EX2, sfu=SOFTMAX_EX2, waits=2, bars=1)
    roles = [
        Role("load", 1, 1, Mix(instr=LOAD_INSTR, waits=2, tma_bytes=65536, tma_loads=4),
             Mix(instr=LOAD_INSTR, tma_bytes=65536, tma_loads=4), prog["load"]),
        Role("mma", 1, 1, Mix(instr=MMA_INSTR, waits=12, mmas=mmas),
             Mix(instr=MMA_INSTR, waits=12, mmas=mmas), prog["mma"], pre_mma),
        Role("softmax0", 1, 128, soft(), soft(), prog["softmax0"]),
        Role("softmax1", 1, 128, soft(), soft(), prog["softmax1"]),
        Role("correction", 1, 128, Mix(instr=CORR_INSTR, waits=2, bars=2),
             Mix(instr=CORR_INSTR, waits=1, bars=2), prog["correction"]),
    ]
    return model_ptx.KernelCensus("flash_attention_blackwell (design)", 4, roles)


def counts_from_ptx(ptx: str) -> dict:
    """Per K/V step of each step loop of the design's PTX: role -> (instructions, ex2,
    MMAs, waits). A loop's steps per trip: its TMA bytes / 64 KB (the load) or its MMAs
    / 32 (the MMA thread: 2 stages x (8 QK + 8 PV)); the others do one step a trip."""
    lines = model_ptx._statements(ptx)
    loops, idescs = model_ptx._loops(lines), model_ptx._idescs(lines)
    busy = [lp for lp in loops if not lp[2] and (model_ptx._busy(lines, lp)
                                                 or model_ptx._waits(lines, lp))]
    out = {}
    for lp in busy:
        if any(model_ptx._contains(lp, o) for o in busy):
            continue
        every, _ = model_ptx.split_guarded(lines[lp[0]:lp[1] + 1])
        m = model_ptx.mix_of(every, idescs)
        role = ("load" if m.tma_bytes else "mma" if m.mmas else "softmax" if m.ex2
                else "correction")
        steps = m.tma_bytes / 65536 if m.tma_bytes else len(m.mmas) / 32 if m.mmas else 1
        out[role] = (m.instr / steps, m.ex2 / steps, len(m.mmas) / steps, m.waits / steps)
    return out
