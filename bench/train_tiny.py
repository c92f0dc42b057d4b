"""Training-loop check of the attention backward: a tiny (causal) transformer trained the
same way four times, with only the attention changed, and the loss curves compared.

    python3 bench/train_tiny.py [--steps 50] [--dim 64|128] [--seq 256] [--heads 4]
                                [--kv-heads 2] [--control] [--stand-in] [--device cpu]
                                [--no-causal] [--out bench/data/train_tiny.csv]

The runs share the initial weights, the batches (one seeded generator) and the
optimizer (AdamW, fresh per run); the model runs under bf16 autocast, so every
attention sees bf16 Q, K, V:
  ours   examples/flash_atten_bwd.py's autograd Function (our forward and backward)
  sdpa   torch SDPA in bf16 (whichever backend torch picks)
  f32    torch SDPA on Q, K, V upcast to float32, its output cast back to bf16
  model  attention in torch (float32) that rounds where our kernels round: P to bf16
         before P V and dV = Pᵀ dO, dS to bf16 before dQ and dK, bf16 O and gradients
The tolerance comes from the runs themselves. `f32` is the one without bf16 rounding
inside the attention, so noise = max over steps of |loss - loss_f32| for sdpa and for
model (the larger) is how far bf16 rounding inside the attention moves the curve.
Ours rounds as both do, so |ours - f32| should be about noise too, and |ours - sdpa| at
most their sum, about 2 * noise. The check asks for
max |loss_ours - loss_sdpa| <= 3 * noise + 1e-3 (the 1e-3 absorbs the run-to-run
variation of a curve when noise is itself tiny), and for the loss to have fallen by a
fifth (a run that learns nothing compares nothing). Exit status 1 when either fails.
The f32 and model runs leave autocast for their attention, which would otherwise run
their float32 SDPA and matmuls in bf16.

`--kv-heads N` makes the attention GQA (N KV heads): ours takes K and V with N heads,
the other runs see them repeated per query head (autograd sums their gradients back).

A wrong attention gradient that is only a per-tensor scale escapes this check
(AdamW divides it out); tests/test_flash_atten_bwd_grads.py's gradient checks catch it.
`--control` adds a run of ours with dK zeroed, which the check must reject (else exit 1).

The data: sequences of a `period`-token block drawn from a fixed random Markov chain
(four likely successors per token) and repeated, so the loss falls first by the bigram
statistics and then by copying from `period` positions back, which needs attention.
On CPU tensors (`--device cpu`) ours runs in the interpreter: tiny shapes only, or
`--stand-in`, which puts the model in place of our kernels to calibrate the check.
"""
from __future__ import annotations

import argparse
import copy
import csv
import functools
import os
import sys
from dataclasses import dataclass

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "examples"))

RUNS = ("ours", "sdpa", "f32", "model")
FACTOR = 3.0
FLOOR = 1e-3


@dataclass(frozen=True)
class Config:
    layers: int = 2
    heads: int = 4
    dim: int = 64
    seq: int = 256
    batch: int = 8
    vocab: int = 128
    period: int = 48
    steps: int = 50
    lr: float = 3e-3
    seed: int = 0
    causal: bool = True
    device: str = "cuda"
    stand_in: bool = False
    kv_heads: int = 0  # GQA: K and V heads (0: as many as `heads`)


def attention(name: str, causal: bool, stand_in: bool = False):
    """f(q, k, v) on BSHD bf16 tensors for one of the runs; with `stand_in`, `ours` and
    `control` use the model in place of our kernels."""
    import torch
    import torch.nn.functional as F

    def expanded(f):
        """f on K and V repeated per query head (GQA; autograd sums their gradients
        back): only ours takes fewer KV heads itself."""
        def g(q, k, v):
            rep = q.shape[2] // k.shape[2]
            if rep == 1:
                return f(q, k, v)
            return f(q, k.repeat_interleave(rep, 2), v.repeat_interleave(rep, 2))
        return g

    @expanded
    def sdpa(q, k, v):
        t = [x.transpose(1, 2) for x in (q, k, v)]
        return F.scaled_dot_product_attention(*t, is_causal=causal).transpose(1, 2)

    def full(f):
        """f outside autocast: under it, SDPA and matmuls of float32 tensors would
        run in bf16 after all."""
        def g(q, k, v):
            with torch.autocast(q.device.type, enabled=False):
                return f(q, k, v)
        return g

    model = full(expanded(lambda q, k, v: _rounded().apply(q, k, v, causal)))
    if name == "sdpa":
        return sdpa
    if name == "f32":
        return full(lambda q, k, v: sdpa(q.float(), k.float(), v.float()).to(q.dtype))
    if name == "model":
        return model
    if stand_in:
        def flash_attn(q, k, v, causal):
            return model(q, k, v)
    else:
        from flash_atten_bwd import flash_attn

    if name == "ours":
        return lambda q, k, v: flash_attn(q, k, v, causal=causal)
    if name == "control":
        return lambda q, k, v: flash_attn(q, _zero_grad().apply(k), v, causal=causal)
    raise ValueError(f"unknown run {name!r}")


@functools.lru_cache(maxsize=None)
def _zero_grad():
    """An identity whose gradient is zero (the negative control's broken dK); built on
    first use, so that importing this file needs no torch."""
    import torch

    class ZeroGrad(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.view_as(x)

        @staticmethod
        def backward(ctx, g):
            return torch.zeros_like(g)

    return ZeroGrad


@functools.lru_cache(maxsize=None)
def _rounded():
    """Attention in float32 with our kernels' bf16 roundings (the `model` run)."""
    import torch

    def scores(q, k, causal):
        s = q @ k.transpose(-1, -2) * q.shape[-1] ** -0.5
        if causal:
            n = s.shape[-1]
            mask = torch.ones(n, n, dtype=torch.bool, device=s.device).triu(1)
            s = s.masked_fill(mask, float("-inf"))
        return s

    def bf(x):
        return x.to(torch.bfloat16).float()

    class Rounded(torch.autograd.Function):
        @staticmethod
        def forward(ctx, q, k, v, causal):
            qt, kt, vt = (x.float().transpose(1, 2) for x in (q, k, v))
            s = scores(qt, kt, causal)
            lse = torch.logsumexp(s, -1, keepdim=True)
            o = (bf(torch.exp(s - lse)) @ vt).to(torch.bfloat16)
            ctx.save_for_backward(q, k, v, o, lse)
            ctx.causal = causal
            return o.transpose(1, 2)

        @staticmethod
        def backward(ctx, g):
            q, k, v, o, lse = ctx.saved_tensors
            qt, kt, vt = (x.float().transpose(1, 2) for x in (q, k, v))
            do = bf(g.transpose(1, 2))
            p = torch.exp(scores(qt, kt, ctx.causal) - lse)
            dlt = (do * o.float()).sum(-1, keepdim=True)
            ds = bf(p * (do @ vt.transpose(-1, -2) - dlt))
            scale = q.shape[-1] ** -0.5
            dq, dk = ds @ kt * scale, ds.transpose(-1, -2) @ qt * scale
            dv = bf(p).transpose(-1, -2) @ do
            return tuple(x.transpose(1, 2).to(q.dtype) for x in (dq, dk, dv)) + (None,)

    return Rounded


def build_model(cfg: Config):
    """The tiny transformer (pre-LayerNorm blocks, learned positions), seeded."""
    import torch
    from torch import nn
    import torch.nn.functional as F

    d = cfg.heads * cfg.dim
    kv = (cfg.kv_heads or cfg.heads) * cfg.dim

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv = nn.Linear(d, d + 2 * kv, bias=False)
            self.out = nn.Linear(d, d, bias=False)
            self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

        def forward(self, x, attn):
            b, n, _ = x.shape
            q, k, v = self.qkv(self.ln1(x)).split((d, kv, kv), -1)
            q, k, v = (t.view(b, n, -1, cfg.dim) for t in (q, k, v))
            x = x + self.out(attn(q, k, v).reshape(b, n, d))
            return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))

    class TinyLM(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(cfg.vocab, d)
            self.pos = nn.Embedding(cfg.seq, d)
            self.blocks = nn.ModuleList(Block() for _ in range(cfg.layers))
            self.ln = nn.LayerNorm(d)
            self.head = nn.Linear(d, cfg.vocab, bias=False)

        def forward(self, idx, attn):
            x = self.tok(idx) + self.pos.weight[: idx.shape[1]]
            for blk in self.blocks:
                x = blk(x, attn)
            return self.head(self.ln(x))

    torch.manual_seed(cfg.seed)
    return TinyLM().to(cfg.device)


def batches(cfg: Config):
    """[steps, batch, seq + 1] token ids: Markov-chain blocks of `period` tokens, repeated."""
    import torch

    g = torch.Generator().manual_seed(cfg.seed + 1)
    succ = torch.randint(cfg.vocab, (cfg.vocab, 4), generator=g)
    n = cfg.steps * cfg.batch
    block = torch.empty(n, cfg.period, dtype=torch.long)
    block[:, 0] = torch.randint(cfg.vocab, (n,), generator=g)
    for t in range(1, cfg.period):
        pick = torch.randint(4, (n,), generator=g)
        block[:, t] = succ[block[:, t - 1], pick]
    reps = -(-(cfg.seq + 1) // cfg.period)
    seqs = block.repeat(1, reps)[:, : cfg.seq + 1]
    return seqs.view(cfg.steps, cfg.batch, cfg.seq + 1).to(cfg.device)


def train(cfg: Config, run: str, init_state, data) -> list[float]:
    """The loss of each step (before its update) of one run from `init_state`."""
    import torch
    import torch.nn.functional as F

    model = build_model(cfg)
    model.load_state_dict(init_state)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=0.01)
    attn = attention(run, cfg.causal, cfg.stand_in)
    losses = []
    for step in range(cfg.steps):
        x, y = data[step, :, :-1], data[step, :, 1:]
        with torch.autocast(cfg.device, dtype=torch.bfloat16):
            logits = model(x, attn)
        loss = F.cross_entropy(logits.float().reshape(-1, cfg.vocab), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def curves(cfg: Config, runs=RUNS) -> dict:
    """{run: losses} for each run, all from one initialization and one batch sequence."""
    model = build_model(cfg)
    init_state = copy.deepcopy(model.state_dict())
    data = batches(cfg)
    return {r: train(cfg, r, init_state, data) for r in runs}


def verdict(c: dict) -> dict:
    """The check on the curves of `curves` (see the module docstring)."""
    gap = lambda a, b: max(abs(x - y) for x, y in zip(c[a], c[b]))  # noqa: E731
    noise = max(gap("sdpa", "f32"), gap("model", "f32"))
    tol = FACTOR * noise + FLOOR
    out = {"noise": noise, "tol": tol, "gap": gap("ours", "sdpa"),
           "gap_f32": gap("ours", "f32"), "first": c["sdpa"][0], "last": c["sdpa"][-1]}
    out["learned"] = out["last"] < 0.8 * out["first"]
    out["agree"] = out["gap"] <= tol
    if "control" in c:
        out["control_gap"] = gap("control", "sdpa")
        out["control_rejected"] = out["control_gap"] > tol
    return out


def write_csv(path: str, c: dict) -> None:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["step", *c])
        for i, row in enumerate(zip(*c.values())):
            w.writerow([i, *(f"{x:.6f}" for x in row)])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    d = Config()
    for f in ("layers", "heads", "kv_heads", "dim", "seq", "batch", "vocab", "period", "steps",
              "seed"):
        ap.add_argument(f"--{f.replace('_', '-')}", type=int, default=getattr(d, f))
    ap.add_argument("--lr", type=float, default=d.lr)
    ap.add_argument("--no-causal", action="store_true")
    ap.add_argument("--device", default=d.device)
    ap.add_argument("--control", action="store_true", help="add the run with dK zeroed")
    ap.add_argument("--stand-in", action="store_true",
                    help="the model in place of our kernels (ours and control): the "
                         "tolerance's calibration where our kernels cannot run (the CPU "
                         "at full shapes, where the interpreter is too slow)")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "data", "train_tiny.csv"))
    a = ap.parse_args(argv)
    cfg = Config(layers=a.layers, heads=a.heads, dim=a.dim, seq=a.seq, batch=a.batch,
                 vocab=a.vocab, period=a.period, steps=a.steps, lr=a.lr, seed=a.seed,
                 causal=not a.no_causal, device=a.device, stand_in=a.stand_in,
                 kv_heads=a.kv_heads)
    c = curves(cfg, RUNS + (("control",) if a.control else ()))
    write_csv(a.out, c)
    v = verdict(c)
    print(f"{cfg}\nloss {v['first']:.4f} -> {v['last']:.4f} (sdpa); curves in {a.out}")
    print(f"max |ours - sdpa| = {v['gap']:.2e}; max |ours - f32| = {v['gap_f32']:.2e}; "
          f"noise (sdpa or model vs f32) = {v['noise']:.2e}; tolerance {v['tol']:.2e}")
    if "control_gap" in v:
        print(f"control (dK zeroed): max |control - sdpa| = {v['control_gap']:.2e} "
              f"({'rejected' if v['control_rejected'] else 'NOT rejected'})")
    ok = v["agree"] and v["learned"] and v.get("control_rejected", True)
    print("agree" if ok else f"FAIL: agree={v['agree']} learned={v['learned']} "
          f"control rejected={v.get('control_rejected')}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
