"""Host code of a `__co__` function: result buffers, `return`, and the outer parallel levels.

A `__co__` function is a host program. Its statements outside any parallel
region run on the host: a buffer declared there (`s32[lhs.span] output;`)
is a global tensor the host allocates before the first kernel that uses it
(`ir.Function.locals`), and `return output;` hands it to the caller
(`ir.Function.result`). Every kernel of the function sees the parameters and
these buffers as its global tensors.

The outer parallel statement of a kernel may name its levels or leave them
to inference. The GPU's hierarchy is grid > block > thread, so:
`parallel p by 6, q by 64` (levels unwritten) is a grid of 6 blocks of 64
threads; `parallel p by 256 : thread` at the top is one block of 256
threads (a grid of one); a single unlabelled level is the grid, as before.

Also here, as they are what host programs use around their kernels: the
implicit destinations of copies (`=> shared`), named shapes and ituples,
and thread regions nested in groups.
"""
from __future__ import annotations

from ..frontend import ast as A
from .. import ir
from ..ir import build as B
from . import cpu_region
from .exprs import err
from .limits import check_region_threads
from .values import ITupleValue, Scalar, ShapeValue, Tensor, Unsupported, ViewValue
from .views import static_shape

#: Levels that run inside one block, outermost first.
INNER_LEVELS = ("group-4", "group", "thread")
_INTS = ("s32", "u32", "s64", "u64")
#: The element types each atomic updates (those of CUDA's atomic functions; PTX has
#: red/atom forms for each: sub is an add of the negated value).
ATOMIC_TYPES = {"__atomic_add": _INTS + ("f32",), "__atomic_exch": _INTS + ("f32",),
                **{f"__atomic_{op}": _INTS for op in ("sub", "min", "max", "and", "or", "xor",
                                                        "cas")}}


def check_dtype(name: str, loc) -> None:
    """Element types the IR has no size for (the fp8 scale types f8_ue4m3, f8_ue8m0) are
    refused by name instead of failing later."""
    if name not in ir.DTYPE_BITS:
        raise Unsupported(f"the element type '{name}'", loc)


def nested_parallels(stmts) -> list:
    """The parallel statements inside `stmts` (not looking inside those)."""
    out = []
    for st in stmts:
        if isinstance(st, A.ParallelBy):
            out.append(st)
            continue
        for attr in ("body", "then", "orelse"):
            sub = getattr(st, attr, None)
            if isinstance(sub, A.Block):
                out += nested_parallels(sub.stmts)
        if isinstance(st, A.Block):
            out += nested_parallels(st.stmts)
    return out



def bind_row_major(scope, names, extents, bounds, flat: ir.Expr, total: int) -> None:
    """Binds each of a multi-dimensional level's `names` to its index in `flat`, the
    instance number of one flat level of `total` instances, in row-major order."""
    stride = total
    for name, e, bound in zip(names, extents, bounds):
        stride //= e
        index = B.binop("%", B.binop("/", flat, B.const(stride)), B.const(e))
        scope.bind(name, Scalar(index, bound=bound, kind="index"))

class HostBuilder:
    """Mixin of KernelBuilder: the statements of a function outside its kernels."""

    def host_buffer(self, s: A.BufferDecl) -> None:
        """`T[shape] name;` on the host: a global tensor the function allocates."""
        if s.storage not in (None, "global"):
            # The check pass reports this (a warning for `check`, an error when strict).
            raise Unsupported(f"a {s.storage} buffer outside any 'parallel' block", s.loc)
        if s.array_dims:
            raise Unsupported("an array of host buffers", s.loc)
        if s.type.dims is None:
            raise err(f"'{s.name}' needs a shape", s.type)
        check_dtype(s.type.elem.name, s.type.loc)
        init = None
        if s.init is not None:
            init = self.scalar(s.init, s.type.elem.name)
            if not isinstance(init, ir.Const):
                raise err("a buffer initialiser must be a constant", s.init)
        dims: list[ir.Expr] = []
        for d in s.type.dims:
            v = self.value(d)
            if isinstance(v, ShapeValue):
                dims += list(v.dims)
            elif isinstance(v, Scalar):
                dims.append(v.expr)
            else:
                raise err("a buffer dimension must be an integer or a shape", d)
        for x, node in zip(dims, s.type.dims * len(dims)):
            # A dimension computed from the parameters' dimensions and scalars (`f / 3`) is
            # evaluated when the call allocates the buffer (interp/runner.allocate).
            for name in sorted(ir.sym_names(x)):
                v = self.scope.lookup(name)
                if isinstance(v, Scalar) and v.kind not in ("dim", "arg", "const"):
                    # the call allocates its buffers at entry, before host code gives it a value
                    raise Unsupported(f"a host buffer whose dimension is the host variable "
                                      f"'{name}'", node.loc)
            n = B.as_int(x)
            if n is not None and n <= 0:
                raise err(f"the mdspan size \"{n}\" is invalid: dimensions must be positive", node)
        if self.scope.local(s.name) is not None:
            raise err(f"'{s.name}' is already declared in this scope", s)
        param = ir.Param(s.name, s.type.elem.name, tuple(dims), "global", loc=s.loc, init=init)
        self.locals.append(param)
        self.scope.bind(s.name, Tensor(param, loc=s.loc))

    def host_return(self, s: A.Return) -> None:
        """`return name;`: the function's result is one of its global tensors."""
        if not isinstance(s.value, A.Name):
            return self._scalar_result(s)
        v = self.scope.lookup(s.value.id)
        if isinstance(v, Scalar):
            return self._scalar_result(s)
        if not isinstance(v, Tensor):
            raise Unsupported("returning a value other than a global buffer", s.loc)
        if self.result is not None:
            raise Unsupported("a function with several return statements", s.loc)
        self.result = s.value.id

    def _scalar_result(self, s: A.Return) -> None:
        """`return 0xFF;`, `return n;` of a host scalar: the call returns the number (the
        value of the host variable `<function>__result`, ir.Function.result)."""
        v = self.value(s.value)
        if not isinstance(v, Scalar):
            raise Unsupported("returning a value other than a named buffer or a scalar", s.loc)
        if self.result is not None:
            raise Unsupported("a function with several return statements", s.loc)
        self.result = f"{self.func.name}__result"
        self.emit(ir.Let(self.result, v.expr, loc=s.loc))

    def device_region(self, s: A.ParallelBy, host: list[ir.Stmt]) -> None:
        """`parallel.async by 1 : device(gpu) { parallel ... : block {...} }` launches the
        kernels inside it; `parallel.async by 1 : device(cpu) { ... }` is a region the host
        runs: a kernel of one block and one thread marked `device cpu`, which the
        interpreter runs like any kernel and a GPU program runs on the host, after the
        launches before it, on the host's copies of its tensors (runtime/host_program.py).
        Every region and launch runs in program order (`.async` asks for no more), so a
        host `sync.global` has nothing left to wait for."""
        lvl = s.levels[0]
        bounds = self._bounds(lvl)
        if len(s.levels) != 1 or len(bounds) != 1 or B.as_int(bounds[0]) != 1:
            raise Unsupported("a ': device(...)' region of more than one instance", s.loc)
        if lvl.device_target == "gpu":
            for st in s.body.stmts:
                if not isinstance(st, A.ParallelBy):
                    raise Unsupported("host code inside a ': device(gpu)' region", st.loc)
                if any(lv.device_target for lv in st.levels):
                    raise Unsupported("a ': device(...)' region inside another", st.loc)
                self.launch(st, host)
            return
        if lvl.device_target != "cpu":
            raise Unsupported(f"a region on the device '{lvl.device_target}'", lvl.loc)
        one = A.ParallelLevel(var=lvl.var, elements=lvl.elements, bounds=lvl.bounds,
                              bracketed=lvl.bracketed, level="block", loc=lvl.loc)
        body = A.Block(stmts=cpu_region.as_loops(s.body.stmts), loc=s.body.loc)
        self.launch(A.ParallelBy(levels=[one], is_async=False, stream=None, attributes=[],
                                 body=body, loc=s.loc), host)
        kernel = self.kernels[-1]
        if any(isinstance(t, ir.Parallel) for t in ir.walk(kernel.body)):
            raise Unsupported("parallel levels inside a ': device(cpu)' region", s.loc)
        kernel.device = "cpu"

    def kernel_params(self) -> list[ir.Param]:
        """The global tensors a kernel sees: the parameters, then the host buffers so far."""
        return list(self.params) + list(self.locals)

    @staticmethod
    def split_levels(s: A.ParallelBy) -> tuple[A.ParallelLevel | None, list[A.ParallelLevel]]:
        """(the grid level or None for a grid of one, the levels inside the block)."""
        levels = list(s.levels)
        first = levels[0].level
        if first in INNER_LEVELS:
            return None, levels
        if first not in ("block", None):
            raise Unsupported(f"a kernel whose outer parallel level is ': {first}'", s.loc)
        inner = levels[1:]
        for lvl in inner:
            if lvl.level not in INNER_LEVELS + (None,):
                raise Unsupported(f"the parallel level ': {lvl.level}' inside a block", lvl.loc)
        return levels[0], inner

    # ------------------------------------------------------------ groups of threads
    def flattened_groups(self, s: A.ParallelBy, var: str, bound, extent: int,
                         threads: int) -> None:
        """`parallel g by N : group { ... parallel t by 32 {...} ... }`: the threads of the
        groups are one thread-level region of N * 32 threads; `g` is thread / 32 and the
        inner `t` thread % 32. The statements of a group outside the inner region run in
        each of its threads (copies stay collective, scalar code computes the same values)."""
        check_region_threads(extent * threads, f" ({extent} thread groups of {threads} threads)",
                             s.loc)
        flat = ir.Parallel(f"{var}__t", extent * threads, "thread", 1, [], loc=s.loc)
        t = ir.Sym(flat.var, "s32")
        outer = self.scope
        self.scope = outer.child()
        self.scope.bind(var, Scalar(B.binop("/", t, B.const(threads)), bound=bound,
                                    kind="index"))
        self.in_parallel, self.group_lanes = flat, (t, threads)
        try:
            flat.body = self.block(s.body.stmts)
        finally:
            self.in_parallel, self.group_lanes = None, None
            self.scope = outer
        self.emit(flat)

    def flattened_threads(self, s: A.ParallelBy, names: list[str], bounds: list) -> None:
        """`parallel {x, y} by [4, 32] : thread`: one region of 128 threads, x = t / 32,
        y = t % 32 (row-major: the last index varies fastest)."""
        extents = [B.as_int(b) for b in bounds]
        if any(e is None for e in extents):
            raise err("the number of threads must be a compile-time integer", s.levels[0])
        total = 1
        for e in extents:
            total *= e
        check_region_threads(total, "", s.loc)
        flat = ir.Parallel("__".join(names) + "__t", total, "thread", 1, [], loc=s.loc)
        t = ir.Sym(flat.var, "s32")
        outer = self.scope
        self.scope = outer.child()
        bind_row_major(self.scope, names, extents, bounds, t, total)
        self.in_parallel = flat
        try:
            flat.body = self.block(s.body.stmts)
        finally:
            self.in_parallel = None
            self.scope = outer
        self.emit(flat)

    def nested_threads(self, s: A.ParallelBy) -> None:
        """The inner region of flattened groups: its variable is the thread's lane."""
        t, threads = self.group_lanes
        lvl = s.levels[0]
        if len(s.levels) == 1 and lvl.level == "group" and threads > 32:
            return self._nested_groups(s, t, threads)
        if len(s.levels) != 1 or (lvl.level or "thread") != "thread":
            raise Unsupported("a nested parallel level other than threads in a group", s.loc)
        names = lvl.elements or ([lvl.var] if lvl.var else ["_p"])
        bounds = self._bounds(lvl)
        extent = B.as_int(bounds[0]) if len(bounds) == 1 else None
        if len(names) != 1 or extent is None or extent > threads:
            raise Unsupported(f"a nested thread region that is not one dimension of at most "
                              f"{threads} threads", lvl.loc)
        outer = self.scope
        self.scope = outer.child()
        lane = B.binop("%", t, B.const(threads))
        self.scope.bind(names[0], Scalar(lane, bound=bounds[0], kind="index"))
        try:
            body = self.block(s.body.stmts)
        finally:
            self.scope = outer
        if extent < threads:
            body = [ir.If(B.binop("<", lane, B.const(extent)), body, loc=s.loc)]
        for x in body:
            self.emit(x)

    def _nested_groups(self, s: A.ParallelBy, t: ir.Expr, threads: int) -> None:
        """`parallel q by K : group` inside a flattened `: group-4`: the group-4's threads
        are already one region, so `q` is the warp of the thread within its group-4
        ((t % 128) / 32), warps past K skip the body, and a thread region inside `q`
        takes its lane from t % 32 (the nested lanes are 32 wide while the body builds)."""
        lvl = s.levels[0]
        names = lvl.elements or ([lvl.var] if lvl.var else ["_p"])
        bounds = self._bounds(lvl)
        extent = B.as_int(bounds[0]) if len(bounds) == 1 else None
        if len(names) != 1 or extent is None or extent * 32 > threads:
            raise Unsupported(f"a nested group level that is not one dimension of at most "
                              f"{threads // 32} groups", lvl.loc)
        outer, lanes = self.scope, self.group_lanes
        self.scope = outer.child()
        warp = B.binop("/", B.binop("%", t, B.const(threads)), B.const(32))
        self.scope.bind(names[0], Scalar(warp, bound=bounds[0], kind="index"))
        self.group_lanes = (t, 32)
        try:
            body = self.block(s.body.stmts)
        finally:
            self.scope, self.group_lanes = outer, lanes
        if extent * 32 < threads:
            body = [ir.If(B.binop("<", warp, B.const(extent)), body, loc=s.loc)]
        for x in body:
            self.emit(x)

    # ------------------------------------------------------------ implicit destinations
    def copy_layout(self, s: A.DmaOp, src: ViewValue):
        """(transpose, pad, destination shape or None) of `dma.transp` / `dma.pad`."""
        shape = static_shape(src.view)
        if s.operation == "transp":
            perm = tuple(x if isinstance(x, int) else self.const_int(x, "a transpose index")
                         for x in s.transpose or [])
            if sorted(perm) != list(range(src.view.rank)):
                raise err(f"dma.transp needs a permutation of the {src.view.rank} dimensions",
                          s)
            return perm, None, tuple(shape[k] for k in perm) if shape else None
        if s.operation == "pad":
            cfg = s.pad
            low = tuple(self.const_int(x, "a padding") for x in cfg.low)
            high = tuple(self.const_int(x, "a padding") for x in cfg.high)
            mid = tuple(self.const_int(x, "a padding") for x in cfg.mid)
            if any(mid):
                raise Unsupported("interior padding (dma.pad with a non-zero middle)", s.loc)
            if not len(low) == len(high) == src.view.rank:
                raise err(f"dma.pad needs {src.view.rank} low and high paddings", s)
            value = self.scalar(cfg.value, src.dtype)
            if not isinstance(value, ir.Const):
                raise err("the padding value must be a constant", cfg.value)
            padded = tuple(n + a + b for n, a, b in zip(shape, low, high)) if shape else None
            return None, (low, high, value), padded
        return None, None, shape

    def check_layout_shape(self, s: A.DmaOp, shape, dst: ViewValue) -> None:
        want = static_shape(dst.view)
        if shape is None:
            raise Unsupported(f"dma.{s.operation} of a tile whose shape is only known at run "
                              "time", s.loc)
        if want is not None and tuple(want) != tuple(shape):
            raise err(f"dma.{s.operation} gives a [{', '.join(map(str, shape))}] tile, the "
                      f"destination is [{', '.join(map(str, want))}]", s.dst)

    def _implicit_dst(self, s: A.DmaOp, src: ViewValue, shape=None) -> ViewValue:
        """`=> shared` / `=> local`: a fresh buffer of the source tile's shape, named after
        the copy's future (its data is `future.data`)."""
        storage = s.dst.storage
        if storage not in ("shared", "local"):
            raise Unsupported(f"a copy into an implicit '{storage}' buffer", s.dst.loc)
        self._need_block(s, f"a {storage} buffer")
        shape = shape if shape is not None else static_shape(src.view)
        stem = s.future or "copy"
        n = sum(1 for b in self.kernel.buffers + self.kernel.run_buffers
                if b.name.startswith(f"{stem}__"))
        if shape is None and storage == "shared":  # sized at run time (ir.RunBuffer)
            buf = ir.RunBuffer(f"{stem}__{storage}{n or ''}", src.dtype, tuple(src.view.shape),
                               loc=s.dst.loc)
            self.kernel.run_buffers.append(buf)
            view = ir.View(buf.name, tuple(B.const(0) for _ in buf.shape), buf.shape,
                           tuple(True for _ in buf.shape))
            return ViewValue(view, buf.dtype, loc=s.dst.loc)
        if shape is None:
            raise Unsupported(f"an implicit {storage} buffer whose shape is only known at run "
                              "time", s.dst.loc)
        # Without a future nothing reads the data, but the copy still runs (and its reads of
        # the source are checked): the buffer is the copy's own.
        buf = ir.Buffer(f"{stem}__{storage}{n or ''}", storage, src.dtype, shape,
                        loc=s.dst.loc)
        self.kernel.buffers.append(buf)
        view = ir.View(buf.name, tuple(B.const(0) for _ in shape),
                       tuple(B.const(d) for d in shape), tuple(True for _ in shape))
        return ViewValue(view, buf.dtype, loc=s.dst.loc)

    # ------------------------------------------------------------ named shapes and tuples
    def s_MdSpanDecl(self, s: A.MdSpanDecl) -> None:
        """`sp : [a, b]` / `mdspan sp : ...`: a name for a shape (host or kernel)."""
        v = self.value(s.value)
        if isinstance(v, Scalar):
            v = ShapeValue((v.expr,))
        if not isinstance(v, ShapeValue):
            raise err(f"'{s.name}' must be given a shape", s.value)
        if s.rank is not None and len(v.dims) != s.rank:
            raise err(f"'{s.name}' is declared with rank {s.rank} but given {len(v.dims)} "
                      "dimension(s)", s.value)
        self.scope.bind(s.name, ShapeValue(v.dims, loc=s.loc))

    def s_ITupleDecl(self, s: A.ITupleDecl) -> None:
        """`ituple<3> t = {...}`: a name for a tuple of integers."""
        v = self.value(s.value)
        if isinstance(v, Scalar):
            v = ITupleValue((v.expr,))
        if not isinstance(v, ITupleValue):
            raise err(f"'{s.name}' must be given an ituple", s.value)
        if s.rank is not None and len(v.elems) != s.rank:
            raise err(f"'{s.name}' is declared with rank {s.rank} but given {len(v.elems)} "
                      "element(s)", s.value)
        self.scope.bind(s.name, ITupleValue(v.elems, loc=s.loc))

    # ------------------------------------------------------------ atomics
    def atomic_dtype(self, c: A.CallExpr) -> str:
        """The element type an `__atomic_*` call updates."""
        place = c.args[0] if c.args else None
        if not (isinstance(place, A.MethodCall) and place.method == "at"):
            raise err(f"'{c.func}' updates an element: 'buf.at(i)'", place or c)
        return self.view_of(place.base).dtype

    def atomic(self, c: A.CallExpr, result: str | None = None) -> None:
        """`__atomic_add(buf.at(i), v)`: buf[i] += v as one atomic update (likewise sub,
        min, max, and, or, xor, exch; `__atomic_cas(buf.at(i), compare, v)`). As a
        statement the old value the CUDA function returns is not used; else `result` names
        the variable that receives it."""
        fn, op = c.func, c.func[len("__atomic_"):]
        want = 3 if op == "cas" else 2
        if len(c.args) != want:
            raise err(f"'{fn}' takes {want} arguments", c)
        place = c.args[0]
        if not (isinstance(place, A.MethodCall) and place.method == "at"):
            raise err(f"'{fn}' updates an element: 'buf.at(i)'", place)
        view = self.view_of(place.base)
        index = self.element_index(place.args)
        if len(index) != view.view.rank:
            raise err(f"this {view.view.rank}-D data takes {view.view.rank} indices", place)
        if view.dtype not in ATOMIC_TYPES[fn]:
            raise Unsupported(f"'{fn}' on {view.dtype} elements", c.loc)
        # The update is typed by the element (`red.add.s32` takes no f32 operand): the
        # values are converted as C converts the arguments of `atomicAdd(int*, int)`.
        vals = [B.convert(self.scalar(a, view.dtype), view.dtype) for a in c.args[1:]]
        self.emit(ir.BufStore(view.view, index, vals[-1], loc=c.loc, atomic=op,
                              compare=vals[0] if op == "cas" else None, result=result))
