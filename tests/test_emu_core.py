"""PTX emulator core: instruction families against independent numpy/torch values,
divergence, barriers, and the reports (deadlock, misuse, unsupported forms)."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
import torch

from choreo_py.emu import DeadlockError, emulate_ptx
from choreo_py.emu.report import EmuError, UnsupportedError

pytestmark = pytest.mark.emu


def kernel(body: str, regs: str, params=("p_x", "p_y"), extra_params=()) -> str:
    plist = ",\n".join([f"\t.param .u64 {p}" for p in params] +
                       [f"\t.param .u32 {p}" for p in extra_params])
    return f""".version 8.5
.target sm_90a
.address_size 64
.extern .shared .align 128 .b8 smem[];

.visible .entry k(
{plist}
)
{{
\t.reg .u64 %px, %py, %a64, %b64;
\t.reg .u32 %tid, %off;
{regs}
\tld.param.u64 %px, [p_x];
\tld.param.u64 %py, [p_y];
\tmov.u32 %tid, %tid.x;
\tshl.b32 %off, %tid, 2;
\tcvt.u64.u32 %a64, %off;
\tadd.s64 %b64, %py, %a64;
\tadd.s64 %a64, %px, %a64;
{body}
\tret;
}}
"""


def launch(x: torch.Tensor, y: torch.Tensor, threads=32, smem=0, grid=(1, 1, 1)) -> dict:
    dt = {torch.float32: "f32", torch.int32: "s32"}
    return {"grid": list(grid), "block": [threads, 1, 1], "shared_bytes": smem,
            "params": [{"name": "p_x", "ptr": "X"}, {"name": "p_y", "ptr": "Y"}],
            "tensors": {"X": {"dtype": dt[x.dtype], "shape": list(x.shape)},
                        "Y": {"dtype": dt[y.dtype], "shape": list(y.shape)}}}


def run(body, regs, x, y, threads=32, **kw):
    emulate_ptx(kernel(body, regs), launch(x, y, threads), {"X": x, "Y": y}, **kw)
    return y


def lanes_f32(seed=0, n=32):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(n, generator=g) * 3).float()


# ---------------------------------------------------------------- float ALU
@pytest.mark.parametrize("op,ref", [
    ("add.f32 %r, %x, %c;", lambda x: x + np.float32(1.5)),
    ("mul.f32 %r, %x, %x;", lambda x: x * x),
    ("fma.rn.f32 %r, %x, %x, %c;", lambda x: (x.astype(np.float64) ** 2 + 1.5).astype(np.float32)),
    ("max.f32 %r, %x, %c;", lambda x: np.maximum(x, np.float32(1.5))),
    ("neg.f32 %r, %x;", lambda x: -x),
])
def test_float_alu_matches_numpy(op, ref):
    x = lanes_f32(1)
    y = torch.zeros(32)
    body = f"\tld.global.f32 %x, [%a64];\n\tmov.f32 %c, 0f3FC00000;\n\t{op}\n\tst.global.f32 [%b64], %r;"
    run(body, "\t.reg .f32 %x, %c, %r;", x, y)
    np.testing.assert_array_equal(y.numpy(), ref(x.numpy()))


@pytest.mark.parametrize("op,exact", [
    ("ex2.approx.ftz.f32", np.exp2), ("ex2.approx.f32", np.exp2),
    ("rcp.approx.ftz.f32", lambda v: 1 / v), ("rsqrt.approx.f32", lambda v: 1 / np.sqrt(v)),
    ("lg2.approx.f32", np.log2), ("sin.approx.f32", np.sin), ("cos.approx.f32", np.cos),
])
def test_approx_forms_are_faithful_not_correctly_rounded(op, exact):
    """PTX ISA (ex2, rcp, rsqrt, lg2, sin, cos): .approx bounds the error, not the value.
    Each result is one of the two f32 values bracketing the exact one, and not always
    the nearest (code relying on correct rounding is caught); exactly representable
    results stay exact (ex2 of integers, rcp of powers of two)."""
    x = lanes_f32(1).abs() + 0.25 if "sqrt" in op or "lg2" in op else lanes_f32(1)
    x = torch.cat([x[:24], torch.tensor([0.0, 1.0, -3.0, 4.0, 2.0, 8.0, 0.5, 7.0])])
    y = torch.zeros(32)
    body = f"\tld.global.f32 %x, [%a64];\n\t{op} %r, %x;\n\tst.global.f32 [%b64], %r;"
    run(body, "\t.reg .f32 %x, %r;", x, y)
    got, want = y.numpy().astype(np.float64), exact(x.numpy().astype(np.float64))
    nearest = want.astype(np.float32)
    ulp = np.abs(np.spacing(nearest)).astype(np.float64)
    fin = np.isfinite(want)
    assert (np.abs(got - want)[fin] < ulp[fin]).all()
    np.testing.assert_array_equal(got[~fin], want[~fin])      # inf and NaN kept
    assert (got != nearest).any()
    if op.startswith("ex2"):
        ints = x.numpy() == np.round(x.numpy())                      # ex2(0) = 1, 2^-3 ...
        assert (got[ints] == np.exp2(x.numpy()[ints].astype(np.float64))).all()
    if op.startswith("rcp"):
        assert (got[27:30] == [0.25, 0.5, 0.125]).all()


def test_tanh_approx_within_its_bound():
    """tanh.approx.f32: relative error within the ISA's 2^-11, and not the exact value."""
    x = lanes_f32(3)
    y = torch.zeros(32)
    run("\tld.global.f32 %x, [%a64];\n\ttanh.approx.f32 %r, %x;\n\tst.global.f32 [%b64], %r;",
        "\t.reg .f32 %x, %r;", x, y)
    want = np.tanh(x.numpy().astype(np.float64))
    err = np.abs(y.numpy() - want) / np.abs(want)
    assert err.max() < 2.0 ** -11 and err.max() > 2.0 ** -20


def test_cvt_bf16x2_packs_round_to_nearest_even_upper_from_first_operand():
    x = lanes_f32(2)
    y = torch.zeros(32, dtype=torch.int32)
    body = ("\tld.global.f32 %x, [%a64];\n\tmul.f32 %z, %x, 0f40490FDB;\n"
            "\tcvt.rn.bf16x2.f32 %r, %x, %z;\n\tst.global.b32 [%b64], %r;")
    run(body, "\t.reg .f32 %x, %z;\n\t.reg .b32 %r;", x, y)
    hi = x.to(torch.bfloat16).view(torch.int16).numpy().astype(np.uint16).astype(np.uint32)
    lo = (x * np.float32(3.14159274)).to(torch.bfloat16).view(torch.int16).numpy().astype(np.uint16)
    want = ((hi << 16) | lo.astype(np.uint32)).astype(np.uint32)
    np.testing.assert_array_equal(y.numpy().view(np.uint32), want)


def _round_exact(exact: Fraction, mode: str) -> np.float32:
    """The float32 that IEEE rounding `mode` gives for the exact rational `exact`."""
    up, down = np.float32(np.inf), np.float32(-np.inf)
    lo = np.float32(float(exact))
    while Fraction(float(lo)) > exact:
        lo = np.nextafter(lo, down)
    while Fraction(float(np.nextafter(lo, up))) <= exact:
        lo = np.nextafter(lo, up)
    if Fraction(float(lo)) == exact:
        return lo
    hi = np.nextafter(lo, up)
    if mode == "rm" or (mode == "rz" and exact > 0):
        return lo
    if mode in ("rp", "rz"):
        return hi
    dlo, dhi = exact - Fraction(float(lo)), Fraction(float(hi)) - exact
    if dlo != dhi:
        return lo if dlo < dhi else hi
    return lo if lo.view(np.uint32) % 2 == 0 else hi


_EXACT = {"add": lambda x, c: x + c, "sub": lambda x, c: x - c, "mul": lambda x, c: x * c,
          "fma": lambda x, c: x * c + c}


def _exact_ref(name: str, mode: str, xs, c) -> np.ndarray:
    fc = Fraction(float(c))
    return np.array([_round_exact(_EXACT[name](Fraction(float(x)), fc), mode) for x in xs],
                    dtype=np.float32)


def _operands(name: str, a: str, c: str) -> str:
    return f"{a}, {c}, {c}" if name == "fma" else f"{a}, {c}"


THIRD = "0f3EAAAAAB"  # 1/3 rounded to float32: sums and products with it are inexact


@pytest.mark.parametrize("name", ["add", "sub", "mul", "fma"])
@pytest.mark.parametrize("mode", ["rz", "rm", "rp", "rn"])
def test_f32_rounding_directions_match_exact_arithmetic(name, mode):
    x = lanes_f32(4) * 1000
    y = torch.zeros(32)
    body = (f"\tld.global.f32 %x, [%a64];\n\tmov.f32 %c, {THIRD};\n"
            f"\t{name}.{mode}.f32 %r, {_operands(name, '%x', '%c')};\n\tst.global.f32 [%b64], %r;")
    run(body, "\t.reg .f32 %x, %c, %r;", x, y)
    want = _exact_ref(name, mode, x.numpy(), np.float32(1 / 3))
    np.testing.assert_array_equal(y.numpy().view(np.uint32), want.view(np.uint32))


F32X2_BODY = """\tshl.b32 %o8, %tid, 3;
\tcvt.u64.u32 %q, %o8;
\tadd.s64 %pa, %px, %q;
\tadd.s64 %pb, %py, %q;
\tld.global.b64 %x2, [%pa];
\tmov.f32 %c, 0f3EAAAAAB;
\tmov.b64 %c2, {%c, %c};
\tOP
\tst.global.b64 [%pb], %r2;"""


@pytest.mark.parametrize("name,mode", [("add", "rm"), ("sub", "rn"), ("mul", "rz"),
                                       ("fma", "rn"), ("fma", "rp"), ("add", "rp")])
def test_f32x2_forms_round_each_half_as_exact_arithmetic(name, mode):
    # two float32 per .b64 register, element 0 in the low half; .ftz changes nothing here
    x = lanes_f32(5, 64) * 1000
    y = torch.zeros(64)
    op = f"{name}.{mode}.ftz.f32x2 %r2, {_operands(name, '%x2', '%c2')};"
    emulate_ptx(kernel(F32X2_BODY.replace("OP", op), "\t.reg .u32 %o8;\n\t.reg .u64 %q, %pa, %pb;"
                       "\n\t.reg .b64 %x2, %c2, %r2;\n\t.reg .f32 %c;"),
                launch(x, y), {"X": x, "Y": y})
    want = _exact_ref(name, mode, x.numpy(), np.float32(1 / 3))
    np.testing.assert_array_equal(y.numpy().view(np.uint32), want.view(np.uint32))


def test_f32x2_pack_order_element_0_low():
    # mov.b64 {lo, hi} then add.f32x2 of (lo, hi) + (1, 2): the halves keep their places
    x, y = torch.zeros(64), torch.zeros(64)
    body = ("\tshl.b32 %o8, %tid, 3;\n\tcvt.u64.u32 %q, %o8;\n\tadd.s64 %pb, %py, %q;\n"
            "\tcvt.rn.f32.u32 %f0, %tid;\n\tneg.f32 %f1, %f0;\n\tmov.b64 %x2, {%f0, %f1};\n"
            "\tmov.b64 %c2, {0f3F800000, 0f40000000};\n\tadd.rn.f32x2 %r2, %x2, %c2;\n"
            "\tst.global.b64 [%pb], %r2;")
    regs = "\t.reg .u32 %o8;\n\t.reg .u64 %q, %pb;\n\t.reg .b64 %x2, %c2, %r2;\n\t.reg .f32 %f0, %f1;"
    emulate_ptx(kernel(body, regs), launch(x, y), {"X": x, "Y": y})
    t = np.arange(32, dtype=np.float32)
    np.testing.assert_array_equal(y.numpy().reshape(32, 2), np.stack([t + 1, -t + 2], axis=1))


@pytest.mark.parametrize("op,ref", [
    ("max.f32 %r, %x, %c, %z;", lambda x: np.maximum(np.maximum(x, np.float32(1.5)), -x)),
    ("min.f32 %r, %x, %c, %z;", lambda x: np.minimum(np.minimum(x, np.float32(1.5)), -x)),
])
def test_three_input_min_max_take_all_three(op, ref):
    # sm_100's three-source min/max: the third operand is not dropped
    x = lanes_f32(6)
    y = torch.zeros(32)
    body = (f"\tld.global.f32 %x, [%a64];\n\tmov.f32 %c, 0f3FC00000;\n\tneg.f32 %z, %x;\n"
            f"\t{op}\n\tst.global.f32 [%b64], %r;")
    run(body, "\t.reg .f32 %x, %c, %z, %r;", x, y)
    np.testing.assert_array_equal(y.numpy(), ref(x.numpy()))


def test_directed_rounding_of_f64_and_forms_the_isa_lacks_are_refused():
    # (ptxas 13.0 rejects each of the f32x2 forms too: no min/max.f32x2, no .sat, and
    # fma.f32x2 needs its rounding modifier)
    for op in ("add.rm.f64 %d, %d, %d;", "max.xorsign.abs.f32x2 %r2, %r2, %r2;",
               "min.f32x2 %r2, %r2, %r2;", "max.f32x2 %r2, %r2, %r2;",
               "add.rn.sat.f32x2 %r2, %r2, %r2;", "fma.f32x2 %r2, %r2, %r2, %r2;",
               "fma.rn.sat.f32x2 %r2, %r2, %r2, %r2;"):
        with pytest.raises(UnsupportedError):
            run(f"\t{op}", "\t.reg .f64 %d;\n\t.reg .b64 %r2;", torch.zeros(32), torch.zeros(32))


# ---------------------------------------------------------------- integer ALU
@pytest.mark.parametrize("op,ref", [
    ("div.s32 %r, %x, -7;", lambda x: np.trunc(x / -7).astype(np.int32)),
    ("rem.s32 %r, %x, 7;", lambda x: np.fmod(x, 7).astype(np.int32)),
    ("shr.s32 %r, %x, 3;", lambda x: x >> 3),
    ("shr.u32 %r, %x, 3;", lambda x: (x.view(np.uint32) >> 3).view(np.int32)),
    ("mul.lo.s32 %r, %x, 1000003;", lambda x: (x.astype(np.int64) * 1000003).astype(np.int32)),
    ("mad.lo.s32 %r, %x, 3, -5;", lambda x: x * 3 - 5),
    ("and.b32 %r, %x, -1024;", lambda x: x & -1024),
    ("xor.b32 %r, %x, 255;", lambda x: x ^ 255),
    ("min.s32 %r, %x, 17;", lambda x: np.minimum(x, 17)),
])
def test_integer_alu_matches_numpy(op, ref):
    g = torch.Generator().manual_seed(3)
    x = torch.randint(-2**31, 2**31 - 1, (32,), generator=g, dtype=torch.int32)
    y = torch.zeros(32, dtype=torch.int32)
    body = f"\tld.global.s32 %x, [%a64];\n\t{op}\n\tst.global.s32 [%b64], %r;"
    run(body, "\t.reg .s32 %x, %r;", x, y)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(y.numpy(), ref(x.numpy()))


def test_setp_selp_and_shfl_bfly():
    x = lanes_f32(4)
    y = torch.zeros(32)
    body = ("\tld.global.f32 %x, [%a64];\n\tsetp.gt.f32 %p, %x, 0f00000000;\n"
            "\tselp.f32 %s, %x, 0f00000000, %p;\n"
            "\tshfl.sync.bfly.b32 %t, %s, 1, 31, -1;\n\tmax.f32 %s, %s, %t;\n"
            "\tshfl.sync.bfly.b32 %t, %s, 2, 31, -1;\n\tmax.f32 %s, %s, %t;\n"
            "\tst.global.f32 [%b64], %s;")
    run(body, "\t.reg .f32 %x, %s, %t;\n\t.reg .pred %p;", x, y)
    relu = np.maximum(x.numpy(), 0)
    want = relu.reshape(8, 4).max(axis=1).repeat(4)
    np.testing.assert_array_equal(y.numpy(), want)


# ---------------------------------------------------------------- divergence
def test_divergent_loop_reconverges_before_the_shuffle():
    """Lane i loops i times (a backward branch some lanes take); afterwards all lanes
    meet again and a full-warp shuffle needs every one of them."""
    x = torch.zeros(32)
    y = torch.zeros(32, dtype=torch.int32)
    body = ("\tmov.u32 %i, 0;\n\tmov.u32 %s, 0;\n"
            "\tsetp.ge.u32 %p, %i, %tid;\n\t@%p bra DONE;\n"
            "LOOP:\n\tadd.u32 %s, %s, %i;\n\tadd.u32 %i, %i, 1;\n"
            "\tsetp.lt.u32 %p, %i, %tid;\n\t@%p bra LOOP;\n"
            "DONE:\n\tshfl.sync.idx.b32 %t, %s, 31, 31, -1;\n\tadd.u32 %s, %s, %t;\n"
            "\tst.global.u32 [%b64], %s;")
    run(body, "\t.reg .u32 %i, %s, %t;\n\t.reg .pred %p;", x, y)
    lane = np.arange(32)
    tri = lane * (lane - 1) // 2
    np.testing.assert_array_equal(y.numpy(), tri + tri[31])


def test_if_else_both_paths_run_and_join():
    x = torch.zeros(32)
    y = torch.zeros(32, dtype=torch.int32)
    regs = "\t.reg .u32 %i, %s;\n\t.reg .pred %p;"
    body = ("\tand.b32 %i, %tid, 1;\n\tsetp.eq.u32 %p, %i, 0;\n\t@%p bra EVEN;\n"
            "\tmul.lo.u32 %s, %tid, 10;\n\tbra.uni JOIN;\n"
            "EVEN:\n\tmul.lo.u32 %s, %tid, 100;\n"
            "JOIN:\n\tadd.u32 %s, %s, 1;\n\tst.global.u32 [%b64], %s;")
    run(body, regs, x, y)
    lane = np.arange(32)
    np.testing.assert_array_equal(y.numpy(), np.where(lane % 2 == 0, lane * 100, lane * 10) + 1)


def test_divergent_bra_uni_is_reported_in_both_modes():
    x = torch.zeros(32)
    regs = "\t.reg .u32 %i, %s;\n\t.reg .pred %p;"
    body = ("\tand.b32 %i, %tid, 1;\n\tsetp.eq.u32 %p, %i, 0;\n\t@%p bra.uni EVEN;\n"
            "\tmul.lo.u32 %s, %tid, 10;\n\tbra.uni JOIN;\n"
            "EVEN:\n\tmul.lo.u32 %s, %tid, 100;\n"
            "JOIN:\n\tst.global.u32 [%b64], %s;")
    for strict in (True, False):
        with pytest.raises(EmuError, match="bra.uni taken by some lanes"):
            run(body, regs, x, torch.zeros(32, dtype=torch.int32), strict=strict)


# ---------------------------------------------------------------- barriers
MBAR_BODY = """\tmov.u32 %sm, smem;
\tadd.u32 %sm, %sm, 1023;
\tand.b32 %sm, %sm, -1024;
\tsetp.eq.u32 %p, %tid, 0;
\t@%p mbarrier.init.shared::cta.b64 [%sm], 32;
\tbar.sync 0;
\tshr.u32 %w, %tid, 5;
\tsetp.eq.u32 %p, %w, 1;
\t@%p bra PRODUCER;
WAIT:
\tmbarrier.try_wait.parity.shared.b64 %q, [%sm], 0;
\t@!%q bra WAIT;
\tld.shared.u32 %v, [%sm+64];
\tst.global.u32 [%b64], %v;
\tbra.uni END;
PRODUCER:
\tmov.u32 %v, 4242;
\tsetp.eq.u32 %p, %tid, 32;
\t@%p st.shared.u32 [%sm+64], %v;
\tARRIVE
END:
"""
MBAR_REGS = "\t.reg .u32 %sm, %w, %v;\n\t.reg .pred %p, %q;\n\t.reg .b64 %st;"


@pytest.mark.parametrize("schedule", ["round_robin", "reverse", "greedy", "random"])
def test_mbarrier_wait_sees_the_producers_store(schedule):
    x, y = torch.zeros(64), torch.zeros(64, dtype=torch.int32)
    body = MBAR_BODY.replace("ARRIVE", "mbarrier.arrive.shared.b64 %st, [%sm];")
    emulate_ptx(kernel(body, MBAR_REGS), launch(x, y, 64, smem=2048), {"X": x, "Y": y},
                schedule=schedule, seed=5)
    assert (y[:32] == 4242).all()


def test_dynamic_shared_window_goes_by_its_extern_name():
    # pyptx names the window `global_smem`; the emulator takes the .extern .shared name
    x, y = torch.zeros(64), torch.zeros(64, dtype=torch.int32)
    body = MBAR_BODY.replace("ARRIVE", "mbarrier.arrive.shared.b64 %st, [%sm];")
    ptx = kernel(body, MBAR_REGS).replace("smem", "global_smem")
    emulate_ptx(ptx, launch(x, y, 64, smem=2048), {"X": x, "Y": y})
    assert (y[:32] == 4242).all()


def test_deadlock_report_lists_every_warp_and_the_mbarrier_phase():
    x, y = torch.zeros(64), torch.zeros(64, dtype=torch.int32)
    body = MBAR_BODY.replace("ARRIVE", "@%p mbarrier.arrive.shared.b64 %st, [%sm];")
    with pytest.raises(DeadlockError) as err:
        emulate_ptx(kernel(body, MBAR_REGS), launch(x, y, 64, smem=2048), {"X": x, "Y": y})
    text = err.value.render()
    assert "warp 0: waits on mbarrier at shared 0x400 (phase 0, parity 0; 1/32 arrivals" in text
    assert "for parity 0 at kernel.ptx:33: mbarrier.try_wait.parity" in text
    assert "warp 1: exited" in text


def test_named_barrier_with_too_large_a_count_deadlocks_naming_the_barrier():
    x, y = torch.zeros(64), torch.zeros(64, dtype=torch.int32)
    body = "\tbar.sync 1, 96;\n\tst.global.u32 [%b64], %tid;"
    with pytest.raises(DeadlockError, match=r"barrier 1 \(64/96 threads arrived\)"):
        emulate_ptx(kernel(body, ""), launch(x, y, 64), {"X": x, "Y": y})


def test_named_barrier_orders_a_shared_exchange():
    x, y = torch.zeros(64), torch.zeros(64, dtype=torch.int32)
    body = ("\tmov.u32 %sm, smem;\n\tshl.b32 %v, %tid, 2;\n\tadd.u32 %v, %v, %sm;\n"
            "\tst.shared.u32 [%v], %tid;\n\tbar.sync 1, 64;\n"
            "\txor.b32 %w, %tid, 63;\n\tshl.b32 %w, %w, 2;\n\tadd.u32 %w, %w, %sm;\n"
            "\tld.shared.u32 %w, [%w];\n\tst.global.u32 [%b64], %w;")
    emulate_ptx(kernel(body, "\t.reg .u32 %sm, %v, %w;"), launch(x, y, 64, smem=256),
                {"X": x, "Y": y}, schedule="reverse")
    np.testing.assert_array_equal(y.numpy(), np.arange(64) ^ 63)


@pytest.mark.parametrize("fmt,dtype", [("e4m3", torch.float8_e4m3fn),
                                       ("e5m2", torch.float8_e5m2)])
def test_cvt_fp8x2_to_f16x2_matches_torch_for_every_byte(fmt, dtype):
    """cvt.rn.f16x2.e4m3x2 (.e5m2x2): the upper byte of the 16-bit source to the upper half;
    every one of the 65,536 pairs (2,048 lanes of 32 source pairs each) against torch."""
    pairs = torch.arange(65536, dtype=torch.int64).to(torch.int32).reshape(2048, 32)
    x = pairs.clone()
    y = torch.zeros(2048, 32, dtype=torch.int32)
    body = ("\tmov.u32 %i, %ctaid.x;\n\tmul.wide.u32 %c64, %i, 128;\n"
            "\tadd.s64 %a64, %a64, %c64;\n\tadd.s64 %b64, %b64, %c64;\n"
            "\tld.global.u32 %w, [%a64];\n\tcvt.u16.u32 %h, %w;\n"
            f"\tcvt.rn.f16x2.{fmt}x2 %r, %h;\n\tst.global.b32 [%b64], %r;")
    regs = "\t.reg .u32 %i, %w;\n\t.reg .u64 %c64;\n\t.reg .b16 %h;\n\t.reg .b32 %r;"
    desc = launch(x, y, grid=(2048, 1, 1))
    emulate_ptx(kernel(body, regs), desc, {"X": x, "Y": y})
    lo = (pairs & 0xFF).to(torch.uint8).view(dtype).to(torch.float16)
    hi = (pairs >> 8).to(torch.uint8).view(dtype).to(torch.float16)
    got = y.numpy().view(np.uint32)
    got_lo = (got & 0xFFFF).astype(np.uint16).view(np.float16)
    got_hi = (got >> 16).astype(np.uint16).view(np.float16)
    for mine, want in ((got_lo, lo.numpy()), (got_hi, hi.numpy())):
        same = (mine == want) | (np.isnan(mine) & np.isnan(want))
        assert same.all(), int((~same).sum())


# ---------------------------------------------------------------- refusals
def test_unknown_instruction_is_refused_by_name_with_its_line():
    x, y = torch.zeros(32), torch.zeros(32)
    body = "\tbrev.b32 %r, %tid;"
    with pytest.raises(UnsupportedError) as err:
        run(body, "\t.reg .b32 %r;", x, y)
    assert "'brev.b32'" in str(err.value) and "kernel.ptx:21:" in str(err.value)


def test_a_call_is_refused_by_name_with_its_callee():
    """`call` (vprintf: printf in a kernel) is read, then refused when the kernel loads."""
    x, y = torch.zeros(32), torch.zeros(32)
    body = "\tcall (ret), vprintf, (fmt, args);"
    with pytest.raises(UnsupportedError) as err:
        run(body, "", x, y)
    assert "'call' of vprintf" in str(err.value) and "kernel.ptx:" in str(err.value)


def test_a_local_variable_is_refused_by_name_where_it_is_used():
    x, y = torch.zeros(32), torch.zeros(32)
    body = "\t.local .align 8 .b8 buf[8];\n\tmov.u64 %p, buf;"
    with pytest.raises(UnsupportedError) as err:
        run(body, "\t.reg .u64 %p;", x, y)
    assert "'buf' is a .local variable" in str(err.value) and "kernel.ptx:22:" in str(err.value)


def test_shared_access_outside_the_window_is_an_error():
    x, y = torch.zeros(32), torch.zeros(32)
    body = "\tmov.u32 %v, 1000000;\n\tld.shared.u32 %v, [%v];"
    with pytest.raises(EmuError, match="outside the"):
        run(body, "\t.reg .u32 %v;", x, y)


# ---------------------------------------------------------------- the command
def test_cli_emulates_a_co_file_and_checks_it(capsys):
    from choreo_py.cli import main
    rc = main(["emulate", "examples/gemm.co", "--shape", "M=128,N=128,K=64", "--target", "sm_90a",
               "--schedule", "random", "--seed", "2"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "schedule=random seed=2 strict" in out and "check matmul" in out and ": ok" in out


@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_cli_emulates_a_host_program_against_the_interpreter(target, capsys):
    """A host program (a result buffer, here one thread kernel) runs through
    emulate_program on `choreo run`'s inputs; its result is compared with the
    interpreter's (the command refused host programs by name before)."""
    from choreo_py.cli import main
    rc = main(["emulate", "examples/vector_add.co", "--shape", "N=1000", "--target", target])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert f"emulated vector_add [N=1000] (host program) target={target}" in out
    assert "check interpreter: result max abs error 0.000e+00" in out and ": ok" in out
    assert main(["emulate", "examples/vector_add.co", "--shape", "N=64", "--check", "none",
                 "--schedule", "random", "--seed", "3"]) == 0
    out = capsys.readouterr().out
    assert "schedule=random seed=3 strict" in out
    assert "check none (--check none): outputs (result) not compared" in out


def test_cli_refuses_a_host_programs_pyptx_module_by_name(tmp_path, capsys):
    """Its module holds several entries and no launch of its own."""
    from choreo_py.cli import main
    mod = tmp_path / "vector_add.sm90a.py"
    assert main(["compile", "examples/vector_add.co", "--target", "sm_90a", "-o", str(mod)]) == 0
    assert main(["emulate", str(mod), "--shape", "N=64"]) == 1
    assert "is a host program" in capsys.readouterr().err


def test_cli_runs_raw_ptx_with_a_launch_description(tmp_path, capsys):
    import json
    from choreo_py.cli import main
    body = "\tld.global.f32 %x, [%a64];\n\tadd.f32 %x, %x, %x;\n\tst.global.f32 [%b64], %x;"
    ptx = tmp_path / "double.ptx"
    ptx.write_text(kernel(body, "\t.reg .f32 %x;"))
    desc = launch(torch.zeros(32), torch.zeros(32))
    desc["tensors"]["X"]["init"] = "randn"
    desc["reference"] = {"output": "Y", "expr": "2 * X"}
    js = tmp_path / "double.json"
    js.write_text(json.dumps(desc))
    assert main(["emulate", str(ptx), "--launch", str(js)]) == 0
    out = capsys.readouterr().out
    assert "emulated double.ptx" in out and "check 2 * X" in out and ": ok" in out
    assert main(["emulate", str(ptx)]) == 2
    assert "needs --launch" in capsys.readouterr().err


def test_cli_reports_a_deadlock_with_exit_1(tmp_path, capsys):
    import json
    from choreo_py.cli import main
    x, y = torch.zeros(64), torch.zeros(64, dtype=torch.int32)
    ptx = tmp_path / "hang.ptx"
    ptx.write_text(kernel("\tbar.sync 1, 96;", ""))
    js = tmp_path / "hang.json"
    js.write_text(json.dumps(launch(x, y, 64)))
    assert main(["emulate", str(ptx), "--launch", str(js)]) == 1
    err = capsys.readouterr().err
    assert "deadlock" in err and "warp 0: waits on barrier 1 (64/96 threads arrived)" in err
    assert "hang.ptx:" in err


def test_cli_runs_a_pyptx_module_with_its_launch_facts(tmp_path, capsys):
    from choreo_py.cli import main
    mod = tmp_path / "gemm.sm90a.py"
    assert main(["compile", "examples/gemm.co", "--target", "sm_90a", "-o", str(mod)]) == 0
    assert main(["emulate", str(mod), "--shape", "M=128,N=128,K=128", "--schedule", "reverse"]) == 0
    out = capsys.readouterr().out
    assert "emulated gemm (gemm.sm90a.py) target=sm_90a" in out and "check: C" in out and ": ok" in out
    assert main(["emulate", str(mod), "--shape", "M=128"]) == 2
    assert "missing --shape entries for K, N" in capsys.readouterr().err


def test_cvt_f32_to_f16_and_back_matches_torch():
    """cvt.rn.f16.f32 then cvt.f32.f16 (an f16 accumulator's rounding on both targets): round
    to nearest even, ties included, f16 subnormals, overflow to infinity, against torch."""
    g = torch.Generator().manual_seed(4)
    ulp = 2.0 ** -10
    ties = [1 + ulp / 2, 1 + 3 * ulp / 2, -(2 + ulp), 2.0 ** -25, 3 * 2.0 ** -25, 65520.0,
            65519.0, -70000.0, 2.0 ** -14 * (1 - ulp / 2), 0.0, -0.0, float("inf")]
    rand = torch.randn(2048 - len(ties), generator=g) * torch.exp2(
        torch.randint(-26, 17, (2048 - len(ties),), generator=g).float())
    x = torch.cat([torch.tensor(ties), rand]).float().reshape(64, 32)
    y = torch.zeros(64, 32)
    body = ("\tmov.u32 %i, %ctaid.x;\n\tmul.wide.u32 %c64, %i, 128;\n"
            "\tadd.s64 %a64, %a64, %c64;\n\tadd.s64 %b64, %b64, %c64;\n"
            "\tld.global.f32 %x, [%a64];\n\tcvt.rn.f16.f32 %h, %x;\n"
            "\tcvt.f32.f16 %r, %h;\n\tst.global.f32 [%b64], %r;")
    regs = "\t.reg .u32 %i;\n\t.reg .u64 %c64;\n\t.reg .b16 %h;\n\t.reg .f32 %x, %r;"
    emulate_ptx(kernel(body, regs), launch(x, y, grid=(64, 1, 1)), {"X": x, "Y": y})
    want = x.half().float()
    assert torch.equal(y.view(torch.int32), want.view(torch.int32))
