"""One callable per `__co__` function of a file (see the package docstring)."""
from __future__ import annotations

from typing import Callable

from .. import ir


class HostFunction:
    """A `__co__` function bound to an engine: `f(*args, **kwargs) -> result or None`."""

    def __init__(self, fn: ir.Function, run: Callable) -> None:
        self.ir = fn
        self.name = fn.name
        self._run = run
        self.__doc__ = (f"{fn.name}({', '.join(fn.arg_names)})"
                        + (f" -> {fn.result}" if fn.result else ""))

    def __call__(self, *args, **kwargs):
        return self._run(self.ir, args, kwargs)

    def __repr__(self) -> str:
        return f"<choreo function {self.__doc__}>"


class Library:
    """The functions of one file: `lib.name(...)`, `lib["name"]`, or `lib(...)` for a file of
    one function."""

    def __init__(self, module: ir.Module, run: Callable, source: str = "") -> None:
        self.module = module
        self.source = source
        self.functions = {fn.name: HostFunction(fn, run) for fn in module.functions}

    def __getattr__(self, name: str) -> HostFunction:
        functions = self.__dict__.get("functions", {})
        if name in functions:
            return functions[name]
        raise AttributeError(f"{self.source or 'the program'} has no __co__ function "
                             f"'{name}' (it has {', '.join(functions) or 'none'})")

    def __getitem__(self, name: str) -> HostFunction:
        return self.__getattr__(name)

    def __call__(self, *args, **kwargs):
        if len(self.functions) != 1:
            raise TypeError(f"{self.source} has {len(self.functions)} __co__ functions: call "
                            f"one by name ({', '.join(self.functions)})")
        return next(iter(self.functions.values()))(*args, **kwargs)

    def __dir__(self):
        return list(self.functions) + ["functions", "module"]
