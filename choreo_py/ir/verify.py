"""The tile-IR verifier: runs after IR construction and after every pass.

It checks what the backends and the interpreter rely on:
- every scalar, view, buffer, event, fragment and future is defined before
  it is used, in the same or an enclosing region (structured dominance);
- immutable names are not assigned; loop and index variables are read-only;
- views match the rank of their base; buffer-array views carry a slot;
- futures: a `wait` names a future defined earlier on the same path;
  `trigger ... after f` names an asynchronous global->shared TMA load, not one
  already waited on the same path, or MMA futures (a commit: any number of
  triggers may name one), never both kinds in one trigger; waiting twice on the
  same future instance is an error;
- the tensor-memory map, if the kernel has one (ir/verify_tmem.py).

Errors are `ChoreoError`s pointing at the offending statement.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from choreo_py import ir
from choreo_py.diagnostics import ChoreoError, Diagnostic, Diagnostics
from choreo_py.construct_names import describe

from . import verify_tmem


@dataclass
class _Scope:
    scalars: dict[str, str] = field(default_factory=dict)  # name -> "let" | "var" | "index"
    views: set[str] = field(default_factory=set)
    futures: dict[str, str] = field(default_factory=dict)  # name -> "tma" | "dma" | "mma"
    waited: set[str] = field(default_factory=set)  # futures consumed on this path


class _Verifier:
    def __init__(self, kernel: ir.Kernel) -> None:
        self.k = kernel
        self.diags = Diagnostics(limit=50)
        self.scopes: list[_Scope] = []
        self.frags = {f.name for f in kernel.frags}

    # -- scopes
    def push(self) -> None:
        self.scopes.append(_Scope())

    def pop(self) -> None:
        self.scopes.pop()

    def define(self, name: str, kind: str) -> None:
        self.scopes[-1].scalars[name] = kind

    def lookup(self, name: str) -> str | None:
        for s in reversed(self.scopes):
            if name in s.scalars:
                return s.scalars[name]
        return None

    def future_kind(self, name: str) -> str | None:
        for s in reversed(self.scopes):
            if name in s.futures:
                return s.futures[name]
        return None

    def waited(self, name: str) -> bool:
        """Consumed since its most recent definition on this path."""
        for s in reversed(self.scopes):
            if name in s.waited:
                return True
            if name in s.futures:
                return False
        return False

    def err(self, msg: str, loc) -> None:
        self.diags.error(msg, loc)

    # -- expressions
    def expr(self, e: ir.Expr, loc) -> None:
        check = EXPRESSIONS.get(type(e))
        if check is None:
            self.err(f"{describe(e)} is not an IR expression", loc)
            return
        check(self, e, loc)

    def exprs(self, items, loc) -> None:
        for x in items:
            self.expr(x, loc)

    def e_Sym(self, e, loc):
        if self.lookup(e.name) is None:
            self.err(f"'{e.name}' is used before it is defined", loc)

    def e_Call(self, e, loc):
        if e.fn not in ir.BUILTINS:
            self.err(f"unknown builtin '{e.fn}'", loc)
        self.exprs(e.args, loc)

    def e_BufElem(self, e, loc):
        self.view(e.view, loc)
        self.exprs(e.index, loc)

    def e_Elem(self, e, loc):
        if e.frag not in self.frags:
            self.err(f"'{e.frag}' is not a fragment", loc)
        self.exprs(e.index, loc)

    def view(self, v: ir.View, loc, want: str | None = None) -> None:
        n = len(v.offsets)
        if not (len(v.extents) == n == len(v.keep)):
            self.err(f"malformed view of '{v.base}'", loc)
            return
        alias = self.k.alias(v.base)
        root = self.k.root(v.base)
        param, buf = self.k.param(root), self.k.buffer(root) or self.k.run_buffer(root)
        if param is None and buf is None:
            self.err(f"'{v.base}' is neither a parameter nor a buffer", loc)
            return
        rank = len(alias.shape) if alias else len(param.shape) if param else len(buf.shape)
        if rank != n:
            self.err(f"view of '{v.base}' has rank {n}, the base has rank {rank}", loc)
        storage = param.storage if param else buf.storage
        if want and storage != want:
            self.err(f"'{v.base}' is {storage} memory; {want} memory is needed here", loc)
        if buf is not None and buf.count and v.slot is None:
            self.err(f"'{v.base}' is an array of {buf.count} buffers; select one with [slot]", loc)
        if v.slot is not None:
            if buf is None or not buf.count:
                self.err(f"'{v.base}' is not an array of buffers", loc)
            self.expr(v.slot, loc)
        for x in (*v.offsets, *v.extents):
            self.expr(x, loc)

    def event(self, r: ir.EventRef, loc) -> None:
        ev = self.k.event(r.event)
        if ev is None:
            self.err(f"'{r.event}' is not an event", loc)
            return
        if r.index is not None and not ev.slots:
            self.err(f"'{r.event}' is a single event; it has no slots to index", loc)
        for x in (r.index, r.order):
            if x is not None:
                self.expr(x, loc)

    # -- statements
    def block(self, stmts: list[ir.Stmt]) -> None:
        self.push()
        for s in stmts:
            self.stmt(s)
        self.pop()

    def stmt(self, s: ir.Stmt) -> None:
        method = STATEMENTS.get(type(s))
        if isinstance(s, ir.Assert) and self.k.device == "cpu":  # a host region's check
            return self.expr(s.cond, s.loc)
        if method is None:
            what = REFUSED.get(type(s), describe(s))
            self.err(f"unexpected {what} in a kernel", getattr(s, "loc", None))
            return
        method(self, s)

    def s_Let(self, s):
        self.expr(s.value, s.loc)
        if self.lookup(s.name) == "index":
            self.err(f"'{s.name}' is an index variable and cannot be redefined", s.loc)
        self.define(s.name, "let")

    def s_Var(self, s):
        self.expr(s.init, s.loc)
        self.define(s.name, "var")

    def s_Assign(self, s):
        self.expr(s.value, s.loc)
        kind = self.lookup(s.name)
        if kind is None:
            self.err(f"'{s.name}' is assigned before it is defined", s.loc)
        elif kind != "var":
            self.err(f"'{s.name}' is not mutable; declare it 'mutable' to assign it", s.loc)

    def s_ViewDef(self, s):
        self.view(s.view, s.loc)
        self.scopes[-1].views.add(s.name)

    def s_For(self, s):
        for x in (s.start, s.stop, s.step):
            self.expr(x, s.loc)
        self.push()
        self.define(s.var, "index")
        self.block(s.body)
        self.pop()

    def s_While(self, s):
        self.expr(s.cond, s.loc)
        self.block(s.body)

    def s_If(self, s):
        self.expr(s.cond, s.loc)
        self.block(s.then)
        self.block(s.orelse)

    def s_Break(self, s): pass
    def s_Yield(self, s): pass
    def s_Continue(self, s): pass
    def s_SyncShared(self, s): pass
    def s_SyncWarp(self, s): pass

    def s_GridSync(self, s):
        if not self.k.cooperative:
            self.err("a grid-wide barrier in a kernel not launched cooperatively", s.loc)

    def s_Fence(self, s):
        if s.scope not in ("gpu", "cta"):
            self.err(f"fence scope '{s.scope}' (gpu or cta)", s.loc)

    def s_Print(self, s):
        for x in s.items:
            if not isinstance(x, str):
                self.expr(x, s.loc)
    def s_RoleSync(self, s): pass

    def s_Asm(self, s):
        for o in s.outputs + s.inputs:
            self.expr(o.expr, s.loc)
        for o in s.outputs:
            if not isinstance(o.expr, (ir.BufElem, ir.Sym)):
                self.err("an asm output must be a buffer element or a scalar variable", s.loc)

    def s_NamedBarrier(self, s):
        self.expr(s.barrier, s.loc)
        if s.op not in ("sync", "arrive"):
            self.err(f"named barrier operation '{s.op}' (sync or arrive)", s.loc)
        if s.count <= 0 or s.count % 32:
            self.err(f"named barrier thread count {s.count} must be a positive multiple of 32", s.loc)
        if isinstance(s.barrier, ir.Const) and not 0 <= s.barrier.value <= 15:
            self.err(f"named barrier id {s.barrier.value} is outside 0..15", s.loc)
    def s_SetMaxRegs(self, s):
        if not 24 <= s.count <= 256 or s.count % 8:
            self.err(f"register count {s.count} must be a multiple of 8 in [24, 256]", s.loc)

    def s_Parallel(self, s):
        self.push()
        self.define(s.var, "index")
        self.block(s.body)
        self.pop()

    def s_Role(self, s):
        self.expr(s.cond, s.loc)
        if not s.members:
            self.err("this role selects no thread group", s.loc)
        self.block(s.body)

    def _define_future(self, name: str | None, kind: str, loc) -> None:
        if name is None:
            return
        scope = self.scopes[-1]
        scope.futures[name] = kind
        scope.waited.discard(name)

    def s_TmaLoad(self, s):
        self.view(s.src, s.loc, want="global")
        self.view(s.dst, s.loc, want="shared")
        self._define_future(s.future, "tma", s.loc)

    def s_TmaStore(self, s):
        self.view(s.src, s.loc, want="shared")
        self.view(s.dst, s.loc, want="global")
        if s.rows is not None:
            self.expr(s.rows, s.loc)
            if s.rows.dtype not in ir.INT_TYPES:
                self.err(f"the row count of a store is {s.rows.dtype}, not an integer", s.loc)
        self._define_future(s.future, "tma_store", s.loc)

    def s_DmaCopy(self, s):
        self.view(s.src, s.loc)
        self.view(s.dst, s.loc)
        self._define_future(s.future, "dma", s.loc)

    def s_Wait(self, s):
        for item in s.items:
            if isinstance(item, ir.EventRef):
                self.event(item, s.loc)
                continue
            name = item.future
            if self.future_kind(name) is None:
                self.err(f"'{name}' is waited before any operation defines it on this path", s.loc)
            elif self.waited(name):
                self.err(f"future '{name}' was already waited; each future instance is consumed once", s.loc)
            self.scopes[-1].waited.add(name)

    def s_Trigger(self, s):
        self.event(s.event, s.loc)
        for name in s.after:
            kind = self.future_kind(name)
            if kind is None:
                self.err(f"'{name}' is not a future defined on this path", s.loc)
            elif kind == "mma":
                continue  # a commit: any number of triggers, before or after a `wait` of it
            elif kind != "tma":
                self.err(f"'trigger ... after {name}': only asynchronous global-to-shared TMA loads "
                         "and MMAs can complete an event", s.loc)
            elif self.waited(name):
                self.err(f"'trigger ... after {name}': the future was already consumed by a wait", s.loc)
            self.scopes[-1].waited.add(name)
        if len({self.future_kind(n) for n in s.after} - {None}) > 1:
            self.err("'trigger ... after' with both TMA loads and MMA futures", s.loc)

    def _frag(self, name: str, loc) -> None:
        if name not in self.frags:
            self.err(f"'{name}' is not a fragment", loc)

    def s_FragDecl(self, s):
        if s.frag.name not in self.frags:
            self.err(f"fragment '{s.frag.name}' is missing from the kernel's fragment table", s.loc)

    def s_MmaFill(self, s): self._frag(s.acc, s.loc)

    def s_Mma(self, s):
        self._frag(s.acc, s.loc)
        if isinstance(s.a, str):
            self._frag(s.a, s.loc)
        else:
            self.view(s.a, s.loc, want="shared")
        self.view(s.b, s.loc, want="shared")
        self._define_future(s.future, "mma", s.loc)

    def s_SparseMma(self, s):
        self.s_Mma(s)
        self._frag(s.meta, s.loc)
        if isinstance(s.a, str):
            self.err("a sparse MMA takes its packed A operand from shared memory", s.loc)

    def s_WarpMma(self, s):
        for name in (s.acc, s.a, s.b):
            self._frag(name, s.loc)

    def s_MmaStore(self, s):
        self._frag(s.acc, s.loc)
        self.view(s.dst, s.loc)

    def s_MmaLoad(self, s):
        self._frag(s.frag, s.loc)
        self.view(s.src, s.loc)

    def s_Apply(self, s):
        self._frag(s.domain, s.loc)
        if len(s.indices) != len(s.shape):
            self.err("apply has a different number of indices than its domain has dimensions", s.loc)
        self.push()
        for i in s.indices:
            self.define(i, "index")
        self.block(s.body)
        self.pop()

    def s_ElemStore(self, s):
        self._frag(s.frag, s.loc)
        for i in s.index:
            self.expr(i, s.loc)
        self.expr(s.value, s.loc)

    def s_BufStore(self, s):
        self.view(s.view, s.loc)
        for i in s.index:
            self.expr(i, s.loc)
        self.expr(s.value, s.loc)
        if (s.compare is not None) != (s.atomic == "cas"):
            self.err("an atomic cas (and only it) takes a compare value", s.loc)
        if s.compare is not None:
            self.expr(s.compare, s.loc)
        if s.result is not None and self.lookup(s.result) is None:
            self.err(f"an atomic's old value goes to '{s.result}', which is not defined", s.loc)

    def s_Reduce(self, s):
        self._frag(s.dst, s.loc)
        self._frag(s.src, s.loc)

    def s_AllReduce(self, s): self._frag(s.frag, s.loc)

    def s_FragCopy(self, s):
        self._frag(s.dst, s.loc)
        self._frag(s.src, s.loc)

    def run(self) -> None:
        self.push()
        for d in self.k.symbolic_dims:
            self.define(d, "let")
        for g in self.k.grid:
            self.expr(g.extent, self.k.loc)
        for g in self.k.grid:
            self.define(g.var, "index")
        names = [b.name for b in self.k.buffers] + [e.name for e in self.k.events]
        names += [p.name for p in self.k.params]
        dup = sorted({n for n in names if names.count(n) > 1})
        for n in dup:
            self.err(f"'{n}' is declared more than once", self.k.loc)
        self.block(self.k.body)
        self.pop()


#: The check of each expression kind (tests/test_ir_coverage.py).
EXPRESSIONS = {
    ir.Const: lambda v, e, loc: None,
    ir.Sym: _Verifier.e_Sym,
    ir.Bin: lambda v, e, loc: v.exprs((e.lhs, e.rhs), loc),
    ir.Un: lambda v, e, loc: v.expr(e.operand, loc),
    ir.Select: lambda v, e, loc: v.exprs((e.cond, e.if_true, e.if_false), loc),
    ir.Call: _Verifier.e_Call,
    ir.BufElem: _Verifier.e_BufElem,
    ir.Elem: _Verifier.e_Elem,
}
#: The check of each statement kind a kernel may hold (tests/test_ir_coverage.py).
STATEMENTS = {
    ir.Let: _Verifier.s_Let, ir.Var: _Verifier.s_Var, ir.Assign: _Verifier.s_Assign,
    ir.ViewDef: _Verifier.s_ViewDef, ir.For: _Verifier.s_For, ir.While: _Verifier.s_While,
    ir.If: _Verifier.s_If, ir.Break: _Verifier.s_Break, ir.Yield: _Verifier.s_Yield,
    ir.Continue: _Verifier.s_Continue,
    ir.Print: _Verifier.s_Print, ir.Asm: _Verifier.s_Asm, ir.SyncShared: _Verifier.s_SyncShared,
    ir.SyncWarp: _Verifier.s_SyncWarp, ir.GridSync: _Verifier.s_GridSync,
    ir.Fence: _Verifier.s_Fence, ir.RoleSync: _Verifier.s_RoleSync,
    ir.NamedBarrier: _Verifier.s_NamedBarrier, ir.SetMaxRegs: _Verifier.s_SetMaxRegs,
    ir.Parallel: _Verifier.s_Parallel, ir.Role: _Verifier.s_Role, ir.TmaLoad: _Verifier.s_TmaLoad,
    ir.TmaStore: _Verifier.s_TmaStore, ir.DmaCopy: _Verifier.s_DmaCopy, ir.Wait: _Verifier.s_Wait,
    ir.Trigger: _Verifier.s_Trigger, ir.FragDecl: _Verifier.s_FragDecl,
    ir.MmaFill: _Verifier.s_MmaFill, ir.Mma: _Verifier.s_Mma,
    ir.SparseMma: _Verifier.s_SparseMma, ir.MmaStore: _Verifier.s_MmaStore,
    ir.MmaLoad: _Verifier.s_MmaLoad, ir.Apply: _Verifier.s_Apply, ir.WarpMma: _Verifier.s_WarpMma,
    ir.ElemStore: _Verifier.s_ElemStore, ir.BufStore: _Verifier.s_BufStore,
    ir.Reduce: _Verifier.s_Reduce, ir.AllReduce: _Verifier.s_AllReduce,
    ir.FragCopy: _Verifier.s_FragCopy,
}
#: Statement kinds that never belong in a kernel body.
REFUSED = {ir.Launch: "a launch; kernels are launched by the host function",
           ir.HostCall: "a call of a __co__ function; the host runs it (host code only)",
           ir.Assert: "an assert; asserts are checked on the host (at the function's entry, "
                      "in host code, in a region the host runs)"}


def verify_kernel(kernel: ir.Kernel, target=None) -> None:
    """`target` (a targets.Target) bounds the tensor-memory map; None: the targets' own."""
    v = _Verifier(kernel)
    v.run()
    verify_tmem.check(kernel, target, v.diags)
    v.diags.raise_if_errors()


def verify_module(module: ir.Module) -> None:
    errors = []
    for f in module.functions:
        for k in f.kernels:
            try:
                verify_kernel(k)
            except ChoreoError as e:
                errors += e.diagnostics
        errors += host_call_errors(module, f)
    if errors:
        raise ChoreoError(diagnostics=errors)


def host_call_errors(module: ir.Module, fn: ir.Function) -> list[Diagnostic]:
    """The host calls of `fn` name a function of the module and bind each of its
    parameters once, tensors to tensors of `fn`; a tensor result is a host buffer."""
    out = []
    for s in ir.walk(fn.body):
        if isinstance(s, ir.HostCall):
            problem = _host_call_problem(module, fn, s)
            if problem:
                out.append(Diagnostic("error", f"call {s.func}: {problem}", s.loc))
    return out


def _host_call_problem(module: ir.Module, fn: ir.Function, s: ir.HostCall) -> str:
    callee = module.function(s.func)
    if callee is None:
        return "no function of that name in the module"
    tensors = {p.name for p in callee.params}
    bound = [p for p, _ in s.tensors] + list(s.scalars)
    if sorted(bound) != sorted(callee.arg_names or tensors) or len(s.scalars) != len(s.values):
        return f"binds {', '.join(bound) or 'nothing'}; its parameters are " \
               f"{', '.join(callee.arg_names) or 'none'}"
    mine = {p.name for p in fn.params + fn.locals}
    wrong = [t for p, t in s.tensors if p not in tensors or t not in mine]
    if wrong:
        return f"'{wrong[0]}' is not a tensor of {fn.name} passed for a tensor parameter"
    if s.result is not None and s.result_dtype is None and \
            s.result not in {p.name for p in fn.locals}:
        return f"the result '{s.result}' is no host buffer of {fn.name}"
    return ""

