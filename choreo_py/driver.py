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

from . import check, frontend, ir, limits, sema, targets
from .diagnostics import ChoreoError
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
        # The IR's own analysis may explain the same mistake in its terms (a pipeline
        # that hangs, say): both are reported.
        try:
            pipeline.build_module(program, _target(target), strict=True)
        except ChoreoError as ir_errors:
            raise ChoreoError(diagnostics=_unique(rule_errors.diagnostics
                                                  + ir_errors.diagnostics)) from None
        raise
    return pipeline.build_module(program, _target(target), strict=True,
                                 stop_after=print_ir_after)


def _unique(diags: list) -> list:
    """Each message once per place (the rules and the IR may both say 'not declared')."""
    seen, out = set(), []
    for d in diags:
        key = (d.message, d.loc.line if d.loc else None, d.loc.col if d.loc else None)
        if key not in seen:
            seen.add(key)
            out.append(d)
    return out


def ir_of_file(path: str, include_dirs: Iterable[str] = (), defines: Optional[dict] = None,
               target: str = targets.COMPILE_DEFAULT) -> ir.Module:
    return build_ir(frontend.parse_file(path, include_dirs, defines), target)


def check_program(program, target: str = targets.COMPILE_DEFAULT):
    """`choreo check`'s semantic stage: sema's errors, then the passes, whose pipeline-check
    findings are warnings (a program that would hang breaks no rule of the language)."""
    rec = _target(target)
    return sema.check_program(
        program, on_function=lambda fn: [pipeline.run_kernel(k, rec, strict=False)
                                         for k in fn.kernels])


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
