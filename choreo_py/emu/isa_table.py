"""The opcode tables: how an instruction becomes something a warp executes.

Two kinds of entries, both keyed by a dotted opcode prefix ("add",
"wgmma.mma_async", "tcgen05.mma"); the longest registered prefix of an
instruction's opcode wins, and a decoder beats a handler of the same key.

- `@handler(*opcodes, prepare=None)`: `fn(warp, inst)` runs each time the
  instruction executes (the stable interface described in the package
  docstring). `prepare(inst)`, if given, runs once at load time and its
  result is kept in `inst.data`.
- `@decoder(*opcodes)`: `fn(inst) -> exec(warp)` runs once at load time and
  returns a closure (the fast path of the ALU forms: no per-execution
  decoding).

An opcode with no entry is refused by name, with its PTX line, when the
kernel is loaded (not when it first executes): a kernel runs entirely on
forms the emulator knows or not at all.

This module holds the tables and the decorators only (it imports no instruction
family): the families import it, and isa.py imports the families.
"""
from __future__ import annotations

from typing import Callable, Optional

HANDLERS: dict[str, Callable] = {}
DECODERS: dict[str, Callable] = {}
_PREPARE: dict[str, Callable] = {}


class Unsupported(Exception):
    """An instruction form the emulator does not model (message names it)."""


def handler(*opcodes: str, prepare: Optional[Callable] = None):
    def register(fn):
        for op in opcodes:
            HANDLERS[op] = fn
            if prepare is not None:
                _PREPARE[op] = prepare
        return fn
    return register


def decoder(*opcodes: str):
    def register(fn):
        for op in opcodes:
            DECODERS[op] = fn
        return fn
    return register
