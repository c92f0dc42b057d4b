"""Bad command lines and bad files are usage errors or located program errors, never a
traceback or a silently overwritten source."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from choreo_py import cli

EX = Path(__file__).resolve().parent.parent / "examples"


def _cli(capsys, *argv):
    rc = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.mark.parametrize("size", ["4294967296", "2147483648", "99999999999999999999"])
def test_shape_beyond_32_bits_is_a_usage_error(capsys, size):
    rc, _, err = _cli(capsys, "run", EX / "gemm.co", "--shape", f"M={size},N=128,K=64")
    assert rc == 2
    assert f"--shape: M={size} is larger than 2147483647" in err
    assert "Traceback" not in err and "frame #" not in err


def test_shape_whose_tensors_do_not_fit_is_a_usage_error(capsys):
    rc, _, err = _cli(capsys, "run", EX / "gemm.co", "--shape", "M=2147483647,N=128,K=64")
    assert rc == 2 and "GiB that 'choreo run' allocates at most" in err


@pytest.mark.parametrize("emit", ["ir", "pyptx"])
def test_output_equal_to_the_input_is_refused(capsys, tmp_path, monkeypatch, emit):
    src = tmp_path / "g.co"
    shutil.copy(EX / "gemm.co", src)
    before = src.read_text()
    monkeypatch.chdir(tmp_path)
    for out in (src, "g.co", "./g.co"):
        rc, _, err = _cli(capsys, "compile", src, "--emit", emit, "-o", out)
        assert rc == 2 and "is the input file" in err
    assert src.read_text() == before


def test_directory_as_input(capsys, tmp_path):
    rc, _, err = _cli(capsys, "check", tmp_path)
    assert rc == 2 and "is a directory" in err


def test_missing_include_is_quiet_when_nothing_fails(capsys, tmp_path):
    """Not found, a quoted include may be host code (then nothing fails and nothing is
    said) or Choreo code (then the program has errors, and the include comes first)."""
    src = tmp_path / "host.co"
    src.write_text('#include "missing_helper.h"\n__co__ void f(global f32[M] a) {\n'
                   "  parallel p by 1 : block { shared f32[16] s; }\n}\n")
    rc, _, err = _cli(capsys, "check", src)
    assert rc == 0 and err == f"choreo: {src}: ok (1 __co__ function)\n"  # nothing else said


def test_missing_choreo_include_is_an_error_at_the_include(capsys, tmp_path):
    src = tmp_path / "inc.co"
    src.write_text('#include <stdio.h>\n#include "choreo.h"\n#include "my_tiles.h"\n'
                   "__co__ void f(global f32[M] a) {\n"
                   "  parallel p by 1 : block { shared f32[BN] s; }\n}\n")
    rc, _, err = _cli(capsys, "check", src)
    assert rc == 1
    assert err.startswith(f'{src}:3:1: error: #include "my_tiles.h": no such file')
    (tmp_path / "my_tiles.h").write_text("#define BN 64\n")
    rc, _, err = _cli(capsys, "check", src)
    assert rc == 0, err


def test_host_headers_pass_as_before(capsys, tmp_path):
    src = tmp_path / "host.co"
    src.write_text('#include "choreo.h"\n#include <vector>\n#include "cuda_runtime.h"\n'
                   "__co__ void f(global f32[M] a) {\n"
                   "  parallel p by 1 : block { shared f32[16] s; }\n}\n")
    rc, out, err = _cli(capsys, "check", src)
    assert rc == 0 and err == f"choreo: {src}: ok (1 __co__ function)\n"


def test_empty_file(capsys, tmp_path):
    src = tmp_path / "empty.co"
    src.write_text("")
    rc, _, err = _cli(capsys, "check", src)
    assert rc == 0 and f"{src}: note: no __co__ function in the file: nothing to check" in err
    rc, _, err = _cli(capsys, "compile", src)
    assert rc == 1 and err.startswith(f"{src}: error: no kernel")
