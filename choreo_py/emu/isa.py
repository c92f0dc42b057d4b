"""Decoding: an instruction becomes the executor the opcode tables (isa_table.py) give it.

The instruction families register their forms in the tables when imported;
_loaded() imports them (the core families first: a later registration of the same
key wins, so warp_converge's bar.warp.sync replaces any earlier one). The tables'
names are re-exported here (`from choreo_py.emu.isa import handler, HANDLERS`).
"""
from __future__ import annotations

from typing import Callable

from .isa_table import DECODERS, HANDLERS, _PREPARE, Unsupported, decoder, handler

__all__ = ["DECODERS", "HANDLERS", "Unsupported", "decode", "decoder", "handler"]


def _loaded() -> None:
    # The instruction families register themselves on import.
    from . import (isa_alu, isa_atomic, isa_mem, isa_mma_sync, isa_sync, isa_tma,  # noqa: F401
                   isa_warp, isa_wgmma, isa_wgmma_sp, warp_converge)
    try:  # the Blackwell families (tcgen05, TMEM) when present
        from . import tcgen05_handlers  # noqa: F401
    except ImportError as err:
        if err.name != f"{__package__}.tcgen05_handlers":
            raise


def decode(inst) -> Callable:
    """The executor of `inst`: exec(warp) -> None | BLOCKED | jump."""
    _loaded()
    parts = inst.parts
    for n in range(len(parts), 0, -1):
        key = ".".join(parts[:n])
        dec = DECODERS.get(key)
        if dec is not None:
            return dec(inst)
        fn = HANDLERS.get(key)
        if fn is not None:
            prep = _PREPARE.get(key)
            if prep is not None:
                inst.data = prep(inst)
            return lambda warp, _fn=fn, _inst=inst: _fn(warp, _inst)
    raise Unsupported(f"the emulator does not model '{inst.opcode}'")
