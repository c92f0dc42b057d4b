"""One callable per `__co__` function of a file (see the package docstring)."""
from __future__ import annotations

from typing import Callable


class HostFunction:
    """A `__co__` function bound to an engine: `f(*args, **kwargs) -> result or None`."""

    def __init__(self, name: str, arg_names: list[str], run: Callable) -> None:
        self.name = name
        self.arg_names = arg_names
        self._run = run
        self.__doc__ = f"{name}({', '.join(arg_names)})"

    def __call__(self, *args, **kwargs):
        return self._run(self.name, args, kwargs)

    def __repr__(self) -> str:
        return f"<choreo function {self.__doc__}>"


class Library:
    """The functions of one file: `lib.name(...)`, `lib["name"]`, or `lib(...)` for a file of
    one function. `functions` maps each name to its argument names; `run(name, args,
    kwargs)` performs a call."""

    def __init__(self, functions: dict[str, list[str]], run: Callable, source: str = "") -> None:
        self.source = source
        self.functions = {n: HostFunction(n, a, run) for n, a in functions.items()}

    def __getattr__(self, name: str) -> HostFunction:
        functions = self.__dict__.get("functions", {})
        if name in functions:
            return functions[name]
        raise AttributeError(f"{self.__dict__.get('source') or 'the program'} has no __co__ "
                             f"function '{name}' (it has {', '.join(functions) or 'none'})")

    def __getitem__(self, name: str) -> HostFunction:
        return self.__getattr__(name)

    def __call__(self, *args, **kwargs):
        if len(self.functions) != 1:
            raise TypeError(f"{self.source} has {len(self.functions)} __co__ functions: call "
                            f"one by name ({', '.join(self.functions)})")
        return next(iter(self.functions.values()))(*args, **kwargs)

    def __dir__(self):
        return list(self.functions) + ["functions"]
