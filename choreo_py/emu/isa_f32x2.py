"""The packed float32 pair forms of sm_100: add / sub / mul / fma `.f32x2`.

Operands are .b64 registers holding two float32 values, element 0 in bits
0-31 and element 1 in bits 32-63 (PTX ISA, "fma": fA[0] = a[0:31], fA[1] =
a[32:63]); each element is computed as the scalar f32 form with the same
modifiers computes it, by the same functions (rounding.py for .rn/.rz/.rm/.rp,
fma.rn correctly rounded; .ftz flushing subnormal inputs and results to zero
of their sign), so a pair gives bit for bit its two scalar forms. As ptxas
(13.0) does, the forms the ISA lacks are refused: min/max.f32x2, .sat, and an
fma without its rounding modifier (`fma.rnd{.ftz}.f32x2`; add, sub and mul take
.rnd optionally). `mov.b64 %rd, {%f0, %f1}` (isa_alu) packs element 0 low, so
the pairs the lowering builds (lowering/core/f32x2.py) come apart the way they
went in.
"""
from __future__ import annotations

import numpy as np

from .isa_table import Unsupported
from .lanes import LANES
from .operands import operand_reader, writer
from .rounding import add_f32, fma_f32, mode_of, mul_f32

_F32_TINY = np.float32(1.1754944e-38)
_MODS = {"rn", "rz", "rm", "rp", "ftz", "f32x2"}


def _flush(x: np.ndarray) -> np.ndarray:
    return np.where(np.abs(x) < _F32_TINY, x * np.float32(0), x)


def _op(name: str, mode: str):
    """The element function: the scalar decoder's (isa_alu: a + b, a - b, a * b at .rn;
    rounding.py otherwise)."""
    if name == "add":
        return (lambda a, b: a + b) if mode == "rn" else (lambda a, b: add_f32(a, b, mode))
    if name == "sub":
        return (lambda a, b: a - b) if mode == "rn" else (lambda a, b: add_f32(a, -b, mode))
    if name == "mul":
        return (lambda a, b: a * b) if mode == "rn" else (lambda a, b: mul_f32(a, b, mode))
    return lambda a, b, c: fma_f32(a, b, c, mode)


def decode_f32x2(inst, m):
    name = inst.parts[0]
    extra = [p for p in inst.parts[1:] if p not in _MODS]
    nsrc = 3 if name == "fma" else 2
    rounded = any(p in ("rn", "rz", "rm", "rp") for p in inst.parts)
    if extra or name not in ("add", "sub", "mul", "fma") or (name == "fma" and not rounded) \
            or len(inst.operands) != nsrc + 1:
        raise Unsupported(f"'{inst.opcode}' (not a form of the PTX ISA)")
    fn = _op(name, mode_of(inst.parts))
    ftz = "ftz" in inst.parts
    srcs = [operand_reader(op, "b64", m) for op in inst.operands[1:]]
    wr = writer(inst.operands[0], "b64", m)

    def ex(w):
        vals = [np.ascontiguousarray(s(w)).view(np.float32) for s in srcs]  # 64 = 32 lanes x 2
        if ftz:
            vals = [_flush(v) for v in vals]
        r = fn(*vals).astype(np.float32)
        if ftz:
            r = _flush(r)
        wr(w, r.view(np.uint64).reshape(LANES))
    return ex
