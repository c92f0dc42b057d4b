"""sm_100's packed pair forms in the emulator (choreo_py/emu/isa_f32x2.py) against the
PTX ISA: each half is its scalar form bit for bit (what the lowering's pairing rests
on, lowering/core/f32x2.py), fma.rn rounds once, .ftz flushes subnormal inputs and
results."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
import torch

from choreo_py.emu import emulate_ptx
from test_emu_core import F32X2_BODY, _round_exact, kernel, launch, run

pytestmark = pytest.mark.emu


def _hex(v) -> str:
    return "0f%08X" % int(np.float32(v).view(np.uint32))


def test_fma_rn_rounds_once_where_float64_would_round_twice():
    # a * b + c = 1 + 2^-24 + 2^-70, just above the float32 tie 1 + 2^-24: float64 rounds
    # it onto the tie, which goes to the even 1.0; rounded once it is 1 + 2^-23
    a, b, c = np.float32(1 + 2.0 ** -23), np.float32(-(2.0 ** -24) * (1 - 2.0 ** -23)), \
        np.float32(1 + 2.0 ** -23)
    twice = np.float32(np.float64(a) * np.float64(b) + np.float64(c))
    exact = _round_exact(Fraction(float(a)) * Fraction(float(b)) + Fraction(float(c)), "rn")
    assert twice != exact  # (the case this test is about)
    x = torch.full((32,), float(a))
    for op, regs in (("fma.rn.f32 %r, %x, %b, %c;", "\t.reg .f32 %x, %b, %c, %r;"),):
        y = torch.zeros(32)
        body = (f"\tld.global.f32 %x, [%a64];\n\tmov.f32 %b, {_hex(b)};\n"
                f"\tmov.f32 %c, {_hex(c)};\n\t{op}\n\tst.global.f32 [%b64], %r;")
        run(body, regs, x, y)
        assert (y.numpy() == exact).all()
    y = torch.zeros(64)  # the pair form, each half alike
    body = (F32X2_BODY.replace("\tmov.f32 %c, 0f3EAAAAAB;\n\tmov.b64 %c2, {%c, %c};\n", "")
            .replace("OP", f"mov.f32 %c, {_hex(b)};\n\tmov.f32 %d, {_hex(c)};\n"
                     "\tmov.b64 %c2, {%c, %c};\n\tmov.b64 %d2, {%d, %d};\n"
                     "\tfma.rn.f32x2 %r2, %x2, %c2, %d2;"))
    emulate_ptx(kernel(body, "\t.reg .u32 %o8;\n\t.reg .u64 %q, %pa, %pb;\n"
                       "\t.reg .b64 %x2, %c2, %d2, %r2;\n\t.reg .f32 %c, %d;"),
                launch(torch.full((64,), float(a)), y), {"X": torch.full((64,), float(a)), "Y": y})
    assert (y.numpy() == exact).all()


# values where the forms differ most: subnormals (flushed by .ftz), signed zeros, the
# infinities, NaN, ties; element for element the pair form must give the scalar form's bits
_EDGE = np.array([1e-40, -1e-40, 0.0, -0.0, np.inf, -np.inf, np.nan, 1.5, -2.5,
                  1.1754942e-38, -1.1754942e-38, 3.4e38, -3.4e38, 1 + 2.0 ** -23,
                  2.0 ** -126, 5.877472e-39], dtype=np.float32)


def _edge_lanes(seed: int) -> np.ndarray:
    g = np.random.default_rng(seed)
    rnd = (g.standard_normal(48) * g.choice([1e-39, 1e-3, 1.0, 1e30], 48)).astype(np.float32)
    return np.concatenate([_EDGE, rnd])


F32X2_VS_SCALAR = """\tshl.b32 %o8, %tid, 3;
\tcvt.u64.u32 %q, %o8;
\tadd.s64 %pa, %px, %q;
\tadd.s64 %pb, %py, %q;
\tld.global.b64 %x2, [%pa];
\tmov.b64 {%x0, %x1}, %x2;
\tmov.f32 %c0, 0f3EAAAAAB;
\tmov.f32 %c1, 0f00400000;
\tmov.b64 %c2, {%c0, %c1};
\tSCALAR0
\tSCALAR1
\tmov.b64 %s2, {%r0, %r1};
\tPAIR
\tst.global.b64 [%pb], %s2;
\tst.global.b64 [%pb+256], %r2;"""


@pytest.mark.parametrize("mods", ["rn", "", "rz", "rm", "rp", "rn.ftz", "ftz", "rm.ftz"])
@pytest.mark.parametrize("name", ["add", "sub", "mul", "fma"])
def test_f32x2_halves_are_the_scalar_forms_bit_for_bit(name, mods):
    """What the lowering's pairing rests on (lowering/core/f32x2.py): each half of
    NAME.MODS.f32x2 is NAME.MODS.f32 of that half, on edge values (subnormals: .ftz
    flushes inputs and results; zeros, infinities, NaN) and random ones of all scales."""
    if name == "fma" and not any(m in mods for m in ("rn", "rz", "rm", "rp")):
        mods = "rn." + mods  # (fma has no form without its rounding)
    op = ".".join([name] + [m for m in mods.split(".") if m])
    src = lambda a, c: f"{a}, {c}, {a}" if name == "fma" else f"{a}, {c}"
    body = (F32X2_VS_SCALAR.replace("SCALAR0", f"{op}.f32 %r0, {src('%x0', '%c0')};")
            .replace("SCALAR1", f"{op}.f32 %r1, {src('%x1', '%c1')};")
            .replace("PAIR", f"{op}.f32x2 %r2, {src('%x2', '%c2')};"))
    regs = ("\t.reg .u32 %o8;\n\t.reg .u64 %q, %pa, %pb;\n\t.reg .b64 %x2, %c2, %r2, %s2;\n"
            "\t.reg .f32 %x0, %x1, %c0, %c1, %r0, %r1;")
    x = torch.from_numpy(_edge_lanes(len(op)))
    y = torch.zeros(128)
    emulate_ptx(kernel(body, regs), launch(x, y), {"X": x, "Y": y})
    scalar, pair = y.numpy()[:64].view(np.uint32), y.numpy()[64:].view(np.uint32)
    np.testing.assert_array_equal(pair, scalar)
    if "ftz" in mods:  # the subnormal inputs were flushed: no subnormal comes out
        out = y.numpy()[:64]
        assert not ((out != 0) & (np.abs(out) < np.float32(1.1754944e-38))).any()
