"""Running the whole-language semantic pass (choreo_py.check) on test programs.

Each rule test is a row (rule, invalid program, line, col, message fragment,
valid counterpart): the invalid program must report that message at that
place, and the valid one nothing at all, in strict mode (as `compile` runs
the pass); it must then also pass `choreo check` as a whole (parse rules,
this pass, and the tile IR's analysis).
"""
from __future__ import annotations

from choreo_py import check, frontend
from choreo_py.diagnostics import ChoreoError, Diagnostic, take_warnings


def diagnostics(text: str, strict: bool = True) -> list[Diagnostic]:
    """Everything the pass reports on `text` (errors and warnings)."""
    take_warnings()
    program = frontend.parse_text(text, "t.co")
    try:
        frontend.check_parse_rules(program)
        check.check_program(program, strict=strict)
        found = []
    except ChoreoError as e:
        found = list(e.diagnostics)
    return found + take_warnings()


def assert_reports(text: str, line: int, col: int, fragment: str, strict: bool = True,
                   severity: str = "error") -> None:
    found = diagnostics(text, strict)
    hits = [d for d in found if fragment in d.message and d.severity == severity]
    assert hits, f"no {severity} containing {fragment!r}; got {[_show(d) for d in found]}"
    assert any((d.loc.line, d.loc.col) == (line, col) for d in hits), \
        f"{fragment!r} reported at {[_show(d) for d in hits]}, expected {line}:{col}"


def assert_clean(text: str) -> None:
    found = diagnostics(text)
    assert not found, [_show(d) for d in found]
    take_warnings()
    frontend.check_text(text, "t.co")       # the whole `choreo check` accepts it too
    take_warnings()


def _show(d: Diagnostic) -> str:
    return f"{d.loc.line}:{d.loc.col} {d.severity}: {d.message}" if d.loc else d.message


def run_case(case) -> None:
    rule, bad, line, col, fragment, good = case
    assert_reports(bad, line, col, fragment)
    assert_clean(good)


def ids(cases) -> list[str]:
    return [c[0] for c in cases]
