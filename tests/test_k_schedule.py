"""`[[schedule(k_tiles(...))]]` on an MMA: the K steps are issued in the order given.

Checked on the PTX of both targets: the k-step descriptors (or TMEM columns) follow
the schedule, and after a folded `mma.fill 0` the first *issued* step is the one that
overwrites the accumulator (wgmma scale-d 0 / tcgen05 enable-input-d false).
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from choreo_py.driver import compile_file

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fa_helpers import assemble  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
GEMM = (ROOT / "examples" / "gemm.co").read_text()
SEED = (ROOT / "examples" / "flash_atten_causal.co").read_text()
ORDER = (2, 0, 3, 1)


def _ptx(tmp_path, src: str, target: str) -> str:
    path = tmp_path / "k.co"
    path.write_text(src)
    ptx = compile_file(str(path), "ptx", target)
    assemble(ptx, target)
    return ptx


def _a_offsets(ptx: str) -> list[int]:
    """Byte offsets (descriptor units of 16 B) of the A operand of each wgmma, in order."""
    offs = {m[0]: int(m[2]) for m in re.findall(r"add\.s64 (%desc_k_\d+), (%\w+), (\d+);", ptx)}
    out = []
    for a in re.findall(r"wgmma\.mma_async[^}]*\}, (%\w+), %\w+", ptx):
        out.append(offs.get(a, 0))
    return out


def test_gemm_k_steps_follow_the_schedule(tmp_path):
    src = GEMM.replace("          step = mma.row.row.async acc,",
                       f"          [[schedule(k_tiles({', '.join(map(str, ORDER))}))]]\n"
                       "          step = mma.row.row.async acc,")
    plain = _a_offsets(_ptx(tmp_path, GEMM, "sm_90a"))
    sched = _a_offsets(_ptx(tmp_path, src, "sm_90a"))
    assert len(plain) == len(sched) == 4
    assert sched == [plain[k] for k in ORDER]  # BK = 64: 4 steps of K = 16 (2 units each)
    assert plain == [0, 2, 4, 6]


@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_first_issued_step_overwrites_after_a_folded_fill(tmp_path, target):
    # The seed's prologue QK follows `acc_s = mma.fill.f32 0.0f` (folded into the MMA).
    order = (7, 6, 5, 4, 3, 2, 1, 0)
    old = "        first_qk = mma.row.row.async acc_s,"
    assert old in SEED
    src = SEED.replace(old, f"        [[schedule(k_tiles({', '.join(map(str, order))}))]]\n" + old)
    ptx = _ptx(tmp_path, src, target)
    if target == "sm_90a":
        first = re.search(r"wgmma\.mma_async[^}]*\}, (%\w+), (%\w+), (\d)", ptx)
        assert first.group(3) == "0"  # scale-d 0: overwrite
        offs = {m[0]: int(m[2]) for m in re.findall(r"add\.s64 (%desc_k_\d+), (%\w+), (\d+);", ptx)}
        assert offs[first.group(1)] != 0  # ... and it is K step 7, not step 0
    else:
        steps = re.findall(r"tcgen05\.mma\.cta_group::1\.kind::f16 \[[^]]+\], (\S+), (\S+), "
                           r"%\w+, (%\w+);", ptx)
        assert len(steps) >= 8
        assert steps[0][2] == "%overwrite" and all(s[2] != "%overwrite" for s in steps[1:8])
