"""examples/flash_atten_varlen.co, variable-length (packed THD) attention forward, against
the per-sequence torch reference of tests/attn_varlen_ref.py; and `tma.copy.rows<n>`, the
store of a tile's first n rows that its partial query tiles need.

Each case runs in the interpreter (the sm_90a owner model) at small shapes: sequences of
1, 37 and 130 rows (one tile of one row, one partial tile, a full tile and a partial one),
GQA, causal bottom right per sequence, sequences whose queries outnumber their keys,
empty sequences, seqused_k. A few run in the strict PTX emulator on sm_90a and sm_100a;
ptxas assembles both targets' PTX; the GPU tests (marked gpu) run FA-bench shapes
(lengths 1k-8k, H = 32, H_KV = 8, D = 128). O and L start as NaN, so a row the kernel
leaves unwritten shows; rows past the last sequence (the tensors may be longer than
cu_seqlens_q[-1], as FlashAttention allows) must stay NaN, which a whole-tile store of a
partial tile would overwrite.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

import choreo_py
from attn_varlen_ref import cu_seqlens, varlen_attention
from choreo_py import cli
from choreo_py.driver import compile_file
from fa_helpers import assemble

ROOT = Path(__file__).resolve().parents[1]
PATH = str(ROOT / "examples" / "flash_atten_varlen.co")
TOL = 1e-2  # ||O - ref|| / ||ref|| over the sequences' rows: bf16 inputs, P rounded to bf16
LSE_TOL = 1e-4  # |LSE - ref| on the rows that see a key (f32 throughout)


@dataclass(frozen=True)
class Case:
    """One varlen call: per-sequence query and key lengths and the form."""
    lq: tuple
    lk: tuple
    h: int = 4
    hkv: int = 2
    d: int = 64
    causal: bool = False
    lse: bool = True
    used: tuple = ()  # seqused_k, one entry a sequence (empty: none)
    pad: int = 0  # rows of Q / O (and columns of L) past the last sequence

    @property
    def defines(self) -> dict:
        d = {"DIM": str(self.d), "CAUSAL": "1" if self.causal else "0",
             "LSE": "1" if self.lse else "0"}
        if self.used:
            d["SEQUSED_K"] = "1"
        return d


CASES = {
    "gqa": Case((1, 37, 130), (1, 37, 130)),
    "gqa_causal": Case((1, 37, 130), (1, 37, 130), causal=True),
    # q > k: the first 70 rows of the second sequence see no key; an empty key sequence;
    # an empty query sequence (all its blocks store nothing)
    "causal_q_ne_k": Case((37, 130, 3, 0, 20), (100, 60, 0, 5, 20), causal=True),
    "seqused_k": Case((37, 130), (150, 200), causal=True, used=(100, 3)),
    "mqa_d128_nolse": Case((130, 5), (70, 140), h=4, hkv=1, d=128, lse=False),
    "d96_causal_padded": Case((37, 130), (37, 130), d=96, causal=True, pad=21),
    "padded": Case((1, 37, 130), (1, 37, 130), causal=True, pad=30),
    # five and four KV tiles: the K / V rings of two slots wrap
    "long_keys": Case((300, 70), (520, 450), h=2, hkv=1),
    "long_keys_causal": Case((300, 70), (520, 450), h=2, hkv=1, causal=True),
}


def thd(n, h, d, seed, device):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, h, d, generator=g).to(torch.bfloat16).to(device)


def inputs(c: Case, device="cpu"):
    """(args in parameter order, reference O, reference LSE, rows of the sequences)."""
    total_q, total_k = sum(c.lq) + c.pad, sum(c.lk)
    cu_q, cu_k = cu_seqlens(list(c.lq), device), cu_seqlens(list(c.lk), device)
    q, k, v = thd(total_q, c.h, c.d, 1, device), thd(total_k, c.hkv, c.d, 2, device), \
        thd(total_k, c.hkv, c.d, 3, device)
    args = {"Q": q, "K": k, "V": v, "cu_seqlens_q": cu_q, "cu_seqlens_k": cu_k}
    used = None
    if c.used:
        used = torch.tensor(c.used, dtype=torch.int32, device=device)
        args["seqused_k"] = used
    args["O"] = torch.full((total_q, c.h, c.d), float("nan"), device=device).bfloat16()
    if c.lse:
        args["L"] = torch.full((c.h, total_q), float("nan"), device=device)
    ref_o, ref_l = varlen_attention(q, k, v, cu_q, cu_k, c.causal, used)
    return args, ref_o, ref_l, sum(c.lq)


def check(c: Case, args, ref_o, ref_l, rows: int) -> None:
    o = args["O"].float()
    assert not o[:rows].isnan().any(), "O has unwritten (NaN) rows"
    assert o[rows:].isnan().all(), "rows past the last sequence were written"
    err = ((o[:rows] - ref_o[:rows]).norm() / ref_o[:rows].norm()).item()
    assert err < TOL, f"||O - ref|| / ||ref|| = {err:.3g}"
    if c.lse:
        lse, ref = args["L"][:, :rows], ref_l[:, :rows]
        assert args["L"][:, rows:].isnan().all(), "LSE past the last sequence was written"
        seen = torch.isfinite(ref)
        assert torch.equal(torch.isinf(lse) & (lse > 0), ~seen), "LSE is +inf where no key is seen"
        if seen.any():
            gap = (lse - ref)[seen].abs().max().item()
            assert gap < LSE_TOL, f"max |LSE - ref| = {gap:.3g}"


def interpret(c: Case, args, target="sm_90a") -> None:
    fn = choreo_py.interpret(PATH, defines=c.defines, target=target).flash_atten_varlen
    fn(*args.values())


@pytest.mark.parametrize("name", list(CASES))
def test_interpreter_matches_torch(name):
    c = CASES[name]
    args, ref_o, ref_l, rows = inputs(c)
    interpret(c, args)
    check(c, args, ref_o, ref_l, rows)


@pytest.mark.parametrize("name", ["gqa_causal", "seqused_k"])
def test_interpreter_with_sm100a_owners(name):
    """The same program with sm_100a's accumulator owners (one or two threads a row)."""
    c = CASES[name]
    args, ref_o, ref_l, rows = inputs(c)
    interpret(c, args, target="sm_100a")
    check(c, args, ref_o, ref_l, rows)


def test_rows_without_keys_are_zero():
    """Sequence 1 of causal_q_ne_k has 130 queries and 60 keys: its first 70 rows see no key
    (O = 0, as FlashAttention returns); sequence 2 has no key at all."""
    c = CASES["causal_q_ne_k"]
    args, _, _, _ = inputs(c)
    interpret(c, args)
    o = args["O"].float()
    assert torch.equal(o[37:107], torch.zeros_like(o[37:107]))
    assert o[107:167].abs().sum() > 0
    assert torch.equal(o[167:170], torch.zeros_like(o[167:170]))


def test_each_sequence_sees_only_its_keys():
    """The same packed K / V with the sequences' key ranges swapped (cu_seqlens_k of
    lengths 130, 37, 1 over sequences of 1, 37, 130 queries) differs from the reference
    by O(1): the kernel reads keys at cu_seqlens_k, not at the query offsets."""
    c = CASES["gqa"]
    args, ref_o, ref_l, rows = inputs(c)
    interpret(c, args)
    check(c, args, ref_o, ref_l, rows)
    other = cu_seqlens([130, 37, 1])
    wrong, _ = varlen_attention(args["Q"], args["K"], args["V"], args["cu_seqlens_q"], other)
    assert ((args["O"].float() - wrong).norm() / wrong.norm()) > 0.5


def test_kv_heads_must_divide_heads():
    c = Case((5,), (5,), h=3, hkv=2, lse=False)
    args = {"Q": thd(5, 3, 64, 1, "cpu"), "K": thd(5, 2, 64, 2, "cpu"),
            "V": thd(5, 2, 64, 3, "cpu"), "cu_seqlens_q": cu_seqlens([5]),
            "cu_seqlens_k": cu_seqlens([5]), "O": torch.zeros(5, 3, 64).bfloat16()}
    with pytest.raises(Exception, match="H_KV.*must divide"):
        interpret(c, args)


# ------------------------------------------------------------------ the strict emulator
EMU_CASES = [("sm_90a", "gqa_causal"), ("sm_100a", "gqa_causal"), ("sm_90a", "causal_q_ne_k"),
             ("sm_100a", "padded"), ("sm_90a", "long_keys_causal"), ("sm_100a", "long_keys")]


@pytest.mark.emu
@pytest.mark.parametrize("target,name", EMU_CASES)
def test_emulated_ptx_matches_torch(target, name):
    from choreo_py.emu import EmuStats
    from choreo_py.emu.api import run_spec
    from choreo_py.emu.launch import from_co

    c = CASES[name]
    args, ref_o, ref_l, rows = inputs(c)
    stats = EmuStats()
    run_spec(from_co(PATH, target, defines=c.defines), args, schedule="random", seed=3,
             strict=True, stats=stats)
    check(c, args, ref_o, ref_l, rows)
    assert stats.notes == []


# ------------------------------------------------------------------ ptxas
FORMS = {
    "d64_causal_lse": {"DIM": "64", "CAUSAL": "1", "LSE": "1"},
    "d96_lse": {"DIM": "96", "LSE": "1"},
    "d128": {"DIM": "128"},
    "d128_causal_lse_seqused": {"DIM": "128", "CAUSAL": "1", "LSE": "1", "SEQUSED_K": "1"},
}


@pytest.mark.parametrize("name", list(FORMS))
def test_sm90a_assembles_without_spills(name):
    report = assemble(compile_file(PATH, "ptx", "sm_90a", defines=FORMS[name]), "sm_90a")
    assert re.search(r"\b0 bytes spill stores", report), report


@pytest.mark.parametrize("name", list(FORMS))
def test_sm100a_assembles(name):
    assemble(compile_file(PATH, "ptx", "sm_100a", defines=FORMS[name]), "sm_100a")


def test_partial_tiles_are_stored_by_the_threads():
    """The O and L stores of `.rows<n>`: a full tile (n = 128) is the TMA store of the
    role's first thread; a partial one is predicated st.global by all 256 threads of the
    two consumer warpgroups (the row count compared per access). The Q/K/V loads stay
    TMA loads at the run-time rows cu_seqlens gives."""
    ptx = compile_file(PATH, "ptx", "sm_90a", defines=FORMS["d128_causal_lse_seqused"])
    assert len(re.findall(r"setp\.lt\.s32\s+%part_tile\w*, %rows, 128;", ptx)) == 2
    assert len(re.findall(r"@%part_tile\w* bra\.uni L_rows_threads_\d+;", ptx)) == 2
    stores = re.findall(r"@%is_role_leader cp\.async\.bulk\.tensor\.(\d)d\.global\.shared::cta"
                        r"\.bulk_group \[%tmap_(\w)", ptx)
    assert sorted(stores) == [("2", "L"), ("3", "O"), ("3", "O")]  # O: two 64-column stripes
    assert len(re.findall(r"setp\.lt\.s32\s+%crows\w*, %c[rc]\w*, %rows", ptx)) == 2
    assert re.search(r"@%crows\w* st\.global\.b64", ptx)  # O: 8 bytes an access
    assert re.search(r"@%crows\w* st\.global\.b32", ptx)  # L: one f32 an access
    assert len(re.findall(r"add\.u32 %ce\w*, %ce\w*, 256;", ptx)) == 2  # both warpgroups
    assert len(re.findall(r"cp\.async\.bulk\.tensor\.3d\.shared::cluster\.global", ptx)) == 6


def _bench():
    import sys

    sys.path.insert(0, str(ROOT / "bench"))
    import attention_varlen

    return attention_varlen


def test_the_bench_rows_compile():
    """bench/attention_varlen.py's rows (bench/attention.py --rows varlen) build these
    forms on the H200."""
    for defines in {tuple(sorted(r.defines.items())) for r in _bench().VARLEN_ROWS}:
        assert "st.global" in compile_file(PATH, "ptx", "sm_90a", defines=dict(defines))


def test_the_bench_counts_the_visible_pairs():
    """The bench's TFLOP/s count (its CPU path): pairs() against the masks counted out."""
    bench = _bench()
    r = bench.Row("small", (5, 130, 37), lk=(9, 60, 37), causal=True, used=(9, 50, 20))
    want = 0
    for nq, nk in zip(r.lq, r.used):
        i, j = torch.arange(nq)[:, None], torch.arange(nk)[None, :]
        want += int((j <= i + nk - nq).sum())
    assert bench.pairs(r) == want
    assert bench.pairs(bench.Row("dense", (5, 7), lk=(3, 4))) == 5 * 3 + 7 * 4
    assert len(bench.plan()) == len(bench.VARLEN_ROWS)


# ------------------------------------------------------------------ `tma.copy.rows<n>`
def _kernel(tmp_path, copy: str) -> str:
    path = tmp_path / "rows.co"
    path.write_text(f"""
__co__ void k(global f16[64, 64] A, global f16[64, 64] C, int n) {{
  parallel {{b}} by [1] : block {{
    shared f16[64, 64] a_s;
    {copy}
  }}
}}
""")
    return str(path)


@pytest.mark.parametrize("copy,message", [
    ("tma.copy.rows<n> A => a_s;", "'.rows<n>' bounds a store into global memory"),
    ("tma.copy.rows<1.5f> a_s => C;", "the count of '.rows<n>' must be an integer"),
    ("tma.copy.rows<n, 2> a_s => C;", "'.rows' expects one count"),
    ("f = tma.copy.async.rows<n> a_s => C; wait f;", "'.rows<n>' stores are synchronous"),
])
def test_row_counts_are_checked_with_a_location(tmp_path, capsys, copy, message):
    rc = cli.main(["compile", _kernel(tmp_path, copy), "--target", "sm_90a", "-o",
                   str(tmp_path / "x")])
    err = capsys.readouterr().err
    assert rc == 1 and message in err, err
    assert re.search(r"rows\.co:5:\d+: error: ", err) and "Traceback" not in err, err


ROWS_COPY = "tma.copy A => a_s;\n    tma.copy.rows<n> a_s => C;"


@pytest.mark.parametrize("n", [-3, 0, 1, 37, 64, 100])
def test_the_interpreter_stores_the_first_n_rows(tmp_path, n):
    """`.rows<n>`: rows 0 .. n - 1 of the box (all for n >= 64, none for n <= 0)."""
    a = torch.randn(64, 64).half()
    c = torch.full((64, 64), float("nan")).half()
    choreo_py.interpret(_kernel(tmp_path, ROWS_COPY), target="sm_90a").k(a, c, n)
    m = max(0, min(n, 64))
    assert torch.equal(c[:m], a[:m]) and c[m:].isnan().all()


def test_a_thread_kernel_refuses_the_row_count_by_name(tmp_path, capsys):
    rc = cli.main(["compile", _kernel(tmp_path, ROWS_COPY), "--target", "sm_90a", "-o",
                   str(tmp_path / "x")])
    err = capsys.readouterr().err
    assert rc == 1 and "'tma.copy.rows<n>' in a thread kernel" in err, err
    assert re.search(r"rows\.co:6:5: error: ", err), err


def test_ir_prints_and_reads_back_the_row_count():
    from choreo_py import frontend, sema
    from choreo_py.ir.parse import parse_module
    from choreo_py.ir.printer import print_module

    module = sema.build_module(frontend.parse_file(PATH, defines={"DIM": "64", "LSE": "1"}))
    text = print_module(module)
    assert len(re.findall(r"tma\.store \[leader\] .* => .* \[rows rows\]", text)) == 2
    assert print_module(parse_module(text)) == text


# ------------------------------------------------------------------ on the GPU
def _fa_lengths(n: int, seed: int, lo=1024, hi=8192) -> tuple:
    g = torch.Generator().manual_seed(seed)
    return tuple(int(x) for x in torch.randint(lo, hi + 1, (n,), generator=g))


GPU_CASES = {  # FA-bench shapes: mixed lengths 1k-8k, H = 32, H_KV = 8, D = 128
    "mixed": dict(n=6, seed=1, causal=False),
    "mixed_causal": dict(n=6, seed=2, causal=True),
    "q_ne_k_causal": dict(n=5, seed=3, causal=True, keys=True),
    "seqused_causal": dict(n=4, seed=4, causal=True, used=True),
}


def _gpu_case(n, seed, causal, keys=False, used=False) -> Case:
    lq = _fa_lengths(n, seed)
    lk = _fa_lengths(n, seed + 100) if keys or used else lq
    u = tuple(min(x, y) for x, y in zip(_fa_lengths(n, seed + 200), lk)) if used else ()
    return Case(lq, lk, h=32, hkv=8, d=128, causal=causal, used=u, pad=7)


@pytest.mark.gpu
@pytest.mark.parametrize("name", list(GPU_CASES))
def test_gpu_matches_torch(name):
    torch.backends.cuda.matmul.allow_tf32 = False
    c = _gpu_case(**GPU_CASES[name])
    args, ref_o, ref_l, rows = inputs(c, device="cuda")
    fn = choreo_py.load(PATH, target="sm_90a", defines=c.defines)
    fn(*args.values())
    torch.cuda.synchronize()
    check(c, args, ref_o, ref_l, rows)
