"""The tensor-memory map as an IR fact: pass tmem-plan records it, the printer shows it, the
IR parser reads it back, the verifier holds it to the hardware's bounds, and the sm_100a
backend lowers whatever map the IR carries (it plans nothing itself)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from choreo_py import cli, ir, targets
from choreo_py.diagnostics import ChoreoError
from choreo_py.driver import compile_file, ir_of_file
from choreo_py.ir.parse import IRParseError, parse_module
from choreo_py.ir.printer import print_module
from choreo_py.ir.verify import verify_kernel
from choreo_py.passes import pipeline
from choreo_py.runtime import build

ROOT = Path(__file__).resolve().parent.parent
SEED = "examples/flash_atten_causal.co"
SM100, SM90 = targets.get("sm_100a"), targets.get("sm_90a")


@pytest.fixture(scope="module")
def seed_text() -> str:
    return compile_file(str(ROOT / SEED), emit="ir", target="sm_100a")


def _kernel(text: str) -> ir.Kernel:
    return parse_module(text).functions[0].kernels[0]


def _tmem_lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip().startswith("tmem")]


def test_seed_map_is_printed(seed_text):
    assert _tmem_lines(seed_text) == [
        "tmem_slot 196744",
        "tmem_alloc 512 used=512 role={1, 2}",
        "tmem acc_s[0]: acc layout=F lanes=32q+0+:16 cols=0+:128",
        "tmem acc_s[1]: acc layout=F lanes=32q+16+:16 cols=0+:128",
        "tmem acc_o[0]: acc layout=F lanes=32q+0+:16 cols=128+:128",
        "tmem acc_o[1]: acc layout=F lanes=32q+0+:16 cols=256+:128",
        "tmem acc_s_cast[0]: operand layout=F lanes=32q+0+:16 cols=384+:64",
        "tmem acc_s_cast[1]: operand layout=F lanes=32q+0+:16 cols=448+:64",
    ]


def test_only_targets_with_tensor_memory_get_a_map():
    k = ir_of_file(str(ROOT / SEED), target="sm_90a").functions[0].kernels[0]
    assert SM90.tmem_columns == 0 and k.tmem is None
    assert not _tmem_lines(compile_file(str(ROOT / SEED), emit="ir", target="sm_90a"))
    k100 = ir_of_file(str(ROOT / SEED), target="sm_100a").functions[0].kernels[0]
    k.tmem = k100.tmem  # the verifier refuses a map on a target without tensor memory
    with pytest.raises(ChoreoError, match="tensor-memory map on sm_90a"):
        verify_kernel(k, SM90)


def test_print_ir_after_tmem_plan_shows_the_map(capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    assert cli.main(["compile", SEED, "--print-ir-after", "tmem-plan", "-o", "-"]) == 0
    assert "tmem_alloc 512 used=512 role={1, 2}" in capsys.readouterr().out
    assert cli.main(["compile", SEED, "--print-ir-after", "smem-limit", "-o", "-"]) == 0
    assert "tmem_alloc" not in capsys.readouterr().out


def test_map_round_trips(seed_text):
    k = _kernel(seed_text)
    built = ir_of_file(str(ROOT / SEED), target="sm_100a").functions[0].kernels[0]
    assert k.tmem == built.tmem
    assert print_module(parse_module(seed_text)) == seed_text


def test_staged_and_refused_maps_round_trip(seed_text):
    k = _kernel(seed_text)
    k.tmem.staged["acc_x"] = "A must be K-major ('row') to be read from tensor memory"
    again = _kernel(print_module(ir.Module([ir.Function("f", [], [k], [])])))
    assert again.tmem.staged == k.tmem.staged
    k.tmem = ir.TmemMap(None, refused="tcgen05 lowering: MMAs of one kernel must sit in one "
                        "role (found 2)")
    text = print_module(ir.Module([ir.Function("f", [], [k], [])]))
    assert "tmem_refused tcgen05 lowering: MMAs of one kernel must sit in one role (found 2)" \
        in text
    assert _kernel(text).tmem == k.tmem


@pytest.mark.parametrize("line, message", [
    ("tmem acc_s[0]: acc layout=D lanes=32q+0+:16 cols=0+:128", "layout D with lanes"),
    ("tmem acc_s[0]: acc layout=F lanes=0+:128 cols=0+:128", "layout F with lanes"),
    ("tmem acc_s[0]: acc layout=F lanes=32q+0+:32 cols=0+:128", "layout F with lanes"),
    ("tmem acc_s[0] acc cols=0", "not a tensor-memory region"),
    ("tmem_alloc 512 role={1, 2}", "not a tensor-memory allocation"),
])
def test_bad_map_text_is_an_error(seed_text, line, message):
    text = seed_text.replace("tmem acc_s[0]: acc layout=F lanes=32q+0+:16 cols=0+:128", line)
    if line.startswith("tmem_alloc"):
        text = seed_text.replace("tmem_alloc 512 used=512 role={1, 2}", line)
    with pytest.raises(IRParseError, match=message):
        parse_module(text)


def test_region_before_the_allocation_is_an_error(seed_text):
    text = seed_text.replace("  tmem_alloc 512 used=512 role={1, 2}\n", "")
    with pytest.raises(IRParseError, match="after 'tmem_alloc'"):
        parse_module(text)


# ---------------------------------------------------------------- the verifier

S0 = "tmem acc_s[0]: acc layout=F lanes=32q+0+:16 cols=0+:128"
S1 = "tmem acc_s[1]: acc layout=F lanes=32q+16+:16 cols=0+:128"
O1 = "tmem acc_o[1]: acc layout=F lanes=32q+0+:16 cols=256+:128"
P1 = "tmem acc_s_cast[1]: operand layout=F lanes=32q+0+:16 cols=448+:64"
ALLOC = "tmem_alloc 512 used=512 role={1, 2}"


@pytest.mark.parametrize("old, new, message", [
    # the one sharing allowed, two M=64 instances at lanes +0 / +16, has no common cell;
    # the same columns at the same lanes do
    (S1, S1.replace("32q+16", "32q+0"), r"acc_s\[0\] and acc_s\[1\] share cells"),
    (O1, O1.replace("cols=256", "cols=192"), r"acc_o\[0\] and acc_o\[1\] share cells"),
    (S0, S0.replace("layout=F lanes=32q+0+:16", "layout=D lanes=0+:128"),
     r"layout D for a fragment of 64 rows"),
    (S1, S1.replace("32q+16", "32q+8"), r"cannot start at lane \+8"),
    (ALLOC, ALLOC.replace("512 used", "384 used"), r"allocation of 384 columns"),
    (ALLOC, ALLOC.replace("512 used", "1024 used"), r"allocation of 1024 columns"),
    (ALLOC, "tmem_alloc 16 used=512 role={1, 2}", r"allocation of 16 columns"),
    (ALLOC, "tmem_alloc 512 used=500 role={1, 2}", r"used=500, but the regions end at column 512"),
    (ALLOC, "tmem_alloc 512 used=512 role={1, 2, 3}", r"no role of members"),
    (P1, P1.replace("cols=448+:64", "cols=448+:128"), r"128 columns, but bf16\[64, 128\] takes 64"),
    (P1, P1.replace("acc_s_cast[1]: operand", "acc_s_cast[1]: acc"), r"kind 'acc' but the fragment"),
    (P1, "", r"'acc_s_cast' has regions for instances \[0\], the role has 2"),
    (P1, P1 + "\n  tmem acc_s_cast[1]: operand layout=F lanes=32q+16+:16 cols=448+:64",
     r"'acc_s_cast' has regions for instances \[0, 1, 1\]"),
    (P1, P1.replace("acc_s_cast[1]", "nothing[0]"), r"no fragment 'nothing'"),
])
def test_verifier_holds_the_map_to_the_hardware(seed_text, old, new, message):
    assert old in seed_text
    k = _kernel(seed_text.replace(old, new))
    with pytest.raises(ChoreoError, match=message):
        verify_kernel(k, SM100)


def test_verifier_bounds_lanes_and_columns(seed_text):
    k = _kernel(seed_text)
    verify_kernel(k, SM100)
    verify_kernel(k)  # without a target: the geometry of the targets with tensor memory
    k.tmem.regions[-1].col = 480  # acc_s_cast[1] 480..543: past the allocation
    with pytest.raises(ChoreoError, match=r"columns 480..543 outside the allocation of 512"):
        verify_kernel(k, SM100)
    k = _kernel(seed_text)
    k.tmem.regions[0].lane = 16 * 8  # not a lane of a subpartition
    with pytest.raises(ChoreoError, match=r"cannot start at lane \+128"):
        verify_kernel(k, SM100)


# ---------------------------------------------------------------- the backend reads the map

def test_backend_lowers_the_map_the_ir_carries(seed_text):
    """Moving P before O in the IR text moves them in the PTX: the backend plans nothing."""
    moved = seed_text
    for old, new in (("acc_o[0]: acc layout=F lanes=32q+0+:16 cols=128+:128",
                      "acc_o[0]: acc layout=F lanes=32q+0+:16 cols=256+:128"),
                     ("acc_o[1]: acc layout=F lanes=32q+0+:16 cols=256+:128",
                      "acc_o[1]: acc layout=F lanes=32q+0+:16 cols=384+:128"),
                     ("acc_s_cast[0]: operand layout=F lanes=32q+0+:16 cols=384+:64",
                      "acc_s_cast[0]: operand layout=F lanes=32q+0+:16 cols=128+:64"),
                     ("acc_s_cast[1]: operand layout=F lanes=32q+0+:16 cols=448+:64",
                      "acc_s_cast[1]: operand layout=F lanes=32q+0+:16 cols=192+:64")):
        assert old in moved
        moved = moved.replace(old, new)
    module = parse_module(moved)
    verify_kernel(module.functions[0].kernels[0], SM100)
    ptx = build.emit(module, SEED, "ptx", "sm_100a")
    base = build.emit(parse_module(seed_text), SEED, "ptx", "sm_100a")
    assert "add.u32 %acc_o_tmem, %acc_o_tmem, 128;" in base
    assert "add.u32 %acc_o_tmem, %acc_o_tmem, 256;" in ptx
    assert "add.u32 %acc_s_cast_tmem, %acc_s_cast_tmem, 384;" in base
    assert "add.u32 %acc_s_cast_tmem, %acc_s_cast_tmem, 128;" in ptx
    assert "mad.lo.u32 %acc_o_tmem, %mma_instance, 128, %tmem;" in ptx
    pyptx = build.emit(module, SEED, "pyptx", "sm_100a")
    assert "acc_s_cast[1] bf16[64, 128] layout F lanes+0 cols 192..255 (64)" in pyptx


def test_backend_refuses_with_the_recorded_reason(seed_text):
    module = parse_module(seed_text)
    k = module.functions[0].kernels[0]
    k.tmem = ir.TmemMap(None, refused="tcgen05 lowering: 'acc_s': tcgen05.mma cta_group::1 "
                        "kind::f16: M must be 64 or 128, got 32")
    with pytest.raises(ChoreoError, match="M must be 64 or 128, got 32"):
        build.emit(module, SEED, "ptx", "sm_100a")


def test_backend_checks_a_stale_map(seed_text):
    module = parse_module(seed_text)
    k = module.functions[0].kernels[0]
    k.frag("acc_o").shape = (64, 64)  # edited after planning: the map no longer fits
    with pytest.raises(ChoreoError, match=r"acc_o\[0\]: 128 columns, but f32\[64, 64\] takes 64"):
        build.emit(module, SEED, "ptx", "sm_100a")


# ---------------------------------------------------------------- over-subscription

def _m128_pair(tmp_path) -> Path:
    """flash_atten.co with two 128-row consumers: S, O and P of each, 640 columns."""
    src = (ROOT / "examples" / "flash_atten.co").read_text()
    for old, new in (("#define BLOCK_M 128", "#define BLOCK_M 256"),
                     ("#define WG_M 64", "#define WG_M 128"),
                     ("#define K_STAGES 2", "#define K_STAGES 1"),
                     ("#define V_STAGES 2", "#define V_STAGES 1")):
        assert old in src
        src = src.replace(old, new)
    path = tmp_path / "fa_m128.co"
    path.write_text(src)
    return path


def test_oversubscription_is_a_located_compile_error(tmp_path, capsys):
    path = _m128_pair(tmp_path)
    assert cli.main(["compile", str(path), "-o", str(tmp_path / "out.py")]) == 1
    err = capsys.readouterr().err
    assert re.search(r"fa_m128\.co:\d+:\d+: error: tensor memory over-subscribed in "
                     r"'flash_atten': the MMA fragments need 640 columns, more than the 512 of "
                     r"sm_100a", err)
    assert "acc_s_cast[1] bf16[128, 128] layout D lanes+0 cols 576..639 (64)" in err


def test_oversubscription_is_a_warning_for_the_interpreter(tmp_path):
    """The interpreter keeps accumulators in its own memory: it warns and builds the IR."""
    from choreo_py import frontend
    from choreo_py.diagnostics import take_warnings

    take_warnings()
    program = frontend.parse_file(str(_m128_pair(tmp_path)))
    module = pipeline.build_module(program, SM100, strict=False)
    found = take_warnings()
    assert any("over-subscribed" in w.message for w in found)
    assert module.functions[0].kernels[0].tmem is None
    with pytest.raises(pipeline.BeyondTheLanguage):
        pipeline.build_module(frontend.parse_file(str(_m128_pair(tmp_path))), SM100)
