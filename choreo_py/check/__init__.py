"""The semantic pass over the whole AST: `choreo check` runs it after parsing,
and `compile` runs it before building the tile IR.

It follows the reference order -- declare and resolve names, infer the types
and ranks of expressions, then check -- in one linear walk per function
(`walker.Checker`), independent of what the tile IR can lower: host code,
every parallel level and every statement form are checked.  The rules come
in families, one module each; each module's `RULES` (and `EXIT_RULES`) map
an AST node type to the functions checking it, and they are merged here
into one dispatch table.

    walker                  the walk: scopes, context; one declaration per name per
                            scope, use before declaration
    expr_types, decl_types  the types the walk gives expressions and declarations
    mutability              re-assignment, mutables in shapes
    initialisers            ituple/mdspan/bool/string initialisers, shape arithmetic
    context                 break/return/yield/call/inthreads/while placement
    iteration               with/foreach matchers, where, `_`, empty spaces
    views                   chunkat/subspan/at/sqz
    dma                     element types, ranks, pad and transpose configurations
    futures                 wait, async naming, placeholders, swap/rotate, select
    params                  by-reference parameters, `??`, buffer/event dimensions
    structure               parallel levels, barriers, atomics, attributes
    block_accumulators      `mma.fill ... : block`: one role issues the MMAs into the tile
    fills                   `mma.fill` only of an accumulator, not of an MMA's operand
    inline_asm              an `__asm__` template is PTX statements
    names                   no declaration named by a reserved word; one function per
                            name and parameter types
    lowerable               `check --lowerable`: what would not compile for a target
"""
from __future__ import annotations

from ..frontend import ast as A
from ..diagnostics import ChoreoError, Diagnostic, warn
from . import context, dma, futures, initialisers, iteration, mutability, params, structure
from . import block_accumulators, fills, inline_asm, names, views
from .walker import Checker

FAMILIES = (mutability, initialisers, context, iteration, views, dma, futures, params,
            structure, block_accumulators, fills, inline_asm)


def _merge(attr: str) -> dict:
    table: dict = {}
    for family in FAMILIES:
        for key, rules in getattr(family, attr, {}).items():
            table.setdefault(key, []).extend(rules)
    return table


RULES = _merge("RULES")
EXIT_RULES = _merge("EXIT_RULES")


def check_function(fn: A.FunctionDef, strict: bool = True,
                   building: bool = False) -> list[Diagnostic]:
    return Checker(fn, RULES, EXIT_RULES, strict, building).run()


def check_program(program: A.Program, strict: bool = True, building: bool = False) -> None:
    """Every semantic error of every function, in source order.

    Not `strict` (a plain `choreo check`): the rules that programs accepted
    by the reference compiler's parse-only stage break (use before
    declaration, re-assigning an immutable, a missing or extra `return`,
    `call` outside `parallel`, shape arithmetic of mixed ranks, a `dma.pad`
    list not matching the rank, waiting a synchronous future, an async
    future never waited, `swap` of futures of different types) report
    warnings; `compile` and `check --strict` report them as errors.
    A non-void function without `return` is an error for `check --strict`
    only; `building` (`compile`, a call through choreo_py.load) warns, and the
    call's missing result refuses to be used (host/missing_result.py).
    """
    found: list[Diagnostic] = names.function_names(program, building)
    for fn in program.functions:
        found += check_function(fn, strict, building)
    found = _unique(sorted(found, key=_position))
    for d in found:
        if d.severity == "warning":
            warn(d.message, d.loc)
    errors = [d for d in found if d.severity == "error"]
    if errors:
        raise ChoreoError(diagnostics=errors)


def check_lenient(program: A.Program) -> None:
    check_program(program, strict=False)


def _position(d: Diagnostic):
    return (d.loc.file, d.loc.line, d.loc.col) if d.loc else ("", 0, 0)


def _unique(errors: list[Diagnostic]) -> list[Diagnostic]:
    seen, out = set(), []
    for d in errors:
        key = (str(d.loc), d.message)
        if key not in seen:
            seen.add(key)
            out.append(d)
    return out
