"""Inputs for a run, and the references `choreo run --check` compares results with.

Checks (what a function's output is compared with, in float32):
- `sdpa` / `sdpa-causal`: parameters Q, K, V, O in BSHD layout ([batch,
  sequence, heads, head dim]); O against
  `torch.nn.functional.scaled_dot_product_attention` (causal: top-left
  aligned, query i sees keys 0..i).
- `matmul`: parameters A [M, K], B [N, K], C [M, N]; C against A @ B^T.
- `softmax`: parameters X, Y of one 2-D shape; Y against softmax(X) by rows.
- `none`.

`auto` (the default) guesses, and only when the program leaves no doubt: the
parameters must fit a check (Q, K, V, O of rank 4: `sdpa`, `sdpa-causal`
with "causal" in the names; A, B, C of the matmul shapes: `matmul`; X, Y:
`softmax`) and the file and function names must say that check and nothing
more (`gemm_relu` names more than a matmul: no check is picked, and the
command says so); `matmul` also needs a kernel without an epilogue (no
`apply` or reduction on its accumulator). Parameter names are matched case-insensitively.
`--ref module:function` gives a reference in Python instead (python_ref.py).
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Optional

import torch

from .. import ir
from .scalars import TORCH_DTYPES

CHECKS = ("auto", "none", "sdpa", "sdpa-causal", "matmul", "softmax")
_NEEDS = {"sdpa": "QKVO", "sdpa-causal": "QKVO", "matmul": "ABC", "softmax": "XY"}


@dataclass
class Comparison:
    output: str
    max_abs: float
    rel: float

    def ok(self, tol: float) -> bool:
        return self.rel <= tol  # False for NaN


def make_inputs(fn: ir.Function, dims: dict[str, int], reads: set[str], seed: int,
                shape_of) -> dict[str, torch.Tensor]:
    """Seeded random data for the parameters the kernels read; the others start as NaN
    (floating point, so that an element the program never writes shows) or zero."""
    g = torch.Generator().manual_seed(seed)
    out = {}
    for p in fn.params:
        shape = shape_of(p, dims)
        dt = TORCH_DTYPES[p.dtype]
        if p.name not in reads:
            out[p.name] = torch.full(shape, float("nan"), dtype=dt) if dt.is_floating_point \
                else torch.zeros(shape, dtype=dt)
        elif dt.is_floating_point:
            out[p.name] = torch.randn(shape, generator=g).to(dt)
        elif dt == torch.bool:
            out[p.name] = torch.randint(0, 2, shape, generator=g).bool()
        else:
            lo = 0 if p.dtype.startswith("u") else -8
            out[p.name] = torch.randint(lo, 9, shape, generator=g).to(dt)
    return out


def _by_letter(fn: ir.Function) -> dict[str, ir.Param]:
    return {p.name.upper(): p for p in fn.params}


def _dims(p: ir.Param) -> tuple:
    return tuple(d.name if isinstance(d, ir.Sym) else int(d.value) for d in p.shape)


def applicable(check: str, fn: ir.Function) -> Optional[str]:
    """None if `check` can judge `fn`, else why not."""
    if check == "none":
        return None
    ps = _by_letter(fn)
    need = _NEEDS[check]
    missing = [c for c in need if c not in ps]
    if missing:
        return (f"--check {check} needs parameters {', '.join(need)}; {fn.name} has "
                f"{', '.join(p.name for p in fn.params)}")
    d = {c: _dims(ps[c]) for c in need}
    if check.startswith("sdpa"):
        if any(len(x) != 4 for x in d.values()):
            return f"--check {check} needs Q, K, V, O of rank 4 (BSHD)"
        q, k, v, o = d["Q"], d["K"], d["V"], d["O"]
        if not (q[0] == k[0] == v[0] == o[0] and q[2] == k[2] == v[2] == o[2]
                and q[1] == o[1] and k[1] == v[1] and q[3] == k[3] and v[3] == o[3]):
            return f"--check {check}: Q, K, V, O do not have the BSHD shapes of attention"
    elif check == "matmul":
        a, b, c = d["A"], d["B"], d["C"]
        if not (len(a) == len(b) == len(c) == 2 and a[1] == b[1] and c == (a[0], b[0])):
            return "--check matmul needs A [M, K], B [N, K] and C [M, N]"
    elif check == "softmax":
        if len(d["X"]) != 2 or d["X"] != d["Y"]:
            return "--check softmax needs X and Y of one 2-D shape"
    return None


#: Words of file and function names that say what a named check computes, and words
#: that say nothing about the computation (a variant, a tuning, a target). `auto`
#: picks a check only when every word of the names is one of these: a GEMM named
#: `gemm_relu` or `matmul_bias` computes more than A @ B^T, so none is picked.
_CHECK_WORDS = {
    "sdpa": {"flash", "atten", "attention", "attn", "fa", "sdpa", "mha"},
    "matmul": {"gemm", "matmul", "mm", "hgemm"},
    "softmax": {"softmax"},
}
_NEUTRAL_WORDS = {
    "causal", "noncausal", "non", "fwd", "forward", "kernel", "tiled", "tile", "pipelined",
    "pipeline", "async", "persistent", "ws", "warp", "specialized", "sm", "a", "bf", "f",
    "fp", "k", "schedule", "example", "simple", "basic", "v", "main", "test", "seed", "step",
    "row", "rows", "naive", "tma", "wgmma", "tcgen", "split", "ring", "stages", "tutorial",
}


def _name_words(path: str, fn: ir.Function) -> list[str]:
    stem = os.path.splitext(os.path.basename(path))[0]
    return [w for w in re.split(r"[^a-z]+", f"{stem} {fn.name}".lower()) if w]


def _has_epilogue(fn: ir.Function) -> bool:
    """Element-wise work on an MMA result (`apply`, a reduction): then the kernel
    computes more than A @ B^T (a ReLU, a bias, a scale), whatever its name says."""
    return any(isinstance(s, (ir.Apply, ir.Reduce, ir.AllReduce))
               for k in fn.kernels for s in ir.walk(k.body))


def auto_check(fn: ir.Function, path: str) -> tuple[str, str]:
    """(the check `auto` picks, why): a guess, made only when the parameters fit a check
    and the file and function names say that check and nothing else."""
    words = _name_words(path, fn)
    fits = [c for c in ("sdpa", "matmul", "softmax") if applicable(c, fn) is None
            and (c != "matmul" or len(fn.params) == 3) and (c != "softmax" or len(fn.params) == 2)]
    if not fits:
        return "none", "no reference fits this function's parameters"
    check = fits[0]
    named = [w for w in words if w in _CHECK_WORDS[check]]
    other = [w for w in words if w not in _CHECK_WORDS[check] and w not in _NEUTRAL_WORDS]
    params = ", ".join(p.name for p in fn.params)
    epilogue = check == "matmul" and _has_epilogue(fn)
    if not named or other or epilogue:
        reason = (f"'{other[0]}' in the names may mean more than {check}" if other else
                  f"the names do not say {check}" if not named else
                  "the kernel works on its accumulator's elements (an epilogue)")
        return "none", (f"parameters {params} fit --check {check}, but {reason}: no reference "
                        f"picked; choose one with --check or --ref MODULE:FUNCTION")
    if check == "sdpa" and "causal" in words:
        check, named = "sdpa-causal", named + ["causal"]
    said = ", ".join(f"'{w}'" for w in dict.fromkeys(named))
    return check, (f"guessed from the parameters {params} and the names ({said}); "
                   f"--check or --ref to choose")


#: How `choreo run` / `emulate` tell where a reference comes from, for the note printed
#: when none was picked (the stdout line says "check none" and no more).
GIVE_A_REFERENCE = ("give one with --ref MODULE:FUNCTION (a Python function of the inputs "
                    "returning the expected output) or --check sdpa|sdpa-causal|matmul|softmax")


def nothing_compared_note(path: str, why: str) -> Optional[str]:
    """The stderr note of a run that compared nothing because `auto` found no reference
    (None when the user asked for no comparison with --check none: nothing to tell)."""
    if not why.startswith("auto"):
        return None
    return (f"{path}: note: nothing was compared (no reference could be guessed); "
            f"{GIVE_A_REFERENCE}")


def causal_alignment_note(check: str, fn: ir.Function, inputs: dict, path: str) -> Optional[str]:
    """The stderr note of `--check sdpa-causal` when the sequences differ in length: torch's
    `is_causal` mask is aligned top-left (query i sees keys 0..i), and a kernel that aligns it
    bottom-right (query i sees keys 0..i + KV_SEQ - Q_SEQ, the KV-cache convention) is then
    reported wrong by this check although it may be right."""
    if check != "sdpa-causal":
        return None
    ps = _by_letter(fn)
    q_len, kv_len = inputs[ps["Q"].name].shape[1], inputs[ps["K"].name].shape[1]
    if q_len == kv_len:
        return None
    past = kv_len - q_len
    shift = f"{'+' if past > 0 else '-'} {abs(past)}"
    return (f"{path}: note: --check sdpa-causal aligns the causal mask top-left (torch's "
            f"is_causal: query i sees keys 0..i) and the query sequence ({q_len}) differs from "
            f"the key sequence ({kv_len}); a kernel that aligns it bottom-right (query i sees "
            f"keys 0..i {shift}) differs from this reference: compare it with --ref "
            "(docs/reference/masks.md)")


def reference(check: str, fn: ir.Function, inputs: dict[str, torch.Tensor]):
    """(output parameter name, the expected float32 result) for `check`."""
    ps = _by_letter(fn)
    t = {c: inputs[p.name].float() for c, p in ps.items()}
    if check.startswith("sdpa"):
        q, k, v = (t[c].transpose(1, 2) for c in "QKV")
        ref = torch.nn.functional.scaled_dot_product_attention(
            q, k, v, is_causal=check == "sdpa-causal")
        return ps["O"].name, ref.transpose(1, 2)
    if check == "matmul":
        return ps["C"].name, t["A"] @ t["B"].T
    if check == "softmax":
        return ps["Y"].name, torch.softmax(t["X"], dim=-1)
    raise ValueError(check)


def compare(name: str, out: torch.Tensor, ref: torch.Tensor) -> Comparison:
    """Max absolute error and relative error ||out - ref|| / ||ref|| (Frobenius)."""
    diff = out.float() - ref
    max_abs = float(diff.abs().max()) if diff.numel() else 0.0  # NaN if any is NaN
    norm = float(ref.norm())
    rel = float(diff.norm()) / norm if norm else float(diff.norm())
    return Comparison(name, max_abs, rel)
