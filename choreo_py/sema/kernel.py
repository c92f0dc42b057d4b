"""Statements: from a `__co__` function's AST to IR functions and kernels.

One `parallel ... : block` at the top of a function body becomes a kernel;
inside it, `parallel p by N : group-4` becomes `ir.Parallel`,
`inthreads.async (cond)` becomes an `ir.Role` whose members are found by
evaluating `cond` for every instance. The statement forms for data
movement, events and fragments live in `ops.py`.
"""
from __future__ import annotations

import dataclasses
import math

from ..frontend import ast as A
from ..frontend import bindings
from .. import ir
from ..ir import build as B
from ..ir.printer import expr as print_expr
from . import limits

MAX_GROUP_INSTANCES = 1 << 18
from .exprs import ExprBuilder, err
from .host import ATOMIC_TYPES, HostBuilder, check_dtype, nested_parallels
from .host_code import HostCodeBuilder
from .host_copies import HostCopyBuilder
from . import host_regions
from .block_accs import BlockAccBuilder
from .param_dims import dim_name, open_dims, unwritten_dims
from .iterate import IterationBuilder
from .levels import LevelBuilder, nest_levels
from .role_forms import RoleFormBuilder
from .asm import AsmBuilder
from .prints import PrintBuilder
from .reshape import ReshapeBuilder
from .device_funcs import DeviceFuncBuilder
from .co_calls import Callees, CoCallBuilder
from .ops import OpBuilder
from .rotations import RotationBuilder
from . import role_futures
from .values import (BufferValue, EventValue, FragValue, FutureValue, ITupleValue, Opaque,
                     Scalar, Scope, ShapeValue, Tensor, TilingValue, Unsupported, ViewValue,
                     declared_names, kind_of, seen_by_assignment)
from ..construct_names import describe
from ..diagnostics import did_you_mean

LEVEL_THREADS = {"group-4": 128, "group": 32, "thread": 1}
MAX_DIM = 2**31 - 1
#: Scalar parameters a kernel can receive as arguments: 32-bit words, like its dimensions.
SCALAR_ARG_TYPES = ("s32", "u32", "bool", "f32", "f16", "bf16")  # floats: their f32 bits


class KernelBuilder(ExprBuilder, BlockAccBuilder, OpBuilder, RotationBuilder, HostBuilder,
                    HostCodeBuilder, HostCopyBuilder, IterationBuilder, LevelBuilder, PrintBuilder,
                    ReshapeBuilder, AsmBuilder, DeviceFuncBuilder, RoleFormBuilder, CoCallBuilder):
    """Builds IR for one function.

    `lenient` (for `choreo check`): a statement the IR cannot express yet is
    recorded in `skipped` and analysis goes on with the next one, so that
    errors later in the function are still found; names the skipped
    statement declares become `Opaque`, and a statement that uses them is
    skipped in turn (never reported as an error). Without `lenient`, the
    first unsupported construct stops the build. `callees`: the IR of the functions
    it calls (sema/co_calls.py). `exploring`: a build whose IR is only looked at (the
    accumulator shapes, `check --lowerable`'s list), lenient as `choreo check` is.
    """

    def __init__(self, func: A.FunctionDef, lenient: bool = False,
                 preset_shapes: dict | None = None, dims: dict | None = None,
                 checking: bool = False, callees: Callees | None = None,
                 exploring: bool = False) -> None:
        self.func = func
        self.callees = callees
        self.exploring = exploring
        self.checking = checking  # for `choreo check` (sema.check_program)
        self.dims = dims or {}  # dimension names fixed for this build (host/specialize.py)
        self.lenient = lenient
        # (kernel location, accumulator) -> shape, for accumulators used before their MMA
        self.preset_shapes = preset_shapes or {}
        self.skipped: list[Unsupported] = []
        self.array_dims: dict[str, tuple[int, ...]] = {}  # arrays of 2+ dimensions (sema/arrays.py)
        self.scope = Scope()
        self.kernel: ir.Kernel | None = None
        self.params: list[ir.Param] = []
        self.locals: list[ir.Param] = []  # host buffers (sema/host.py)
        self.result: str | None = None
        self.kernels: list[ir.Kernel] = []
        self.out: list[ir.Stmt] = []  # where statements are emitted
        self.in_parallel: ir.Parallel | None = None
        self.group_lanes: tuple[ir.Expr, int] | None = None  # sema/host.py: flattened groups
        self.role: ir.Role | None = None
        self.elected: set[int] = set()  # ids of copies one elected thread issues (role_forms)
        self.block_accs: dict[str, ir.Role | None] = {}  # the block's accumulators -> issuer
        self.entry_asserts: list[ir.Assert] = []  # hoisted to the function's entry
        self.aliases: list[ir.Alias] = []  # host-side span_as (sema/reshape.py)
        # Host code (sema/host_code.py): whether statements are built as the host's, how
        # deep in host control flow, and the host's scope around the kernel being built.
        self.on_host = True
        self.host_depth = 0
        self.host_scope: Scope | None = None
        self.written = bindings.written_names(func.body)  # names some statement changes

    # ------------------------------------------------------------ function
    def build(self) -> ir.Function:
        for p in self.func.params:
            self._guarded(self.param, p, [p.name] if p.name else [])
        host: list[ir.Stmt] = []
        self.out = host
        for s in host_regions.gather(self.func.body.stmts, self.is_co_call):
            self._guarded(self.host_statement, s, declared_names(s))
        self._guarded(self.check_host_body, host, [])
        return ir.Function(self.func.name, self.params, self.kernels, self.entry_asserts + host, loc=self.func.loc,
                           locals=self.locals, result=self.result,
                           arg_names=self.arg_names(), missing_return=self._missing_return())

    def _missing_return(self) -> str | None:
        """The declared return type of a function that returns nothing (a warning of
        check/context.py): its call gives a value that refuses every use."""
        return A.declared_result(self.func) if self.result is None else None

    def _guarded(self, fn, node, names: list[str]) -> None:
        """Runs one step; in lenient mode an unsupported construct is noted and skipped."""
        try:
            with self.increments_in(node):
                fn(node)
        except Unsupported as u:
            if not self.lenient:
                raise
            self.skipped.append(u)
            for name in names:
                self.scope.bind(name, Opaque(construct=u.construct, loc=node.loc))

    def param(self, p: A.Param) -> None:
        t = p.type
        if p.name is None:
            return
        if isinstance(t, A.TypeRef):
            if p.name in self.dims:
                self.scope.bind(p.name, Scalar(ir.Const(self.dims[p.name], t.name), kind="const"))
                return
            if p.name in self._shape_dims():
                self.scope.bind(p.name, Scalar(ir.Sym(p.name, t.name), kind="dim"))
            elif t.name in SCALAR_ARG_TYPES:
                # A kernel that reads it receives it as an argument (ir.Kernel.scalars).
                self.scope.bind(p.name, Scalar(ir.Sym(p.name, t.name), kind="arg", loc=p.loc))
            else:
                self.scope.bind(p.name, Opaque(construct=f"a scalar parameter of type {t.name} "
                                               "that is no shape dimension", loc=p.loc))
            return
        if t.dims is None and (t.rank is None or self.checking):
            # `choreo check` analyses the function without it, as before it was lowered: the
            # reference's parse-stage programs use such shapes in ways sema's rules refuse
            raise Unsupported("a parameter without a written shape or rank", p.loc)
        shape = []
        for d in open_dims(p.name, t.dims) if t.dims is not None else \
                unwritten_dims(p.name, t.rank, p.loc):
            if isinstance(d, A.Name) and self.scope.lookup(d.id) is None:
                if d.id in self.dims:
                    self.scope.bind(d.id, Scalar(ir.Const(self.dims[d.id], "s32"), kind="const"))
                else:
                    self.scope.bind(d.id, Scalar(ir.Sym(d.id, "s32"), kind="dim"))
            if isinstance(d, A.DimWildcard):
                raise Unsupported(f"the open dimension '{d.kind}'", d.loc)
            v = self.value(d)
            if not isinstance(v, Scalar):
                raise Unsupported("a parameter shape written as a shape value", d.loc)
            n = B.as_int(v.expr)
            if n is not None and n > MAX_DIM:  # indices are 32-bit arithmetic in kernels
                raise err(f"the dimension {n} is too large: at most {MAX_DIM} elements", d)
            shape.append(v.expr)
        check_dtype(t.elem.name, t.loc)
        param = ir.Param(p.name, t.elem.name, tuple(shape), p.storage or "global", loc=p.loc)
        self.params.append(param)
        self.scope.bind(p.name, Tensor(param))

    def _shape_dims(self) -> set[str]:
        """Names written as dimensions of the function's mdspan parameters."""
        return {d.id for p in self.func.params if isinstance(p.type, A.MdSpanType)
                for d in (p.type.dims or ()) if isinstance(d, A.Name)} | {
                dim_name(p.name, k) for p in self.func.params if isinstance(p.type, A.MdSpanType)
                and p.type.dims is None and p.type.rank for k in range(p.type.rank)} | {
                d.id for p in self.func.params if isinstance(p.type, A.MdSpanType)
                and p.type.dims for d in open_dims(p.name, p.type.dims) if isinstance(d, A.Name)}

    def _of_sizes(self, e: ir.Expr) -> bool:
        """Whether `e` depends on the function's sizes (its dimensions) and nothing else."""
        return all(getattr(self.scope.lookup(n), "kind", None) == "dim" for n in ir.sym_names(e))

    def launch(self, s: A.ParallelBy, host: list[ir.Stmt], host_region: bool = False) -> None:
        # `parallel.async` launches on the stream like any kernel (launches are in order).
        if any(lv.device_target for lv in s.levels):
            return self.device_region(s, host)  # sema/host.py
        lvl, inner = self.split_levels(s)
        if lvl is None:  # `parallel p by N : thread` at the top: a grid of one block
            lvl = A.ParallelLevel(var=None, elements=[], bounds=[A.IntLit(value=1, suffix="", text="1", loc=s.loc)],
                                  bracketed=False, level="block", loc=s.loc)
        bounds = self._bounds(lvl)
        names = lvl.elements or ([lvl.var] if lvl.var else [])
        if not names:  # `parallel by N`: the variables have no names in the source
            names = [f"_b{i}" for i in range(len(bounds))]
        if len(names) != len(bounds):
            raise err(f"parallel variables and bounds differ in number ({len(names)} vs. "
                      f"{len(bounds)})", lvl)
        if len(bounds) > 3:
            raise err("a grid has at most 3 dimensions", lvl)
        name = f"{self.func.name}_k{len(self.kernels)}" if self.kernels else self.func.name
        self.kernel = ir.Kernel(name, self.kernel_params(), [], loc=s.loc)
        self.kernel.device = "cpu" if host_region else None  # (a region the host runs)
        self.kernel.launch_bounds = self._launch_bounds(s.attributes)
        self.kernel.cooperative = lvl.cooperative  # its `sync.barrier : block` spans the grid
        self.kernel.aliases = list(self.aliases)
        outer = self.scope
        self.scope = outer.child()
        self.on_host, self.host_scope = False, outer
        try:
            for b in bounds:  # a grid of a host value's size is launched with that value
                self.note_host_reads(Scalar(b))
            self._kernel_body(s, names, bounds, inner, host_region)
        finally:
            self.scope, self.on_host, self.host_scope = outer, True, None
        role_futures.run(self.kernel)
        self.kernels.append(self.kernel)
        host.append(ir.Launch(self.kernel.name, loc=s.loc))

    def arg_names(self) -> list[str]:
        return [p.name for p in self.func.params if p.name]

    def _kernel_body(self, s: A.ParallelBy, names, bounds, inner, host_region=False) -> None:
        for var, bound in zip(names, bounds):
            self.kernel.grid.append(ir.GridDim(var, bound))
            self.scope.bind(var, Scalar(ir.Sym(var, "s32"), bound=bound, kind="index"))
        copies = self.copy_host_vars(s.body.stmts, host_region)  # sema/host_copies.py
        if inner:  # `parallel p by 6, q by 64`: the later levels nest inside the block
            body = A.Block(stmts=s.body.stmts, loc=s.body.loc)
            nested = A.ParallelBy(levels=inner[:1], is_async=False, stream=None, attributes=[],
                                  body=body, loc=inner[0].loc)
            for level in reversed(inner[1:]):
                nested = A.ParallelBy(levels=[level], is_async=False, stream=None, attributes=[],
                                      body=A.Block(stmts=[nested], loc=s.body.loc), loc=level.loc)
            self.kernel.body = copies + self.block([nested], new_scope=False)
        else:
            self.kernel.body = copies + self.block(s.body.stmts, new_scope=False)

    def _bounds(self, lvl: A.ParallelLevel) -> list[ir.Expr]:
        out = []
        for b in lvl.bounds:
            v = self.value(b)
            if isinstance(v, ShapeValue):
                out += v.dims
            elif isinstance(v, Scalar):
                out.append(self.index(b, v.expr, "a parallel bound"))
            else:
                raise err("a parallel bound must be an integer or a shape", b)
        for b, node in zip(out, lvl.bounds * len(out)):
            n = B.as_int(b)
            if n is not None and n <= 0:
                raise err(f"a parallel bound must be positive, not {n}", node)
        return out

    def _launch_bounds(self, attrs: list[A.Attribute]):
        for a in attrs:
            if a.name == "launch_bounds":
                vals = []
                for x in a.args:
                    vals.append(None if isinstance(x, A.Name) and x.id == "_"
                                else self.const_int(x, "a launch bound"))
                limits.check_launch_bounds(tuple(vals), tuple(x.loc for x in a.args))
                return tuple(vals)
        return None

    # ------------------------------------------------------------ blocks
    def block(self, stmts: list[A.Stmt], new_scope: bool = True) -> list[ir.Stmt]:
        saved_out, saved_scope = self.out, self.scope
        self.out = []
        if new_scope:
            self.scope = self.scope.child()
        if self.on_host:  # host DMA, waits, MMAs: regions of the host (sema/host_regions.py)
            stmts = host_regions.gather(stmts, self.is_co_call)
        plan = self.scale_plan(stmts)  # sema/mma_scale.py: the block's `mma.scale`s
        try:
            for i, s in enumerate(stmts):
                if plan:
                    self.open_scale_segments(plan, stmts, i)
                self.stmt(s)
            return self.out
        finally:
            if plan:
                self.close_scale_segments(plan, stmts)
            self.out, self.scope = saved_out, saved_scope

    def emit(self, s: ir.Stmt) -> None:
        self.out.append(s)

    def stmt(self, s: A.Stmt) -> None:
        if self.on_host:  # inside host control flow (sema/host_code.py)
            return self._guarded(self.host_statement, s, declared_names(s))
        method = getattr(self, "s_" + type(s).__name__, None)
        if method is None:
            method = self._unknown_stmt
        self._guarded(method, s, declared_names(s))

    def _unknown_stmt(self, s: A.Stmt) -> None:
        raise Unsupported(f"{describe(s)} in a kernel", s.loc)

    def s_Block(self, s: A.Block) -> None:
        for x in self.block(s.stmts):
            self.emit(x)

    # ------------------------------------------------------------ scalars
    def _check_decl(self, s: A.ScalarDecl) -> None:
        if s.init is None and s.type is None:
            raise err(f"unable to deduce the type of '{s.name}': give it a type or a value", s)
        if s.mutable and isinstance(s.init, (A.ITupleLit, A.MdSpanLit)):
            kind = "an ituple" if isinstance(s.init, A.ITupleLit) else "an mdspan"
            raise err(f"'{s.name}' is {kind} and cannot be declared 'mutable'", s)

    def s_ScalarDecl(self, s: A.ScalarDecl) -> None:
        self._check_decl(s)
        if s.init is None:  # `s32 r;`: zero (sema/increments.py)
            return self.zero_decl(s)
        dtype = s.type.name if s.type else None
        if isinstance(s.init, A.CallExpr) and s.init.func in ATOMIC_TYPES:
            return self._atomic_decl(s, dtype)
        if _is_increment(s.init):
            return self._incremented(s.name, s.init, s.loc, dtype, s.mutable)
        v = self.scalar(s.init, dtype)
        dtype = dtype or v.dtype
        if dtype in ("void", "auto"):
            dtype = v.dtype
        if dtype != v.dtype and isinstance(v, ir.Const):
            v = self._const_as(v, dtype, s)
        v = B.assigned(v, dtype)
        if self._variable(s):
            self.emit(ir.Var(s.name, dtype, v, loc=s.loc))
            self.scope.bind(s.name, Scalar(ir.Sym(s.name, dtype), mutable=True, kind="var", loc=s.loc))
        else:
            self._let(s.name, v, s.loc)

    def _variable(self, s: A.ScalarDecl) -> bool:
        """A declaration that needs a variable: declared one (frontend/bindings.py) and
        changed by some statement; one that nothing changes is its initial value (a let,
        folded when constant), the same value either way."""
        return s.mutable or (bindings.decl_mutable(s) and s.name in self.written)

    def _atomic_decl(self, s: A.ScalarDecl, dtype) -> None:
        """`mutable s32 old = __atomic_add(buf.at(i), v);`: the element's value before the
        update, in a variable of the element's type."""
        if not s.mutable:
            raise Unsupported("an atomic's old value in an immutable declaration", s.loc)
        elem = self.atomic_dtype(s.init)
        if dtype not in (None, "auto", elem):
            raise Unsupported(f"an atomic's old {elem} value in a {dtype} variable", s.loc)
        self.emit(ir.Var(s.name, elem, ir.Const(0, elem), loc=s.loc))
        self.scope.bind(s.name, Scalar(ir.Sym(s.name, elem), mutable=True, kind="var", loc=s.loc))
        self.atomic(s.init, result=s.name)

    @staticmethod
    def _const_as(v: ir.Const, dtype: str, s: A.ScalarDecl) -> ir.Const:
        """A constant initialiser in the declared type; C leaves an infinite or NaN value
        in an integer undefined, so that is an error at the initialiser."""
        if ir.is_float(dtype):
            return ir.Const(float(v.value), dtype)
        if not math.isfinite(v.value):
            raise err(f"'{s.name}' is {dtype}: the value {v.value} (infinite or NaN) has no "
                      "integer value", s.init)
        return ir.Const(int(v.value), dtype)

    def _let(self, name: str, value: ir.Expr, loc) -> None:
        if isinstance(value, ir.Const):
            self.scope.bind(name, Scalar(value, kind="const", loc=loc))
            return
        self.emit(ir.Let(name, value, loc=loc))
        self.scope.bind(name, Scalar(ir.Sym(name, value.dtype), kind="let", loc=loc))
        defs = self.__dict__.setdefault("let_defs", {})  # for proofs over values (store_mask)
        defs[name] = value if name not in defs else None

    def s_Assign(self, s: A.Assign) -> None:
        t = s.target
        if isinstance(t, A.Name):
            return self._assign_name(s, t.id)
        if isinstance(t, A.MethodCall) and t.method == "at":
            return self.element_store(s)
        raise Unsupported("this assignment target", t.loc)

    def _assign_name(self, s: A.Assign, name: str) -> None:
        self.check_not_host_var(name, s.loc)
        old = self.scope.lookup(name)
        if isinstance(old, Scalar) and old.mutable:
            value = self._compound(s, old.expr)  # (a kernel's copy of a host variable: its own name)
            self.emit(ir.Assign(getattr(old.expr, "name", name), value, loc=s.loc))
            return
        if s.op != "=" and isinstance(old, FragValue):  # `mc += bias;`: element-wise
            return self.frag_compound(s, old.frag)
        if isinstance(old, Opaque):  # its declaration was skipped: this is as unsupported
            raise Unsupported(old.construct, s.loc)
        decision = bindings.assignment(name, s.op, self.seen(name))
        if decision.action == bindings.REFUSE and not self.checking:
            raise err(decision.message, s.target)
        # (`choreo check`: its rule checks, choreo_py/check/, report it; the analysis goes
        # on with the name bound to the new value)
        if s.op != "=":
            if old is None:
                raise err(f"'{name}' is not declared{did_you_mean(name, self.scope.visible())}",
                          s.target)
            if not isinstance(old, Scalar):
                raise err(f"'{name}' is {kind_of(old)}; '{s.op}' needs a 'mutable' variable",
                          s.target)
            return self._let(name, self._compound(s, old.expr), s.loc)
        if _is_increment(s.value):
            return self._incremented(name, s.value, s.loc, None, False)
        v = self.value(s.value)
        if isinstance(v, Scalar):
            self._let(name, v.expr, s.loc)
        elif isinstance(v, ViewValue):
            self.emit(ir.ViewDef(name, v.view, loc=s.loc))
            self.scope.bind(name, ViewValue(v.view, v.dtype, loc=s.loc))
        elif isinstance(v, (TilingValue, ShapeValue, ITupleValue, Tensor, BufferValue, EventValue)):
            v.loc = s.loc
            self.scope.bind(name, v)
        elif isinstance(v, FutureValue):  # another name of the same future (`select(1, a, b)`)
            self.scope.bind(name, dataclasses.replace(v, loc=s.loc))
        else:
            raise Unsupported(f"naming {describe(v)}", s.loc)

    def seen(self, name: str) -> bindings.Seen | None:
        return seen_by_assignment(self.scope, name, self.dims)

    def _compound(self, s: A.Assign, current: ir.Expr) -> ir.Expr:
        rhs = self.scalar(s.value, current.dtype)
        if s.op == "=":
            return B.assigned(rhs, current.dtype)
        return B.binop(s.op[:-1], current, rhs, current.dtype)

    def s_ExprStmt(self, s: A.ExprStmt) -> None:
        e = s.expr
        if isinstance(e, A.Unary) and e.op in ("post++", "post--", "++", "--"):
            self.increment(e)
            return
        if isinstance(e, A.Call):
            return self.device_call(e)
        if isinstance(e, A.CallExpr) and e.func in ("println", "print"):
            return self.print_stmt(e)
        if isinstance(e, A.CallExpr):
            return self.builtin_stmt(e)
        raise Unsupported("this expression statement", s.loc)

    def _incremented(self, name: str, e: A.Unary, loc, dtype, mutable: bool) -> None:
        """`old = value++;` / `current = ++value;` (the whole value of a declaration): the
        variable's value after (prefix) or before (postfix) the increment, then the rest."""
        v = self.scope.lookup(e.operand.id)
        if not isinstance(v, Scalar) or not v.mutable:
            raise err(f"'{e.operand.id}' is not mutable", e.operand)
        if e.op in ("++", "--"):
            self.increment(e)
        value = B.assigned(v.expr, dtype) if dtype not in (None, "auto", "void") else v.expr
        if mutable:
            self.emit(ir.Var(name, value.dtype, value, loc=loc))
            self.scope.bind(name, Scalar(ir.Sym(name, value.dtype), mutable=True, kind="var",
                                         loc=loc))
        else:  # a Let of a mutable variable's value is a copy (the lowering gives it a register)
            self.emit(ir.Let(name, value, loc=loc))
            self.scope.bind(name, Scalar(ir.Sym(name, value.dtype), kind="let", loc=loc))
        if e.op.startswith("post"):
            self.increment(e)

    def increment(self, e: A.Unary) -> None:
        if not isinstance(e.operand, A.Name):
            raise err(f"'{e.op.replace('post', '')}' needs a mutable variable", e)
        self.check_not_host_var(e.operand.id, e.loc)
        v = self.scope.lookup(e.operand.id)
        if not isinstance(v, Scalar) or not v.mutable:
            raise err(f"'{e.operand.id}' is not mutable", e.operand)
        op = "+" if "++" in e.op else "-"
        self.emit(ir.Assign(getattr(v.expr, "name", e.operand.id),
                            B.binop(op, v.expr, B.const(1), v.dtype), loc=e.loc))

    # ------------------------------------------------------------ control flow
    def s_If(self, s: A.If) -> None:
        cond = B.convert(self.scalar(s.cond), "bool")  # C: a number is compared with zero
        then = self.block(s.then.stmts)
        orelse = self.block(s.orelse.stmts) if s.orelse else []
        self.emit(ir.If(cond, then, orelse, loc=s.loc))

    def s_While(self, s: A.While) -> None:
        cond = B.convert(self.scalar(s.cond), "bool")
        self.emit(ir.While(cond, self.block(s.body.stmts), loc=s.loc))

    def s_Break(self, s): self.emit(ir.Break(loc=s.loc))
    def s_Yield(self, s): self.emit(ir.Yield(loc=s.loc))
    def s_Continue(self, s): self.emit(ir.Continue(loc=s.loc))

    def s_Foreach(self, s: A.Foreach) -> None:
        self.lenient_body("foreach", self._foreach, s)

    def _foreach(self, s: A.Foreach) -> None:
        if s.ranges and not s.bindings:  # over variables an enclosing `with` bound
            return self.foreach_ranges(s)
        loops: list[tuple[str, ir.Expr]] = []
        tuples: dict[str, list[str]] = {}  # `foreach x in t.span` over several dimensions
        for b in s.bindings:
            dom = self.value(b.domain)
            bounds = dom.dims if isinstance(dom, ShapeValue) else (
                [dom.expr] if isinstance(dom, Scalar) else None)
            if bounds is None:
                raise err("a loop domain must be an integer or a shape", b.domain)
            names = b.elements or ([b.name] if b.name else [])
            if not b.elements and b.name and len(bounds) > 1:
                names = [f"{b.name}__{i}" for i in range(len(bounds))]
                tuples[b.name] = names
            if len(names) != len(bounds):
                raise err(f"{len(names)} loop variable(s) for a {len(bounds)}-D domain", b)
            bounds = [self.index(b.domain, x, "a loop bound") for x in bounds]
            loops += list(zip(names, bounds))
        for r in s.ranges:
            if r.sliced:
                raise Unsupported("a sliced loop range", r.loc)
        outer = self.scope
        self.scope = outer.child()
        for var, bound in loops:
            self.scope.bind(var, Scalar(ir.Sym(var, "s32"), bound=bound, kind="index"))
        for name, parts in tuples.items():  # `x` is the ituple of its dimensions' indices
            self.scope.bind(name, ITupleValue(tuple(ir.Sym(p, "s32") for p in parts)))
        body = self.block(s.body.stmts)
        self.scope = outer
        for var, bound in reversed(loops):
            body = [ir.For(var, B.const(0), bound, body, loc=s.loc)]
        for x in body:
            self.emit(x)

    # ------------------------------------------------------------ parallel structure
    def s_ParallelBy(self, s: A.ParallelBy) -> None:
        if self.kernel is None:
            raise Unsupported("a nested kernel launch", s.loc)
        if self.in_parallel is not None:
            if self.group_lanes is None:
                raise Unsupported("nested 'parallel' levels inside a block", s.loc)
            return self.nested_threads(s)
        if len(s.levels) != 1:  # `g by 2 : group-4, t by 128 : thread`: they nest
            return self.s_ParallelBy(nest_levels(s, LEVEL_THREADS))
        lvl = s.levels[0]
        level = lvl.level or "thread"
        if level not in LEVEL_THREADS:
            raise Unsupported(f"the parallel level ': {level}' inside a block", lvl.loc)
        names = lvl.elements or ([lvl.var] if lvl.var else ["_p"])
        bounds = self._bounds(lvl)
        if len(names) > 1 and len(names) == len(bounds) and level == "thread":
            return self.flattened_threads(s, names, bounds)
        if len(names) > 1 and len(names) == len(bounds) and level in ("group", "group-4"):
            return self.multi_dim_groups(s, names, bounds, level, LEVEL_THREADS[level],
                                         nested_parallels(s.body.stmts))
        if len(names) != 1 or len(bounds) != 1:
            raise Unsupported("a multi-dimensional parallel level inside a block", lvl.loc)
        extent = B.as_int(bounds[0])
        if extent is None:
            # Valid Choreo (the count is a kernel argument); the IR sizes its roles statically.
            raise Unsupported("a run-time count of thread groups", lvl.bounds[0].loc)
        if level in ("group", "group-4") and nested_parallels(s.body.stmts):
            return self.flattened_groups(s, names[0], bounds[0], extent, LEVEL_THREADS[level])
        if extent > MAX_GROUP_INSTANCES:
            # Each instance is analysed one by one (roles, events); past this no block of
            # any target runs them (a CUDA block has 1,024 threads).
            raise err(f"'parallel {names[0]} by {extent}': more than {MAX_GROUP_INSTANCES} "
                      "instances in one block", lvl.bounds[0])
        par = ir.Parallel(names[0], extent, level, LEVEL_THREADS[level], [], loc=s.loc)
        outer = self.scope
        self.scope = outer.child()
        self.scope.bind(names[0], Scalar(ir.Sym(names[0], "s32"), bound=bounds[0], kind="index"))
        self.in_parallel = par
        try:
            par.body = self.block(s.body.stmts)
        finally:
            self.in_parallel = None
            self.scope = outer
        self.emit(par)

    def s_InThreads(self, s: A.InThreads) -> None:
        par = self.in_parallel
        if par is None and not s.is_async and self.role is None:
            return self.block_inthreads(s)
        if par is None:
            raise Unsupported("'inthreads' outside a parallel level of thread groups", s.loc)
        if self.role is not None:
            return self.nested_inthreads(s, par)
        cond = self.scalar(s.cond)
        cond, guard = self.split_guard(cond, par, s)
        members = self.role_members(cond, par, s)
        role = ir.Role(print_expr(cond), cond, tuple(members), [], is_async=s.is_async, loc=s.loc)
        self.emit(self.role_body(role, s, par, guard, restore=None))


def _is_increment(e) -> bool:
    """`x++`, `x--`, `++x`, `--x` of a name."""
    return isinstance(e, A.Unary) and e.op in ("post++", "post--", "++", "--") \
        and isinstance(e.operand, A.Name)
