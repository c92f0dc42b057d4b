"""The machine being decoded for (decoders need its register types and symbols)."""
from __future__ import annotations

_CURRENT: list = [None]


def machine():
    return _CURRENT[0]


def decoding(m):
    _CURRENT[0] = m
