"""The judgement of the sm_100a backend: every example compiled for sm_100a, executed by
the PTX emulator in strict mode, against torch; several schedules and shapes (a partial
last tile among them); and the emulator's sm_100a rules shown to fire on broken PTX.

Shapes are tiny (B = H = 1) to keep CI time down; S = 384 and 512 make the K/V rings
reuse their slots (three or more KV tiles), where the ring hazards live.
"""
from __future__ import annotations

import dataclasses
import functools
import tempfile
import re
from pathlib import Path

import pytest
import torch
from fa_helpers import bshd, rel

from choreo_py.emu import DeadlockError, EmuError, EmuStats, RaceError, scheduler
from choreo_py.emu.api import run_spec
from choreo_py.emu.launch import from_co

pytestmark = pytest.mark.emu

ROOT = Path(__file__).resolve().parents[1]
SCALE = 128 ** -0.5        # the examples' softmax scale (log2(e) / sqrt(128) in exp2 units)


@functools.lru_cache(maxsize=None)
def spec_of(path: str, sms=None, dim: int = 128):
    src = ROOT / path
    if dim != 128:   # the head-dim variant: the same program with DIM redefined
        text = src.read_text().replace("#define DIM 128", f"#define DIM {dim}")
        assert f"#define DIM {dim}" in text
        src = Path(tempfile.mkdtemp(prefix="choreo_emu_")) / f"{src.stem}_d{dim}.co"
        src.write_text(text)
    return from_co(str(src), "sm_100a", defines={"NUM_SMS": str(sms)} if sms else None)


def attention(path, s, schedule, *, causal=True, sms=None, dim=128, ptx=None, seed=3,
              strict=True):
    spec = spec_of(path, sms, dim)
    if ptx is not None:
        spec = dataclasses.replace(spec, ptx=ptx)
    q, k, v = bshd(1, s, 1, 1, dim), bshd(1, s, 1, 2, dim), bshd(1, s, 1, 3, dim)
    o = torch.full_like(q, float("nan"))
    stats = EmuStats()
    run_spec(spec, dict(Q=q, K=k, V=v, O=o), schedule=schedule, seed=seed, strict=strict,
             stats=stats)
    t = [x.float().transpose(1, 2) for x in (q, k, v)]
    ref = torch.nn.functional.scaled_dot_product_attention(
        *t, is_causal=causal, scale=SCALE).transpose(1, 2)
    return rel(o, ref), o, stats


CAUSAL = "examples/flash_atten_causal.co"
FULL = "examples/flash_atten.co"
PERSISTENT = "examples/flash_atten_persistent.co"

# (path, S, schedule, NUM_SMS, causal, head dim). 192 and 320 end in a partial tile.
CASES = [
    (CAUSAL, 128, "round_robin", None, True, 128),
    (CAUSAL, 192, "random", None, True, 128),
    (CAUSAL, 192, "greedy", None, True, 128),
    (CAUSAL, 256, "reverse", None, True, 128),
    (CAUSAL, 384, "random", None, True, 128),
    (CAUSAL, 512, "round_robin", None, True, 128),
    (FULL, 128, "greedy", None, False, 128),
    (FULL, 192, "round_robin", None, False, 128),
    (FULL, 256, "random", None, False, 128),
    (FULL, 384, "reverse", None, False, 128),
    (PERSISTENT, 192, "round_robin", 2, True, 128),
    (PERSISTENT, 256, "greedy", 2, True, 128),
    (PERSISTENT, 320, "random", 2, True, 128),
    (CAUSAL, 128, "random", None, True, 64),
    (CAUSAL, 192, "round_robin", None, True, 64),
    (CAUSAL, 320, "greedy", None, True, 64),
]


@pytest.mark.parametrize("path,s,schedule,sms,causal,dim", CASES)
def test_attention_examples_match_sdpa(path, s, schedule, sms, causal, dim):
    err, o, stats = attention(path, s, schedule, causal=causal, sms=sms, dim=dim)
    assert not o.float().isnan().any()
    assert err < 5e-3
    assert stats.notes == []        # strict: nothing let pass, no flagged path taken


@pytest.mark.parametrize("m,n,k,schedule", [(128, 128, 64, "round_robin"),
                                            (192, 256, 192, "random"),
                                            (256, 128, 128, "greedy"),
                                            (128, 192, 320, "reverse")])
def test_gemm_matches_torch(m, n, k, schedule):
    g = torch.Generator().manual_seed(5)
    a = torch.randn(m, k, generator=g).to(torch.bfloat16)
    b = torch.randn(n, k, generator=g).to(torch.bfloat16)
    c = torch.full((m, n), float("nan")).to(torch.bfloat16)
    run_spec(spec_of("examples/gemm.co"), dict(A=a, B=b, C=c), schedule=schedule, seed=1)
    ref = a.double() @ b.double().T
    # f32 accumulation in tensor memory, one bf16 rounding of the output
    assert (c.double() - ref).abs().max() <= ref.abs().max() * 2 ** -8 + 1e-2
    assert (c.double() - ref.to(torch.bfloat16).double()).abs().gt(0).float().mean() < 0.05


def test_schedules_give_bit_identical_attention():
    outs = [attention(CAUSAL, 192, s, seed=9)[1] for s in ("round_robin", "reverse", "random")]
    assert all(torch.equal(outs[0].view(torch.int16), o.view(torch.int16)) for o in outs[1:])


# ---------------------------------------------------------------- hazard (a): a lagging warp
class _Lagging(scheduler.RoundRobin):
    """Warp 5 (a non-issuing consumer warp) runs only when no other warp can, and async
    copies and MMAs complete at once: the issuers and the producer run as far ahead of it
    as the program allows."""

    victim = 5

    def pick(self, runnable: list):
        others = [w for w in runnable if w.warp_id != self.victim]
        return super().pick(others or runnable)

    def delay(self) -> int:
        return 0


@pytest.fixture
def lagging(monkeypatch):
    monkeypatch.setitem(scheduler.ORDERS, "lagging", _Lagging)
    return "lagging"


def _before_issuer_waits() -> str:
    """The causal kernel as lowered before waits on MMA-only tiles became issuer-only:
    every consumer thread waits on the K/V/Q 'full' mbarriers."""
    ptx = spec_of(CAUSAL).ptx
    out, n = re.subn(r"\t@!%is_inst_leader bra (L_issuer_waited_\d+);\n(.*?)\n\1:\n"
                     r"\tbar\.warp\.sync -1;\n", r"\2\n", ptx, flags=re.S)
    assert n == 5
    return out


def test_lagging_warp_passes_with_issuer_only_waits(lagging):
    err, _, _ = attention(CAUSAL, 512, lagging)
    assert err < 5e-3


def test_lagging_warp_two_phases_behind_is_reported(lagging):
    with pytest.raises((DeadlockError, RaceError)) as e:
        attention(CAUSAL, 512, lagging, ptx=_before_issuer_waits())
    text = e.value.render()
    # warp 5 waits for parity 0 of a K 'full' barrier that has completed two phases
    assert re.search(r"warp 5: waits on mbarrier at shared 0x[0-9a-f]+ \(phase 2, parity 0;", text)


# ---------------------------------------------------------------- hazard (b): A at lane 16
def _a_at_lane16() -> str:
    """P and O placed as before the fix: consumer c at lane offset 16c, shared columns."""
    ptx = spec_of(CAUSAL).ptx
    ptx, n1 = re.subn(r"mad\.lo\.u32 %acc_s_cast_tmem, %mma_instance, 64, %tmem;\n"
                      r"(\s*)add\.u32 %acc_s_cast_tmem, %acc_s_cast_tmem, 384;",
                      r"mad.lo.u32 %acc_s_cast_tmem, %mma_instance, 1048576, %tmem;\n"
                      r"\1add.u32 %acc_s_cast_tmem, %acc_s_cast_tmem, 256;", ptx)
    ptx, n2 = re.subn(r"mad\.lo\.u32 %acc_o_tmem, %mma_instance, 128, %tmem;",
                      "mad.lo.u32 %acc_o_tmem, %mma_instance, 1048576, %tmem;", ptx)
    assert n1 >= 1 and n2 >= 1
    return ptx


def test_a_operand_at_lane16_is_modelled_and_flagged():
    err, _, stats = attention(CAUSAL, 256, "random", ptx=_a_at_lane16())
    assert err < 5e-3                       # modelled like D (layout F upper half)
    assert any("lane offset 16" in n for n in stats.notes)


# ---------------------------------------------------------------- strict rules on broken PTX
def _drop(pattern: str, count: int = 0) -> str:
    ptx, n = re.subn(pattern, "", spec_of(CAUSAL).ptx, count=count)
    assert n >= 1
    return ptx


def test_reading_tcgen05_ld_registers_before_wait_ld_is_a_race():
    with pytest.raises(RaceError, match="in flight"):
        attention(CAUSAL, 128, "round_robin",
                  ptx=_drop(r"\ttcgen05\.wait::ld\.sync\.aligned;\n", count=1))


def test_relaxed_mode_lets_tcgen05_ld_registers_be_read_without_wait_ld():
    # The registers stay poison (and owned by the load) only in strict mode; relaxed mode
    # writes the values at once (docs/emulator_sm100.md, "Relaxed mode").
    err, _, stats = attention(CAUSAL, 128, "round_robin", strict=False,
                              ptx=_drop(r"\ttcgen05\.wait::ld\.sync\.aligned;\n", count=1))
    assert err < 5e-3
    assert any("used before tcgen05.wait::ld" in n for n in stats.notes)  # and noted


def test_mma_reading_p_before_wait_st_is_reported():
    with pytest.raises(RaceError, match="tcgen05.wait::st"):
        attention(CAUSAL, 256, "round_robin",
                  ptx=_drop(r"\ttcgen05\.wait::st\.sync\.aligned;\n"))


def test_ld_before_the_mma_completes_is_a_race():
    # The consumers' wait on the first QK^T future removed: warps that get ahead of the
    # issuing one read S before the MMA was even issued (test_emu_sm100_tmem covers the
    # read of an issued, uncommitted MMA's cells).
    ptx = spec_of(CAUSAL).ptx
    m = re.search(r"(\$_mbar_wait_\d+):\n\tmbarrier\.try_wait\.parity\.shared\.b64 (%p\d+), "
                  r"\[%mma_bars\+\d+\], %first_qk_phase;\n\t@!\2 bra \1;\n", ptx)
    assert m
    for schedule in ("greedy", "round_robin"):
        with pytest.raises(RaceError, match="never written|has not completed"):
            attention(CAUSAL, 128, schedule, ptx=ptx.replace(m.group(0), ""))


def test_a_warp_outside_its_lane_quarter_is_refused():
    # warp_lanes = (tid & 32) << 16: warps 2 and 3 of each consumer reach lanes 0-63,
    # outside their quarters (64-95, 96-127)
    ptx, n = re.subn(r"and\.b32 %warp_lanes, %p_tid, 96;", "and.b32 %warp_lanes, %p_tid, 32;",
                     spec_of(CAUSAL).ptx)
    assert n >= 1
    with pytest.raises(EmuError, match=r"outside its lanes (64\.\.95|96\.\.127)"):
        attention(CAUSAL, 128, "round_robin", ptx=ptx)
