"""`mma.store.direct acc, <global tile>`: an accumulator stored from each thread's
registers straight to global memory (sm_100a: predicated st.global.v4, no staging tile).
flash_atten_blackwell.co's emulator and interpreter cases run it (a partial last query
tile among them: its rows past Q_SEQ are not stored); here its diagnostics and
refusals: a shared destination or '.transp' is an error, sm_90a refuses it by name, and
sm_100a refuses a tile whose columns it cannot prove inside the tensor."""
from __future__ import annotations

from pathlib import Path

import pytest

from choreo_py import cli

ROOT = Path(__file__).resolve().parent.parent
GEMM = ROOT / "examples" / "gemm.co"
ATTN = ROOT / "examples" / "flash_atten_blackwell.co"
STORE = ("        mma.store acc, c_buf.subspan(WG_M, BN).at(cid, 0);\n"
         "        // One store of the whole tile, issued once both warpgroups wrote their rows.\n"
         "        tma.copy c_buf => C.subspan(BM, BN).at(tm, tn);\n")
DIRECT = "        mma.store.direct acc, C.subspan(WG_M, BN).at(2 * tm + cid, tn);\n"


def _compile(tmp_path, src: str, target: str, capsys) -> tuple[int, str, str]:
    path = tmp_path / "v.co"
    path.write_text(src)
    rc = cli.main(["compile", str(path), "--target", target, "-o", str(tmp_path / "x.py")])
    line = next(i for i, ln in enumerate(src.splitlines(), 1) if "mma.store" in ln
                and not ln.lstrip().startswith("//"))
    return rc, capsys.readouterr().err, f"v.co:{line}:"


def _gemm_direct() -> str:
    src = GEMM.read_text()
    assert src.count(STORE) == 1
    return src.replace(STORE, DIRECT)


def test_sm90a_refuses_a_direct_store_by_name(tmp_path, capsys):
    rc, err, at = _compile(tmp_path, _gemm_direct(), "sm_90a", capsys)
    assert rc == 1
    assert at in err and "mma.store.direct (a store of an accumulator straight to global " \
        "memory) on this target" in err


def test_sm100a_refuses_columns_it_cannot_prove_inside(tmp_path, capsys):
    rc, err, at = _compile(tmp_path, _gemm_direct(), "sm_100a", capsys)
    assert rc == 1
    assert at in err and "mma.store.direct whose columns are not statically inside the " \
        "tensor's last dimension" in err


@pytest.mark.parametrize("old, new, message", [
    ("mma.store.direct o0, O_head.subspan(BLOCK_M, DIM).at(2 * bm, 0);",
     "mma.store.direct o0, q0_shared;",
     "'mma.store.direct' writes a global tile, and 'q0_shared' is not a global tensor"),
    ("mma.store.direct o0, O_head.subspan(BLOCK_M, DIM).at(2 * bm, 0);",
     "mma.store.direct.transp o0, O_head.subspan(BLOCK_M, DIM).at(2 * bm, 0);",
     "'mma.store.direct' is a plain store: not with '.transp' or '.mask'"),
])
def test_a_direct_store_is_a_plain_store_into_global(tmp_path, capsys, old, new, message):
    src = ATTN.read_text()
    assert src.count(old) == 1
    rc, err, at = _compile(tmp_path, src.replace(old, new), "sm_100a", capsys)
    assert rc == 1 and message in err and "error:" in err
