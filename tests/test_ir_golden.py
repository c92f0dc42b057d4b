"""Golden tile IR of the examples (`pytest --update-goldens` regenerates; review the diff)."""
from __future__ import annotations

from pathlib import Path

import pytest

from choreo_py.driver import compile_file, ir_of_file
from choreo_py.ir.verify import verify_module

from conftest import check_golden

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples").glob("*.co"))
GOLDEN = Path(__file__).resolve().parent / "golden" / "ir"


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_ir_golden(example: Path, request) -> None:
    text = compile_file(str(example.relative_to(ROOT)), emit="ir", target="sm_90a")
    check_golden(GOLDEN / f"{example.stem}.ir.txt", text, request)


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_ir_golden_sm100(example: Path, request) -> None:
    """sm_100a's IR adds the MMA completion barriers, the TMEM address slot and the TMEM map."""
    text = compile_file(str(example.relative_to(ROOT)), emit="ir", target="sm_100a")
    check_golden(GOLDEN / "sm100" / f"{example.stem}.ir.txt", text, request)


def test_print_ir_after_a_pass(monkeypatch, capsys) -> None:
    """`--print-ir-after smem-plan` shows the offsets but not yet the free tiles' swizzles."""
    from choreo_py import cli

    monkeypatch.chdir(ROOT)
    assert cli.main(["compile", "examples/flash_atten_causal.co", "--print-ir-after",
                     "smem-plan", "-o", "-"]) == 0
    out = capsys.readouterr().out
    assert "shared o_buf: bf16[128, 128] offset=163840" in out
    assert "layout-free" not in out and "tmem_slot" not in out
    assert cli.main(["compile", "examples/flash_atten_causal.co", "--print-ir-after",
                     "no-such-pass"]) == 1
    assert "no such pass" in capsys.readouterr().err


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_ir_verifies_and_is_deterministic(example: Path, monkeypatch) -> None:
    monkeypatch.chdir(ROOT)
    rel = str(example.relative_to(ROOT))
    module = ir_of_file(rel, target="sm_90a")
    verify_module(module)
    assert compile_file(rel, emit="ir") == compile_file(rel, emit="ir")


def test_seed_ir_facts(monkeypatch) -> None:
    """The structure the backends rely on, stated directly rather than via the golden."""
    monkeypatch.chdir(ROOT)
    k = ir_of_file("examples/flash_atten_causal.co", target="sm_90a").functions[0].kernels[0]
    assert [g.var for g in k.grid] == ["tile", "head", "batch"]
    assert k.launch_bounds == (None, 1)
    # o_buf's layout no statement observes: the free-tile-swizzle pass gives it 128 B
    assert {b.name: (b.shape, b.count, b.swizzle, b.free_swizzle) for b in k.buffers} == {
        "q_shared": ((128, 128), None, 128, False), "k_buf": ((128, 128), 2, 128, False),
        "v_buf": ((128, 128), 2, 128, False), "o_buf": ((128, 128), None, 128, True)}
    assert {e.name: e.arrivals for e in k.events} == {"qf": 1, "kf": 1, "vf": 1, "ke": 2, "ve": 2}
    assert {e.name: (e.slots, e.ready) for e in k.events} == {
        "qf": (None, False), "kf": (2, False), "vf": (2, False), "ke": (2, True), "ve": (2, True)}
    layouts = {f.name: (f.shape, f.layout) for f in k.frags}
    assert layouts["acc_s"] == ((64, 128), "acc")
    assert layouts["acc_o"] == ((64, 128), "acc")
    assert layouts["acc_s_cast"] == ((64, 128), "operand")
    assert layouts["logsum"] == ((64,), "row_partial")
    assert layouts["scores_max"] == ((64,), "row")
    roles = [s for s in k.body[-1].body]
    assert [(r.members, r.max_regs) for r in roles] == [((0,), 40), ((1, 2), 232)]
    # 3 x 32 KiB tiles + o_buf, 1024-aligned, plus 9 mbarriers
    assert k.smem_total == 6 * 32768 + 9 * 8
