"""The words of a warp's execution every part of the emulator uses: lanes, PTX types, sentinels.

A leaf module (numpy only): warp.py, the operand readers and every instruction family
import these names from here.
"""
from __future__ import annotations

import numpy as np

LANES = 32
ALL = np.ones(LANES, dtype=bool)
NONE = np.zeros(LANES, dtype=bool)
LANE_IDS = np.arange(LANES, dtype=np.int32)

NP = {"pred": np.bool_, "b8": np.uint8, "u8": np.uint8, "s8": np.int8,
      "b16": np.uint16, "u16": np.uint16, "s16": np.int16, "f16": np.float16,
      "bf16": np.uint16, "b32": np.uint32, "u32": np.uint32, "s32": np.int32,
      "f32": np.float32, "b64": np.uint64, "u64": np.uint64, "s64": np.int64,
      "f64": np.float64, "f16x2": np.uint32, "bf16x2": np.uint32}


class _Sentinel:
    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


BLOCKED = _Sentinel("BLOCKED")   # the instruction cannot complete yet (see Warp.block)
CONTROL = _Sentinel("CONTROL")   # the executor changed pc / the lane groups itself
