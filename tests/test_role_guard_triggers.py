"""A role of single threads whose condition reads a run-time value, around a `trigger`
(sema/role_forms.py: GuardedBody): the threads the guard leaves out still run the body's
waits and triggers, so the events, which count one arrival per member of the role, see
every generation complete once, after the threads the guard selects have done their part.
tests/co/role_run_time_trigger.co is a ping-pong of two group-4 roles (4 warps each); the
interpreter and the emulator (strict: a race or a hang is an error) run it on both targets
for no, some and all threads selected, and ptxas assembles it.
"""
from __future__ import annotations

from pathlib import Path

import pytest

import choreo_py
from choreo_py.diagnostics import ChoreoError
from choreo_py.driver import compile_file

PINGPONG = Path(__file__).parent / "co" / "role_run_time_trigger.co"
TARGETS = ("sm_90a", "sm_100a")


def test_the_guard_is_pushed_down_to_the_per_thread_statements() -> None:
    ir = compile_file(str(PINGPONG), "ir", "sm_90a")
    assert "event full pending arrivals=128" in ir and "event empty ready arrivals=128" in ir
    assert ("for i in 0..k {\n        wait empty\n        if g__t % 128 < n {\n"
            "          var x: s32 = i * 2") in ir
    assert "x := x + g__t % 128\n        }\n        trigger full\n" in ir


@pytest.mark.emu
@pytest.mark.parametrize("target", TARGETS)
def test_interpreter_and_emulator_complete_every_round(target) -> None:
    """The guarded statements run in more warps as n grows (the guard is evaluated at run
    time); every run completes without a race or a hang."""
    from choreo_py.emu.api import EmuStats

    ran = {}
    for n, k in ((0, 3), (40, 3), (128, 3), (40, 0)):
        choreo_py.interpret(str(PINGPONG), target=target).pingpong(n, k)
        ran[n, k] = EmuStats()
        choreo_py.emulate_program(str(PINGPONG), target=target, stats=ran[n, k]).pingpong(n, k)
    assert ran[40, 0].instructions < ran[0, 3].instructions < ran[40, 3].instructions \
        < ran[128, 3].instructions


@pytest.mark.ptxas
@pytest.mark.parametrize("target", TARGETS)
def test_assembles(target) -> None:
    from choreo_py.runtime.build import ptxas

    assert ptxas(compile_file(str(PINGPONG), "ptx", target), target)[0] is not None


PROGRAM = """\
__co__ void r(int n) {{
  parallel p by 1 : block {{
    shared event e[2];
    parallel g by 2 : group-4, t by 128 : thread {{
      mutable int lim = n;
      inthreads.async (g == 1 && t < lim) {{
{body}
      }}
    }}
  }}
}}
"""


@pytest.mark.parametrize("body, line, col, message", [
    ("        mutable int j = 0;\n        foreach {i} in [4] { j = j + t; trigger e.at(j); }",
     8, 41, "a trigger that reads 'j' (which only the threads the guard selects compute), an "
     "operation of the whole role"),
    ("        foreach {i} in [4] { if (i > 5) { break; } trigger e.at(i); }", 7, 9,
     "a 'foreach' with a 'break' and a trigger, an operation of the whole role"),
    ("        int j = t * 2;\n        trigger e.at(0);\n        int m = j + 1;", 9, 13,
     "a trigger between the definition of 'j' and a use of it, an operation of the whole "
     "role"),
    ("        foreach {i} in [4] { lim = lim - 1; trigger e.at(i); }", 6, 7,
     "a trigger, the guard reading 'lim', which the body assigns, an operation of the whole "
     "role"),
])
def test_what_stays_refused(tmp_path, body, line, col, message) -> None:
    """What every member runs must be the same in every member; a name one guarded run
    defines cannot reach past a trigger into the next."""
    path = tmp_path / "r.co"
    path.write_text(PROGRAM.format(body=body))
    with pytest.raises(ChoreoError) as info:
        compile_file(str(path), "ir", "sm_90a")
    want = f"an 'inthreads' condition on run-time values around {message}"
    assert info.value.message.startswith(want), info.value.render()
    assert f"r.co:{line}:{col}: error:" in info.value.render(), info.value.render()
