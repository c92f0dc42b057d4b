"""Scalar expressions: IR expression trees -> one PTX instruction per operator.

Instruction choice is by table. A few rules keep the code as tight as a
hand-written kernel's:

- constants fold; `x / 2^k` and `x % 2^k` become shifts and masks when x is
  provably non-negative (a grid index, a dimension, an unsigned value, ...);
- `a * b + c`, `a * b - c` contract to `fma.rn.f32` (nvcc's default), and
  the negated addend `-(m * k)` of a constant k is folded to `m * -k`, so
  `exp2(x * k - m * k)` is one fma and one ex2 per element;
- math builtins use the fast instructions (`__exp2f` is `ex2.approx.ftz`),
  and `1.0 / x` is `rcp.approx.ftz.f32`.

`ExprLowering` holds the policy for reuse: scalar code shares invariant
values across a region (see context.py); per-thread fragment code
(fragments.py) shares values within one `apply` and resolves fragment
elements to registers.
"""
from __future__ import annotations

from contextlib import contextmanager, nullcontext
from typing import Optional

from choreo_py import ir
from choreo_py.ir import c_scalars

from . import mathfns
from .conversions import common_type, const_as, fits, coerce
from .context import Lowering, children
from .writer import V
from choreo_py.construct_names import describe

REG_TYPES = {"bool": "pred", "s32": "s32", "u32": "u32", "s64": "s64", "u64": "u64", "f32": "f32"}
_CMP = {"<": "lt", "<=": "le", ">": "gt", ">=": "ge", "==": "eq", "!=": "ne"}
_FCMP = {"<": "lt", "<=": "le", ">": "gt", ">=": "ge", "==": "eq", "!=": "neu"}
_INT_OPS = {"+": "add.{t}", "-": "sub.{t}", "*": "mul.lo.{t}", "/": "div.{t}", "%": "rem.{t}",
            "<<": "shl.b{n}", ">>": "shr.{t}", "&": "and.b{n}", "|": "or.b{n}", "^": "xor.b{n}"}
_F32_OPS = {"+": "add.f32", "-": "sub.f32", "*": "mul.f32", "/": "div.full.f32"}
_F32_CALLS = {"exp2": "ex2.approx.ftz.f32", "log2": "lg2.approx.ftz.f32",
              "sqrt": "sqrt.rn.f32", "rsqrt": "rsqrt.approx.ftz.f32", "abs": "abs.f32",
              "ceil": "cvt.rpi.f32.f32", "floor": "cvt.rmi.f32.f32"}
LOG2E = 1.4426950408889634
LN2 = 0.6931471805599453


def reg_type(dtype: str, lw: Lowering, loc) -> str:
    # A lowering that widens narrow element types in registers says so (threads.py).
    t = REG_TYPES.get(dtype) or getattr(lw, "widened_types", {}).get(dtype)
    if t is None:
        raise lw.refuse(f"a scalar of type {dtype}", loc)
    return t


def _bits(t: str) -> int:
    return 64 if t.endswith("64") else 32


def _pow2(v) -> Optional[int]:
    if isinstance(v, int) and not isinstance(v, bool) and v > 0 and v & (v - 1) == 0:
        return v.bit_length() - 1
    return None


def reads_memory(e: ir.Expr) -> bool:
    """Whether evaluating `e` loads an element of a tensor or buffer (a fragment element
    is a register: no load)."""
    return any(isinstance(x, ir.BufElem) for x in ir.expr_walk(e))


def fold(op: str, a, b, dtype: str):
    """C semantics of a binary operator on two constants (None: do not fold). f32
    arithmetic is f32's: the operands and the result rounded to f32, as add.f32 gives
    (`0.1f + 0.2f` folded in double was 0.30000000000000004, rounded once: not f32's sum)."""
    if dtype == "f32" and isinstance(a, float) and isinstance(b, float):
        a, b = c_scalars.to_f32(a), c_scalars.to_f32(b)
    try:
        if op in ("/", "%") and isinstance(a, int) and isinstance(b, int):
            if b == 0:
                return None
            q = abs(a) // abs(b) * (1 if (a >= 0) == (b >= 0) else -1)
            r = a - q * b
            out = q if op == "/" else r
        else:
            out = {
                "+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b, "/": lambda: a / b,
                "<<": lambda: a << b, ">>": lambda: a >> b, "&": lambda: a & b,
                "|": lambda: a | b, "^": lambda: a ^ b, "&&": lambda: bool(a and b),
                "||": lambda: bool(a or b), "<": lambda: a < b, "<=": lambda: a <= b,
                ">": lambda: a > b, ">=": lambda: a >= b, "==": lambda: a == b,
                "!=": lambda: a != b,
            }[op]()
    except (KeyError, ZeroDivisionError, TypeError, ValueError):
        return None
    if dtype == "u32" and isinstance(out, int) and not isinstance(out, bool):
        out &= 0xFFFFFFFF
    if dtype == "s32" and isinstance(out, int) and not isinstance(out, bool):
        out = (out + 2**31) % 2**32 - 2**31
    if dtype == "f32" and isinstance(out, float):
        out = c_scalars.to_f32(out)
    return out


class ExprLowering:
    """Lowers expressions of scalar code; subclasses change leaves and reuse."""

    def __init__(self, lw: Lowering, loc=None) -> None:
        self.lw = lw
        self.w = lw.w
        self.loc = loc

    # ------------------------------------------------------------ hooks
    def leaf(self, e: ir.Expr) -> Optional[V]:
        if isinstance(e, ir.Const):
            if isinstance(e.value, bool) or e.dtype == "bool":
                return V.imm(bool(e.value), "pred")
            return V.imm(e.value, reg_type(e.dtype, self.lw, self.loc))
        if isinstance(e, ir.Sym):
            b = self.lw.lookup(e.name)
            if b is None:
                raise self.lw.refuse(f"the name '{e.name}' here", self.loc)
            return b.value
        if isinstance(e, ir.BufElem) and self.lw.element_reader is not None:
            # an MMA kernel's element read: global_reads.load (thread kernels read theirs
            # in threads.ThreadExprs)
            return self.lw.element_reader(self.lw, self, e, self.loc)
        if isinstance(e, (ir.Elem, ir.BufElem)):
            raise self.lw.refuse("element access outside per-thread fragment code", self.loc)
        return None

    def key(self, e: ir.Expr):
        if isinstance(e, ir.Sym):
            return ("r", self.leaf(e).text)
        if isinstance(e, ir.Const):
            return ("c", e.value, e.dtype)
        if isinstance(e, ir.BufElem):  # which data, and under which guard it was loaded
            return ("buf", e.view, self.guard_key()) + tuple(self.key(c) for c in e.index)
        parts = [type(e).__name__, getattr(e, "op", None), getattr(e, "fn", None), e.dtype]
        return tuple(parts) + tuple(self.key(c) for c in children(e))

    def reuse(self, e: ir.Expr, key) -> Optional[V]:
        if self.lw.invariant(e):
            return self.lw.cached(key)
        return self.lw.stmt_memo.get(key)

    def keep(self, e: ir.Expr, key, v: V) -> None:
        if self.lw.invariant(e):
            self.lw.remember(key, v)
        else:  # shared within the statement being lowered (nothing it reads changes)
            self.lw.stmt_memo[key] = v

    def guard_key(self) -> str:
        """The guard of the reads lowered now, as a key: a value loaded under one condition
        is not the value elsewhere (the lanes the guard excludes skipped the load)."""
        g = self.lw.read_guard
        return "" if g is None else g.text

    @contextmanager
    def reads_under(self, p: V, negate: bool = False):
        """Element reads lowered inside run only where `p` (`!p` with negate) holds, and
        where the guard around them holds (Lowering.element_load)."""
        lw = self.lw
        outer = lw.read_guard
        if p.is_const and bool(p.const) != negate:
            yield  # the condition always holds here: the reads need no guard of their own
            return
        p = self._pred(p)
        if negate:
            q = self.out(None, "pred", "skip")
            self.w.op("not.pred", q, p)
            p = q
        if outer is not None:
            q = self.out(None, "pred", "guard")
            self.w.op("and.pred", q, outer, p)
            p = q
        lw.outer_guards.append(outer)
        lw.read_guard = p
        try:
            yield
        finally:
            lw.read_guard = lw.outer_guards.pop()

    def outer_keys(self, e: ir.Expr):
        """The keys of `e` under each guard around the current one, innermost first: a value
        loaded where an outer guard held holds here too (the current guard implies it, and
        code under guards is straight-line: what was computed before dominates)."""
        lw = self.lw
        saved = lw.read_guard
        try:
            for g in reversed(lw.outer_guards):
                lw.read_guard = g
                yield self.key(e)
        finally:
            lw.read_guard = saved

    def reuse_outer(self, e: ir.Expr) -> Optional[V]:
        if not self.lw.outer_guards or not reads_memory(e):
            return None
        for k in self.outer_keys(e):
            got = self.reuse(e, k)
            if got is not None:
                return got
        return None

    def guarded(self, e: ir.Expr, p: Optional[V], negate: bool = False, hint: str = "t",
                dst: Optional[V] = None) -> V:
        """`e`, its element reads run only where `p` holds (`!p` with negate; None: no
        condition). Pure arithmetic needs no guard: it is lowered as it is."""
        if p is None or not reads_memory(e):
            return self.value(e, hint, dst)
        with self.reads_under(p, negate):
            return self.value(e, hint, dst)

    def place(self, e: ir.Expr):
        if self.lw.invariant(e):
            return self.w.into(self.lw.hoist_mark())
        return nullcontext()

    def nonneg(self, e: ir.Expr) -> bool:
        if isinstance(e, ir.Const):
            return not isinstance(e.value, bool) and e.value >= 0
        if e.dtype in ("u32", "u64"):
            return True
        if isinstance(e, ir.Sym):
            b = self.lw.lookup(e.name)
            return b is not None and b.nonneg
        if isinstance(e, ir.Bin) and e.op in ("+", "*", "/", "%", ">>", "&"):
            return self.nonneg(e.lhs) and self.nonneg(e.rhs)
        if isinstance(e, ir.Call) and e.fn in ("cdiv", "min", "max", "to"):
            return all(self.nonneg(a) for a in e.args)
        return False

    # ------------------------------------------------------------ entry
    def value(self, e: ir.Expr, hint: str = "t", dst: Optional[V] = None) -> V:
        """`e` in a register (or an immediate); in `dst` when given, converted to its
        type as C converts on assignment (`int x = j + 0.5f;`: the f32 sum, then cvt)."""
        v = self.leaf(e)
        if v is not None:
            if dst is not None and not (dst.text == v.text):
                self.w.op(f"mov.{dst.ty}", dst, self.as_type(v, dst.ty))
                return dst
            return v
        if dst is not None:
            if fits(self.natural_type(e), dst.ty):
                return self.compute(e, hint, dst)
            v = self.value(e, hint)
            self.w.op(f"mov.{dst.ty}", dst, self.as_type(v, dst.ty))
            return dst
        key = self.key(e)
        got = self.reuse(e, key) or self.reuse_outer(e)
        if got is not None:
            return got
        with self.place(e):
            v = self.compute(e, hint, None)
        self.keep(e, key, v)
        return v

    def natural_type(self, e: ir.Expr) -> Optional[str]:
        """The register type `e` computes in (None when its type has no register here)."""
        dtype = getattr(e, "dtype", None)
        t = REG_TYPES.get(dtype) or getattr(self.lw, "widened_types", {}).get(dtype)
        return t

    def as_type(self, v: V, t: str) -> V:
        """`v` converted to register type `t` (coerce), or refused by name."""
        got = coerce(self.w, v, t)
        if got is None:
            raise self.lw.refuse(f"converting a {v.ty} value to {t}", self.loc)
        return got

    def value_into(self, v: V, dst: Optional[V]) -> V:
        """`v`, moved into `dst` when one is given."""
        if dst is None or dst.text == v.text:
            return v
        self.w.op(f"mov.{dst.ty}", dst, self.as_type(v, dst.ty))
        return dst

    def out(self, dst: Optional[V], ty: str, hint: str) -> V:
        return dst if dst is not None else self.w.reg(ty, hint)

    # ------------------------------------------------------------ operators
    def compute(self, e: ir.Expr, hint: str, dst: Optional[V]) -> V:
        if isinstance(e, ir.Bin):
            return self.binary(e, hint, dst)
        if isinstance(e, ir.Un):
            return self.unary(e, hint, dst)
        if isinstance(e, ir.Select):
            c = self.value(e.cond)
            if c.is_const and (reads_memory(e.if_true) or reads_memory(e.if_false)):
                return self.value(e.if_true if c.const else e.if_false, hint, dst)
            # C evaluates one arm: an arm's loads run only where it is taken
            a, b = self.guarded(e.if_true, c), self.guarded(e.if_false, c, negate=True)
            if c.is_const:
                return self.value(e.if_true if c.const else e.if_false, hint, dst)
            c = self._pred(c)
            t = reg_type(e.dtype, self.lw, self.loc)
            out = self.out(dst, t, hint)
            if t == "pred":  # selp takes no predicate operands: (c && a) || (!c && b)
                a, b = (self._pred(x) if x.is_const else self.as_type(x, "pred")
                        for x in (a, b))
                taken, other = self.w.reg("pred", "sel_t"), self.w.reg("pred", "sel_f")
                self.w.op("and.pred", taken, c, a)
                self.w.op("not.pred", other, c)
                self.w.op("and.pred", other, other, b)
                self.w.op("or.pred", out, taken, other)
                return out
            self.w.op(f"selp.{t}", out, self.as_type(a, t), self.as_type(b, t), c)
            return out
        if isinstance(e, ir.Call):
            return self.call(e, hint, dst)
        raise self.lw.refuse(f"the expression {describe(e)}", self.loc)

    def _pred(self, v: V) -> V:
        """A predicate register holding `v`: a constant condition is set into one, and a
        value of another type (a bool element, loaded as a byte) is compared with zero:
        not.pred / and.pred take predicate registers only."""
        if not v.is_const:
            return v if v.ty == "pred" else self.as_type(v, "pred")
        r = self.w.reg("pred", "cond")
        self.w.op("setp.ne.u32", r, V.imm(1 if v.const else 0, "u32"), V.imm(0, "u32"))
        return r

    def binary(self, e: ir.Bin, hint: str, dst: Optional[V]) -> V:
        if e.dtype == "f32" and e.op in ("+", "-"):
            fused = self.contract(e, hint, dst)
            if fused is not None:
                return fused
        if e.op in ("&&", "||") and reads_memory(e.rhs):
            return self.short_circuit(e, hint, dst)
        a, b = self.value(e.lhs), self.value(e.rhs)
        if a.is_const and b.is_const:
            r = fold(e.op, a.const, b.const, e.dtype)
            if r is not None:
                return self.value(ir.Const(r, "bool" if isinstance(r, bool) else e.dtype),
                                  hint, dst)
        if e.op in _CMP:
            return self.compare(e.op, e.lhs, e.rhs, a, b, hint, dst)
        t = reg_type(e.dtype, self.lw, self.loc)
        if e.op in ("&&", "||"):
            out = self.out(dst, "pred", hint)
            a, b = self.as_type(a, "pred"), self.as_type(b, "pred")
            self.w.op(f"{'and' if e.op == '&&' else 'or'}.pred", out, a, b)
            return out
        if t == "pred":  # arithmetic on bools: C promotes them to int (the value, then != 0)
            v = self.binary(ir.Bin(e.op, e.lhs, e.rhs, "s32"), hint, None)
            return self.value_into(self.as_type(v, "pred"), dst)
        # C's usual arithmetic conversions: both operands in the result's type (a shift's
        # count is a u32 word)
        a = self.as_type(a, t)
        b = self.as_type(b, "u32" if e.op in ("<<", ">>") else t)
        if t == "f32":
            if e.op == "/" and a.is_const and a.const == 1.0:
                out = self.out(dst, t, hint)
                self.w.op("rcp.approx.ftz.f32", out, b)
                return out
            opcode = _F32_OPS.get(e.op)
        else:
            opcode = self.int_opcode(e, b, t)
            if e.op in ("/", "%") and _pow2(b.const) is not None and self.nonneg(e.lhs):
                s = _pow2(b.const)
                b = V.imm(s if e.op == "/" else b.const - 1, t)
        if opcode is None:
            raise self.lw.refuse(f"the operator '{e.op}' on {e.dtype}", self.loc)
        out = self.out(dst, t, hint)
        self.w.op(opcode, out, a, b)
        return out

    def short_circuit(self, e: ir.Bin, hint: str, dst: Optional[V]) -> V:
        """`a && b`, `a || b` whose right side reads memory: C evaluates b only when a does
        not decide (a true for &&, false for ||), so b's loads run only there."""
        a = self.value(e.lhs)
        decides = e.op == "||"  # the value of a that decides without b
        if a.is_const:
            if bool(a.const) == decides:
                return self.value(ir.Const(decides, "bool"), hint, dst)
            return self.value(e.rhs, hint, dst)
        a = self._pred(a)
        b = self.guarded(e.rhs, a, negate=decides)
        out = self.out(dst, "pred", hint)
        self.w.op(f"{'and' if e.op == '&&' else 'or'}.pred", out, a, self._pred(b))
        return out

    def int_opcode(self, e: ir.Bin, b: V, t: str) -> Optional[str]:
        n = _bits(t)
        if e.op in ("/", "%") and _pow2(b.const) is not None and self.nonneg(e.lhs):
            return f"shr.u{n}" if e.op == "/" else f"and.b{n}"
        pattern = _INT_OPS.get(e.op)
        return pattern.format(t=t, n=n) if pattern else None

    def compare(self, op: str, lhs: ir.Expr, rhs: ir.Expr, a: V, b: V, hint: str,
                dst: Optional[V]) -> V:
        # The operands' IR types, not the registers': a parallel index is an s32 held in the
        # u32 register of %tid/%ctaid, and `t > x` of a negative s32 x compares signed
        # (setp.gt.u32 made every negative x greater than t). Both sides' types meet by C's
        # rules, as the interpreter's (ir/c_scalars.promote): `3 <= (c ? 4000000000u : 0u)`
        # compares unsigned, where the left operand's type alone compared signed.
        ct = c_scalars.promote(lhs.dtype, rhs.dtype, isinstance(lhs, ir.Const),
                               isinstance(rhs, ir.Const))
        t = REG_TYPES.get(ct) or getattr(self.lw, "widened_types", {}).get(ct) \
            or common_type(a, b)
        if t == "pred":
            raise self.lw.refuse("comparing conditions", self.loc)
        a, b = self.as_type(a, t), self.as_type(b, t)
        cmp = (_FCMP if t == "f32" else _CMP)[op]
        out = self.out(dst, "pred", hint)
        self.w.op(f"setp.{cmp}.{t}", out, a, b)
        return out

    def contract(self, e: ir.Bin, hint: str, dst: Optional[V]) -> Optional[V]:
        """`x*y + z`, `z + x*y`, `x*y - z` -> fma (None when no product to fuse)."""
        def product(x: ir.Expr) -> bool:
            return isinstance(x, ir.Bin) and x.op == "*" and x.dtype == "f32"
        if product(e.lhs):
            m, addend = e.lhs, (e.rhs if e.op == "+" else None)
            c = self.value(addend) if addend is not None else self.negated(e.rhs)
        elif e.op == "+" and product(e.rhs):
            m, c = e.rhs, self.value(e.lhs)
        else:
            return None
        x, y = self.value(m.lhs), self.value(m.rhs)
        out = self.out(dst, "f32", hint)
        self.w.op("fma.rn.f32", out, x, y, c)
        return out

    def negated(self, e: ir.Expr) -> V:
        """-e, folding the sign into a constant factor where there is one."""
        if isinstance(e, ir.Const):
            return V.imm(-e.value, "f32")
        if isinstance(e, ir.Un) and e.op == "-":
            return self.value(e.operand)
        if isinstance(e, ir.Bin) and e.op == "*":
            if isinstance(e.rhs, ir.Const):
                return self.value(ir.Bin("*", e.lhs, ir.Const(-e.rhs.value, e.rhs.dtype), e.dtype),
                                  "neg")
            if isinstance(e.lhs, ir.Const):
                return self.value(ir.Bin("*", ir.Const(-e.lhs.value, e.lhs.dtype), e.rhs, e.dtype),
                                  "neg")
        return self.value(ir.Un("-", e, e.dtype), "neg")

    def unary(self, e: ir.Un, hint: str, dst: Optional[V]) -> V:
        a = self.value(e.operand)
        t = reg_type(e.dtype, self.lw, self.loc)
        if a.is_const:
            r = {"-": lambda x: -x, "!": lambda x: not x, "~": lambda x: ~x}[e.op](a.const)
            # an integer wraps to its type: ~1u is 4294967294, not -2 (which made `~1u < 2u` true)
            return self.value(ir.Const(c_scalars.wrap(r, e.dtype), e.dtype), hint, dst)
        if e.op == "!":
            out = self.out(dst, "pred", hint)
            self.w.op("not.pred", out, self.as_type(a, "pred"))
            return out
        out = self.out(dst, t, hint)
        a = self.as_type(a, t)
        if e.op == "-":  # neg takes signed types; an unsigned negation is the same bits
            self.w.op(f"neg.{'s' + t[1:] if t.startswith('u') else t}", out, a)
        else:
            self.w.op(f"not.b{_bits(t)}", out, a)
        return out

    def call(self, e: ir.Call, hint: str, dst: Optional[V]) -> V:
        t = reg_type(e.dtype, self.lw, self.loc)
        if e.fn == "cdiv":
            n, d = e.args
            less = ir.Const(d.value - 1, d.dtype) if isinstance(d, ir.Const) else \
                ir.Bin("-", d, ir.Const(1, d.dtype), d.dtype)
            up = ir.Bin("+", n, less, e.dtype)
            return self.value(ir.Bin("/", up, d, e.dtype), hint, dst)
        if e.fn == "to":
            return self.convert(e.args[0], t, hint, dst)
        args = [self.value(a) for a in e.args]
        if all(a.is_const for a in args) and e.fn in ("min", "max", "abs"):
            r = {"min": min, "max": max, "abs": lambda x: abs(x)}[e.fn](*[a.const for a in args])
            return self.value(ir.Const(r, e.dtype), hint, dst)
        out = self.out(dst, t, hint)
        if e.fn in ("min", "max"):
            self.w.op(f"{e.fn}.{t}", out, *args)
        elif e.fn == "abs" and t.startswith("u"):  # PTX's abs is for signed types only
            self.w.op(f"mov.{t}", out, args[0])
        elif e.fn == "abs" and t != "f32":
            self.w.op(f"abs.{t}", out, args[0])
        elif e.fn in ("exp", "log") and t == "f32":
            if e.fn == "exp":
                self.w.op("mul.f32", out, args[0], V.imm(LOG2E, "f32"))
                self.w.op("ex2.approx.ftz.f32", out, out)
            else:
                self.w.op("lg2.approx.ftz.f32", out, args[0])
                self.w.op("mul.f32", out, out, V.imm(LN2, "f32"))
        elif e.fn in _F32_CALLS and t == "f32":
            self.w.op(_F32_CALLS[e.fn], out, args[0])
        elif e.fn in mathfns.FUNCS and t == "f32":
            mathfns.emit(self.w, e.fn, out, args)
        else:
            raise self.lw.refuse(f"the builtin '{e.fn}' on {e.dtype}", self.loc)
        return out

    def convert(self, x: ir.Expr, t: str, hint: str, dst: Optional[V]) -> V:
        a = self.value(x)
        if a.is_const:
            v = const_as(a.const, t)
            return self.value(ir.Const(v, "f32" if t == "f32" else t), hint, dst)
        if a.ty == t or (a.ty in ("s32", "u32") and t in ("s32", "u32")):
            return V(a.text, t) if dst is None else self.value(x, hint, dst)
        out = self.out(dst, t, hint)
        if a.ty == "pred" and t in ("s32", "u32", "s64", "u64", "f32"):
            # C: a condition used as a number is 1 or 0
            one, zero = (1.0, 0.0) if t == "f32" else (1, 0)
            self.w.op(f"selp.{'f32' if t == 'f32' else 'b' + str(_bits(t))}", out,
                      V.imm(one, t), V.imm(zero, t), a)
        elif t == "f32" and a.ty in ("s32", "u32", "s64", "u64"):
            self.w.op(f"cvt.rn.f32.{a.ty}", out, a)
        elif a.ty == "f32" and t in ("s32", "u32", "s64", "u64"):
            self.w.op(f"cvt.rzi.{t}.f32", out, a)
        elif a.ty in ("s32", "u32") and t in ("s64", "u64"):
            self.w.op(f"cvt.{t}.{a.ty}", out, a)
        else:
            raise self.lw.refuse(f"converting {a.ty} to {t}", self.loc)
        return out

