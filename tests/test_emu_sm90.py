"""PTX emulator, sm_90a: TMA and wgmma against independent values, race reports on
deliberately broken PTX, and every sm_90a example matching torch under several schedules."""
from __future__ import annotations

import dataclasses
import functools
import re

import numpy as np
import pytest
import torch
from fa_helpers import bshd, rel, sdpa

from choreo_py.emu import DeadlockError, EmuStats, RaceError, emulate_ptx
from choreo_py.emu.api import run_spec
from choreo_py.emu.launch import from_co

pytestmark = pytest.mark.emu

HEAD = """.version 8.5
.target sm_90a
.address_size 64
.extern .shared .align 128 .b8 smem[];
"""


def bf16_bits(t: torch.Tensor) -> np.ndarray:
    return t.view(torch.int16).numpy().view(np.uint16)


# ---------------------------------------------------------------- TMA
def tma_ptx(rows_out: int) -> str:
    lines = [f"\tld.shared.u32 %v, [%sm+{r * 128}];\n\tst.global.u32 [%py+{r * 128}], %v;"
             for r in range(rows_out)]
    return HEAD + """
.visible .entry k(
\t.param .align 64 .b8 tmap_X[128],
\t.param .u64 p_y,
\t.param .u32 row0
)
{
\t.reg .u32 %sm, %sm0, %tid, %off, %v, %r0;
\t.reg .u64 %tm, %py, %o64;
\t.reg .pred %p, %q;
\t.reg .b64 %st;
\tmov.u32 %sm0, smem;
\tadd.u32 %sm0, %sm0, 1023;
\tand.b32 %sm0, %sm0, -1024;
\tmov.u32 %tid, %tid.x;
\tld.param.u32 %r0, [row0];
\tsetp.eq.u32 %p, %tid, 0;
\t@%p mbarrier.init.shared::cta.b64 [%sm0+8192], 1;
\t@%p mbarrier.arrive.expect_tx.shared::cta.b64 %st, [%sm0+8192], 2048;
\tmov.b64 %tm, tmap_X;
\tcvta.param.u64 %tm, %tm;
\t@%p cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%sm0], [%tm, {0, %r0}], [%sm0+8192];
WAIT:
\tmbarrier.try_wait.parity.shared.b64 %q, [%sm0+8192], 0;
\t@!%q bra WAIT;
\tshl.b32 %off, %tid, 2;
\tadd.u32 %sm, %sm0, %off;
\tld.param.u64 %py, [p_y];
\tcvt.u64.u32 %o64, %off;
\tadd.s64 %py, %py, %o64;
""" + "\n".join(lines) + "\n\tret;\n}\n"


@pytest.mark.parametrize("row0", [0, 8, -3])
def test_tma_load_swizzles_128b_and_zero_fills_out_of_bounds(row0):
    """The box lands with the PTX ISA's 128B swizzle: the 16-byte chunk c of row r sits at
    chunk c ^ (r % 8); rows outside the tensor read as zero."""
    g = torch.Generator().manual_seed(7)
    x = torch.randn(16, 64, generator=g).to(torch.bfloat16)
    y = torch.zeros(16 * 32, dtype=torch.int32)
    launch = {"grid": [1, 1, 1], "block": [32, 1, 1], "shared_bytes": 8192 + 1024 + 64,
              "params": [{"name": "tmap_X", "tmap": "X", "box": [64, 16], "swizzle": 128},
                         {"name": "p_y", "ptr": "Y"}, {"name": "row0", "u32": row0 & 0xFFFFFFFF}],
              "tensors": {"X": {"dtype": "bf16", "shape": [16, 64]},
                          "Y": {"dtype": "s32", "shape": [512]}}}
    emulate_ptx(tma_ptx(16), launch, {"X": x, "Y": y})
    got = y.numpy().view(np.uint16).reshape(16, 64)      # smem rows as written
    xb = bf16_bits(x)
    want = np.zeros((16, 64), dtype=np.uint16)
    for r in range(16):
        src = row0 + r
        for chunk in range(8):
            phys = chunk ^ (r % 8)
            if 0 <= src < 16:
                want[r, phys * 8:phys * 8 + 8] = xb[src, chunk * 8:chunk * 8 + 8]
    np.testing.assert_array_equal(got, want)


def test_tma_through_a_tensor_map_pointer_parameter():
    # pyptx passes a tensor map as `.param .u64 X_tma_desc` (its address), loaded with
    # ld.param: the same box lands as through the 128-byte map parameter
    g = torch.Generator().manual_seed(8)
    x = torch.randn(16, 64, generator=g).to(torch.bfloat16)
    outs = []
    for pointer in (False, True):
        ptx = tma_ptx(16)
        if pointer:
            ptx = ptx.replace("\t.param .align 64 .b8 tmap_X[128],", "\t.param .u64 tmap_X,")
            ptx = ptx.replace("\tmov.b64 %tm, tmap_X;\n\tcvta.param.u64 %tm, %tm;",
                              "\tld.param.u64 %tm, [tmap_X];")
        y = torch.zeros(16 * 32, dtype=torch.int32)
        launch = {"grid": [1, 1, 1], "block": [32, 1, 1], "shared_bytes": 8192 + 1024 + 64,
                  "params": [{"name": "tmap_X", "tmap": "X", "box": [64, 16], "swizzle": 128},
                             {"name": "p_y", "ptr": "Y"}, {"name": "row0", "u32": 0}],
                  "tensors": {"X": {"dtype": "bf16", "shape": [16, 64]},
                              "Y": {"dtype": "s32", "shape": [512]}}}
        emulate_ptx(ptx, launch, {"X": x, "Y": y})
        outs.append(y)
    assert torch.equal(outs[0], outs[1]) and outs[1].abs().sum() > 0


# ---------------------------------------------------------------- wgmma
def wgmma_ptx(n: int, b_mn_major: bool) -> str:
    acc = ", ".join(f"%d{i}" for i in range(n // 2))
    stores = "\n".join(f"\tst.global.f32 [%py+{4 * i}], %d{i};" for i in range(n // 2))
    b_box_bytes = 64 * n * 2
    b_desc = 0x4000004000010000 if not b_mn_major else (0x4000004000000000 | ((8192 >> 4) << 16))
    mmas = []
    for k in range(4):
        a_off = 2 * k                                 # +32 bytes per K=16 slice (K-major)
        b_off = 2 * k if not b_mn_major else 128 * k  # MN-major: 16 rows of 128 B
        mmas.append(f"\tadd.s64 %da, %da0, {a_off};\n\tadd.s64 %db, %db0, {b_off};\n"
                    f"\twgmma.mma_async.sync.aligned.m64n{n}k16.f32.bf16.bf16 {{{acc}}}, %da, %db, "
                    f"{0 if k == 0 else 1}, 1, 1, 0, {1 if b_mn_major else 0};")
    return HEAD + f"""
.visible .entry k(
\t.param .align 64 .b8 tmap_A[128],
\t.param .align 64 .b8 tmap_B[128],
\t.param .u64 p_y
)
{{
\t.reg .u32 %sm, %tid, %off, %t32;
\t.reg .u64 %tm, %py, %o64, %da0, %db0, %da, %db;
\t.reg .f32 %d<{n // 2}>;
\t.reg .pred %p, %q;
\t.reg .b64 %st;
\tmov.u32 %sm, smem;
\tadd.u32 %sm, %sm, 1023;
\tand.b32 %sm, %sm, -1024;
\tmov.u32 %tid, %tid.x;
\tsetp.eq.u32 %p, %tid, 0;
\t@%p mbarrier.init.shared::cta.b64 [%sm+40960], 1;
\tbar.sync 0;
\t@%p mbarrier.arrive.expect_tx.shared::cta.b64 %st, [%sm+40960], {8192 + b_box_bytes};
\tmov.b64 %tm, tmap_A;
\tcvta.param.u64 %tm, %tm;
\t@%p cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%sm], [%tm, {{0, 0}}], [%sm+40960];
\tmov.b64 %tm, tmap_B;
\tcvta.param.u64 %tm, %tm;
\t@%p cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%sm+8192], [%tm, {{0, 0}}], [%sm+40960];
WAIT:
\tmbarrier.try_wait.parity.shared.b64 %q, [%sm+40960], 0;
\t@!%q bra WAIT;
\tshr.u32 %t32, %sm, 4;
\tcvt.u64.u32 %da0, %t32;
\tor.b64 %da0, %da0, {0x4000004000010000};
\tadd.u32 %t32, %sm, 8192;
\tshr.u32 %t32, %t32, 4;
\tcvt.u64.u32 %db0, %t32;
\tor.b64 %db0, %db0, {b_desc};
\twgmma.fence.sync.aligned;
""" + "\n".join(mmas) + f"""
\twgmma.commit_group.sync.aligned;
\twgmma.wait_group.sync.aligned 0;
\tmul.lo.u32 %off, %tid, {4 * (n // 2)};
\tcvt.u64.u32 %o64, %off;
\tld.param.u64 %py, [p_y];
\tadd.s64 %py, %py, %o64;
{stores}
\tret;
}}
"""


@pytest.mark.parametrize("n,b_mn_major", [(64, False), (128, False), (64, True)])
def test_wgmma_from_swizzled_smem_matches_torch(n, b_mn_major):
    """D = A @ B^T (B K-major) or A @ B (B MN-major), read back through the PTX ISA's
    accumulator fragment: lane 4g+c of warp w holds row 16w + g + 8*((i>>1)&1),
    column 8*(i>>2) + 2c + (i&1) in register i."""
    g = torch.Generator().manual_seed(11)
    a = torch.randn(64, 64, generator=g).to(torch.bfloat16)
    b = torch.randn(n, 64, generator=g).to(torch.bfloat16)
    if b_mn_major:  # B stored [K, N] with N contiguous, two 64-column halves at LBO
        b_store = b.T.contiguous()  # [64 (K), n]
        box, bshape = [64, 64], [64, n]
    else:
        b_store, box, bshape = b, [64, n], [n, 64]
    y = torch.zeros(128 * (n // 2))
    launch = {"grid": [1, 1, 1], "block": [128, 1, 1], "shared_bytes": 40960 + 1024 + 64,
              "params": [{"name": "tmap_A", "tmap": "A", "box": [64, 64], "swizzle": 128},
                         {"name": "tmap_B", "tmap": "B", "box": box, "swizzle": 128},
                         {"name": "p_y", "ptr": "Y"}],
              "tensors": {"A": {"dtype": "bf16", "shape": [64, 64]},
                          "B": {"dtype": "bf16", "shape": bshape},
                          "Y": {"dtype": "f32", "shape": [128 * (n // 2)]}}}
    emulate_ptx(wgmma_ptx(n, b_mn_major), launch, {"A": a, "B": b_store, "Y": y})
    regs = y.numpy().reshape(4, 32, n // 2)
    d = np.full((64, n), np.nan, dtype=np.float32)
    for w in range(4):
        for lane in range(32):
            gq, c = lane // 4, lane % 4
            for i in range(n // 2):
                d[16 * w + gq + 8 * ((i >> 1) & 1), 8 * (i >> 2) + 2 * c + (i & 1)] = regs[w, lane, i]
    ref = (a.double() @ b.double().T).float().numpy()
    np.testing.assert_allclose(d, ref, rtol=1e-5, atol=1e-4)


# ---------------------------------------------------------------- the examples
@functools.lru_cache(maxsize=None)
def spec_of(path: str, target: str = "sm_90a", sms: int | None = None):
    return from_co(path, target, (), {"NUM_SMS": str(sms)} if sms else None)


def attention(path, s, schedule="round_robin", seed=0, sms=None, causal=True, ptx=None, b=1, h=1):
    q, k, v = bshd(b, s, h, 1), bshd(b, s, h, 2), bshd(b, s, h, 3)
    o = torch.full_like(q, float("nan"))
    spec = spec_of(path, "sm_90a", sms)
    if ptx is not None:
        import dataclasses
        spec = dataclasses.replace(spec, ptx=ptx)
    stats = EmuStats()
    run_spec(spec, dict(Q=q, K=k, V=v, O=o), schedule=schedule, seed=seed, stats=stats)
    if causal:
        ref = sdpa(q, k, v)
    else:
        t = [x.float().transpose(1, 2) for x in (q, k, v)]
        ref = torch.nn.functional.scaled_dot_product_attention(*t).transpose(1, 2)
    return rel(o, ref), o, stats


CASES = [
    ("examples/flash_atten_causal.co", 128, "round_robin", None, True),
    ("examples/flash_atten_causal.co", 192, "random", None, True),
    ("examples/flash_atten_causal.co", 192, "greedy", None, True),
    ("examples/flash_atten_causal.co", 256, "reverse", None, True),
    ("examples/flash_atten.co", 192, "round_robin", None, False),
    ("examples/flash_atten.co", 128, "random", None, False),
    ("examples/flash_atten_persistent.co", 192, "round_robin", 2, True),
    ("examples/flash_atten_persistent.co", 320, "random", 2, True),
    ("bench/variants/flash_atten_persistent_pingpong.co", 192, "greedy", 2, True),
    ("bench/variants/flash_atten_persistent_producer_store.co", 192, "reverse", 2, True),
    ("bench/variants/flash_atten_persistent_qreg.co", 192, "random", 2, True),
]


@pytest.mark.parametrize("path,s,schedule,sms,causal", CASES)
def test_attention_examples_match_sdpa(path, s, schedule, sms, causal):
    err, o, _ = attention(path, s, schedule, seed=3, sms=sms, causal=causal)
    assert not o.float().isnan().any()
    assert err < 5e-3


def test_batches_and_heads_address_their_own_tiles():
    err, o, _ = attention("examples/flash_atten.co", 128, "random", seed=4, causal=False, b=2, h=2)
    assert not o.float().isnan().any() and err < 5e-3
    err, o, _ = attention("examples/flash_atten_persistent.co", 128, "round_robin", sms=3, b=2, h=2)
    assert not o.float().isnan().any() and err < 5e-3


@pytest.mark.parametrize("m,n,k,schedule", [(128, 128, 64, "round_robin"),
                                            (192, 256, 192, "random"),
                                            (256, 128, 128, "greedy")])
def test_gemm_matches_torch(m, n, k, schedule):
    g = torch.Generator().manual_seed(5)
    a = torch.randn(m, k, generator=g).to(torch.bfloat16)
    b = torch.randn(n, k, generator=g).to(torch.bfloat16)
    c = torch.full((m, n), float("nan")).to(torch.bfloat16)
    run_spec(spec_of("examples/gemm.co"), dict(A=a, B=b, C=c), schedule=schedule, seed=1)
    ref = (a.double() @ b.double().T)
    # f32 accumulation, one bf16 rounding of the output
    assert (c.double() - ref).abs().max() <= ref.abs().max() * 2 ** -8 + 1e-2
    assert (c.double() - ref.to(torch.bfloat16).double()).abs().gt(0).float().mean() < 0.05


def test_schedules_give_bit_identical_attention():
    outs = [attention("examples/flash_atten_causal.co", 192, s, seed=9)[1]
            for s in ("round_robin", "reverse", "random")]
    assert all(torch.equal(outs[0].view(torch.int16), o.view(torch.int16)) for o in outs[1:])


# ---------------------------------------------------------------- broken PTX: the reports
CAUSAL = "examples/flash_atten_causal.co"


def causal_ptx() -> str:
    return spec_of(CAUSAL).ptx


def drop(ptx: str, pattern: str, count: int = 1) -> str:
    out, n = re.subn(pattern, "", ptx, count=count, flags=re.M)
    assert n == count, pattern
    return out


def test_ptx_carries_the_co_lines():
    assert re.search(r"^\t// flash_atten_causal\.co:\d+$", causal_ptx(), re.M)


def test_missing_proxy_fence_before_the_tma_store_is_a_race_naming_both_lines():
    ptx = drop(causal_ptx(), r"^\tfence\.proxy\.async\.shared::cta;\n")
    with pytest.raises(RaceError) as err:
        attention(CAUSAL, 128, ptx=ptx)
    text = err.value.render()
    assert "without fence.proxy.async" in text
    assert "this: flash_atten_causal.sm90a.ptx:" in text and "cp.async.bulk.tensor" in text
    assert "with: flash_atten_causal.sm90a.ptx:" in text and "st.shared.b32" in text
    assert re.search(r"\(flash_atten_causal\.co:\d+\)", text)


def test_mma_before_the_full_barrier_wait_reads_an_in_flight_copy():
    # the first consumer wait on a K "full" barrier removed: wgmma reads K's slot while
    # its TMA copy is still in flight (greedy: copies land only when every warp waits)
    ptx = causal_ptx()
    m = re.search(r"^(\$_mbar_wait_3:\n\tmbarrier\.try_wait[^\n]*\n\t@!%p3 bra \$_mbar_wait_3;\n)",
                  ptx, re.M)
    ptx = ptx.replace(m.group(1), "")
    with pytest.raises(RaceError, match="the wgmma B operand reads shared memory .* that the TMA "
                                        "copy of K .* is still writing"):
        attention(CAUSAL, 128, schedule="greedy", ptx=ptx)


def test_reading_accumulators_before_wgmma_wait_group_is_a_race():
    ptx = drop(causal_ptx(), r"^\twgmma\.wait_group\.sync\.aligned 0;\n")
    with pytest.raises(RaceError, match=r"reads %acc_s\d+ while the wgmma that writes it is in "
                                        r"flight"):
        attention(CAUSAL, 128, ptx=ptx)


def test_setmaxnreg_entry_registers_are_what_ptxas_allocates():
    # ptxas -v on the seed's PTX (384 threads, .minnctapersm 1) reports 168 registers, and
    # on the Blackwell example's (640 threads) 96: the most the launch bounds allow.
    from choreo_py.emu.isa_sync import entry_registers
    from choreo_py.emu.ptx_parse import parse_ptx
    kernel = parse_ptx(causal_ptx())
    assert (kernel.maxntid, kernel.minnctapersm) == ((384, 1, 1), 1)
    assert entry_registers(kernel, 384) == 168
    assert entry_registers(dataclasses.replace(kernel, maxntid=(640, 1, 1)), 640) == 96
    assert entry_registers(dataclasses.replace(kernel, maxnreg=128), 384) == 128


def test_setmaxnreg_overcommit_deadlocks_naming_the_request():
    # The seed gives 168 - 40 = 128 registers a thread back from its producer warpgroup and
    # takes 232 - 168 = 64 for each of two consumers: exactly the pool (4 x 128 = 8 x 64 a
    # thread). Asking 240 (72 more each) lets 7 of the 8 consumer warps through; the 8th
    # waits forever for registers no warp gives back (PTX ISA, setmaxnreg).
    ptx = causal_ptx()
    assert "setmaxnreg.inc.sync.aligned.u32 232;" in ptx
    bad = ptx.replace("setmaxnreg.inc.sync.aligned.u32 232;", "setmaxnreg.inc.sync.aligned.u32 240;")
    with pytest.raises(DeadlockError, match=r"setmaxnreg\.inc 240: needs 2304 registers from "
                                            r"the CTA's pool, which holds 256"):
        attention(CAUSAL, 128, ptx=bad)


def test_setmaxnreg_dec_above_the_held_count_is_a_misuse():
    from choreo_py.emu.report import MisuseError
    bad = causal_ptx().replace("setmaxnreg.dec.sync.aligned.u32 40;",
                               "setmaxnreg.dec.sync.aligned.u32 176;")
    with pytest.raises(MisuseError, match="dec must not raise the count"):
        attention(CAUSAL, 128, ptx=bad)


def test_missing_empty_arrival_deadlocks_with_every_warp_listed():
    ptx = causal_ptx()
    ptx = re.sub(r"^\t@%is_inst_leader mbarrier\.arrive\.shared\.b64 [^\n]*\n", "", ptx, flags=re.M)
    with pytest.raises(DeadlockError) as err:
        attention(CAUSAL, 384, ptx=ptx)
    text = err.value.render()
    for w in range(12):
        assert f"warp {w}: " in text
    assert "warp 0: waits on mbarrier at shared" in text and "(flash_atten_causal.co:" in text


PHASES = HEAD + """
.visible .entry k(
\t.param .u64 p_y
)
{
\t.reg .u32 %sm, %tid, %w;
\t.reg .pred %p, %q;
\t.reg .b64 %st;
\tmov.u32 %sm, smem;
\tadd.u32 %sm, %sm, 1023;
\tand.b32 %sm, %sm, -1024;
\tmov.u32 %tid, %tid.x;
\tsetp.eq.u32 %p, %tid, 0;
\t@%p mbarrier.init.shared::cta.b64 [%sm], 1;
\tbar.sync 0;
\tshr.u32 %w, %tid, 5;
\tsetp.eq.u32 %p, %w, 1;
\t@%p bra PRODUCER;
W0:
\tmbarrier.try_wait.parity.shared.b64 %q, [%sm], 0;
\t@!%q bra W0;
\tbar.sync 1, 64;
\tbar.sync 2, 64;
W1:
\tmbarrier.try_wait.parity.shared.b64 %q, [%sm], 1;
\t@!%q bra W1;
\tret;
PRODUCER:
\tsetp.eq.u32 %p, %tid, 32;
\t@%p mbarrier.arrive.shared.b64 %st, [%sm];
\tbar.sync 1, 64;
\t@%p mbarrier.arrive.shared.b64 %st, [%sm];
\t@%p mbarrier.arrive.shared.b64 %st, [%sm];
\tbar.sync 2, 64;
\tret;
}
"""


PHASES_LAUNCH = {"grid": [1, 1, 1], "block": [64, 1, 1], "shared_bytes": 2048,
                 "params": [{"name": "p_y", "ptr": "Y"}],
                 "tensors": {"Y": {"dtype": "f32", "shape": [1]}}}


def test_waiter_two_phases_behind_is_reported():
    with pytest.raises(RaceError, match="two or more phases behind"):
        emulate_ptx(PHASES, PHASES_LAUNCH, {"Y": torch.zeros(1)})


def _behind(arrivals: int) -> str:
    """PHASES with `arrivals` completions while warp 0 is held between its two waits
    (on parity 0, then parity 1), and warp 0 storing 7.0 to Y once past the second."""
    ptx = PHASES.replace("\t@%p mbarrier.arrive.shared.b64 %st, [%sm];\n"
                         "\t@%p mbarrier.arrive.shared.b64 %st, [%sm];\n",
                         "\t@%p mbarrier.arrive.shared.b64 %st, [%sm];\n" * arrivals)
    return ptx.replace("\t@!%q bra W1;\n\tret;\n",
                       "\t@!%q bra W1;\n\tld.param.u64 %py, [p_y];\n"
                       "\tmov.f32 %f, 0f40E00000;\n\tst.global.f32 [%py], %f;\n\tret;\n"
                       ).replace("\t.reg .b64 %st;", "\t.reg .b64 %st, %py;\n\t.reg .f32 %f;")


def test_waiter_two_phases_behind_runs_in_relaxed_mode_as_the_parity_test_does():
    # warp 0 waited for phase 0, then phases 1-3 complete (current phase 4, parity 0):
    # its wait for parity 1 is three phases late. Strict: reported. Relaxed: noted, and
    # the wait passes, as try_wait.parity on hardware compares the parity alone.
    ptx = _behind(3)
    with pytest.raises(RaceError, match="two or more phases behind"):
        emulate_ptx(ptx, PHASES_LAUNCH, {"Y": torch.zeros(1)})
    y, stats = torch.zeros(1), EmuStats()
    for schedule in ("round_robin", "reverse", "greedy"):
        emulate_ptx(ptx, PHASES_LAUNCH, {"Y": y}, strict=False, stats=stats, schedule=schedule)
        assert y.item() == 7.0
        y.zero_()
    assert stats.notes and all("two or more phases behind" in n for n in stats.notes)
    late = ptx.split("\n").index("\tmbarrier.try_wait.parity.shared.b64 %q, [%sm], 1;") + 1
    assert stats.notes[0].startswith(f"kernel.ptx:{late}: warp 0 waits")  # the late wait


def test_waiter_two_phases_behind_hangs_in_relaxed_mode_when_the_parity_matches():
    # phases 1-2 complete (current phase 3, parity 1): the parity-1 wait cannot tell
    # phase 3 from phase 1 and waits for a completion that never comes, as on hardware
    with pytest.raises(DeadlockError, match=r"phase 3, parity 1"):
        emulate_ptx(_behind(2), PHASES_LAUNCH, {"Y": torch.zeros(1)}, strict=False)


def test_missing_wgmma_fence_is_strict_race_and_relaxed_note():
    """PTX requires wgmma.fence before the first MMA (ptxas serialises without it): strict
    mode reports it; --relaxed notes it and computes the same result."""
    g = torch.Generator().manual_seed(11)
    a = torch.randn(64, 64, generator=g).to(torch.bfloat16)
    b = torch.randn(64, 64, generator=g).to(torch.bfloat16)
    launch = {"grid": [1, 1, 1], "block": [128, 1, 1], "shared_bytes": 40960 + 1024 + 64,
              "params": [{"name": "tmap_A", "tmap": "A", "box": [64, 64], "swizzle": 128},
                         {"name": "tmap_B", "tmap": "B", "box": [64, 64], "swizzle": 128},
                         {"name": "p_y", "ptr": "Y"}],
              "tensors": {"A": {"dtype": "bf16", "shape": [64, 64]},
                          "B": {"dtype": "bf16", "shape": [64, 64]},
                          "Y": {"dtype": "f32", "shape": [128 * 32]}}}
    ptx = wgmma_ptx(64, False).replace("\twgmma.fence.sync.aligned;\n", "")
    with pytest.raises(RaceError, match="without a wgmma.fence"):
        emulate_ptx(ptx, launch, {"A": a, "B": b, "Y": torch.zeros(128 * 32)})
    y_fenced, y_relaxed = torch.zeros(128 * 32), torch.zeros(128 * 32)
    emulate_ptx(wgmma_ptx(64, False), launch, {"A": a, "B": b, "Y": y_fenced})
    stats = EmuStats()
    emulate_ptx(ptx, launch, {"A": a, "B": b, "Y": y_relaxed}, strict=False, stats=stats)
    assert torch.equal(y_fenced, y_relaxed)
    assert len(stats.notes) == 1 and "without a wgmma.fence" in stats.notes[0]  # once per line


def test_accumulator_rescaled_after_the_fence_is_a_race():
    # causal: without the fence before the last P@V, the output accumulator's rescale by
    # the softmax step is not ordered before the MMA that accumulates into it
    ptx = causal_ptx()
    last = ptx.rindex("\twgmma.fence.sync.aligned;\n")
    ptx = ptx[:last] + ptx[last:].replace("\twgmma.fence.sync.aligned;\n", "", 1)
    with pytest.raises(RaceError, match=r"uses accumulator %acc_o\d+, written after the last "
                                        r"wgmma.fence"):
        attention(CAUSAL, 256, ptx=ptx)


def test_staging_reused_before_the_bulk_store_read_it_is_a_race():
    # persistent: the next tile's epilogue writes the output staging tile again; without
    # cp.async.bulk.wait_group.read the previous tile's TMA store may still be reading it
    path = "examples/flash_atten_persistent.co"
    ptx = drop(spec_of(path, "sm_90a", 1).ptx, r"^\tcp\.async\.bulk\.wait_group\.read 0;\n")
    with pytest.raises(RaceError, match="st.shared overwrites shared memory .* that an "
                                        "asynchronous operation still reads"):
        attention(path, 256, sms=1, ptx=ptx)
