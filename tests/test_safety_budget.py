"""Attributes are range-checked and the block's thread and register budget is checked
before emission, with located errors naming the numbers, on both targets."""
from __future__ import annotations

from pathlib import Path

import pytest

from choreo_py import cli

EX = Path(__file__).resolve().parent.parent / "examples"
TARGETS = ("sm_90a", "sm_100a")


def _gemm(tmp_path, old: str, new: str) -> Path:
    text = (EX / "gemm.co").read_text()
    assert old in text
    path = tmp_path / "g.co"
    path.write_text(text.replace(old, new))
    return path


def _wide_gemm(tmp_path, extra: int) -> Path:
    """gemm.co with `extra` consumer warpgroups, each on one of the tile's two row halves
    (`cid % 2`: no consumer's view passes its buffer, which is a fault of its own)."""
    path = _gemm(tmp_path, "BM / WG_M + 1]", f"BM / WG_M + {extra}]")
    text = path.read_text()
    assert ".at(cid, 0)" in text
    path.write_text(text.replace(".at(cid, 0)", ".at(cid % 2, 0)"))
    return path


def _compile(capsys, path, target):
    rc = cli.main(["compile", str(path), "--target", target, "--emit", "ptx", "-o", "-"])
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("bounds,message,col", [
    ("_, -1", "the blocks per SM must be in [1, 32], not -1", 22),
    ("_, 0", "the blocks per SM must be in [1, 32], not 0", 22),
    ("_, 33", "the blocks per SM must be in [1, 32], not 33", 22),
    ("2048, 1", "the threads of a block must be in [1, 1024], not 2048", 19),
    ("256, 1", "launch_bounds allows 256 threads, but the block has 384", None),
    ("_, 1, 1", "launch_bounds takes at most 2 values", 25),
])
def test_launch_bounds_out_of_range(capsys, tmp_path, target, bounds, message, col):
    path = _gemm(tmp_path, "launch_bounds(_, 1)", f"launch_bounds({bounds})")
    rc, out, err = _compile(capsys, path, target)
    assert rc == 1 and out == ""
    assert message in err
    if col is not None:
        assert f"g.co:15:{col}: error:" in err


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("extra,threads", [(7, 1152), (9, 1408)])
def test_too_many_warpgroups_name_the_thread_count(capsys, tmp_path, target, extra, threads):
    path = _wide_gemm(tmp_path, extra)
    rc, out, err = _compile(capsys, path, target)
    assert rc == 1 and out == ""
    assert f"g.co:23:5: error: the block has {threads} threads" in err
    assert "1024" in err and "tensor memory" not in err


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("blocks", [2, 3])
def test_register_budget_of_setmaxnreg(capsys, tmp_path, target, blocks):
    """Two warpgroups at 232 registers and one at 40 fill one block's whole register
    file: with two or three blocks per SM, setmaxnreg.inc could never be satisfied."""
    path = _gemm(tmp_path, "launch_bounds(_, 1)", f"launch_bounds(_, {blocks})")
    rc, _, err = _compile(capsys, path, target)
    assert rc == 1
    assert "g.co:36:7: error: the warpgroups ask setmaxnreg for 64512 registers" in err
    assert f"{blocks} block(s) per SM" in err


def test_check_warns_and_compile_refuses(capsys, tmp_path):
    path = _wide_gemm(tmp_path, 7)
    assert cli.main(["check", str(path)]) == 0
    assert "warning: the block has 1152 threads" in capsys.readouterr().err


@pytest.mark.parametrize("target", TARGETS)
def test_the_example_fits_exactly(capsys, target):
    """gemm.co: 40 + 2 x 232 registers per thread of 128 = 64,512 = 168 x 384."""
    rc, out, _ = _compile(capsys, EX / "gemm.co", target)
    assert rc == 0 and ".maxntid 384, 1, 1" in out
