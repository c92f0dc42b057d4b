"""choreo-py: a compiler for Choreo tile kernels."""

__version__ = "0.1.0"


def interpret(path, tensors=None, *, schedule="round_robin", seed=0, owners=None, **kwargs):
    """Runs the kernels of the `.co` file `path` on CPU `tensors` in place; returns them.

    Without `tensors`: the file's `__co__` functions as callables
    (`lib = interpret(p); out = lib.ele_add(a, b)`; `function="name"` picks one).

    See `choreo_py.interp.api.interpret` (imported on first use, as it needs torch).
    """
    from .interp.api import interpret as _interpret

    return _interpret(path, tensors, schedule=schedule, seed=seed, owners=owners, **kwargs)


def _register_semantic_checks() -> None:
    # `choreo check` = parse-level checks, then semantic analysis and the passes.
    from . import driver, frontend

    frontend.register_check(driver.check_program)


_register_semantic_checks()


def __getattr__(name: str):
    # `choreo_py.load(path)`: imported on first use, so that
    # the compiler itself needs neither torch nor CUDA.
    if name == "load":
        from .runtime import load

        return load
    raise AttributeError(f"module 'choreo_py' has no attribute '{name}'")
