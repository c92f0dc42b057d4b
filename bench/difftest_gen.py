"""Random valid Choreo programs, each with the result it must give (difftest's generator).

    program = generate(seed)          # deterministic from the seed
    program.source                    # the .co text
    program.inputs                    # name -> numpy array (the function's inputs)
    program.expected                  # name -> numpy array, computed here (the third opinion)

Pure: no compiler, no torch. The programs are valid by construction: every name is
declared before use in a scope that sees it, every global read is in bounds (guarded by
`n < N`, or an index taken `% N`), shared buffers are written in one phase and read in a
later one with a `sync.shared` between (at the thread body's top level, where every thread
of the block reaches it), loops terminate, and the program's arithmetic has no undefined
behaviour on its inputs: the generator runs it here on the inputs it made and draws again
when a signed operation overflows, a divisor is zero, a shift leaves the type or a float
converts to an integer out of range. What C leaves to the implementation is not generated
(signed left shifts of negative values, unary minus of u32).

Families (one chosen per seed):
  thread  per-thread code over mutable scalars (typed/untyped, s32 u32 f32 f16 bf16),
          foreach / ranged foreach / while loops with loop-carried values, break, if/else,
          element reads and guarded writes of global tensors, shared buffers with barriers,
          block, group (warp) and group-4 (warpgroup) levels.
  copy    tiled copies: dma.copy / tma.copy of `subspan(...).at(...)` tiles into shared
          memory, a per-thread transform, a copy back out (N a multiple of the tile).
  mma     the GEMM template (A [M,K] x B [N,K]^T) with random tile sizes, dtypes, stages.

Exact ops are compared bit for bit (NaNs equal whatever their payload). The approximate
ops carry a tolerance (`APPROX`): their values only reach an output through the output's
own expression, never a condition, an index or an integer, so the error cannot grow past
the bound recorded with the output.
"""
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
    return e.t == "f32" and (isinstance(e, Bin) and e.op == "*" or isinstance(e, Neg) and product(e.a))


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
    """The largest |value| of e's float subexpressions (the scale of the rounding errors)."""
    m = 0.0
    stack = [e]
    while stack:
        x = stack.pop()
        if x.t in FLOAT_TYPES:
            try:
                v = abs(float(x.eval(env)))
                if math.isfinite(v):
                    m = max(m, v)
            except UB:
                pass
        for f in ("a", "b", "c"):
            sub = getattr(x, f, None)
            if isinstance(sub, E):
                stack.append(sub)
        stack.extend(getattr(x, "args", ()))
    return m


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


# ---------------------------------------------------------------- programs

NP_DTYPE = {"s32": np.int32, "f32": np.float32, "f16": np.float16, "u32": np.uint32}


@dataclass
class Program:
    seed: int
    family: str
    source: str
    function: str
    inputs: dict                 # name -> numpy array (inputs and the outputs' initial values)
    outputs: tuple               # the names compared
    expected: dict = None        # name -> numpy array (None: no reference of our own)
    tolerance: dict = field(default_factory=dict)   # name -> per-element absolute bound or rtol
    features: set = field(default_factory=set)
    note: str = ""
    bf16: tuple = ()             # arrays held here as f32 that the function takes as bf16


@dataclass
class Ctx:
    vars: list                   # (name, type, mutable, depth declared, loop level declared)
    guarded: bool = False        # n < N holds here
    loop: int = 0                # loop nesting level
    depth: int = 0               # statement nesting depth
    sh_read: frozenset = frozenset()
    rebound: set = field(default_factory=set)   # immutables assigned here (the known bug's form)

    def child(self, **kw):
        c = Ctx(list(self.vars), self.guarded, self.loop, self.depth + 1, self.sh_read)
        for k, v in kw.items():
            setattr(c, k, v)
        return c


F32_LITS = (0.5, 1.0, 2.0, 0.25, 1.5, 3.0, 0.1, 0.3, 7.25, 100.0, 0.001, -1.0, -2.5, 0.75, 1024.0)
LAYOUTS = (("block", 32), ("block", 64), ("block", 96), ("block", 128),
           ("group", 1), ("group", 2), ("group", 4), ("group4", 1), ("group4", 2))


class ThreadGen:
    """One thread-kernel program (see the module docstring)."""

    def __init__(self, rng: random.Random):
        self.r = rng
        self.names = 0
        self.features = set()
        kind, k = rng.choice(LAYOUTS)
        self.layout = kind
        self.bt = k if kind == "block" else 32 * k if kind == "group" else 128 * k
        self.groups = k
        self.shared = {}
        if rng.random() < 0.5:
            self.shared["shi"] = "s32"
        if rng.random() < 0.4:
            self.shared["shf"] = "f32"
        self.half_out = rng.random() < 0.35
        self.half_t = rng.choice(NARROW)
        self.known_bug = rng.random() < 0.08   # assignments to immutable names in nested scopes

    # -- names and leaves
    def fresh(self, p="v") -> str:
        self.names += 1
        return f"{p}{self.names}"

    def lit(self, t):
        r = self.r
        if t == "s32":
            return Lit("s32", v=r.choice((0, 1, 2, 3, 5, 7, 10, 31, 100, -1, -3, -8, 1000, 65535)))
        if t == "u32":
            return Lit("u32", v=r.choice((0, 1, 2, 3, 7, 255, 1000, 65536, 4000000000)))
        if t == "f32":
            return Lit("f32", v=np.float32(r.choice(F32_LITS)))
        return Cast(t, a=Lit("f32", v=np.float32(r.choice(F32_LITS))))

    def leaf(self, t, ctx, taint_ok):
        r = self.r
        opts = [lambda: self.lit(t)]
        vs = [v for v in ctx.vars if v[1] == t]
        if vs:
            opts += [lambda: Var(t, name=r.choice(vs)[0])] * 3
        if t == "s32":
            opts += [lambda: Var("s32", name="t"), lambda: Var("s32", name="n"),
                     lambda: Var("s32", name="b")]
            opts.append(lambda: Read("s32", buf="XI", idx=self.index(ctx)))
            if "shi" in ctx.sh_read:
                opts.append(lambda: Read("s32", buf="shi", idx=self.sh_index()))
        if t == "f32":
            opts.append(lambda: Read("f32", buf="XF", idx=self.index(ctx)))
            if "shf" in ctx.sh_read:
                opts.append(lambda: Read("f32", buf="shf", idx=self.sh_index()))
        return r.choice(opts)()

    def index(self, ctx) -> E:
        """An in-bounds index of XI/XF: n where n < N holds, else taken % N."""
        if ctx.guarded and self.r.random() < 0.6:
            return Var("s32", name="n")
        k = self.r.choice((0, 1, 3, 7, 13))
        base = Bin("s32", op="+", a=Var("s32", name="n"), b=Lit("s32", v=k)) if k else Var("s32", name="n")
        if self.r.random() < 0.3:
            base = Bin("s32", op="+", a=Bin("s32", op="*", a=Var("s32", name="t"), b=Lit("s32", v=3)),
                       b=Lit("s32", v=k))
        return Bin("s32", op="%", a=base, b=Dim("s32"))

    def tid(self) -> E:
        if self.layout == "block":
            return Var("s32", name="t")
        return Bin("s32", op="+", a=Bin("s32", op="*", a=Var("s32", name="g"),
                                        b=Lit("s32", v=32 if self.layout == "group" else 128)),
                   b=Var("s32", name="t"))

    def sh_index(self) -> E:
        k = self.r.choice((0, 1, 5, self.bt - 1))
        return Bin("s32", op="%", a=Bin("s32", op="+", a=Var("s32", name="tid"), b=Lit("s32", v=k)),
                   b=Lit("s32", v=self.bt))

    # -- expressions
    def expr(self, t, ctx, d=0, taint_ok=False) -> E:
        r = self.r
        if d >= 3 or r.random() < 0.3 + 0.15 * d:
            return self.leaf(t, ctx, taint_ok)
        if t in INT_TYPES:
            return self.int_expr(t, ctx, d)
        if t == "f32":
            return self.f32_expr(ctx, d, taint_ok)
        return self.narrow_expr(t, ctx, d)

    def int_expr(self, t, ctx, d):
        r = self.r
        k = r.random()
        if k < 0.55:
            op = r.choice(INT_BIN)
            a = self.expr(t, ctx, d + 1)
            if op in ("/", "%"):
                b = (Bin(t, op="|", a=self.expr(t, ctx, d + 1), b=Lit(t, v=1)) if r.random() < 0.7
                     else Lit(t, v=r.choice((1, 2, 3, 7, 16))))
            elif op in (">>", "<<"):
                b = Lit(t, v=r.choice((0, 1, 3, 8, 16, 31)) if op == ">>" else r.choice((0, 1, 2, 4, 7)))
                if op == "<<" and t == "s32":
                    a = Bin(t, op="&", a=a, b=Lit(t, v=1023))
            else:
                b = self.expr(t, ctx, d + 1)
            return Bin(t, op=op, a=a, b=b)
        if k < 0.65:
            return Neg(t, a=self.expr(t, ctx, d + 1), op="-" if t == "s32" and r.random() < 0.7 else "~")
        if k < 0.75:
            return Tern(t, c=self.cond(ctx, d + 1), a=self.expr(t, ctx, d + 1), b=self.expr(t, ctx, d + 1))
        if k < 0.82:
            return Call(t, fn=r.choice(("__max", "__min")), args=(self.expr(t, ctx, d + 1), self.expr(t, ctx, d + 1)))
        src = r.choice([x for x in ("s32", "u32", "f32", "f16", "bf16") if x != t])
        return Cast(t, a=self.expr(src, ctx, d + 1))

    def f32_expr(self, ctx, d, taint_ok):
        r = self.r
        k = r.random()
        if taint_ok and k < 0.25:
            self.features.add("approx")
            fn = r.choice(("/", "__exp", "__exp2f", "__log", "__sqrt", "__rsqrt", "__sin", "__cos"))
            x = self.expr("f32", ctx, d + 1, taint_ok)
            if fn == "/":
                den = Bin("f32", op="+", a=Call("f32", fn="__fabs", args=(self.expr("f32", ctx, d + 1),)),
                          b=Lit("f32", v=np.float32(1.0)))
                return Bin("f32", True, op="/", a=x, b=den)
            if fn in ("__exp", "__exp2f", "__sin", "__cos"):
                arg = Call("f32", fn="__max", args=(Call("f32", fn="__min", args=(x, Lit("f32", v=np.float32(3.0)))),
                                                     Lit("f32", v=np.float32(-3.0))))
            else:
                arg = Bin("f32", op="+", a=Call("f32", fn="__fabs", args=(x,)), b=Lit("f32", v=np.float32(1.0)))
            return Call("f32", True, fn=fn, args=(arg,))
        if k < 0.6:
            e = Bin("f32", op=r.choice(FLOAT_BIN), a=self.expr("f32", ctx, d + 1, taint_ok),
                    b=self.expr("f32", ctx, d + 1, taint_ok))
            if contractible(e):
                if not taint_ok:
                    e.op = "*"
                else:
                    self.features.add("contract")
            return e
        if k < 0.67:
            return Neg("f32", a=self.expr("f32", ctx, d + 1, taint_ok))
        if k < 0.74:
            return Tern("f32", c=self.cond(ctx, d + 1), a=self.expr("f32", ctx, d + 1, taint_ok),
                        b=self.expr("f32", ctx, d + 1, taint_ok))
        if k < 0.82:
            fn = r.choice(("__max", "__min", "__fabs"))
            args = (self.expr("f32", ctx, d + 1),) if fn == "__fabs" else (
                self.expr("f32", ctx, d + 1), self.expr("f32", ctx, d + 1))
            return Call("f32", fn=fn, args=args)
        src = r.choice(("s32", "u32", "f16", "bf16"))
        return Cast("f32", a=self.expr(src, ctx, d + 1))

    def narrow_expr(self, t, ctx, d):
        """An f16/bf16 value: a variable, or rounded at its top (`__to<t>(...)`). The
        backends compute narrow arithmetic in f32 and round at conversions and stores (the
        language lets f16/bf16 operations accumulate in f32), the interpreter rounds every
        operation: one operation of narrow values, rounded, is the same value either way."""
        r = self.r
        vs = [v for v in ctx.vars if v[1] == t]
        k = r.random()
        if vs and k < 0.3:
            return Var(t, name=r.choice(vs)[0])
        if k < 0.65:
            leaf = lambda: (Var(t, name=r.choice(vs)[0]) if vs and r.random() < 0.6
                            else Cast(t, a=self.leaf("f32", ctx, False)))
            a = leaf()
            if r.random() < 0.2:
                a = Neg(t, a=a)
            # through f32: a conversion to the type an expression already has is no rounding
            return Cast(t, a=Cast("f32", a=Bin(t, op=r.choice(FLOAT_BIN), a=a, b=leaf())))
        return Cast(t, a=self.expr("f32", ctx, d + 1))

    def cond(self, ctx, d=0) -> E:
        r = self.r
        k = r.random()
        if k < 0.15 and d < 2:
            if r.random() < 0.3:
                return Logic("bool", op="!", a=self.cond(ctx, d + 1))
            return Logic("bool", op=r.choice(("&&", "||")), a=self.cond(ctx, d + 1), b=self.cond(ctx, d + 1))
        t = r.choice(("s32", "s32", "u32", "f32", "f16"))
        return Cmp("bool", op=r.choice(CMP), a=self.expr(t, ctx, d + 1), b=self.expr(t, ctx, d + 1))

    # -- statements
    def stmts(self, ctx, count) -> list:
        out = []
        for _ in range(count):
            out += self.stmt(ctx)
        return out

    def stmt(self, ctx) -> list:
        r = self.r
        nested = ctx.depth < 3
        kinds = ["decl", "decl", "assign", "assign", "assign"]
        if nested:
            kinds += ["if", "foreach", "while", "ranged", "guard"]
        if ctx.loop:
            kinds.append("break")
        if ctx.guarded:
            kinds += ["out"]
        k = r.choice(kinds)
        return getattr(self, "s_" + k)(ctx)

    def s_decl(self, ctx):
        r = self.r
        t = r.choice(("s32", "s32", "u32", "f32", "f32", "f16", "bf16"))
        name = self.fresh()
        mutable = r.random() < 0.7
        typed = r.random() < 0.75
        e = self.expr(t, ctx)
        ctx.vars.append((name, t, mutable, ctx.depth, ctx.loop))
        self.features.add(f"decl:{'mutable' if mutable else 'immutable'}-{'typed' if typed else 'untyped'}")
        return [Decl(name, t, e, mutable, typed)]

    def s_assign(self, ctx):
        r = self.r
        # the known bug's form (KNOWN_BUGS in difftest.py): `x = e` of an immutable x of an
        # enclosing block; the compiler makes it a new binding of the block, so a second
        # one in the same block is refused as an assignment of an immutable: one a block
        known = [v for v in ctx.vars if v[2] or (self.known_bug and v[3] < ctx.depth
                                                 and v[0] not in ctx.rebound)]
        if not known:
            return self.s_decl(ctx)
        name, t, mutable, depth, loop = r.choice(known)
        if not mutable:
            ctx.rebound.add(name)
            self.features.add("assign-immutable-in-loop" if loop < ctx.loop else "assign-immutable-nested")
        ops = ["=", "+=", "-=", "*="] + (["/=", "%="] if t in INT_TYPES else [])
        op = r.choice(ops) if mutable and t not in NARROW else "="
        e = self.expr(t, ctx)
        if t == "f32" and op in ("+=", "-=") and product(e):
            op = "="
        if op in ("/=", "%="):
            e = Bin(t, op="|", a=e, b=Lit(t, v=1))
        return [Assign(name, t, op, e)]

    def s_if(self, ctx):
        c = self.cond(ctx)
        then = self.stmts(ctx.child(), self.r.randint(1, 3))
        other = self.stmts(ctx.child(), self.r.randint(1, 3)) if self.r.random() < 0.5 else None
        return [If(c, then, other)]

    def s_guard(self, ctx):
        self.features.add("guard")
        return [If(Cmp("bool", op="<", a=Var("s32", name="n"), b=Dim("s32")),
                   self.stmts(ctx.child(guarded=True), self.r.randint(1, 4)))]

    def trip(self, ctx) -> E:
        r = self.r
        if r.random() < 0.6:
            return Lit("s32", v=r.randint(1, 5))
        return Bin("s32", op="+", a=Bin("s32", op="%", a=Var("s32", name=r.choice(("t", "n"))),
                                        b=Lit("s32", v=r.randint(2, 5))), b=Lit("s32", v=r.randint(0, 1)))

    def s_foreach(self, ctx):
        self.features.add("foreach")
        var = self.fresh("i")
        inner = ctx.child(loop=ctx.loop + 1)
        count = self.trip(ctx)
        inner.vars.append((var, "s32", False, inner.depth, inner.loop))
        inner.vars[-1] = (var, "s32", False, 99, 99)   # a loop variable: never assigned
        return [Foreach(var, count, self.stmts(inner, self.r.randint(1, 4)))]

    def s_ranged(self, ctx):
        self.features.add("ranged")
        r = self.r
        var = self.fresh("j")
        bound = r.randint(2, 8)
        lo, hi, step = r.randint(0, 2), r.randint(-2, 1), r.choice((1, 1, 2, 3))
        inner = ctx.child(loop=ctx.loop + 1)
        inner.vars.append((var, "s32", False, 99, 99))
        return [Ranged(var, bound, lo, hi, step, self.stmts(inner, r.randint(1, 3)))]

    def s_while(self, ctx):
        self.features.add("while")
        w = self.fresh("w")
        decl = Decl(w, "s32", Lit("s32", v=0), True, True)
        inner = ctx.child(loop=ctx.loop + 1)
        inner.vars.append((w, "s32", False, 99, 99))   # the counter: only the loop's own step
        return [decl, While(w, self.trip(ctx), self.stmts(inner, self.r.randint(1, 4)))]

    def s_break(self, ctx):
        self.features.add("break")
        return [BreakIf(self.cond(ctx))]

    def s_out(self, ctx):
        return [self.out_store(self.r.choice(self.out_names()), ctx)]

    def out_names(self):
        return ["YI", "YF"] + (["YH"] if self.half_out else [])

    def out_store(self, name, ctx) -> Store:
        t = {"YI": "s32", "YF": "f32", "YH": self.half_t}[name]
        e = self.expr(t, ctx, taint_ok=(name == "YF"))
        if name == "YH" and self.half_t == "bf16":   # the tensor is f16: convert through f32
            e = Cast("f16", a=Cast("f32", a=e))
        return Store(name, Var("s32", name="n"), e)

    # -- the program
    def body(self) -> list:
        """The thread body: phases between `sync.shared`s at the top level (where every
        thread of the block reaches them). A write phase stores each thread's own element of
        every shared buffer (and reads none of them); the phase after it reads any element;
        a later write phase comes after another sync. The last phase writes the outputs."""
        r = self.r
        ctx = Ctx([])
        phases = [self.stmts(ctx, r.randint(2, 5))]
        for rnd in range(r.randint(1, 2) if self.shared else 0):
            if rnd:
                ctx.sh_read = frozenset()
                phases.append(self.stmts(ctx, r.randint(0, 2)))
            phases[-1] += [Store(b, Var("s32", name="tid"), self.expr(t, ctx)) for b, t in self.shared.items()]
            ctx.sh_read = frozenset(self.shared)
            phases.append(self.stmts(ctx, r.randint(1, 4)))
        guarded = ctx.child(guarded=True)
        phases[-1].append(If(Cmp("bool", op="<", a=Var("s32", name="n"), b=Dim("s32")),
                             [self.out_store(o, guarded) for o in self.out_names()]
                             + self.stmts(guarded, r.randint(0, 2))))
        return phases

    def source(self, phases) -> str:
        bt = self.bt
        params = ["global s32[N] XI", "global f32[N] XF", "global s32[N] YI", "global f32[N] YF"]
        if self.half_out:
            params.append("global f16[N] YH")
        out = [f"__co__ void k({', '.join(params)}) {{",
               f"  parallel {{b}} by [cdiv(N, {bt})] : block {{"]
        out += [f"    shared {t}[{bt}] {b};" for b, t in self.shared.items()]
        ind = "    "
        if self.layout == "block":
            out.append(f"{ind}parallel t by {bt} : thread {{")
        else:
            lvl, per = ("group", 32) if self.layout == "group" else ("group-4", 128)
            out += [f"{ind}parallel g by {self.groups} : {lvl} {{",
                    f"{ind}  parallel t by {per} : thread {{"]
            ind += "  "
        ind += "  "
        out.append(f"{ind}tid = {self.tid().render()};")
        out.append(f"{ind}n = b * {bt} + tid;")
        for i, ph in enumerate(phases):
            if i:
                out.append(f"{ind}sync.shared;")
            out += body_lines(ph, ind)
        if self.layout != "block":
            out.append("      }")
        out += ["    }", "  }", "}"]
        return "\n".join(out) + "\n"

    def run(self, phases, n_elems: int, inputs: dict) -> dict:
        """Executes the program here: block by block, phase by phase, thread by thread."""
        arrays = {k: v.copy() for k, v in inputs.items()}
        tol = {"YF": np.zeros(n_elems)}
        bt = self.bt
        for b in range(-(-n_elems // bt)):
            shared = {name: np.zeros(bt, NP_DTYPE[t]) for name, t in self.shared.items()}
            envs = []
            for tid in range(bt):
                g, t = (0, tid) if self.layout == "block" else divmod(tid, 32 if self.layout == "group" else 128)
                env = {"N": n_elems, "b": b, "g": g, "t": t, "tid": tid, "n": b * bt + tid}
                env.update({"@" + k: v for k, v in arrays.items()})
                env.update({"@" + k: v for k, v in shared.items()})
                env["@tol:YF"] = tol["YF"]
                envs.append(env)
            with np.errstate(all="ignore"):
                for ph in phases:
                    for env in envs:
                        for s in ph:
                            s.run(env)
        return arrays, tol


def thread_program(seed: int, rng: random.Random) -> Program:
    g = ThreadGen(rng)
    phases = g.body()
    bt = g.bt
    n = rng.choice((rng.randint(1, 3 * bt), rng.randint(1, 3) * bt, bt + 1, 2 * bt - 1))
    src = g.source(phases)
    inputs = {"XI": np.array([rng.randint(-100, 100) for _ in range(n)], np.int32),
              "XF": np.array([rng.choice((rng.uniform(-8, 8), rng.choice(F32_LITS), float(rng.randint(-9, 9))))
                              for _ in range(n)], np.float32),
              "YI": np.full(n, -7, np.int32), "YF": np.full(n, -7.0, np.float32)}
    outputs = ("YI", "YF")
    if g.half_out:
        inputs["YH"] = np.full(n, -7.0, np.float16)
        outputs += ("YH",)
    arrays, tol = g.run(phases, n, inputs)
    feats = set(g.features) | {f"layout:{g.layout}"} | ({"shared"} if g.shared else set())
    return Program(seed, "thread", src, "k", inputs, outputs,
                   {o: arrays[o] for o in outputs}, {"YF": tol["YF"]}, feats, f"N={n}")


# ---------------------------------------------------------------- entry

FAMILIES = {"thread": lambda seed, rng: thread_program(seed, rng)}
FAMILY_WEIGHTS = {"thread": 0.75}
MAX_DRAWS = 200


def generate(seed: int, family: str | None = None) -> Program:
    """The program of `seed` (and its inputs and expected outputs); deterministic."""
    rng = random.Random(f"difftest:{seed}")
    fam = family or rng.choices(list(FAMILY_WEIGHTS), weights=list(FAMILY_WEIGHTS.values()))[0]
    for draw in range(MAX_DRAWS):
        sub = random.Random(f"difftest:{seed}:{fam}:{draw}")
        try:
            return FAMILIES[fam](seed, sub)
        except UB:
            continue
    raise RuntimeError(f"seed {seed}: no program without undefined behaviour in {MAX_DRAWS} draws")


# ---------------------------------------------------------------- tiled copies

COPY_TYPES = {"f32": np.float32, "s32": np.int32, "f16": np.float16}
#: The per-element transform of the copy kernel: (Choreo text of x's image, numpy of it).
COPY_OPS = {
    "s32": (("x", lambda x, r, c, bm, bk: x), ("x * 3 + bm", lambda x, r, c, bm, bk: x * 3 + bm),
            ("x ^ c", lambda x, r, c, bm, bk: x ^ c), ("-x + r", lambda x, r, c, bm, bk: -x + r)),
    "f32": (("x", lambda x, r, c, bm, bk: x), ("x * 2.0f", lambda x, r, c, bm, bk: x * np.float32(2)),
            ("x + 1.5f", lambda x, r, c, bm, bk: x + np.float32(1.5)), ("-x", lambda x, r, c, bm, bk: -x)),
    "f16": (("x", lambda x, r, c, bm, bk: x),
            ("__to<f16>(__to<f32>(x) * 2.0f)", lambda x, r, c, bm, bk: np.float16(np.float32(x) * 2)),
            ("__to<f16>(__to<f32>(x) + 0.5f)", lambda x, r, c, bm, bk: np.float16(np.float32(x) + np.float32(0.5)))),
}


def copy_program(seed: int, rng: random.Random) -> Program:
    """Tiles of X copied into shared memory (dma.copy or tma.copy of a subspan(...).at(...)),
    transformed element by element by the block's threads (optionally transposed), and
    copied out to Y the same way."""
    t = rng.choice(list(COPY_TYPES))
    tm = rng.choice((8, 16, 32))
    tk = rng.choice((8, 16, 32, 64))
    transpose = tm == tk and rng.random() < 0.4
    gm, gk = rng.randint(1, 3), rng.randint(1, 3)
    m, k = tm * gm, tk * gk
    load, store = rng.choice(("dma", "tma")), rng.choice(("dma", "tma"))
    future = rng.random() < 0.5
    text, fn = rng.choice(COPY_OPS[t])
    src_name = "xt.data" if future else "xs"
    ydims = (k, m) if transpose else (m, k)
    lines = [f"__co__ void k(global {t}[M, K] X, global {t}[{'K, M' if transpose else 'M, K'}] Y) {{",
             f"  parallel {{bm, bk}} by [M / {tm}, K / {tk}] : block {{"]
    if future:
        lines.append(f"    xt = {load}.copy X.subspan({tm}, {tk}).at(bm, bk) => shared;")
    else:
        lines += [f"    shared {t}[{tm}, {tk}] xs;", f"    {load}.copy X.subspan({tm}, {tk}).at(bm, bk) => xs;"]
    ys_shape = f"{tk}, {tm}" if transpose else f"{tm}, {tk}"
    lines += [f"    shared {t}[{ys_shape}] ys;",
              f"    parallel r by {tm} : thread {{",
              f"      foreach c in [{tk}] {{",
              f"        x = {src_name}.at(r, c);",
              f"        ys.at({'c, r' if transpose else 'r, c'}) = {text};",
              "      }", "    }",
              f"    {store}.copy ys => Y.subspan({ys_shape}).at({'bk, bm' if transpose else 'bm, bk'});",
              "  }", "}"]
    dt = COPY_TYPES[t]
    if t == "s32":
        x = np.array([[rng.randint(-1000, 1000) for _ in range(k)] for _ in range(m)], dt)
    else:
        x = np.array([[rng.uniform(-4, 4) for _ in range(k)] for _ in range(m)], np.float32).astype(dt)
    y = np.zeros(ydims, dt)
    with np.errstate(all="ignore"):
        for i in range(m):
            for j in range(k):
                v = fn(x[i, j] if t != "s32" else int(x[i, j]), i % tm, j % tk, i // tm, j // tk)
                if transpose:
                    y[j, i] = v
                else:
                    y[i, j] = v
    inputs = {"X": x, "Y": np.full(ydims, -7, dt)}
    feats = {f"copy:{load}-{store}", f"dtype:{t}"} | ({"transpose"} if transpose else set()) | (
        {"future"} if future else set())
    return Program(seed, "copy", "\n".join(lines) + "\n", "k", inputs, ("Y",), {"Y": y}, {}, feats,
                   f"M={m} K={k} tile {tm}x{tk}")


FAMILIES["copy"] = copy_program
FAMILY_WEIGHTS["copy"] = 0.15


# ---------------------------------------------------------------- MMA kernels

GEMM_TEMPLATE = """// C = A @ B^T, {dt} A [M, K] and B [N, K], f32 accumulation (examples/gemm.co's form).
#define BM {bm}
#define BN {bn}
#define BK {bk}
#define WG_M 64
#define STAGES {stages}

__co__ void gemm(global {dt}[M, K] A, global {dt}[N, K] B, global {dt}[M, N] C) {{
  [[launch_bounds(_, 1)]]
  parallel.async {{tn, tm}} by [cdiv(N, BN), cdiv(M, BM)] : block {{
    shared {dt}[BM, BK] a_buf[STAGES];
    shared {dt}[BN, BK] b_buf[STAGES];
    shared {dt}[BM, BN] c_buf;
    shared event full[STAGES], empty[STAGES] = ready;
    k_tiles = cdiv(K, BK);
    parallel p by [BM / WG_M + 1] : group-4 {{
      inthreads.async (p == 0) {{
        mutable u32 order = 0;
        foreach {{kt}} in [k_tiles] {{
          slot = order % STAGES;
          wait empty.at(order);
          a_load = tma.load.async.swiz A.subspan(BM, BK).at(tm, kt) => a_buf[slot];
          b_load = tma.load.async.swiz B.subspan(BN, BK).at(tn, kt) => b_buf[slot];
          trigger full.at(order++) after a_load, b_load;
        }}
      }}
      inthreads.async (p > 0) {{
        cid = p - 1;
        mutable u32 order = 0;
        acc = mma.fill.f32 0.0f;
        foreach {{kt}} in [k_tiles] {{
          slot = order % STAGES;
          wait full.at(order);
          step = mma.row.row.async acc, a_buf[slot].subspan(WG_M, BK).at(cid, 0), b_buf[slot];
          wait step;
          trigger empty.at(order++);
        }}
        mma.store acc, c_buf.subspan(WG_M, BN).at(cid, 0);
        tma.copy c_buf => C.subspan(BM, BN).at(tm, tn);
      }}
    }}
  }}
}}
"""


def half_round(x: np.ndarray, dt: str) -> np.ndarray:
    if dt == "f16":
        return x.astype(np.float16)
    return np.vectorize(lambda v: bf16_round(v), otypes=[np.float32])(x.astype(np.float32))


def mma_program(seed: int, rng: random.Random) -> Program:
    """The GEMM template with random tiles (BM 64/128, BN 64/128, BK 32/64), stages (1-4),
    dtype (bf16, f16) and problem sizes (whole tiles, or ragged edges the TMA clips).
    The accumulation order differs between executors: the comparison allows the
    products' rounding (2^-8 of sum |a||b|, bf16's precision) plus C's rounding."""
    dt = rng.choice(("bf16", "f16"))
    bm, bn, bk = rng.choice((64, 128)), rng.choice((64, 128)), rng.choice((32, 64))
    stages = rng.randint(1, 4)
    m = bm * rng.randint(1, 2) - rng.choice((0, 0, 16))
    n = bn * rng.randint(1, 2) - rng.choice((0, 0, 8))
    kk = bk * rng.randint(1, 3)
    src = GEMM_TEMPLATE.format(dt=dt, bm=bm, bn=bn, bk=bk, stages=stages)
    nr = np.random.default_rng(rng.randrange(2 ** 32))
    a = half_round(nr.uniform(-1, 1, (m, kk)), dt)
    b = half_round(nr.uniform(-1, 1, (n, kk)), dt)
    af, bf = a.astype(np.float64), b.astype(np.float64)
    ref = af @ bf.T
    tol = 2 ** -8 * (np.abs(af) @ np.abs(bf).T) + 2 ** -7 * np.abs(ref) + 1e-6
    c0 = np.full((m, n), -7.0, np.float32)
    inputs = {"A": a, "B": b, "C": half_round(c0, dt)}
    expected = half_round(ref, dt)
    return Program(seed, "mma", src, "gemm", inputs, ("C",), {"C": expected}, {"C": tol},
                   {f"mma:{dt}", f"tile:{bm}x{bn}x{bk}", f"stages:{stages}"},
                   f"M={m} N={n} K={kk} {dt} {bm}x{bn}x{bk} stages={stages}",
                   ("A", "B", "C") if dt == "bf16" else ())


FAMILIES["mma"] = mma_program
FAMILY_WEIGHTS["mma"] = 0.10
