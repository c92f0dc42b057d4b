"""The target table (choreo_py/targets.py) is what every stage reads."""
from __future__ import annotations

from pathlib import Path

import pytest

import choreo_py
from choreo_py import cli, targets
from choreo_py.driver import compile_file

ROOT = Path(__file__).resolve().parent.parent


def _choices(command: str) -> tuple:
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if a.dest == "cmd").choices[command]
    return tuple(next(a for a in sub._actions if a.dest == "target").choices)


def test_cli_choices_are_the_table():
    assert _choices("compile") == _choices("run") == targets.NAMES == ("sm_100a", "sm_90a")


@pytest.mark.parametrize("capability, expected", [
    (None, "sm_100a"), ((9, 0), "sm_90a"), ((10, 0), "sm_100a"), ((8, 0), "sm_100a")])
def test_runtime_default_is_the_gpu_present_else_sm_100a(monkeypatch, capability, expected):
    monkeypatch.setattr(targets, "_gpu_capability", lambda: capability)
    assert targets.default_runtime_target() == expected
    assert targets.resolve(None).name == expected
    assert targets.resolve("sm_90a").name == "sm_90a"


def test_load_without_a_target_takes_the_runtime_default(monkeypatch):
    monkeypatch.setattr(targets, "_gpu_capability", lambda: None)
    f = choreo_py.load(str(ROOT / "examples" / "gemm.co"))  # compiles on the CPU
    assert f.target == "sm_100a"


def test_unknown_target_is_an_error_naming_the_known_ones():
    with pytest.raises(targets.UnknownTarget, match="choose sm_100a, sm_90a"):
        targets.get("sm_80")
    with pytest.raises(choreo_py.diagnostics.ChoreoError, match="unknown target 'sm_80'"):
        compile_file(str(ROOT / "examples" / "gemm.co"), "ir", "sm_80")


def test_smem_limit_comes_from_the_record(monkeypatch, tmp_path):
    """Lower a target's limit in the table and the smem-limit pass refuses the seed."""
    rec = targets.TARGETS["sm_90a"]
    monkeypatch.setitem(targets.TARGETS, "sm_90a",
                        targets.Target(**{**rec.__dict__, "smem_limit": 64 * 1024}))
    with pytest.raises(choreo_py.diagnostics.ChoreoError, match="more than the 65536 bytes sm_90a"):
        compile_file(str(ROOT / "examples" / "flash_atten_causal.co"), "ir", "sm_90a")


def test_refusals_come_from_the_record(monkeypatch):
    """sm_100a refuses mma.load by its record; the same record drives the message."""
    src = (ROOT / "bench" / "variants" / "flash_atten_persistent_qreg.co")
    with pytest.raises(choreo_py.diagnostics.ChoreoError,
                       match=r"mma\.load \(a register A operand.*is not lowered for sm_100a yet"):
        compile_file(str(src), "pyptx", "sm_100a")


def test_accumulator_owners_per_target():
    """wgmma: the 4 threads of a quad; tcgen05.ld .16x32bx2 (64 rows): a pair of half-warps;
    .32x32b (128 rows): one thread; a fragment of another row count: one thread."""
    sm90, sm100 = targets.get("sm_90a"), targets.get("sm_100a")
    assert [sm90.row_split(m).owners for m in (64, 16)] == [4, 1]
    assert [sm100.row_split(m).owners for m in (64, 128, 32)] == [2, 1, 1]
    assert sm90.row_split(64).columns(16, 1) == (2, 3, 10, 11)
    assert sm100.row_split(64).columns(16, 1) == tuple(range(8, 16))
