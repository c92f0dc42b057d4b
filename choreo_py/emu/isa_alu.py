"""Integer/float arithmetic, comparisons, conversions, moves, shuffles and branches.

Each form is decoded once into a closure over the register numbers and
pre-built constant lanes; executing it is a handful of numpy operations on
32-lane arrays. Rounding: numpy's float32 arithmetic is IEEE round-to-
nearest-even, which is what .rn (and the default) asks for. fma.rn and the
directed roundings .rz/.rm/.rp of f32 add, sub, mul and fma are exact
(rounding.py). `.ftz` flushes subnormal inputs and results to zero of the
same sign (PTX ISA: "subnormal inputs and results are flushed"). The approximate forms (.approx: ex2, rcp,
rsqrt, sqrt, lg2, sin, cos, tanh) are not correctly rounded on the hardware
(the PTX ISA gives each a bound on its error, not its value), so the emulator
does not compute them correctly rounded either: `approximate` returns one of
the two f32 values that bracket the exact result, chosen by a hash of the
input's bits (and tanh further off, within its 2^-11 bound), so a kernel that
relies on the exact value is caught while one within the ISA's bound is not;
an exact result that f32 holds (ex2 of an integer, rcp of a power of two,
ex2(0) = 1) stays exact, as on the hardware. docs/emulator.md, Numerics.
"""
from __future__ import annotations

import numpy as np

from .fminmax import float_minmax
from .isa_table import Unsupported, decoder
from .lanes import CONTROL, LANES, NP
from .operands import _TYPES, _UNSIGNED, const, operand_reader, ptype_of, writer
from .isa_f32x2 import decode_f32x2
from .isa_fp6 import FP6_FP4_PAIRS, decode_cvt_fp6_fp4
from .rounding import add_f32, fma_f32, mode_of, mul_f32

F32_TINY = np.float32(1.1754944e-38)


# ---------------------------------------------------------------- arithmetic
def _ftz(x):
    return np.where(np.abs(x) < F32_TINY, x * np.float32(0), x)


def _shift_left(a, b, bits):
    return np.where(b >= bits, np.zeros_like(a), a << np.minimum(b, bits - 1).astype(a.dtype))


def _shift_right(a, b, bits):
    s = np.minimum(b, bits - 1).astype(a.dtype)
    if a.dtype.kind == "i":
        return a >> s
    return np.where(b >= bits, np.zeros_like(a), a >> s)


def _div_int(a, b):
    if a.dtype.kind == "u":
        return np.where(b == 0, np.full_like(a, np.iinfo(a.dtype).max), a // np.where(b == 0, 1, b))
    bb = np.where(b == 0, 1, b)
    q = np.abs(a.astype(np.int64)) // np.abs(bb.astype(np.int64))
    q = np.where((a < 0) != (bb < 0), -q, q).astype(a.dtype)
    return np.where(b == 0, np.full_like(a, -1), q)


def _rem_int(a, b):
    bb = np.where(b == 0, 1, b)
    if a.dtype.kind == "u":
        return np.where(b == 0, a, a % bb)
    r = np.fmod(a.astype(np.int64), bb.astype(np.int64)).astype(a.dtype)
    return np.where(b == 0, a, r)


def _fma(a, b, c):
    if a.dtype == np.float32:
        return fma_f32(a, b, c, "rn")
    return a * b + c


def _float_div(a, b):
    if a.dtype == np.float32:
        return (a.astype(np.float64) / b).astype(np.float32)
    return a / b


BINARY = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "and": lambda a, b: a & b,
    "or": lambda a, b: a | b,
    "xor": lambda a, b: a ^ b,
    "min": None, "max": None,  # by type, below
    "div": None, "rem": _rem_int,
    "copysign": lambda a, b: np.copysign(b, a),
}


def _binary_fn(name: str, inst, t: str):
    dt = np.dtype(NP[t])
    bits = dt.itemsize * 8
    if name == "mul":
        if "wide" in inst.parts:
            return None
        if "hi" in inst.parts:
            return lambda a, b: ((a.astype(np.int64 if dt.kind == "i" else np.uint64) * b) >> bits).astype(dt)
        return lambda a, b: a * b
    if name in ("min", "max"):
        if dt.kind == "f":
            return lambda a, b: float_minmax(name, "NaN" in inst.parts, a, b)
        return np.minimum if name == "min" else np.maximum
    if name == "div":
        return _float_div if dt.kind == "f" else _div_int
    if name == "shl":
        return lambda a, b: _shift_left(a, b, bits)
    if name == "shr":
        return lambda a, b: _shift_right(a, b, bits)
    return BINARY[name]


def _sat_ftz(inst, fn):
    post = []
    ftz = "ftz" in inst.parts
    if ftz:
        post.append(_ftz)
    if "sat" in inst.parts:
        post.append(lambda x: np.clip(x, 0, 1))
    if not post:
        return fn

    def wrapped(*a):
        r = fn(*(_ftz(x) for x in a)) if ftz else fn(*a)
        for p in post:
            r = p(r)
        return r
    return wrapped


@decoder("add", "sub", "mul", "and", "or", "xor", "min", "max", "div", "rem", "shl", "shr",
         "copysign")
def _dec_binary(inst):
    from .isa_support import machine
    m = machine()
    if "f32x2" in inst.parts:
        return decode_f32x2(inst, m)
    name = inst.parts[0]
    t = ptype_of(inst)
    ops = inst.operands
    if name == "mul" and "wide" in inst.parts:
        wt = {"s32": "s64", "u32": "u64", "s16": "s32", "u16": "u32"}[t]
        a = operand_reader(ops[1], t, m)
        b = operand_reader(ops[2], t, m)
        wide = np.dtype(NP[wt])
        wr = writer(ops[0], wt, m)
        return lambda w: wr(w, a(w).astype(wide) * b(w).astype(wide))
    if name in ("min", "max") and len(ops) == 4:  # three inputs (sm_100): max(max(a, b), c)
        return _min_max3(inst, name, t, m)
    if len(ops) != 3:
        raise Unsupported(f"'{inst.opcode}' with {len(ops) - 1} source operands")
    fn = _sat_ftz(inst, _rounded(inst, name, t) or _binary_fn(name, inst, t))
    bt = "u32" if name in ("shl", "shr") else t
    a = operand_reader(ops[1], t, m)
    b = operand_reader(ops[2], bt, m)
    wr = writer(ops[0], t, m)
    by_c = _by_constant(inst, name, t, const(ops[2].value, bt)) if ops[2].kind == "imm" else None
    if by_c is not None:
        return lambda w: wr(w, by_c(a(w)))

    def ex(w):
        wr(w, fn(a(w), b(w)))
    return ex


def _by_constant(inst, name: str, t: str, c: np.ndarray):
    """fn(a) for an integer shift, div or rem by the constant lanes `c` (an immediate): the
    per-lane tests of _shift_left/_shift_right/_div_int/_rem_int on `b` decided at decode
    time, the same operations on `a` left (None: another form, or a divisor of 0)."""
    dt = np.dtype(NP[t])
    if dt.kind not in "iu" or "sat" in inst.parts or "ftz" in inst.parts:
        return None
    bits = dt.itemsize * 8
    k = int(c[0])  # every lane of an immediate holds the same value
    if name in ("shl", "shr"):
        s = np.minimum(c, bits - 1).astype(dt)
        if name == "shr" and dt.kind == "i":
            return lambda a: a >> s
        if k >= bits:
            return lambda a: np.zeros_like(a)
        return (lambda a: a << s) if name == "shl" else (lambda a: a >> s)
    if name not in ("div", "rem") or k == 0:
        return None
    if dt.kind == "u":
        return (lambda a: a // c) if name == "div" else (lambda a: a % c)
    b64 = c.astype(np.int64)
    if name == "rem":
        return lambda a: np.fmod(a.astype(np.int64), b64).astype(dt)
    absb, bneg = np.abs(b64), c < 0

    def div(a):
        q = np.abs(a.astype(np.int64)) // absb
        return np.where((a < 0) != bneg, -q, q).astype(dt)
    return div


def _rounded(inst, name: str, t: str):
    """The directed-rounding f32 add/sub/mul (rounding.py); None for round to nearest."""
    mode = mode_of(inst.parts)
    if mode == "rn":
        return None
    if name not in ("add", "sub", "mul") or t != "f32":
        raise Unsupported(f"'{inst.opcode}' (directed rounding is modelled for f32 only)")
    if name == "mul":
        return lambda a, b: mul_f32(a, b, mode)
    return lambda a, b: add_f32(a, -b if name == "sub" else b, mode)


def _min_max3(inst, name: str, t: str, m):
    if any(p in ("xorsign", "abs") for p in inst.parts):
        raise Unsupported(f"'{inst.opcode}'")
    fn = _sat_ftz(inst, _binary_fn(name, inst, t))
    a, b, c = (operand_reader(inst.operands[i], t, m) for i in (1, 2, 3))
    wr = writer(inst.operands[0], t, m)
    return lambda w: wr(w, fn(fn(a(w), b(w)), c(w)))


@decoder("mad", "fma")
def _dec_mad(inst):
    from .isa_support import machine
    m = machine()
    if "f32x2" in inst.parts:
        return decode_f32x2(inst, m)
    t = ptype_of(inst)
    ops = inst.operands
    dt = np.dtype(NP[t])
    if "wide" in inst.parts:
        wt = {"s32": "s64", "u32": "u64"}[t]
        wd = np.dtype(NP[wt])
        a, b = operand_reader(ops[1], t, m), operand_reader(ops[2], t, m)
        c = operand_reader(ops[3], wt, m)
        wr = writer(ops[0], wt, m)
        return lambda w: wr(w, a(w).astype(wd) * b(w).astype(wd) + c(w))
    if "hi" in inst.parts:
        raise Unsupported(f"'{inst.opcode}'")
    a, b, c = (operand_reader(ops[i], t, m) for i in (1, 2, 3))
    wr = writer(ops[0], t, m)
    mode = mode_of(inst.parts)
    if mode != "rn" and t != "f32":
        raise Unsupported(f"'{inst.opcode}' (directed rounding is modelled for f32 only)")
    fused = (lambda x, y, z: fma_f32(x, y, z, mode)) if mode != "rn" else _fma
    fn = _sat_ftz(inst, fused if dt.kind == "f" else (lambda x, y, z: x * y + z))
    return lambda w: wr(w, fn(a(w), b(w), c(w)))


_HASH = np.uint32(0x9E3779B1)


def _pick(x: np.ndarray, salt: int) -> np.ndarray:
    """A deterministic bit per input value (Fibonacci hashing of its bits)."""
    u = np.ascontiguousarray(x).view(np.uint32) ^ np.uint32(salt)
    return ((u * _HASH) >> np.uint32(31)).astype(bool)


def approximate(x: np.ndarray, exact64: np.ndarray, salt: int) -> np.ndarray:
    """A faithful f32 result of an .approx operation: the correctly rounded value, or
    its neighbour on the other side of the exact value (error below one ulp: within
    the PTX ISA's bounds for ex2/rcp/rsqrt/sqrt/lg2/sin/cos.approx.f32). Exactly
    representable results (2^n for integer n, 1/2^n) and non-finite ones are kept."""
    r = exact64.astype(np.float32)
    r64 = r.astype(np.float64)
    with np.errstate(invalid="ignore"):
        away = np.where(r64 < exact64, np.float32(np.inf), np.float32(-np.inf))
        other = np.nextafter(r, away.astype(np.float32))
        keep = (r64 == exact64) | ~np.isfinite(r) | ~np.isfinite(exact64) | (r == 0) \
            | ~_pick(x, salt)
    return np.where(keep, r, other)


def _approx_tanh(x):
    """tanh.approx.f32: the PTX ISA bounds its relative error by about 2^-11; the
    result is moved by up to 2^-12 of itself, deterministically per input."""
    exact = np.tanh(x.astype(np.float64))
    u = np.ascontiguousarray(x).view(np.uint32)
    frac = ((u * _HASH) >> np.uint32(8)).astype(np.float64) / float(1 << 24) - 0.5
    return np.where(x == 0, x, (exact * (1 + frac * 2.0 ** -11)).astype(np.float32))


_APPROX = {   # name -> (exact in float64, salt)
    "ex2": (np.exp2, 1), "rcp": (lambda v: 1.0 / v, 2), "rsqrt": (lambda v: 1.0 / np.sqrt(v), 3),
    "sqrt": (np.sqrt, 4), "lg2": (np.log2, 5), "sin": (np.sin, 6), "cos": (np.cos, 7),
}


def _approx_fn(name: str):
    if name == "tanh":
        return _approx_tanh
    exact, salt = _APPROX[name]

    def fn(x):
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return approximate(x, exact(x.astype(np.float64)), salt)
    return fn


def _ex2(x):
    return np.exp2(x.astype(np.float64)).astype(np.float32) if x.dtype == np.float32 else np.exp2(x)


UNARY = {
    "neg": lambda x: -x,
    "abs": np.abs,
    "not": lambda x: ~x,
    "ex2": _ex2,
    "lg2": lambda x: np.log2(x.astype(np.float64)).astype(x.dtype),
    "rcp": lambda x: (1.0 / x.astype(np.float64)).astype(x.dtype),
    "sqrt": lambda x: np.sqrt(x.astype(np.float64)).astype(x.dtype),
    "rsqrt": lambda x: (1.0 / np.sqrt(x.astype(np.float64))).astype(x.dtype),
    "sin": lambda x: np.sin(x.astype(np.float64)).astype(x.dtype),
    "cos": lambda x: np.cos(x.astype(np.float64)).astype(x.dtype),
    "tanh": lambda x: np.tanh(x.astype(np.float64)).astype(x.dtype),
    "popc": lambda x: np.array([bin(int(v)).count("1") for v in x.tolist()], dtype=np.uint32),
    "clz": lambda x: np.array([x.dtype.itemsize * 8 - int(v).bit_length() for v in
                               x.view(_UNSIGNED[x.dtype.itemsize]).tolist()], dtype=np.uint32),
}


@decoder(*UNARY)
def _dec_unary(inst):
    from .isa_support import machine
    m = machine()
    name = inst.parts[0]
    t = ptype_of(inst)
    ops = inst.operands
    fn = UNARY[name]
    if "approx" in inst.parts and t == "f32" and (name in _APPROX or name == "tanh"):
        fn = _approx_fn(name)
    if name == "ex2" and "ftz" in inst.parts:
        inner = fn
        fn = (lambda x: _ftz(inner(_ftz(x))))
    else:
        fn = _sat_ftz(inst, fn) if "ftz" in inst.parts else fn
    a = operand_reader(ops[1], t, m)
    out_t = "u32" if name in ("popc", "clz") else t
    wr = writer(ops[0], out_t, m)
    return lambda w: wr(w, fn(a(w)))


# ---------------------------------------------------------------- compare / select
_CMP = {
    "eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
    "gt": np.greater, "ge": np.greater_equal,
    "lo": np.less, "ls": np.less_equal, "hi": np.greater, "hs": np.greater_equal,
}


def _cmp_fn(op: str, t: str):
    if op in _CMP:
        fn = _CMP[op]
        if op == "ne" and NP[t] in (np.float32, np.float64):
            return lambda a, b: (a != b) & ~np.isnan(a) & ~np.isnan(b)
        return fn
    if op.endswith("u") and op[:-1] in _CMP:  # unordered: true if either is NaN
        base = _CMP[op[:-1]]
        return lambda a, b: base(a, b) | np.isnan(a) | np.isnan(b)
    if op == "num":
        return lambda a, b: ~(np.isnan(a) | np.isnan(b))
    if op == "nan":
        return lambda a, b: np.isnan(a) | np.isnan(b)
    raise Unsupported(f"comparison '{op}'")


@decoder("setp")
def _dec_setp(inst):
    from .isa_support import machine
    m = machine()
    t = ptype_of(inst)
    cmp = _cmp_fn(inst.parts[1], t)
    ops = inst.operands
    combine = next((p for p in inst.parts[2:] if p in ("and", "or", "xor")), None)
    dst = ops[0]
    second = None
    if dst.kind == "vec":  # p|q written as two operands by some emitters
        dst, second = dst.items
    a, b = operand_reader(ops[1], t, m), operand_reader(ops[2], t, m)
    wr = writer(dst, "pred", m)
    wr2 = writer(second, "pred", m) if second is not None else None
    if combine:
        c = operand_reader(ops[3], "pred", m)
        comb = {"and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor}[combine]

        def ex(w):
            r = cmp(a(w), b(w))
            cc = c(w)
            wr(w, comb(r, cc))
            if wr2:
                wr2(w, comb(~r, cc))
        return ex

    def ex(w):
        r = cmp(a(w), b(w))
        wr(w, r)
        if wr2:
            wr2(w, ~r)
    return ex


@decoder("selp")
def _dec_selp(inst):
    from .isa_support import machine
    m = machine()
    t = ptype_of(inst)
    ops = inst.operands
    a, b = operand_reader(ops[1], t, m), operand_reader(ops[2], t, m)
    c = operand_reader(ops[3], "pred", m)
    wr = writer(ops[0], t, m)
    return lambda w: wr(w, np.where(c(w), a(w), b(w)))


# ---------------------------------------------------------------- moves / conversions
@decoder("mov")
def _dec_mov(inst):
    from .isa_support import machine
    m = machine()
    t = ptype_of(inst)
    d, s = inst.operands[0], inst.operands[1]
    if s.kind == "vec":  # pack: mov.b64 %rd, {%r0, %r1} (element 0 in the low bits)
        n = len(s.items)
        et = {2: {"b64": "b32", "b32": "b16"}, 4: {"b64": "b16", "b32": "b8"}}[n][t]
        parts = [operand_reader(x, et, m) for x in s.items]
        wr = writer(d, t, m)
        return lambda w: wr(w, np.stack([p(w) for p in parts], axis=1).reshape(-1).view(NP[t]))
    if d.kind == "vec":  # unpack
        n = len(d.items)
        et = {2: {"b64": "b32", "b32": "b16"}, 4: {"b64": "b16", "b32": "b8"}}[n][t]
        src = operand_reader(s, t, m)
        wrs = [writer(x, et, m) for x in d.items]

        def unpack(w):
            v = src(w).view(NP[et]).reshape(LANES, n)
            for i, wr in enumerate(wrs):
                wr(w, np.ascontiguousarray(v[:, i]))
        return unpack
    src = operand_reader(s, t, m)
    wr = writer(d, t, m)
    return lambda w: wr(w, src(w))


def f32_to_bf16_bits(x: np.ndarray) -> np.ndarray:
    """Round-to-nearest-even float32 -> bf16 bit patterns; NaN -> canonical 0x7FFF."""
    u = x.astype(np.float32).view(np.uint32)
    r = ((u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)).astype(np.uint16)
    return np.where(np.isnan(x), np.uint16(0x7FFF), r)


def bf16_bits_to_f32(b: np.ndarray) -> np.ndarray:
    return (b.astype(np.uint32) << np.uint32(16)).view(np.float32)


def _to_float_bits(x, dst: str, rnd: str):
    if dst == "bf16":
        if rnd not in ("rn", ""):
            raise Unsupported(f"cvt rounding .{rnd} to bf16")
        return f32_to_bf16_bits(x)
    if dst == "f16":
        return x.astype(np.float16).view(np.uint16)
    raise Unsupported(f"cvt to {dst}")


#: Rounding to an integral value (`cvt.rni.f32.f32` keeps the float type).
_INT_ROUNDING = {"rzi": np.trunc, "rni": np.rint, "rmi": np.floor, "rpi": np.ceil}


def _float_to_int(x, dt, rnd: str):
    f = x.astype(np.float64)
    f = {"rzi": np.trunc, "rni": np.rint, "rmi": np.floor, "rpi": np.ceil, "": np.trunc}[rnd](f)
    info = np.iinfo(dt)
    f = np.where(np.isnan(f), 0, np.clip(f, info.min, info.max))
    return f.astype(dt)


def fp8_to_f16_bits(fmt: str) -> np.ndarray:
    """f16 bit patterns of the 256 values of an fp8 format (exact: f16 holds them all).
    e5m2 is f16's upper byte (1-5-2 against 1-5-10, the same bias); e4m3 ("fn": no
    infinities, S.1111.111 is NaN) has bias 7 and subnormals of 2^-9 steps."""
    b = np.arange(256, dtype=np.uint16)
    if fmt == "e5m2":
        return b << np.uint16(8)
    sign = np.where(b & 0x80, -1.0, 1.0)
    exp, man = (b >> 3) & 0xF, (b & 7).astype(np.float64)
    mag = np.where(exp == 0, man / 8 * 2.0 ** -6, (1 + man / 8) * 2.0 ** (exp.astype(np.int64) - 7))
    bits = (sign * mag).astype(np.float16).view(np.uint16)
    return np.where((b & 0x7F) == 0x7F, np.uint16(0x7FFF), bits)


def _dec_cvt_fp8x2(inst, m):
    """`cvt.rn.f16x2.e4m3x2 d, a` (and .e5m2x2): the 16-bit `a`'s upper byte to d's upper
    half, its lower byte to the lower half (the PTX ISA's packing, as for the f16x2 ->
    fp8x2 direction)."""
    src_t = next(p for p in inst.parts if p in ("e4m3x2", "e5m2x2"))
    if inst.parts[1:] != ("rn", "f16x2", src_t):
        raise Unsupported(f"'{inst.opcode}' (of the fp8 conversions only cvt.rn.f16x2.e4m3x2 "
                          "and .e5m2x2 are modelled)")
    table = fp8_to_f16_bits(src_t[:-2]).astype(np.uint32)
    src = operand_reader(inst.operands[1], "b16", m)
    wr = writer(inst.operands[0], "b32", m)

    def unpack(w):
        a = src(w).astype(np.uint32)
        wr(w, (table[(a >> 8) & 0xFF] << np.uint32(16)) | table[a & 0xFF])
    return unpack


@decoder("cvt")
def _dec_cvt(inst):
    from .isa_support import machine
    m = machine()
    if any(p.startswith(("e4m3", "e5m2")) for p in inst.parts):
        return _dec_cvt_fp8x2(inst, m)
    if any(p in FP6_FP4_PAIRS for p in inst.parts):
        return decode_cvt_fp6_fp4(inst, m)
    types = [p for p in inst.parts[1:] if p in _TYPES]
    rnd = next((p for p in inst.parts[1:] if p in ("rn", "rz", "rm", "rp", "rni", "rzi",
                                                   "rmi", "rpi")), "")
    if len(types) != 2:
        raise Unsupported(f"'{inst.opcode}'")
    dst_t, src_t = types[0], types[1]
    ops = inst.operands
    if dst_t in ("bf16x2", "f16x2"):  # d = {cvt(a) in the upper half, cvt(b) in the lower}
        a, b = operand_reader(ops[1], src_t, m), operand_reader(ops[2], src_t, m)
        wr = writer(ops[0], "b32", m)
        low = dst_t[:-2]

        def pack(w):
            hi = _to_float_bits(a(w), low, rnd).astype(np.uint32)
            lo = _to_float_bits(b(w), low, rnd).astype(np.uint32)
            wr(w, (hi << np.uint32(16)) | lo)
        return pack
    src = operand_reader(ops[1], src_t if src_t != "bf16" else "b16", m)
    wr_t = dst_t if dst_t not in ("bf16", "f16") else "b16"
    wr = writer(ops[0], wr_t, m)
    sdt, ddt = np.dtype(NP[src_t]), np.dtype(NP[dst_t])
    if src_t == "bf16":
        conv = (lambda x: bf16_bits_to_f32(x).astype(ddt)) if ddt.kind == "f" else None
    elif dst_t in ("bf16", "f16"):
        conv = (lambda x: _to_float_bits(x, dst_t, rnd))
    elif src_t == "f16":
        conv = lambda x: x.astype(ddt) if ddt.kind == "f" else _float_to_int(x, ddt, rnd)
    elif sdt.kind == "f" and ddt.kind in "iu":
        conv = lambda x: _float_to_int(x, ddt, rnd)
    elif sdt.kind == "f" and ddt.kind == "f" and rnd in _INT_ROUNDING:  # cvt.rni.f32.f32
        conv = lambda x: _INT_ROUNDING[rnd](x).astype(ddt)
    else:
        conv = lambda x: x.astype(ddt)
    if "ftz" in inst.parts and ddt.kind == "f":
        inner = conv
        conv = lambda x: _ftz(inner(x))
    if conv is None:
        raise Unsupported(f"'{inst.opcode}'")
    return lambda w: wr(w, conv(src(w)))


# ---------------------------------------------------------------- control flow
def resolve_labels(kernel) -> None:
    for inst in kernel.insts:
        if inst.parts[0] == "bra":
            op = inst.operands[0]
            if op.kind != "sym" or op.value not in kernel.labels:
                raise Unsupported(f"branch target {op.text} is not a label of the kernel")
            inst.data = kernel.labels[op.value]


@decoder("bra")
def _dec_bra(inst):
    target = inst.data
    uniform = "uni" in inst.parts

    def ex(w):
        m = w.mask
        if m is w.gmask or np.count_nonzero(m) == w.gcount:
            w.jump(target)
        else:
            if uniform:
                w.machine.race("bra.uni taken by some lanes of the warp and not by others "
                               "(the branch is declared uniform; the hardware may follow one "
                               "lane's predicate)", inst)
            w.split(m, target)
        return CONTROL
    return ex


@decoder("call")
def _dec_call(inst):
    callee = next((op.text for op in inst.operands if not op.text.startswith("(")), "?")
    raise Unsupported(f"'call' of {callee}: calls of device functions (vprintf: printf in a "
                      "kernel) are not modelled")


@decoder("ret", "exit")
def _dec_exit(inst):
    def ex(w):
        w.exit_lanes(w.mask.copy())
        return CONTROL
    return ex
