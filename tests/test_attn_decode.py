"""examples/flash_atten_decode.co, decode attention over a paged KV cache (split-KV, the LSE
combine, GQA heads packed into the rows of one tile), against the torch reference of
tests/attn_decode_ref.py.

The interpreter runs both kernels at small shapes (B = 3, cache lengths 1, 70 and 300:
partial last pages, a sequence of one key, splits with no tile); the strict PTX emulator
runs a few on sm_90a and sm_100a; ptxas assembles each tile shape for both targets; the
GPU tests (marked gpu) run the bench's shapes (page 64, H = 32, H_KV = 8, D = 128, up to
128k keys). What a kernel must not read is NaN (attn_decode_ref.paged_inputs): spare pages,
block-table entries past a sequence's pages, K rows past its length.
"""
from __future__ import annotations

import importlib.util
import re
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

import choreo_py
from attn_decode_ref import paged_attention, paged_inputs
from choreo_py import cli
from choreo_py.driver import compile_file
from fa_helpers import assemble

ROOT = Path(__file__).resolve().parents[1]
PATH = str(ROOT / "examples" / "flash_atten_decode.co")
TOL = 1e-2      # ||O - ref|| / ||ref||: bf16 inputs, P rounded to bf16
LSE_TOL = 1e-4  # |LSE - ref| where a row sees a key (f32 throughout)
ROWS = 64       # the split kernel's tile rows: the LSEs of one partial in L_part


def _wrapper():
    """examples/flash_atten_decode.py, imported from its file (examples/ is no package)."""
    spec = importlib.util.spec_from_file_location("flash_atten_decode",
                                                  ROOT / "examples" / "flash_atten_decode.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@dataclass(frozen=True)
class Case:
    """One decode step: cache lengths, page size, heads, splits (blocks a sequence and KV
    head), query tokens, consumer warpgroups a block (each writes a partial)."""
    lens: tuple = (1, 70, 300)
    page: int = 64
    h: int = 8
    hkv: int = 2
    d: int = 64
    splits: int = 2
    qlen: int = 1
    consumers: int = 2

    @property
    def parts(self) -> int:
        return self.splits * self.consumers

    @property
    def block_n(self) -> int:
        return min(self.page, 128)

    @property
    def defines(self) -> dict:
        return {"PAGE": str(self.page), "GROUP": str(self.h // self.hkv), "DIM": str(self.d),
                "QLEN": str(self.qlen), "LSE": "1", "CONSUMERS": str(self.consumers)}

    def inputs(self, device="cpu"):
        """(split args, combine args, reference O, reference LSE)."""
        q, k, v, table, seqlens = paged_inputs(self.lens, self.page, self.h, self.hkv, self.d,
                                               self.qlen, block_n=self.block_n)
        b = len(self.lens)
        split = dict(Q=q, K=k, V=v, block_table=table, cache_seqlens=seqlens,
                     O_part=torch.full((self.parts, b, self.qlen, self.h, self.d), float("nan")),
                     L_part=torch.full((b, self.hkv, self.parts * ROWS), float("nan")))
        split = {n: t.to(device) for n, t in split.items()}
        combine = dict(O_part=split["O_part"], L_part=split["L_part"],
                       O=torch.full((b, self.qlen, self.h, self.d), float("nan"),
                                    device=device).bfloat16(),
                       L=torch.full((b, self.h, self.qlen), float("nan"), device=device))
        ref_o, ref_l = paged_attention(q, k, v, table, seqlens)
        return split, combine, ref_o.to(device), ref_l.to(device)


def check(o, lse, ref_o, ref_l, lse_tol=LSE_TOL) -> None:
    o = o.float()
    assert not o.isnan().any(), "O has NaN (unwritten, or a poisoned row read)"
    err = ((o - ref_o).norm() / ref_o.norm()).item()
    assert err < TOL, f"||O - ref|| / ||ref|| = {err:.3g}"
    seen = torch.isfinite(ref_l)
    assert torch.equal(torch.isinf(lse) & (lse > 0), ~seen), "LSE is +inf where no key is seen"
    gap = (lse - ref_l)[seen].abs().max().item()
    assert gap < lse_tol, f"max |LSE - ref| = {gap:.3g}"


CASES = {
    "page16_split1": Case(page=16, splits=1),
    "page16_split2": Case(page=16, splits=2),
    "page16_split3": Case(page=16, splits=3),
    "page64_split1": Case(page=64, splits=1),
    "page64_split2": Case(page=64, splits=2),
    "page64_split3": Case(page=64, splits=3),
    # a page of two 128-key tiles: the tile's row offset inside its page
    "page256_split2": Case(page=256, splits=2, lens=(1, 200, 600)),
    "page32_mqa": Case(page=32, h=4, hkv=1, splits=3),
    # three query tokens a sequence (bottom-right causal among them; the first two rows
    # of the one-key sequence see no key)
    "page16_qlen3": Case(page=16, splits=3, qlen=3),
    "page64_qlen2_group8": Case(page=64, h=16, hkv=2, splits=2, qlen=2),
    # an empty cache (O = 0, LSE = +inf), one key, a page and two keys
    "empty_sequence": Case(page=64, splits=2, lens=(0, 1, 66)),
    # one consumer warpgroup a block (a partial a block)
    "page64_one_consumer": Case(page=64, splits=3, consumers=1),
    "page16_qlen2_one_consumer": Case(page=16, splits=2, qlen=2, consumers=1),
}


def _interpret(c: Case, split, combine):
    choreo_py.interpret(PATH, split, defines=c.defines, target="sm_90a", function="decode_split")
    choreo_py.interpret(PATH, combine, defines=c.defines, target="sm_90a",
                        function="decode_combine")


@pytest.mark.parametrize("name", list(CASES))
def test_interpreter_matches_torch(name):
    c = CASES[name]
    split, combine, ref_o, ref_l = c.inputs()
    _interpret(c, split, combine)
    check(combine["O"], combine["L"], ref_o, ref_l)


def test_a_split_without_keys_writes_zero_and_minus_inf():
    """Sequence 0 has one key, one tile: of its six partials (three splits, two consumer
    warpgroups each) only the first consumer of split 0 takes a tile; the other five write
    O = 0 and LSE = -inf for its rows (the combine weighs them exp(-inf) = 0), and the
    first holds V's row itself."""
    c = CASES["page64_split3"]
    split, combine, _, _ = c.inputs()
    _interpret(c, split, combine)
    group = c.h // c.hkv
    o_part = split["O_part"]
    l_part = split["L_part"].reshape(len(c.lens), c.hkv, c.parts, ROWS)
    assert torch.equal(o_part[1:, 0], torch.zeros_like(o_part[1:, 0]))
    assert bool((l_part[0, :, 1:, :group] == float("-inf")).all())
    assert bool(torch.isfinite(l_part[0, :, 0, :group]).all())
    page0 = int(split["block_table"][0, 0])
    v0 = split["V"][page0, 0].float().repeat_interleave(group, 0)  # [H, D]
    assert torch.allclose(o_part[0, 0, 0], v0, atol=1e-6)


def test_each_consumer_takes_every_other_tile_of_its_split():
    """Sequence 2 (300 keys, pages of 64: five tiles) over three splits of two consumers:
    split s takes tiles 2s and 2s + 1, its first consumer the even one, its second the odd
    one, so partial p is attention over tile p's keys alone (the last, keys 256..299, over
    44 keys; partial 5 over none)."""
    import math

    from attn_decode_ref import gather

    c = CASES["page64_split3"]
    split, combine, _, _ = c.inputs()
    _interpret(c, split, combine)
    group, n = c.h // c.hkv, c.lens[2]
    keys = gather(split["K"], split["block_table"], 2, n, c.page).float()
    vals = gather(split["V"], split["block_table"], 2, n, c.page).float()
    q = split["Q"][2, 0].float()                                   # [H, D]
    lse = split["L_part"].reshape(len(c.lens), c.hkv, c.parts, ROWS)[2]
    for p in range(5):
        k = keys[64 * p:64 * (p + 1)].repeat_interleave(group, 1)  # [keys, H, D]
        v = vals[64 * p:64 * (p + 1)].repeat_interleave(group, 1)
        sc = torch.einsum("hd,khd->hk", q, k) / math.sqrt(c.d)
        ref = torch.einsum("hk,khd->hd", sc.softmax(-1), v)
        got = split["O_part"][p, 2, 0]
        assert ((got - ref).norm() / ref.norm()) < TOL, p
        ref_l = sc.logsumexp(-1).reshape(c.hkv, group)
        assert (lse[:, p, :group] - ref_l).abs().max() < LSE_TOL, p
    assert bool((lse[:, 5, :group] == float("-inf")).all())


def test_kv_heads_pair_with_their_query_heads():
    """H = 8, H_KV = 2: query heads 0..3 read KV head 0 and 4..7 KV head 1; the same
    inputs with the KV heads swapped differ from the output by O(1)."""
    c = CASES["page64_split2"]
    split, combine, ref_o, _ = c.inputs()
    _interpret(c, split, combine)
    swapped, _ = paged_attention(split["Q"], split["K"].flip(2), split["V"].flip(2),
                                 split["block_table"], split["cache_seqlens"])
    o = combine["O"].float()
    assert ((o - ref_o).norm() / ref_o.norm()) < TOL
    assert ((o - swapped).norm() / swapped.norm()) > 0.5


@pytest.mark.parametrize("defines,message", [
    ({"GROUP": "2"}, "H must be GROUP \\* H_KV"),
    ({"QLEN": "1"}, "Q_LEN must not exceed QLEN"),
])
def test_the_entry_asserts_stop_a_mismatched_call(defines, message):
    c = Case(qlen=2)
    split, _, _, _ = c.inputs()
    with pytest.raises(Exception, match=message):
        choreo_py.interpret(PATH, split, defines={**c.defines, **defines}, target="sm_90a",
                            function="decode_split")


def test_partials_not_a_multiple_of_the_consumers_are_refused():
    """Two consumer warpgroups a block write two partials: three cannot be split so."""
    c = Case()
    split, _, _, _ = c.inputs()
    split["O_part"] = split["O_part"][:3].clone()
    split["L_part"] = split["L_part"][..., :3 * ROWS].clone()
    with pytest.raises(Exception, match="multiple of CONSUMERS"):
        choreo_py.interpret(PATH, split, defines=c.defines, target="sm_90a",
                            function="decode_split")


def test_the_wrapper_on_the_cpu():
    """examples/flash_atten_decode.py: the partials it allocates, its split count, O and LSE."""
    mod = _wrapper()
    q, k, v, table, seqlens = paged_inputs((1, 70, 300), 16, 8, 2, 64, block_n=16)
    ref_o, ref_l = paged_attention(q, k, v, table, seqlens)
    out, lse = mod.decode(q, k, v, table, seqlens, return_lse=True)
    check(out, lse, ref_o, ref_l)
    assert mod.decode(q, k, v, table, seqlens, splits=1).shape == out.shape


def test_the_split_heuristic():
    """One block an SM: B * H_KV * splits stays within the SMs, at most the tiles of the
    longest sequence, one split for four tiles or fewer."""
    mod = _wrapper()
    assert mod.num_splits(1, 8, 131072, 64) == 16
    assert mod.num_splits(8, 8, 32768, 64) == 2
    assert mod.num_splits(64, 8, 4096, 64) == 1
    assert mod.num_splits(1, 8, 256, 64) == 1      # four tiles
    assert mod.num_splits(1, 1, 640, 64) == 10     # ten tiles, fewer than the SMs


# ------------------------------------------------------------------ the strict emulator
EMU_CASES = [("sm_90a", Case(page=16, splits=3, lens=(1, 70, 150))),
             ("sm_90a", Case(page=64, splits=2, qlen=2, lens=(1, 70, 150))),
             ("sm_100a", Case(page=64, splits=2, lens=(1, 70, 150))),
             ("sm_100a", Case(page=16, splits=3, qlen=3, lens=(1, 70, 150))),
             ("sm_90a", Case(page=64, splits=2, consumers=1, lens=(1, 70, 150))),
             # the bench's head dim
             ("sm_90a", Case(page=64, d=128, splits=2, lens=(1, 70, 150))),
             ("sm_100a", Case(page=64, d=128, splits=2, qlen=2, lens=(1, 70, 150)))]


@pytest.mark.emu
@pytest.mark.parametrize("target,c", EMU_CASES, ids=lambda x: x if isinstance(x, str) else
                         f"d{x.d}_page{x.page}_splits{x.splits}_qlen{x.qlen}_consumers{x.consumers}")
def test_emulated_ptx_matches_torch(target, c):
    from choreo_py.emu import EmuStats

    split, combine, ref_o, ref_l = c.inputs()
    stats = EmuStats()
    lib = choreo_py.emulate_program(PATH, target=target, defines=c.defines, schedule="random",
                                    seed=3, stats=stats)
    lib["decode_split"](*split.values())
    lib["decode_combine"](*combine.values())
    check(combine["O"], combine["L"], ref_o, ref_l)
    assert stats.notes == []


# ------------------------------------------------------------------ ptxas
FORMS = {
    "d128_page64": {"DIM": "128", "PAGE": "64"},
    "d128_page16": {"DIM": "128", "PAGE": "16"},
    "d128_page256_qlen4_lse": {"DIM": "128", "PAGE": "256", "QLEN": "4", "LSE": "1"},
    "d64_page128_group8": {"DIM": "64", "PAGE": "128", "GROUP": "8"},
    "d128_page64_one_consumer": {"DIM": "128", "PAGE": "64", "CONSUMERS": "1"},
}


def _spills(report: str) -> list[int]:
    return [int(n) for n in re.findall(r"\b(\d+) bytes spill stores", report)]


@pytest.mark.parametrize("name", list(FORMS))
def test_sm90a_assembles_without_spills(name):
    report = assemble(compile_file(PATH, "ptx", "sm_90a", defines=FORMS[name]), "sm_90a")
    assert _spills(report) == [0, 0], report  # both entries


@pytest.mark.parametrize("name", list(FORMS))
def test_sm100a_assembles(name):
    """sm_100a: the split kernel's consumers spill at most 4 bytes (measured: 4 at page 64
    and 16 with head dim 128, none in the other forms); the combine none."""
    report = assemble(compile_file(PATH, "ptx", "sm_100a", defines=FORMS[name]), "sm_100a")
    spills = _spills(report)
    assert len(spills) == 2 and max(spills) <= 4 and min(spills) == 0, report


def test_a_ring_past_shared_memory_is_refused_with_a_location(tmp_path, capsys):
    rc = cli.main(["compile", PATH, "--target", "sm_90a", "-D", "PAGE=128", "-D", "STAGES=4",
                   "-o", str(tmp_path / "x")])
    err = capsys.readouterr().err
    assert rc == 1
    assert re.search(r"flash_atten_decode\.co:\d+:\d+: error: ", err), err
    assert "shared memory" in err and "Traceback" not in err


@pytest.mark.parametrize("define,message", [
    ("QLEN=9", "exceed the 64-row tile"),
    ("BLOCK_N=48", "BLOCK_N must divide PAGE"),
    ("DIM=96", "DIM must be 64 or 128"),
    ("CONSUMERS=3", "CONSUMERS must be 1 or 2"),
])
def test_forms_without_a_tile_are_refused_with_a_location(define, message, tmp_path, capsys):
    rc = cli.main(["compile", PATH, "--target", "sm_90a", "-D", define,
                   "-o", str(tmp_path / "x")])
    err = capsys.readouterr().err
    assert rc == 1
    assert re.search(r"flash_atten_decode\.co:\d+:1: error: #error", err), err
    assert message in err and "Traceback" not in err


# ------------------------------------------------------------------ on the GPU
# The bench's shapes: page 64, H = 32, H_KV = 8, D = 128; lengths that end in partial
# pages; the splits of the wrapper's heuristic, and forced ones.
GPU_CASES = {
    "b1_128k": dict(lens=(131072 - 37,)),
    "b8_mixed": dict(lens=(4096, 32768, 1, 9000, 16385, 70, 30000, 12345)),
    "b64_4k": dict(lens=tuple(4096 - 61 * i for i in range(64))),
    "b4_16k_qlen4": dict(lens=(16384, 16000, 300, 5), qlen=4),
    "b8_page16": dict(lens=(4096, 9000, 1, 20000, 777, 16384, 3000, 8192), page=16),
    "b8_page256": dict(lens=(4096, 9000, 0, 20000, 777, 16384, 3000, 8192), page=256),
    "b2_64k_splits7": dict(lens=(65536, 40000), splits=7),
}


@pytest.mark.gpu
@pytest.mark.parametrize("name", list(GPU_CASES))
def test_gpu_matches_torch(name):
    torch.backends.cuda.matmul.allow_tf32 = False
    kw = dict(GPU_CASES[name])
    splits = kw.pop("splits", 0)
    page, qlen = kw.pop("page", 64), kw.pop("qlen", 1)
    q, k, v, table, seqlens = paged_inputs(kw["lens"], page, 32, 8, 128, qlen,
                                           block_n=min(page, 128), device="cuda")
    out, lse = _wrapper().decode(q, k, v, table, seqlens, splits=splits, return_lse=True,
                                 target="sm_90a")
    torch.cuda.synchronize()
    ref_o, ref_l = paged_attention(q, k, v, table, seqlens)
    check(out, lse, ref_o, ref_l, lse_tol=1e-3)


# ------------------------------------------------------------------ the bench's CPU paths
def _bench():
    import sys

    sys.path.insert(0, str(ROOT / "bench"))
    import attention_decode

    return attention_decode


def test_the_bench_rows_compile():
    """bench/attention_decode.py times attention_family.DECODE_ROWS on the H200: each row's
    program compiles for sm_90a, its TMA loads in it."""
    bench = _bench()
    fad = _wrapper()
    seen = set()
    for r in bench.DECODE_ROWS:
        q = torch.empty(r.b, r.qlen, r.h, r.d, device="meta")
        k = torch.empty(1, r.page, r.hkv, r.d, device="meta")
        d = tuple(sorted(fad.defines(q, k, False).items()))
        if d not in seen:
            seen.add(d)
            assert "cp.async.bulk.tensor" in compile_file(PATH, "ptx", "sm_90a", defines=dict(d))
    assert len(bench.lens(bench.DecodeRow("x", 4, 1000, mixed=True))) == 4


def test_the_bench_implementations_on_the_cpu(tmp_path):
    """A small row through the bench's own callables (ours in the interpreter, the torch
    gather + SDPA) against the reference, and its table written."""
    bench = _bench()
    r = bench.DecodeRow("tiny", 2, 100, page=16, h=8, hkv=2, d=64)
    args = bench.tensors(r, device="cpu")
    ref_o, _ = paged_attention(*args)
    for label, fn in bench.ours(r, *args) + bench.torch_gather(r, *args):
        assert bench.check(ref_o, fn()) < TOL, label
    out = tmp_path / "decode.md"
    row = {"choreo-py decode": {"error": 1e-3, "us": 12.5, "graph": 3000.0, "events": 2900.0},
           "torch (gather + SDPA)": {"failed": "x"}}
    bench.write(str(out), [(r, row)], "python3 bench/attention_decode.py", "CPU")
    text = out.read_text()
    assert "| tiny | 12.5 us, 3000 / 2900 | n/a | failed |" in text
