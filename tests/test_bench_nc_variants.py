"""bench/attention.py's non-causal variants (--nc-variants) build the program they name:
the switches of bench/variants/flash_atten_nc_sched.co and flash-attn-4's register split."""
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))

import attention  # noqa: E402
import choreo_py  # noqa: E402


def _ptx(variant: str) -> str:
    return choreo_py.load(attention.nc_source(variant), target="sm_90a").ptx


def _budgets(ptx: str) -> list:
    return [ln.strip() for ln in ptx.splitlines() if "setmaxnreg" in ln]


def test_r24_moves_the_register_split():
    assert _budgets(_ptx("r24")) == ["setmaxnreg.dec.sync.aligned.u32 24;",
                                     "setmaxnreg.inc.sync.aligned.u32 240;"]
    assert _budgets(_ptx("sched")) == ["setmaxnreg.dec.sync.aligned.u32 40;",
                                       "setmaxnreg.inc.sync.aligned.u32 232;"]


@pytest.mark.parametrize("switch", ["FUSE", "PP"])
def test_capital_parts_are_the_programs_switches(switch):
    got = _ptx(f"sched+{switch}")
    want = choreo_py.load(attention.NC_SCHED, target="sm_90a", defines={switch: "1"}).ptx
    assert got == want
    assert got != _ptx("sched")
