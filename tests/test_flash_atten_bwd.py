"""FlashAttention's backward (examples/flash_atten_bwd.co) and its forward with LSE
(examples/flash_atten_bwd_fwd.co): dQ, dK, dV against torch autograd of SDPA in float32,
in the interpreter and the PTX emulator at small shapes with partial tiles; ptxas assembles
every variant; the autograd Function (examples/flash_atten_bwd.py) on the CPU and, marked
gpu, at larger shapes on the GPU."""
from __future__ import annotations

import importlib.util
import pathlib

import pytest
import torch

import choreo_py
from choreo_py.driver import compile_file
from choreo_py.runtime.build import ptxas_findings
from fa_bwd_ref import BWD, FWD, bwd_inputs, forward_ref, grads_ref, interpret_bwd, rel
from fa_helpers import assemble

ROOT = pathlib.Path(__file__).resolve().parent.parent
TOL = 2e-2  # bf16 operands (P, dS rounded to bf16 before their MMAs), f32 accumulators


def _fn_module():
    """examples/flash_atten_bwd.py, imported from its file (examples/ is no package)."""
    spec = importlib.util.spec_from_file_location("flash_atten_bwd",
                                                  ROOT / "examples" / "flash_atten_bwd.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _check_grads(got, q, k, v, do, causal):
    want = grads_ref(q, k, v, do, causal)
    errs = {n: rel(g, w) for n, g, w in zip(("dQ", "dK", "dV"), got, want)}
    assert all(e < TOL for e in errs.values()), errs
    return errs


@pytest.mark.parametrize("b,s,h,causal", [(1, 64, 1, False), (2, 100, 2, False),
                                          (1, 160, 2, True), (1, 192, 1, True)])
def test_interpreter_grads(b, s, h, causal):
    """S = 100 and 160 leave the last Q and KV tiles partial; 64 and 192 are whole."""
    q, k, v, do = bwd_inputs(b, s, h, 64, seed=s)
    o, lse = forward_ref(q, k, v, causal)
    dq, dk, dv, dlt = interpret_bwd(q, k, v, do, o, lse, causal)
    want_dlt = (do.float() * o.float()).sum(-1).transpose(1, 2)
    assert rel(dlt, want_dlt) < 1e-5
    _check_grads((dq, dk, dv), q, k, v, do, causal)


def test_interpreter_grads_d128():
    q, k, v, do = bwd_inputs(1, 100, 1, 128, seed=7)
    o, lse = forward_ref(q, k, v, True)
    dq, dk, dv, _ = interpret_bwd(q, k, v, do, o, lse, True)
    _check_grads((dq, dk, dv), q, k, v, do, True)


def test_a_wrong_lse_is_noticed():
    """The comparison can fail: LSE off by ln 2 doubles P, and every gradient is off."""
    q, k, v, do = bwd_inputs(1, 100, 1, 64, seed=3)
    o, lse = forward_ref(q, k, v, False)
    got = interpret_bwd(q, k, v, do, o, lse - 0.6931472, False)[:3]
    want = grads_ref(q, k, v, do, False)
    assert all(rel(g, w) > 0.5 for g, w in zip(got, want))


@pytest.mark.parametrize("causal", [False, True])
def test_forward_lse_interpreter(causal):
    q, k, v, _ = bwd_inputs(1, 100, 2, 64, seed=11)
    o_ref, lse_ref = forward_ref(q, k, v, causal)
    o = torch.full_like(q, float("nan"))
    lse = torch.full((1, 2, 100), float("nan"))
    choreo_py.interpret(FWD, dict(Q=q, K=k, V=v, O=o, LSE=lse), target="sm_90a",
                        defines={"CAUSAL": str(int(causal))})
    assert rel(o, o_ref.float()) < TOL
    assert (lse - lse_ref).abs().max().item() < 1e-4


@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
@pytest.mark.parametrize("h,h_kv", [(1, 1), (2, 1)], ids=["mha", "gqa"])
def test_emulated_ptx(target, h, h_kv):
    """The generated PTX of all four kernels, executed by the emulator (causal, S = 100);
    with two query heads on one KV head (GQA), dK and dV are sums over both."""
    q, k, v, do = bwd_inputs(1, 100, h, 64, seed=5, h_kv=h_kv)
    o_ref, lse_ref = forward_ref(q, k, v, True)
    defines = {"CAUSAL": "1"}
    fwd = choreo_py.emulate_program(FWD, target=target, defines=defines)
    bwd = choreo_py.emulate_program(BWD, target=target, defines=defines)
    # LSE's rows padded to 128 (SL), as the autograd Function allocates them
    o, lse = torch.full_like(q, float("nan")), torch.full((1, h, 128), float("nan"))
    fwd.fa_fwd_lse(q, k, v, o, lse)
    assert rel(o, o_ref.float()) < TOL
    assert (lse[..., :100] - lse_ref).abs().max().item() < 1e-4
    dlt = torch.full((1, h, 100), float("nan"))
    dq, dk, dv = (torch.full_like(x, float("nan")) for x in (q, k, v))
    bwd.fa_bwd_pre(o, do, dlt)
    bwd.fa_bwd_dkdv(q, k, v, do, lse, dlt, dk, dv)
    bwd.fa_bwd_dq(q, k, v, do, lse, dlt, dq)
    _check_grads((dq, dk, dv), q, k, v, do, True)


@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
@pytest.mark.parametrize("path,dim", [pytest.param(p, d, id=f"{n}-d{d}") for n, p in
                                      (("bwd", BWD), ("fwd", FWD)) for d in (64, 128)])
@pytest.mark.parametrize("causal", [0, 1])
def test_ptxas_assembles(target, path, dim, causal):
    """Every kernel of both programs assembles; the backward's without spills."""
    ptx = compile_file(path, emit="ptx", target=target,
                       defines={"CAUSAL": str(causal), "DIM": str(dim)})
    report = assemble(ptx, target)
    entries = ("fa_bwd_pre", "fa_bwd_dkdv", "fa_bwd_dq") if path == BWD else ("fa_fwd_lse",)
    for e in entries:
        assert f".entry {e}(" in ptx
    if path == BWD:
        assert ptxas_findings(report) == [], report


def test_lse_rows_must_be_aligned():
    """An LSE row of 98 floats (392 bytes) cannot be a TMA store's row: refused at the
    assert, located, before anything runs."""
    q, k, v, _ = bwd_inputs(1, 98, 1, 64)
    lse = torch.empty(1, 1, 98)
    with pytest.raises(choreo_py.ChoreoError, match="SL must be at least S and a multiple "
                                                    "of 4 \\(S=98, SL=98\\)"):
        choreo_py.interpret(FWD, dict(Q=q, K=k, V=v, O=torch.empty_like(q), LSE=lse),
                            target="sm_90a")


@pytest.mark.parametrize("causal", [False, True])
def test_autograd_function_cpu(causal):
    """The Function on CPU tensors (the interpreter): O and the three gradients; S = 98,
    whose LSE rows the Function pads to 128."""
    fn = _fn_module()
    q, k, v, do = bwd_inputs(2, 98, 2, 64, seed=13)
    leaves = [x.clone().requires_grad_() for x in (q, k, v)]
    out = fn.flash_attn(*leaves, causal=causal)
    out.backward(do)
    assert rel(out, forward_ref(q, k, v, causal)[0].float()) < TOL
    _check_grads([x.grad for x in leaves], q, k, v, do, causal)


@pytest.mark.gpu
@pytest.mark.parametrize("dim", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
def test_autograd_function_gpu(dim, causal):
    """On the GPU at B=2, H=4, S=1000 (partial tiles): our gradients against float32
    SDPA's, within the error of bf16 SDPA's own gradients times a small margin."""
    fn = _fn_module()
    q, k, v, do = (x.cuda() for x in bwd_inputs(2, 1000, 4, dim, seed=dim))
    leaves = [x.clone().requires_grad_() for x in (q, k, v)]
    out = fn.flash_attn(*leaves, causal=causal)
    out.backward(do)
    t = [x.float().transpose(1, 2).requires_grad_() for x in (q, k, v)]
    ref = torch.nn.functional.scaled_dot_product_attention(*t, is_causal=causal)
    ref.backward(do.float().transpose(1, 2))
    assert rel(out, ref.detach().transpose(1, 2)) < TOL
    errs = [rel(x.grad, r.grad.transpose(1, 2)) for x, r in zip(leaves, t)]
    assert all(e < TOL for e in errs), errs


@pytest.mark.gpu
def test_gpu_kernels_match_the_interpreter():
    """The GPU's dK/dV and dQ of one causal problem are the interpreter's, up to the
    order of f32 sums (the same bf16 roundings of P and dS)."""
    q, k, v, do = bwd_inputs(1, 160, 2, 64, seed=17)
    o, lse = forward_ref(q, k, v, True)
    cpu = interpret_bwd(q, k, v, do, o, lse, True)[:3]
    lib = choreo_py.load(BWD, defines={"CAUSAL": "1"})
    g = [x.cuda() for x in (q, k, v, do, o, lse)]
    dlt = torch.empty_like(g[5])
    dq, dk, dv = (torch.empty_like(g[0]) for _ in range(3))
    lib.fa_bwd_pre(g[4], g[3], dlt)
    lib.fa_bwd_dkdv(*g[:4], g[5], dlt, dk, dv)
    lib.fa_bwd_dq(*g[:4], g[5], dlt, dq)
    for a, b in zip((dq, dk, dv), cpu):
        assert rel(a.cpu(), b.float()) < 1e-2


@pytest.mark.parametrize("b,s,h,h_kv,d,causal", [(1, 100, 4, 2, 64, False),
                                                 (1, 65, 3, 1, 64, True),
                                                 (1, 33, 2, 1, 128, True)])
def test_interpreter_gqa(b, s, h, h_kv, d, causal):
    """GQA (H_KV dividing H) through the kernels in the interpreter: O and LSE of the
    forward, and dK, dV summed over each group of query heads."""
    q, k, v, do = bwd_inputs(b, s, h, d, seed=s, h_kv=h_kv)
    o_ref, lse_ref = forward_ref(q, k, v, causal)
    o, lse = torch.full_like(q, float("nan")), torch.full((b, h, -(-s // 4) * 4), float("nan"))
    choreo_py.interpret(FWD, dict(Q=q, K=k, V=v, O=o, LSE=lse), target="sm_90a",
                        defines={"CAUSAL": str(int(causal)), "DIM": str(d)})
    assert rel(o, o_ref.float()) < TOL
    assert (lse[..., :s] - lse_ref).abs().max().item() < 1e-4
    dq, dk, dv, _ = interpret_bwd(q, k, v, do, o, lse, causal)
    assert dk.shape == k.shape and dv.shape == v.shape
    _check_grads((dq, dk, dv), q, k, v, do, causal)


def test_kv_heads_must_divide_query_heads():
    """Three query heads on two KV heads: each kernel's assert, before anything runs;
    the Function says it in its own words."""
    q, k, v, _ = bwd_inputs(1, 64, 3, 64, h_kv=2)
    with pytest.raises(choreo_py.ChoreoError, match=r"GQA: the KV heads \(H_KV\) must "
                                                    r"divide the query heads \(H\)"):
        choreo_py.interpret(FWD, dict(Q=q, K=k, V=v, O=torch.empty_like(q),
                                      LSE=torch.empty(1, 3, 64)), target="sm_90a")
    with pytest.raises(ValueError, match="number of heads dividing"):
        _fn_module().flash_attn(q, k, v)


@pytest.mark.parametrize("path", [BWD, FWD])
def test_other_head_dims_are_refused(path):
    """The programs' constants (SCALE, the tile and register budgets) are set for D = 64
    and 128 only: another -DDIM stops at the preprocessor, located, instead of computing
    with the wrong scale."""
    with pytest.raises(choreo_py.ChoreoError, match=r"flash_atten_bwd(_fwd)?\.co:\d+:1: "
                                                    r"error: #error \"DIM must be 64 or 128"):
        compile_file(path, emit="ptx", target="sm_90a", defines={"DIM": "96"})


def test_autograd_function_ignores_autocast():
    """Under torch.autocast (as in mixed-precision training) the Function's output and
    gradients are the same as without it: the interpreter's float32 arithmetic is not
    cast to bf16 by the enclosing autocast."""
    fn = _fn_module()
    q, k, v, do = bwd_inputs(1, 65, 2, 64, seed=19)
    runs = []
    for enabled in (False, True):
        leaves = [x.clone().requires_grad_() for x in (q, k, v)]
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=enabled):
            out = fn.flash_attn(*leaves, causal=True)
        out.backward(do)
        runs.append([out.detach()] + [x.grad for x in leaves])
    for a, b in zip(*runs):
        assert torch.equal(a, b)
