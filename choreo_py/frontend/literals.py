"""Integer literals: their value, and the 64-bit range every one must fit.

An integer literal of C or Choreo has a type of at most 64 bits (`unsigned long long`,
Choreo's u64), so a literal with more significant digits than a 64-bit value can have is
out of range without being computed. That matters: Python refuses to convert a decimal
string of more than 4300 digits (a guard against quadratic work), and a literal of
millions of digits would otherwise cost its conversion before its error.
"""
from __future__ import annotations

from typing import Optional

U64_MAX = (1 << 64) - 1
S64_MAX = (1 << 63) - 1
#: digits of U64_MAX in a base: more significant digits than this is out of range
_MAX_DIGITS = {2: 64, 8: 22, 10: 20, 16: 16}


def int_value(digits: str, base: int) -> Optional[int]:
    """The value of `digits` (no prefix, sign or suffix) in `base`, or None when it is
    beyond U64_MAX (the caller reports it at the literal)."""
    significant = digits.lstrip("0") or "0"
    if len(significant) > _MAX_DIGITS[base]:
        return None
    value = int(significant, base)
    return value if value <= U64_MAX else None


#: significant digits past which a source literal is not computed: far beyond any 64-bit
#: value's (20 decimal), so the range check still names every out-of-range literal
MAX_COMPUTED_DIGITS = 100


def source_int_value(digits: str, base: int) -> Optional[int]:
    """The exact value of a literal of the program (the range rules judge it later, where
    they know its use), or None when it has more than MAX_COMPUTED_DIGITS digits."""
    significant = digits.lstrip("0") or "0"
    return None if len(significant) > MAX_COMPUTED_DIGITS else int(significant, base)


def shown(text: str, limit: int = 40) -> str:
    """A literal as a message quotes it: a long one shortened, with its length."""
    return text if len(text) <= limit else f"{text[:limit - 20]}...{text[-8:]} " \
                                           f"({len(text)} characters)"


def out_of_range(text: str, value: Optional[int], unsigned: bool) -> Optional[str]:
    """The reference compiler's message for a literal out of range (value None: beyond
    U64_MAX), or None when it fits its type (signed unless suffixed `u`)."""
    hexa = text[:2] in ("0x", "0X")
    if unsigned and (value is None or value > U64_MAX):
        bound = "0xffffffffffffffff" if hexa else str(U64_MAX)
        return f"unsigned integer literal '{shown(text)}' out of range [0, {bound}]."
    if not unsigned and (value is None or value > S64_MAX):
        bound = "0x7fffffffffffffff" if hexa else str(S64_MAX)
        return f"signed integer literal '{shown(text)}' out of range [0, {bound}]."
    return None
