"""Semantic analysis: from the AST to a verified tile IR.

`build_module(program)` analyses every `__co__` function and returns the IR
module; constructs that are valid Choreo but that the tile IR cannot express
yet raise `Unsupported` (a ChoreoError naming the construct and its place).
`check_program(program)` reports every semantic error of the functions the
IR covers and accepts the others without building IR for them.

Sema knows no target, and runs no pass: the IR it returns is the program's
meaning; layouts, memory plans and the pipeline check are the passes the
driver runs next (choreo_py/passes/pipeline.py).
"""
from __future__ import annotations

from ..frontend import ast as A
from .. import ir
from ..diagnostics import ChoreoError
from ..ir.verify import verify_kernel
from .co_calls import Callees
from .kernel import KernelBuilder
from .values import ShapeNotYetKnown, Unsupported

__all__ = ["build_function", "build_module", "check_program", "Callees", "Unsupported"]


def build_function(func: A.FunctionDef, strict: bool = True,
                   dims: dict | None = None, checking: bool = False,
                   callees: Callees | None = None) -> ir.Function:
    """`dims`: values of dimension names and scalar parameters to build the function for
    (they become constants; see host/specialize.py). `checking`: for `choreo check`
    (check_program), which analyses what sema can and reports no IR. `callees`: the IR
    of the functions it calls (default: built here, as this one is, when it calls any)."""
    if callees is None:
        callees = Callees(lambda f, c: build_function(f, strict, None, checking, c))
    builder = KernelBuilder(func, lenient=not strict, dims=dims, checking=checking,
                            callees=callees)
    try:
        fn = builder.build()
    except ShapeNotYetKnown:
        builder, fn = _build_with_accumulator_shapes(func, strict, dims, checking, callees)
    else:
        if any(isinstance(u, ShapeNotYetKnown) for u in builder.skipped):
            builder, fn = _build_with_accumulator_shapes(func, strict, dims, checking, callees)
    if builder.skipped:
        # Analysed for errors, but the IR is incomplete: no passes on it.
        raise builder.skipped[0]
    for k in fn.kernels:
        verify_kernel(k)
    return fn


def _build_with_accumulator_shapes(func: A.FunctionDef, strict: bool, dims=None,
                                   checking: bool = False, callees: Callees | None = None,
                                   exploring: bool = False):
    """An accumulator's shape is used (an `apply`, a reduction) before the MMA that gives
    it, in program order: a lenient first pass skips those uses and lets the MMAs give the
    shapes, and the second pass starts each accumulator with its shape."""
    scout = KernelBuilder(func, lenient=True, dims=dims, callees=callees, exploring=True)
    scout.build()
    shapes = {(k.loc, f.name): f.shape for k in scout.kernels for f in k.frags if f.shape}
    builder = KernelBuilder(func, lenient=not strict, preset_shapes=shapes, dims=dims,
                            checking=checking, callees=callees, exploring=exploring)
    return builder, builder.build()


def lenient_skips(func: A.FunctionDef) -> list[Unsupported]:
    """The constructs a lenient IR build of `func` skips (empty: its IR builds), with the
    accumulator-shape retry build_function makes (a use of a shape before its MMA is
    no construct the IR lacks)."""
    callees = Callees(lambda f, c: build_function(f, strict=False, callees=c))
    builder = KernelBuilder(func, lenient=True, callees=callees, exploring=True)
    try:
        builder.build()
    except ShapeNotYetKnown:
        builder = None
    except ChoreoError:
        return list(builder.skipped)
    if builder is None or any(isinstance(u, ShapeNotYetKnown) for u in builder.skipped):
        try:
            builder, _ = _build_with_accumulator_shapes(func, strict=False, callees=callees,
                                                        exploring=True)
        except ChoreoError as e:  # the second pass's own refusal, or an error (none)
            return [e] if isinstance(e, Unsupported) else []
    return list(builder.skipped)


def build_module(program: A.Program) -> ir.Module:
    """IR for every function; raises on the first error or unsupported construct."""
    funcs, errors = [], []
    callees = Callees(lambda f, c: build_function(f, strict=True, callees=c))
    for func in program.functions:
        try:
            funcs.append(callees.get(func))
        except ChoreoError as e:
            errors += e.diagnostics
    if errors:
        raise ChoreoError(diagnostics=errors)
    return ir.Module(funcs, program.file)


def check_program(program: A.Program, on_function=None,
                  strict: bool = False) -> list[Unsupported]:
    """Semantic errors of every function; functions beyond the IR are skipped.

    `on_function(fn)` is called with the IR of each function that has one (the
    driver runs the passes there). Returns the `Unsupported` notes of the
    skipped functions (for `-v` output). `strict` (`check --strict`): sema's
    errors as compile finds them (not lenient: an error inside a `with` or
    `foreach` is an error, not a warning that skips the block).
    """
    skipped, errors = [], []
    callees = Callees(lambda f, c: build_function(f, strict=strict, checking=True, callees=c))
    for func in program.functions:
        try:
            fn = callees.get(func)
            if on_function is not None:
                on_function(fn)
        except Unsupported as u:
            skipped.append(u)
        except ChoreoError as e:
            errors += e.diagnostics
    if errors:
        raise ChoreoError(diagnostics=errors)
    return skipped
