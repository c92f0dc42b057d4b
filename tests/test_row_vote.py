"""FA4's conditional rescale: a row-guarded update of a block accumulator
(examples/gemm_block_acc_cond_rescale.co) is lowered on sm_100a with a warp vote.

Pass tmem-row-vote marks the apply (`--emit ir` prints `warp-vote`); the PTX votes
(`vote.sync.any.pred`) on the row guard and branches warp-uniformly past the tile's
tcgen05.ld / arithmetic / tcgen05.st. The emulator proves the branch both ways: with
rows that never exceed the threshold no warp loads the tile in the guarded apply, with
rows that always do every warp does, and with only the first 32 rows of each tile large,
exactly warp 0 of the correction role does; in each case the result matches torch. An
apply whose guard reads the column (the mask of the last KV tile) is not marked, and
sm_90a (registers) lowers the same guard as a per-thread select.

FA4's form in attention: the one-tile Blackwell FA (tests/co/fa_blackwell_one_tile.co, the
example before its rewrite) with the softmax role keeping
the row max unless it grows by more than 8 (log2 units) and the O update guarded by
`scale.at(i) != 1.0f` (FA4_SOFTMAX / FA4_CORRECTION below, the code the example's roles
take): ptxas accepts it with no spills, and the emulator (strict) matches SDPA, every warp
loading O at the first KV step only (the max moves from -inf) unless a later tile's
scores jump."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

import choreo_py
from choreo_py.driver import compile_file
from block_helpers import assert_no_spills
from fa_helpers import fa_inputs, sdpa_full

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "gemm_block_acc_cond_rescale.co"


def _inputs(m, n, k, big_rows, seed=7):
    """A's rows scaled so that a row's max stays under 8 (x 0.05) or passes it (x 1)."""
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(m, k, generator=g)
    scale = torch.full((m, 1), 0.05)
    scale[big_rows] = 1.0
    a = (a * scale).to(torch.bfloat16)
    b = torch.randn(n, k, generator=g).to(torch.bfloat16)
    return a, b, torch.full((m, n), float("nan")).to(torch.bfloat16)


def _close(c, a, b) -> bool:
    from docs.refs import gemm_cond_rescaled_rows
    ref = gemm_cond_rescaled_rows(a.double(), b.double())
    err = (c.double() - ref).abs().max()
    return not c.float().isnan().any() and bool(err <= ref.abs().max() * 2 ** -7 + 1e-3)


def _emulate_counting(tensors: dict, path: Path = EXAMPLE) -> int:
    """Runs the sm_100a PTX in the strict emulator; the number of warp executions of the
    tcgen05.ld instructions the vote guards (between it and the store's wait)."""
    from choreo_py.emu.launch import bind, from_co
    from choreo_py.emu.machine import Machine
    from choreo_py.emu.ptx_parse import parse_ptx
    import numpy as np

    spec = from_co(str(path), "sm_100a")
    kernel = parse_ptx(spec.ptx)
    launch, _ = bind(spec, tensors, kernel.params, None)
    m = Machine(kernel, launch, schedule="random", seed=2, strict=True)
    texts = [i.text for i in m.prog]
    start = next(n for n, t in enumerate(texts) if t.startswith("vote.sync.any.pred"))
    end = next(n for n, t in enumerate(texts) if n > start and t.startswith("tcgen05.wait::st"))
    loads = [i for i in m.prog[start:end] if i.text.startswith("tcgen05.ld")]
    assert loads
    count = [0]
    for inst in loads:
        def counted(w, fn=inst.fn):
            count[0] += 1
            return fn(w)
        inst.fn = counted
    with np.errstate(all="ignore"):
        m.run()
    return count[0] // len(loads)


def test_the_pass_marks_the_row_guard_and_not_a_column_guard(tmp_path):
    ir_text = compile_file(str(EXAMPLE), emit="ir", target="sm_100a")
    assert "apply (i, j) in acc[128, 128] warp-vote {" in ir_text
    col = tmp_path / "col.co"
    col.write_text(EXAMPLE.read_text().replace("if (row_max.at(i) > 8.0f)",
                                               "if (row_max.at(i) > 8.0f && j < 64)"))
    ir_text = compile_file(str(col), emit="ir", target="sm_100a")
    assert "apply (i, j) in acc[128, 128] {" in ir_text and "warp-vote" not in ir_text
    ptx = compile_file(str(col), emit="ptx", target="sm_100a")
    assert "vote.sync" not in ptx


def test_ptx_votes_then_skips_the_tmem_round_trip():
    ptx = compile_file(str(EXAMPLE), emit="ptx", target="sm_100a")
    vote = ptx.index("vote.sync.any.pred %any_row, ")
    seq = ["@!%any_row bra.uni L_row_vote_skip_0;", "tcgen05.ld.sync.aligned", "div.full.f32",
           "selp.f32", "tcgen05.st.sync.aligned", "tcgen05.wait::st.sync.aligned;",
           "L_row_vote_skip_0:"]
    at = [ptx.index(x, vote) for x in seq]
    assert at == sorted(at), at
    # the guard is evaluated once per thread, before the vote (it reads the row max only)
    assert ptx.count("vote.sync.any.pred") == 1
    # between the vote and its label the tile moves 8 columns at a time, as any reader
    # role's elementwise apply (the whole 128-column tile at once spilled at 64 registers)
    voted = ptx[vote:ptx.index("L_row_vote_skip_0:", vote)]
    assert len(re.findall(r"tcgen05\.ld\.sync\.aligned\.32x32b\.x8\.b32", voted)) == 16
    assert len(re.findall(r"tcgen05\.st\.sync\.aligned\.32x32b\.x8\.b32", voted)) == 16
    assert not re.search(r"tcgen05\.(ld|st)\.sync\.aligned\.32x32b\.x(16|32|64|128)", voted)


@pytest.mark.ptxas
def test_ptxas_accepts_it_without_spills():
    assert_no_spills(compile_file(str(EXAMPLE), emit="ptx", target="sm_100a"))


def test_interpreter_matches_torch():
    a, b, c = _inputs(256, 128, 192, slice(0, 32))
    choreo_py.interpret(str(EXAMPLE), dict(A=a, B=b, C=c), target="sm_100a")
    assert _close(c, a, b)


@pytest.mark.emu
@pytest.mark.parametrize("big_rows, per_step", [
    (slice(0, 0), 0),        # no row passes the threshold: every warp skips
    (slice(0, 256), 4),      # every row does: every warp loads, rescales, stores
    ([0, 128 + 40], 1),      # one row of warp 0 (tile 0) / warp 1 (tile 1): one warp each
])
def test_emulator_takes_and_skips_the_branch(big_rows, per_step):
    m, n, k = 256, 128, 192
    a, b, c = _inputs(m, n, k, big_rows)
    loads = _emulate_counting(dict(A=a, B=b, C=c))
    assert loads == per_step * (m // 128) * (k // 64)  # warps per tile x tiles x K steps
    assert _close(c, a, b)


def test_the_reference_is_not_a_plain_gemm():
    """The guarded rows change the result (a kernel that skipped every warp would fail)."""
    a, b, _ = _inputs(128, 128, 192, slice(0, 128))
    assert not _close((a.double() @ b.double().T).to(torch.bfloat16), a, b)


# ---------------------------------------------------------------- FA4's conditional rescale

FA = ROOT / "tests" / "co" / "fa_blackwell_one_tile.co"  # the example before its rewrite
FA_SOFTMAX = (
    "          copy(m_prev, m);\n"
    "          reduce_max(m, s, 1);\n"
    "          apply {i} in m.span {\n"
    "            m.at(i) = __max(m.at(i), m_prev.at(i));\n"
    "            scale.at(i) = __exp2f(m_prev.at(i) * 0.12751743f - m.at(i) * 0.12751743f);\n"
    "            l.at(i) = l.at(i) * scale.at(i);\n"
    "          }\n",
    "          reduce_max(m_new, s, 1);\n"
    "          apply {i} in m.span {           // keep m unless the max grows by > 8 (log2)\n"
    "            scale.at(i) = 1.0f;\n"
    "            if (m_new.at(i) * 0.12751743f - m.at(i) * 0.12751743f > 8.0f) {\n"
    "              scale.at(i) = __exp2f(m.at(i) * 0.12751743f - m_new.at(i) * 0.12751743f);\n"
    "              m.at(i) = m_new.at(i);\n"
    "            }\n"
    "            l.at(i) = l.at(i) * scale.at(i);\n"
    "          }\n")
FA4_CORRECTION = (
    "          apply {i, j} in o.span\n"
    "            o.at(i, j) = o.at(i, j) * scale.at(i);\n",
    "          apply {i, j} in o.span {        // only the rows whose m moved: a warp vote\n"
    "            if (scale.at(i) != 1.0f)\n"
    "              o.at(i, j) = o.at(i, j) * scale.at(i);\n"
    "          }\n")


def _fa4(tmp_path) -> Path:
    src = FA.read_text()
    for old, new in [("        frag f32[BLOCK_M] m_prev;\n", "        frag f32[BLOCK_M] m_new;\n"),
                     FA_SOFTMAX, FA4_CORRECTION]:
        assert src.count(old) == 1, old
        src = src.replace(old, new)
    out = tmp_path / "fa4.co"
    out.write_text(src)
    return out


def test_fa4_form_is_voted_and_assembles(tmp_path):
    path = _fa4(tmp_path)
    ir_text = compile_file(str(path), emit="ir", target="sm_100a")
    assert [l.strip() for l in ir_text.splitlines() if "warp-vote" in l] == \
        ["apply (i, j) in o[128, 128] warp-vote {"]
    ptx = compile_file(str(path), emit="ptx", target="sm_100a")
    assert ptx.count("vote.sync.any.pred") == 1
    assert_no_spills(ptx)


@pytest.mark.emu
@pytest.mark.parametrize("jump", [False, True])
def test_fa4_form_matches_sdpa_and_skips_after_the_first_step(tmp_path, jump):
    from fa_helpers import rel
    q, k, v, o = fa_inputs(256, 384)
    if jump:  # a key of KV tile 1 along query 3, scaled: rows' maxima jump at step 1
        k[:, 128 + 5, 0, :] = (q[:, 3, 0, :].float() * 40).to(torch.bfloat16)
    loads = _emulate_counting(dict(Q=q, K=k, V=v, O=o), _fa4(tmp_path))
    first_step = 4 * 2  # 4 warps x 2 query tiles: m moves from -inf
    assert loads > first_step if jump else loads == first_step
    assert not o.float().isnan().any() and rel(o, sdpa_full(q, k, v)) < 5e-3


def test_interpreter_runs_the_fa4_form(tmp_path):
    from fa_helpers import rel
    q, k, v, o = fa_inputs(200, 330)
    choreo_py.interpret(str(_fa4(tmp_path)), dict(Q=q, K=k, V=v, O=o), target="sm_100a")
    assert rel(o, sdpa_full(q, k, v)) < 5e-3


# ---------------------------------------------------------------- sm_90a: registers

SM90_CORRECTION = (
    "          apply {i, j} in acc_o.span\n"
    "            acc_o.at(i, j) = acc_o.at(i, j) * scores_scale.at(i);\n",
    "          apply {i, j} in acc_o.span {\n"
    "            if (scores_scale.at(i) != 1.0f)\n"
    "              acc_o.at(i, j) = acc_o.at(i, j) * scores_scale.at(i);\n"
    "          }\n")


@pytest.mark.emu
def test_sm90a_lowers_the_row_guard_as_a_select(tmp_path):
    """wgmma's accumulator is registers: the guarded rescale of examples/flash_atten.co is a
    per-thread select, no vote; the emulator still matches SDPA."""
    from fa_helpers import bshd, rel
    src = (ROOT / "examples" / "flash_atten.co").read_text()
    assert src.count(SM90_CORRECTION[0]) == 1
    path = tmp_path / "fa90.co"
    path.write_text(src.replace(*SM90_CORRECTION))
    assert "warp-vote" not in compile_file(str(path), emit="ir", target="sm_90a")
    ptx = compile_file(str(path), emit="ptx", target="sm_90a")
    assert "vote.sync" not in ptx and "selp.f32 %acc_o" in ptx
    q, k, v = bshd(1, 128, 1, 1), bshd(1, 256, 1, 2), bshd(1, 256, 1, 3)
    o = torch.full_like(q, float("nan"))
    choreo_py.emulate(str(path), dict(Q=q, K=k, V=v, O=o), target="sm_90a", schedule="random",
                      seed=1)
    assert not o.float().isnan().any() and rel(o, sdpa_full(q, k, v)) < 5e-3
