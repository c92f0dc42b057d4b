"""examples/flash_atten_blackwell.co (non-causal; -D CAUSAL=1, as
flash_atten_blackwell_causal.co, causal): attention for sm_100a in FA4's shape on the
block's accumulators, in a persistent grid (one block per SM, NUM_SMS, walking work items
of two 128-row query tiles of one head; causal: longest first). A block's item has S0,
S1, O0, O1 in tensor memory (512 columns; P0 over S0, P1 over S1); five warpgroups: a
one-thread TMA load role, a one-thread MMA role, two softmax warpgroups (one per query
tile) that hand each row's rescale factor to a correction warpgroup through shared
memory, and the correction warpgroup that rescales O0 and O1 in tensor memory and stores
O / l. The emulator cases build it with a small NUM_SMS, so a block runs several items
(the rings, counters and the l hand-off cross items; an item's first PVs overwrite O).

The plan puts P0 and P1 in S0's and S1's columns (the loop form of the order proof admits
the KV loop);
the interpreter and the strict PTX emulator match torch's SDPA under several schedules
and shapes (a partial last query tile and a partial last KV tile among them); the
masking of the partial KV tile and the rescale of O are both needed (variants without
them do not match); ptxas accepts the PTX with no spills; sm_90a refuses it by name."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

import choreo_py
from choreo_py import cli
from choreo_py.driver import compile_file
from block_helpers import emulate_strict
from fa_helpers import bshd, rel

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "flash_atten_blackwell.co"
CAUSAL = ROOT / "examples" / "flash_atten_blackwell_causal.co"
BOTH = [EXAMPLE, CAUSAL]


def _inputs(sq, skv, h=1, grow=1, settle=1):
    """grow: keys past the first KV tile that many times larger. With randn inputs alone a
    row's max rarely grows by more than the softmax's threshold (8 in log2 units) after the
    first step, so O is not rescaled again; at 4 x (Q = 256, KV = 330) the rows of the
    second step grow by 3.9 to 23, some rescale and some keep m; at 40 x by 93 to 273, so a
    kept max overflows 2^128."""
    q, k, v = bshd(1, sq, h, 1), bshd(1, skv, h, 2), bshd(1, skv, h, 3)
    if grow != 1:
        k[:, 128:] *= grow
    if settle != 1:  # the first KV tile's keys that many times larger: its max stays
        k[:, :128] *= settle
    return q, k, v, torch.full_like(q, float("nan"))


def _sdpa(q, k, v, causal=False):
    t = [x.float().transpose(1, 2) for x in (q, k, v)]
    return torch.nn.functional.scaled_dot_product_attention(
        *t, is_causal=causal).transpose(1, 2)


def _interpret(path, sq, skv, h=1, causal=False, grow=1) -> float:
    q, k, v, o = _inputs(sq, skv, h, grow)
    choreo_py.interpret(str(path), dict(Q=q, K=k, V=v, O=o), target="sm_100a")
    return rel(o, _sdpa(q, k, v, causal)) if not o.float().isnan().any() else float("nan")


@pytest.mark.parametrize("path", BOTH, ids=lambda p: p.stem)
def test_the_plan_puts_p_over_s(path):
    text = compile_file(str(path), emit="ir", target="sm_100a")
    assert "tmem_alloc 512 used=512 role={1}" in text
    for line in ("tmem s0[0]: acc layout=D lanes=0+:128 cols=0+:128",
                 "tmem s1[0]: acc layout=D lanes=0+:128 cols=128+:128",
                 "tmem o0[0]: acc layout=D lanes=0+:128 cols=256+:128",
                 "tmem o1[0]: acc layout=D lanes=0+:128 cols=384+:128",
                 "tmem p0[0]: operand layout=D lanes=0+:128 cols=0+:64 in=s0",
                 "tmem p1[0]: operand layout=D lanes=0+:128 cols=128+:64 in=s1"):
        assert line in text
    roles = re.findall(r"role \(r == (\d)\) = \{(\d)\}(?: maxregs=(\d+))?", text)
    assert [(int(a), int(b)) for a, b, _ in roles] == [(i, i) for i in range(5)]
    regs = [int(m) for _, _, m in roles]
    assert regs == [24, 64, 168, 168, 56] and sum(regs) * 128 <= 96 * 640  # the launch share
    # the plan and the 1024 bytes that align its base fit the 227 KB a block may have
    assert int(re.search(r"shared_memory (\d+)", text).group(1)) + 1024 <= 227 * 1024


@pytest.mark.parametrize("path, sq, skv, h", [(EXAMPLE, 256, 256, 2), (EXAMPLE, 200, 330, 1),
                                              (EXAMPLE, 300, 200, 2), (CAUSAL, 384, 384, 2),
                                              (CAUSAL, 200, 200, 1), (CAUSAL, 300, 300, 1)],
                         ids=lambda x: getattr(x, "stem", str(x)))
def test_interpreter_matches_sdpa(path, sq, skv, h):
    assert _interpret(path, sq, skv, h, causal=path is CAUSAL) < 5e-3


@pytest.mark.parametrize("path, sq, h", [(EXAMPLE, 384, 3), (CAUSAL, 640, 2)],
                         ids=lambda x: getattr(x, "stem", str(x)))
def test_interpreter_matches_sdpa_several_items_a_block(tmp_path, path, sq, h):
    """Two blocks, 3 items each: 6 items of 3 KV steps (non-causal: 2 query blocks of 3
    heads, the second past Q_SEQ) and of 5, 5, 4, 4, 2, 2 steps (causal, longest first)."""
    assert _interpret(_blocks(tmp_path, path, 2), sq, sq, h, causal=path is CAUSAL) < 5e-3


def test_the_causal_mask_is_needed(tmp_path):
    src = EXAMPLE.read_text()
    old = "                  if (j > __min(valid - 1, i + diag))\n"
    assert src.count(old) == 2
    path = tmp_path / "v.co"
    path.write_text("#define CAUSAL 1\n" + src.replace(old, "                  if (j >= valid)\n"))
    assert not _interpret(path, 256, 256, causal=True) < 5e-2


@pytest.mark.parametrize("old, new", [
    ("                  if (j >= valid)\n                    s0.at(i, j) = -inf;\n",
     "                  if (j >= valid + BLOCK_N)\n                    s0.at(i, j) = -inf;\n"),
    ("                  if (j >= valid)\n                    s1.at(i, j) = -inf;\n",
     "                  if (j >= valid + BLOCK_N)\n                    s1.at(i, j) = -inf;\n"),
    ("              o0.at(i, j) = o0.at(i, j) * sc0.at(i);   // the rescale of row i\n",
     "              o0.at(i, j) = o0.at(i, j) * 1.0f;\n"),
    ("              o1.at(i, j) = o1.at(i, j) * sc1.at(i);\n",
     "              o1.at(i, j) = o1.at(i, j) * 1.0f;\n"),
])
def test_the_mask_and_the_rescale_are_needed(tmp_path, old, new):
    src = EXAMPLE.read_text()
    assert src.count(old) == 1
    path = tmp_path / "v.co"
    path.write_text(src.replace(old, new))
    assert not _interpret(path, 256, 330, grow=1 if "BLOCK_N" in new else 4) < 5e-2


@pytest.mark.parametrize("bound, matches", [("1e30f", False), ("-1.0f", True)])
def test_the_rescale_is_taken(tmp_path, bound, matches):
    """Keys that grow 40 x: the example matches SDPA; a variant that always keeps the old
    max (never rescales: P overflows) does not, one that never keeps it (a rescale every
    step) does."""
    assert _interpret(EXAMPLE, 256, 330, grow=40) < 5e-3
    src = EXAMPLE.read_text()
    for n in "01":
        assert src.count(f"(m{n}.at(i) - m{n}_prev.at(i)) * 0.12751743f <= 8.0f)") == 1
    path = tmp_path / "v.co"
    path.write_text(src.replace("<= 8.0f)", f"<= {bound})"))
    assert (_interpret(path, 256, 330, grow=40) < 5e-3) == matches


@pytest.mark.parametrize("path", BOTH, ids=lambda p: p.stem)
def test_interpreter_matches_sdpa_grown(path):
    assert _interpret(path, 384, 384, causal=path is CAUSAL, grow=4) < 5e-3


@pytest.fixture(scope="module", params=BOTH, ids=lambda p: p.stem)
def ptx(request) -> str:
    return compile_file(str(request.param), emit="ptx", target="sm_100a")


def test_an_items_first_pv_overwrites_o(ptx):
    """`if (step == 0) mma.fill o0, 0.0f;` before PV0: a predicate the PV's first k-step
    reads (enable-input-d), no store to tensor memory."""
    for acc in ("o0", "o1"):
        pv = re.findall(rf"tcgen05\.mma\.cta_group::1\.kind::f16 \[%{acc}_tmem\], \[%p{acc[1]}_tmem\]"
                        r"[^;]*;", ptx)
        assert pv and pv[0].endswith(f"%{acc}_accumulate;"), pv
        assert f"mov.pred %{acc}_accumulate, 0;" in ptx


def test_the_mma_role_is_one_thread_and_s_is_fresh(ptx):
    # QK0, QK1 (8 K-steps each, the first overwriting S) before the KV loop and in it
    for acc in ("s0", "s1"):
        assert len(re.findall(rf"tcgen05\.mma\.cta_group::1\.kind::f16 \[%{acc}_tmem\]", ptx)) == 16
        assert re.search(rf"tcgen05\.mma\.cta_group::1\.kind::f16 \[%{acc}_tmem\], [^;]*%overwrite",
                         ptx)
    assert "tcgen05.mma.cta_group::1.kind::f16 [%o0_tmem], [%p0_tmem]" in ptx
    assert "tcgen05.mma.cta_group::1.kind::f16 [%o1_tmem], [%p1_tmem]" in ptx
    assert "bra L_mma_issued" not in ptx  # the MMA role is issue-only: no election


def test_the_mma_role_issues_in_fa4s_order(ptx):
    """Per trip of the MMA role's KV loop: PV0(t), QK0(t+1), PV1(t), QK1(t+1); the item's
    first QKs come before the loop, its last PVs after it."""
    mma = ptx[ptx.index("setmaxnreg.dec.sync.aligned.u32 64;"):ptx.index("setmaxnreg.inc")]
    loop = re.search(r"\n(L_step_loop_\d+):\n(.*?)bra\.uni \1;", mma, re.S)
    before, body, after = mma[:loop.start()], loop.group(2), mma[loop.end():]

    def at(text, acc):
        return text.index(f"tcgen05.mma.cta_group::1.kind::f16 [%{acc}_tmem]")
    assert at(body, "o0") < at(body, "s0") < at(body, "o1") < at(body, "s1")
    assert at(before, "s0") < at(before, "s1") and "[%o0_tmem]" not in before.split("L_step_loop")[0][
        before.index("[%s0_tmem]"):]
    assert at(after, "o0") < at(after, "o1") and "[%s0_tmem]" not in after.split("L_endif")[0]


def test_each_exponential_is_computed_once(ptx):
    """The P apply also sums P's f32 values into l: the apply computes its one __exp2f per
    element once for both statements, 128 a thread a step, 4 of each 16 by the polynomial
    (`[[exp2_split(0.25)]]`: 96 on MUFU, 32 on the FMA pipes), and the row scale one more."""
    parts = re.split(r"setmaxnreg\.\w+\.sync\.aligned\.u32 (\d+);", ptx)
    per_role = [(int(parts[i]), parts[i + 1].count("ex2.approx"),
                 parts[i + 1].count("add.rm.f32")) for i in range(1, len(parts), 2)]
    assert per_role == [(24, 0, 0), (64, 0, 0), (168, 97, 32), (168, 97, 32), (56, 0, 0)]


def _softmax_roles(ptx) -> list:
    parts = re.split(r"setmaxnreg\.\w+\.sync\.aligned\.u32 (\d+);", ptx)
    return [parts[i + 1] for i in range(1, len(parts), 2) if parts[i] == "168"]


def test_a_kept_max_gives_the_factor_one(ptx):
    """The row factor exp2((m_prev - m) * c) is sub, mul, ex2 (no fma): a kept max gives
    exp2(+0) = 1 exactly, and a correction warp whose rows all kept theirs skips. (Written
    m_prev * c - m * c, it contracts to fma(m_prev, c, m * -c), whose value for a kept max
    is the rounding error of m * c: 1 within an ulp, but not 1.)"""
    roles = _softmax_roles(ptx)
    assert len(roles) == 2
    for n, role in zip("01", roles):
        assert re.search(rf"sub\.f32 (%\w+), %m{n}_prev0, %m{n}_0;\s+mul\.f32 (%\w+), \1, "
                         rf"0f3E0293EE;\s+ex2\.approx\.ftz\.f32 (%\w+), \2;\s+"
                         rf"st\.shared\.f32 \[%sc{n}_row\+\d+\], \3;", role), n


def test_s_is_read_from_tensor_memory_once_a_step(ptx):
    """The row max and the exponentials read the same registers (lower_flow.reader_loads):
    on a step that masks nothing, one tcgen05.ld of each 16 columns of S and one wait, not
    two; the masked step's apply (in a branch) loads and stores S piece by piece before."""
    for role in _softmax_roles(ptx):
        loop = re.search(r"\n(L_step_loop_\d+):\n(.*?)bra\.uni \1;", role, re.S).group(2)
        mask = re.search(r"bra\.uni (L_endif_\d+);\n(.*?)\n\1:", loop, re.S)
        plain = loop.replace(mask.group(0), "")
        assert len(re.findall(r"tcgen05\.ld\.sync\.aligned\.32x32b\.x16\.b32", plain)) == 8
        assert plain.count("tcgen05.wait::ld") == 1
        assert len(re.findall(r"tcgen05\.ld\.sync\.aligned\.32x32b\.x8\.b32", mask.group(2))) == 16


def test_the_correction_role_moves_o_in_pieces(ptx):
    """The correction warpgroup (56 registers) rescales and stores O 8 columns at a time;
    the softmax roles hand it the factors through shared memory, read once per row."""
    corr = ptx[ptx.index("setmaxnreg.dec.sync.aligned.u32 56;"):]
    assert not re.search(r"tcgen05\.(ld|st)\.sync\.aligned\.32x32b\.x(16|32|64)", corr)
    # a kernel that repartitions its registers moves S, P and the fills 16 registers at a
    # time (ptxas spilled at x64 moves)
    assert not re.search(r"tcgen05\.(ld|st)\.sync\.aligned\.32x32b\.x(32|64)", ptx)
    assert re.search(r"tcgen05\.st\.sync\.aligned\.32x32b\.x16\.b32 \[%p0_rows\+48\]", ptx)
    # columns 0-7 of O0: the step's rescale, the division by l, the mma.store
    assert len(re.findall(r"tcgen05\.ld\.sync\.aligned\.32x32b\.x8\.b32 \{%o0_0,", corr)) == 3
    assert len(re.findall(r"ld\.shared\.f32 %sc0_at", corr)) == 2  # step factor, l


def test_o_is_stored_from_registers_with_no_drain(ptx):
    """`mma.store.direct`: O0 and O1 leave the correction role as 16 predicated
    st.global.v4 a thread each (a row past Q_SEQ is not stored), with no shared staging
    tile, TMA store or store drain on an item's path."""
    corr = ptx[ptx.index("setmaxnreg.dec.sync.aligned.u32 56;"):]
    stores = re.findall(r"@%(\w+) st\.global\.v4\.b32 \[%(\w+)\+(\d+)\]", corr)
    assert len(stores) == 32 and len({(p, a) for p, a, _ in stores}) == 2
    assert sorted({int(off) for _, _, off in stores}) == list(range(0, 256, 16))
    assert "setp.lt.u32 %gst_in, %gst_row, %Q_SEQ;" in corr
    for gone in ("cp.async.bulk.wait_group", "cp.async.bulk.tensor", "st.shared.v4"):
        assert gone not in corr
    assert ".param .u64 ptr_O" in ptx
@pytest.mark.ptxas
def test_ptxas_accepts_it_without_spills(ptx):
    from choreo_py.runtime import build
    _, log = build.ptxas(ptx, "sm_100a", verbose=True)
    assert "0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads" in log, log
    regs = int(re.search(r"Used (\d+) registers", log).group(1))
    assert regs <= 255


@pytest.mark.parametrize("path", BOTH, ids=["full", "causal"])
def test_sm90a_refuses_it_by_name(tmp_path, capsys, path):
    rc = cli.main(["compile", str(path), "--target", "sm_90a", "-o", str(tmp_path / "x.py")])
    assert rc == 1
    # the first construct sm_90a lacks: an event an MMA's completion triggers
    line = EXAMPLE.read_text().splitlines().index(
        "            trigger s0_full.at(order) after qk0_first;") + 1
    assert f"{EXAMPLE.name}:{line}:13: error: 'trigger s0_full after qk0_first' (an MMA future " \
        "completing an event) is not lowered for sm_90a yet; write 'wait qk0_first;' and a " \
        "plain trigger" in capsys.readouterr().err


# The strict emulator, at -D NUM_SMS=1 or 2 so that a block runs several items (h heads
# of cdiv(Q, 256) items each): Q = 200, KV = 330 (partial last query and KV tiles, 2
# items on one block); Q = 300, KV = 200 (4 items on one block, two of them with a query
# tile past Q_SEQ); 256 (one item, two KV tiles); causal: 384 with 3 heads on 2 blocks
# (items of 3, 3, 3, 2, 2, 2 KV steps longest first, taken in a snake: block 0 runs items
# 0, 3, 4 and block 1 items 1, 2, 5; the 2-slot rings reuse a slot) and 200 (a partial
# diagonal tile, 2 items on one block). greedy runs the correction role's O stores (plain
# st.global, never waited) far ahead of the next item's first PVs, which overwrite O.
FAST = [(EXAMPLE, 200, 330, 2, 1, "greedy")]
EMU = [(EXAMPLE, 300, 200, 2, 1, "round_robin"), (EXAMPLE, 256, 256, 1, 1, "reverse"),
       (CAUSAL, 384, 384, 3, 2, "random"), (CAUSAL, 200, 200, 2, 1, "greedy")]
DEFAULT_SMS = "#define NUM_SMS 148\n"


def _blocks(tmp_path, path, sms: int) -> Path:
    """The example (or its causal build) in a grid of `sms` blocks."""
    src = EXAMPLE.read_text()
    assert DEFAULT_SMS in src
    out = tmp_path / f"{path.stem}_{sms}.co"
    out.write_text(("#define CAUSAL 1\n" if path is CAUSAL else "")
                   + src.replace(DEFAULT_SMS, f"#define NUM_SMS {sms}\n"))
    return out


def _emulate(tmp_path, path, sq, skv, h, sms, schedule, grow=1):
    q, k, v, o = _inputs(sq, skv, h, grow=grow)
    assert emulate_strict(_blocks(tmp_path, path, sms), dict(Q=q, K=k, V=v, O=o), schedule) == []
    assert not o.float().isnan().any()
    assert rel(o, _sdpa(q, k, v, causal=path is CAUSAL)) < 5e-3


@pytest.mark.emu
@pytest.mark.parametrize("path, sq, skv, h, sms, schedule", FAST,
                         ids=lambda x: getattr(x, "stem", str(x)))
def test_emulator_matches_sdpa_strict(tmp_path, path, sq, skv, h, sms, schedule):
    _emulate(tmp_path, path, sq, skv, h, sms, schedule)


@pytest.mark.emu
@pytest.mark.parametrize("path, sq, skv", [
    (EXAMPLE, 256, 330),
    pytest.param(CAUSAL, 384, 384, marks=pytest.mark.slow)],
    ids=lambda x: getattr(x, "stem", str(x)))
def test_emulator_matches_sdpa_strict_with_rescales(tmp_path, path, sq, skv):
    """Keys past the first tile 4 x larger: the softmax rescales some rows after the first
    step and keeps the max of others; the correction role's vote lets warps through."""
    _emulate(tmp_path, path, sq, skv, 1, 1, "random", grow=4)


@pytest.mark.emu
@pytest.mark.slow
@pytest.mark.parametrize("path, sq, skv, h, sms, schedule", EMU,
                         ids=lambda x: getattr(x, "stem", str(x)))
def test_emulator_matches_sdpa_strict_more(tmp_path, path, sq, skv, h, sms, schedule):
    _emulate(tmp_path, path, sq, skv, h, sms, schedule)


@pytest.mark.emu
@pytest.mark.parametrize("path, sq, skv, settle, grow, schedule, skips", [
    (EXAMPLE, 256, 512, 3, 1, "random", [(0, 8), (8, 8), (8, 8), (8, 8)]),
    (EXAMPLE, 256, 512, 1, 1, "reverse", [(0, 8), (8, 8), (8, 8), (8, 8)]),
    (EXAMPLE, 200, 330, 1, 4, "round_robin", None),
    pytest.param(CAUSAL, 512, 512, 3, 1, "greedy", None, marks=pytest.mark.slow)],
    ids=["settled", "randn", "grown", "causal-settled"])
def test_the_rescale_is_skipped_where_the_max_is_kept(tmp_path, monkeypatch, path, sq, skv,
                                                     settle, grow, schedule, skips):
    """The correction warps' votes (2 a step, one per stage, 4 warps each: 8) under the
    strict emulator, and the result against SDPA. Keys whose first tile is the largest
    (settled), and randn keys, keep every row's max after the first step: every warp skips
    from step 1 on (step 0 rescales by factor 0: the PV overwrites O). Keys past the first
    tile 4 x larger grow the max by more than 8 at step 1: there warps rescale (and the
    result still matches). Causal, settled: every step but each item's first skips."""
    from block_helpers import VoteLog
    votes = VoteLog(monkeypatch)
    q, k, v, o = _inputs(sq, skv, 1, grow=grow, settle=settle)
    assert emulate_strict(_blocks(tmp_path, path, 1), dict(Q=q, K=k, V=v, O=o), schedule) == []
    assert not o.float().isnan().any()
    assert rel(o, _sdpa(q, k, v, causal=path is CAUSAL)) < 5e-3
    steps = votes.per_step()
    if skips is not None:
        assert steps == skips
    elif grow != 1:
        assert steps[0] == (0, 8) and steps[1][0] < 8  # step 1: some warps rescale
    else:  # causal: items of 4 and 2 steps on one block; each item's first step rescales
        assert steps == [(0, 8), (8, 8), (8, 8), (8, 8), (0, 8), (8, 8)]
