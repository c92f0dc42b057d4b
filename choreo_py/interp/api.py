"""Running `.co` files: the IR the interpreter runs, and `interpret(path, tensors)`.

`load_module` builds the tile IR as `choreo check` judges a program: a
finding of the static pipeline check (a wait no trigger completes, a ring
overrun) is a warning here, not an error, so that the interpreter can run
the program and show the hang or the wrong result it predicts. Everything
else (syntax, semantic errors, constructs the IR does not cover) is an
error as in `choreo compile`. Modules are cached per file (path, size and
modification time; not those of the files it includes), include path,
macro definitions and target.
"""
from __future__ import annotations

import os
import warnings
from typing import Iterable, Optional

import torch

from .. import diagnostics, ir, targets
from ..host import binding
from ..passes import pipeline
from ..diagnostics import ChoreoError, ChoreoWarning, Diagnostic, UsageError  # noqa: F401 - re-exported
from .runner import DEFAULT_STEP_LIMIT, RunStats, interpret_module

_CACHE: dict = {}
_CACHE_SIZE = 16


def load_module(path: str, include_dirs: Iterable[str] = (), defines: Optional[dict] = None,
                target: Optional[str] = None) -> tuple[ir.Module, list[Diagnostic]]:
    """(IR of every function of the file, the warnings its analysis gave); the passes run
    for `target` (default: the GPU present, else sm_100a)."""
    rec = targets.resolve(target)
    target = rec.name
    st = os.stat(path)
    key = (os.path.abspath(path), st.st_mtime_ns, st.st_size, tuple(include_dirs),
           tuple(sorted((defines or {}).items())), target)
    hit = _CACHE.get(key)
    if hit is not None:
        return hit
    before = len(diagnostics.WARNINGS)
    try:
        # Non-strict: pipeline-check findings become warnings (see above).
        module = pipeline.ir_of_file(path, rec, include_dirs, defines, strict=False)
    finally:
        found = diagnostics.WARNINGS[before:]
        del diagnostics.WARNINGS[before:]
    result = (module, found)
    if len(_CACHE) >= _CACHE_SIZE:
        _CACHE.pop(next(iter(_CACHE)))
    _CACHE[key] = result
    return result


def pick_function(module: ir.Module, name: Optional[str] = None) -> ir.Function:
    """The named `__co__` function, else the module's only (or first) one."""
    if not module.functions:
        raise ChoreoError("the file has no __co__ function to run")
    if name is None:
        return module.functions[0]
    for f in module.functions:
        if f.name == name:
            return f
    raise UsageError(f"no __co__ function named '{name}' (the file has "
                     f"{', '.join(f.name for f in module.functions)})")


def function_dims(fn: ir.Function) -> list[str]:
    """The symbolic dimensions of a function's parameters, in order of appearance."""
    seen: list[str] = []
    for p in fn.params:
        for d in p.shape:
            if isinstance(d, ir.Sym) and d.name not in seen:
                seen.append(d.name)
    return seen


def param_shape(p: ir.Param, dims: dict[str, int]) -> tuple[int, ...]:
    return tuple(dims[d.name] if isinstance(d, ir.Sym) else int(d.value) for d in p.shape)


def param_usage(module: ir.Module, fn: ir.Function, calling: tuple = ()) -> tuple[set[str], set[str]]:
    """(parameters read, parameters written) by the kernels `fn` launches and by the
    functions it calls (ir.HostCall: their parameters are the caller's tensors)."""
    reads: set[str] = set()
    writes: set[str] = set()
    for launch in ir.walk(fn.body):
        if isinstance(launch, ir.HostCall):
            r, w = _call_usage(module, launch, calling + (fn.name,))
            reads, writes = reads | r, writes | w
        if not isinstance(launch, ir.Launch):
            continue
        kernel = module.kernel(launch.kernel)
        if kernel is None:
            continue
        alias: dict[str, str] = {}

        def base(v: ir.View) -> str:
            name = v.base
            while name in alias:
                name = alias[name]
            return name

        for s in ir.walk(kernel.body):
            if isinstance(s, ir.ViewDef):
                alias[s.name] = base(s.view)
            if isinstance(s, (ir.TmaLoad, ir.TmaStore, ir.DmaCopy)):
                reads.add(base(s.src))
                writes.add(base(s.dst))
            elif isinstance(s, ir.Mma):
                reads.update(base(v) for v in (s.a, s.b) if isinstance(v, ir.View))
            elif isinstance(s, ir.MmaLoad):  # (from global memory: the mma.sync form)
                reads.add(base(s.src))
            elif isinstance(s, ir.MmaStore):
                writes.add(base(s.dst))
            elif isinstance(s, ir.BufStore):
                writes.add(base(s.view))
            for e in _exprs(s):
                for sub in _subexprs(e):
                    if isinstance(sub, ir.BufElem):
                        reads.add(base(sub.view))
    names = {p.name for p in fn.params}
    return reads & names, writes & names


def _call_usage(module: ir.Module, s: ir.HostCall, calling: tuple) -> tuple[set, set]:
    """The caller's tensors a call reads and writes: its callee's parameters, renamed."""
    callee = module.function(s.func)
    if callee is None or callee.name in calling:
        return set(), set()
    r, w = param_usage(module, callee, calling)
    names = dict(s.tensors)
    return {names[p] for p in r if p in names}, {names[p] for p in w if p in names}


def _exprs(s: ir.Stmt):
    for f in s.__dataclass_fields__:
        v = getattr(s, f)
        if isinstance(v, ir.Expr):
            yield v
        elif isinstance(v, (tuple, list)):
            yield from (x for x in v if isinstance(x, ir.Expr))


def _subexprs(e: ir.Expr):
    stack = [e]
    while stack:
        e = stack.pop()
        yield e
        for f in e.__dataclass_fields__:
            v = getattr(e, f)
            if isinstance(v, ir.Expr):
                stack.append(v)
            elif isinstance(v, tuple):
                stack.extend(x for x in v if isinstance(x, ir.Expr))
            elif isinstance(v, ir.View):
                stack.extend(x for x in (*v.offsets, *v.extents) if isinstance(x, ir.Expr))


def check_names(fn: ir.Function, tensors: dict, dims: dict) -> None:
    """The call's tensors (host/binding.py, as every engine checks them) and dimension
    names; what does not fit is a usage error naming the parameter."""
    from .host import INTERPRETER

    binding.bind(fn.name, binding.slots(fn.params), tensors, INTERPRETER, dims)
    check_dims(fn, dims)


def check_dims(fn: ir.Function, dims: dict) -> None:
    fdims = function_dims(fn)
    extra = [d for d in dims if d not in fdims]
    if extra:
        raise UsageError(f"{fn.name} has no dimension {', '.join(map(repr, extra))} "
                         f"(its dimensions: {', '.join(fdims) or 'none'})")


def program(path: str, *, function: Optional[str] = None, include_dirs: Iterable[str] = (),
            defines: Optional[dict] = None, target: Optional[str] = None, **run_options):
    """The file's `__co__` functions as Python callables run by the interpreter: a
    `host.Library` (`lib.name(a, b)`), or with `function`, that one function. Each
    function is built on its first call (for the call's shapes where it needs them:
    host/specialize.py); a function the IR cannot express raises its refusal then."""
    from .. import frontend
    from ..host import Library
    from ..host.specialize import Functions
    from .host import call_function

    rec = targets.resolve(target)
    funcs = Functions(frontend.parse_file(path, include_dirs, defines), rec, strict=False)
    run_options.setdefault("owners", rec)  # its split of accumulator rows

    def run(name, args, kwargs):
        before = len(diagnostics.WARNINGS)
        try:
            fn = funcs.get(name, args, kwargs)
        finally:
            found = diagnostics.WARNINGS[before:]
            del diagnostics.WARNINGS[before:]
        for w in found:
            warnings.warn(w.render(), ChoreoWarning, stacklevel=3)
        return call_function(funcs.module(fn), fn, args, kwargs, **run_options)

    lib = Library({n: funcs.arg_names(n) for n in funcs.names()}, run, os.path.basename(path))
    return lib if function is None else lib[function]


def interpret(path: str, tensors: Optional[dict[str, torch.Tensor]] = None, *, schedule: str = "round_robin",
              seed: int = 0, owners: Optional[int] = None, function: Optional[str] = None,
              include_dirs: Iterable[str] = (), defines: Optional[dict] = None,
              target: Optional[str] = None, step_limit: int = DEFAULT_STEP_LIMIT,
              stats: Optional[RunStats] = None, **dims: int) -> dict[str, torch.Tensor]:
    """Runs the kernels of `path`'s function on `tensors`, in place, and returns them.

    `tensors` maps every parameter name of the function to a CPU tensor of
    its dtype and rank; the symbolic dimensions are read from their shapes
    (`dims`, if given, must agree). `schedule` is "round_robin" or "random"
    (seeded by `seed`); `target` defaults to the GPU present, else sm_100a;
    `owners` is the number of threads sharing an accumulator row (default:
    the target's split, as its lowering loads accumulators: 4 for sm_90a wgmma;
    for sm_100a 2 for a 64-row accumulator, 1 for a 128-row one). Program faults (deadlock,
    data race, event misuse, step limit) raise `InterpError`s, which are
    `ChoreoError`s located in the source; unknown names raise `UsageError`.
    Pipeline-check findings are issued as `ChoreoWarning`s. With `stats`,
    the run's block and statement counts are added to it.

    Without `tensors`, returns the file's functions as callables that take
    their arguments and return their results (`program` above).
    """
    if tensors is None:
        return program(path, function=function, include_dirs=include_dirs, defines=defines,
                       target=target, schedule=schedule, seed=seed, step_limit=step_limit,
                       **({"owners": owners} if owners is not None else {}))
    rec = targets.resolve(target)
    owners = rec if owners is None else owners
    module, found = load_module(path, include_dirs, defines, rec.name)
    for w in found:
        warnings.warn(w.render(), ChoreoWarning, stacklevel=2)
    fn = pick_function(module, function)
    check_names(fn, tensors, dims)
    st = interpret_module(module, tensors, function=fn.name, schedule=schedule, seed=seed,
                          step_limit=step_limit, owners=owners, **dims)
    if stats is not None:
        stats.blocks += st.blocks
        stats.statements += st.statements
        stats.scheduling_steps += st.scheduling_steps
    return tensors
