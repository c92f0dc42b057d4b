"""The compilation pipeline, stage by stage; each stage's output can be printed.

    preprocess -> parse -> AST -> sema -> tile IR (verified, passes run) -> backend

`compile_file(path, emit=...)` runs the stages up to the one asked for and
returns its text.
"""
from __future__ import annotations

import os
from typing import Iterable, Optional

from . import check, frontend, ir, sema
from .diagnostics import ChoreoError
from .ir_printer import print_module

TARGETS = ("sm_100a", "sm_90a")
EMITS = ("ast", "ir", "pyptx", "ptx", "cubin")
OUTPUT_SUFFIX = {"pyptx": "py", "ptx": "ptx", "cubin": "cubin"}


def default_output(path: str, emit: str, target: str) -> str:
    """Where `choreo compile` writes a backend's output without -o: beside the source,
    named after it and the target (`flash_atten.co` -> `flash_atten.sm100a.py`)."""
    stem = os.path.splitext(path)[0]
    return f"{stem}.{target.replace('_', '')}.{OUTPUT_SUFFIX[emit]}"


def build_ir(program, target: str = "sm_100a") -> ir.Module:
    # The strict build reports what the lenient `check` would, as errors.
    frontend.check_parse_rules(program)
    try:
        # every rule, before any IR is built (guarded: absurd nesting is a user error)
        frontend._guarded(program.loc, check.check_program, program, True)
    except ChoreoError as rule_errors:
        # The IR's own analysis may explain the same mistake in its terms (a pipeline
        # that hangs, say): both are reported.
        try:
            sema.build_module(program, target)
        except ChoreoError as ir_errors:
            raise ChoreoError(diagnostics=rule_errors.diagnostics
                              + ir_errors.diagnostics) from None
        raise
    return sema.build_module(program, target)


def ir_of_file(path: str, include_dirs: Iterable[str] = (), defines: Optional[dict] = None,
               target: str = "sm_100a") -> ir.Module:
    return build_ir(frontend.parse_file(path, include_dirs, defines), target)


def compile_file(path: str, emit: str = "pyptx", target: str = "sm_100a",
                 include_dirs: Iterable[str] = (), defines: Optional[dict] = None):
    if target not in TARGETS:
        raise ChoreoError(f"unknown target '{target}' (choose {', '.join(TARGETS)})")
    program = frontend.parse_file(path, include_dirs, defines)
    if emit == "ast":
        frontend.check_program(program)
        return frontend.dump_ast(program)
    module = build_ir(program, target)
    if emit == "ir":
        return print_module(module)
    if emit in ("pyptx", "ptx", "cubin"):
        from .runtime import build  # the backend: lowering/<arch> (cubin: bytes)

        return build.emit(module, path, emit, target)
    raise ChoreoError(f"--emit {emit}: the {target} backend is not part of this build yet; "
                      "'--emit ir' shows the tile IR it will lower")
