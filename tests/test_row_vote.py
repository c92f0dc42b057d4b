"""FA4's conditional rescale: a row-guarded update of a block accumulator
(examples/gemm_block_acc_cond_rescale.co) is lowered on sm_100a with a warp vote.

Pass tmem-row-vote marks the apply (`--emit ir` prints `warp-vote`); the PTX votes
(`vote.sync.any.pred`) on the row guard and branches warp-uniformly past the tile's
tcgen05.ld / arithmetic / tcgen05.st. The emulator proves the branch both ways: with
rows that never exceed the threshold no warp loads the tile in the guarded apply, with
rows that always do every warp does, and with only the first 32 rows of each tile large,
exactly warp 0 of the correction role does; in each case the result matches torch. An
apply whose guard reads the column (the mask of the last KV tile) is not marked, and
sm_90a (registers) lowers the same guard as a per-thread select."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

import choreo_py
from choreo_py.driver import compile_file
from block_helpers import assert_no_spills

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


def _emulate_counting(tensors: dict) -> int:
    """Runs the sm_100a PTX in the strict emulator; the number of warp executions of the
    tcgen05.ld instructions the vote guards (between it and the store's wait)."""
    from choreo_py.emu.launch import bind, from_co
    from choreo_py.emu.machine import Machine
    from choreo_py.emu.ptx_parse import parse_ptx
    import numpy as np

    spec = from_co(str(EXAMPLE), "sm_100a")
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
