"""Inputs and the torch reference of FlashAttention's backward (BSHD bf16 tensors): the
gradients of torch's SDPA in float32 on the CPU, and the forward's LSE (natural log)."""
from __future__ import annotations

import pathlib

import torch

import choreo_py

EXAMPLES = pathlib.Path(__file__).resolve().parent.parent / "examples"
BWD = str(EXAMPLES / "flash_atten_bwd.co")
FWD = str(EXAMPLES / "flash_atten_bwd_fwd.co")


def bwd_inputs(b, s, h, d, seed=0, h_kv=None):
    """Q, K, V, dO: seeded random bf16 [B, S, H, D] (K and V with H_KV heads if given)."""
    g = torch.Generator().manual_seed(seed)
    heads = (h, h_kv or h, h_kv or h, h)
    return [torch.randn(b, s, n, d, generator=g).to(torch.bfloat16) for n in heads]


def expand_kv(q, x):
    """K or V with each KV head repeated for the query heads that share it (GQA: query
    head h reads KV head h / (H / H_KV)); as it is differentiable, gradients through it
    are summed over each group."""
    return x.repeat_interleave(q.shape[2] // x.shape[2], dim=2)


def forward_ref(q, k, v, causal):
    """(O as bf16, LSE f32 [B, H, S]) of attention in float32."""
    qt, kt, vt = (x.float().transpose(1, 2) for x in (q, expand_kv(q, k), expand_kv(q, v)))
    s = qt @ kt.transpose(-1, -2) / q.shape[-1] ** 0.5
    if causal:
        n = s.shape[-1]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
    lse = torch.logsumexp(s, -1)
    o = torch.softmax(s, -1) @ vt
    return o.transpose(1, 2).to(torch.bfloat16).contiguous(), lse.contiguous()


def grads_ref(q, k, v, do, causal):
    """(dQ, dK, dV) in float32 BSHD: torch autograd of SDPA in float32."""
    t = [x.float().requires_grad_() for x in (q, k, v)]
    o = torch.nn.functional.scaled_dot_product_attention(
        *(x.transpose(1, 2) for x in (t[0], expand_kv(q, t[1]), expand_kv(q, t[2]))),
        is_causal=causal)
    o.backward(do.float().transpose(1, 2))
    return [x.grad for x in t]


def rel(out, ref):
    """Relative Frobenius error of `out` against `ref`."""
    return ((out.float() - ref).norm() / ref.norm()).item()


def interpret_bwd(q, k, v, do, o, lse, causal, target="sm_90a"):
    """Runs the three kernels of examples/flash_atten_bwd.co in the interpreter;
    returns (dQ, dK, dV, Dlt)."""
    b, s, h, d = q.shape
    defines = {"CAUSAL": "1" if causal else "0", "DIM": str(d)}
    dlt = torch.full((b, h, s), float("nan"))
    dq, dk, dv = (torch.full_like(x, float("nan")) for x in (q, k, v))
    run = dict(defines=defines, target=target)
    choreo_py.interpret(BWD, dict(O=o, dO=do, Dlt=dlt), function="fa_bwd_pre", **run)
    choreo_py.interpret(BWD, dict(Q=q, K=k, V=v, dO=do, LSE=lse, Dlt=dlt, dK=dk, dV=dv),
                        function="fa_bwd_dkdv", **run)
    choreo_py.interpret(BWD, dict(Q=q, K=k, V=v, dO=do, LSE=lse, Dlt=dlt, dQ=dq),
                        function="fa_bwd_dq", **run)
    return dq, dk, dv, dlt


def attention_f64(q, k, v, causal):
    """softmax(Q Kᵀ / sqrt(D)) V of BSHD tensors in float64, written out (no SDPA), on
    the tensors' device: the reference the gradient checks differentiate."""
    qt, kt, vt = (x.double().transpose(1, 2) for x in (q, expand_kv(q, k), expand_kv(q, v)))
    s = qt @ kt.transpose(-1, -2) / q.shape[-1] ** 0.5
    if causal:
        n = s.shape[-1]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device=s.device).triu(1),
                          float("-inf"))
    return (torch.softmax(s, -1) @ vt).transpose(1, 2)


def grads_f64(q, k, v, do, causal):
    """(dQ, dK, dV) in float64 BSHD: torch autograd of `attention_f64`."""
    t = [x.double().requires_grad_() for x in (q, k, v)]
    attention_f64(*t, causal).backward(do.double())
    return [x.grad for x in t]


def directional_fd(q, k, v, do, causal, dirs, h=1e-5):
    """Central differences, in float64, of L = <attention(Q, K, V), dO> along each
    direction (uQ, uK, uV) of `dirs`: what <dQ, uQ> + <dK, uK> + <dV, uV> must be."""
    x = [t.double() for t in (q, k, v)]
    dod = do.double()

    def loss(sign, u):
        return (attention_f64(*(a + sign * h * b for a, b in zip(x, u)), causal) * dod).sum()

    return [((loss(1, u) - loss(-1, u)) / (2 * h)).item() for u in dirs]


def directional(grads, dirs):
    """<dQ, uQ> + <dK, uK> + <dV, uV> of `grads` along each direction of `dirs`."""
    return [sum((g.double() * b).sum().item() for g, b in zip(grads, u)) for u in dirs]


def row_err(out, ref):
    """The worst row (one (batch, position, head) vector of D) of `out - ref`, relative to
    that row of `ref` or to the RMS row of `ref`, whichever is larger: a few wrong rows
    (a partial tile's) show here even where the whole tensor's error is small."""
    ref = ref.double()
    err = (out.double() - ref).norm(dim=-1)
    norm = ref.norm(dim=-1)
    rms = norm.pow(2).mean().sqrt()
    return (err / torch.maximum(norm, rms)).max().item()
