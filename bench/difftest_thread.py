"""The thread family of difftest's programs: per-thread code of thread kernels (see
difftest_gen.py for what it generates and the rules it keeps)."""
from __future__ import annotations

import random
from dataclasses import dataclass, field

import numpy as np

from difftest_ast import *  # noqa: F401,F403 - the pieces
from difftest_ast import (APPROX, FLOAT_BIN, FLOAT_TYPES, INT_BIN, INT_TYPES, NARROW, CMP,  # noqa: F401
                          Bin, BreakIf, Call, Cast, Cmp, Decl, Dim, E, Foreach, If, Lit, Logic,
                          Neg, Ranged, Read, Store, Tern, Var, While, Assign, body_lines,
                          contractible, product)

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
        known = [v for v in ctx.vars if v[2]]   # mutable: an inner block's `=` updates it
        if not known:
            return self.s_decl(ctx)
        name, t, mutable, depth, loop = r.choice(known)
        self.features.add("assign-in-loop" if loop < ctx.loop else "assign-nested" if depth < ctx.depth
                          else "assign")
        ops = ["=", "+=", "-=", "*="] + (["/=", "%="] if t in INT_TYPES else [])
        op = r.choice(ops) if t not in NARROW else "="
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
