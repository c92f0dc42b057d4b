"""Per-thread fragment code: declarations, `apply`, reductions, copies.

An `apply` is fully unrolled over the registers the thread owns: for
register k of an accumulator-shaped domain, i = row_base + row_off[k] and
j = col_base + col_off[k] (target_base.py). Statements are emitted one after
the other, each over all registers; elements are independent, so this is
the program's order for every element.

- Elements resolve to registers at compile time: `acc.at(i, j)` is the
  domain register k, `row.at(i)` the row-vector register of k's row.
- Values shared by several elements (`m.at(i) * -c` per row, invariant
  scalars) are computed once per apply (or hoisted out of loops).
- Conditions on i and j that are affine (`j > cid * 64 + i`) become one
  per-thread value A and one `setp` against an immediate per register;
  conditional stores are `selp`; the element reads of a conditional value
  (a global bias, a shared row vector) are predicated loads under the same
  predicate (context.Lowering.element_load): only arithmetic is if-converted.
- `row.at(i) = row.at(i) + f(acc.at(i, j))` (also max/min) over a 2-D
  domain is a row reduction: a balanced tree over the thread's registers of
  that row, then one update of the row register (each thread keeps its
  partial value, as the `row_partial` layout says).
- Stores into a bf16 register operand pack two columns per register with
  `cvt.rn.bf16x2.f32`.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Optional

from choreo_py import ir

from . import f32x2
from . import exp2_poly
from .apply_lets import ApplyLets
from .context import Lowering, children
from .f16_values import half_bits, round_f16, round_to_dtype
from .exprs import ExprLowering
from .apply_atomics import ApplyAtomics
from .row_buffers import RowBuffers
from .target_base import AccLayout
from .writer import V
from choreo_py.construct_names import describe


@dataclass
class FragInfo:
    frag: ir.Frag
    kind: str  # "acc" | "row" | "operand" | "meta" (a sparse MMA's metadata)
    array: str
    layout: Optional[AccLayout]

    def reg(self, k: int) -> V:
        ty = "b32" if self.kind in ("operand", "meta") else "f32"
        return V(f"{self.array}[{k}]", ty)


def info(lw: Lowering, name: str, loc) -> FragInfo:
    fi = lw.frags.get(name)
    if fi is None:
        raise lw.refuse(f"the fragment '{name}' before its declaration", loc)
    return fi


def declare(lw: Lowering, s: ir.FragDecl) -> None:
    f = s.frag
    w = lw.w
    if f.layout == "sparse_meta":  # a sparse MMA's metadata: the target places it
        lw.frags[f.name] = FragInfo(f, "meta", lw.target.declare_sparse_meta(lw, f, s.loc), None)
        return
    if f.layout not in ("acc", "row", "row_partial", "operand"):
        raise lw.refuse(f"the per-thread fragment '{f.name}' (layout {f.layout})", s.loc)
    if f.layout == "operand" and f.dtype not in ("bf16", "f16"):
        raise lw.refuse(f"a register operand of {f.dtype}", s.loc)
    f16_acc = f.layout == "acc" and f.dtype == "f16" and lw.target.f16_accumulators
    if f.layout != "operand" and f.dtype != "f32" and not f16_acc:
        raise lw.refuse(f"the {f.dtype} fragment '{f.name}'", s.loc)
    if not f.shape:  # only filled: no MMA gives it a size, so no registers can hold it
        raise lw.refuse(f"the accumulator '{f.name}' that no MMA gives a shape", s.loc)
    if f.block and f.layout != "acc":
        lw.target.check_block_frag(f, s.loc)  # without tensor memory: refused
    rows = f.shape[0]
    cols = f.shape[1] if len(f.shape) > 1 else 8
    lay = lw.target.acc_layout(ir.Frag(f.name, "f32", (rows, cols), "acc", block=f.block), s.loc)
    if f.layout == "acc":
        fi = FragInfo(f, "acc", lw.target.declare_acc(lw, f), lay)
    elif f.layout == "operand":
        fi = FragInfo(f, "operand", w.array("b32", lay.regs // 2, f.name), lay)
    else:
        fi = FragInfo(f, "row", w.array("f32", len(lay.row_slots), f.name), lay)
    lw.frags[f.name] = fi
    if s.init is not None:
        init = V.imm(round_to_dtype(s.init.value, f.dtype), "f32")
        if fi.kind == "acc":
            lw.target.fill(lw, f, init)
        elif fi.kind == "operand":  # packed pairs of 16-bit elements: the value's bits twice
            bits = half_bits(s.init.value, f.dtype)
            for k in range(lay.regs // 2):
                w.op("mov.b32", fi.reg(k), V.imm(bits << 16 | bits, "b32"))
        else:
            for k in range(len(lay.row_slots)):
                w.op("mov.f32", fi.reg(k), init)


def fill(lw: Lowering, s: ir.MmaFill) -> None:
    if id(s) in lw.facts.folded_fills:
        lw.w.comment(f"{s.acc} = 0 folds into the next MMA (its first k-step does not accumulate)")
        return
    fi = info(lw, s.acc, s.loc)
    lw.target.fill(lw, fi.frag, V.imm(round_to_dtype(s.value.value, fi.frag.dtype), "f32"))


def copy(lw: Lowering, s: ir.FragCopy) -> None:
    d, src = info(lw, s.dst, s.loc), info(lw, s.src, s.loc)
    if d.kind != src.kind or d.frag.shape != src.frag.shape:
        raise lw.refuse(f"copying '{s.src}' into a fragment of another layout", s.loc)
    n = len(d.layout.row_slots) if d.kind == "row" else d.layout.regs // (2 if d.kind == "operand" else 1)
    for k in range(n):
        lw.w.op(f"mov.{'b32' if d.kind == 'operand' else 'f32'}", d.reg(k), src.reg(k))


def shuffle_combine(lw: Lowering, op: str, x: V, lanes) -> None:
    for mask in lanes:
        t = lw.w.reg("f32", "shfl")
        lw.w.op("shfl.sync.bfly.b32", t, x, mask, 31, -1)
        lw.w.op(f"{op}.f32", x, x, t)


def tree(lw: Lowering, op: str, vals: list[V], dst: V) -> None:
    """dst = op(vals...) as a balanced tree (short dependency chains); a target whose
    min/max take three inputs (`minmax3`: sm_100a) combines three at a node."""
    arity = 3 if op in ("max", "min") and lw.target.record.minmax3 else 2
    with lw.w.solo():  # (f32x2.py: its nodes read registers no pair wrote)
        _tree(lw, op, vals, dst, arity)


def _tree(lw: Lowering, op: str, vals: list[V], dst: V, arity: int) -> None:
    while len(vals) > 1:
        nxt = []
        full = len(vals) // arity * arity
        for a in range(0, full, arity):
            t = dst if len(vals) == arity else lw.w.reg("f32", "red")
            lw.w.op(f"{op}.f32", t, *vals[a:a + arity])
            nxt.append(t)
        rest = vals[full:]
        if len(rest) == 2:  # two left over: one two-input node
            t = dst if not nxt else lw.w.reg("f32", "red")
            lw.w.op(f"{op}.f32", t, *rest)
            nxt.append(t)
        else:
            nxt += rest
        vals = nxt
    if vals[0].text != dst.text:
        lw.w.op("mov.f32", dst, vals[0])


def reduce(lw: Lowering, s: ir.Reduce) -> None:
    dst, src = info(lw, s.dst, s.loc), info(lw, s.src, s.loc)
    if src.kind != "acc" or dst.kind != "row" or s.dim != 1:
        raise lw.refuse(f"reduce_{s.kind} other than along the rows of an accumulator", s.loc)
    op = {"max": "max", "sum": "add", "min": "min"}.get(s.kind)
    if op is None:
        raise lw.refuse(f"reduce_{s.kind}", s.loc)
    lw.target.access(lw, src.frag)
    lay = src.layout
    for slot in range(len(lay.row_slots)):
        regs = [src.reg(k) for k in range(lay.regs) if lay.slot_of(k) == slot]
        tree(lw, op, regs, dst.reg(slot))
        shuffle_combine(lw, op, dst.reg(slot), lay.row_lanes)


def all_reduce(lw: Lowering, s: ir.AllReduce) -> None:
    fi = info(lw, s.frag, s.loc)
    op = {"sum": "add", "max": "max", "min": "min"}.get(s.kind)
    if fi.kind != "row" or op is None:
        raise lw.refuse(f"all_reduce_{s.kind} of '{s.frag}'", s.loc)
    for slot in range(len(fi.layout.row_slots)):
        shuffle_combine(lw, op, fi.reg(slot), fi.layout.row_lanes)


# ---------------------------------------------------------------- apply

class ApplyLowering(ApplyLets, RowBuffers, ApplyAtomics, ExprLowering):
    """Expressions of one apply, for one register k at a time."""

    def __init__(self, lw: Lowering, a: ir.Apply, dom: FragInfo) -> None:
        super().__init__(lw, a.loc)
        self.a = a
        self.dom = dom
        self.k = 0
        self.memo: dict = {}
        self.version: dict[str, int] = defaultdict(int)
        self.tmp_count: dict = defaultdict(int)
        self.tmp_arrays: dict = {}
        self.units = len(dom.layout.row_slots) if dom.kind == "row" else dom.layout.regs
        self.plain = 0
        self.lets: dict[str, dict[int, V]] = {}  # named values of the body (apply_lets.py)

    # which register holds element k of fragment `fi` (an index pattern of the apply)
    def elem(self, e: ir.Elem) -> V:
        fi = info(self.lw, e.frag, self.loc)
        names = [x.name if isinstance(x, ir.Sym) else None for x in e.index]
        if names != list(self.a.indices[: len(names)]):
            raise self.lw.refuse(f"'{e.frag}' indexed other than by the apply's own indices",
                                 self.loc)
        if fi.kind == "row":
            return fi.reg(self.slot())
        if self.dom.kind == "row" or fi.kind == "operand":
            raise self.lw.refuse(f"reading '{e.frag}' in this apply", self.loc)
        return fi.reg(self.k)

    def slot(self) -> int:
        return self.k if self.dom.kind == "row" else self.dom.layout.slot_of(self.k)

    def offsets(self) -> dict[str, tuple[str, int]]:
        lay = self.dom.layout
        i, *rest = self.a.indices
        if self.dom.kind == "row":
            return {i: ("ROW", lay.row_slots[self.k])}
        return {i: ("ROW", lay.row_off[self.k]), rest[0]: ("COL", lay.col_off[self.k])}

    def leaf(self, e: ir.Expr) -> Optional[V]:
        if isinstance(e, ir.Elem):
            return self.elem(e)
        if isinstance(e, ir.BufElem) and self.lw.k.param(self.lw.k.root(e.view.base)) is None:
            return self.row_buffer_load(e)  # (a global tensor's element: global_reads.py)
        if isinstance(e, ir.Sym) and e.name in self.a.indices:
            base, off = self.offsets()[e.name]
            return self.index_value(base, off)
        return super().leaf(e)

    def index_value(self, base: str, off: int) -> V:
        rb, cb = self.lw.target.thread_bases(self.lw)
        b = rb if base == "ROW" else cb
        if off == 0:
            return b
        return self.lw.once(("index", base, off), lambda: self._add(b, off))

    def _add(self, b: V, off: int) -> V:
        out = self.w.reg("s32", "idx")
        self.w.op("add.s32", out, b, off)
        return out

    def key(self, e: ir.Expr):
        if isinstance(e, ir.Elem):
            r = self.elem(e).text
            return ("elem", r, self.version[r])
        if isinstance(e, ir.BufElem) and self.lw.k.param(self.lw.k.root(e.view.base)) is None:
            # a shared row vector: read again after this apply stores into it; the index
            # belongs to the key (`sc.at(j)` is not `sc.at(i)`: row_buffer refuses it)
            base = self.lw.k.root(e.view.base)
            return ("buf", base, e.view, e.index, self.offsets()[self.a.indices[0]],
                    self.version["buf " + base], self.guard_key())
        if isinstance(e, ir.Sym) and e.name in self.a.indices:
            return ("index",) + self.offsets()[e.name]
        return super().key(e)

    def reuse(self, e, key):
        return super().reuse(e, key) if self.lw.invariant(e) else self.memo.get(key)

    def keep(self, e, key, v: V) -> None:
        if self.lw.invariant(e):
            super().keep(e, key, v)
        else:
            self.memo[key] = v

    def out(self, dst: Optional[V], ty: str, hint: str) -> V:
        if dst is not None or self.plain:
            return super().out(dst, ty, hint)
        pos = self.tmp_count[(self.k, ty)]
        self.tmp_count[(self.k, ty)] += 1
        if (ty, pos) not in self.tmp_arrays:
            letter = {"pred": "q", "f32": "t"}.get(ty, "n")
            self.tmp_arrays[(ty, pos)] = self.w.array(ty, self.units, f"{letter}{pos}")
        return V(f"{self.tmp_arrays[(ty, pos)]}[{self.k}]", ty)

    def wrote(self, reg: V) -> None:
        self.version[reg.text] += 1

    def call(self, e: ir.Call, hint, dst):
        """`__exp2f` of an element pass exp2-split gave the FMA pipes: the polynomial."""
        if e.fn == "exp2" and self.k % 16 in self.a.exp2_poly and self.dom.kind != "row":
            x = self.value(e.args[0])
            out = self.out(dst, "f32", hint)
            exp2_poly.emit(self.w, out, x)
            return out
        return super().call(e, hint, dst)

    def compute(self, e, hint, dst):
        if dst is None and self.lw.invariant(e):
            self.plain += 1
            try:
                return super().compute(e, hint, dst)
            finally:
                self.plain -= 1
        return super().compute(e, hint, dst)

    # -------------------------------------------------------- affine conditions
    def binary(self, e: ir.Bin, hint, dst):
        if e.op in _AFFINE_CMP and e.lhs.dtype in ("s32", "u32") and self.uses_index(e):
            lin = self.linear(ir.Bin("-", e.lhs, e.rhs, "s32"))
            if lin is not None:
                terms, const = lin
                a = self.affine_value(terms)
                out = self.out(dst, "pred", "mask")
                self.w.op(f"setp.{_AFFINE_CMP[e.op]}.s32", out, a, V.imm(-const, "s32"))
                return out
        return super().binary(e, hint, dst)

    def uses_index(self, e: ir.Expr) -> bool:
        if isinstance(e, ir.Sym):  # (a named value of the body may: it is not affine here)
            return e.name in self.a.indices or e.name in self.lets
        return any(self.uses_index(c) for c in children(e))

    def linear(self, e: ir.Expr):
        """e = sum(coef * atom) + const, the const depending on k; None if not affine."""
        if isinstance(e, ir.Const) and isinstance(e.value, int):
            return {}, e.value
        if isinstance(e, ir.Sym) and e.name in self.a.indices:
            base, off = self.offsets()[e.name]
            return {(base,): (1, None)}, off
        if not self.uses_index(e):
            return {self.key(e): (1, e)}, 0
        if isinstance(e, ir.Bin) and e.op in ("+", "-"):
            a, b = self.linear(e.lhs), self.linear(e.rhs)
            if a is None or b is None:
                return None
            sign = 1 if e.op == "+" else -1
            terms = dict(a[0])
            for key, (c, ex) in b[0].items():
                terms[key] = (terms.get(key, (0, ex))[0] + sign * c, ex)
            return terms, a[1] + sign * b[1]
        if isinstance(e, ir.Bin) and e.op == "*":
            for x, y in ((e.lhs, e.rhs), (e.rhs, e.lhs)):
                if isinstance(y, ir.Const) and isinstance(y.value, int):
                    lin = self.linear(x)
                    if lin is None:
                        return None
                    return ({k: (c * y.value, ex) for k, (c, ex) in lin[0].items()},
                            lin[1] * y.value)
        return None

    def affine_value(self, terms: dict) -> V:
        """The register part of an affine form, computed once (per thread)."""
        items = sorted(((k, c, ex) for k, (c, ex) in terms.items() if c), key=lambda t: repr(t[0]))
        inv = all(ex is None or self.lw.invariant(ex) for _, _, ex in items)
        key = ("affine",) + tuple((k, c) for k, c, _ in items)

        def make() -> V:
            vals = []
            for k, c, ex in items:
                if ex is None:
                    rb, cb = self.lw.target.thread_bases(self.lw)
                    vals.append((rb if k == ("ROW",) else cb, c))
                else:
                    vals.append((ExprLowering(self.lw, self.loc).value(ex), c))
            out = self.w.reg("s32", "affine")
            vals.sort(key=lambda t: t[1] < 0)  # a positive term first: fewer negations
            if not vals:
                self.w.op("mov.s32", out, 0)
                return out
            v0, c0 = vals[0]
            first = {1: ("mov.s32", ()), -1: ("neg.s32", ())}.get(c0, ("mul.lo.s32", (c0,)))
            self.w.op(first[0], out, v0, *first[1])
            for v, c in vals[1:]:
                if c in (1, -1):
                    self.w.op("add.s32" if c == 1 else "sub.s32", out, out, v)
                else:
                    self.w.op("mad.lo.s32", out, v, c, out)
            return out
        if inv:
            return self.lw.once(key, make)
        if key not in self.memo:
            self.memo[key] = make()
        return self.memo[key]

    # -------------------------------------------------------- statements
    def run(self, stmts: list, cond: Optional[dict], ks: Optional[list] = None) -> None:
        """Lowers `stmts` for the elements `ks` (all by default) under predicates `cond`."""
        ks = list(range(self.units)) if ks is None else ks
        for s in stmts:
            if isinstance(s, ir.ElemStore):
                self.store(s, cond, ks)
            elif isinstance(s, ir.BufStore) and not s.atomic:
                self.row_buffer_store(s, cond, ks)
            elif isinstance(s, ir.BufStore) and s.atomic == "add":
                self.atomic_add(s, cond, ks)
            elif isinstance(s, ir.If):
                self.branch(s, cond, ks)
            elif isinstance(s, ir.Let):
                self.let(s, ks, cond)
            else:
                raise self.lw.refuse(f"{describe(s)} inside apply", getattr(s, "loc", self.loc))

    def branch(self, s: ir.If, outer: Optional[dict], ks: list) -> None:
        written = {t.frag for t in ir.walk(s.then + s.orelse) if isinstance(t, ir.ElemStore)}
        if not (ir.elem_reads([s]) & written) and len(ks) > 1:
            for k in ks:  # element by element: one predicate live at a time
                self.branch(s, outer, [k])
            return
        preds = {}
        for k in ks:  # evaluated once per element, before either branch
            self.k = k
            p = self.guarded(s.cond, None if outer is None else outer[k], hint="mask")
            if outer is not None:
                q = self.out(None, "pred", "mask")
                self.w.op("and.pred", q, p, outer[k])
                p = q
            preds[k] = p
        self.run(s.then, preds, ks)
        if s.orelse:
            neg = {}
            for k in ks:
                self.k = k
                q = self.out(None, "pred", "mask")
                self.w.op("not.pred", q, preds[k])
                if outer is not None:
                    self.w.op("and.pred", q, q, outer[k])
                neg[k] = q
            self.run(s.orelse, neg, ks)

    def store(self, s: ir.ElemStore, cond: Optional[dict], ks: list) -> None:
        fi = info(self.lw, s.frag, s.loc)
        if fi.kind == "row" and self.dom.kind != "row":
            if cond is not None or len(ks) != self.units:
                raise self.lw.refuse("a conditional row reduction inside apply", s.loc)
            return self.reduction(s, fi)
        if fi.kind == "operand":
            if cond is not None or len(ks) != self.units:
                raise self.lw.refuse("a conditional store into a register operand", s.loc)
            return self.pack(s, fi)
        for k in ks:
            self.k = k
            dst = self.elem(ir.Elem(s.frag, s.index, fi.frag.dtype))
            if cond is None:
                self.value(s.value, "v", dst)
            else:  # if-converted: the value's loads run only where the store does
                v = self.guarded(s.value, cond[k], hint="v")
                self.w.op("selp.f32", dst, v, dst, cond[k])
            if fi.kind == "acc" and fi.frag.dtype == "f16":
                round_f16(self.lw, [dst])
            self.wrote(dst)

    def reduction(self, s: ir.ElemStore, fi: FragInfo) -> None:
        v = s.value
        own = ir.Elem(s.frag, s.index, "f32")
        if isinstance(v, ir.Bin) and v.op == "+":
            op, args = "add", (v.lhs, v.rhs)
        elif isinstance(v, ir.Call) and v.fn in ("max", "min"):
            op, args = v.fn, v.args
        else:
            raise self.lw.refuse("a row-vector store inside a 2-D apply other than an "
                                 "accumulation (x.at(i) = x.at(i) + ... / max / min)", s.loc)
        if _same_elem(args[0], own):
            term = args[1]
        elif _same_elem(args[1], own):
            term = args[0]
        else:
            raise self.lw.refuse("a row-vector store inside a 2-D apply that does not "
                                 f"accumulate into '{s.frag}.at(i)'", s.loc)
        lay = self.dom.layout
        for slot in range(len(lay.row_slots)):
            vals = []
            for k in range(lay.regs):
                if lay.slot_of(k) == slot:
                    self.k = k
                    vals.append(self.value(term, "term"))
            part = self.w.reg("f32", f"{s.frag}_part")
            tree(self.lw, op, vals, part)
            self.w.op(f"{op}.f32", fi.reg(slot), fi.reg(slot), part)

    def pack(self, s: ir.ElemStore, fi: FragInfo) -> None:
        v = s.value
        if not (isinstance(v, ir.Call) and v.fn == "to"):
            raise self.lw.refuse(f"a store into the register operand '{s.frag}' other than "
                                 f"a conversion __to(...)", s.loc)
        if self.dom.kind == "row":
            raise self.lw.refuse("filling a register operand from a row apply", s.loc)
        kind = {"bf16": "bf16x2", "f16": "f16x2"}[fi.frag.dtype]
        for k in range(0, self.units, 2):
            self.k = k
            lo = self.value(v.args[0], "lo")
            self.k = k + 1
            hi = self.value(v.args[0], "hi")
            # the first source goes to the upper half: column j+1 above column j
            self.w.op(f"cvt.rn.{kind}.f32", fi.reg(k // 2), hi, lo)


def _same_elem(e: ir.Expr, own: ir.Elem) -> bool:
    return (isinstance(e, ir.Elem) and e.frag == own.frag
            and [getattr(x, "name", x) for x in e.index] == [getattr(x, "name", x) for x in own.index])


_AFFINE_CMP = {"<": "lt", "<=": "le", ">": "gt", ">=": "ge", "==": "eq", "!=": "ne"}




def apply(lw: Lowering, a: ir.Apply) -> None:
    """An apply's code; on a target with f32x2 forms, when the kernel pairs (f32x2.pairs_in),
    its independent f32 arithmetic is paired (each element is rounded as alone: the same
    results)."""
    with lw.w.pairing(f32x2.pairs_in(lw.k.name) and lw.target.record.f32x2):
        _apply(lw, a)


def _apply(lw: Lowering, a: ir.Apply) -> None:
    dom = info(lw, a.domain, a.loc)
    if len(a.indices) != len(dom.frag.shape):
        raise lw.refuse(f"apply over '{a.domain}' with {len(a.indices)} indices", a.loc)
    accs = sorted({s.frag for s in ir.walk(a.body) if isinstance(s, ir.ElemStore)}
                  | ir.elem_reads(a.body))
    acc_frags = [lw.frags[n].frag for n in accs if n in lw.frags and lw.frags[n].kind == "acc"]
    al = ApplyLowering(lw, a, dom)
    skip = _warp_vote(lw, a, al)
    # a voted apply runs its guard's body under the row's predicate (one register, every
    # element), piece by piece like any other: the vote is taken once, before the first load
    body, pred = (a.body, None) if skip is None else (a.body[0].then, skip[1])
    chunk = _column_chunk(lw, a, dom, acc_frags)
    if chunk:
        _apply_in_pieces(lw, al, acc_frags, chunk, body, pred)
    else:
        for f in acc_frags:
            lw.target.access(lw, f)
        al.run(body, None if pred is None else {k: pred for k in range(al.units)})
        for f in acc_frags:
            lw.target.update(lw, f)
    if skip is not None:
        lw.w.put_label(skip[0])


def _warp_vote(lw: Lowering, a: ir.Apply, al: ApplyLowering):
    """Pass tmem-row-vote's apply: the row guard's predicate, evaluated before the tile is
    loaded, and a warp vote that branches past the load, the body and the store when no
    lane holds a row that takes it. (label, predicate), or None for other applies."""
    if not a.warp_vote or len(al.dom.layout.row_slots) != 1:
        return None
    al.k = 0
    p = al.value(a.body[0].cond, "mask")
    if p.is_const:  # a guard that folded: the plain lowering (all or nothing) is as good
        return None
    return lw.target.row_vote(lw, p, a), p


def _column_chunk(lw: Lowering, a: ir.Apply, dom: FragInfo, acc_frags: list) -> int:
    """Registers per piece when the target moves the accumulators of an elementwise apply
    piece by piece (0: all at once). Elementwise: it stores only into accumulators of the
    domain's shape (no row reduction, no operand, no buffer), so element k depends on the
    registers k of its accumulators alone (and on row values)."""
    chunk = lw.target.column_chunk(lw, acc_frags) if dom.kind == "acc" else 0
    if not chunk:
        return 0
    for s in ir.walk(a.body):
        if isinstance(s, ir.BufStore):
            return 0
        if isinstance(s, ir.ElemStore) and info(lw, s.frag, s.loc).kind != "acc":
            return 0
    if any(f.shape != dom.frag.shape for f in acc_frags):
        return 0
    return chunk if chunk and dom.layout.regs % chunk == 0 and dom.layout.regs > chunk else 0


def _apply_in_pieces(lw: Lowering, al: "ApplyLowering", acc_frags: list, chunk: int,
                     body: list, pred: Optional[V]):
    """One ApplyLowering for all pieces: row values are computed once. `pred`: the row
    guard of a voted apply, under which `body` (the guard's own) stores."""
    stored = set()
    for first in range(0, al.dom.layout.regs, chunk):
        for f in acc_frags:
            lw.target.access_columns(lw, f, first, chunk)
        ks = list(range(first, first + chunk))
        al.run(body, None if pred is None else {k: pred for k in ks}, ks)
        for f in acc_frags:
            if lw.target.update_columns(lw, f, first, chunk):
                stored.add(f.name)
    if stored:
        lw.target.wrote_back(lw)


def k_steps(lw: Lowering, s: ir.Mma, k: int, step: int) -> list[int]:
    """The K steps of an MMA in issue order: `[[schedule(k_tiles(...))]]`, else ascending.
    (Sema checked that the schedule permutes the K tiles.) The first issued step is the one
    that overwrites the accumulator after a folded `mma.fill 0`."""
    if s.k_schedule is None:
        return list(range(k // step))
    order = list(s.k_schedule)
    if sorted(order) != list(range(k // step)):
        raise lw.refuse(f"a k schedule of {len(order)} steps for an MMA of {k // step} "
                        f"steps of K = {step}", s.loc)
    return order


def mma_accumulator(lw: Lowering, s: ir.Mma):
    """The accumulator of an MMA statement, after the checks every MMA unit shares."""
    acc = lw.frags.get(s.acc)
    if acc is None or acc.kind != "acc":
        raise lw.refuse(f"an MMA into '{s.acc}', which is not an accumulator", s.loc)
    if s.layout not in ("row.row", "row.col"):
        raise lw.refuse(f"mma.{s.layout}", s.loc)
    return acc
