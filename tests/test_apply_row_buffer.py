"""A shared f32 vector of the rows inside `apply` (`sc.at(i)`): one role stores each row's
value from an apply over a row vector, another reads it in an apply over its accumulator
(examples/flash_atten_blackwell.co hands the softmax roles' rescale factors to the
correction role this way). Other uses are refused by name, by the interpreter and by the
sm_100a lowering: a store from a 2-D apply (each row's element would be written by every
column), an index other than the apply's row index."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

import choreo_py
from choreo_py import cli
from choreo_py.interp.errors import InterpError
from fa_helpers import bshd

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "flash_atten_blackwell.co"

STORE = "                sc0.at(i) = __exp2f((m0_prev.at(i) - m0.at(i)) * 0.12751743f);\n"
READ = "              o0.at(i, j) = o0.at(i, j) * sc0.at(i);   // the rescale of row i\n"


def _variant(tmp_path, old, new) -> Path:
    src = EXAMPLE.read_text()
    assert src.count(old) == 1
    path = tmp_path / "v.co"
    path.write_text(src.replace(old, new))
    return path


def _interpret(path):
    q, k, v = bshd(1, 200, 1, 1), bshd(1, 200, 1, 2), bshd(1, 200, 1, 3)
    choreo_py.interpret(str(path), dict(Q=q, K=k, V=v, O=torch.zeros_like(q)), target="sm_100a")


def _compile_error(path, tmp_path, capsys) -> str:
    rc = cli.main(["compile", str(path), "--target", "sm_100a", "-o", str(tmp_path / "x.py")])
    assert rc == 1
    return capsys.readouterr().err


def test_a_store_from_a_2d_apply_is_refused(tmp_path, capsys):
    old = "          copy(m0_prev, m0);\n"
    new = "          apply {i, j} in s0.span\n            sc0.at(i) = s0.at(i, j);\n" + old
    path = _variant(tmp_path, old, new)
    with pytest.raises(InterpError, match=r"a store to 'sc0' inside an apply over the 2-D 's0'"):
        _interpret(path)
    err = _compile_error(path, tmp_path, capsys)
    assert "error: a store into 'sc0' inside an apply over the 2-D 's0' is not lowered" in err
    assert "sc0.at(i) = s0.at(i, j);\n" in err and "^" in err


def test_an_index_other_than_the_row_is_refused(tmp_path, capsys):
    path = _variant(tmp_path, READ, READ.replace("sc0.at(i)", "sc0.at(j)"))
    with pytest.raises(InterpError, match=r"'sc0' inside apply other than as a vector of the "
                       r"128 rows indexed by the apply's row index 'i'"):
        _interpret(path)
    err = _compile_error(path, tmp_path, capsys)
    assert "error: 'sc0' inside apply other than as a shared f32 vector of the 128 rows " \
        "indexed by the apply's row index 'i' is not lowered" in err


def test_the_stored_factor_is_what_the_reader_uses(tmp_path):
    """Storing 1.0 instead of the factor changes the result: the read is of the buffer.
    (Keys past the first tile 4 x larger: the row maxima grow by more than the softmax's
    threshold, so factors other than 1 are stored after the first step.)"""
    path = _variant(tmp_path, STORE, "                sc0.at(i) = 1.0f;\n")
    q, k, v = bshd(1, 200, 1, 1), bshd(1, 330, 1, 2), bshd(1, 330, 1, 3)
    k[:, 128:] *= 4
    good, bad = torch.zeros_like(q), torch.zeros_like(q)
    choreo_py.interpret(str(EXAMPLE), dict(Q=q, K=k, V=v, O=good), target="sm_100a")
    choreo_py.interpret(str(path), dict(Q=q, K=k, V=v, O=bad), target="sm_100a")
    assert (good.float() - bad.float()).abs().max() > 1e-2
