"""The compilation pipeline, stage by stage; each stage's output can be printed.

    preprocess -> parse -> AST -> sema -> tile IR -> passes -> backend

`compile_file(path, emit=...)` runs the stages up to the one asked for and
returns its text. The driver owns the order: sema builds the IR (it knows
no target), then the passes of passes/pipeline.py decide the IR facts that
depend on layouts, memory and the target, then the target's backend
(`targets.get(target).backend`) lowers it. `print_ir_after=PASS` stops after
that pass and returns the IR as it is then.
"""
from __future__ import annotations

import os
from typing import Iterable, Optional

from . import check, diagnostics, frontend, ir, limits, sema, targets
from .diagnostics import ChoreoError, Diagnostic
from .ir.printer import print_module
from .passes import pipeline

TARGETS = targets.NAMES
EMITS = ("ast", "ir", "pyptx", "ptx", "cubin")
OUTPUT_SUFFIX = {"pyptx": "py", "ptx": "ptx", "cubin": "cubin"}


def default_output(path: str, emit: str, target: str) -> str:
    """Where `choreo compile` writes a backend's output without -o: beside the source,
    named after it and the target (`flash_atten.co` -> `flash_atten.sm100a.py`)."""
    stem = os.path.splitext(path)[0]
    return f"{stem}.{target.replace('_', '')}.{OUTPUT_SUFFIX[emit]}"


def _target(name: str) -> targets.Target:
    try:
        return targets.get(name)
    except targets.UnknownTarget as e:
        raise ChoreoError(str(e)) from None


def build_ir(program, target: str = targets.COMPILE_DEFAULT,
             print_ir_after: Optional[str] = None) -> ir.Module:
    """The IR of a parsed program with every pass run (up to `print_ir_after`)."""
    # The strict build reports what the lenient `check` would, as errors.
    frontend.check_parse_rules(program)
    try:
        # every rule, before any IR is built (guarded: absurd nesting is a user error)
        frontend._guarded(program.loc, check.check_program, program, True, True)
    except ChoreoError as rule_errors:
        # The rule checks own every rule of the language; the IR adds what only its
        # passes find (a pipeline that hangs, say), which may explain the same mistake
        # in its terms: both are reported, each fact by its one owner.
        found = rule_errors.diagnostics + _pass_findings(program, target)
        raise ChoreoError(diagnostics=found) from None
    return pipeline.build_module(program, _target(target), strict=True,
                                 stop_after=print_ir_after)


def _pass_findings(program, target: str) -> list:
    """The errors of the IR's passes over a program the rule checks refused: none when sema
    builds no IR for it (sema's own errors restate rules the checks own, in other words)."""
    try:
        module = sema.build_module(program)
    except ChoreoError:
        return []
    try:
        pipeline.run_module(module, _target(target))
    except ChoreoError as e:
        return list(e.diagnostics)
    return []


def ir_of_file(path: str, include_dirs: Iterable[str] = (), defines: Optional[dict] = None,
               target: str = targets.COMPILE_DEFAULT) -> ir.Module:
    return build_ir(frontend.parse_file(path, include_dirs, defines), target)


def check_program(program, target: str = targets.COMPILE_DEFAULT):
    """`choreo check`'s semantic stage: sema's errors, then the passes, whose pipeline-check
    findings are warnings (a program that would hang breaks no rule of the language)."""
    rec = _target(target)
    try:
        return sema.check_program(
            program, on_function=lambda fn: pipeline.run_function(fn, rec, strict=False))
    except ChoreoError as e:
        raise ChoreoError(diagnostics=[_one_owner(d) for d in e.diagnostics]) from None


def check_strict(program, target: str = targets.COMPILE_DEFAULT) -> None:
    """`choreo check --strict`: what `compile --target` reports about the program, as
    errors (the rules, sema's errors, the passes' findings for the target), without
    building code; a construct the tile IR cannot express yet leaves its function to the
    rules alone (a valid program, which compile refuses by name: `check --lowerable`
    lists those). One difference, by design: a non-void function without 'return' is an
    error here, a warning for compile (check/walker.py, strict_check_error)."""
    rec = _target(target)
    frontend.check_parse_rules(program)
    try:
        frontend._guarded(program.loc, check.check_program, program, True)
    except ChoreoError as rule_errors:
        found = rule_errors.diagnostics + _pass_findings(program, target)
        raise ChoreoError(diagnostics=found) from None
    sema.check_program(program, strict=True, on_function=lambda fn:
                       pipeline.run_function(fn, rec, strict=True))


def _one_owner(d):
    """Each fact once: sema's error about a name at the place where the rule checks (which
    ran first, and own the language's rules) warned about that name is the warning's fact,
    reported once, in the rule checks' words, as the error it is where sema builds the
    code (a name not declared: their 'did you mean' knows every name of the function)."""
    for w in diagnostics.WARNINGS:
        if w.loc is not None and w.loc == d.loc and _subject(w.message) == _subject(d.message):
            diagnostics.WARNINGS.remove(w)
            return Diagnostic("error", w.message, w.loc)
    return d


def _subject(message: str):
    """The name a message is about: its first quoted word ('x' in "'x' is not declared")."""
    parts = message.split("'")
    return parts[1] if len(parts) > 2 else None


def compile_file(path: str, emit: str = "pyptx", target: str = targets.COMPILE_DEFAULT,
                 include_dirs: Iterable[str] = (), defines: Optional[dict] = None,
                 print_ir_after: Optional[str] = None):
    """The text (bytes for a cubin) of `emit` for the file; every stage runs with the
    recursion the front end's limits (frontend/limits.py) are sized for."""
    with limits.deep_recursion():
        return _compile_file(path, emit, target, include_dirs, defines, print_ir_after)


def _compile_file(path, emit, target, include_dirs, defines, print_ir_after):
    _target(target)
    if print_ir_after is not None and print_ir_after not in pipeline.NAMES:
        raise ChoreoError(f"--print-ir-after {print_ir_after}: no such pass (the passes, "
                          f"in order: {', '.join(pipeline.NAMES)})")
    program = frontend.parse_file(path, include_dirs, defines)
    if emit == "ast":
        frontend.check_program(program)
        return frontend.dump_ast(program)
    module = build_ir(program, target, print_ir_after)
    if emit == "ir" or print_ir_after is not None:
        return print_module(module)
    if emit in ("pyptx", "ptx", "cubin"):
        from .runtime import build  # the backend: lowering/<arch> (cubin: bytes)

        return build.emit(module, path, emit, target)
    raise ChoreoError(f"unknown --emit {emit} (choose {', '.join(EMITS)})")
