"""What the sm_90a backend does not lower yet is refused by name, at its source location.

Each case is an example with one construct changed; the error must name the
construct, carry line and column, and come out of the CLI as a diagnostic
(exit status 1), never a traceback.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from choreo_py.diagnostics import ChoreoError
from choreo_py.driver import compile_file

ROOT = Path(__file__).resolve().parents[1]
GEMM = (ROOT / "examples" / "gemm.co").read_text()


def _after_parallel(src: str) -> str:
    end = "    }\n  }\n}"
    i = src.rindex(end)
    return src[:i] + "    }\n    k_tiles2 = k_tiles + 1;\n  }\n}" + src[i + len(end):]


CASES = {
    # name: (source, message fragment, line, col)
    # a dma.copy inside a role of an MMA kernel (thread kernels lower it: lowering/core/
    # simt.py; at block level passes/sync_copies.py makes it a TMA load)
    "dma_copy": (GEMM.replace("        call croq::cuda::setreg_dec(40);\n",
                              "        call croq::cuda::setreg_dec(40);\n"
                              "        dma.copy C.subspan(BM, BN).at(tm, tn) => c_buf;\n"),
                 "dma.copy is not lowered for sm_90a yet", 26, 9),
    "acc_128_rows": (GEMM.replace("#define WG_M 64", "#define WG_M 128"),
                     "an accumulator of 128 rows per warpgroup", 40, 9),
    "future_waited_directly": (
        GEMM.replace("trigger full.at(order++) after a_load, b_load;",
                     "wait a_load, b_load;\n          trigger full.at(order++);"),
        "tma.load 'a_load' that no 'trigger ... after a_load' publishes", 30, 11),
    "event_by_slot": (GEMM.replace("wait full.at(order);", "wait full[slot];"),
                      "indexing event 'full' by physical slot", 43, 11),
    "statement_after_parallel": (_after_parallel(GEMM),
                                 "a parallel region that joins (code after it, or a loop or "
                                 "branch around it) whose roles set their register counts",
                                 23, 5),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_refused_by_name_and_place(case, tmp_path):
    src, message, line, col = CASES[case]
    path = tmp_path / f"{case}.co"
    path.write_text(src)
    with pytest.raises(ChoreoError) as info:
        compile_file(str(path), "pyptx", "sm_90a")
    err = info.value
    assert message in err.message
    assert err.message.endswith("is not lowered for sm_90a yet")
    assert (err.loc.line, err.loc.col) == (line, col)


@pytest.mark.parametrize("case", ["dma_copy", "future_waited_directly"])
def test_cli_reports_refusals_as_diagnostics(case, tmp_path):
    src, message, line, col = CASES[case]
    path = tmp_path / f"{case}.co"
    path.write_text(src)
    res = subprocess.run([sys.executable, "-m", "choreo_py", "compile", "--target", "sm_90a",
                          "--emit", "ptx", str(path)], capture_output=True, text=True, cwd=ROOT)
    assert res.returncode == 1
    assert f"{case}.co:{line}:{col}: error: " in res.stderr
    assert message in res.stderr
    assert "Traceback" not in res.stderr
