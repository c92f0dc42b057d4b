"""The `__atomic_*` updates on one element, with C's arithmetic on the element type.

The interpreter keeps u64 elements in int64 tensors (two's complement): the old value is
read back as the unsigned number before min/max compare it, and the result is stored as
the signed bit pattern again.
"""
from __future__ import annotations

from .scalars import round_to


def c_value(v, dtype: str):
    """The C value of an element as its tensor holds it."""
    if dtype == "u64" and v < 0:
        return v + (1 << 64)
    return v


def _stored(v, dtype: str):
    if dtype == "u64" and v >= 1 << 63:
        return v - (1 << 64)
    return v


def combine(op: str, old, value, compare, dtype: str):
    """The element after `op` with `value` (`compare`: cas's expected old value), as the
    element's tensor holds it."""
    old = c_value(old, dtype)
    value = round_to(value, dtype)
    if op == "add":
        new = old + value
    elif op == "sub":
        new = old - value
    elif op == "min":
        new = min(old, value)
    elif op == "max":
        new = max(old, value)
    elif op == "and":
        new = old & value
    elif op == "or":
        new = old | value
    elif op == "xor":
        new = old ^ value
    elif op == "exch":
        new = value
    elif op == "cas":
        new = value if old == round_to(compare, dtype) else old
    else:
        raise ValueError(f"atomic {op}")
    return _stored(round_to(new, dtype), dtype)
