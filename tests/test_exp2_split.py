"""The exp2 split (pass exp2-split, lowering/core/exp2_poly.py): part of P's __exp2f on the
FMA pipes by a degree-3 polynomial, the rest on MUFU (ex2.approx).

- The f32 sequence, modelled with the emulator's f32 arithmetic, against float64 exp2 over
  a dense range: its maximal relative error (before any bf16 rounding) is under 2^-13.
- The emulator executes the sequence the lowering emits bit for bit as that model, and
  maps -inf (and everything below -127) to +0.0.
- The pass marks only applies whose every __exp2f is rounded to bf16/f16 into an MMA
  operand or is the same call as one that is (P's row sum), and only on request (`[[exp2_split(f)]]`); bad requests are located errors.
- In FA-shaped programs (sm_100a: tests/co/fa_blackwell_one_tile.co, the Blackwell example
  before its rewrite; sm_90a: examples/flash_atten.co) with the request, the PTX holds the counted MUFU and FMA
  instructions, ptxas accepts it, and the emulator matches SDPA as closely as without it.
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import torch

import choreo_py
from choreo_py.driver import compile_file
from choreo_py.emu import emulate_ptx
from choreo_py.emu.rounding import add_f32, fma_f32
from choreo_py.lowering.core import exp2_poly
from choreo_py.lowering.core.writer import V, f32_hex
from fa_helpers import fa_inputs, sdpa_full

ROOT = Path(__file__).resolve().parent.parent
FA100 = ROOT / "tests" / "co" / "fa_blackwell_one_tile.co"  # the example before its rewrite
FA90 = ROOT / "examples" / "flash_atten.co"
P_APPLY = "          apply {i, j} in p.span\n            p.at(i, j) = __to(__exp2f("


def model(x: np.ndarray) -> np.ndarray:
    """The emitted sequence in the emulator's f32 arithmetic (float32 in, float32 out)."""
    f = np.float32
    a = np.minimum(np.maximum(x, f(exp2_poly.LOW)), f(exp2_poly.HIGH))
    t = add_f32(a, np.full_like(a, exp2_poly.SHIFTER), "rm")
    n = t - f(exp2_poly.SHIFTER)
    frac = a - n
    c = [np.full_like(a, v) for v in exp2_poly.COEFFS]
    p = fma_f32(frac, c[3], c[2], "rn")
    p = fma_f32(p, frac, c[1], "rn")
    p = fma_f32(p, frac, c[0], "rn")
    e = (t.view(np.uint32) << np.uint32(23)).astype(np.uint32)
    return (p.view(np.uint32) + e).astype(np.uint32).view(np.float32)


def _dense() -> np.ndarray:
    """Every 509th f32 of [-126, 127) (about 2^20.6 values, of every exponent and spread
    over the mantissas: 509 is prime) and 2^20 evenly spaced points of one unit interval."""
    lo = np.float32(-126.0).view(np.uint32)  # negative: bit patterns descend to -0
    neg = np.arange(np.uint32(0x80000000), lo, 509, dtype=np.uint32).view(np.float32)
    pos = np.arange(0, np.float32(127.0).view(np.uint32), 509, dtype=np.uint32).view(np.float32)
    unit = np.linspace(-3, -2, 1 << 20, dtype=np.float32)
    return np.concatenate([neg, pos, unit])


def test_the_polynomial_is_within_2_to_minus_13_of_exp2():
    x = _dense()
    ref = torch.exp2(torch.from_numpy(x.astype(np.float64))).numpy()
    got = model(x).astype(np.float64)
    rel = np.abs(got - ref) / ref
    worst = float(rel.max())
    assert worst < 2 ** -13, (worst, float(x[rel.argmax()]))
    assert worst > 2 ** -15  # a degree-3 polynomial: the bound is the polynomial's, not f32's
    # bf16 keeps 8 significant bits: the error is far below its half ulp (2^-9)


class _Recorder:
    """A stand-in writer: the instructions exp2_poly.emit writes, as PTX text."""

    def __init__(self):
        self.lines, self.regs = [], {}

    def reg(self, ty, hint):
        name = f"{hint}{len(self.regs)}"
        self.regs[name] = ty
        return V(name, ty)

    def op(self, opcode, *ops):
        def spell(o):
            if isinstance(o, V):
                return f32_hex(o.const) if o.is_const and o.ty == "f32" else (
                    o.text if o.is_const else "%" + o.text)
            return str(o)
        self.lines.append(f"\t{opcode} {', '.join(spell(o) for o in ops)};")


def _emulate_sequence(x: torch.Tensor) -> torch.Tensor:
    rec = _Recorder()
    exp2_poly.emit(rec, V("y", "f32"), V("x", "f32"))
    decls = "\n".join(f"\t.reg .{ty} %{n};" for n, ty in rec.regs.items())
    ptx = f""".version 8.7
.target sm_100a
.address_size 64

.visible .entry k(
\t.param .u64 p_x,
\t.param .u64 p_y
)
{{
\t.reg .u64 %px, %py, %a;
\t.reg .u32 %i;
\t.reg .f32 %x, %y;
{decls}
\tld.param.u64 %px, [p_x];
\tld.param.u64 %py, [p_y];
\tmov.u32 %i, %ctaid.x;
\tshl.b32 %i, %i, 7;
\tadd.u32 %i, %i, %tid.x;
\tshl.b32 %i, %i, 2;
\tcvt.u64.u32 %a, %i;
\tadd.s64 %px, %px, %a;
\tadd.s64 %py, %py, %a;
\tld.global.f32 %x, [%px];
{chr(10).join(rec.lines)}
\tst.global.f32 [%py], %y;
\tret;
}}
"""
    y = torch.zeros_like(x)
    desc = {"grid": [x.numel() // 128, 1, 1], "block": [128, 1, 1],
            "params": [{"name": "p_x", "ptr": "X"}, {"name": "p_y", "ptr": "Y"}],
            "tensors": {"X": {"dtype": "f32", "shape": [x.numel()]},
                        "Y": {"dtype": "f32", "shape": [x.numel()]}}}
    emulate_ptx(ptx, desc, {"X": x, "Y": y})
    return y


@pytest.mark.emu
def test_the_emulator_runs_the_emitted_sequence_as_the_model():
    g = torch.Generator().manual_seed(3)
    x = torch.cat([torch.rand(4096 - 8, generator=g) * 280 - 145,
                   torch.tensor([-float("inf"), -127.0, -126.5, 0.0, 1.0, 7.999, 127.5, 200.0])])
    y = _emulate_sequence(x.float())
    want = model(x.float().numpy())
    assert np.array_equal(y.numpy().view(np.uint32), want.view(np.uint32))
    assert y[-8] == 0.0 and y[-7] == 0.0 and y[-5] == 1.0 and y[-4] == 2.0
    assert torch.isfinite(y).all()  # past 127: just under 2^128, where ex2 gives inf


# ---------------------------------------------------------------- the pass

def _requested(tmp_path, path: Path, old: str, new: str) -> Path:
    src = path.read_text()
    assert old in src
    out = tmp_path / path.name
    out.write_text(src.replace(old, new, 1))
    return out


def _line_of(path: Path, text: str) -> int:
    return next(n for n, line in enumerate(path.read_text().splitlines(), 1) if text in line)


def _fa100(tmp_path, fraction="0.25") -> Path:
    return _requested(tmp_path, FA100, P_APPLY,
                      f"          [[exp2_split({fraction})]] apply {{i, j}} in p.span\n"
                      "            p.at(i, j) = __to(__exp2f(")


def test_the_split_is_made_only_on_request(tmp_path):
    assert "exp2-poly" not in compile_file(str(FA100), emit="ir", target="sm_100a")
    text = compile_file(str(_fa100(tmp_path)), emit="ir", target="sm_100a")
    marked = [line.strip() for line in text.splitlines() if "exp2-poly" in line]
    assert marked == ["apply (i, j) in p[128, 128] exp2-split=0.25 exp2-poly=k%16 in "
                      "{3, 7, 11, 15} {"]
    off = compile_file(str(_fa100(tmp_path, "0")), emit="ir", target="sm_100a")
    assert "exp2-split=0.0 {" in off and "exp2-poly" not in off


@pytest.mark.parametrize("attr, error", [
    ("[[exp2_split(0.3)]]", "'[[exp2_split(f)]]' takes one constant fraction in [0, 1], in "
                            "sixteenths (0, 0.25, 0.5, ...)"),
    ("[[exp2_split(2)]]", "'[[exp2_split(f)]]' takes one constant fraction"),
])
def test_a_bad_fraction_is_a_located_error(tmp_path, attr, error):
    path = _requested(tmp_path, FA100, P_APPLY, f"          {attr} apply {{i, j}} in p.span\n"
                      "            p.at(i, j) = __to(__exp2f(")
    with pytest.raises(choreo_py.ChoreoError) as e:
        compile_file(str(path), emit="ir", target="sm_100a")
    assert f"fa_blackwell_one_tile.co:{_line_of(path, attr)}:11: error: {error}" in str(e.value)


def test_the_attribute_on_an_apply_without_a_rounded_exp2_is_refused(tmp_path):
    old = "          apply {i, j} in s.span\n            l.at(i) ="
    path = _requested(tmp_path, FA100, old, "          [[exp2_split(0.5)]] apply {i, j} in "
                      "s.span\n            l.at(i) =")
    with pytest.raises(choreo_py.ChoreoError) as e:
        compile_file(str(path), emit="ir", target="sm_100a")
    at = _line_of(path, "[[exp2_split(0.5)]]")
    assert (f"fa_blackwell_one_tile.co:{at}:31: error: '[[exp2_split]]': this apply has no "
            "__exp2f whose result is rounded to bf16 or f16 alone") in str(e.value)


FA2T = ROOT / "examples" / "flash_atten_blackwell.co"
L0_SUM = ("            l0.at(i) = l0.at(i) + __exp2f(s0.at(i, j) * 0.12751743f - "
          "m0.at(i) * 0.12751743f);\n")


def test_the_row_sum_of_the_same_exponential_is_split_with_it():
    """examples/flash_atten_blackwell.co writes P and sums the same __exp2f into l in one
    apply: the pass splits it (the lowering computes the call once, so l adds the values
    P was rounded from)."""
    text = compile_file(str(FA2T), emit="ir", target="sm_100a")
    assert [line.strip() for line in text.splitlines() if "exp2-poly" in line] == \
        [f"apply (i, j) in p{n}[128, 128] exp2-split=0.25 exp2-poly=k%16 in {{3, 7, 11, 15}} {{"
         for n in "01"]


def test_a_row_sum_of_another_exponential_is_refused(tmp_path):
    """An unrounded __exp2f that is not one of P's own (here: scaled by 2) would take the
    polynomial's error unrounded: the apply is refused."""
    path = _requested(tmp_path, FA2T, L0_SUM, L0_SUM.replace("0.12751743f);", "0.25f);"))
    with pytest.raises(choreo_py.ChoreoError) as e:
        compile_file(str(path), emit="ir", target="sm_100a")
    at = _line_of(path, "[[exp2_split(0.25)]] apply {i, j} in p0.span")
    assert (f"flash_atten_blackwell.co:{at}:36: error: '[[exp2_split]]': this apply has no "
            "__exp2f whose result is rounded to bf16 or f16 alone") in str(e.value)


def test_the_attribute_on_another_statement_is_refused(tmp_path):
    old = "          copy(m_prev, m);"
    path = _requested(tmp_path, FA100, old, "          [[exp2_split(0.5)]] copy(m_prev, m);")
    with pytest.raises(choreo_py.ChoreoError) as e:
        compile_file(str(path), emit="ir", target="sm_100a")
    assert "'[[exp2_split]]' only applies to an apply statement" in str(e.value)


# ---------------------------------------------------------------- PTX, ptxas, emulator

def _p_apply(ptx: str) -> str:
    """The PTX of the P apply: from the tcgen05.ld before the first bf16x2 conversion to
    the store of P."""
    first = ptx.index("cvt.rn.bf16x2.f32")
    start = ptx.rindex("tcgen05.wait::ld", 0, first)
    return ptx[start:ptx.index("tcgen05.st", first)]


@pytest.mark.parametrize("fraction, poly", [("0", 0), ("0.25", 32), ("0.5", 64)])
def test_ptx_counts_mufu_and_fma(tmp_path, fraction, poly):
    ptx = compile_file(str(_fa100(tmp_path, fraction)), emit="ptx", target="sm_100a")
    body = _p_apply(ptx)
    assert body.count("ex2.approx.ftz.f32") == 128 - poly
    assert body.count("add.rm.f32") == poly
    # per element: one fma of the scores (s c - m c), three of the polynomial (an
    # fma.rn.f32x2 is two of them: lowering/core/f32x2.py pairs elements)
    assert body.count("fma.rn.f32 ") + 2 * body.count("fma.rn.f32x2 ") == 128 + 3 * poly
    assert body.count("cvt.rn.bf16x2.f32") == 64


@pytest.mark.ptxas
def test_ptxas_accepts_it_on_both_targets(tmp_path):
    from choreo_py.runtime import build
    ptx = compile_file(str(_fa100(tmp_path)), emit="ptx", target="sm_100a")
    _, log = build.ptxas(ptx, "sm_100a", verbose=True)
    assert "Used" in log and "error" not in log.lower()
    ptx = compile_file(str(_fa90(tmp_path)), emit="ptx", target="sm_90a")
    _, log = build.ptxas(ptx, "sm_90a", verbose=True)
    assert re.search(r"0 bytes spill stores, 0 bytes spill loads", log), log


def _fa90(tmp_path) -> Path:
    """flash_atten.co (sm_90a) whose P casts recompute P as 2^(ln P * log2 e) under the request:
    the same values up to the approximations, half of them through the polynomial."""
    old = ("apply {i, j} in acc_s_cast.span\n"
           "          acc_s_cast.at(i, j) = __to(acc_s.at(i, j));")
    new = ("[[exp2_split(0.5)]] apply {i, j} in acc_s_cast.span\n"
           "          acc_s_cast.at(i, j) = __to(__exp2f(__log(acc_s.at(i, j)) * 1.44269504f));")
    src = FA90.read_text()
    assert src.count(old) == 1 and src.count(old.replace("\n", "\n  ")) == 1
    out = tmp_path / "fa90.co"
    out.write_text(src.replace(old, new).replace(old.replace("\n", "\n  "),
                                                 new.replace("\n", "\n  ")))
    return out


def test_sm90a_splits_on_request(tmp_path):
    ptx = compile_file(str(_fa90(tmp_path)), emit="ptx", target="sm_90a")
    base = compile_file(str(FA90), emit="ptx", target="sm_90a")
    # the two casts: 2 x 64 elements per thread, half of them by the polynomial
    assert ptx.count("add.rm.f32") == 64
    assert ptx.count("ex2.approx.ftz.f32") == base.count("ex2.approx.ftz.f32") + 64


@pytest.mark.emu
def test_emulator_matches_sdpa_with_the_split_sm100(tmp_path):
    from block_helpers import emulate_strict
    from fa_helpers import rel
    q, k, v, o = fa_inputs(256, 256)
    assert emulate_strict(_fa100(tmp_path), dict(Q=q, K=k, V=v, O=o), "random") == []
    err = rel(o, sdpa_full(q, k, v))
    assert not o.float().isnan().any() and err < 5e-3, err  # the example's own tolerance


@pytest.mark.emu
@pytest.mark.slow
def test_emulator_matches_sdpa_with_the_split_sm90(tmp_path):
    from fa_helpers import bshd, rel
    q, k, v = bshd(1, 128, 1, 1), bshd(1, 128, 1, 2), bshd(1, 128, 1, 3)
    o = torch.full_like(q, float("nan"))
    choreo_py.emulate(str(_fa90(tmp_path)), dict(Q=q, K=k, V=v, O=o), target="sm_90a",
                      schedule="random", seed=1)
    err = rel(o, sdpa_full(q, k, v))
    assert not o.float().isnan().any() and err < 5e-3, err
