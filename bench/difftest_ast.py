"""The pieces of difftest's programs: values with C's rules, expressions and statements,
each of which writes itself as Choreo and runs itself here (the third opinion). The
rules the generated programs keep: difftest_gen.py."""
from __future__ import annotations

import math
import random
import struct
from dataclasses import dataclass, field

import numpy as np

S32_MIN, S32_MAX = -2 ** 31, 2 ** 31 - 1
INT_TYPES = ("s32", "u32")
FLOAT_TYPES = ("f32", "f16", "bf16")
NARROW = ("f16", "bf16")

#: Approximate operations and the relative error the comparison allows for each (the PTX
#: ISA's bounds for the .approx/.full forms the backends emit, rounded up; the
#: interpreter computes the exact value in double precision and rounds it).
APPROX = {
    "/": 2 ** -21,          # div.full.f32: 2 ulp
    "fma": 2 ** -23,        # x*y + z fused: the product's rounding (half an ulp of it) is skipped
    "__exp": 2 ** -19,      # ex2.approx after a multiply by log2(e): 2 ulp + the product's rounding, scaled by |x|
    "__exp2f": 2 ** -21,    # ex2.approx.ftz.f32: 2 ulp
    "__log": 2 ** -20,      # lg2.approx (absolute 2^-22.6) times ln 2 (arguments >= 1: results >= 0)
    "__sqrt": 2 ** -21,     # sqrt.approx.f32: relative 2^-23
    "__rsqrt": 2 ** -21,    # rsqrt.approx.f32: relative 2^-22.9
    "__sin": 2 ** -19,      # sin.approx.f32: absolute 2^-20.9 on [-pi, pi]
    "__cos": 2 ** -19,      # cos.approx.f32: absolute 2^-20.9 on [-pi, pi]
}
TOLERANCE_FLOOR = 2 ** -19   # absolute, for results near zero (sin/cos/log are absolute bounds)


class UB(Exception):
    """The program's arithmetic is undefined on these inputs: the generator draws again."""


# ---------------------------------------------------------------- values

def s32(x: int) -> int:
    if not S32_MIN <= x <= S32_MAX:
        raise UB(f"s32 overflow: {x}")
    return x


def u32(x: int) -> int:
    return x & 0xFFFFFFFF


def wrap_s32(x: int) -> int:
    x &= 0xFFFFFFFF
    return x - 2 ** 32 if x >= 2 ** 31 else x


def bf16_round(v) -> np.float32:
    """f32 -> bf16 -> f32, round to nearest even (what cvt.rn.bf16.f32 does)."""
    bits = struct.unpack("<I", struct.pack("<f", float(np.float32(v))))[0]
    if (bits & 0x7F800000) == 0x7F800000:        # inf/nan: keep (nan stays a nan)
        return np.float32(struct.unpack("<f", struct.pack("<I", bits & 0xFFFF0000 | (0x400000 if bits & 0x7FFFFF else 0)))[0])
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return np.float32(struct.unpack("<f", struct.pack("<I", bits & 0xFFFFFFFF))[0])


def fround(v, t: str):
    """A float value rounded to type t, kept as numpy f32 (f32, bf16) or f16."""
    with np.errstate(all="ignore"):
        if t == "f32":
            return np.float32(v)
        if t == "f16":
            return np.float16(np.float32(v))
        return bf16_round(v)


def to_f32(v) -> np.float32:
    return np.float32(v)


# ---------------------------------------------------------------- expressions

@dataclass
class E:
    """An expression: its Choreo text, its type, and whether an approximate op feeds it."""
    t: str
    taint: bool = False

    def render(self) -> str:
        raise NotImplementedError

    def eval(self, env) -> object:
        raise NotImplementedError


@dataclass
class Lit(E):
    v: object = 0

    def render(self) -> str:
        if self.t == "s32":
            return str(self.v) if self.v >= 0 else f"({self.v})"
        if self.t == "u32":
            return f"{self.v}u"
        if self.t == "bool":
            return "true" if self.v else "false"
        text = str(np.float32(self.v))
        return (f"{text}f" if text[0] != "-" else f"({text}f)")

    def eval(self, env):
        return self.v


@dataclass
class Var(E):
    name: str = ""

    def render(self) -> str:
        return self.name

    def eval(self, env):
        return env[self.name]


@dataclass
class Dim(E):
    """The symbolic dimension N (an s32 here)."""

    def render(self) -> str:
        return "N"

    def eval(self, env):
        return env["N"]


INT_BIN = ("+", "-", "*", "/", "%", "&", "|", "^", ">>", "<<")
FLOAT_BIN = ("+", "-", "*")
CMP = ("<", "<=", ">", ">=", "==", "!=")


def int_binop(op: str, t: str, a: int, b: int) -> int:
    if op in ("/", "%"):
        if b == 0 or (t == "s32" and a == S32_MIN and b == -1):
            raise UB("division by zero or overflow")
        q = abs(a) // abs(b) * (1 if (a >= 0) == (b >= 0) else -1)   # C: toward zero
        r = q if op == "/" else a - q * b
    elif op in (">>", "<<"):
        if not 0 <= b < 32:
            raise UB("shift out of range")
        if op == ">>":
            r = a >> b                       # arithmetic for s32 (python ints), logical for u32
        else:
            if t == "s32" and a < 0:
                raise UB("left shift of a negative value")
            r = a << b
            if t == "s32" and r > S32_MAX:
                raise UB("left shift overflow")
    else:
        r = {"+": a + b, "-": a - b, "*": a * b, "&": a & b, "|": a | b, "^": a ^ b}[op]
    return s32(r) if t == "s32" else u32(r)


def float_binop(op: str, t: str, a, b):
    with np.errstate(all="ignore"):
        x, y = np.float32(a), np.float32(b)
        r = {"+": x + y, "-": x - y, "*": x * y, "/": np.float32(float(x) / float(y)) if y != 0
             else np.float32(np.float32(x) / np.float32(y))}[op]
    return fround(r, t)


@dataclass
class Bin(E):
    op: str = "+"
    a: E = None
    b: E = None

    def render(self) -> str:
        return f"({self.a.render()} {self.op} {self.b.render()})"

    def eval(self, env):
        a, b = self.a.eval(env), self.b.eval(env)
        if self.t in INT_TYPES:
            return int_binop(self.op, self.t, a, b)
        if contractible(self) and any(product(p) and not math.isfinite(float(v))
                                      for p, v in ((self.a, a), (self.b, b))):
            # fma(x, y, z) adds z to the unrounded x*y: an overflowing product gives
            # -inf or a finite sum there where inf - inf = NaN separately (seed 17618)
            raise UB("an overflowing product that an fma may contract")
        return float_binop(self.op, self.t, a, b)


@dataclass
class Neg(E):
    a: E = None
    op: str = "-"

    def render(self) -> str:
        return f"({self.op}{self.a.render()})"

    def eval(self, env):
        v = self.a.eval(env)
        if self.op == "~":
            return wrap_s32(~v) if self.t == "s32" else u32(~v)
        if self.t == "s32":
            return s32(-v)
        with np.errstate(all="ignore"):
            return fround(-np.float32(v), self.t)


@dataclass
class Cmp(E):
    op: str = "<"
    a: E = None
    b: E = None

    def render(self) -> str:
        return f"({self.a.render()} {self.op} {self.b.render()})"

    def eval(self, env):
        a, b = self.a.eval(env), self.b.eval(env)
        if self.a.t in FLOAT_TYPES:
            a, b = float(a), float(b)
        return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b, "==": a == b, "!=": a != b}[self.op]


@dataclass
class Logic(E):
    op: str = "&&"
    a: E = None
    b: E = None

    def render(self) -> str:
        if self.op == "!":
            return f"(!{self.a.render()})"
        return f"({self.a.render()} {self.op} {self.b.render()})"

    def eval(self, env):
        if self.op == "!":
            return not self.a.eval(env)
        if self.op == "&&":
            return bool(self.a.eval(env)) and bool(self.b.eval(env))
        return bool(self.a.eval(env)) or bool(self.b.eval(env))


@dataclass
class Tern(E):
    c: E = None
    a: E = None
    b: E = None

    def render(self) -> str:
        return f"({self.c.render()} ? {self.a.render()} : {self.b.render()})"

    def eval(self, env):
        return self.a.eval(env) if self.c.eval(env) else self.b.eval(env)


def convert(v, src: str, dst: str):
    if src == dst:
        return v
    if dst in INT_TYPES:
        if src in INT_TYPES:
            return wrap_s32(v) if dst == "s32" else u32(v)
        f = float(v)
        if not math.isfinite(f):
            raise UB("nan to integer")
        i = math.trunc(f)
        lo, hi = (S32_MIN, S32_MAX) if dst == "s32" else (0, 2 ** 32 - 1)
        if f < 0 and dst == "u32" or not lo <= i <= hi:
            raise UB("float to integer out of range")
        return i
    if src in INT_TYPES:
        return fround(float(np.float32(v)) if dst != "f32" else v, dst)   # RN to f32, then to the narrow type
    return fround(np.float32(v), dst)


@dataclass
class Cast(E):
    a: E = None

    def render(self) -> str:
        return f"__to<{self.t}>({self.a.render()})"

    def eval(self, env):
        return convert(self.a.eval(env), self.a.t, self.t)


@dataclass
class Call(E):
    fn: str = "__max"
    args: tuple = ()

    def render(self) -> str:
        return f"{self.fn}({', '.join(a.render() for a in self.args)})"

    def eval(self, env):
        xs = [a.eval(env) for a in self.args]
        if self.t in INT_TYPES:
            return max(xs) if self.fn == "__max" else min(xs)
        fs = [float(np.float32(x)) for x in xs]
        if self.fn in ("__max", "__min"):
            if any(math.isnan(f) for f in fs):
                raise UB("nan in max/min (which nan comes back is unspecified)")
            if fs[0] == fs[1] == 0.0:  # PTX orders -0.0 below +0.0 (ISA 9.7.3.11-12)
                signs = [math.copysign(1.0, f) for f in fs]
                neg = min(signs) < 0 if self.fn == "__min" else max(signs) < 0
                return fround(-0.0 if neg else 0.0, self.t)
            return fround(max(fs) if self.fn == "__max" else min(fs), self.t)
        f = fs[0]
        try:
            r = {"__fabs": abs, "__exp": math.exp, "__exp2f": lambda x: 2.0 ** x,
                 "__log": math.log, "__sqrt": math.sqrt,
                 "__rsqrt": lambda x: 1 / math.sqrt(x), "__sin": math.sin,
                 "__cos": math.cos}[self.fn](f)
        except (ValueError, OverflowError, ZeroDivisionError):
            raise UB(f"{self.fn}({f}) outside its domain")
        return fround(r, self.t)


@dataclass
class Read(E):
    """An element of a global tensor or a shared buffer."""
    buf: str = ""
    idx: E = None

    def render(self) -> str:
        return f"{self.buf}.at({self.idx.render()})"

    def eval(self, env):
        i = self.idx.eval(env)
        arr = env["@" + self.buf]
        if not 0 <= i < len(arr):
            raise AssertionError(f"generator bug: {self.buf}[{i}] out of bounds")
        v = arr[i]
        if self.t in INT_TYPES:
            return int(v)
        return fround(v, self.t) if self.t != "f16" else np.float16(v)


def product(e: E) -> bool:
    """A product the backends may fuse into an fma with an add around it; a select may
    be one (a constant condition folds it to a branch: seed 32432's `(65536u <= 3u) ? v2
    : (v2 * v2)`)."""
    return e.t == "f32" and (isinstance(e, Bin) and e.op == "*" or isinstance(e, Neg) and product(e.a)
                             or isinstance(e, Tern) and (product(e.a) or product(e.b)))


def contractible(e: E) -> bool:
    """`x*y + z` and its kin: the backends may fuse it into one fma (nvcc's default, and
    lowering/core/exprs.py's), which rounds once where the separate ops round twice."""
    return isinstance(e, Bin) and e.t == "f32" and e.op in ("+", "-") and (product(e.a) or product(e.b))


def approx_ops(e: E) -> set[str]:
    """The approximate operations in e (for the tolerance)."""
    found = set()
    stack = [e]
    while stack:
        x = stack.pop()
        if isinstance(x, Call) and x.fn in APPROX:
            found.add(x.fn)
        if isinstance(x, Bin) and x.op == "/" and x.t in FLOAT_TYPES:
            found.add("/")
        if contractible(x):
            found.add("fma")
        for f in ("a", "b", "c", "idx"):
            sub = getattr(x, f, None)
            if isinstance(sub, E):
                stack.append(sub)
        stack.extend(getattr(x, "args", ()))
    return found


def magnitude(e: E, env) -> float:
    """The largest |value| of e's float subexpressions, each scaled by the factors that
    multiply it on its way to e (the scale of the rounding errors e carries: an fma's
    skipped rounding in `x * (a*b + c*d)` is |x| times half an ulp of a*b, seed 35038)."""
    m = 0.0
    stack = [(e, 1.0)]
    while stack:
        x, scale = stack.pop()
        if x.t in FLOAT_TYPES:
            v = _abs_value(x, env)
            if v is not None:
                m = max(m, v * scale)
        kids = [getattr(x, f, None) for f in ("a", "b", "c")]
        if isinstance(x, Bin) and x.op in ("*", "/") and x.t in FLOAT_TYPES:
            va, vb = _abs_value(x.a, env), _abs_value(x.b, env)
            fa = vb if x.op == "*" else (1.0 / vb if vb else None)
            stack.append((x.a, scale * fa if fa is not None and math.isfinite(fa) else scale))
            if x.op == "*" and va is not None:
                stack.append((x.b, scale * va))
            else:
                stack.append((x.b, scale))
            continue
        stack.extend((sub, scale) for sub in kids if isinstance(sub, E))
        stack.extend((a, scale) for a in getattr(x, "args", ()))
    return m


def _abs_value(x: E, env):
    try:
        v = abs(float(x.eval(env)))
    except (UB, TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


# ---------------------------------------------------------------- statements

class Break_(Exception):
    pass


@dataclass
class S:
    def lines(self, ind: str) -> list[str]:
        raise NotImplementedError

    def run(self, env) -> None:
        raise NotImplementedError


@dataclass
class Decl(S):
    name: str
    t: str
    e: E
    mutable: bool = True
    typed: bool = True

    def lines(self, ind):
        head = ("mutable " if self.mutable else "") + (f"{self.t} " if self.typed else "")
        return [f"{ind}{head}{self.name} = {self.e.render()};"]

    def run(self, env):
        env[self.name] = self.e.eval(env)


@dataclass
class Assign(S):
    name: str
    t: str
    op: str
    e: E

    def lines(self, ind):
        return [f"{ind}{self.name} {self.op} {self.e.render()};"]

    def run(self, env):
        if self.op == "=":
            env[self.name] = self.e.eval(env)
        else:
            env[self.name] = Bin(self.t, False, self.op[0], Var(self.t, name=self.name), self.e).eval(env)


def body_lines(stmts, ind):
    out = []
    for s in stmts:
        out += s.lines(ind)
    return out


@dataclass
class If(S):
    c: E
    then: list
    other: list = None

    def lines(self, ind):
        out = [f"{ind}if ({self.c.render()}) {{"] + body_lines(self.then, ind + "  ")
        if self.other:
            out += [f"{ind}}} else {{"] + body_lines(self.other, ind + "  ")
        return out + [f"{ind}}}"]

    def run(self, env):
        for s in (self.then if self.c.eval(env) else (self.other or [])):
            s.run(env)


@dataclass
class Foreach(S):
    var: str
    count: E            # s32, >= 0
    body: list

    def lines(self, ind):
        return ([f"{ind}foreach {{{self.var}}} in [{self.count.render()}] {{"]
                + body_lines(self.body, ind + "  ") + [f"{ind}}}"])

    def run(self, env):
        try:
            for i in range(self.count.eval(env)):
                env[self.var] = i
                for s in self.body:
                    s.run(env)
        except Break_:
            pass


@dataclass
class Ranged(S):
    """`with i in [K] { foreach i(lo:hi:step) {...} }`: i from lo to K + hi (exclusive)."""
    var: str
    bound: int
    lo: int
    hi: int
    step: int
    body: list

    def lines(self, ind):
        rng = f"{self.lo}:{self.hi}:{self.step}" if self.step != 1 else f"{self.lo}:{self.hi}"
        return ([f"{ind}with {self.var} in [{self.bound}] {{", f"{ind}  foreach {self.var}({rng}) {{"]
                + body_lines(self.body, ind + "    ") + [f"{ind}  }}", f"{ind}}}"])

    def run(self, env):
        try:
            for i in range(self.lo, self.bound + self.hi, self.step):
                env[self.var] = i
                for s in self.body:
                    s.run(env)
        except Break_:
            pass


@dataclass
class While(S):
    """`while (w < limit) { w = w + 1; ... }` (w declared before, by a Decl)."""
    counter: str
    limit: E
    body: list

    def lines(self, ind):
        return ([f"{ind}while ({self.counter} < {self.limit.render()}) {{",
                 f"{ind}  {self.counter} = {self.counter} + 1;"]
                + body_lines(self.body, ind + "  ") + [f"{ind}}}"])

    def run(self, env):
        try:
            while env[self.counter] < self.limit.eval(env):
                env[self.counter] += 1
                for s in self.body:
                    s.run(env)
        except Break_:
            pass


@dataclass
class BreakIf(S):
    c: E

    def lines(self, ind):
        return [f"{ind}if ({self.c.render()}) break;"]

    def run(self, env):
        if self.c.eval(env):
            raise Break_()


@dataclass
class Store(S):
    """`buf.at(idx) = e;` (a global output or a shared buffer); the tolerance of the
    element is that of the expression stored last."""
    buf: str
    idx: E
    e: E

    def lines(self, ind):
        return [f"{ind}{self.buf}.at({self.idx.render()}) = {self.e.render()};"]

    def run(self, env):
        i = self.idx.eval(env)
        v = self.e.eval(env)
        arr = env["@" + self.buf]
        assert 0 <= i < len(arr), f"generator bug: store {self.buf}[{i}]"
        arr[i] = v
        tol = env.get("@tol:" + self.buf)
        if tol is not None:
            ops = approx_ops(self.e)
            tol[i] = (max(APPROX[o] for o in ops) * 4 * (magnitude(self.e, env) + 1.0) + TOLERANCE_FLOOR
                      if ops else 0.0)


@dataclass
class Sync(S):
    def lines(self, ind):
        return [f"{ind}sync.shared;"]

    def run(self, env):
        raise AssertionError("a sync runs between phases, never inside one")
