"""examples/flash_atten_family.co, the attention family (GQA / MQA, bottom-right causal,
sliding windows, softcap, LSE, head dims 64 / 96 / 128 / 192-128 / 256), against the torch
reference of tests/attn_family_ref.py.

Each case runs in the interpreter at small shapes with partial tiles (the sm_90a owner
model, four threads a row); a few run in the strict PTX emulator on sm_90a and sm_100a;
every tile shape is assembled by ptxas for sm_90a (and sm_100a where it lowers); the GPU
tests (marked gpu) run every case on the device at larger shapes. The same defines in
FA4's Blackwell schedule (examples/flash_atten_blackwell.co -D FAMILY=1) run in the
interpreter and the strict emulator for sm_100a. Tiles outside a window are shown unread
by poisoning K and V there with NaN.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import torch

import choreo_py
from attn_family_ref import attention
from choreo_py import cli
from choreo_py.driver import compile_file
from fa_helpers import assemble

ROOT = Path(__file__).resolve().parents[1]
PATH = str(ROOT / "examples" / "flash_atten_family.co")
TOL = 1e-2  # ||O - ref|| / ||ref||: bf16 inputs, P rounded to bf16
LSE_TOL = 1e-4  # |LSE - ref| on the rows that see a key (f32 throughout)


@dataclass(frozen=True)
class Case:
    """One member of the family at one shape."""
    sq: int
    skv: int
    h: int = 2
    hkv: int = 1
    d: int = 64
    dv: int = 0  # 0: d
    causal: bool = False
    window: tuple = (-1, -1)
    softcap: float = 0.0
    lse: bool = True
    b: int = 1
    extra: dict = field(default_factory=dict, hash=False, compare=False)

    @property
    def defines(self) -> dict:
        d = {"DIM": str(self.d), "DIM_V": str(self.dv or self.d), **self.extra}
        if self.causal:
            d["CAUSAL"] = "1"
        if self.window[0] >= 0:
            d["WINDOW_LEFT"] = str(self.window[0])
        if self.window[1] >= 0:
            d["WINDOW_RIGHT"] = str(self.window[1])
        if self.softcap:
            d["SOFTCAP"] = f"{self.softcap}f"
        if self.lse:
            d["LSE"] = "1"
        return d


# Shapes end in partial tiles (query tiles of 128, or 192 with three consumer warpgroups;
# key tiles of 128, 112 or 80).
CASES = {
    "gqa": Case(192, 160, h=4, hkv=2),
    "gqa_nolse": Case(150, 100, h=4, hkv=2, lse=False),
    "mqa_causal_q_lt_kv": Case(100, 190, h=4, hkv=1, causal=True),
    "causal_q_gt_kv": Case(190, 100, hkv=2, causal=True),   # rows 0..89 see no key
    "window_both": Case(150, 190, window=(40, 20)),
    "window_left": Case(150, 190, window=(40, -1)),
    "window_right": Case(150, 190, window=(-1, 3)),
    "window_skips": Case(150, 400, window=(20, 5)),
    "causal_window_softcap": Case(150, 190, causal=True, window=(30, -1), softcap=5.0),
    "softcap": Case(130, 170, h=2, hkv=2, softcap=2.0),
    "d256_causal": Case(130, 200, d=256, causal=True),
    "d96_gqa_causal": Case(150, 190, h=4, hkv=2, d=96, causal=True),   # 64-byte swizzle
    "d192_128_window": Case(130, 200, d=192, dv=128, window=(50, -1)),
    "m192_causal": Case(400, 400, causal=True, extra={"BLOCK_M": "192"}),  # 192+192+16 rows
    "m192_gqa": Case(250, 160, h=4, hkv=2, extra={"BLOCK_M": "192"}),
}


def bshd(b, s, h, d, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(b, s, h, d, generator=g).to(torch.bfloat16)


def inputs(c: Case, device="cpu"):
    """(args by parameter name, reference O, reference LSE)."""
    dv = c.dv or c.d
    q, k, v = bshd(c.b, c.sq, c.h, c.d, 1), bshd(c.b, c.skv, c.hkv, c.d, 2), \
        bshd(c.b, c.skv, c.hkv, dv, 3)
    o = torch.full((c.b, c.sq, c.h, dv), float("nan")).bfloat16()
    args = dict(Q=q, K=k, V=v, O=o)
    if c.lse:
        args["L"] = torch.full((c.b, c.h, c.sq), float("nan"))
    args = {n: t.to(device) for n, t in args.items()}
    ref_o, ref_l = attention(args["Q"], args["K"], args["V"], c.causal, c.window,
                             c.softcap or None)
    return args, ref_o, ref_l


def check(c: Case, args, ref_o, ref_l) -> None:
    o = args["O"].float()
    assert not o.isnan().any(), "O has unwritten (NaN) elements"
    err = ((o - ref_o).norm() / ref_o.norm()).item()
    assert err < TOL, f"||O - ref|| / ||ref|| = {err:.3g}"
    if c.lse:
        lse = args["L"]
        seen = torch.isfinite(ref_l)
        assert torch.equal(torch.isinf(lse) & (lse > 0), ~seen), "LSE is +inf where no key is seen"
        if seen.any():
            gap = (lse - ref_l)[seen].abs().max().item()
            assert gap < LSE_TOL, f"max |LSE - ref| = {gap:.3g}"


@pytest.mark.parametrize("name", list(CASES))
def test_interpreter_matches_torch(name):
    c = CASES[name]
    args, ref_o, ref_l = inputs(c)
    choreo_py.interpret(PATH, args, defines=c.defines, target="sm_90a")
    check(c, args, ref_o, ref_l)


def test_rows_without_keys_are_zero():
    """Bottom-right causal with Q_SEQ > KV_SEQ: the first Q_SEQ - KV_SEQ rows see no key;
    FlashAttention returns O = 0 there (and LSE = +inf, checked by check())."""
    c = CASES["causal_q_gt_kv"]
    args, ref_o, ref_l = inputs(c)
    choreo_py.interpret(PATH, args, defines=c.defines, target="sm_90a")
    assert torch.equal(args["O"][:, :90].float(), torch.zeros_like(args["O"][:, :90].float()))
    assert args["O"][:, 90:].float().abs().sum() > 0


def test_tiles_outside_the_window_are_not_read():
    """One query tile of 100 rows, 700 keys, window (30, 10): the rows see keys 570..699,
    KV tiles 4 and 5. V rows 0..511 are NaN: a tile of them read (even masked, P = 0
    times NaN) would reach O."""
    c = Case(100, 700, window=(30, 10))
    args, ref_o, ref_l = inputs(c)
    args["V"][:, :512] = float("nan")
    args["K"][:, :512] = float("nan")
    choreo_py.interpret(PATH, args, defines=c.defines, target="sm_90a")
    check(c, args, ref_o, ref_l)


def test_gqa_reads_kv_head_h_over_group():
    """H = 4, H_KV = 2: query heads 0, 1 read KV head 0 and 2, 3 read KV head 1 (a kernel
    pairing them otherwise differs from the reference by O(1))."""
    c = Case(64, 64, h=4, hkv=2, lse=False)
    args, ref_o, _ = inputs(c)
    choreo_py.interpret(PATH, args, defines=c.defines, target="sm_90a")
    swapped = attention(args["Q"], args["K"].flip(2), args["V"].flip(2))[0]
    assert ((args["O"].float() - ref_o).norm() / ref_o.norm()) < TOL
    assert ((args["O"].float() - swapped).norm() / swapped.norm()) > 0.5


def test_kv_heads_must_divide_heads():
    """H = 3, H_KV = 2: the program's assert stops the call with its message."""
    c = Case(64, 64, h=3, hkv=2, lse=False)
    args = dict(Q=bshd(1, 64, 3, 64, 1), K=bshd(1, 64, 2, 64, 2), V=bshd(1, 64, 2, 64, 3),
                O=torch.zeros(1, 64, 3, 64).bfloat16())
    with pytest.raises(Exception, match="H_KV.*must divide"):
        choreo_py.interpret(PATH, args, defines=c.defines, target="sm_90a")


# ------------------------------------------------------------------ the strict emulator
EMU_CASES = [("sm_90a", "mqa_causal_q_lt_kv"), ("sm_90a", "m192_causal"),
             ("sm_90a", "m192_gqa"), ("sm_90a", "causal_window_softcap"),
             ("sm_90a", "d256_causal"), ("sm_90a", "d96_gqa_causal"), ("sm_100a", "gqa"),
             ("sm_100a", "window_both")]


@pytest.mark.emu
@pytest.mark.parametrize("target,name", EMU_CASES)
def test_emulated_ptx_matches_torch(target, name):
    from choreo_py.emu import EmuStats
    from choreo_py.emu.api import run_spec
    from choreo_py.emu.launch import from_co

    c = CASES[name]
    args, ref_o, ref_l = inputs(c)
    stats = EmuStats()
    run_spec(from_co(PATH, target, defines=c.defines), args, schedule="random", seed=3,
             strict=True, stats=stats)
    check(c, args, ref_o, ref_l)
    assert stats.notes == []


# ------------------------------------------------------------------ ptxas
# Each tile shape once, and the masks, softcap and LSE together.
FORMS = {
    "d64_all": {"DIM": "64", "CAUSAL": "1", "WINDOW_LEFT": "100", "SOFTCAP": "30.0f",
                "LSE": "1"},
    "d128_window": {"DIM": "128", "WINDOW_LEFT": "512", "WINDOW_RIGHT": "0", "LSE": "1"},
    "d96": {"DIM": "96", "CAUSAL": "1", "LSE": "1"},
    "d192_128": {"DIM": "192", "DIM_V": "128", "CAUSAL": "1"},
    "d256_causal_lse": {"DIM": "256", "CAUSAL": "1", "LSE": "1"},
}
SM100_FORMS = ["d64_all", "d96", "d192_128"]  # DIM 256 needs more tensor memory than sm_100a has


@pytest.mark.parametrize("name", list(FORMS))
def test_sm90a_assembles_without_spills(name):
    report = assemble(compile_file(PATH, "ptx", "sm_90a", defines=FORMS[name]), "sm_90a")
    assert re.search(r"\b0 bytes spill stores", report), report


@pytest.mark.parametrize("name", SM100_FORMS)
def test_sm100a_assembles(name):
    assemble(compile_file(PATH, "ptx", "sm_100a", defines=FORMS[name]), "sm_100a")


@pytest.mark.parametrize("target,defines,message", [
    ("sm_100a", ["-D", "DIM=256"], "tensor memory over-subscribed"),
    ("sm_90a", ["-D", "DIM=256", "-D", "BLOCK_N=128"], "shared memory"),
])
def test_forms_that_do_not_fit_are_refused_with_a_location(target, defines, message,
                                                            tmp_path, capsys):
    rc = cli.main(["compile", PATH, "--target", target, *defines, "-o", str(tmp_path / "x")])
    err = capsys.readouterr().err
    assert rc == 1
    assert re.search(r"flash_atten_family\.co:\d+:\d+: error: ", err), err
    assert message in err and "Traceback" not in err


def test_the_bench_rows_compile():
    """bench/attention.py --rows family runs these forms on the H200: each compiles."""
    import sys

    sys.path.insert(0, str(ROOT / "bench"))
    from attention_family import ROWS

    for defines in {tuple(sorted(r.defines.items())) for r in ROWS}:
        assert "cp.async.bulk.tensor" in compile_file(PATH, "ptx", "sm_90a", defines=dict(defines))


# ------------------------------------------------------------------ the Blackwell form
# examples/flash_atten_blackwell.co -D FAMILY=1: GQA, bottom-right causal, windows and
# softcap in FA4's schedule, -D LSE=1 its LSE (head dim 128; NUM_SMS small: a block runs
# several items, two query tiles each).
BLACKWELL = str(ROOT / "examples" / "flash_atten_blackwell.co")


def _blackwell(c: Case, sms: int = 2) -> dict:
    d = {k: v for k, v in c.defines.items() if k not in ("DIM", "DIM_V")}
    return {"FAMILY": "1", "NUM_SMS": str(sms), **d}


BLACKWELL_CASES = {
    "gqa": Case(130, 200, h=4, hkv=2, d=128),
    "window_both": Case(200, 330, h=2, hkv=1, d=128, window=(40, 20)),
    "causal_window_softcap": Case(200, 330, h=2, hkv=1, d=128, causal=True, window=(30, -1),
                                  softcap=5.0),
    "window_skips": Case(150, 700, h=2, hkv=1, d=128, window=(100, 10)),
}


@pytest.mark.parametrize("name", list(BLACKWELL_CASES))
def test_blackwell_family_in_the_interpreter(name):
    c = BLACKWELL_CASES[name]
    args, ref_o, ref_l = inputs(c)
    choreo_py.interpret(BLACKWELL, args, defines=_blackwell(c), target="sm_100a")
    check(c, args, ref_o, ref_l)


def test_blackwell_window_skips_tiles():
    """Window (100, 10), one item (Q_SEQ = 150), KV_SEQ = 700: the rows see keys 450..699,
    KV tiles 3 to 5; V and K rows 0..383 are NaN, so a tile of them read would reach O."""
    c = BLACKWELL_CASES["window_skips"]
    args, ref_o, ref_l = inputs(c)
    args["K"][:, :384] = float("nan")
    args["V"][:, :384] = float("nan")
    choreo_py.interpret(BLACKWELL, args, defines=_blackwell(c), target="sm_100a")
    check(c, args, ref_o, ref_l)


@pytest.mark.emu
def test_blackwell_family_in_the_strict_emulator():
    """Bottom-right causal MQA, Q_SEQ = 150 (an item's second tile partial; its LSE rows
    of 600 B are stored by the threads, not the TMA), KV_SEQ = 330."""
    from choreo_py.emu import EmuStats
    from choreo_py.emu.api import run_spec
    from choreo_py.emu.launch import from_co

    c = Case(150, 330, h=2, hkv=1, d=128, causal=True)
    args, ref_o, ref_l = inputs(c)
    stats = EmuStats()
    run_spec(from_co(BLACKWELL, "sm_100a", defines=_blackwell(c)), args, schedule="random",
             seed=3, strict=True, stats=stats)
    check(c, args, ref_o, ref_l)
    assert stats.notes == []


def test_blackwell_family_assembles():
    c = Case(128, 128, d=128, causal=True, window=(512, -1), softcap=30.0)
    assemble(compile_file(BLACKWELL, "ptx", "sm_100a", defines=_blackwell(c, 148)), "sm_100a")


def test_blackwell_bottom_right_needs_a_key_for_every_row():
    c = Case(200, 100, d=128, causal=True, lse=False)
    args, _, _ = inputs(c)
    with pytest.raises(Exception, match="needs Q_SEQ <= KV_SEQ"):
        choreo_py.interpret(BLACKWELL, args, defines=_blackwell(c), target="sm_100a")


# ------------------------------------------------------------------ on the GPU
GPU_SHAPES = {  # larger shapes: several KV tiles a query tile, ring slots reused
    "gqa": dict(sq=1000, skv=1000, h=8, hkv=2, b=2),
    "gqa_nolse": dict(sq=777, skv=1300, h=8, hkv=2),
    "mqa_causal_q_lt_kv": dict(sq=300, skv=1111, h=8, hkv=1),
    "causal_q_gt_kv": dict(sq=1111, skv=300, h=4, hkv=4),
    "window_both": dict(sq=1000, skv=1500),
    "window_left": dict(sq=1000, skv=1500),
    "window_right": dict(sq=1000, skv=1500),
    "window_skips": dict(sq=1500, skv=4000),
    "causal_window_softcap": dict(sq=1000, skv=1500),
    "softcap": dict(sq=640, skv=900),
    "d256_causal": dict(sq=700, skv=900),
    "d192_128_window": dict(sq=700, skv=900),
    "d96_gqa_causal": dict(sq=700, skv=900, h=8, hkv=2),
    "m192_causal": dict(sq=1000, skv=1000),
    "m192_gqa": dict(sq=700, skv=900, h=8, hkv=2),
}


@pytest.mark.gpu
@pytest.mark.parametrize("name", list(CASES))
def test_gpu_matches_torch(name):
    import dataclasses

    torch.backends.cuda.matmul.allow_tf32 = False
    c = dataclasses.replace(CASES[name], **GPU_SHAPES[name])
    args, ref_o, ref_l = inputs(c, device="cuda")
    fn = choreo_py.load(PATH, target="sm_90a", defines=c.defines)
    fn(*args.values())
    torch.cuda.synchronize()
    check(c, args, ref_o, ref_l)
