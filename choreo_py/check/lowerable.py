"""What would not compile: `choreo check --lowerable --target sm_90a`.

The semantic pass checks the whole language; the tile IR (and so the
backends) covers a part of it.  This report runs the IR builder over every
function without stopping at the first construct it cannot express and lists
each such construct with its location (a note per construct, never an
error: the program is valid), then the functions that do build, for the
target named.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..frontend import ast as A
from ..diagnostics import ChoreoError, Diagnostic


@dataclass
class FunctionReport:
    name: str
    notes: list[Diagnostic] = field(default_factory=list)

    @property
    def compiles(self) -> bool:
        return not self.notes


def skipped_constructs(func: A.FunctionDef) -> list:
    """The `Unsupported` notes of a lenient IR build of `func` (empty: it lowers)."""
    from ..sema import lenient_skips

    return lenient_skips(func)


def report(program: A.Program, target: str, build) -> list[FunctionReport]:
    """`build(program)` builds a one-function program's IR for `target` with its passes
    (the caller's: planning lives above this layer); its errors become notes."""
    out = []
    for func in program.functions:
        rep = FunctionReport(func.name)
        seen: set[str] = set()
        for u in skipped_constructs(func):
            derived = " (declared by " in u.construct
            if derived and (u.construct in seen
                            or any(f"declared by {c})" in u.construct for c in seen)):
                continue            # a use of a name an earlier note already explains
            seen.add(u.construct)
            rep.notes.append(Diagnostic("note", f"not compiled for {target}: {u.message}", u.loc))
        if not rep.notes:   # the IR builds: the target's own planning may still refuse
            try:
                build(A.Program(items=[func], file=program.file, loc=program.loc))
            except ChoreoError as e:
                rep.notes += [Diagnostic("note", f"not compiled for {target}: {d.message}",
                                         d.loc) for d in e.diagnostics]
        out.append(rep)
    return out


def render(reports: list[FunctionReport], target: str) -> str:
    lines = [n.render() for rep in reports for n in rep.notes]
    ok = sum(r.compiles for r in reports)
    rest = [r.name for r in reports if not r.compiles]
    lines.append(f"{ok} of {len(reports)} functions compile for {target}"
                 + (f" (not compiled: {', '.join(rest)})" if rest else ""))
    return "\n".join(lines)
