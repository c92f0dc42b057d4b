"""sm_100a's .f32x2 pairs of an apply's f32 arithmetic (lowering/core/f32x2.py): where they
are made, what they leave alone, and that a paired kernel computes the scalar kernel's
bits (the strict emulator runs both lowerings of one program on the same inputs)."""
from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
import torch

from choreo_py import targets
from choreo_py.driver import ir_of_file
from choreo_py.runtime import build

from block_helpers import emulate_strict

ROOT = Path(__file__).resolve().parent.parent
RESCALE = ROOT / "examples" / "gemm_block_acc_rescale.co"
ATTENTION = ROOT / "examples" / "flash_atten_blackwell.co"
APPLY = "acc.at(i, j) = acc.at(i, j) / __max(row_max.at(i), 1.0f);"
PAIR = re.compile(r"^\s*(add|sub|mul|fma)[.a-z]*\.f32x2 ", re.M)

# apply bodies over the accumulator: contracted fmas with a row value and immediates;
# subs, adds and fmas of elements, row values and constants; multiplies alone
BODIES = {
    "fma": "acc.at(i, j) = (acc.at(i, j) * 0.3f - row_max.at(i) * 0.7f) * 1.1f + 0.1f;",
    "mixed": "acc.at(i, j) = (acc.at(i, j) - row_max.at(i)) * (acc.at(i, j) + 0.1f) "
             "- 0.37f * row_max.at(i);",
    "mul": "acc.at(i, j) = acc.at(i, j) * 0.3f * row_max.at(i);",
}


def _program(tmp_path, body: str) -> Path:
    """gemm_block_acc_rescale.co with `body` as its apply and C in f32: the accumulator's
    own bits reach C (a bf16 C would round last-bit differences away)."""
    src = RESCALE.read_text()
    assert APPLY in src and "global bf16[M, N] C" in src
    src = (src.replace(APPLY, body).replace("global bf16[M, N] C", "global f32[M, N] C")
           .replace("shared bf16[BM, BN] c_buf", "shared f32[BM, BN] c_buf"))
    out = tmp_path / "pairs.co"
    out.write_text(src)
    return out


@pytest.fixture(autouse=True)
def pairs_on(monkeypatch):
    """The pairs made unconditionally (f32x2.PAIR = True), not as ptxas's probe decides
    per kernel (tests/test_f32x2_probe.py): these tests check the pairs themselves."""
    from choreo_py.lowering.core import f32x2
    monkeypatch.setattr(f32x2, "PAIR", True)


@pytest.fixture
def scalar_sm100(monkeypatch):
    """sm_100a's record without the f32x2 forms: the same lowering, every op scalar."""
    rec = dataclasses.replace(targets.TARGETS["sm_100a"], f32x2=False)
    monkeypatch.setitem(targets.TARGETS, "sm_100a", rec)


def _ptx(path, target: str = "sm_100a", defines=None) -> str:
    module = ir_of_file(str(path), (), defines, target=target)
    return build.run_module(build.pyptx_text(module, str(path), target), "<test>").ptx()


def test_only_sm100a_records_the_pair_forms():
    assert targets.get("sm_100a").f32x2 and not targets.get("sm_90a").f32x2


@pytest.mark.parametrize("kind", sorted(BODIES))
def test_an_apply_pairs_neighbouring_elements(tmp_path, kind):
    """Element k's instruction and element k + 1's as one pair, their registers packed as
    they come out of tensor memory ({%acc2, %acc3}), the result unpacked in place."""
    ptx = _ptx(_program(tmp_path, BODIES[kind]))
    assert len(PAIR.findall(ptx)) >= 100
    assert re.search(r"mov\.b64 %\w+, \{%acc2, %acc3\};", ptx)
    assert re.search(r"mov\.b64 \{%acc2, %acc3\}, %\w+;", ptx)


def test_without_the_record_fact_nothing_is_paired(tmp_path, scalar_sm100):
    ptx = _ptx(_program(tmp_path, BODIES["mixed"]))
    assert not PAIR.search(ptx) and "mov.b64 {" not in ptx


def _emulate(path) -> torch.Tensor:
    g = torch.Generator().manual_seed(7)
    a = torch.randn(128, 192, generator=g).bfloat16()
    b = torch.randn(128, 192, generator=g).bfloat16()
    c = torch.zeros(128, 128)
    assert emulate_strict(path, dict(A=a, B=b, C=c), "random") == []
    return c


@pytest.mark.emu
@pytest.mark.parametrize("kind", sorted(BODIES))
def test_paired_and_scalar_lowerings_give_the_same_bits(tmp_path, monkeypatch, kind):
    """Three MMA steps, each followed by the apply: the paired kernel's C equals the
    scalar kernel's bit for bit (each half of an .f32x2 form rounds as its scalar form)."""
    path = _program(tmp_path, BODIES[kind])
    assert PAIR.search(_ptx(path))
    paired = _emulate(path)
    monkeypatch.setitem(targets.TARGETS, "sm_100a",
                        dataclasses.replace(targets.TARGETS["sm_100a"], f32x2=False))
    assert not PAIR.search(_ptx(path))
    scalar = _emulate(path)
    assert torch.isfinite(scalar).all() and scalar.abs().max() > 0
    assert torch.equal(paired.view(torch.int32), scalar.view(torch.int32))


def test_the_attention_softmax_pairs_its_fmas_and_polynomials():
    """flash_atten_blackwell.co: P's exponent s * c - m * c (one fma an element) in pairs of
    neighbouring columns, and the polynomial exp2 of column 3 with that of column 7: its
    three Horner fmas (the first adds the constant pair C2 = 0x3E691BBC twice), 16 pairs a
    step. Its add.rm and subs (SCALAR_ROUND), the row sums' adds (a reduction tree) and
    the O rescale (a multiply under the row's select) stay scalar."""
    ptx = _ptx(ATTENTION)
    roles = re.split(r"setmaxnreg\.\w+\.sync\.aligned\.u32 \d+;", ptx)[1:]
    for role in roles[2:4]:  # (load, MMA, softmax 0 and 1, correction)
        assert len(re.findall(r"fma\.rn\.f32x2 ", role)) >= 100
        c2 = re.search(r"mov\.b64 %(\w+), 0x3E691BBC3E691BBC;", role).group(1)
        assert len(re.findall(rf"fma\.rn\.f32x2 %\w+, %\w+, %\w+, %{c2};", role)) == 16
        assert len(re.findall(r"add\.rm\.f32 ", role)) == 32
        assert "add.f32x2" not in role and "add.f32 %red" in role
    corr = roles[4]
    assert not PAIR.search(corr) and re.search(r"mul\.f32 %\w+, %o0_0, %sc0_at", corr)


@pytest.mark.emu
@pytest.mark.slow
def test_the_attention_kernel_paired_and_scalar_give_the_same_o(tmp_path, monkeypatch):
    """flash_atten_blackwell.co (one block, Q = 200, KV = 330: a partial last tile, so the
    mask runs; keys past the first tile 4 x larger, so rows rescale): the paired build's O
    is the scalar build's, bit for bit, in the strict emulator."""
    from test_flash_atten_blackwell import _inputs
    src = ATTENTION.read_text().replace("#define NUM_SMS 148\n", "#define NUM_SMS 1\n")
    path = tmp_path / "fa_1.co"
    path.write_text(src)
    outs = []
    for f32x2 in (True, False):
        monkeypatch.setitem(targets.TARGETS, "sm_100a",
                            dataclasses.replace(targets.TARGETS["sm_100a"], f32x2=f32x2))
        assert bool(PAIR.search(_ptx(path))) == f32x2
        q, k, v, o = _inputs(200, 330, 1, grow=4)
        assert emulate_strict(path, dict(Q=q, K=k, V=v, O=o), "random") == []
        outs.append(o)
    assert outs[1].float().abs().max() > 0
    assert torch.equal(outs[0].view(torch.int16), outs[1].view(torch.int16))
