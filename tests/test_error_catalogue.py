"""The error catalogue (docs/errors.md) lists every diagnostic the compiler can emit.

The diagnostics are found in the source: every call that reports a program error
or warning (ChoreoError and its subclasses, the stages' `error`/`err`/`refuse`
helpers, `warn`, `Diagnostic(...)`) with its message written in place. A message's
template is its text with each interpolated value written `…`
(`f"'{n.id}' is not declared"` -> `'…' is not declared`). The catalogue writes each
template in backticks; the test fails when a diagnostic has no entry, naming it,
and when an entry matches no diagnostic any more (a reworded message).
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CATALOGUE = ROOT / "docs" / "errors.md"
SOURCES = [ROOT / "choreo_py", ROOT / "lowering"]
REPORTERS = {"ChoreoError", "Unsupported", "ShapeNotYetKnown", "InterpError", "DeadlockError",
             "RaceError", "EventError", "StepLimitError", "EvalError", "refuse", "error", "err",
             "warn", "warning", "Diagnostic",
             "_Unplanned"}  # passes/tmem_plan.py: recorded on the IR, raised by the backend
#: Files whose `error`-named calls are not program diagnostics (argparse's usage errors).
NOT_DIAGNOSTICS = {"cli.py"}


def _template(node: ast.expr) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        text = node.value
    elif isinstance(node, ast.JoinedStr):
        text = "".join(v.value if isinstance(v, ast.Constant) else "…" for v in node.values)
    else:
        return None
    text = " ".join(text.split())
    return text if re.search(r"[A-Za-z]{3}", text) else None


def _message_arg(call: ast.Call, name: str):
    if name == "Diagnostic":
        return call.args[1] if len(call.args) > 1 else None
    return call.args[0] if call.args else None


def diagnostics() -> dict[str, str]:
    """{template: 'path:line' of its first reporting call}."""
    found: dict[str, str] = {}
    for root in SOURCES:
        for path in sorted(root.rglob("*.py")):
            if path.name in NOT_DIAGNOSTICS:
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if not isinstance(node, ast.Call):
                    continue
                f = node.func
                name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", None)
                arg = _message_arg(node, name) if name in REPORTERS else None
                text = _template(arg) if arg is not None else None
                if text:
                    found.setdefault(text, f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


def catalogue_entries() -> set[str]:
    text = CATALOGUE.read_text()
    # `x`, or `` x `y` `` when x has a backtick; then optionally " — example: [page](...)".
    entries = re.findall(r"^- (`+) ?(.+?) ?\1(?: — example: .*)?$", text, re.M)
    return {" ".join(body.split()) for _, body in entries}


def test_the_scan_finds_the_diagnostics():
    found = diagnostics()
    assert len(found) > 300
    assert "'…' is not declared…" in found  # sema, with its did-you-mean tail
    assert "… is not lowered for … yet" in found  # the backends' refusals


def test_every_diagnostic_has_a_catalogue_entry():
    entries = catalogue_entries()
    missing = {t: where for t, where in diagnostics().items() if t not in entries}
    assert not missing, ("diagnostics without an entry in docs/errors.md (add `- `TEMPLATE`` "
                         "lines):\n" + "\n".join(f"  {w}: {t}" for t, w in sorted(
                             missing.items(), key=lambda kv: kv[1])))


def test_no_entry_is_stale():
    stale = catalogue_entries() - set(diagnostics())
    assert not stale, f"docs/errors.md entries that no diagnostic has: {sorted(stale)}"
