"""Scalar parameters of MMA kernels (`bool is_causal`, `int nk`) are kernel parameters: one
32-bit word each after the dimensions (lowering/core/params.py), passed by the host
program's launcher; the emulated PTX of both targets against torch."""
from __future__ import annotations

import os

import pytest
import torch

import choreo_py
from choreo_py.driver import compile_file
from choreo_py.runtime.build import find_ptxas, ptxas

import end2end_refs as R
import flash_atten_ref as F
from conftest import need_shared
from test_host_programs import emulate_function

HERE = os.path.dirname(os.path.abspath(__file__))
FIRST_K = os.path.join(HERE, "co", "gemm_first_k.co")
TARGETS = ["sm_90a", "sm_100a"]


def _fa_path() -> str:
    return str(need_shared("corpus", "tests", "gpu", "end2end", "flash_atten.co"))


def _fa_args(causal, seed=0):
    g = torch.Generator().manual_seed(seed)
    q, k = (R._floats(g, (1, 1, 100, 64), -0.5, 0.5, torch.float16, "cpu") for _ in range(2))
    v = R._floats(g, (1, 1, 100, 64), -1.0, 1.0, torch.float16, "cpu")
    return q, k, v, causal


@pytest.mark.parametrize("target", TARGETS)
def test_a_bool_parameter_is_a_kernel_parameter(target):
    text = compile_file(_fa_path(), "ptx", target)
    assert ".param .u32 dim_is_causal" in text
    assert "setp.ne.u32 %is_causal, %is_causal_word, 0;" in text  # a predicate, once
    if find_ptxas() is not None:
        ptxas(text, target)


@pytest.mark.emu
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("target", TARGETS)
def test_flash_atten_emulated(target, causal):
    """One build for both values of the flag: the emulated PTX takes the branch the
    argument selects (the masked scores, the shorter loop over KV tiles)."""
    args = _fa_args(causal)
    out, launches = emulate_function(_fa_path(), "flash_atten", args, target)
    assert launches == ["flash_atten"]
    F.fa_check(args, out, F.fa_ref(args))
    other = F.fa_ref(args[:3] + (not causal,))
    assert (out.float() - other).abs().max().item() > 0.1  # the flag changed the result


def _ab(m, n, k, seed):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(m, k, generator=g).half(), torch.randn(n, k, generator=g).half())


def _want(a, b, nk):
    return a[:, :64 * nk].float() @ b[:, :64 * nk].float().t()


@pytest.mark.parametrize("nk", [1, 3])
def test_an_int_parameter_in_the_interpreter(nk):
    a, b = _ab(64, 128, 192, seed=nk)
    got = choreo_py.interpret(FIRST_K, target="sm_90a").gemm_first_k(a, b, nk)
    assert (got.float() - _want(a, b, nk)).abs().max().item() < 0.05


@pytest.mark.emu
@pytest.mark.parametrize("target", TARGETS)
def test_an_int_parameter_emulated(target):
    a, b = _ab(64, 128, 192, seed=9)
    for nk in (2, 3):
        got, _ = emulate_function(FIRST_K, "gemm_first_k", (a, b, nk), target)
        assert (got.float() - _want(a, b, nk)).abs().max().item() < 0.05


def test_one_build_for_every_value():
    """The function builds with its scalars symbolic: no per-call specialisation."""
    from choreo_py import frontend, targets
    from choreo_py.host.specialize import Functions

    funcs = Functions(frontend.parse_file(FIRST_K), targets.get("sm_90a"), strict=True)
    a, b = _ab(64, 128, 192, seed=1)
    assert funcs.get("gemm_first_k", (a, b, 1), {}) is funcs.get("gemm_first_k", (a, b, 3), {})
    k = funcs.get("gemm_first_k", (a, b, 1), {}).kernels[0]
    assert [s.name for s in k.scalars] == ["nk"]


@pytest.mark.gpu
def test_gpu_flash_atten_both_flags():
    for causal in (False, True):
        args = tuple(x.cuda() if torch.is_tensor(x) else x for x in _fa_args(causal, seed=3))
        out = choreo_py.load(_fa_path()).flash_atten(*args).cpu().float()
        want = F.fa_ref(args)
        err = (out - want).abs()
        assert not bool(((err / (want.abs() + 1e-6) > 0.05) & (err > 0.01)).any()), causal


SCALED = os.path.join(HERE, "co", "gemm_scaled.co")


def _scaled_want(a, b, alpha, relu):
    want = (a.float() @ b.float().t()) * alpha
    return want.clamp(min=0) if relu else want


@pytest.mark.parametrize("alpha, relu", [(0.5, False), (-1.25, True)])
def test_a_float_parameter_in_the_interpreter(alpha, relu):
    a, b = _ab(64, 128, 128, seed=4)
    got = choreo_py.interpret(SCALED, target="sm_90a").scaled(a, b, alpha, relu)
    assert (got - _scaled_want(a, b, alpha, relu)).abs().max().item() < 1e-3


@pytest.mark.emu
@pytest.mark.parametrize("target", TARGETS)
def test_a_float_parameter_emulated(target):
    a, b = _ab(64, 128, 128, seed=5)
    for alpha, relu in ((0.5, False), (-1.25, True)):
        got, _ = emulate_function(SCALED, "scaled", (a, b, alpha, relu), target)
        assert (got - _scaled_want(a, b, alpha, relu)).abs().max().item() < 1e-3


THREAD_SCALE = """
__co__ f32 [256] axpb(f32 [256] x, float a, int b) {
  f32 [256] y;
  parallel p by 2, t by 128
    y.at(p # t) = x.at(p # t) * a + b;
  return y;
}
"""


@pytest.mark.emu
def test_float_and_int_arguments_of_a_thread_kernel(tmp_path):
    path = tmp_path / "axpb.co"
    path.write_text(THREAD_SCALE)
    x = torch.randn(256, generator=torch.Generator().manual_seed(6))
    want = x * -0.75 + (-3)
    got = choreo_py.interpret(str(path), target="sm_90a").axpb(x, -0.75, -3)
    assert torch.allclose(got, want, atol=1e-6)
    for target in TARGETS:
        got, _ = emulate_function(str(path), "axpb", (x, -0.75, -3), target)
        assert torch.allclose(got, want, atol=1e-6)


def test_the_words_the_launcher_passes():
    from choreo_py.runtime.launch import word

    assert word(-3) == 0xFFFFFFFD and word(True) == 1 and word(7) == 7
    assert word(1.0) == 0x3F800000 and word(-0.75) == 0xBF400000


@pytest.mark.gpu
def test_gpu_float_and_bool_arguments():
    a, b = (t.cuda() for t in _ab(128, 256, 128, seed=7))
    lib = choreo_py.load(SCALED)
    for alpha, relu in ((0.5, False), (-1.25, True)):
        got = lib.scaled(a, b, alpha, relu).cpu()
        assert (got - _scaled_want(a.cpu(), b.cpu(), alpha, relu)).abs().max().item() < 1e-3
