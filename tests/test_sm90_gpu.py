"""The compiled examples on an sm_90 GPU against float32 torch references.

Skipped without a CUDA device. Each output is poisoned with NaN before the
run; a case passes when nothing is left unwritten and
||out - ref|| / ||ref|| < 1e-2 (bf16 inputs, float32 references with TF32
off). `CHOREO_GPU_RESULTS=path.json` collects the errors of every case.

    python tests/test_sm90_gpu.py sanitize   # small launches, for compute-sanitizer
"""
from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
TOL = 1e-2
pytestmark = pytest.mark.gpu  # skipped without a CUDA GPU (conftest.py)

_loaded: dict = {}


VARIANTS = ROOT / "bench" / "variants"


def kernel(name: str, **defines: str):
    """An example (examples/NAME.co), or a measured variant (bench/variants/NAME.co)."""
    key = (name, tuple(sorted(defines.items())))
    if key not in _loaded:
        import choreo_py

        path = EXAMPLES / f"{name}.co"
        if not path.exists():
            path = VARIANTS / f"{name}.co"
        _loaded[key] = choreo_py.load(str(path), target="sm_90a", defines=defines or None)
    return _loaded[key]


def record(key: str, err: float, ok: bool) -> None:
    path = os.environ.get("CHOREO_GPU_RESULTS")
    if not path:
        return
    data = json.loads(Path(path).read_text()) if Path(path).exists() else {}
    data[key] = {"rel_err": err, "ok": ok}
    Path(path).write_text(json.dumps(data, indent=1))


def attention_ref(q, k, v, causal: bool, heads_per_chunk: int = 4):
    """softmax(q k^T / sqrt(d) [causal]) v in float32, [B, S, H, D] layout, chunked over heads."""
    torch.backends.cuda.matmul.allow_tf32 = False
    b, sq, h, d = q.shape
    skv = k.shape[1]
    out = torch.empty(b, sq, h, d, device=q.device, dtype=torch.float32)
    mask = None
    if causal:
        mask = torch.ones(sq, skv, device=q.device, dtype=torch.bool).tril()
    for h0 in range(0, h, heads_per_chunk):
        hs = slice(h0, min(h, h0 + heads_per_chunk))
        qh = q[:, :, hs].float().transpose(1, 2)
        kh = k[:, :, hs].float().transpose(1, 2)
        vh = v[:, :, hs].float().transpose(1, 2)
        s = (qh @ kh.transpose(-1, -2)) / math.sqrt(d)
        if mask is not None:
            s = s.masked_fill(~mask, float("-inf"))
        out[:, :, hs] = (torch.softmax(s, dim=-1) @ vh).transpose(1, 2)
    return out


def rel_err(out, ref) -> float:
    return float((out.float() - ref).norm() / ref.norm())


def check(key: str, out, ref) -> float:
    """Records the relative error of `out` against `ref`; returns it (NaN: unwritten
    elements). Tests assert it is below TOL."""
    unwritten = bool(torch.isnan(out).any())
    err = rel_err(out, ref) if not unwritten else float("nan")
    ok = not unwritten and err < TOL
    record(key, err, ok)
    assert not unwritten, f"{key}: NaN / unwritten elements in the output"
    return err


# ---------------------------------------------------------------- attention

SIZES = {"small": (1, 2), "large": (2, 16)}
SEQS = [128, 256, 1024, 4096, 8192]


def _fa_inputs(b: int, h: int, sq: int, skv: int):
    g = torch.Generator(device="cuda").manual_seed(sq * 131 + skv * 7 + b * 3 + h)
    q = torch.randn(b, sq, h, 128, device="cuda", dtype=torch.bfloat16, generator=g)
    k = torch.randn(b, skv, h, 128, device="cuda", dtype=torch.bfloat16, generator=g)
    v = torch.randn(b, skv, h, 128, device="cuda", dtype=torch.bfloat16, generator=g)
    return q, k, v


def _fa_case(name: str, causal: bool, b: int, h: int, sq: int, skv: int, **defines) -> float:
    q, k, v = _fa_inputs(b, h, sq, skv)
    o = torch.full_like(q, float("nan"))
    kernel(name, **defines)(q, k, v, o)
    torch.cuda.synchronize()
    extra = "".join(f" {d}={x}" for d, x in defines.items())
    return check(f"{name}{extra} B={b} H={h} Q_SEQ={sq} KV_SEQ={skv}", o,
                 attention_ref(q, k, v, causal))


@pytest.mark.parametrize("size", sorted(SIZES))
@pytest.mark.parametrize("s", SEQS + [77, 200, 1000])
def test_causal_seed(size, s):
    b, h = SIZES[size]
    assert _fa_case("flash_atten_causal", True, b, h, s, s) < TOL


@pytest.mark.parametrize("size", sorted(SIZES))
@pytest.mark.parametrize("sq,skv", [(s, s) for s in SEQS] + [(1000, 1000), (384, 1000),
                                                               (200, 77), (128, 4001)])
def test_non_causal(size, sq, skv):
    b, h = SIZES[size]
    assert _fa_case("flash_atten", False, b, h, sq, skv) < TOL


# The persistent causal example: one block per SM (132) walking pairs of query
# tiles. B=8 H=16 S=1024 gives every block about 4 items; NUM_SMS=7 gives each
# of 7 blocks many items (9 tiles per head at S=1152: an odd count, so the
# middle tile of each head is an item of its own).
@pytest.mark.parametrize("size", sorted(SIZES))
@pytest.mark.parametrize("s", SEQS + [77, 200, 1000])
def test_persistent(size, s):
    b, h = SIZES[size]
    assert _fa_case("flash_atten_persistent", True, b, h, s, s) < TOL


@pytest.mark.parametrize("b,h,s,sms", [(8, 16, 1024, None), (2, 3, 1152, "7"), (1, 5, 640, "3"),
                                       (3, 2, 1000, "7")])
def test_persistent_many_items_per_block(b, h, s, sms):
    defines = {"NUM_SMS": sms} if sms else {}
    assert _fa_case("flash_atten_persistent", True, b, h, s, s, **defines) < TOL


def test_persistent_matches_the_seed():
    # Each query tile runs the seed's statements in the seed's order.
    q, k, v = _fa_inputs(2, 16, 1024, 1024)
    outs = []
    for name in ("flash_atten_causal", "flash_atten_persistent"):
        o = torch.full_like(q, float("nan"))
        kernel(name)(q, k, v, o)
        torch.cuda.synchronize()
        outs.append(o.float())
    diff = float((outs[1] - outs[0]).abs().max())
    record("flash_atten_persistent vs seed, B=2 H=16 S=1024: max abs difference", diff, diff < 1e-2)
    assert diff < 1e-2


# Variants of the persistent example that use named barriers (the consumers take
# turns issuing their MMAs) and `mma.load` (Q in registers, QK in wgmma's RS form).
@pytest.mark.parametrize("name", ["flash_atten_persistent_pingpong",
                                  "flash_atten_persistent_qreg"])
@pytest.mark.parametrize("b,h,s,sms", [(2, 16, 1024, None), (1, 2, 77, None), (1, 5, 640, "3"),
                                       (2, 16, 8192, None)])
def test_persistent_variants(name, b, h, s, sms):
    defines = {"NUM_SMS": sms} if sms else {}
    assert _fa_case(name, True, b, h, s, s, **defines) < TOL


# ---------------------------------------------------------------- gemm

@pytest.mark.parametrize("m,n,k", [(128, 128, 64), (256, 512, 192), (1024, 1024, 1024),
                                   (4096, 4096, 4096), (300, 264, 136), (8192, 8192, 512)])
def test_gemm(m, n, k):
    g = torch.Generator(device="cuda").manual_seed(m + 3 * n + 7 * k)
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16, generator=g)
    bt = torch.randn(n, k, device="cuda", dtype=torch.bfloat16, generator=g)
    c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    kernel("gemm")(a, bt, c)
    torch.cuda.synchronize()
    torch.backends.cuda.matmul.allow_tf32 = False
    assert check(f"gemm M={m} N={n} K={k}", c, a.float() @ bt.float().T) < TOL


@pytest.mark.parametrize("m,n,k", [(256, 512, 192), (300, 264, 136)])
def test_gemm_with_a_k_schedule(m, n, k):
    import choreo_py

    key = ("gemm_k_schedule", ())
    if key not in _loaded:
        _loaded[key] = choreo_py.load(str(ROOT / "tests" / "co" / "gemm_k_schedule.co"),
                                      target="sm_90a")
    g = torch.Generator(device="cuda").manual_seed(m + 5 * n + 11 * k)
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16, generator=g)
    bt = torch.randn(n, k, device="cuda", dtype=torch.bfloat16, generator=g)
    c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    _loaded[key](a, bt, c)
    torch.cuda.synchronize()
    torch.backends.cuda.matmul.allow_tf32 = False
    assert check(f"gemm k_tiles(2, 0, 3, 1) M={m} N={n} K={k}", c, a.float() @ bt.float().T) < TOL


def test_tile_through_shared_memory():
    # P = bf16(Q K^T) stored to a shared tile whose swizzle the backend picks, then the A
    # operand of P V (tests/co/attention_through_shared.co; fence + barrier in between).
    import choreo_py

    f = choreo_py.load(str(ROOT / "tests" / "co" / "attention_through_shared.co"), target="sm_90a")
    g = torch.Generator(device="cuda").manual_seed(5)
    q, k, v = (torch.randn(64, 64, device="cuda", dtype=torch.bfloat16, generator=g)
               for _ in range(3))
    o = torch.full((64, 64), float("nan"), device="cuda")
    f(q, k, v, o)
    torch.cuda.synchronize()
    torch.backends.cuda.matmul.allow_tf32 = False
    p = (q.float() @ k.float().T).to(torch.bfloat16).float()
    assert check("attention_through_shared 64 x 64", o, p @ v.float()) < TOL


# ---------------------------------------------------------------- runtime checks

def test_runtime_rejects_bad_arguments():
    from choreo_py.runtime import ChoreoRuntimeError

    f = kernel("flash_atten_causal")
    q = torch.randn(1, 128, 2, 128, device="cuda", dtype=torch.bfloat16)
    with pytest.raises(ChoreoRuntimeError, match="dtype"):
        f(q.float(), q, q, q)
    with pytest.raises(ChoreoRuntimeError, match="dimension 3"):
        f(q[..., :64].contiguous(), q, q, q)
    with pytest.raises(ChoreoRuntimeError, match="contiguous"):
        f(q.transpose(1, 2), q, q, q)
    with pytest.raises(ChoreoRuntimeError, match="B = 1"):
        f(q, torch.cat([q, q]), q, q)
    # rows of 260 bf16 = 520 bytes: no TMA tensor map can describe C, so the call takes
    # the build whose threads copy C (lowering/core/tma_fallback.py) and is right
    a = torch.randn(128, 64, device="cuda", dtype=torch.bfloat16)
    bt = torch.randn(260, 64, device="cuda", dtype=torch.bfloat16)
    c = torch.full((128, 260), float("nan"), device="cuda", dtype=torch.bfloat16)
    kernel("gemm")(a, bt, c)
    ref = a.float() @ bt.float().T
    assert (c.float() - ref).abs().max() <= ref.abs().max() * 2 ** -7


def sanitize() -> None:
    """Small launches of the four kernels (run under compute-sanitizer)."""
    torch.manual_seed(0)
    for name, causal in (("flash_atten_causal", True), ("flash_atten", False),
                         ("flash_atten_persistent", True)):
        q, k, v = (torch.randn(1, 200, 2, 128, device="cuda", dtype=torch.bfloat16)
                   for _ in range(3))
        o = torch.full_like(q, float("nan"))
        kernel(name)(q, k, v, o)
        torch.cuda.synchronize()
        print(name, "rel_err", rel_err(o, attention_ref(q, k, v, causal)))
    # the persistent kernel with 3 blocks of several items each (rings across items)
    q, k, v = (torch.randn(1, 640, 3, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    o = torch.full_like(q, float("nan"))
    kernel("flash_atten_persistent", NUM_SMS="3")(q, k, v, o)
    torch.cuda.synchronize()
    print("flash_atten_persistent NUM_SMS=3 rel_err", rel_err(o, attention_ref(q, k, v, True)))
    # bench/variants: the producer stores the output tiles
    import choreo_py

    variant = choreo_py.load(str(ROOT / "bench" / "variants" /
                                 "flash_atten_persistent_producer_store.co"),
                             target="sm_90a", defines={"NUM_SMS": "3"})
    o = torch.full_like(q, float("nan"))
    variant(q, k, v, o)
    torch.cuda.synchronize()
    print("producer-store variant NUM_SMS=3 rel_err", rel_err(o, attention_ref(q, k, v, True)))
    for name in ("flash_atten_persistent_pingpong", "flash_atten_persistent_qreg"):
        o = torch.full_like(q, float("nan"))
        kernel(name, NUM_SMS="3")(q, k, v, o)
        torch.cuda.synchronize()
        print(name, "NUM_SMS=3 rel_err", rel_err(o, attention_ref(q, k, v, True)))
    a = torch.randn(300, 136, device="cuda", dtype=torch.bfloat16)
    bt = torch.randn(264, 136, device="cuda", dtype=torch.bfloat16)
    c = torch.full((300, 264), float("nan"), device="cuda", dtype=torch.bfloat16)
    kernel("gemm")(a, bt, c)
    torch.cuda.synchronize()
    print("gemm rel_err", rel_err(c, a.float() @ bt.float().T))


if __name__ == "__main__" and sys.argv[1:] == ["sanitize"]:
    sanitize()
