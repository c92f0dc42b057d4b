"""Host code of a `__co__` function: the statements around its kernels.

A function body outside its parallel regions is a host program: its
statements run on the host, in order, and each parallel region is a kernel
launched where it is written (host/execute.py runs the host statements; the
interpreter and the GPU runtime share it). Here they become the IR of
`ir.Function.body`:

- `with` / `foreach` / `if` / `while` / `break` / `continue` around kernels
  become host `ir.For` / `ir.If` / ... statements; a kernel inside a host loop
  is launched once per iteration, and reads the loop variables (and any other
  host value it uses) as scalar kernel arguments (`ir.Kernel.scalars`);
- host scalars: named constants and values of the function's sizes are
  folded into the kernels that read them, as before; any other value
  (`int d = b;` of a scalar parameter, `mutable int a = 3; a += 3;`) is a host
  variable (`ir.Let` / `ir.Var` / `ir.Assign` in the host body);
- host code that reads or writes tensor elements and launches nothing
  (`foreach i in a.span { a.at(i) = b.at(i); }`, a lone `b.at(0) = 1;`) runs as a
  `: device(cpu)` region would: a kernel of one instance that the host runs
  (sema/host.py, device_region);
- a host `dma.copy` of a whole tensor or buffer into another of the same shape and
  element type is a copy on the host's stream (`ir.DmaCopy` in the host body).

A kernel may not assign a host variable (it receives a copy of its value), and
a host variable it reads must be a 32-bit integer (kernel arguments are 32-bit
words); both are refused by name.
"""
from __future__ import annotations

from ..frontend import ast as A
from ..frontend import bindings
from .. import ir
from .increments import has_increment
from ..construct_names import describe
from ..diagnostics import ChoreoError
from ..ir import build as B
from .exprs import err
from .clusters import ClusterBuilder
from .host import nested_parallels
from .host_regions import HostRegion
from .values import kind_of
from .values import (BoundedTuple, ITupleValue, Scalar, ShapeValue, Tensor, Unsupported,
                     ViewValue)

#: Element types a kernel receives a host value in (32-bit words, like its dimensions).
HOST_ARG_TYPES = ("s32", "u32", "bool", "f32", "f16", "bf16")  # as the function's own scalar parameters
#: The IR statements a host body may hold: what host/execute.py runs (a test keeps the
#: two lists equal); build_host_body refuses any other by name.
HOST_STATEMENTS = (ir.Launch, ir.Print, ir.Assert, ir.Break, ir.Continue, ir.DmaCopy, ir.Let,
                   ir.Var, ir.Assign, ir.If, ir.While, ir.For, ir.HostCall)
#: Statements that are host control flow when they launch kernels.
_CONTROL = (A.With, A.Foreach, A.If, A.While, A.Block)


def _touches_data(s: A.Stmt) -> bool:
    """Whether `s` reads or writes tensor elements or copies data (`.at(...)`, dma, atomics)."""
    for n in A.walk(s):
        if isinstance(n, A.MethodCall) and n.method == "at":
            return True
        if isinstance(n, A.DmaOp) or (isinstance(n, A.CallExpr) and
                                      n.func.startswith("__atomic_")):
            return True
    return False


def _host_expr_stmt(e: A.Expr) -> bool:
    """Expression statements the host runs: prints and increments of a variable."""
    if isinstance(e, A.CallExpr):
        return e.func in ("print", "println")
    return isinstance(e, A.Unary) and e.op in ("post++", "post--", "++", "--")


def _value_syms(v) -> list[ir.Sym]:
    """The symbols a value's expressions read (its value, bound, elements, view)."""
    exprs: list[ir.Expr] = []
    if isinstance(v, Scalar):
        exprs += [v.expr] + ([v.bound] if v.bound is not None else [])
    elif isinstance(v, (ITupleValue, BoundedTuple)):
        exprs += list(v.elems)
    elif isinstance(v, ShapeValue):
        exprs += list(v.dims)
    elif isinstance(v, ViewValue):
        exprs += [x for x in (*v.view.offsets, *v.view.extents) if isinstance(x, ir.Expr)]
    out: list[ir.Sym] = []
    for e in exprs:
        out += [x for x in ir.expr_walk(e) if isinstance(x, ir.Sym) and x not in out]
    return out


class HostCodeBuilder(ClusterBuilder):
    """Mixin of KernelBuilder: host statements (see the module docstring)."""

    def host_statement(self, s: A.Stmt) -> None:
        """One statement outside any kernel."""
        if isinstance(s, HostRegion):  # host DMA, waits, MMAs (sema/host_regions.py)
            return self.lenient_body("host code", self.host_data_region, s)
        if self.is_co_call(s):  # `b = f(a);`: the host runs `f` (sema/co_calls.py)
            return self.host_call(s)
        if isinstance(s, A.ParallelBy):  # (a cluster around the kernel: sema/clusters.py)
            cluster = s.levels[0].level == "cluster"
            return (self.cluster_launch if cluster else self.launch)(s, self.out)
        if isinstance(s, A.BufferDecl):
            if self.host_depth:
                raise Unsupported("a host buffer declared inside host control flow", s.loc)
            return self.host_buffer(s)
        if isinstance(s, (A.MdSpanDecl, A.ITupleDecl)):
            return getattr(self, "s_" + type(s).__name__)(s)
        if isinstance(s, A.Return):
            if s.value is None:
                return None
            if self.host_depth:
                raise Unsupported("a 'return' inside host control flow", s.loc)
            return self.host_return(s)
        if _is_assert(s) and not _touches_data(s):  # (sema checked it before host code)
            return self.host_stmt(s)
        # Host code sema refused before it was lowered: for `choreo check`, an error found
        # in it is a warning, as in with/foreach blocks (sema/iterate.py, lenient_body).
        # (a statement around launches or calls is host control flow, below)
        data = _touches_data(s) and not nested_parallels([s]) and not self.holds_co_call(s)
        if data and self._data_decl(s):
            return self.lenient_body("host code", self.host_data_decl, s)
        if data and not isinstance(s, A.DmaOp):
            return self.lenient_body("host code", self.host_data_region, s)
        if isinstance(s, _CONTROL):
            return self.lenient_body("host code", self.host_control, s)
        return self.lenient_body("host code", self.host_stmt, s)

    def host_dim_element(self, base, n: A.DimOf) -> Scalar:
        """`dims(c)` of a host value `c`: the host checks 0 <= c < rank where the statement
        runs (a located error otherwise) and selects the element; in a kernel it is refused."""
        if not self.on_host:
            raise Unsupported("a dimension index known only at run time in a kernel", n.index.loc)
        if isinstance(base, ShapeValue):
            seq = base.dims
        elif isinstance(base, ITupleValue):
            seq = base.elems
        else:
            raise ChoreoError(f"'(...)' selects an element of a shape or ituple, not of "
                              f"{kind_of(base)}", n.loc)
        k = B.convert(self.scalar(n.index), "s32")
        inside = B.binop("&&", B.binop(">=", k, B.const(0)), B.binop("<", k, B.const(len(seq))))
        check = ir.Assert(inside, f"the dimension index is out of range for a rank-{len(seq)} "
                          "value", loc=n.index.loc)
        if check not in self.out:  # a declaration's initialiser may be built twice
            self.emit(check)
        value = seq[-1]
        for i in range(len(seq) - 2, -1, -1):
            value = ir.Select(B.binop("==", k, B.const(i)), seq[i], value, "s32")
        return Scalar(value)

    def assert_stmt(self, c: A.CallExpr) -> None:
        """`assert(cond, "message")`: decided here when constant; on the function's sizes,
        hoisted to its entry and checked when it is called; on host values, checked in the
        host code where it is, and on tensor elements in a region of the host; in a GPU
        kernel, on anything else, refused."""
        if len(c.args) != 2 or not isinstance(c.args[1], A.StringLit):
            raise err('assert takes a condition and a message: assert(cond, "message")', c)
        message = c.args[1].value
        cond = B.convert(self.scalar(c.args[0]), "bool")
        if isinstance(cond, ir.Const):
            if not cond.value:
                raise err(f"assertion failed: {message}", c)
            return
        inner = sorted(n for n in ir.sym_names(cond)
                       if getattr(self.scope.lookup(n), "kind", None) != "dim")
        elements = any(isinstance(x, (ir.BufElem, ir.Elem)) for x in ir.expr_walk(cond))
        host_region = self.kernel is not None and self.kernel.device == "cpu"
        if (inner or elements) and (self.on_host or host_region):  # checked where it is
            return self.emit(ir.Assert(cond, message, loc=c.loc))
        if inner or elements:
            raise Unsupported(f"an assert on '{inner[0]}' in a kernel (only the function's "
                              "sizes, at entry, and host values, on the host, are checked)",
                              c.loc)
        self.entry_asserts.append(ir.Assert(cond, message, loc=c.loc))

    def check_host_body(self, body: list[ir.Stmt]) -> None:
        """Every statement the host code became is one the host runs (a view named after a
        kernel, say, would be an `ir.ViewDef`: refused by name)."""
        for st in ir.walk(body):
            if not isinstance(st, HOST_STATEMENTS):
                raise Unsupported(f"{describe(st)} in host code", getattr(st, "loc", None)
                                  or self.func.loc)
            if any(isinstance(x, (ir.BufElem, ir.Elem)) for e in _stmt_exprs(st)
                   for x in ir.expr_walk(e)):  # (the host program reads no tensor)
                raise Unsupported(f"a tensor element read by {describe(st)} of host code around "
                                  "launches or calls (name it first: 'int v = t.at(i);')",
                                  getattr(st, "loc", None) or self.func.loc)

    def host_control(self, s: A.Stmt) -> None:
        """`with` / `foreach` / `if` / `while` / `{...}` on the host: the statement builders
        of kernels (sema/iterate.py, kernel.py) build them, their bodies host statements."""
        self.host_depth += 1
        try:
            getattr(self, "s_" + type(s).__name__)(s)
        finally:
            self.host_depth -= 1

    def host_data_region(self, s: A.Stmt) -> None:
        """Host code over tensor elements: a kernel of one instance the host runs."""
        stmts = s.stmts if isinstance(s, HostRegion) else [s]
        one = A.ParallelLevel(var=None, elements=[], bounds=[A.IntLit(value=1, suffix="",
                              text="1", loc=s.loc)], bracketed=False, level="block", loc=s.loc)
        self.launch(A.ParallelBy(levels=[one], is_async=False, stream=None, attributes=[],
                                 body=A.Block(stmts=stmts, loc=s.loc), loc=s.loc), self.out,
                    host_region=True)
        self.kernels[-1].device = "cpu"  # `s` holds no parallel region: one instance

    def _data_decl(self, s: A.Stmt) -> bool:
        """`int v = a.at(0);`, `w = b.at(i) + 1;` (declaring `w`): a host scalar whose value
        reads tensor elements."""
        init = s.init if isinstance(s, A.ScalarDecl) else getattr(s, "value", None)
        if isinstance(init, A.CallExpr) and init.func.startswith("__atomic_"):
            return False  # (an atomic's old value: the region declares it)
        if isinstance(s, A.ScalarDecl):
            return init is not None and not isinstance(init, (A.ITupleLit, A.MdSpanLit))
        return isinstance(s, A.Assign) and s.op == "=" and isinstance(s.target, A.Name) and \
            self.scope.lookup(s.target.id) is None

    def host_data_decl(self, s: A.Stmt) -> None:
        """A host scalar whose value reads tensor elements: a host variable, zero, that a
        region of the host assigns the value (written back: sema/host_copies.py), so the
        host's later statements and kernels see the name, as co-mock's do."""
        name = s.name if isinstance(s, A.ScalarDecl) else s.target.id
        init = s.init if isinstance(s, A.ScalarDecl) else s.value
        written = getattr(s, "type", None)
        dtype = written.name if written is not None and written.name not in ("auto", "void") \
            else self._dtype_of(init)
        zero = ir.Const(0.0 if ir.is_float(dtype) else (False if dtype == "bool" else 0), dtype)
        self.emit(ir.Var(name, dtype, zero, loc=s.loc))
        self.scope.bind(name, Scalar(ir.Sym(name, dtype), mutable=True, kind="var", loc=s.loc))
        assign = A.Assign(target=A.Name(id=name, loc=s.loc), op="=", value=init, loc=s.loc)
        self.host_data_region(assign)

    def _dtype_of(self, e: A.Expr) -> str:
        """The type of a host expression over tensor elements (built aside, not emitted)."""
        saved = self.out
        self.out = []
        try:
            return self.scalar(e).dtype
        finally:
            self.out = saved

    def host_stmt(self, s: A.Stmt) -> None:
        """Scalars, prints, asserts and copies on the host."""
        if isinstance(s, A.ScalarDecl):
            self._check_decl(s)
            if not self._variable(s) and s.init is not None and not has_increment(s.init) \
                    and self._host_fold(s.name, s.init, s.type, s.loc):
                return
            return self.s_ScalarDecl(s)
        if isinstance(s, A.ExprStmt) and isinstance(s.expr, A.CallExpr) and \
                s.expr.func == "assert":
            return self.assert_stmt(s.expr)
        if isinstance(s, A.Sync) and s.kind == "global":
            return  # launches and host regions run in order (see sema/host.py, device_region)
        if isinstance(s, A.Assign) and isinstance(s.target, A.Name):
            decision = bindings.assignment(s.target.id, s.op, self.seen(s.target.id))
            if decision.action == bindings.REFUSE and not self.checking:
                raise ChoreoError(decision.message, s.target.loc)
            if decision.action == bindings.DECLARE and self._host_name(s):
                return
            old = self.scope.lookup(s.target.id)
            if isinstance(old, Scalar) and not old.mutable and old.kind != "dim":
                return self._host_rebind(s, old)
        if isinstance(s, A.ExprStmt) and not _host_expr_stmt(s.expr):
            raise Unsupported(f"host-side code ({describe(s)}) around the kernel", s.loc)
        if isinstance(s, A.DmaOp):
            return self.host_copy(s)
        if isinstance(s, A.EventDecl):
            raise Unsupported("an event declared on the host (outside any parallel region: "
                              "host code runs in order and has no asynchronous path to wait "
                              "for)", s.loc)
        if isinstance(s, (A.Assign, A.ScalarDecl, A.ExprStmt, A.Break, A.Continue)):
            return self.stmt_in_kernel_form(s)
        raise Unsupported(f"host-side code ({describe(s)}) around the kernel", s.loc)

    def _host_name(self, s: A.Assign) -> bool:
        """`x = 3;`, `n = cdiv(SEQ, 64);` (a value of the sizes, declared here), `l =
        lhs.span_as(6, 64)` (a view of a parameter or host buffer): bound, nothing run."""
        v = self.value(s.value)
        name = s.target.id
        if isinstance(v, Scalar) and isinstance(v.expr, ir.Const):
            self.scope.bind(name, Scalar(v.expr, kind="const"))
            return True
        if isinstance(v, Scalar) and self.scope.local(name) is None and self._of_sizes(v.expr):
            self.scope.bind(name, Scalar(v.expr, kind="let"))
            return True
        if isinstance(v, ViewValue) and self.kernel not in self.kernels:
            self.scope.bind(name, ViewValue(v.view, v.dtype, loc=s.loc))
            return True
        return False

    def _host_rebind(self, s: A.Assign, old: Scalar) -> None:
        """`c = 6 + 1;`, `f += a + 2;` of a host scalar declared without 'mutable', under
        `choreo check` (elsewhere the assignment rule refused it above): the whole-language
        pass reports it (choreo_py/check/: an error for compile, lenient for `choreo
        check`, as the reference's parser accepts it); the name takes the new value from
        here on, so that sema's analysis goes on without a second report."""
        value = self._compound(s, old.expr)
        if isinstance(value, ir.Const):
            self.scope.bind(s.target.id, Scalar(value, kind="const", loc=s.loc))
            return
        self._let(s.target.id, value, s.loc)

    def _host_fold(self, name: str, init: A.Expr, type_: A.TypeRef | None, loc) -> bool:
        """A named constant, or a value of the function's sizes that each kernel reading it
        computes from its dimensions (`int tiles = cdiv(M, 64) * cdiv(N, 128);`): bound,
        nothing run on the host. False for any other value."""
        v = self.value(init, type_.name if type_ else None)
        if not isinstance(v, Scalar):
            return False
        if isinstance(v.expr, ir.Const):
            self.scope.bind(name, Scalar(v.expr, kind="const", loc=loc))
            return True
        if self._of_sizes(v.expr):
            self.scope.bind(name, Scalar(v.expr, kind="let", loc=loc))
            return True
        return False

    def stmt_in_kernel_form(self, s: A.Stmt) -> None:
        """Scalar statements the kernel builders build the same on the host."""
        getattr(self, "s_" + type(s).__name__)(s)

    def host_copy(self, s: A.DmaOp) -> None:
        """`dma.copy a => b;` on the host between whole global tensors of one shape and type:
        a copy on the host's stream, after the kernels launched before it."""
        if s.operation != "copy" or s.is_async or s.dst is None or \
                isinstance(s.dst, A.StorageTarget) or s.future:
            what = "'dma.any' (a placeholder future)" if s.operation == "any" else \
                f"'{s.engine}.{s.operation}' other than a plain synchronous copy"
            raise Unsupported(f"{what} on the host (outside any parallel region)", s.loc)
        src, dst = self.value(s.src), self.value(s.dst)
        if not (isinstance(src, Tensor) and isinstance(dst, Tensor)):
            raise Unsupported("a host copy of a part of a tensor (only whole tensors and "
                              "buffers are copied on the host)", s.loc)
        a, b = src.param, dst.param
        if a.dtype != b.dtype or [str(x) for x in a.shape] != [str(x) for x in b.shape]:
            raise Unsupported(f"a host copy of a {a.dtype} tensor into a {b.dtype} tensor or "
                              "one of another shape", s.loc)
        whole = lambda p: ir.View(p.name, tuple(ir.Const(0, "s32") for _ in p.shape),
                                  tuple(p.shape), tuple(True for _ in p.shape))
        self.emit(ir.DmaCopy(whole(a), whole(b), loc=s.loc))

    # ------------------------------------------------------------ kernels reading host values
    def from_host(self, name: str) -> bool:
        """Whether `name`, seen from inside a kernel, is a value of the host program."""
        if self.on_host or self.host_scope is None:
            return False
        owner = self.scope.owner(name)
        return owner is not None and owner.encloses(self.host_scope)

    def note_host_reads(self, v) -> None:
        """A kernel reads the host value `v`: the host variables it depends on become the
        kernel's scalar arguments (the function's sizes reach it as its dimensions)."""
        for sym in _value_syms(v):
            bound = self.host_scope.lookup(sym.name)
            if not isinstance(bound, Scalar) or bound.kind in ("dim", "const"):
                continue
            if sym in self.kernel.scalars:
                continue
            if sym.dtype not in HOST_ARG_TYPES:
                raise Unsupported(f"the host value '{sym.name}' of type {sym.dtype} in a kernel "
                                  "(kernels receive host values as 32-bit words: s32, u32, "
                                  "bool, f32, f16, bf16)",
                                  getattr(bound, "loc", None) or self.kernel.loc)
            self.kernel.scalars.append(sym)

    def check_not_host_var(self, name: str, loc) -> None:
        """A kernel receives a copy of a host variable: assigning it there is refused."""
        v = self.scope.lookup(name)
        if isinstance(v, Scalar) and v.mutable and self.from_host(name):
            raise Unsupported(f"an assignment to the host variable '{name}' inside a kernel "
                              "(the kernel receives a copy of its value)", loc)


def _stmt_exprs(st: ir.Stmt) -> list[ir.Expr]:
    """The expressions a host statement evaluates itself (not those of its blocks)."""
    out = []
    for v in vars(st).values():
        out += [x for x in (v if isinstance(v, (tuple, list)) else [v]) if isinstance(x, ir.Expr)]
    return out


def _is_assert(s: A.Stmt) -> bool:
    return (isinstance(s, A.ExprStmt) and isinstance(s.expr, A.CallExpr)
            and s.expr.func == "assert")
