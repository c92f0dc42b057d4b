"""Gradient checks of examples/flash_atten_bwd.py's autograd Function (our FlashAttention
forward and backward) against float64, at lengths that leave partial tiles, causal and
not: the gradients element by element against torch autograd of attention written out
in float64, and, as gradcheck does, directional derivatives against central differences
of the float64 forward (no autograd in that reference); GQA too (K and V with fewer
heads, dK and dV summed over each group). On CPU tensors the kernels run in
the interpreter (tiny shapes); the rows marked `gpu` run them on the GPU.

The Function's forward is bf16, so torch.autograd.gradcheck itself cannot run on it
(differences of a bf16 function are rounding); it checks the float64 reference instead.

Tolerances. Our gradients' measured relative (Frobenius) error is 2.2e-3 to 2.6e-3
(docs/backward.md): the roundings of P and dS to bf16 before their MMAs and of the bf16
outputs. REL = 1e-2 is four times that. ROW = 3e-2 bounds the worst single row (against
that row or the RMS row), where a partial tile's few rows would show. DIR = 2e-2: the
error projected on a random direction is the same fraction of the gradient's projection
as in the Frobenius norm, up to the spread of 8 Gaussian draws (about 2.5x at the worst).
On the GPU, ours must also be within 3x (plus 5e-4) of torch SDPA's own bf16 gradients'
error against the same float64 reference: no worse than a peer by more than noise.
"""
from __future__ import annotations

import functools
import importlib.util
import pathlib

import pytest
import torch

from fa_bwd_ref import (attention_f64, bwd_inputs, directional, directional_fd, expand_kv,
                        grads_f64, rel, row_err)

ROOT = pathlib.Path(__file__).resolve().parent.parent
REL, ROW, DIR = 1e-2, 3e-2, 2e-2
NAMES = ("dQ", "dK", "dV")


@functools.lru_cache(maxsize=None)
def _fn():
    """examples/flash_atten_bwd.py, imported once from its file (examples/ is no package)."""
    spec = importlib.util.spec_from_file_location("flash_atten_bwd",
                                                  ROOT / "examples" / "flash_atten_bwd.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def ours(q, k, v, do, causal):
    """(dQ, dK, dV) of the Function: GPU kernels on CUDA tensors, the interpreter on CPU."""
    leaves = [x.clone().requires_grad_() for x in (q, k, v)]
    _fn().flash_attn(*leaves, causal=causal).backward(do)
    return [x.grad for x in leaves]


def sdpa_bf16(q, k, v, do, causal):
    """(dQ, dK, dV) of torch SDPA in bf16 (its default backend) on the same tensors; with
    GQA, K and V repeated per query head and their gradients summed back."""
    t = [x.detach().requires_grad_() for x in (q, k, v)]
    bhsd = [x.transpose(1, 2) for x in (t[0], expand_kv(q, t[1]), expand_kv(q, t[2]))]
    torch.nn.functional.scaled_dot_product_attention(*bhsd, is_causal=causal).backward(
        do.transpose(1, 2))
    return [x.grad for x in t]


def inputs(b, s, h, d, device, seed, h_kv=None):
    return [x.to(device) for x in bwd_inputs(b, s, h, d, seed=seed, h_kv=h_kv)]


def check_elementwise(got, q, k, v, do, causal):
    """Each gradient within REL (whole tensor) and ROW (worst row) of float64's; returns
    the relative errors."""
    want = grads_f64(q, k, v, do, causal)
    errs = {n: rel(g, w) for n, g, w in zip(NAMES, got, want)}
    rows = {n: row_err(g, w) for n, g, w in zip(NAMES, got, want)}
    assert all(e < REL for e in errs.values()), errs
    assert all(e < ROW for e in rows.values()), rows
    return errs


def check_directional(got, q, k, v, do, causal, n=8, seed=0):
    """<grads, u> against central differences of the float64 forward along n seeded
    Gaussian directions u, within DIR of the differences' RMS."""
    g = torch.Generator().manual_seed(seed)
    dirs = [[torch.randn(x.shape, generator=g, dtype=torch.float64).to(x.device)
             for x in (q, k, v)] for _ in range(n)]
    fd = torch.tensor(directional_fd(q, k, v, do, causal, dirs), dtype=torch.float64)
    an = torch.tensor(directional(got, dirs), dtype=torch.float64)
    scale = fd.pow(2).mean().sqrt()
    assert (an - fd).abs().max() <= DIR * scale, (an.tolist(), fd.tolist())


@pytest.mark.parametrize("causal", [False, True])
def test_reference_passes_gradcheck(causal):
    """The float64 reference's autograd against torch.autograd.gradcheck's differences,
    at a length of 5 (causal: one to five visible keys per query)."""
    g = torch.Generator().manual_seed(1)
    x = [torch.randn(1, 5, 2, 3, generator=g, dtype=torch.float64, requires_grad=True)
         for _ in range(3)]
    assert torch.autograd.gradcheck(lambda q, k, v: attention_f64(q, k, v, causal), x)


def test_a_scaled_gradient_is_rejected():
    """The checks can fail: dV 10% too large fails the element check and the directional
    one (the reference's own gradients, so that only the scaling differs)."""
    q, k, v, do = inputs(1, 17, 2, 64, "cpu", seed=2)
    good = grads_f64(q, k, v, do, True)
    bad = [good[0], good[1], good[2] * 1.1]
    check_directional(good, q, k, v, do, True)
    with pytest.raises(AssertionError):
        check_elementwise(bad, q, k, v, do, True)
    with pytest.raises(AssertionError):
        check_directional(bad, q, k, v, do, True)


@pytest.mark.parametrize("b,s,h,d,causal", [(1, 17, 2, 64, True), (1, 65, 1, 64, False),
                                            (1, 33, 1, 128, True)])
def test_interpreter(b, s, h, d, causal):
    """The Function on CPU tensors (the interpreter): S = 17 and 33 are less than one tile,
    65 one row past one."""
    q, k, v, do = inputs(b, s, h, d, "cpu", seed=s)
    got = ours(q, k, v, do, causal)
    check_elementwise(got, q, k, v, do, causal)
    check_directional(got, q, k, v, do, causal)


def check_single_token(got, q, k, v, do, causal):
    """S = 1: softmax over one key is 1 whatever the scores, so dQ and dK are zero and
    dV = dO. What may remain of dQ and dK is f32 rounding of dP - Dlt (two sums of the
    same products in different orders), about 1e-6 of dV."""
    want = grads_f64(q, k, v, do, causal)
    assert rel(got[2], want[2]) < REL
    assert all(g.abs().max() <= 1e-3 * got[2].abs().max() for g in got[:2])


@pytest.mark.parametrize("s,h,h_kv,d,causal", [(17, 4, 2, 64, True), (40, 3, 1, 128, False)])
def test_interpreter_gqa(s, h, h_kv, d, causal):
    """GQA through the Function in the interpreter: dK and dV are sums over the query
    heads that share a KV head, and the Function allocates them with K's heads."""
    q, k, v, do = inputs(1, s, h, d, "cpu", seed=s, h_kv=h_kv)
    got = ours(q, k, v, do, causal)
    assert [tuple(g.shape) for g in got] == [tuple(x.shape) for x in (q, k, v)]
    check_elementwise(got, q, k, v, do, causal)
    check_directional(got, q, k, v, do, causal)


@pytest.mark.parametrize("d,causal", [(64, True), (128, False)])
def test_interpreter_single_token(d, causal):
    q, k, v, do = inputs(1, 1, 2, d, "cpu", seed=d)
    check_single_token(ours(q, k, v, do, causal), q, k, v, do, causal)


# Lengths around the tiles: 64-row Q tiles (forward, dK/dV's steps), 64-row KV steps (dQ),
# 128 (D=64) or 64 (D=128) keys per dK/dV block, 128 queries per dQ block.
GPU_LENGTHS = (17, 100, 129, 191, 257, 1000)


@pytest.mark.gpu
@pytest.mark.parametrize("s", GPU_LENGTHS)
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
def test_gpu_elementwise(s, d, causal):
    """B=2, H=3 on the GPU: ours against float64, and no worse than SDPA's bf16 by more
    than noise."""
    q, k, v, do = inputs(2, s, 3, d, "cuda", seed=s + d)
    errs = check_elementwise(ours(q, k, v, do, causal), q, k, v, do, causal)
    want = grads_f64(q, k, v, do, causal)
    peer = {n: rel(g, w) for n, g, w in zip(NAMES, sdpa_bf16(q, k, v, do, causal), want)}
    assert all(errs[n] <= 3 * peer[n] + 5e-4 for n in NAMES), (errs, peer)


@pytest.mark.gpu
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
def test_gpu_single_token(d, causal):
    q, k, v, do = inputs(2, 1, 3, d, "cuda", seed=d)
    check_single_token(ours(q, k, v, do, causal), q, k, v, do, causal)


@pytest.mark.gpu
@pytest.mark.parametrize("s,d", [(100, 64), (257, 64), (191, 128), (1000, 128)])
@pytest.mark.parametrize("causal", [False, True])
def test_gpu_directional(s, d, causal):
    """gradcheck's test on the GPU: directional derivatives of ours against float64
    central differences of the forward."""
    q, k, v, do = inputs(1, s, 2, d, "cuda", seed=3 * s + d)
    check_directional(ours(q, k, v, do, causal), q, k, v, do, causal)


@pytest.mark.gpu
@pytest.mark.parametrize("s,h,h_kv,d", [(1000, 8, 2, 128), (257, 4, 1, 64), (129, 6, 3, 64)])
@pytest.mark.parametrize("causal", [False, True])
def test_gpu_gqa(s, h, h_kv, d, causal):
    """GQA on the GPU (groups of 4, 4 and 2 query heads): element checks, the peer bound
    (SDPA on repeated K, V) and the directional check."""
    q, k, v, do = inputs(2, s, h, d, "cuda", seed=s + h, h_kv=h_kv)
    got = ours(q, k, v, do, causal)
    errs = check_elementwise(got, q, k, v, do, causal)
    want = grads_f64(q, k, v, do, causal)
    peer = {n: rel(g, w) for n, g, w in zip(NAMES, sdpa_bf16(q, k, v, do, causal), want)}
    assert all(errs[n] <= 3 * peer[n] + 5e-4 for n in NAMES), (errs, peer)
    check_directional(got, q, k, v, do, causal)
