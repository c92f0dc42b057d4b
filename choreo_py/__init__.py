"""choreo-py: a compiler for Choreo tile kernels."""

from .version import __version__  # noqa: E402

from .diagnostics import ChoreoError  # noqa: E402 - errors in a program, located (file, line, col)
from . import limits  # noqa: E402

__all__ = ["ChoreoError", "__version__", "emulate", "emulate_program", "interpret", "load"]


def interpret(path, tensors=None, *, schedule="round_robin", seed=0, owners=None, **kwargs):
    """Runs the kernels of the `.co` file `path` on CPU `tensors` in place; returns them.

    Without `tensors`: the file's `__co__` functions as callables
    (`lib = interpret(p); out = lib.ele_add(a, b)`; `function="name"` picks one).

    See `choreo_py.interp.api.interpret` (imported on first use, as it needs torch).
    """
    from .interp.api import interpret as _interpret

    with limits.deep_recursion():  # the stages' recursion (choreo_py/limits.py)
        return _interpret(path, tensors, schedule=schedule, seed=seed, owners=owners, **kwargs)


def emulate(path, tensors, *, target="sm_100a", **kwargs):
    """Compiles `path` for `target` and runs its PTX on the CPU emulator, in place on `tensors`.

    See `choreo_py.emu.api.emulate` (imported on first use, as it needs numpy and torch).
    """
    from .emu.api import emulate as _emulate

    with limits.deep_recursion():  # the stages' recursion (choreo_py/limits.py)
        return _emulate(path, tensors, target=target, **kwargs)


def emulate_program(path, *, target=None, **kwargs):
    """The `__co__` functions of `path` as callables over CPU tensors, like `load`'s, with
    every kernel launch run on the CPU emulator (`lib = emulate_program(p, target="sm_90a");
    out = lib.ele_add(a, b)`). See `choreo_py.emu.program.emulate_program`.
    """
    from .emu.program import emulate_program as _emulate_program

    with limits.deep_recursion():  # the stages' recursion (choreo_py/limits.py)
        return _emulate_program(path, target=target, **kwargs)


def _register_semantic_checks() -> None:
    # `choreo check` = parse-level checks, the whole-language rules, then semantic
    # analysis and the passes.
    from . import check, driver, frontend

    frontend.register_check(check.check_lenient)   # the whole language, lowerable or not
    frontend.register_check(driver.check_program)


_register_semantic_checks()


def __getattr__(name: str):
    # `choreo_py.load(path)`: imported on first use, so that
    # the compiler itself needs neither torch nor CUDA.
    if name == "load":
        from .runtime import load

        return load
    raise AttributeError(f"module 'choreo_py' has no attribute '{name}'")
