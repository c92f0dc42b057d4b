"""FlashAttention-4's CuTe-DSL forward kernel (sm_100a, 1-CTA, causal) in the PTX emulator.

    pip install flash-attn-4==4.0.0b36 "nvidia-cutlass-dsl[cu13]==4.8.1" einops triton
    python bench/fa4_emu.py [--s 256] [--h 1] [--schedule round_robin] [--relaxed]

A foreign kernel: its PTX comes from FA4's own compile (`compile_fa4`, no GPU needed), and its
launch is rebuilt here from what the DSL's host code passes (`fa4_launch`), not from choreo's
launch path. FA4 passes every argument by value in the .param space, in the order of its
`kernel(...)` signature with `None`s and compile-time values dropped (flash_fwd_sm100.py, 4.0.0b36):

| param | what | how it is filled here |
|---|---|---|
| 0-3 [16] | mQ, mK, mV, mO: the dynamic shape (4 x i32) | (S, D, H, B); the kernel reads +0 (seqlen) |
| 4-7 [128] | tma_atom_Q/K/V/O: CUtensorMap by value | tensor maps (D, S, H, B), box (64, 128, 1, 1), 128B swizzle |
| 8 .f32 | softmax_scale_log2 | log2(e) / sqrt(D) |
| 9, 10 [32] | tiled MMA atoms' runtime state | zeros (the PTX never reads them) |
| 11-25, 26-27 | SingleTileLPTScheduler.Params | total_blocks, num_splits, num_block, num_head, num_batch, l2_minor, then FastDivmodDivisorV2 x4 ([12] + its divisor), num_hb_quotient, num_splits_divmod |
| 28 .u32 | num_splits | 1 |

A FastDivmodDivisorV2 is the encoded divisor (d, multiplier, shift1, shift2: the kernel computes
t = umulhi(n, m); q = (((n - t) >> s1) + t) >> s2, the round-up method of CUTLASS's FastDivmod)
plus the plain divisor. Grid: (total_blocks, num_splits, 1) = (ceil(S / 256) * H * B, 1, 1): one
CTA takes two 128-row Q tiles (q_stage 2). Block: 512 threads (`.reqntid`). Dynamic shared memory:
the sm_100 limit, 227 KiB (232,448 bytes: cudaFuncSetAttribute's maximum; the kernel's storage
is at most that, and the emulator refuses every access outside the window).
"""
from __future__ import annotations

import argparse
import math
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SMEM_SM100 = 232448
M_TILE, Q_STAGE, KV_TILE, D_BOX = 128, 2, 128, 64
INSTALL = 'pip install flash-attn-4==4.0.0b36 "nvidia-cutlass-dsl[cu13]==4.8.1" einops triton'

# Runs FA4's forward under FakeTensorMode with the DSL keeping its PTX (the recipe of
# ../shared/tools/fa4_ptx.py, self-contained: the DSL parses sys.argv for its own
# `-diagnostic` flag on every compile, so the child runs with an empty argv).
_CHILD = r"""
import os, sys
arch, out, causal, b, h, s, d = sys.argv[1], sys.argv[2], sys.argv[3] == "1", *map(int, sys.argv[4:8])
sys.argv = sys.argv[:1]
sms = 148 if arch.startswith("sm_10") else 132
os.environ.update(FLASH_ATTENTION_ARCH=arch.rstrip("a"), CUTE_DSL_ARCH=arch,
                  FLASH_ATTENTION_NUM_SMS=str(sms), CUTE_DSL_KEEP="ptx",
                  CUTE_DSL_DUMP_DIR=os.path.abspath(out))
import torch, cutlass.utils
from torch._subclasses.fake_tensor import FakeTensorMode
class HardwareInfo:
    def __init__(self, device_id=0): pass
    def get_device_multiprocessor_count(self): return sms
    def get_max_active_clusters(self, cluster_size, stream=None): return sms // cluster_size
cutlass.utils.HardwareInfo = HardwareInfo
from flash_attn.cute import flash_attn_func
with FakeTensorMode():
    q = torch.empty(b, s, h, d, dtype=torch.bfloat16, device="cuda")
    flash_attn_func(q, torch.empty_like(q), torch.empty_like(q), causal=causal)
"""


def fa4_available() -> str:
    """'' when FA4 and the CuTe DSL import; else why not, with the install line."""
    try:
        import cutlass  # noqa: F401
        import flash_attn.cute  # noqa: F401
    except Exception as e:  # noqa: BLE001 - any import failure means: not installed here
        return f"flash-attn-4 / nvidia-cutlass-dsl not importable ({e}); {INSTALL}"
    return ""


def compile_fa4(arch="sm_100a", causal=True, b=1, h=1, s=256, d=128, out=None) -> str:
    """FA4's forward PTX for this shape (text). The kernel is specialised on the flags and head
    dim, not on B, H, S (dynamic shapes), so one PTX serves every sequence length."""
    out = out or tempfile.mkdtemp(prefix="fa4ptx_")
    subprocess.run([sys.executable, "-c", _CHILD, arch, out, "1" if causal else "0",
                    str(b), str(h), str(s), str(d)], check=True, capture_output=True)
    ptx = [f for f in os.listdir(out) if f.endswith(".ptx")]
    if len(ptx) != 1:
        raise RuntimeError(f"FA4 compile left {ptx} in {out}")
    return Path(out, ptx[0]).read_text()


def fast_divmod(d: int) -> tuple:
    """(d, multiplier, shift1, shift2) of the round-up unsigned division by d for 32-bit n."""
    ell = max(0, (d - 1).bit_length())  # ceil(log2 d)
    m = ((1 << 32) * ((1 << ell) - d)) // d + 1
    return d, m & 0xFFFFFFFF, min(ell, 1), max(ell - 1, 0)


def _divmod_bytes(d: int) -> bytes:
    dd, m, s1, s2 = fast_divmod(d)
    return dd.to_bytes(4, "little") + m.to_bytes(4, "little") + bytes([s1, s2, 0, 0])


def scheduler_params(s: int, h: int, b: int, d: int) -> tuple:
    """SingleTileLPTScheduler.Params.create (tile_scheduler.py), evaluated on the host."""
    num_block = -(-s // (M_TILE * Q_STAGE))
    size_one_head = s * (d + d) * 2
    size_l2 = 50 * 1024 * 1024
    swizzle = 1 if size_l2 < size_one_head else 1 << ((size_l2 // size_one_head).bit_length() - 1)
    hb = h * b
    return dict(total_blocks=num_block * hb, num_splits=1, num_block=num_block, num_head=h,
                num_batch=b, l2_minor=swizzle, num_head_divmod=h, l2_minor_divmod=swizzle,
                l2_major_divmod=swizzle * num_block,
                l2_minor_residual_divmod=max(hb % swizzle, 1),
                num_hb_quotient=hb // swizzle, num_splits_divmod=1)


_ORDER = ["total_blocks", "num_splits", "num_block", "num_head", "num_batch", "l2_minor",
          "num_head_divmod", "l2_minor_divmod", "l2_major_divmod", "l2_minor_residual_divmod",
          "num_hb_quotient", "num_splits_divmod"]


def _entry_params(kernel):
    by_index = {}
    for p in kernel.params:
        m = re.search(r"_param_(\d+)$", p.name)
        by_index[int(m.group(1))] = p
    return [by_index[i] for i in sorted(by_index)]


def fa4_launch(kernel, q, k, v, o):
    """The Launch of FA4's 1-CTA forward for BSHD bf16 CPU tensors q, k, v -> o."""
    from choreo_py.emu.launch import _numpy_of
    from choreo_py.emu.machine import Launch
    from choreo_py.emu.memory import GlobalMemory, ParamSpace, TensorMap
    import struct

    b, s, h, d = q.shape
    params = _entry_params(kernel)
    if len(params) != 29:
        raise ValueError(f"expected FA4's 29 kernel parameters, the PTX has {len(params)}")
    gmem = GlobalMemory()
    ps = ParamSpace(kernel.params)

    def put(i, data: bytes):
        p = params[i]
        if len(data) > p.size:
            raise ValueError(f"{p.name}: {len(data)} bytes for a {p.size}-byte parameter")
        off = ps.offsets[p.name]
        ps.data[off:off + len(data)] = data

    for i, t in enumerate((q, k, v, o)):
        name = "QKVO"[i]
        base = gmem.add(name, _numpy_of(t))
        put(i, struct.pack("<4i", t.shape[1], d, t.shape[2], t.shape[0]))
        dims = (d, t.shape[1], t.shape[2], t.shape[0])  # innermost first
        strides = tuple(int(x) * 2 for x in (t.stride(1), t.stride(2), t.stride(0)))
        box = (D_BOX, M_TILE if name in "QO" else KV_TILE, 1, 1)
        ps.set_tmap(params[4 + i].name, TensorMap(name, "bf16", base, dims, strides, box, 128))
    put(8, struct.pack("<f", math.log2(math.e) / math.sqrt(d)))
    sp = scheduler_params(s, h, b, d)
    idx = 11
    for field in _ORDER:
        if field.endswith("_divmod"):
            put(idx, _divmod_bytes(sp[field]))
            put(idx + 1, struct.pack("<I", sp[field]))
            idx += 2
        else:
            put(idx, struct.pack("<I", sp[field]))
            idx += 1
    put(idx, struct.pack("<I", 1))  # num_splits
    assert idx == 28
    return Launch((sp["total_blocks"], 1, 1), (512, 1, 1), SMEM_SM100, ps, gmem)


def run_fa4(ptx: str, q, k, v, *, schedule="round_robin", seed=0, strict=True, stats=None,
            step_limit=None):
    """O (BSHD bf16) of FA4's causal forward in the emulator."""
    import numpy as np
    import torch

    from choreo_py.emu.machine import DEFAULT_STEP_LIMIT, Machine
    from choreo_py.emu.ptx_parse import parse_ptx

    kernel = parse_ptx(ptx)
    o = torch.full_like(q, float("nan"))
    launch = fa4_launch(kernel, q, k, v, o)
    with np.errstate(all="ignore"):
        m = Machine(kernel, launch, schedule=schedule, seed=seed, strict=strict,
                    ptx_name="fa4_fwd_sm100.ptx", step_limit=step_limit or DEFAULT_STEP_LIMIT)
        m.run()
    if stats is not None:
        stats.instructions += m.instructions
        stats.notes += m.notes
    return o


def rel_error(o, q, k, v, causal=True) -> float:
    import torch

    ref = torch.nn.functional.scaled_dot_product_attention(
        q.float().transpose(1, 2), k.float().transpose(1, 2), v.float().transpose(1, 2),
        is_causal=causal).transpose(1, 2)
    return float((o.float() - ref).norm() / ref.norm())


def main(argv=None) -> int:
    import time

    import torch

    from choreo_py.emu import EmuStats

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--s", type=int, default=256)
    ap.add_argument("--h", type=int, default=1)
    ap.add_argument("--b", type=int, default=1)
    ap.add_argument("--schedule", default="round_robin")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--relaxed", action="store_true")
    ap.add_argument("--ptx", help="a PTX file FA4 compiled (default: compile now)")
    a = ap.parse_args(argv)
    why = fa4_available() if not a.ptx else ""
    if why:
        print(why)
        return 2
    ptx = Path(a.ptx).read_text() if a.ptx else compile_fa4(b=a.b, h=a.h, s=a.s)
    g = torch.Generator().manual_seed(a.seed)
    q, k, v = (torch.randn(a.b, a.s, a.h, 128, generator=g).bfloat16() for _ in range(3))
    stats = EmuStats()
    t = time.time()
    o = run_fa4(ptx, q, k, v, schedule=a.schedule, seed=a.seed, strict=not a.relaxed, stats=stats)
    print(f"S={a.s} H={a.h} B={a.b} {a.schedule} {'relaxed' if a.relaxed else 'strict'}: "
          f"rel {rel_error(o, q, k, v):.5f}, {stats.instructions} warp instructions, "
          f"{time.time() - t:.1f} s, {len(set(stats.notes))} relaxed notes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
