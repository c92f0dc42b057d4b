"""choreo-py: a compiler for Choreo tile kernels."""

__version__ = "0.1.0"


def _register_semantic_checks() -> None:
    # `choreo check` = parse-level checks, then semantic analysis.
    from . import frontend, sema

    frontend.register_check(sema.check_program)


_register_semantic_checks()
