"""A reader role that writes the block's accumulator (examples/gemm_block_acc_rescale.co):
a correction role rescales the rows of the one tensor-memory tile in place between the MMA
role's MMAs, ordered both ways by events.

The interpreter matches torch and reports a write the events do not order against an MMA;
sm_100a lowers the write as tcgen05.ld / compute / tcgen05.st, then tcgen05.wait::st,
tcgen05.fence::before_thread_sync and the role's barrier before its one thread triggers, and
the MMA role fences (after_thread_sync) after its wait before the next tcgen05.mma; ptxas
accepts it with no spills; the PTX emulator in strict mode matches torch under every
schedule and several shapes, and reports the same PTX without the wait or the fence;
sm_90a refuses it by name."""
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
EXAMPLE = ROOT / "examples" / "gemm_block_acc_rescale.co"
SHAPES = [(128, 128, 128), (192, 160, 96), (256, 256, 320)]  # partial M, N and K tiles too


def _inputs(m, n, k, seed=5):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(m, k, generator=g).to(torch.bfloat16)
    b = torch.randn(n, k, generator=g).to(torch.bfloat16)
    return a, b, torch.full((m, n), float("nan")).to(torch.bfloat16)


def _reference(a, b, bk=64, bn=128):
    """After each K step's MMA, each row of each BN-wide tile is divided by
    max(its largest element, 1) (float64)."""
    out = torch.zeros(a.shape[0], b.shape[0], dtype=torch.float64)
    for k0 in range(0, a.shape[1], bk):
        out += a[:, k0:k0 + bk].double() @ b[:, k0:k0 + bk].double().T
        for n0 in range(0, out.shape[1], bn):
            t = out[:, n0:n0 + bn]
            t /= t.amax(dim=1, keepdim=True).clamp(min=1)
    return out


def _close(c, a, b) -> bool:
    ref = _reference(a, b)
    err = (c.double() - ref).abs().max()
    return not c.float().isnan().any() and bool(err <= ref.abs().max() * 2 ** -7 + 1e-3)


def _variant(tmp_path, old: str, new: str) -> Path:
    src = EXAMPLE.read_text()
    assert old in src
    path = tmp_path / "v.co"
    path.write_text(src.replace(old, new))
    return path


def test_the_reference_is_not_a_plain_gemm():
    """The rescaling changes the result (a kernel that skipped it would fail _close)."""
    a, b, _ = _inputs(128, 128, 192)
    assert not _close((a.double() @ b.double().T).to(torch.bfloat16), a, b)


# ---------------------------------------------------------------- the interpreter

@pytest.mark.parametrize("shape, schedule, seed", [(SHAPES[0], "round_robin", 0),
                                                   (SHAPES[1], "random", 1),
                                                   (SHAPES[2], "random", 2)])
def test_interpreter_matches_torch(shape, schedule, seed):
    a, b, c = _inputs(*shape)
    choreo_py.interpret(str(EXAMPLE), dict(A=a, B=b, C=c), schedule=schedule, seed=seed,
                        target="sm_100a")
    assert _close(c, a, b)


@pytest.mark.parametrize("what, old, new", [
    # two slots of `rescaled` start ready: the second MMA need not wait for the first rescale
    ("the next MMA not ordered after the write",
     "shared event mma_done[1], rescaled[1] = ready;",
     "shared event mma_done[1], rescaled[2] = ready;"),
    # the correction role does not wait for the MMA it rescales
    ("the write not ordered after the MMA", "          wait mma_done.at(order);\n", ""),
])
def test_interpreter_reports_an_unordered_write(tmp_path, what, old, new):
    path = _variant(tmp_path, old, new)
    a, b, c = _inputs(128, 128, 192)
    with pytest.raises(choreo_py.ChoreoError, match=r"data race on fragment 'acc' \(shared by "
                       r"the block's roles\)"):
        choreo_py.interpret(str(path), dict(A=a, B=b, C=c), schedule="round_robin",
                            target="sm_100a")


def test_sm90a_refuses_it_by_name(tmp_path, capsys):
    rc = cli.main(["compile", str(EXAMPLE), "--target", "sm_90a", "-o", str(tmp_path / "x.py")])
    assert rc == 1
    assert "gemm_block_acc_rescale.co:24:5: error: a ': block' accumulator (one tile the " \
        "block's roles share; wgmma accumulates in the registers of the warpgroup that issues " \
        "it) is not lowered for sm_90a yet" in capsys.readouterr().err


# ---------------------------------------------------------------- sm_100a

@pytest.fixture(scope="module")
def ptx() -> str:
    return compile_file(str(EXAMPLE), emit="ptx", target="sm_100a")


def test_ptx_orders_the_write_before_the_next_mma(ptx):
    # the correction role: load, rescale, store back (8 columns at a time: the last piece
    # at column 120), then wait, fence, meet, arrive
    role = ptx.split("div.full.f32", 1)[1]
    seq = ["tcgen05.st.sync.aligned.32x32b.x8.b32 [%acc_rows+120]", "tcgen05.wait::st.sync.aligned;",
           "tcgen05.fence::before_thread_sync;", "bar.sync %inst_bar, 128;",
           "@%is_inst_leader mbarrier.arrive"]
    at = [role.index(x) for x in seq]
    assert at == sorted(at), at
    # the correction role fences after its wait on `mma_done`, before it loads the tile
    waited = ptx.index("%mma_done_phase;", ptx.index("mbarrier.try_wait"))
    assert ptx.index("tcgen05.fence::after_thread_sync;", waited) < \
        ptx.index("tcgen05.ld.sync.aligned", waited)
    # the MMA role: its wait on `rescaled` is followed by fence::after_thread_sync, then the MMA
    mma_role = ptx[:ptx.index("div.full.f32")]
    waited = mma_role.index("%rescaled_phase;")
    after = mma_role.index("tcgen05.fence::after_thread_sync;", waited)
    assert after < mma_role.index("tcgen05.mma.cta_group::1.kind::f16", waited)
    # the issue-only producer touches no tensor memory: no tcgen05 fence of its own
    producer = ptx.split("@%not_issuer bra", 1)[1].split("@%not_issuer_2 bra", 1)[0]
    assert "cp.async.bulk.tensor" in producer and "tcgen05." not in producer


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
@pytest.mark.parametrize("drop, error", [
    ("tcgen05.wait::st.sync.aligned;", "without tcgen05.wait::st before it"),
    ("tcgen05.fence::before_thread_sync;",
     "without tcgen05.fence::before_thread_sync before it|"
     "executed no tcgen05.fence::before_thread_sync between that access and a synchronisation"),
])
def test_emulator_reports_the_write_without_its_ordering(drop, error):
    """Rule 6 of docs/emulator_sm100.md: the correction role's store reaches the next
    tcgen05.mma only through wait::st then fence::before_thread_sync."""
    from choreo_py.emu import EmuError
    from choreo_py.emu.api import run_spec
    from choreo_py.emu.launch import from_co

    spec = from_co(str(EXAMPLE), "sm_100a")
    at = spec.ptx.index("tcgen05.st.sync.aligned.32x32b.x8.b32 [%acc_rows+120]")
    broken = spec.ptx[:at] + spec.ptx[at:].replace(drop, "", 1)
    assert broken != spec.ptx
    a, b, c = _inputs(128, 128, 128)
    pattern = "|".join(re.escape(e) for e in error.split("|"))
    with pytest.raises(EmuError, match=pattern):
        run_spec(dataclasses.replace(spec, ptx=broken), dict(A=a, B=b, C=c),
                 schedule="random", seed=1, strict=True)


def test_a_store_is_waited_before_the_role_loads_the_tile_again(tmp_path):
    """Two writes in a row: the second apply reloads the tile, after the first one's
    tcgen05.st was waited (a thread's tcgen05.ld is not ordered after its own tcgen05.st);
    the program still matches torch in the emulator."""
    old = "          trigger rescaled.at(order++);"
    path = _variant(tmp_path, old, "          apply {i, j} in acc.span\n"
                    "            acc.at(i, j) = acc.at(i, j) * 1.0f;\n" + old)
    ptx = compile_file(str(path), emit="ptx", target="sm_100a")
    role = ptx.split("div.full.f32", 1)[1]
    first_store = role.index("tcgen05.st.sync.aligned")
    # each apply moves the tile 8 columns at a time: the reload is the second apply's
    # load of columns 0-7, after the first apply's last piece was stored
    reload = role.index("tcgen05.ld.sync.aligned.32x32b.x8.b32 {%acc0,", first_store)
    last_store = role.rindex("tcgen05.st.sync.aligned", 0, reload)
    assert "tcgen05.wait::st.sync.aligned;" in role[last_store:reload]
    from choreo_py.emu.api import run_spec
    from choreo_py.emu.launch import from_co
    a, b, c = _inputs(128, 128, 192)
    run_spec(from_co(str(path), "sm_100a"), dict(A=a, B=b, C=c), schedule="random", seed=3,
             strict=True)
    assert _close(c, a, b)


def test_a_write_alone_races_with_an_unordered_mma(tmp_path):
    """A correction that only writes the tile (no read first) is checked as a write: with two
    `rescaled` slots starting ready, the second MMA is not ordered after it."""
    src = EXAMPLE.read_text().replace("          reduce_max(row_max, acc, 1);\n", "").replace(
        "acc.at(i, j) = acc.at(i, j) / __max(row_max.at(i), 1.0f);", "acc.at(i, j) = 0.5f;")
    ordered = tmp_path / "ordered.co"
    ordered.write_text(src)
    a, b, c = _inputs(128, 128, 192)
    choreo_py.interpret(str(ordered), dict(A=a, B=b, C=c), target="sm_100a")
    racy = tmp_path / "racy.co"
    racy.write_text(src.replace("rescaled[1] = ready;", "rescaled[2] = ready;"))
    with pytest.raises(choreo_py.ChoreoError, match=r"data race on fragment 'acc' \(shared by "
                       r"the block's roles\): this statement writes it while the write by "
                       r"mma\.row\.row 'step'"):
        choreo_py.interpret(str(racy), dict(A=a, B=b, C=c), target="sm_100a")


@pytest.mark.emu
@pytest.mark.parametrize("shape", [(128, 128, 256), (192, 160, 160)])
def test_a_conditional_correction(tmp_path, shape):
    """The correction under control flow (FA4 skips a rescale it does not need): every
    other K step only; the interpreter and the strict emulator match torch."""
    from choreo_py.emu.api import run_spec
    from choreo_py.emu.launch import from_co

    old = ("          reduce_max(row_max, acc, 1);\n          apply {i, j} in acc.span\n"
           "            acc.at(i, j) = acc.at(i, j) / __max(row_max.at(i), 1.0f);\n")
    new = "          if (kt % 2 == 0) {\n" + "".join(
        "  " + line + "\n" for line in old.splitlines()) + "          }\n"
    path = _variant(tmp_path, old, new)

    def reference(a, b, bk=64, bn=128):
        out = torch.zeros(a.shape[0], b.shape[0], dtype=torch.float64)
        for step, k0 in enumerate(range(0, a.shape[1], bk)):
            out += a[:, k0:k0 + bk].double() @ b[:, k0:k0 + bk].double().T
            for n0 in range(0, out.shape[1], bn) if step % 2 == 0 else ():
                t = out[:, n0:n0 + bn]
                t /= t.amax(dim=1, keepdim=True).clamp(min=1)
        return out

    def close(c, ref):
        return bool((c.double() - ref).abs().max() <= ref.abs().max() * 2 ** -7 + 1e-3)

    a, b, c = _inputs(*shape)
    ref = reference(a, b)
    assert not close(_reference(a, b).to(torch.bfloat16), ref)  # the condition matters
    choreo_py.interpret(str(path), dict(A=a, B=b, C=c), schedule="random", seed=3,
                        target="sm_100a")
    assert close(c, ref)
    for schedule in ("round_robin", "random"):
        c = torch.full_like(c, float("nan"))
        run_spec(from_co(str(path), "sm_100a"), dict(A=a, B=b, C=c), schedule=schedule,
                 seed=2, strict=True)
        assert close(c, ref)


def test_an_mma_operand_written_by_a_reader_role_is_refused_by_name(tmp_path, capsys):
    """P written by the correction role for the MMA role's next MMA (FA4's P over S) is not
    lowered yet: the tile would stay in the writer's registers while the MMA reads tensor
    memory no one wrote (the emulator reports that PTX), so sm_100a refuses it by name."""
    src = EXAMPLE.read_text().replace(
        "    acc = mma.fill.f32 0.0f : block;\n",
        "    acc = mma.fill.f32 0.0f : block;\n    o = mma.fill.f32 0.0f : block;\n"
        "    frag bf16[BM, BK] pt;\n").replace(
        "          wait step;\n",
        "          wait step;\n          pv = mma.row.row.async o, pt, b_buf[slot];\n"
        "          wait pv;\n").replace(
        "          trigger rescaled.at(order++);",
        "          apply {i, j} in pt.span\n            pt.at(i, j) = __to(acc.at(i, j));\n"
        "          trigger rescaled.at(order++);")
    path = tmp_path / "p.co"
    path.write_text(src)
    assert cli.main(["check", str(path)]) == 0
    rc = cli.main(["compile", str(path), "--target", "sm_100a", "-o", str(tmp_path / "x.py")])
    assert rc == 1
    assert "p.co:63:11: error: the MMA operand 'pt' written by a role that does not issue its " \
        "MMAs (its tensor-memory columns are stored by the issuing role) is not lowered for " \
        "sm_100a yet" in capsys.readouterr().err


@pytest.mark.emu
def test_a_second_block_accumulator_sits_at_its_own_columns(tmp_path):
    """Two block accumulators: `acc` is planned after `other` (column 128 on: the plan
    follows the MMAs). Every role
    reaches it at its own address (the fill computes it before the branch only warpgroup 0
    takes, so the roles' cached copy is defined), and the emulator matches torch."""
    from choreo_py.emu.api import run_spec
    from choreo_py.emu.launch import from_co

    src = (ROOT / "examples" / "gemm_block_acc.co").read_text()
    src = src.replace("    acc = mma.fill.f32 0.0f : block;",
                      "    other = mma.fill.f32 0.0f : block;\n    acc = mma.fill.f32 0.0f : block;")
    step = "          step = mma.row.row.async acc, a_buf[slot], b_buf[slot];\n"
    assert step in src
    src = src.replace(step, "          more = mma.row.row.async other, a_buf[slot], a_buf[slot];\n"
                      "          wait more;\n" + step)
    path = tmp_path / "two.co"
    path.write_text(src)
    ir_text = compile_file(str(path), emit="ir", target="sm_100a")
    assert "tmem acc[0]: acc layout=D lanes=0+:128 cols=128+:128" in ir_text
    a, b, c = _inputs(128, 128, 128)
    run_spec(from_co(str(path), "sm_100a"), dict(A=a, B=b, C=c), schedule="random", seed=1,
             strict=True)
    ref = a.double() @ b.double().T
    assert (c.double() - ref).abs().max() <= ref.abs().max() * 2 ** -8 + 1e-2
