"""A fresh block accumulator per loop step in the MMA role (examples/gemm_block_fresh_s.co):
`mma.fill s, 0.0f;` right before the MMA into s is that MMA's first k-step with
enable-input-d false (no store to tensor memory), and the role stays issue-only (one
thread). A fill the lowering cannot fold (a trigger between it and the MMA, or a fill in
a reader role) is refused by name. The interpreter and the strict emulator (three
schedules, two shapes, one with partial N and K tiles) match torch; ptxas accepts the PTX
with no spills."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

import choreo_py
from choreo_py import cli
from choreo_py.driver import compile_file
from block_helpers import assert_no_spills, emulate_strict

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "gemm_block_fresh_s.co"
SHAPES = [(128, 128, 256), (256, 100, 200)]  # one M tile; two, with partial N and K tiles
FILL = "          mma.fill s, 0.0f;               // S = A_k B_k^T: this step's alone\n"


def _inputs(m, n, k, seed=5):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(m, k, generator=g).to(torch.bfloat16)
    b = torch.randn(n, k, generator=g).to(torch.bfloat16)
    return a, b, torch.full((m, n), float("nan")).to(torch.bfloat16)


def _reference(a, b, fresh=True, bk=128, bn=128):
    """Per K step: S = A_k B_k^T (or S += with fresh=False), P = bf16(S / 16),
    O += P B_k^T; B padded to BN rows and every K step to BK columns, as TMA loads."""
    m, k = a.shape
    kp = -(-k // bk) * bk
    ap = torch.zeros(m, kp, dtype=torch.float64)
    ap[:, :k] = a.double()
    bp = torch.zeros(bn, kp, dtype=torch.float64)
    bp[:b.shape[0], :k] = b.double()
    s = torch.zeros(m, bn, dtype=torch.float32)
    o = torch.zeros(m, bn, dtype=torch.float64)
    for k0 in range(0, kp, bk):
        step = (ap[:, k0:k0 + bk] @ bp[:, k0:k0 + bk].T).float()
        s = step if fresh else s + step
        o += (s * 0.0625).to(torch.bfloat16).double() @ bp[:, k0:k0 + bk].T
    return o[:, :b.shape[0]]


def _close(c, ref) -> bool:
    err = (c.double() - ref).abs().max()
    return not c.float().isnan().any() and bool(err <= ref.abs().max() * 2 ** -6 + 1e-2)


def test_the_reference_depends_on_the_fresh_s():
    a, b, _ = _inputs(128, 128, 256)
    assert not _close(_reference(a, b, fresh=False).to(torch.bfloat16), _reference(a, b))


@pytest.fixture(scope="module")
def ptx() -> str:
    return compile_file(str(EXAMPLE), emit="ptx", target="sm_100a")


def _mma_role(ptx: str) -> str:
    start = ptx.index("setp.eq.u32 %in_role_2")
    return ptx[start:ptx.index("L_skip_role_1:", start)]


def test_the_fill_is_the_first_k_steps_enable_input_d(ptx):
    role = _mma_role(ptx)
    assert "setp.ne.u32 %not_issuer_2, %r_tid, 0;" in role  # one thread runs it
    assert "is_inst_leader" not in role
    assert "tcgen05.st" not in role
    s_mmas = re.findall(r"tcgen05\.mma\.cta_group::1\.kind::f16 \[%s_tmem\].*, (%\w+);", role)
    assert s_mmas == ["%overwrite"] + ["%accumulate"] * 7, s_mmas  # 128 / 16 k-steps
    assert "mov.pred %overwrite, 0;" in role


@pytest.mark.ptxas
def test_ptxas_accepts_it_without_spills(ptx):
    assert_no_spills(ptx)


@pytest.mark.parametrize("shape", SHAPES)
def test_interpreter_matches_torch(shape):
    a, b, c = _inputs(*shape)
    choreo_py.interpret(str(EXAMPLE), dict(A=a, B=b, C=c), target="sm_100a")
    assert _close(c, _reference(a, b))


@pytest.mark.emu
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("schedule", ["round_robin", "reverse", "random"])
def test_emulator_matches_torch_strict(shape, schedule):
    a, b, c = _inputs(*shape)
    assert emulate_strict(EXAMPLE, dict(A=a, B=b, C=c), schedule) == []
    assert _close(c, _reference(a, b))


def _refused(tmp_path, capsys, src: str) -> str:
    path = tmp_path / "v.co"
    path.write_text(src)
    assert cli.main(["compile", str(path), "--target", "sm_100a",
                     "-o", str(tmp_path / "x.py")]) == 1
    return capsys.readouterr().err


def test_a_fill_published_before_its_mma_is_refused(tmp_path, capsys):
    """A trigger between the fill and the MMA could hand the tile, zeros expected, to
    another role: the fill does not fold, and a fill kept in a role is refused."""
    src = EXAMPLE.read_text()
    assert FILL in src
    src = src.replace("o_done;\n", "o_done, zeroed[1];\n", 1).replace(
        FILL, "          mma.fill s, 0.0f;\n          trigger zeroed.at(order);\n").replace(
        "          wait s_full.at(order);\n",
        "          wait s_full.at(order);\n          wait zeroed.at(order);\n")
    err = _refused(tmp_path, capsys, src)
    assert "v.co:44:11: error: filling the block's accumulator 's' inside a role is not " \
        "lowered for sm_100a yet" in err


def test_a_fill_in_a_reader_role_is_refused(tmp_path, capsys):
    src = EXAMPLE.read_text().replace("          wait s_full.at(order);\n",
                                      "          wait s_full.at(order);\n"
                                      "          mma.fill s, 0.0f;\n")
    err = _refused(tmp_path, capsys, src)
    assert "v.co:60:11: error: filling the block's accumulator 's' inside a role is not " \
        "lowered for sm_100a yet" in err
