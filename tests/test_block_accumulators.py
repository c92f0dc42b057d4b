"""The block's accumulators (`acc = mma.fill.f32 0.0f : block;`): one tile the block's roles
share, written by one MMA-issuing role and read by another after an event.

The rules (check and sema, located errors), the IR's mark, the interpreter (shared state,
races), the sm_90a refusal by name, and the sm_100a lowering: ptxas accepts it with no
spills, and the PTX emulator in strict mode matches torch under every schedule and several
shapes (partial last tiles among them). A plain accumulator declared in the block stays one
per thread group (the reference language's meaning), which the interpreter shows too."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

import choreo_py
from choreo_py import cli
from choreo_py.driver import compile_file, ir_of_file
from choreo_py.ir.parse import parse_module
from choreo_py.ir.printer import print_module
from block_helpers import assert_no_spills, emulate_strict

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "gemm_block_acc.co"


def _variant(tmp_path, old: str, new: str, name: str = "v.co") -> Path:
    src = EXAMPLE.read_text()
    assert old in src
    path = tmp_path / name
    path.write_text(src.replace(old, new))
    return path


def _errors(capsys, argv) -> tuple[int, str]:
    rc = cli.main(argv)
    return rc, capsys.readouterr().err


def _gemm_inputs(m, n, k, seed=5):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(m, k, generator=g).to(torch.bfloat16)
    b = torch.randn(n, k, generator=g).to(torch.bfloat16)
    return a, b, torch.full((m, n), float("nan")).to(torch.bfloat16)


def _close(c, a, b) -> bool:
    """f32 accumulation, one bf16 rounding of the output, every element written."""
    ref = a.double() @ b.double().T
    err = (c.double() - ref).abs().max()
    return not c.float().isnan().any() and bool(err <= ref.abs().max() * 2 ** -8 + 1e-2)


# ---------------------------------------------------------------- syntax and rules

def test_the_example_checks_and_marks_the_accumulator():
    assert cli.main(["check", str(EXAMPLE)]) == 0
    text = compile_file(str(EXAMPLE), emit="ir", target="sm_100a")
    assert "frag acc: f32[128, 128] layout=acc : block" in text
    assert print_module(parse_module(text)) == text
    k = ir_of_file(str(EXAMPLE), target="sm_100a").functions[0].kernels[0]
    assert k.frag("acc").block
    # one tile for the block: one TMEM region, owned by the one-instance MMA role
    assert [(r.frag, r.instance, r.layout, r.col, r.ncols) for r in k.tmem.regions] == [
        ("acc", 0, "D", 0, 128)]
    assert (k.tmem.role, k.tmem.alloc) == ((1,), 128)


@pytest.mark.parametrize("old, new, message", [
    ("acc = mma.fill.f32 0.0f : block;", "acc = mma.fill.f32 0.0f : group-4;",
     r"v\.co:24:29: error: an accumulator can be declared ': block' \(one tile the block's "
     r"roles share\), not ': group-4'"),
    ("        wait acc_full;\n", "        wait acc_full;\n        mma.fill acc, 0.0f : block;\n",
     r"v\.co:52:28: error: ': block' says where an accumulator lives: only a declaring "
     r"'acc = mma.fill.T v : block' takes it"),
    ("        mma.store acc, c_buf;",
     "        extra = mma.row.row.async acc, a_buf[0], b_buf[0];\n        wait extra;\n"
     "        mma.store acc, c_buf;",
     r"v\.co:52:9: error: MMAs into the block's accumulator 'acc' \(declared at 24:5\) come "
     r"from two roles: here and at 43:11; one role issues them"),
    ("    parallel p by 3 : group-4 {\n",
     "    parallel p by 3 : group-4 {\n      mma.row.row acc, a_buf[0], b_buf[0];\n",
     r"v\.co:27:7: error: every thread group of 'parallel p' would issue MMAs into the "
     r"block's accumulator 'acc' \(declared at 24:5\), one tile shared by them"),
])
def test_check_rules(tmp_path, capsys, old, new, message):
    rc, err = _errors(capsys, ["check", str(_variant(tmp_path, old, new))])
    assert rc == 1 and re.search(message, err), err


def test_sema_rules(tmp_path, capsys):
    two = _variant(tmp_path, "inthreads.async (p == 1) {", "inthreads.async (p >= 1) {")
    two.write_text(two.read_text().replace("inthreads.async (p == 2) {",
                                           "inthreads.async (p == 3) {")
                   .replace("parallel p by 3", "parallel p by 4"))
    rc, err = _errors(capsys, ["compile", str(two), "-o", str(tmp_path / "x.py")])
    assert rc == 1
    assert re.search(r"v\.co:43:11: error: role \(p >= 1\) selects 3 thread groups "
                     r"\(p=1, 2, 3\); the MMAs into the block's accumulator 'acc' are issued by "
                     r"one", err), err
    inside = _variant(tmp_path, "    acc = mma.fill.f32 0.0f : block;   // the block's: every "
                      "role below sees this one tile\n", "", "inside.co")
    inside.write_text(inside.read_text().replace(
        "      inthreads.async (p == 0) {",
        "      acc = mma.fill.f32 0.0f : block;\n      inthreads.async (p == 0) {", 1))
    rc, err = _errors(capsys, ["compile", str(inside), "-o", str(tmp_path / "x.py")])
    assert rc == 1 and "inside.co:26:7: error: a ': block' accumulator is declared in a " \
        "'parallel ... : block' body, before its thread-group level; this one is inside " \
        "'parallel p'" in err, err


def test_sm90a_refuses_it_by_name(tmp_path, capsys):
    rc, err = _errors(capsys, ["compile", str(EXAMPLE), "--target", "sm_90a",
                               "-o", str(tmp_path / "x.py")])
    assert rc == 1
    assert "gemm_block_acc.co:24:5: error: a ': block' accumulator (one tile the block's " \
        "roles share; wgmma accumulates in the registers of the warpgroup that issues it) is " \
        "not lowered for sm_90a yet" in err


# ---------------------------------------------------------------- the interpreter

@pytest.mark.parametrize("m, n, k, schedule, seed", [(128, 128, 128, "round_robin", 0),
                                                     (256, 128, 192, "random", 1),
                                                     (192, 160, 96, "random", 2)])
def test_interpreter_matches_torch(m, n, k, schedule, seed):
    a, b, c = _gemm_inputs(m, n, k)
    choreo_py.interpret(str(EXAMPLE), dict(A=a, B=b, C=c), schedule=schedule, seed=seed,
                        target="sm_100a")
    assert _close(c, a, b)


def test_interpreter_reports_a_read_not_ordered_after_the_mmas(tmp_path):
    path = _variant(tmp_path, "        wait acc_full;\n", "")
    a, b, c = _gemm_inputs(128, 128, 128)
    with pytest.raises(choreo_py.ChoreoError, match=r"data race on fragment 'acc' \(shared by "
                       r"the block's roles\)") as e:
        choreo_py.interpret(str(path), dict(A=a, B=b, C=c), target="sm_100a")
    assert e.value.loc.line in (43, 51)  # the MMA or the mma.store, whichever comes second


def test_a_plain_accumulator_in_the_block_is_one_per_thread_group(tmp_path):
    """Without `: block`, the two consumer warpgroups of gemm.co, each accumulating its own
    64 rows into `acc` declared in the block, each have their own (the reference language's
    meaning: an accumulator is registers)."""
    src = (ROOT / "examples" / "gemm.co").read_text()
    decl = "        acc = mma.fill.f32 0.0f;\n"
    assert decl in src
    src = src.replace(decl, "").replace("    k_tiles = cdiv(K, BK);\n",
                                        "    k_tiles = cdiv(K, BK);\n    acc = mma.fill.f32 0.0f;\n")
    path = tmp_path / "per_group.co"
    path.write_text(src)
    a, b, c = _gemm_inputs(128, 128, 64)
    choreo_py.interpret(str(path), dict(A=a, B=b, C=c), target="sm_100a")
    assert _close(c, a, b)


# ---------------------------------------------------------------- sm_100a

@pytest.fixture(scope="module")
def ptx() -> str:
    return compile_file(str(EXAMPLE), emit="ptx", target="sm_100a")


def test_ptx_structure(ptx):
    # the MMA role is issue-only: one thread runs it (no election, no instance barrier)
    role = ptx.split("@%not_issuer_2 bra", 1)[1].split("tcgen05.mma.cta_group", 1)[0]
    assert "%is_inst_leader" not in role and "bar.sync" not in role
    assert len(re.findall(r"tcgen05\.mma\.cta_group::1\.kind::f16", ptx)) == 4  # K/16 steps
    # the fill is stored by warpgroup 0 before the roles start; the epilogue loads the tile
    # 8 columns at a time, each piece before its shared-memory stores
    assert len(re.findall(r"tcgen05\.st\.sync\.aligned\.32x32b\.x64\.b32", ptx)) == 2
    assert len(re.findall(r"tcgen05\.ld\.sync\.aligned\.32x32b\.x8\.b32", ptx)) == 16
    assert not re.search(r"tcgen05\.ld\.sync\.aligned\.32x32b\.x(16|32|64)", ptx)
    # every role ends at the join, where the allocating warp frees tensor memory
    assert ptx.count("bra L_kernel_join;") == 3
    join = ptx.split("L_kernel_join:", 1)[1]
    assert "bar.sync 0;" in join and "tcgen05.dealloc.cta_group::1.sync.aligned.b32" in join
    assert ptx.count("tcgen05.dealloc") == 1 and ptx.count("tcgen05.alloc") == 1


@pytest.mark.ptxas
def test_ptxas_accepts_it_without_spills(ptx):
    assert_no_spills(ptx)


@pytest.mark.emu
@pytest.mark.parametrize("m, n, k", [(128, 128, 128), (192, 160, 96), (256, 256, 192)])
@pytest.mark.parametrize("schedule", ["round_robin", "reverse", "greedy", "random"])
def test_emulator_matches_torch_strict(m, n, k, schedule):
    a, b, c = _gemm_inputs(m, n, k)
    notes = emulate_strict(EXAMPLE, dict(A=a, B=b, C=c), schedule)
    assert _close(c, a, b)
    assert notes == []  # strict: nothing let pass, no flagged path taken


@pytest.mark.emu
@pytest.mark.parametrize("what, edit, error", [
    # the roles' join orders the epilogue's reads before the allocating warp frees the tile
    ("no join barrier", lambda p: p[:p.index("L_kernel_join:")]
     + p[p.index("L_kernel_join:"):].replace("bar.sync 0;", "", 1),
     "is not allocated|tcgen05.dealloc by warp .* writes tensor memory"),
    # the fill is what the first MMA accumulates onto
    ("no fill", lambda p: re.sub(r"tcgen05\.st\.sync\.aligned\.32x32b\.x64\.b32 "
                                 r"\[%acc_fill_at(\+64)?\], \{[^}]*\};", "", p),
     "tensor memory never written"),
])
def test_emulator_sees_the_lowering_s_orderings(what, edit, error):
    """The emulator's judgement is not vacuous: without the join's barrier or the fill, the
    same program is reported."""
    import dataclasses

    from choreo_py.emu import EmuError
    from choreo_py.emu.api import run_spec
    from choreo_py.emu.launch import from_co

    spec = from_co(str(EXAMPLE), "sm_100a")
    broken = edit(spec.ptx)
    assert broken != spec.ptx, what
    a, b, c = _gemm_inputs(128, 128, 128)
    with pytest.raises(EmuError, match=error):
        run_spec(dataclasses.replace(spec, ptx=broken), dict(A=a, B=b, C=c),
                 schedule="random", seed=1, strict=True)


def test_a_reader_that_releases_the_tile_fences_its_loads(tmp_path):
    """An epilogue that triggers an event after reading the tile (the MMA role would then
    overwrite it) orders its tcgen05.ld before the arrive; the program still matches torch."""
    path = _variant(tmp_path, "        trigger acc_full;                // every MMA into acc has "
                    "completed\n", "        trigger acc_full;\n        wait released;\n")
    path.write_text(path.read_text()
                    .replace("    shared event acc_full;\n",
                             "    shared event acc_full;\n    shared event released;\n")
                    .replace("        mma.store acc, c_buf;\n",
                             "        mma.store acc, c_buf;\n        trigger released;\n"))
    ptx = compile_file(str(path), emit="ptx", target="sm_100a")
    epilogue = ptx.split("tcgen05.ld.sync.aligned.32x32b.x8.b32", 1)[1]
    fence = epilogue.index("tcgen05.fence::before_thread_sync;")
    assert fence < epilogue.index("mbarrier.arrive")
    from choreo_py.emu.api import run_spec
    from choreo_py.emu.launch import from_co
    a, b, c = _gemm_inputs(128, 128, 128)
    run_spec(from_co(str(path), "sm_100a"), dict(A=a, B=b, C=c), schedule="random", seed=2,
             strict=True)
    assert _close(c, a, b)
