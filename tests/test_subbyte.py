"""The sub-byte types' codes (choreo_py/ir/subbyte.py) against an independent decode written
here from the formats' definitions, the emulator's fp6/fp4 conversions bit-exact against
it, and integer wrap-around through the interpreter and the emulated PTX."""
from __future__ import annotations

import os
from fractions import Fraction

import numpy as np
import pytest
import torch

import choreo_py
from choreo_py.emu import emulate_ptx
from choreo_py.ir import subbyte

from end2end_refs import END2END
from test_emu_core import kernel, launch

#: name -> (exponent bits, mantissa bits, largest finite value), from the formats' tables
#: (OCP MX: E2M3 max 7.5, E3M2 max 28, E2M1 max 6)
FORMATS = {"f6_e2m3": (2, 3, 7.5), "f6_e3m2": (3, 2, 28.0), "f4_e2m1": (2, 1, 6.0)}


def reference_value(code: int, e: int, m: int) -> Fraction:
    """Sign, biased exponent, mantissa; exponent 0 is subnormal; no infinities or NaN."""
    sign = -1 if code >> (e + m) & 1 else 1
    exp, man = code >> m & ((1 << e) - 1), code & ((1 << m) - 1)
    bias = 2 ** (e - 1) - 1
    if exp == 0:
        return sign * Fraction(man, 2 ** m) * Fraction(2) ** (1 - bias)
    return sign * (1 + Fraction(man, 2 ** m)) * Fraction(2) ** (exp - bias)


def reference_encode(x: float, e: int, m: int) -> int:
    """The nearest code (ties to the even code), saturating; NaN to the largest code."""
    n = 1 << (e + m)
    if x != x:
        return n - 1
    mags = [reference_value(c, e, m) for c in range(n)]
    ax = Fraction(abs(x)) if abs(x) != float("inf") else mags[-1]
    best = min(range(n), key=lambda c: (abs(mags[c] - ax), c % 2))
    return best | (n if np.signbit(x) else 0)


@pytest.mark.parametrize("name", FORMATS)
def test_decode_matches_the_format_definition(name):
    e, m, top = FORMATS[name]
    codes = torch.arange(1 << (1 + e + m))
    got = subbyte.decode(codes, name)
    want = [float(reference_value(c, e, m)) for c in range(1 << (1 + e + m))]
    assert got.tolist() == want
    assert subbyte.max_finite(name) == top and bool(torch.isfinite(got).all())
    assert torch.signbit(got[1 << (e + m)])  # the negative zero code
    # bits above the code's are ignored (the top bits of the byte)
    assert torch.equal(subbyte.decode(codes | (0xFF ^ ((1 << (1 + e + m)) - 1)), name), got)


@pytest.mark.parametrize("name", FORMATS)
def test_encode_rounds_to_nearest_even_and_saturates(name):
    e, m, top = FORMATS[name]
    mags = [reference_value(c, e, m) for c in range(1 << (e + m))]
    probes = [0.0, -0.0, top * 1.5, -1e9, float("inf"), float("-inf"), float("nan")]
    for a, b in zip(mags, mags[1:]):
        mid = float((a + b) / 2)
        probes += [float(a), mid, np.nextafter(mid, 0), np.nextafter(mid, 100)]
    probes += (torch.randn(500, generator=torch.Generator().manual_seed(3)) * top).tolist()
    xs = probes + [-p for p in probes]
    got = subbyte.encode(torch.tensor(xs, dtype=torch.float64), name).tolist()
    want = [reference_encode(x, e, m) for x in xs]
    assert got == want
    # the interpreter's one-element path, and decode_one
    assert [subbyte.encode_one(x, name) for x in xs] == want
    assert [subbyte.decode_one(c, name) for c in want] == \
        [float(reference_value(c, e, m)) for c in want]


@pytest.mark.parametrize("name", sorted(subbyte.INT_FORMATS))
def test_integer_codes_keep_the_low_bits(name):
    bits, signed = subbyte.INT_FORMATS[name]
    v = torch.arange(-300, 300)
    codes = subbyte.encode(v, name)
    if name == "bin1":  # a bool
        assert codes.tolist() == [int(x != 0) for x in v.tolist()]
    else:
        assert codes.tolist() == [x % (1 << bits) for x in v.tolist()]
    assert [subbyte.encode_one(x, name) for x in v.tolist()] == codes.tolist()
    back = subbyte.decode(codes, name).tolist()
    assert [subbyte.decode_one(c, name) for c in codes.tolist()] == back
    if signed:
        assert back == [c - (1 << bits) if c >= 1 << (bits - 1) else c for c in codes.tolist()]
    else:
        assert back == codes.tolist()


_PAIRS = {"f6_e2m3": ("e2m3x2", 8), "f6_e3m2": ("e3m2x2", 8), "f4_e2m1": ("e2m1x2", 4)}


@pytest.mark.parametrize("name", FORMATS)
def test_emulated_cvt_pairs_match_the_reference(name):
    """cvt.rn.satfinite.<pair>.f32 of (x, -x) then cvt.rn.f16x2.<pair> back: the codes and
    the f16 values, for 32 x 32 probes (each lane's two codes are the two inputs')."""
    e, m, top = FORMATS[name]
    pair, width = _PAIRS[name]
    reg = "b16" if width == 8 else "b8"
    g = torch.Generator().manual_seed(5)
    x = (torch.randn(32 * 32, generator=g) * top / 2).reshape(32, 32).float()
    x[0, :4] = torch.tensor([0.0, top * 4, float(mags_mid(e, m)), -0.0])
    codes = torch.zeros(32, 32, dtype=torch.int32)
    back = torch.zeros(32, 32, dtype=torch.int32)
    body = ("\tmov.u32 %i, %ctaid.x;\n\tmul.wide.u32 %c64, %i, 128;\n"
            "\tadd.s64 %a64, %a64, %c64;\n\tadd.s64 %b64, %b64, %c64;\n"
            "\tld.global.f32 %f, [%a64];\n\tneg.f32 %g, %f;\n"
            f"\tcvt.rn.satfinite.{pair}.f32 %q, %f, %g;\n"
            f"\tcvt.rn.f16x2.{pair} %r, %q;\n"
            "\tcvt.u32.u16 %w, %q;\n" if width == 8 else
            "\tmov.u32 %i, %ctaid.x;\n\tmul.wide.u32 %c64, %i, 128;\n"
            "\tadd.s64 %a64, %a64, %c64;\n\tadd.s64 %b64, %b64, %c64;\n"
            "\tld.global.f32 %f, [%a64];\n\tneg.f32 %g, %f;\n"
            f"\tcvt.rn.satfinite.{pair}.f32 %q, %f, %g;\n"
            f"\tcvt.rn.f16x2.{pair} %r, %q;\n"
            "\tcvt.u32.u8 %w, %q;\n")
    body += "\tst.global.b32 [%b64], %w;\n\tadd.s64 %b64, %b64, 4096;\n\tst.global.b32 [%b64], %r;"
    regs = (f"\t.reg .u32 %i, %w;\n\t.reg .u64 %c64;\n\t.reg .f32 %f, %g;\n\t.reg .{reg} %q;\n"
            "\t.reg .b32 %r;")
    y = torch.cat([codes, back]).reshape(64, 32)
    desc = launch(x, y, grid=(32, 1, 1))
    emulate_ptx(kernel(body, regs).replace("sm_90a", "sm_100a"), desc, {"X": x, "Y": y})
    got_codes, got_back = y[:32].numpy().view(np.uint32), y[32:].numpy().view(np.uint32)
    hi_code = [reference_encode(v, e, m) for v in x.flatten().tolist()]
    lo_code = [reference_encode(-v, e, m) for v in x.flatten().tolist()]
    want = [(h << width) | lo for h, lo in zip(hi_code, lo_code)]
    assert got_codes.flatten().tolist() == want
    halves = [(got_back.flatten() >> 16) & 0xFFFF, got_back.flatten() & 0xFFFF]
    for half, code in zip(halves, (hi_code, lo_code)):
        vals = half.astype(np.uint16).view(np.float16).astype(np.float64).tolist()
        assert vals == [float(reference_value(c, e, m)) for c in code]


def mags_mid(e, m):
    """A tie: the midpoint of the two smallest nonzero magnitudes."""
    return (reference_value(1, e, m) + reference_value(2, e, m)) / 2


@pytest.mark.parametrize("name", ["u6", "s4"])
def test_integer_sums_wrap_in_the_interpreter_and_the_emulated_ptx(name):
    """integral_types.co's ele_add on every code pair (its main() adds only 0 and 1):
    static_cast<T>(a + b) keeps the low bits, in the interpreter and on sm_90a's PTX."""
    path = os.path.join(END2END, "integral_types.co")
    if not os.path.exists(path):
        pytest.skip(f"{path} is not available (set CHOREO_SHARED to the shared folder)")
    bits, _ = subbyte.INT_FORMATS[name]
    g = torch.Generator().manual_seed(1)
    a, b = (torch.randint(0, 1 << bits, (6, 64), generator=g).to(torch.uint8) for _ in "ab")
    want = subbyte.encode(subbyte.decode(a, name) + subbyte.decode(b, name), name)
    fn = f"ele_add_{name}"
    got = choreo_py.interpret(path, function=fn, target="sm_90a")(a, b)
    assert torch.equal(got, want)
    emulated = choreo_py.emulate_program(path, target="sm_90a")[fn](a, b)
    assert torch.equal(emulated, want)
