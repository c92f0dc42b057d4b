"""Semantic analysis: from the AST to a verified tile IR.

`build_module(program)` analyses every `__co__` function and returns the IR
module; constructs that are valid Choreo but that the tile IR cannot express
yet raise `Unsupported` (a ChoreoError naming the construct and its place).
`check_program(program)` is what `choreo check` runs: it reports every
semantic error of the functions the IR covers and accepts the others
without building IR for them.
"""
from __future__ import annotations

from .. import ast as A
from .. import ir
from ..diagnostics import ChoreoError, warn
from ..ir_verify import verify_kernel
from ..passes import budget, layouts, pipeline_check, smem_plan, static_faults
from .kernel import KernelBuilder
from .values import ShapeNotYetKnown, Unsupported

__all__ = ["build_module", "check_program", "Unsupported"]


def _build_function(func: A.FunctionDef, target: str, strict: bool) -> ir.Function:
    builder = KernelBuilder(func, lenient=not strict)
    try:
        fn = builder.build()
    except ShapeNotYetKnown:
        builder, fn = _build_with_accumulator_shapes(func, strict)
    else:
        if any(isinstance(u, ShapeNotYetKnown) for u in builder.skipped):
            builder, fn = _build_with_accumulator_shapes(func, strict)
    if builder.skipped:
        # Analysed for errors, but the IR is incomplete: no passes on it.
        raise builder.skipped[0]
    for k in fn.kernels:
        verify_kernel(k)
        # Faults every run reaching them would report: errors for `check` too.
        static_faults.check_kernel(k)
        try:
            budget.check_kernel(k)
        except ChoreoError as e:
            _beyond_the_language(e.diagnostics, strict)
        layouts.run(k)
        smem_plan.plan(k, target)
        verify_kernel(k)
        try:
            pipeline_check.check_kernel(k)
        except pipeline_check.PipelineError as e:
            _beyond_the_language(e.diagnostics, strict)
        else:  # the simple fallback, for kernels the pipeline check gave up on
            _beyond_the_language(static_faults.hangs(k), strict)
    return fn


def _beyond_the_language(found: list, strict: bool) -> None:
    """Kernels past what the hardware runs (threads, registers) or that would hang: `compile`
    refuses them; `check` judges the language's rules, which they do not break, and warns."""
    if found and strict:
        raise ChoreoError(diagnostics=list(found))
    for d in found:
        warn(d.message, d.loc)


def _build_with_accumulator_shapes(func: A.FunctionDef, strict: bool):
    """An accumulator's shape is used (an `apply`, a reduction) before the MMA that gives
    it, in program order: a lenient first pass skips those uses and lets the MMAs give the
    shapes, and the second pass starts each accumulator with its shape."""
    scout = KernelBuilder(func, lenient=True)
    scout.build()
    shapes = {(k.loc, f.name): f.shape for k in scout.kernels for f in k.frags if f.shape}
    builder = KernelBuilder(func, lenient=not strict, preset_shapes=shapes)
    return builder, builder.build()


def build_module(program: A.Program, target: str = "sm_90a") -> ir.Module:
    """IR for every function; raises on the first error or unsupported construct."""
    funcs, errors = [], []
    for func in program.functions:
        try:
            funcs.append(_build_function(func, target, strict=True))
        except ChoreoError as e:
            errors += e.diagnostics
    if errors:
        raise ChoreoError(diagnostics=errors)
    return ir.Module(funcs, program.file)


def check_program(program: A.Program, target: str = "sm_90a") -> list[Unsupported]:
    """Semantic errors of every function; functions beyond the IR are skipped.

    Returns the `Unsupported` notes of the skipped functions (for `-v` output).
    """
    skipped, errors = [], []
    for func in program.functions:
        try:
            _build_function(func, target, strict=False)
        except Unsupported as u:
            skipped.append(u)
        except ChoreoError as e:
            errors += e.diagnostics
    if errors:
        raise ChoreoError(diagnostics=errors)
    return skipped
