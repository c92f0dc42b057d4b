"""Host programs: a `__co__` function called from Python like a function.

`Library` holds one callable per `__co__` function of a file (by name, or
called directly when the file has one); the callable takes the function's
arguments in the written order and returns what the function returns. How a
call runs is the engine's business: the interpreter (interp/host.py) or the
GPU runtime (runtime/).
"""
from .library import HostFunction, Library

__all__ = ["HostFunction", "Library"]
