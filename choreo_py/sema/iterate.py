"""`with` and `foreach` over bounded variables, inside a kernel.

`with x in 128`, `with index = {x, y} in [6, 17]` declare bounded variables:
integers with an upper bound (`with k in [8]`, an ituple of one, is used as
the integer it holds). Outside a `foreach` that iterates it, a
bounded variable's value is 0 (the language defines it so); `#x` is its
bound. `foreach index` iterates them, left to right outer to inner
(`foreach iv, index` nests iv outside index's own x, y); a range
`foreach y(1:-1:2)` starts at the lower offset, ends at the bound plus the
upper offset, and steps by the stride; `foreach c = y(1:)` names the loop
variable `c` and leaves `y` as it was. The loops become `ir.For`s.
"""
from __future__ import annotations

from ..frontend import ast as A
from .. import ir
from ..ir import build as B
from ..diagnostics import WARNINGS, ChoreoError, warn
from .exprs import err
from .values import BoundedTuple, ITupleValue, Scalar, ShapeValue, Unsupported


WHERE = "<->"  # scope key prefix (no program name has it): the names a `where` bound together


def _bounded(bound: ir.Expr, loc, ituple1: bool = False) -> Scalar:
    return Scalar(B.const(0), bound=bound, kind="bounded", loc=loc, ituple1=ituple1)


class IterationBuilder:
    """Mixin of the statement builder (needs scope, value, index, block, emit)."""

    def s_With(self, s: A.With) -> None:
        self.lenient_body("with", self._with, s)

    def lenient_body(self, kind: str, build, s) -> None:
        """Builds a `with` / `foreach`; for `choreo check` (lenient), an error sema finds
        inside it is a warning and skips the block, as the tile IR skipped these blocks
        before it lowered them: the whole-language pass (choreo_py/check/) has checked their
        rules, programs the reference accepts at its parse stage break sema's stricter ones
        there, and `compile` (strict) reports the error. A lenient build that is run (`choreo
        run`: its leniency is the passes') reports the error itself."""
        try:
            build(s)
        except Unsupported:
            raise
        except ChoreoError as e:
            if not self.lenient or not (self.checking or self.exploring):
                raise
            if not any(w.loc == e.loc for w in WARNINGS):  # the whole-language pass's, or ours
                warn(f"{e.message} (an error for compile)", e.loc)
            raise Unsupported(f"this {kind} block as sema builds it ({e.message})", e.loc) from None

    def _with(self, s: A.With) -> None:
        outer = self.scope
        self.scope = outer.child()
        try:
            for b in s.bindings:
                self._with_binding(b)
            for w in s.where:
                self._where_bind(w)
            body = self.block(s.body.stmts, new_scope=False)
        finally:
            self.scope = outer
        for x in body:
            self.emit(x)

    def _with_binding(self, b: A.WithBinding) -> None:
        dom = self.value(b.domain)
        if isinstance(dom, Scalar) and not isinstance(b.domain, A.MdSpanLit):
            if b.elements:
                raise err("a matcher '{...}' needs an mdspan, but the with domain is an "
                          "integer", b.domain)
            self.scope.bind(b.name, _bounded(self.index(b.domain, dom.expr, "a with bound"),
                                             b.loc))
            return
        if isinstance(dom, Scalar):
            dims = (dom.expr,)
        elif isinstance(dom, ShapeValue):
            dims = dom.dims
        else:
            raise err("a with domain must be an integer or a shape", b.domain)
        if len(dims) == 1 and not b.elements:  # `with k in [8]`: used as the integer it holds
            self.scope.bind(b.name, _bounded(self.index(b.domain, dims[0], "a with bound"),
                                             b.loc, ituple1=True))
            return
        parts = list(b.elements) or [f"{b.name}__{i}" for i in range(len(dims))]
        if len(parts) != len(dims):
            raise err(f"{len(parts)} with variables for an index space of rank {len(dims)}",
                      b.domain)
        bounds = [self.index(b.domain, d, "a with bound") for d in dims]
        for name, bound in zip(parts, bounds):
            self.scope.bind(name, _bounded(bound, b.loc))
        if b.name:
            self.scope.bind(b.name, BoundedTuple(tuple(B.const(0) for _ in parts),
                                                 parts=tuple(parts), loc=b.loc))

    def _where_bind(self, w: A.WhereBind) -> None:
        """`where a <-> b`: the two bounded integers are one value (the language binds their
        value numbers), so `b` is `a`'s value and a `foreach` over either sets both."""
        a, b = self.scope.lookup(w.lhs), self.scope.lookup(w.rhs)
        for name, v in ((w.lhs, a), (w.rhs, b)):
            if not isinstance(v, Scalar) or v.kind != "bounded":
                raise err(f"'{name}' is not a bounded integer of this 'with'; 'where' binds "
                          "two of them", w)
        if B.as_int(a.bound) is None or B.as_int(a.bound) != B.as_int(b.bound):
            raise Unsupported("a 'where' binding of bounded integers whose bounds are not the "
                              "same compile-time integer", w.loc)
        names = self._where_names(w.lhs) | self._where_names(w.rhs)
        for name in names:
            self.scope.bind(name, a)
            self.scope.bind(WHERE + name, frozenset(names))

    def _where_names(self, name: str) -> frozenset:
        """`name` and every bounded integer a `where` made one value with it."""
        return self.scope.lookup(WHERE + name) or frozenset((name,))

    def foreach_ranges(self, s: A.Foreach) -> None:
        """`foreach index, y(1:)` over variables an enclosing `with` bound."""
        loops: list[tuple[str, ir.Expr, ir.Expr, ir.Expr, ir.Expr]] = []  # var, start, stop,
        tuples: dict[str, tuple[str, ...]] = {}                            # step, bound
        tuples1: set[str] = set()  # rank-1 bounded ituples (values.Scalar.ituple1)
        aliases: dict[str, frozenset] = {}  # loop variable: the names `where` bound to it
        for r in s.ranges:
            v = self.scope.lookup(r.bound)
            if isinstance(v, BoundedTuple):
                if r.sliced or r.var != r.bound:
                    raise err(f"'{r.bound}' is a bounded ituple: a range or a new name "
                              "applies to a bounded integer", r)
                for part in v.parts:
                    bound = self.scope.lookup(part).bound
                    loops.append((part, B.const(0), bound, B.const(1), bound))
                    if self._where_names(part) - {part}:
                        aliases[part] = self._where_names(part) - {part}
                tuples[r.bound] = v.parts
                continue
            if not isinstance(v, Scalar) or v.kind != "bounded":
                raise err(f"'{r.bound}' is not bound by a 'with'; 'foreach' iterates with-bound "
                          "variables", r)
            loops.append(self._range(r, v.bound))
            if v.ituple1 and r.var == r.bound:
                tuples1.add(r.var)
            bound_with = self._where_names(r.bound) - {r.bound}
            if bound_with and r.var == r.bound:
                aliases[r.var] = bound_with
        outer = self.scope
        self.scope = outer.child()
        try:
            for var, _, _, _, bound in loops:
                self.scope.bind(var, Scalar(ir.Sym(var, "s32"), bound=bound, kind="index",
                                            ituple1=var in tuples1))
                for other in aliases.get(var, ()):
                    if any(other == v for v, *_ in loops):
                        raise Unsupported(f"a 'foreach' over '{var}' and '{other}', which a "
                                          "'where' made one value", s.loc)
                    self.scope.bind(other, self.scope.lookup(var))
            for name, parts in tuples.items():
                self.scope.bind(name, BoundedTuple(tuple(ir.Sym(p, "s32") for p in parts),
                                                   parts=parts))
            body = self.block(s.body.stmts)
        finally:
            self.scope = outer
        for var, start, stop, step, _ in reversed(loops):
            body = [ir.For(var, start, stop, body, step=step, loc=s.loc)]
        for x in body:
            self.emit(x)

    def _range(self, r: A.LoopRange, bound: ir.Expr):
        """(var, start, stop, step, bound) of `y(lower:upper:stride)`: offsets from 0 and
        from the bound."""
        lower = self.index(r.lower, what="a loop offset") if r.lower is not None else B.const(0)
        stop = bound
        if r.upper is not None:
            stop = B.binop("+", bound, self.index(r.upper, what="a loop offset"), "s32")
        step = B.const(1)
        if r.step is not None:
            step = self.index(r.step, what="a loop stride")
            if B.as_int(step) is None or B.as_int(step) <= 0:
                raise err("a loop stride must be a positive compile-time integer", r.step)
        return (r.var, lower, stop, step, bound)
