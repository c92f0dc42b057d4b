"""The error catalogue (docs/errors.md) lists every diagnostic the compiler can emit.

The diagnostics are found in the source: every call that reports a program error
or warning (ChoreoError and its subclasses, the stages' `error`/`err`/`refuse`
helpers, `warn`, `Diagnostic(...)`, and every helper or exception class found to pass
its message on to one of those: `lenient_error`, the backends' `_refuse`, the emulator's
`race`, ...) with its message written in place. A message's
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
             "RaceError", "EventError", "StepLimitError", "EvalError", "EmuError", "refuse", "_refuse",
             "error", "err", "warn", "warning", "Diagnostic",
             "_Unplanned",  # passes/tmem_plan.py: recorded on the IR, raised by the backend
             "UnreadableSource"}  # source.py: a file's bytes, reported by the preprocessor
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


def _call_name(call: ast.Call) -> str | None:
    f = call.func
    return f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", None)


def _message_arg(call: ast.Call, name: str, reporters: dict[str, int]):
    i = reporters[name]
    return call.args[i] if len(call.args) > i else None


def _trees() -> list[tuple[Path, ast.AST]]:
    return [(path, ast.parse(path.read_text())) for root in SOURCES
            for path in sorted(root.rglob("*.py")) if path.name not in NOT_DIAGNOSTICS]


def _reporters(trees) -> dict[str, int]:
    """{callable name: index of its message argument}: the named reporters, then, until
    nothing changes, every exception class derived from one and every function whose
    parameter is handed on as the whole message of a reporter call (a helper such as
    `def lenient_error(self, message, loc): self.errors.append(Diagnostic(..., message, loc))`)."""
    found = {name: 1 if name == "Diagnostic" else 0 for name in REPORTERS}
    changed = True
    while changed:
        changed = False
        for _, tree in trees:
            for node in ast.walk(tree):
                new = _reporter_of(node, found)
                if new is not None and new[0] not in found:
                    found[new[0]] = new[1]
                    changed = True
    return found


def _reporter_of(node: ast.AST, found: dict[str, int]) -> tuple[str, int] | None:
    if isinstance(node, ast.ClassDef):
        bases = {b.attr if isinstance(b, ast.Attribute) else getattr(b, "id", None)
                 for b in node.bases}
        return (node.name, 0) if bases & found.keys() - {"Diagnostic"} else None
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    params = [a.arg for a in node.args.args if a.arg not in ("self", "cls")]
    for call in ast.walk(node):
        name = _call_name(call) if isinstance(call, ast.Call) else None
        if name not in found or name == node.name:
            continue
        arg = _message_arg(call, name, found)
        for i, p in enumerate(params):
            if arg is not None and _passes_on(arg, p):
                return node.name, i
    return None


def _passes_on(arg: ast.expr, param: str) -> bool:
    """`param` is the message, whole or with a fixed tail (`msg + ' in #if expression'`)."""
    if isinstance(arg, ast.BinOp) and isinstance(arg.op, ast.Add):
        arg = arg.left
    elif isinstance(arg, ast.JoinedStr) and arg.values:
        head = arg.values[0]
        if isinstance(head, ast.FormattedValue) and all(
                isinstance(v, ast.Constant) for v in arg.values[1:]) and \
                isinstance(head.value, ast.Name) and head.value.id == param:
            return head.value.id in ("message", "msg")
    return isinstance(arg, ast.Name) and arg.id == param


def diagnostics() -> dict[str, str]:
    """{template: 'path:line' of its first reporting call}."""
    trees = _trees()
    reporters = _reporters(trees)
    found: dict[str, str] = {}
    for path, tree in trees:
        for node in ast.walk(tree):
            name = _call_name(node) if isinstance(node, ast.Call) else None
            arg = _message_arg(node, name, reporters) if name in reporters else None
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
    # reported through helpers, which the scan finds by following the message
    reporters = _reporters(_trees())
    for helper in ("lenient_error", "_refuse", "race", "misuse", "fail"):
        assert helper in reporters, helper
    assert "a … buffer is declared outside any 'parallel' block" in found  # lenient_error
    assert "an MMA outside a parallel region's role" in found  # sm_100a's _refuse


def test_every_diagnostic_has_a_catalogue_entry():
    entries = catalogue_entries()
    missing = {t: where for t, where in diagnostics().items() if t not in entries}
    assert not missing, ("diagnostics without an entry in docs/errors.md (add `- `TEMPLATE`` "
                         "lines):\n" + "\n".join(f"  {w}: {t}" for t, w in sorted(
                             missing.items(), key=lambda kv: kv[1])))


def test_no_entry_is_stale():
    stale = catalogue_entries() - set(diagnostics())
    assert not stale, f"docs/errors.md entries that no diagnostic has: {sorted(stale)}"
