"""Fragments in sema: declarations and fills, MMA, mma.load / mma.store, `apply` and
element stores (a mixin of ops.OpBuilder).

Shape rules checked here (each error points at the operand):
- an MMA multiplies A [M, K] by B ([N, K] for `row.row`, [K, N] for
  `row.col`) into an accumulator [M, N]; the first MMA on an accumulator
  created by `mma.fill` fixes its shape;
- `mma.store` writes the accumulator into a view of its shape.
"""
from __future__ import annotations

from ..frontend import ast as A
from .. import ir
from ..ir import build as B
from .exprs import check_float_range, err
from .values import FragValue, FutureValue, Scalar, ShapeValue, Unsupported
from .views import static_shape


def fmt_shape(shape) -> str:
    """A shape as the messages write it: [128, 64]."""
    return "[" + ", ".join(str(d) for d in shape) + "]"


class FragOpBuilder:
    # ------------------------------------------------------------ fragments
    def _add_frag(self, name: str, dtype: str, shape: tuple[int, ...], node,
                  rename: bool = False) -> ir.Frag:
        """`rename`: a name declared again in another scope (`ma = mma.load ...` in a loop
        body and after it) is a new fragment, whose IR name gets a suffix."""
        ir_name = name
        if rename:
            n = 2
            while self.kernel.frag(ir_name) is not None:
                ir_name, n = f"{name}_{n}", n + 1
        if self.kernel.frag(ir_name) is not None:
            raise Unsupported(f"a second fragment named '{name}' in one kernel", node.loc)
        f = ir.Frag(ir_name, dtype, shape, loc=node.loc)
        self.kernel.frags.append(f)
        self.scope.bind(name, FragValue(f, loc=node.loc))
        return f

    def s_FragDecl(self, s: A.FragDecl) -> None:
        self._need_block(s, "a fragment")
        if s.array_dims or s.type is None:
            raise Unsupported("this form of fragment declaration", s.loc)
        shape = tuple(self.const_int(d, "a fragment dimension") for d in (s.type.dims or []))
        if not shape or any(d <= 0 for d in shape):
            raise err(f"fragment '{s.name}' needs a positive shape", s.type)
        init = None
        if s.init is not None:
            init = self.scalar(s.init, s.type.elem.name)
            if not isinstance(init, ir.Const):
                raise err("a fragment initialiser must be a constant", s.init)
        f = self._add_frag(s.name, s.type.elem.name, shape, s)
        self.emit(ir.FragDecl(f, init, loc=s.loc))

    def s_MmaFill(self, s: A.MmaFill) -> None:
        self._need_block(s, "an accumulator")
        if not isinstance(s.target, A.Name):
            raise Unsupported("this 'mma.fill' target", s.loc)
        name = s.target.id
        existing = self.scope.lookup(name)
        dtype = s.elem.name if s.elem else None
        if isinstance(existing, FragValue):
            frag = existing.frag
            if dtype and dtype != frag.dtype:
                raise err(f"'{name}' is a {frag.dtype} accumulator; it cannot be refilled as {dtype}",
                          s)
        else:
            if not s.declares:
                raise err(f"'{name}' is not an accumulator", s.target)
            # () until an MMA gives the shape, unless a first pass found it (sema/__init__.py)
            shape = self.preset_shapes.get((self.kernel.loc, name), ())
            frag = self._add_frag(name, dtype or "f32", shape, s)
            self.emit(ir.FragDecl(frag, None, loc=s.loc))
        value = self.scalar(s.value, frag.dtype)
        if not isinstance(value, ir.Const):
            raise err("'mma.fill' takes a constant", s.value)
        if ir.is_float(frag.dtype):
            check_float_range(float(value.value), frag.dtype, s.value,
                              f"the fill value {value.value:g}")
        value = ir.Const(float(value.value) if ir.is_float(frag.dtype) else int(value.value),
                         frag.dtype)
        self.emit(ir.MmaFill(frag.name, value, loc=s.loc))

    def _frag_of(self, node, what: str) -> ir.Frag:
        v = self.value(node)
        if not isinstance(v, FragValue):
            raise err(f"{what} must be a fragment; {self.describe(node)} is not one", node)
        return v.frag

    def s_MmaOp(self, s: A.MmaOp) -> None:
        if s.scale:
            raise Unsupported("scaled MMA", s.loc)
        if s.sparse:
            return self._sparse_mma(s)
        acc = self._frag_of(s.acc, "the accumulator")
        a_val = self.value(s.a)
        if isinstance(a_val, FragValue):
            a, a_shape, a_dtype = a_val.frag.name, a_val.frag.shape, a_val.frag.dtype
        else:
            av = self.view_of(s.a)
            a, a_shape, a_dtype = av.view, static_shape(av.view), av.dtype
            if self._storage(av.view) != "shared":
                raise err("an MMA reads its A operand from shared memory or registers", s.a)
        b_val = self.value(s.b)
        if isinstance(b_val, FragValue):
            return self._warp_mma(s, acc, a_val, b_val.frag)
        bv = self.view_of(s.b)
        if self._storage(bv.view) != "shared":
            raise err("an MMA reads its B operand from shared memory", s.b)
        b_shape = static_shape(bv.view)
        self._check_mma(s, acc, a_shape, b_shape, a_dtype, bv.dtype)
        if s.is_async and s.future is None:
            raise err("an asynchronous MMA needs a future: 'f = mma...'", s)
        fut = s.future if s.is_async else None
        order = tuple(s.issue_order) if s.issue_order else None
        if order is not None:
            self._check_k_schedule(s, a_shape, a_dtype, order)
        self.emit(ir.Mma(acc.name, a, bv.view, s.layout, fut, order, loc=s.loc))
        if fut:
            self.scope.bind(fut, FutureValue(fut, "mma", None, loc=s.loc))

    def _sparse_mma(self, s: A.MmaOp) -> None:
        """`mma.row.row.sp acc, a, b, meta`: A is the packed [M, K/2] shared tile of a 2:4
        sparse [M, K] matrix, meta the u8 [M, K/8] fragment (`mma.load`) saying where each
        kept value sits (ir.SparseMma); B is dense."""
        acc = self._frag_of(s.acc, "the accumulator")
        if s.metadata is None:  # (the form whose metadata comes from a `dma.copy.sp`)
            raise Unsupported("a sparse MMA without its metadata operand ('mma.row.row.sp acc, "
                              "a, b, meta' takes it as a fragment)", s.loc)
        meta = self._frag_of(s.metadata, "the metadata of a sparse MMA")
        if isinstance(self.value(s.a), FragValue) or isinstance(self.value(s.b), FragValue):
            raise Unsupported("a sparse MMA on register fragments (its packed A and B are "
                              "shared tiles; only the metadata is 'mma.load'ed)", s.loc)
        av, bv = self.view_of(s.a), self.view_of(s.b)
        for v, node, what in ((av, s.a, "A"), (bv, s.b, "B")):
            if self._storage(v.view) != "shared":
                raise err(f"a sparse MMA reads its {what} operand from shared memory", node)
        a_shape, b_shape = static_shape(av.view), static_shape(bv.view)
        if a_shape is None or len(a_shape) != 2:
            raise err("MMA operands must be 2-D tiles of known shape", s.a)
        m, k = a_shape[0], 2 * a_shape[1]
        if meta.dtype != "u8" or meta.shape != (m, k // 8) or k % 8:
            raise err(f"the metadata of a sparse MMA whose packed A is {fmt_shape(a_shape)} "
                      f"(K = {k}) is a u8{fmt_shape((m, k // 8))} fragment (4 bits per group "
                      f"of 4 along K); '{meta.name}' is {meta.dtype}{fmt_shape(meta.shape)}",
                      s.metadata)
        if s.is_async or s.issue_order:
            raise Unsupported("an asynchronous or scheduled sparse MMA", s.loc)
        self._check_mma(s, acc, (m, k), b_shape, av.dtype, bv.dtype)
        self.emit(ir.SparseMma(acc.name, av.view, bv.view, s.layout, loc=s.loc,
                               meta=meta.name))

    def _warp_mma(self, s: A.MmaOp, acc: ir.Frag, a_val, b: ir.Frag) -> None:
        """`mma.row.col c, a, b` with both operands loaded by `mma.load`: one warp's MMA (the
        mma.sync / WMMA form), in a `: group` level whose lanes hold the fragments, a
        `: group-4` level (its 4 warps share the rows), or in the block's own code (every warp
        of the block computes it)."""
        if not isinstance(a_val, FragValue):
            raise err("an MMA whose B operand is a register fragment takes its A operand as one "
                      f"too ('a = mma.load ...'); {self.describe(s.a)} is not one", s.a)
        par = self.in_parallel
        if par is not None and par.level not in ("group", "group-4"):
            raise Unsupported(f"an MMA on register fragments in a ': {par.level}' level (the "
                              "mma.sync form is a warp's or a warpgroup's: ': group', "
                              "': group-4', or the block's own code)", s.loc)
        if s.is_async or s.issue_order:
            raise Unsupported("an asynchronous or scheduled MMA on register fragments", s.loc)
        a = a_val.frag
        self._check_mma(s, acc, a.shape, b.shape, a.dtype, b.dtype)
        self.emit(ir.WarpMma(acc.name, a.name, b.name, s.layout, loc=s.loc))

    def _check_k_schedule(self, s, a_shape, a_dtype, order) -> None:
        """`[[schedule(k_tiles(...))]]` must list every K step of the MMA exactly once."""
        k_step = 32 // ir.dtype_bytes(a_dtype)  # 16 for f16/bf16, 32 for 8-bit types
        tiles = a_shape[1] // k_step if a_shape else None
        if tiles is not None and sorted(order) != list(range(tiles)):
            raise err(f"k_tiles({', '.join(map(str, order))}) must be a permutation of the "
                      f"{tiles} K tiles (0..{tiles - 1}) of this MMA", s)

    def _check_mma(self, s, acc, a_shape, b_shape, a_dtype, b_dtype) -> None:
        if s.layout not in ("row.row", "row.col"):
            raise Unsupported(f"'mma.{s.layout}'", s.loc)
        if a_shape is None or b_shape is None or len(a_shape) != 2 or len(b_shape) != 2:
            raise err("MMA operands must be 2-D tiles of known shape", s)
        m, k = a_shape
        n, kb = (b_shape[0], b_shape[1]) if s.layout == "row.row" else (b_shape[1], b_shape[0])
        if k != kb:
            want = f"[N, {k}]" if s.layout == "row.row" else f"[{k}, N]"
            raise err(f"MMA K mismatch: A is {fmt_shape(a_shape)} but B is {fmt_shape(b_shape)}; "
                      f"'mma.{s.layout}' needs B as {want}", s.b)
        if a_dtype != b_dtype:
            raise err(f"MMA operands differ in type: A is {a_dtype}, B is {b_dtype}", s.b)
        if not acc.shape:
            acc.shape = (m, n)
        elif acc.shape != (m, n):
            raise err(f"accumulator '{acc.name}' is {fmt_shape(acc.shape)}, but this MMA produces "
                      f"[{m}, {n}]", s.acc)

    def s_MmaLoad(self, s: A.MmaLoad) -> None:
        """`f = mma.load tile` declares register fragment f; `mma.load tile, f` refills f."""
        self._need_block(s, "a register fragment")
        if s.is_async:
            raise Unsupported("'mma.load.async'", s.loc)
        src = self.view_of(s.source)
        shape = static_shape(src.view)
        if shape is None or len(shape) != 2:
            raise err("'mma.load' takes a 2-D tile of known shape", s.source)
        # A `.swiz` modifier is not needed: the tile's layout is the one of the copies that
        # fill its buffer (passes/layouts.py), and the load follows it.
        if not isinstance(s.target, A.Name):
            raise Unsupported("this 'mma.load' target", s.loc)
        name = s.target.id
        if s.declares:
            if isinstance(self.scope.lookup(name), FragValue):
                raise err(f"'{name}' is already a fragment; 'mma.load tile, {name}' refills it",
                          s.target)
            frag = self._add_frag(name, src.dtype, shape, s, rename=True)
            self.emit(ir.FragDecl(frag, None, loc=s.loc))
        else:
            frag = self._frag_of(s.target, "the destination of 'mma.load'")
            if frag.shape != shape or frag.dtype != src.dtype:
                raise err(f"'mma.load' of a {src.dtype}{fmt_shape(shape)} tile into '{name}', a "
                          f"{frag.dtype}{fmt_shape(frag.shape)} fragment", s.target)
        self.emit(ir.MmaLoad(frag.name, src.view, loc=s.loc))

    def s_MmaStore(self, s: A.MmaStore) -> None:
        # `mma.store.async` has no future to wait for: nothing can observe that the store
        # is still in flight, so the store completing before the next statement (the plain
        # store) is one of the orders the program allows.
        acc = self._frag_of(s.source, "the stored value")
        dst = self.view_of(s.dst)
        if s.mask:
            self._check_mask(s, dst.view)
        shape = static_shape(dst.view)
        want = tuple(reversed(acc.shape)) if s.transposed and acc.shape else acc.shape
        if shape is not None and want and shape != want:
            what = "'mma.store.transp'" if s.transposed else "'mma.store'"
            raise err(f"{what} of a {fmt_shape(acc.shape)} accumulator into a {fmt_shape(shape)} "
                      "destination", s.dst)
        self.emit(ir.MmaStore(acc.name, dst.view, loc=s.loc, transposed=s.transposed))

    def _check_mask(self, s: A.MmaStore, view: ir.View) -> None:
        """A mask the plain store already applies (the tensor's edge), or a refusal."""
        from .store_mask import mask_is_the_edge

        param = self.kernel.param(view.base)
        if param is None:
            raise Unsupported("'mma.store.mask' into a shared tile", s.loc)
        guards = []
        for g in s.mask:
            v = self.value(g)
            if not isinstance(v, Scalar):
                raise err("a guard of 'mma.store.mask' must be an integer", g)
            guards.append(v.expr)
        why = mask_is_the_edge(view, param, guards, getattr(self, "let_defs", {}))
        if why is not None:
            raise Unsupported(f"'mma.store.mask' whose mask is not the tensor's edge ({why})",
                              s.loc)

    # ------------------------------------------------------------ apply and element stores
    def s_Apply(self, s: A.Apply) -> None:
        dom = self.value(s.domain)
        if not isinstance(dom, ShapeValue) or dom.of_frag is None:
            raise Unsupported("'apply' over something other than a fragment's span", s.domain.loc)
        frag = self.kernel.frag(dom.of_frag)
        if len(s.indices) != len(frag.shape):
            raise err(f"'{frag.name}' has {len(frag.shape)} dimension(s); 'apply' names "
                      f"{len(s.indices)} index(es)", s)
        outer = self.scope
        self.scope = outer.child()
        for i, d in zip(s.indices, frag.shape):
            self.scope.bind(i, Scalar(ir.Sym(i, "s32"), bound=B.const(d), kind="index"))
        body = self.block(s.body.stmts)
        self.scope = outer
        self.emit(ir.Apply(tuple(s.indices), frag.shape, frag.name, body, loc=s.loc,
                           exp2_fraction=s.exp2_split))

    def frag_compound(self, s: A.Assign, frag: ir.Frag) -> None:
        """`mc += v` (any compound operator, a scalar v): every element of the fragment, as
        `apply {i, j} in mc.span mc.at(i, j) = mc.at(i, j) + v` would write it."""
        if not frag.shape:
            raise Unsupported(f"'{s.op}' on the fragment '{frag.name}' before an MMA gives its "
                              "shape", s.loc)
        names = tuple(f"__e{i}" for i in range(len(frag.shape)))
        index = tuple(ir.Sym(n, "s32") for n in names)
        rhs = self.scalar(s.value, frag.dtype)
        value = B.assigned(B.binop(s.op[:-1], ir.Elem(frag.name, index, frag.dtype), rhs,
                                   frag.dtype), frag.dtype)
        body = [ir.ElemStore(frag.name, index, value, loc=s.loc)]
        self.emit(ir.Apply(names, frag.shape, frag.name, body, loc=s.loc))

    def element_store(self, s: A.Assign) -> None:
        t = s.target
        base = self.value(t.base)
        if isinstance(base, FragValue):
            f = base.frag
            index = tuple(self.index(a) for a in t.args)
            if len(index) != len(f.shape):
                raise err(f"'{f.name}' has {len(f.shape)} dimension(s); '.at' got {len(index)}", t)
            value = self._stored_value(s, ir.Elem(f.name, index, f.dtype), f.dtype)
            self.emit(ir.ElemStore(f.name, index, value, loc=s.loc))
            return
        view = self.view_of(t.base)
        index = self.element_index(t.args)
        if len(index) != view.view.rank:
            raise err(f"this {view.view.rank}-D data takes {view.view.rank} indices", t)
        value = self._stored_value(s, ir.BufElem(view.view, index, view.dtype), view.dtype)
        self.emit(ir.BufStore(view.view, index, value, loc=s.loc))

    def _stored_value(self, s: A.Assign, current: ir.Expr, dtype: str) -> ir.Expr:
        rhs = self.scalar(s.value, dtype)
        if s.op != "=":
            rhs = B.binop(s.op[:-1], current, rhs, dtype)
        return B.assigned(rhs, dtype)
