"""Functions built for the shapes of a call.

A function whose parameters have symbolic dimensions (`s32 [M, 17, 32] input`)
may need them as numbers: a shared buffer of the input's shape (`=> shared`)
is sized when the kernel is compiled. A call knows them (the tensors'
shapes), so the function is built for those values: the dimensions become
constants before sema, and the result is kept per function and shape. A
function that builds with symbolic dimensions is built once.

The functions of a file are independent here: one that is refused does not
stop the others (it raises its refusal when called).
"""
from __future__ import annotations

from typing import Callable, Optional

from ..frontend import ast as A
from .. import frontend, ir, sema
from ..diagnostics import ChoreoError
from ..passes import pipeline
from ..sema.param_dims import unwritten_dims


def call_dims(func: A.FunctionDef, args: tuple, kwargs: dict) -> dict[str, int]:
    """The value of every dimension name and scalar parameter of `func` in this call."""
    dims: dict[str, int] = {}
    named = [p for p in func.params if p.name]
    given = dict(zip([p.name for p in named], args))
    given.update(kwargs)
    for p in named:
        v = given.get(p.name)
        if v is None:
            continue
        if isinstance(p.type, A.TypeRef):
            if isinstance(v, (int, bool)):
                dims[p.name] = int(v)
            continue
        shape = getattr(v, "shape", None)
        written = p.type.dims
        if written is None and p.type.rank:  # `f32 mdspan<2> a`: sema/kernel.py names them
            written = unwritten_dims(p.name, p.type.rank, p.loc)
        if shape is None or written is None or len(written) != len(shape):
            continue
        for d, n in zip(written, shape):
            if isinstance(d, A.Name):
                dims.setdefault(d.id, int(n))
    return dims


class Functions:
    """The IR of a program's functions, built on demand (see the module docstring)."""

    def __init__(self, program: A.Program, target, strict: bool,
                 on_warning: Optional[Callable] = None) -> None:
        frontend.check_parse_rules(program)
        self.program = program
        self.target = target
        self.strict = strict
        self.ast = {f.name: f for f in program.functions}
        self._generic: dict[str, object] = {}  # name -> ir.Function or the refusal
        self._special: dict = {}
        # the shape-generic IR of each function, which its callers' builds read too
        self.callees = sema.Callees(lambda f, c: self._passes(
            sema.build_function(f, strict=self.strict, callees=c)))

    def names(self) -> list[str]:
        return list(self.ast)

    def arg_names(self, name: str) -> list[str]:
        return [p.name for p in self.ast[name].params if p.name]

    def _build(self, name: str, dims: Optional[dict]) -> ir.Function:
        if dims is None:
            return self.callees.get(self.ast[name])
        return self._passes(sema.build_function(self.ast[name], strict=self.strict, dims=dims,
                                                callees=self.callees))

    def _passes(self, fn: ir.Function) -> ir.Function:
        pipeline.run_function(fn, self.target, strict=self.strict)
        return fn

    def get(self, name: str, args: tuple = (), kwargs: Optional[dict] = None) -> ir.Function:
        """The function's IR for a call with these arguments (raises its refusal)."""
        if name not in self._generic:
            try:
                self._generic[name] = self._build(name, None)
            except ChoreoError as e:  # perhaps only while the dimensions are unknown
                self._generic[name] = e
        got = self._generic[name]
        if isinstance(got, ir.Function):
            return got
        special = self.for_call(name, args, kwargs)
        if special is None:
            raise got
        return special

    def for_call(self, name: str, args: tuple = (), kwargs: Optional[dict] = None):
        """The function built for this call's sizes (None: the call gives none): for one
        whose shape-generic IR does not build, or builds but whose lowering needs numbers
        (a TMA box of `N / cdiv(N, 128)` rows). Raises the build's refusal."""
        dims = call_dims(self.ast[name], args, kwargs or {})
        if not dims:
            return None
        key = (name, tuple(sorted(dims.items())))
        if key not in self._special:
            try:
                self._special[key] = self._build(name, dims)
            except ChoreoError as e:
                self._special[key] = e
        got = self._special[key]
        if isinstance(got, ChoreoError):
            raise got
        return got

    def module(self, fn: ir.Function) -> ir.Module:
        """`fn` and the functions it calls (shape-generic: ir.HostCall), transitively."""
        funcs = [fn]
        for f in funcs:
            for s in ir.walk(f.body):
                if isinstance(s, ir.HostCall) and all(g.name != s.func for g in funcs):
                    funcs.append(self.get(s.func))
        return ir.Module(funcs, self.program.file)
