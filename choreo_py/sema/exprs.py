"""Expressions: from AST expressions to sema values and IR expressions.

Scalars become IR expressions, folded where constant. View chains become
`ViewValue`s (normalised boxes). Fragment and buffer element accesses
(`acc.at(i, j)`) become `ir.Elem` / `ir.BufElem` reads.
"""
from __future__ import annotations

import math

from ..frontend import ast as A
from ..frontend import builtins
from .. import ir
from ..ir import build as B
from ..diagnostics import ChoreoError, did_you_mean
from . import arrays
from .increments import align, increment_in_expr, increments_in, zero_decl
from . import views as V
from .values import kind_of as _kind
from .values import (BoundedTuple, BufferValue, EventValue, FragValue, FutureValue, ITupleValue, Opaque,
                     Scalar, ShapeNotYetKnown, ShapeValue, Tensor, TilingValue, Unsupported, Value,
                     ViewValue)
from ..construct_names import describe

#: Builtin scalar functions as written -> IR builtin name: the language's one table
#: (frontend/builtins.py), the names the IR computes.
BUILTIN_FUNCS = {name: fn for name, fn in builtins.FUNCTIONS.items() if fn is not None}
_INT_SUFFIX = {"": "s32", "u": "u32", "l": "s64", "ll": "s64", "ul": "u64", "ull": "u64",
               "lu": "u64", "llu": "u64"}


def err(message: str, node) -> ChoreoError:
    return ChoreoError(message, getattr(node, "loc", None))


#: The largest finite value of each float type (C's FLT_MAX for f32).
FLOAT_MAX = {"f32": 3.4028234663852886e38, "f16": 65504.0, "bf16": 3.3895313892515355e38,
             "f64": 1.7976931348623157e308}


def check_float_range(value: float, dtype: str, node, what: str) -> None:
    """A finite constant beyond its type's range has no value of that type (C makes the
    conversion undefined): a located error rather than an inf that nobody wrote."""
    top = FLOAT_MAX.get(dtype)
    if top is not None and (math.isinf(value) or abs(value) > top) and not math.isnan(value):
        raise err(f"{what} is beyond the range of {dtype} (largest finite value {top:.8g})",
                  node)


class ExprBuilder:
    """Mixin of the statement builder: needs `self.scope`, `self.kernel`."""

    increments_in, zero_decl = increments_in, zero_decl  # sema/increments.py

    # ------------------------------------------------------------ entry points
    def value(self, node: A.Expr, dtype_hint: str | None = None) -> Value:
        if self.co_callee(node) is not None:  # not a call statement (sema/co_calls.py)
            raise self.co_call_elsewhere(node)
        method = getattr(self, "e_" + type(node).__name__, None)
        if method is None:
            raise Unsupported(f"{describe(node)} used as a value", node.loc)
        return method(node, dtype_hint)

    def scalar(self, node: A.Expr, dtype_hint: str | None = None) -> ir.Expr:
        v = self.value(node, dtype_hint)
        if isinstance(v, Scalar):
            return v.expr
        if isinstance(v, (EventValue, FutureValue)):
            raise Unsupported(f"{_kind(v)} used as a value", node.loc)
        raise err(f"{self.describe(node)} is {_kind(v)}, not a scalar value", node)

    def index(self, node: A.Expr, e: ir.Expr | None = None, what: str = "an index") -> ir.Expr:
        """An index, offset or slot: an integer (a condition counts as 0 or 1, as in C;
        a float is an error: addresses are integer arithmetic)."""
        e = self.scalar(node) if e is None else e
        if ir.is_float(e.dtype):
            raise err(f"{what} must be an integer, not {e.dtype}", node)
        return B.convert(e, B.INT) if e.dtype == "bool" else e

    def const_int(self, node: A.Expr, what: str) -> int:
        e = self.scalar(node)
        n = B.as_int(e)
        if n is None:
            raise err(f"{what} must be a compile-time integer", node)
        return n

    def describe(self, node: A.Expr) -> str:
        return f"'{node.id}'" if isinstance(node, A.Name) else "this expression"

    # ------------------------------------------------------------ leaves
    def e_IntLit(self, n: A.IntLit, hint):
        dtype = _INT_SUFFIX.get(n.suffix, "s64")
        if dtype == "s32" and n.value > 0x7FFFFFFF:
            dtype = "s64"
        return Scalar(B.const(n.value, dtype), kind="const")

    def e_FloatLit(self, n: A.FloatLit, hint):
        # Choreo's float arithmetic is single precision unless asked otherwise.
        dtype = "f64" if hint == "f64" else "f32"
        if any(c.isdigit() for c in n.text):  # not `inf`, which is meant
            check_float_range(float(n.value), dtype, n, f"the literal '{n.text}'")
        return Scalar(B.const(float(n.value), dtype), kind="const")

    def e_BoolLit(self, n: A.BoolLit, hint):
        return Scalar(B.const(bool(n.value), "bool"), kind="const")

    def e_Name(self, n: A.Name, hint):
        if n.id in ("inf", "INFINITY"):
            return Scalar(B.const(math.inf, "f32"), kind="const")
        v = self.scope.lookup(n.id)
        if v is None:
            hint = did_you_mean(n.id, self.scope.visible() + list(builtins.FUNCTIONS))
            raise err(f"'{n.id}' is not declared{hint}", n)
        if isinstance(v, Opaque):
            raise Unsupported(f"'{n.id}' (declared by {v.construct})", n.loc)
        if self.from_host(n.id):  # a scalar parameter or host variable the kernel reads
            self.note_host_reads(v)
        return v

    def _compose(self, n: A.Binary) -> Scalar:
        """`a # b`: the bounded variable that counts a, then b within it: a * #b + b, bounded
        by #a * #b (`p # x` indexes the x-th of #x sub-tiles of the p-th tile)."""
        a, b = self.value(n.lhs), self.value(n.rhs)
        for v, node in ((a, n.lhs), (b, n.rhs)):
            if not isinstance(v, Scalar) or v.bound is None:
                raise err(f"'#' composes bounded variables; {self.describe(node)} is not one",
                          node)
        return Scalar(B.add(B.mul(a.expr, b.bound), b.expr), bound=B.mul(a.bound, b.bound),
                      kind="index")

    def e_UBound(self, n: A.UBound, hint):
        v = self.scope.lookup(n.name)
        if not isinstance(v, Scalar) or v.bound is None:
            raise err(f"'#{n.name}': '{n.name}' is not a bounded variable", n)
        return Scalar(v.bound, kind="const" if B.as_int(v.bound) is not None else "let")

    # ------------------------------------------------------------ operators
    def e_Unary(self, n: A.Unary, hint):
        if n.op in ("post++", "post--", "++", "--"):
            return increment_in_expr(self, n)
        x = self.scalar(n.operand, hint)
        if n.op == "+":
            return Scalar(x)
        if n.op in ("-", "~") and x.dtype == "bool":  # C: a condition negated is an int
            x = B.convert(x, B.INT)
        if n.op == "-":
            if isinstance(x, ir.Const) and not isinstance(x.value, bool):
                return Scalar(ir.Const(-x.value, x.dtype), kind="const")
            return Scalar(ir.Un("-", x, x.dtype))
        if n.op == "!":
            return Scalar(ir.Un("!", B.convert(x, "bool"), "bool"))
        if n.op == "~":
            if ir.is_float(x.dtype):
                raise err("'~' needs an integer operand, not a float", n)
            return Scalar(ir.Un("~", x, x.dtype))
        raise Unsupported(f"the unary operator '{n.op}'", n.loc)

    def e_Binary(self, n: A.Binary, hint):
        if n.op == "#":
            return self._compose(n)
        if n.op.startswith("#"):
            raise Unsupported(f"the bounded-variable operator '{n.op}'", n.loc)
        lhs, rhs = self.value(n.lhs, hint), self.value(n.rhs, hint)
        if isinstance(lhs, ShapeValue) or isinstance(rhs, ShapeValue):
            return self._shape_arith(n, lhs, rhs)
        for v, node in ((lhs, n.lhs), (rhs, n.rhs)):
            if isinstance(v, (EventValue, FutureValue, ITupleValue, Tensor)):
                raise Unsupported(f"operator '{n.op}' on {_kind(v)}", node.loc)
        if not isinstance(lhs, Scalar) or not isinstance(rhs, Scalar):
            bad = n.lhs if not isinstance(lhs, Scalar) else n.rhs
            raise err(f"operator '{n.op}' needs scalar operands; {self.describe(bad)} is "
                      f"{_kind(lhs if bad is n.lhs else rhs)}", bad)
        if n.op in ("/", "%") and B.as_int(rhs.expr) == 0:
            raise err("division by zero", n.rhs)
        e = B.binop(n.op, lhs.expr, rhs.expr)
        return Scalar(e, kind="const" if isinstance(e, ir.Const) else "let")

    def _shape_arith(self, n, lhs, rhs):
        """`s + 1`, `s / {4, 2, 8}`, `s - t`: dimension by dimension, a shape; an ituple
        operand (its elements) or a shape needs the other's rank."""
        def dims(v, node):
            if isinstance(v, ShapeValue):
                return list(v.dims)
            if isinstance(v, ITupleValue) and not isinstance(v, BoundedTuple):
                return list(v.elems)
            if isinstance(v, Scalar):
                return None
            raise Unsupported(f"operator '{n.op}' between a shape and {_kind(v)}", node.loc)
        a, b = dims(lhs, n.lhs), dims(rhs, n.rhs)
        if a is not None and b is not None and len(a) != len(b):
            if isinstance(lhs, ITupleValue) or isinstance(rhs, ITupleValue):
                # a rule of check/initialisers.py (an error when compiling, a warning from a
                # plain `check`, which accepts the reference's parse-stage programs)
                raise Unsupported(f"operator '{n.op}' on a shape and an ituple of different "
                                  "ranks", n.loc)
            raise err(f"shapes of rank {len(a)} and {len(b)} cannot be combined with '{n.op}'", n)
        if n.op in ("/", "%") and any(B.as_int(x) == 0 for x in (b or [rhs.expr])):
            raise err("division by zero", n.rhs)
        size = len(a if a is not None else b)
        a = a if a is not None else [lhs.expr] * size
        b = b if b is not None else [rhs.expr] * size
        return ShapeValue(tuple(B.binop(n.op, x, y) for x, y in zip(a, b)))

    def e_SizeOf(self, n: A.SizeOf, hint):
        """`|sp|`: the element count of a shape (the product of its dimensions); `|f32|`:
        the bytes of an element of a type."""
        if isinstance(n.operand, A.TypeRef):
            if n.operand.name not in ir.DTYPE_BITS:
                raise Unsupported(f"'|{n.operand.name}|' (a type without an element size here)", n.loc)
            return Scalar(B.const(ir.dtype_bytes(n.operand.name)), kind="const")
        v = self.value(n.operand)
        if not isinstance(v, ShapeValue):
            raise Unsupported(f"'|...|' of {_kind(v)} (the element count of a shape: "
                              "'|x.span|')", n.loc)
        count = B.const(1)
        for d in v.dims:
            count = B.mul(count, d)
        return Scalar(count, kind="const" if isinstance(count, ir.Const) else "let")

    def e_Ternary(self, n: A.Ternary, hint):
        c = self.scalar(n.cond)
        t, f = self.scalar(n.then, hint), self.scalar(n.otherwise, hint)
        if isinstance(c, ir.Const):
            return Scalar(t if c.value else f)
        t, f = B.promote("?:", t, f)
        rt = B.result_type(t, f)
        return Scalar(ir.Select(B.convert(c, "bool"), B.convert(t, rt), B.convert(f, rt), rt))

    # ------------------------------------------------------------ calls
    def _select(self, n: A.CallExpr, hint):
        """`select(k, c0, c1, ...)`: candidate k (counted from 0). A compile-time k names
        the candidate itself (a future, a buffer, a scalar); a run-time one chooses among
        scalars (nested `?:`). `choreo check` has checked the candidates agree in type."""
        k = B.as_int(self.scalar(n.args[0]))
        cands = n.args[1:]
        if k is not None:
            if not 0 <= k < len(cands):
                raise err(f"the selector {k} is outside the {len(cands)} candidates of 'select'",
                          n.args[0])
            return self.value(cands[k], hint)
        vals = [self.value(c, hint) for c in cands]
        if not all(isinstance(v, Scalar) for v in vals):
            # Valid Choreo; the tile IR has no value that is one of several futures or
            # buffers chosen at run time.
            raise Unsupported("'select' of futures or buffers by a run-time selector", n.loc)
        sel = self.scalar(n.args[0])
        out = vals[-1].expr
        for i in range(len(vals) - 2, -1, -1):
            t, f = B.promote("?:", vals[i].expr, out)
            rt = B.result_type(t, f)
            cond = B.binop("==", sel, B.const(i))
            out = ir.Select(B.convert(cond, "bool"), B.convert(t, rt), B.convert(f, rt), rt)
        return Scalar(out)

    def e_CallExpr(self, n: A.CallExpr, hint):
        if n.func == "select" and len(n.args) >= 2:
            return self._select(n, hint)
        if n.func in ("__alignup", "__aligndown"):
            return align(self, n)
        fn = BUILTIN_FUNCS.get(n.func)
        if fn is None:
            raise Unsupported(f"the builtin '{n.func}' in an expression", n.loc)
        arity = ir.BUILTINS[fn]
        if len(n.args) != arity:
            raise err(f"'{n.func}' takes {arity} argument(s), not {len(n.args)}", n)
        args = tuple(self.scalar(a, hint) for a in n.args)
        if fn == "cdiv":
            if B.as_int(args[1]) == 0:
                raise err("cdiv by zero", n.args[1])
            return Scalar(B.cdiv(*args))
        if len(args) == 2:
            args = B.promote(fn, *args)
        if fn in ("min", "max") and all(B.as_int(a) is not None for a in args):
            return Scalar(B.fold_min_max(fn, args))
        dtype = B.result_type(*args) if len(args) == 2 else args[0].dtype
        if dtype == "bool":
            dtype = B.INT
        if fn not in ("min", "max", "abs") and not ir.is_float(dtype):
            dtype = "f32"
        # The operands take the call's type (`exp2(k)` of an int k converts k to f32).
        return Scalar(ir.Call(fn, tuple(B.convert(a, dtype) for a in args), dtype))

    def e_Cast(self, n: A.Cast, hint):
        if n.foreign is not None:
            raise Unsupported(f"a conversion to the foreign type \"{n.foreign}\"", n.loc)
        target = n.target.name if n.target is not None else hint
        if target is None:
            raise err("'__to(x)' converts to the type of its destination, and here it has none; "
                      "write '__to<type>(x)'", n)
        x = self.scalar(n.value)
        if x.dtype == target:
            return Scalar(x)
        return Scalar(ir.Call("to", (x,), target))

    # ------------------------------------------------------------ shapes
    def _flatten(self, elements, nested: type, what: str) -> tuple[ir.Expr, ...]:
        """Elements of a shape or ituple literal; a nested one of the same kind is spliced in."""
        out: list[ir.Expr] = []
        for el in elements:
            v = self.value(el)
            if isinstance(v, nested) or (nested is ShapeValue and type(v) is ITupleValue):
                # `[b]` of an ituple `b = {1, x, 3}` is the shape of its elements (the
                # reference compiler takes it so: `with idx in [b]` bounds idx by b)
                out += v.dims if isinstance(v, ShapeValue) else v.elems
            elif isinstance(v, Scalar):
                out.append(v.expr)
            else:
                raise err(f"{what} element cannot be {_kind(v)}", el)
        return tuple(out)

    def e_MdSpanLit(self, n: A.MdSpanLit, hint):
        return ShapeValue(self._flatten(n.elements, ShapeValue, "a shape"))

    def e_ITupleLit(self, n: A.ITupleLit, hint):
        return ITupleValue(self._flatten(n.elements, ITupleValue, "an ituple"))

    def e_Member(self, n: A.Member, hint):
        base = self.value(n.base)
        if n.name == "span":
            shape = self.shape_of(base, n.base)
            of = base.frag.name if isinstance(base, FragValue) else None
            return ShapeValue(tuple(shape), of_frag=of)
        if n.name == "data" and isinstance(base, FutureValue):
            if base.dst is None:
                raise err(f"'{n.base.id}' is an operation future; it has no '.data'", n)
            buf = self.kernel.buffer(base.dst.base) or self.kernel.run_buffer(base.dst.base)
            return ViewValue(base.dst, buf.dtype if buf else "f32")
        raise Unsupported(f"the member '.{n.name}'", n.loc)

    def e_DimOf(self, n: A.DimOf, hint):
        base = self.value(n.base)
        if isinstance(base, Scalar) and base.bound is not None:
            if base.ituple1 and B.as_int(self.scalar(n.index)) == 0:
                return base  # `k(0)` of `with k in [8]`: its only element
            return self._offset_form(base, n)
        if B.as_int(self.scalar(n.index)) is None:  # `dims(c)`: valid Choreo, known at run time
            return self.host_dim_element(base, n)  # sema/host_code.py
        k = self.const_int(n.index, "a dimension index")
        if isinstance(base, ShapeValue):
            seq = base.dims
        elif isinstance(base, ITupleValue):
            seq = base.elems
        else:
            raise err(f"'(...)' selects an element of a shape or ituple, not of {_kind(base)}", n)
        if not 0 <= k < len(seq):
            raise err(f"index {k} is out of range for a rank-{len(seq)} value", n.index)
        return Scalar(seq[k])

    def _selected(self, base, indices: list[A.Expr]) -> tuple[ir.Expr, ...]:
        """`s[(2), (0)]`, `t {(2), (0)}`: the elements at these constant positions."""
        seq = base.dims if isinstance(base, ShapeValue) else base.elems
        out = []
        for i in indices:  # `(k)`: A.DimIndex
            i = getattr(i, "index", i)
            k = self.const_int(i, "a dimension index")
            if not 0 <= k < len(seq):
                raise err(f"index {k} is out of range for a rank-{len(seq)} value", i)
            out.append(seq[k])
        return tuple(out)

    def e_ITupleSelect(self, n: A.ITupleSelect, hint):
        base = self.value(n.base)
        if not isinstance(base, ITupleValue):
            raise err(f"'{{(...)}}' selects elements of an ituple, not of {_kind(base)}", n)
        return ITupleValue(self._selected(base, n.indices))

    def _offset_form(self, base: Scalar, n: A.DimOf) -> Scalar:
        """`k(-1)`: the last value of `k` within its bound (`k(-2)` the one before); the
        value keeps `k`'s bound, so it chunks as `k` does."""
        i = B.as_int(self.scalar(n.index))
        if i is None or i >= 0:
            raise Unsupported("the offset form of a bounded variable other than 'x(-n)'", n.loc)
        b = B.as_int(base.bound)
        if b is not None and b + i < 0:
            raise err(f"'({i})' is before the first value of a variable bounded by {b}", n.index)
        value = ir.Bin("+", B.convert(base.bound, base.dtype), B.const(i), base.dtype)
        return Scalar(value, bound=base.bound)

    def shape_of(self, v: Value, node) -> tuple[ir.Expr, ...]:
        if isinstance(v, Tensor):
            return v.param.shape
        if isinstance(v, BufferValue):
            return B.dims(v.buffer)
        if isinstance(v, ViewValue):
            return v.view.shape
        if isinstance(v, FragValue):
            if not v.frag.shape:
                raise ShapeNotYetKnown(f"using the shape of accumulator '{v.frag.name}' before "
                                       "any MMA gives it", node.loc)
            return tuple(B.const(d) for d in v.frag.shape)
        if isinstance(v, ShapeValue):
            return v.dims
        if isinstance(v, FutureValue) and v.dst is not None:
            return v.dst.shape
        raise err(f"{self.describe(node)} is {_kind(v)}; it has no shape", node)

    # ------------------------------------------------------------ views and elements
    def e_Index(self, n: A.Index, hint):
        chain = arrays.subscripts(n)
        if chain is not None:
            root = self.value(chain[0])
            if isinstance(root, BufferValue) and root.buffer.count:
                return self._buffer_slot(root.buffer, chain[1], n)
        base = self.value(n.base)
        if isinstance(base, BufferValue) and base.buffer.count:
            raise err(f"'{base.buffer.name}' is an array of buffers; index it with one value "
                      f"per bracket ('{base.buffer.name}[i][j]')", n)
        if isinstance(base, EventValue):
            return base  # event indexing is resolved by wait/trigger
        if isinstance(base, ShapeValue):  # `d.span[(2), (1), (0)]`: a shape of its dimensions
            return ShapeValue(self._selected(base, n.indices))
        if isinstance(base, (Tensor, BufferValue, ViewValue)) and n.indices and \
                all(isinstance(i, A.DimIndex) for i in n.indices):
            # `d[(1), (0)]`: the grammar's derivation from a name is its shape's, as `d.span[...]`
            return ShapeValue(self._selected(ShapeValue(self.shape_of(base, n)), n.indices))
        raise Unsupported("indexing with '[...]' here", n.loc)

    def _buffer_slot(self, b: ir.Buffer, subs: list[A.Expr], n: A.Index) -> ViewValue:
        """`s[i]`, `s[i][j]`: a buffer of an array (sema/arrays.py); fewer subscripts than
        dimensions give the first buffer of that sub-array."""
        dims = self.array_shape(b.name, b.count)
        if len(subs) > len(dims):
            raise err(f"'{arrays.shape_text(b.name, dims)}' is an array of buffers of "
                      f"{len(dims)} dimension(s), subscribed {len(subs)} times", n)
        idx = [self.index(x) for x in subs]
        for pos, (i, d, x) in enumerate(zip(idx, dims, subs)):
            k = B.as_int(i)
            if k is not None and not 0 <= k < d:
                where = arrays.shape_text(b.name, dims)
                if len(dims) == 1:
                    raise err(f"slot {k} is out of range for '{where}'", n)
                raise err(f"index {k} is out of range for dimension {pos + 1} of '{where}'", x)
        slot = arrays.linear(idx, dims)
        return ViewValue(V.whole(b.name, tuple(B.const(d) for d in b.shape), slot), b.dtype)

    def view_of(self, node: A.Expr) -> ViewValue:
        v = self.value(node)
        if isinstance(v, ViewValue):
            return v
        if isinstance(v, Tensor):
            return ViewValue(V.whole(v.param.name, v.param.shape), v.param.dtype)
        if isinstance(v, BufferValue):
            b = v.buffer
            if b.count:
                raise err(f"'{b.name}' is an array of {b.count} buffers; select one with "
                          f"'{b.name}[slot]'", node)
            return ViewValue(V.whole(b.name, B.dims(b)), b.dtype)
        if isinstance(v, FutureValue) and v.dst is not None:
            buf = self.kernel.buffer(v.dst.base) or self.kernel.run_buffer(v.dst.base)
            return ViewValue(v.dst, buf.dtype if buf else "f32")
        if isinstance(v, TilingValue):  # `x.subspan(e)` alone is its first tile
            t = v.tiling
            return ViewValue(V.at(t, [None] * len(t.tile)), v.dtype)
        raise err(f"{self.describe(node)} is {_kind(v)}, not data that can be viewed", node)

    def _args(self, args):
        out = []
        for a in args:
            if isinstance(a, A.Name) and a.id == "_":
                out.append(None)
                continue
            v = self.value(a)
            if isinstance(v, ITupleValue):
                out += list(v.elems)
            elif isinstance(v, ShapeValue):
                out += list(v.dims)
            elif isinstance(v, Scalar):
                out.append(self.index(a, v.expr))
            else:
                raise err(f"a view argument cannot be {_kind(v)}", a)
        return out

    def e_MethodCall(self, n: A.MethodCall, hint):
        m = n.method
        if m == "at":
            base = self.value(n.base)
            if isinstance(base, FragValue):
                return self._elem(base, n, hint)
            if isinstance(base, EventValue):
                return base
            if isinstance(base, TilingValue):
                return self._wrap(lambda: V.at(base.tiling, self._args(n.args)), base.dtype, n)
            view = self.view_of(n.base)
            return self._buf_elem(view, n)
        if m in ("subspan", "chunk"):
            if n.strides:
                raise Unsupported("'subspan' with strides", n.loc)
            view = self.view_of(n.base)
            return TilingValue(self._wrap(lambda: V.subspan(view.view, self._args(n.args)),
                                          view.dtype, n, raw=True), view.dtype)
        if m == "step":
            base = self.value(n.base)
            if not isinstance(base, TilingValue):
                raise err("'.step(...)' follows '.subspan(...)'", n)
            return TilingValue(self._wrap(lambda: V.step(base.tiling, self._args(n.args)),
                                          base.dtype, n, raw=True), base.dtype)
        if m == "sqz":
            view = self.view_of(n.base)
            return ViewValue(V.sqz(view.view), view.dtype)
        if m == "chunkat":
            view = self.view_of(n.base)
            return self._wrap(lambda: V.chunkat(view.view, self._chunk_args(n.args)), view.dtype, n)
        if m == "from":
            inner = n.base
            if not (isinstance(inner, A.MethodCall) and inner.method == "view"):
                raise err("'.from(...)' follows '.view(...)'", n)
            if inner.strides:
                raise Unsupported("'view' with element strides", inner.loc)
            view = self.view_of(inner.base)
            return self._wrap(lambda: V.window(view.view, self._args(inner.args), self._args(n.args)),
                              view.dtype, n)
        if m == "span_as":
            return self._span_as(n)
        raise Unsupported(f"the view operation '.{m}(...)'", n.loc)

    def _span_as(self, n: A.MethodCall):
        """Reshape: the element count must not change (sema/reshape.py builds the view)."""
        view = self.view_of(n.base)
        new = self._args(n.args)
        old_n, new_n = 1, 1
        for d in view.view.shape:
            old_n = None if old_n is None or B.as_int(d) is None else old_n * B.as_int(d)
        for d in new:
            new_n = None if new_n is None or d is None or B.as_int(d) is None else new_n * B.as_int(d)
        if old_n is not None and new_n is not None and old_n != new_n:
            raise err(f"'span_as' keeps the element count: {old_n} elements cannot take a shape "
                      f"of {new_n}", n)
        if old_n is None or new_n is None:
            raise Unsupported("'span_as' of data whose shape is only known at run time", n.loc)
        return self.reshaped(view, tuple(B.as_int(d) for d in new), n)

    def _wrap(self, fn, dtype, node, raw=False):
        try:
            result = fn()
        except V.ViewError as e:
            raise err(str(e), node) from None
        return result if raw else ViewValue(result, dtype)

    def _chunk_args(self, args):
        out = []
        for a in args:
            if isinstance(a, A.Name) and a.id == "_":
                out.append(None)
                continue
            v = self.value(a)
            if isinstance(v, BoundedTuple):  # `chunkat(p, index)`: each of index's integers
                for part in v.parts:
                    x = self.scope.lookup(part)
                    out.append((x.expr, x.bound))
                continue
            if isinstance(v, Scalar) and v.bound is None:
                v = Scalar(v.expr, bound=self._bound_of_expression(a))
            if not isinstance(v, Scalar):
                raise err("'chunkat' takes bounded variables (or '_')", a)
            out.append((v.expr, v.bound))
        return out

    def _bound_of_expression(self, a: A.Expr) -> ir.Expr:
        """`chunkat(_, k - 1)`: an index computed from one bounded variable chunks by that
        variable's bound (the previous chunk's position, `k - 1`, within the same tiling)."""
        bounds = {}
        for node in A.walk(a):
            x = self.scope.lookup(node.id) if isinstance(node, A.Name) else None
            if isinstance(x, Scalar) and x.bound is not None:
                bounds[node.id] = x.bound
        if len(bounds) != 1:
            # Valid Choreo; without one bounded variable the chunk count is not known here.
            raise Unsupported("'chunkat' of an index that is no bounded variable", a.loc)
        return next(iter(bounds.values()))

    def _elem(self, frag: FragValue, n: A.MethodCall, hint):
        f = frag.frag
        index = tuple(self.index(a) for a in n.args)
        if f.shape and len(index) != len(f.shape):
            raise err(f"'{f.name}' has {len(f.shape)} dimension(s); '.at' got {len(index)} index(es)", n)
        return Scalar(ir.Elem(f.name, index, f.dtype))

    def element_index(self, args) -> tuple[ir.Expr, ...]:
        """`.at(...)` indices; a named ituple (a loop over a shape) gives one per dimension."""
        out: list[ir.Expr] = []
        for a in args:
            v = self.scope.lookup(a.id) if isinstance(a, A.Name) else None
            if isinstance(v, ITupleValue):
                out += list(v.elems)
            else:
                out.append(self.index(a))
        return tuple(out)

    def _buf_elem(self, view: ViewValue, n: A.MethodCall):
        index = self.element_index(n.args)
        if len(index) != view.view.rank:
            raise err(f"this {view.view.rank}-D data takes {view.view.rank} indices, not {len(index)}", n)
        return Scalar(ir.BufElem(view.view, index, view.dtype, loc=n.loc))

