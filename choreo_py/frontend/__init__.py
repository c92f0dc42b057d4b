"""The front end as the command line uses it: preprocess, split, parse, check.

Semantic analysis plugs in through `SEMANTIC_CHECKS`: each entry is a
callable taking the Program and raising ChoreoError on errors.  `check_*`
runs the parse-level checks first, then every registered check in order.
"""
from __future__ import annotations

import re
from typing import Callable, Iterable, Optional

from . import ast, co_calls, depths, parse_checks, segments
from choreo_py import limits
from .ast_dump import dump
from choreo_py.diagnostics import ChoreoError, Diagnostic, warn
from .parser import parse_function

#: Checks run by check_file/check_text after parsing, in order.
SEMANTIC_CHECKS: list[Callable[[ast.Program], None]] = []


def register_check(check: Callable[[ast.Program], None]) -> None:
    if check not in SEMANTIC_CHECKS:
        SEMANTIC_CHECKS.append(check)


def parse_defines(items: Iterable[str]) -> dict[str, str]:
    """`-D NAME[=VALUE]` arguments -> macro definitions (a bare NAME is defined as 1, as
    for a C compiler)."""
    out = {}
    for item in items:
        name, _, value = item.partition("=")
        out[name] = value if "=" in item else "1"
    return out


def preprocess(file: str, include_dirs: Iterable[str] = (), defines: Optional[dict] = None):
    from .preprocessor import preprocess_file
    return preprocess_file(file, tuple(include_dirs), defines)


def parse_unit(unit) -> ast.Program:
    """The AST of a preprocessed unit; every error of every function is reported."""
    items: list[ast.Node] = []
    errors: list[Diagnostic] = []
    for seg in segments.split(unit.text, unit.loc):
        loc = segments.first_text_loc(seg, unit.loc)
        if seg.kind == segments.HOST:
            items.append(ast.HostCode(text=seg.text, loc=loc))
            _warn_unknown_directives(seg, unit.loc)
        elif seg.kind == segments.DEVICE:
            items.append(ast.DeviceCode(text=seg.text, kind=seg.device_kind, loc=loc))
        else:
            try:
                fn = _guarded(loc, parse_function, seg.text, seg.start, unit.loc)
            except ChoreoError as err:
                errors += err.diagnostics
                continue
            items.append(fn)
            errors += depths.depth_errors(fn)
    if errors:
        raise ChoreoError(diagnostics=errors)
    device_code = [i.text for i in items if isinstance(i, ast.DeviceCode)]
    for item in items:  # the device functions a kernel may call (sema/device_funcs.py)
        if isinstance(item, ast.FunctionDef):
            item.device_code = device_code
    co_calls.attach(items)  # the __co__ functions a function may call (frontend/co_calls.py)
    return ast.Program(items=items, file=unit.main_file, loc=unit.loc(0))


#: The directives a C++ compiler knows, beyond those the preprocessor carries out; host code
#: keeps them for it (`#include <...>`, `#pragma`).
HOST_DIRECTIVES = frozenset({"include", "include_next", "import", "pragma", "ident", "sccs",
                             "assert", "unassert", "elifdef", "elifndef", "embed"})
_DIRECTIVE = re.compile(r"^[ \t]*(#)[ \t]*([A-Za-z_]\w*)", re.M)


def _warn_unknown_directives(seg, loc_of) -> None:
    """A `#word` line of host code that no C++ preprocessor knows (`#bogus`): the host
    compiler will reject it, as the reference hands such a line on to it; said here, at the
    line, rather than never. (In a __co__ function the parser refuses it.)"""
    if "#" not in seg.text:
        return
    for m in _DIRECTIVE.finditer(seg.text):
        if m.group(2) not in HOST_DIRECTIVES:
            warn(f"unknown preprocessing directive '#{m.group(2)}' (the C++ compiler of the "
                 "host code rejects it)", loc_of(seg.start + m.start(1)))


def parse_file(file: str, include_dirs: Iterable[str] = (),
               defines: Optional[dict] = None) -> ast.Program:
    return parse_unit(preprocess(file, include_dirs, defines))


def parse_text(text: str, name: str = "<input>", include_dirs: Iterable[str] = (),
               defines: Optional[dict] = None) -> ast.Program:
    """Parse source text (preprocessed first), e.g. from a test."""
    from .preprocessor import preprocess_text
    return parse_unit(preprocess_text(text, name, tuple(include_dirs), defines))


def check_parse_rules(program: ast.Program) -> ast.Program:
    """Only the parse-level rules (what `compile` runs before its own, strict, sema)."""
    _guarded(program.loc, parse_checks.check, program)
    return program


def check_program(program: ast.Program) -> ast.Program:
    check_parse_rules(program)
    for check in SEMANTIC_CHECKS:
        _guarded(program.loc, check, program)
    return program


def check_file(file: str, include_dirs: Iterable[str] = (),
               defines: Optional[dict] = None) -> ast.Program:
    return check_program(parse_file(file, include_dirs, defines))


def check_text(text: str, name: str = "<input>", include_dirs: Iterable[str] = (),
               defines: Optional[dict] = None) -> ast.Program:
    return check_program(parse_text(text, name, include_dirs, defines))


def dump_ast(program: ast.Node) -> str:
    return dump(program)


#: Recursion allowed to later stages (tree walks), sized for limits.py's bounds.
RECURSION_LIMIT = limits.RECURSION_LIMIT


def _guarded(where, fn, *args):
    """Run a stage; a program nested beyond even that limit is a user error."""
    try:
        with limits.deep_recursion():
            return fn(*args)
    except RecursionError:
        raise ChoreoError("the program is nested too deeply to compile", where) from None
