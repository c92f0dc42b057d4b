"""The block's MMA operands (`frag bf16[M, K] p : block;`), examples/gemm_block_p.co: a
reader role writes P into tensor memory, and the MMA role's next MMA reads it as its A
operand (tcgen05.mma with A from tensor memory), ordered by events both ways.

The interpreter matches torch and reports an MMA read of P that no event orders against
the writer; sm_100a stores P with tcgen05.st, waits it, fences and meets before the
trigger, and the MMA thread fences after its wait; ptxas accepts it with no spills; the
strict emulator matches torch under four schedules and three shapes, and reports the PTX
without the wait; sm_90a refuses the fragment by name."""
from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
import torch

import choreo_py
from choreo_py import cli
from choreo_py.driver import compile_file
from block_helpers import assert_no_spills, emulate_strict

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "gemm_block_p.co"
SHAPES = [(128, 128, 256), (192, 128, 384), (256, 100, 200)]  # partial M, N and K tiles


def _inputs(m, n, k, seed=5):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(m, k, generator=g).to(torch.bfloat16)
    b = torch.randn(n, k, generator=g).to(torch.bfloat16)
    return a, b, torch.full((m, n), float("nan")).to(torch.bfloat16)


def _reference(a, b, bk=128, bn=128):
    """Per K step: S += A_k B_k^T (f32), P = bf16(S / 16), O += P B_k^T; B padded to BN
    rows (the one N tile) and every K step to BK columns, as the TMA loads are."""
    m, k = a.shape
    kp = -(-k // bk) * bk
    ap = torch.zeros(m, kp, dtype=torch.float64)
    ap[:, :k] = a.double()
    bp = torch.zeros(bn, kp, dtype=torch.float64)
    bp[:b.shape[0], :k] = b.double()
    s = torch.zeros(m, bn, dtype=torch.float32)
    o = torch.zeros(m, bn, dtype=torch.float64)
    for k0 in range(0, kp, bk):
        bk_ = bp[:, k0:k0 + bk]
        s += (ap[:, k0:k0 + bk] @ bk_.T).float()
        o += (s * 0.0625).to(torch.bfloat16).double() @ bk_.T
    return o[:, :b.shape[0]]


def _close(c, a, b) -> bool:
    ref = _reference(a, b)
    err = (c.double() - ref).abs().max()
    return not c.float().isnan().any() and bool(err <= ref.abs().max() * 2 ** -6 + 1e-2)


def _variant(tmp_path, old: str, new: str) -> Path:
    src = EXAMPLE.read_text()
    assert old in src
    path = tmp_path / "v.co"
    path.write_text(src.replace(old, new))
    return path


def test_the_ir_marks_the_operand_and_plans_its_columns():
    text = compile_file(str(EXAMPLE), emit="ir", target="sm_100a")
    assert "frag p: bf16[128, 128] layout=operand : block" in text
    assert "tmem p[0]: operand layout=D lanes=0+:128 cols=256+:64" in text


def test_the_reference_depends_on_p():
    a, b, _ = _inputs(128, 128, 256)
    assert not _close((a.double() @ b.double().T).to(torch.bfloat16), a, b)


@pytest.mark.parametrize("shape, schedule, seed", [(SHAPES[0], "round_robin", 0),
                                                   (SHAPES[1], "random", 1),
                                                   (SHAPES[2], "random", 2)])
def test_interpreter_matches_torch(shape, schedule, seed):
    a, b, c = _inputs(*shape)
    choreo_py.interpret(str(EXAMPLE), dict(A=a, B=b, C=c), schedule=schedule, seed=seed,
                        target="sm_100a")
    assert _close(c, a, b)


def test_interpreter_reports_an_mma_read_of_p_not_ordered_after_its_write(tmp_path):
    path = _variant(tmp_path, "          wait p_full.at(order);          // P is in tensor "
                    "memory\n", "")
    a, b, c = _inputs(128, 128, 256)
    with pytest.raises(choreo_py.ChoreoError, match=r"data race on fragment 'p' \(shared by "
                       r"the block's roles\)"):
        choreo_py.interpret(str(path), dict(A=a, B=b, C=c), target="sm_100a")


@pytest.mark.parametrize("old, new, message", [
    ("    frag bf16[BM, BN] p : block;", "    frag bf16[BM, BN] p : group-4;",
     r"v\.co:25:23: error: a fragment can be declared ': block' \(one tile the block's roles "
     r"share\), not ': group-4'"),
    ("    frag bf16[BM, BN] p : block;\n", "",
     None),
])
def test_rules(tmp_path, capsys, old, new, message):
    if message is None:  # declared inside the thread-group level
        path = _variant(tmp_path, old, new)
        path.write_text(path.read_text().replace(
            "      inthreads.async (r == 0) {",
            "      frag bf16[BM, BN] p : block;\n      inthreads.async (r == 0) {", 1))
        message = (r"v\.co:27:25: error: a ': block' fragment is declared in a 'parallel \.\.\. "
                   r": block' body, before its thread-group level")
    else:
        path = _variant(tmp_path, old, new)
    rc = cli.main(["compile", str(path), "-o", str(tmp_path / "x.py")])
    err = capsys.readouterr().err
    assert rc == 1 and re.search(message, err), err


def test_sm90a_refuses_it_by_name(tmp_path, capsys):
    src = EXAMPLE.read_text().replace("    frag bf16[BM, BN] p : block;\n", "").replace(
        "    s = mma.fill.f32 0.0f : block;\n",
        "    frag bf16[BM, BN] p : block;\n    s = mma.fill.f32 0.0f : block;\n")
    path = tmp_path / "first.co"
    path.write_text(src)
    rc = cli.main(["compile", str(path), "--target", "sm_90a", "-o", str(tmp_path / "x.py")])
    assert rc == 1
    assert "first.co:23:23: error: the ': block' fragment 'p' (one tile the block's roles " \
        "share; wgmma reads a register A operand from the warpgroup that issues it) is not " \
        "lowered for sm_90a yet" in capsys.readouterr().err


def test_sm100a_refuses_a_block_fragment_that_is_not_an_operand(tmp_path, capsys):
    path = _variant(tmp_path, "    frag bf16[BM, BN] p : block;\n",
                    "    frag bf16[BM, BN] p : block;\n    frag f32[BM] m : block;\n")
    rc = cli.main(["compile", str(path), "--target", "sm_100a", "-o", str(tmp_path / "x.py")])
    assert rc == 1
    assert "v.co:26:18: error: the ': block' fragment 'm' that is not an MMA's A operand is " \
        "not lowered for sm_100a yet" in capsys.readouterr().err


# ---------------------------------------------------------------- sm_100a

@pytest.fixture(scope="module")
def ptx() -> str:
    return compile_file(str(EXAMPLE), emit="ptx", target="sm_100a")


def test_ptx_orders_p_before_the_mma_that_reads_it(ptx):
    store = ptx.index("tcgen05.st.sync.aligned.32x32b.x64.b32 [%p_rows]")
    rest = ptx[store:]
    seq = ["tcgen05.wait::st.sync.aligned;", "tcgen05.fence::before_thread_sync;",
           "bar.sync %inst_bar, 128;", "@%is_inst_leader mbarrier.arrive"]
    at = [rest.index(x) for x in seq]
    assert at == sorted(at), at
    waited = ptx.index("%p_full_phase;", ptx.index("mbarrier.try_wait"))
    fence = ptx.index("tcgen05.fence::after_thread_sync;", waited)
    assert fence < ptx.index("tcgen05.mma.cta_group::1.kind::f16 [%o_tmem], [%p_tmem]", waited)


@pytest.mark.ptxas
def test_ptxas_accepts_it_without_spills(ptx):
    assert_no_spills(ptx)


@pytest.mark.emu
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("schedule", ["round_robin", "reverse", "greedy", "random"])
def test_emulator_matches_torch_strict(shape, schedule):
    a, b, c = _inputs(*shape)
    notes = emulate_strict(EXAMPLE, dict(A=a, B=b, C=c), schedule)
    assert _close(c, a, b)
    assert notes == []


@pytest.mark.emu
def test_emulator_reports_p_without_its_wait():
    from choreo_py.emu import EmuError
    from choreo_py.emu.api import run_spec
    from choreo_py.emu.launch import from_co

    spec = from_co(str(EXAMPLE), "sm_100a")
    at = spec.ptx.index("tcgen05.st.sync.aligned.32x32b.x64.b32 [%p_rows]")
    broken = spec.ptx[:at] + spec.ptx[at:].replace("tcgen05.wait::st.sync.aligned;", "", 1)
    a, b, c = _inputs(128, 128, 256)
    with pytest.raises(EmuError, match=r"without tcgen05\.wait::st before it"):
        run_spec(dataclasses.replace(spec, ptx=broken), dict(A=a, B=b, C=c),
                 schedule="random", seed=1, strict=True)
