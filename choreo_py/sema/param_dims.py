"""The dimensions of a parameter whose shape is not written out.

`f32 mdspan<2> a` leaves its whole shape to the argument, `f32 [?, 4] a` one
dimension of it; either way each such dimension is named after the parameter
(`a__dim0`), which a call binds from its tensor's shape and a build for the
call's shapes fixes (host/specialize.py).
"""
from __future__ import annotations

from ..frontend import ast as A


def unwritten_dims(name: str, rank: int, loc) -> list[A.Name]:
    """`f32 mdspan<2> a`: a shape taken from the argument, one named dimension per rank
    (`a__dim0`, `a__dim1`), as if written `f32 [a__dim0, a__dim1] a`; a call binds them
    from its tensor's shape and a build for the call's shapes fixes them
    (host/specialize.py)."""
    return [A.Name(id=dim_name(name, k), loc=loc) for k in range(rank)]


def open_dims(name: str, dims: list) -> list:
    """`f32 [?, 4] a`: an open dimension '?' (any size) is the argument's, named as an
    unwritten one is (`a__dim0`); the other wildcards ('??', 'auto') stay as written."""
    return [A.Name(id=dim_name(name, k), loc=d.loc)
            if isinstance(d, A.DimWildcard) and d.kind == "?" else d
            for k, d in enumerate(dims)]


def dim_name(param: str, k: int) -> str:
    return f"{param}__dim{k}"
