"""The walk of one `__co__` function: scopes, the context of each statement,
and the type of each expression.

The pass follows the reference order in one linear walk: declarations are
entered as they are met (so a use before its declaration is seen), each
expression is typed bottom-up, and the rule families (`RULES`, a table keyed
by AST node type, assembled in `__init__`) run on every node with the walk's
state at hand.  The walk itself reports only what defines a scope: a name
declared twice in one scope and a name used before any declaration.

Long because: the walk visits every statement and expression kind of the
language in one place (one entry per kind, each a few lines).
"""
from __future__ import annotations

from typing import Callable, Optional

from ..frontend import ast as A
from ..frontend import bindings, builtins, co_calls
from ..diagnostics import Diagnostic, did_you_mean
from ..frontend.parse_checks import fold_int
from . import types as Ty
from .decl_types import (_bound_rank, _decl_type, _dma_future,
                         _selected_names, _static_dims, _type_rank)
from .expr_types import EXPR_TYPE
from .types import T, Sym, Scope
from .names import reserved_name

#: Names every function sees without declaring them.
PREDEFINED = frozenset({"inf", "INFINITY", "NAN", "nan", "_", "true", "false", "nullptr",
                        "threadIdx", "blockIdx", "blockDim", "gridDim", "warpSize"})

#: Kinds of names the assignment rule decides (frontend/bindings.py): values an
#: assignment updates or is refused for; the others (views, futures, shapes) have rules
#: of their own.
ASSIGNED_KINDS = (Ty.INT, Ty.FLOAT, Ty.BOOL, Ty.BOUNDED, Ty.UNKNOWN)

#: Parallel levels, outermost first.
LEVEL_ORDER = ("device", "cluster", "block", "group-4", "group", "thread")



class Checker:
    """State of the walk over one function; `rules` maps a node type to the
    rule functions called as `rule(checker, node)` (statements before their
    children are walked, expressions after, with `self.types` filled)."""

    def __init__(self, fn: A.FunctionDef, rules: dict, exit_rules: dict,
                 strict: bool = True, building: bool = False) -> None:
        self.fn = fn
        self.strict = strict
        self.building = building  # for `compile` or a call (choreo_py.load), not `check`
        self.rules = rules
        self.exit_rules = exit_rules
        self.errors: list[Diagnostic] = []
        self.scopes: list[Scope] = []
        self.types: dict[int, T] = {}        # id(expr) -> its type
        self.parallel: list[tuple[A.ParallelBy, A.ParallelLevel]] = []
        self.inthreads: list[list[A.InThreads]] = [[]]  # per parallel depth
        self.loops = 0
        self.returns: list[A.Return] = []
        self.block_stack: list[A.Stmt] = []  # enclosing compound statements
        self.extra: dict = {}                # per-family scratch state
        self.declared: set[str] = set()      # every name declared anywhere in the function
        self.unresolved: list[int] = []      # errors[i]: a use no declaration reached
        self.written = bindings.written_names(fn.body)  # names some statement changes

    # ------------------------------------------------------------------ reporting
    def error(self, message: str, loc) -> None:
        self.errors.append(Diagnostic("error", message, loc))

    def lenient_error(self, message: str, loc) -> None:
        """A rule that programs accepted by the reference's parse-only stage
        (`choreo -e`) are known to break: an error when compiling or with
        `check --strict`, a warning from a plain `check`."""
        self.errors.append(Diagnostic("error" if self.strict else "warning", message, loc))

    def strict_check_error(self, message: str, loc) -> None:
        """A rule broken by programs whose meaning is still defined as long as nothing
        depends on what it leaves out (a non-void function that ends without `return`,
        as in C, where only using the value is undefined): an error from `check
        --strict` only, a warning from a plain `check`, `compile` and a call; what the
        build makes of it refuses the missing part where it is used."""
        severity = "error" if self.strict and not self.building else "warning"
        self.errors.append(Diagnostic(severity, message, loc))

    # ------------------------------------------------------------------ scopes
    def push(self, kind: str) -> Scope:
        scope = Scope(kind)
        self.scopes.append(scope)
        return scope

    def pop(self) -> None:
        scope = self.scopes.pop()
        for rule in self.exit_rules.get("scope", ()):
            rule(self, scope)

    def lookup(self, name: str) -> Optional[Sym]:
        for scope in reversed(self.scopes):
            sym = scope.names.get(name)
            if sym is not None:
                return sym
        return None

    def declare(self, name: Optional[str], typ: T, loc, origin: str = "local",
                **attrs) -> Optional[Sym]:
        """Enter `name` in the innermost scope; one declaration per name per scope."""
        if not name or name == "_":
            return None
        bad = reserved_name(name, loc)
        if bad is not None:
            self.errors.append(bad)
        scope = self.scopes[-1]
        if name in scope.names:
            first = scope.names[name].loc
            where = f" at {first.line}:{first.col}" if first else ""
            self.error(f"'{name}' is already declared in this scope{where}", loc)
            return scope.names[name]
        sym = Sym(name, typ, loc, origin=origin, **attrs)
        scope.names[name] = sym
        self.declared.add(name)
        if typ.kind == Ty.FUTURE and typ.is_async:
            scope.futures.append(sym)
        return sym

    def seen(self, name: str) -> Optional[bindings.Seen]:
        """What an assignment to `name` finds, in the terms of the one assignment rule
        (frontend/bindings.py)."""
        sym = self.lookup(name)
        if sym is None:
            return None
        fixed = "a parameter" if sym.origin in ("param", "dim") else \
            "a bounded variable" if sym.origin in ("parallel", "with", "foreach") else ""
        return bindings.Seen(mutable=sym.mutable, scalar=sym.type.kind in ASSIGNED_KINDS,
                             local=name in self.scopes[-1].names, loc=sym.loc, fixed=fixed)

    def use(self, name: str, loc) -> Optional[Sym]:
        """Resolve a name as an expression uses it."""
        sym = self.lookup(name)
        if sym is None:
            if name not in PREDEFINED and "::" not in name:
                self.unresolved.append(len(self.errors))
                self.lenient_error(f"'{name}' is used before its declaration", loc)
            return None
        sym.uses += 1
        return sym

    @property
    def in_parallel(self) -> bool:
        return bool(self.parallel)

    def level(self) -> Optional[str]:
        """The innermost explicit parallel level, if any."""
        for _, lvl in reversed(self.parallel):
            if lvl.level:
                return lvl.level
        return None

    # ------------------------------------------------------------------ function
    def run(self) -> list[Diagnostic]:
        self.push("function")
        for p in self.fn.params:
            self._param(p)
        for rule in self.rules.get(A.FunctionDef, ()):
            rule(self, self.fn)
        self.block(self.fn.body, new_scope=False)
        for rule in self.exit_rules.get(A.FunctionDef, ()):
            rule(self, self.fn)
        self.pop()
        self._name_the_undeclared()
        return self.errors

    def _name_the_undeclared(self) -> None:
        """A use of a name the function never declares is 'not declared' (with a spelling
        hint among its names and the builtins), not 'used before its declaration'."""
        for i in self.unresolved:
            d = self.errors[i]
            name = d.message.split("'")[1]
            if name not in self.declared:
                hint = builtins.spelling_hint(name) or \
                    did_you_mean(name, self.declared | builtins.FUNCTIONS.keys())
                self.errors[i] = Diagnostic(d.severity, f"'{name}' is not declared{hint}", d.loc)

    def _param(self, p: A.Param) -> None:
        t = p.type
        for rule in self.rules.get(A.Param, ()):
            rule(self, p)
        if isinstance(t, A.MdSpanType):
            for d in t.dims or ():
                if isinstance(d, A.Name) and self.lookup(d.id) is None:
                    self.declare(d.id, Ty.INT_T, d.loc, origin="dim")
            rank = _type_rank(self, t)
            typ = T(Ty.DATA, rank=rank, elem=t.elem.name, storage=p.storage or "global")
            unknown = any(isinstance(d, A.DimWildcard) and d.kind == "??" for d in t.dims or ())
            self.declare(p.name, typ, p.loc, origin="param", global_param=p.storage == "global",
                         unknown_dim=unknown, dims=_static_dims(t))
        else:
            self.declare(p.name, Ty.scalar_of(t.name), p.loc, origin="param")

    # ------------------------------------------------------------------ statements
    def block(self, block: A.Block, new_scope: bool = True, kind: str = "block") -> None:
        if new_scope:
            self.push(kind)
        for s in block.stmts:
            self.stmt(s)
        if new_scope:
            self.pop()

    def stmt(self, s: A.Stmt) -> None:
        walk = STMT_WALK.get(type(s), Checker._generic_stmt)
        walk(self, s)

    def run_rules(self, node) -> None:
        for rule in self.rules.get(type(node), ()):
            rule(self, node)

    def _generic_stmt(self, s: A.Stmt) -> None:
        """Statements that declare nothing: type the expressions, apply the rules."""
        for value in _expr_fields(s):
            self.expr(value)
        self.run_rules(s)

    def _compound(self, s, kind: str, declare: Callable[[], None], body: A.Block) -> None:
        """A statement with a body: its own names live in the body's scope."""
        self.block_stack.append(s)
        self.push(kind)
        declare()
        self.run_rules(s)
        self.block(body, new_scope=False)
        for rule in self.exit_rules.get(type(s), ()):
            rule(self, s)
        self.pop()
        self.block_stack.pop()

    def s_Block(self, s: A.Block) -> None:
        self.block(s)

    def s_If(self, s: A.If) -> None:
        self.expr(s.cond)
        self.run_rules(s)
        self.block_stack.append(s)
        self.block(s.then)
        if s.orelse is not None:
            self.block(s.orelse)
        self.block_stack.pop()

    def s_While(self, s: A.While) -> None:
        self.expr(s.cond)
        self.loops += 1
        self._compound(s, "loop", lambda: None, s.body)
        self.loops -= 1

    def s_ParallelBy(self, s: A.ParallelBy) -> None:
        for lvl in s.levels:
            for b in lvl.bounds:
                self.expr(b)
        self.run_rules(s)
        self.block_stack.append(s)
        for lvl in s.levels:     # `p by 2, q by 12` nests q inside p
            self.push("parallel")
            self.parallel.append((s, lvl))
            self.inthreads.append([])
            rank = len(lvl.elements) or _bound_rank(self, lvl.bounds)
            bounds = lvl.bounds[0] if len(lvl.bounds) == 1 else A.MdSpanLit(
                elements=lvl.bounds, loc=lvl.loc)
            if lvl.var:
                self.declare(lvl.var, T(Ty.BOUNDED, rank=rank), lvl.loc, origin="parallel",
                             divergent=True, level=lvl.level,
                             extent=self._extent(bounds, 0, rank == 1))
            for i, name in enumerate(lvl.elements):
                self.declare(name, T(Ty.BOUNDED, rank=1), lvl.loc, origin="parallel",
                             divergent=True, level=lvl.level, extent=self._extent(bounds, i))
        saved_loops, self.loops = self.loops, 0   # `break` does not leave a parallel body
        self.block(s.body, new_scope=False)
        self.loops = saved_loops
        for rule in self.exit_rules.get(A.ParallelBy, ()):
            rule(self, s)
        for _ in s.levels:
            self.inthreads.pop()
            self.parallel.pop()
            self.pop()
        self.block_stack.pop()

    def s_InThreads(self, s: A.InThreads) -> None:
        self.expr(s.cond)
        self.run_rules(s)
        self.inthreads[-1].append(s)
        self.block_stack.append(s)
        self.block(s.body, kind="inthreads")
        self.block_stack.pop()
        self.inthreads[-1].pop()

    def s_With(self, s: A.With) -> None:
        for b in s.bindings:
            self.expr(b.domain)

        def declare() -> None:
            for b in s.bindings:
                dom = self.types.get(id(b.domain), Ty.UNKNOWN_T)
                rank = len(b.elements) or dom.rank
                if b.name:
                    self.declare(b.name, T(Ty.BOUNDED, rank=rank), b.loc, origin="with",
                                 extent=self._extent(b.domain, 0, len(b.elements) <= 1))
                for i, e in enumerate(b.elements):
                    self.declare(e, T(Ty.BOUNDED, rank=1), _element_loc(b, i), origin="with",
                                 extent=self._extent(b.domain, i))
        self._compound(s, "with", declare, s.body)

    def s_Foreach(self, s: A.Foreach) -> None:
        for b in s.bindings:
            self.expr(b.domain)
        for r in s.ranges:
            for e in (r.lower, r.upper, r.step):
                if e is not None:
                    self.expr(e)
        for a in s.attrs:
            for e in a.args:
                if not isinstance(e, A.Name):   # `vectorize(x, 4)` names a loop variable
                    self.expr(e)

        def declare() -> None:
            for b in s.bindings:      # `foreach i in [n]`: declares and iterates i
                if b.name:
                    self.declare(b.name, T(Ty.BOUNDED, rank=len(b.elements) or None), b.loc,
                                 origin="foreach",
                                 extent=self._extent(b.domain, 0, len(b.elements) <= 1))
                for i, e in enumerate(b.elements):
                    self.declare(e, T(Ty.BOUNDED, rank=1), _element_loc(b, i), origin="foreach",
                                 extent=self._extent(b.domain, i))
            seen = set()          # a repeated local name is the iteration rules' to report
            for r in s.ranges:
                if r.var != r.bound and r.var not in seen:  # `foreach c = i(1:)`: c is local
                    seen.add(r.var)
                    self.declare(r.var, T(Ty.BOUNDED, rank=1), r.loc, origin="foreach")
        self.loops += 1
        self._compound(s, "loop", declare, s.body)
        self.loops -= 1

    def s_Apply(self, s: A.Apply) -> None:
        self.expr(s.domain)

        def declare() -> None:
            for name in s.indices:
                self.declare(name, T(Ty.BOUNDED, rank=1), s.loc, origin="with")
        self._compound(s, "apply", declare, s.body)

    # -- declarations ---------------------------------------------------------
    def s_ScalarDecl(self, s: A.ScalarDecl) -> None:
        init = self.expr(s.init) if s.init is not None else None
        self.run_rules(s)
        typ = Ty.scalar_of(s.type.name) if s.type and s.type.name != "auto" else (init or
                                                                                 Ty.UNKNOWN_T)
        mutable = bindings.decl_mutable(s)
        changes = s.mutable or (mutable and s.name in self.written)
        self.declare(s.name, typ, s.loc, mutable=mutable, written_mutable=s.mutable,
                     divergent=self.divergent(s.init) if s.init is not None else False,
                     unknown_dim=s.init is not None and self.from_unknown(s.init),
                     const=None if changes or s.init is None else self.fold(s.init))

    def s_ITupleDecl(self, s: A.ITupleDecl) -> None:
        v = self.expr(s.value)
        self.run_rules(s)
        rank = s.rank if s.rank is not None else v.rank
        self.declare(s.name, T(Ty.ITUPLE, rank=rank), s.loc,
                     divergent=self.divergent(s.value), unknown_dim=self.from_unknown(s.value))

    def s_MdSpanDecl(self, s: A.MdSpanDecl) -> None:
        v = self.expr(s.value)
        self.run_rules(s)
        rank = s.rank if s.rank is not None else v.rank
        self.declare(s.name, T(Ty.MDSPAN, rank=rank), s.loc,
                     unknown_dim=self.from_unknown(s.value))

    def s_BufferDecl(self, s: A.BufferDecl) -> None:
        for d in list(s.type.dims or ()) + list(s.array_dims):
            if not isinstance(d, A.DimWildcard):
                self.expr(d)
        if s.init is not None:
            self.expr(s.init)
        self.run_rules(s)
        self.declare(s.name, T(Ty.DATA, rank=_type_rank(self, s.type), elem=s.type.elem.name,
                               storage=s.storage, array=len(s.array_dims) or None),
                     s.loc, origin="buffer", dims=None if s.array_dims else _static_dims(s.type))

    def s_FragDecl(self, s: A.FragDecl) -> None:
        for d in (list(s.type.dims or ()) if s.type else []) + list(s.array_dims):
            if not isinstance(d, A.DimWildcard):
                self.expr(d)
        if s.init is not None:
            self.expr(s.init)
        self.run_rules(s)
        rank = _type_rank(self, s.type) if s.type else None
        elem = s.type.elem.name if s.type else (s.elem.name if s.elem else None)
        self.declare(s.name, T(Ty.DATA, rank=rank, elem=elem, storage="local",
                               array=len(s.array_dims) or None), s.loc, origin="buffer")

    def s_EventDecl(self, s: A.EventDecl) -> None:
        for d in s.array_dims:
            self.expr(d)
        if s.thread_count is not None:
            self.expr(s.thread_count)
        self.run_rules(s)
        self.declare(s.name, T(Ty.EVENT, storage=s.storage, array=len(s.array_dims) or None),
                     s.loc, origin="event")

    def s_Assign(self, s: A.Assign) -> None:
        value = self.expr(s.value)
        target = s.target
        if isinstance(target, A.Name) and s.op == "=":
            sym = self.lookup(target.id)
            declares = bindings.assignment(target.id, "=", self.seen(target.id)).action == \
                bindings.DECLARE and not (sym is not None and (
                    sym.origin in ("param", "dim") or sym.type.kind == Ty.FUTURE))
            self.extra["assign_declares"] = declares
            self.run_rules(s)
            if declares:
                self.declare(target.id, _decl_type(value), target.loc,
                             divergent=self.divergent(s.value),
                             unknown_dim=self.from_unknown(s.value), const=self.fold(s.value),
                             sources=_selected_names(s.value))
            elif sym is not None:
                sym.uses += 1
                if sym.type.placeholder and value.kind == Ty.FUTURE:
                    sym.type = value.with_(placeholder=True)
            return
        self.extra["assign_declares"] = False
        self.expr(target)
        self.run_rules(s)

    def s_DmaOp(self, s: A.DmaOp) -> None:
        for e in (s.src, s.dst):
            if e is not None and not isinstance(e, A.StorageTarget):
                self.expr(e)
        for e in s.after:
            self.expr(e)
        if s.rows is not None:
            self.expr(s.rows)
        if s.pad is not None:
            for e in s.pad.low + s.pad.high + s.pad.mid + [s.pad.value]:
                self.expr(e)
        self.run_rules(s)
        if s.future:
            self._declare_future(s.future, _dma_future(self, s), s.loc)

    def _declare_future(self, name: str, typ: T, loc) -> None:
        sym = self.lookup(name)
        if sym is not None and sym.type.kind == Ty.FUTURE and (
                sym.type.placeholder or name not in self.scopes[-1].names):
            if sym.type.placeholder:   # `f = dma.any;` then `f = dma.copy.async ...`
                sym.type = typ.with_(placeholder=True)
                sym.uses += 1
                return
        if sym is not None and name in self.scopes[-1].names and sym.type.kind == Ty.FUTURE:
            sym.type = typ            # a future re-issued in its own scope (loops)
            return
        self.declare(name, typ, loc, origin="future")

    def s_MmaFill(self, s: A.MmaFill) -> None:
        self.expr(s.value)
        if not (s.declares and isinstance(s.target, A.Name)):
            self.expr(s.target)
        self.run_rules(s)
        if s.declares and isinstance(s.target, A.Name):
            self._declare_frag(s.target.id, s.target.loc)

    def s_MmaLoad(self, s: A.MmaLoad) -> None:
        self.expr(s.source)
        if s.target is not None and not (s.declares and isinstance(s.target, A.Name)):
            self.expr(s.target)
        self.run_rules(s)
        if s.declares and isinstance(s.target, A.Name):
            self._declare_frag(s.target.id, s.target.loc)

    def _declare_frag(self, name: str, loc) -> None:
        sym = self.lookup(name)
        if sym is not None and (sym.mutable or sym.origin == "frag"
                                or sym.type.kind == Ty.DATA):
            sym.uses += 1       # a fragment re-filled / re-loaded (in a loop)
            return
        if sym is not None and name in self.scopes[-1].names:
            return
        self.declare(name, T(Ty.DATA, rank=2, storage="local"), loc, origin="frag",
                     mutable=True)

    def s_MmaOp(self, s: A.MmaOp) -> None:
        for e in [s.acc, s.a, s.b] + ([s.metadata] if s.metadata else []) + s.scale:
            self.expr(e)
        self.run_rules(s)
        if s.future:
            self._declare_future(s.future, T(Ty.FUTURE, is_async=s.is_async, storage="mma"),
                                 s.loc)

    def s_BufferMap(self, s: A.BufferMap) -> None:
        for e in (s.source, s.offset, s.size):
            self.expr(e)
        self.run_rules(s)
        if not s.remap:
            src = self.types.get(id(s.source), Ty.UNKNOWN_T)
            self.declare(s.target, src.with_(storage=s.storage) if src.kind == Ty.DATA
                         else Ty.UNKNOWN_T, s.loc, origin="buffer")
        else:
            self.use(s.target, s.loc)

    def s_Swap(self, s: A.Swap) -> None:
        for name in s.names:
            self.use(name, s.loc)
        self.run_rules(s)

    def s_AsmStmt(self, s: A.AsmStmt) -> None:
        for op in s.outputs + s.inputs:
            self.expr(op.expr)
        self.run_rules(s)

    # ------------------------------------------------------------------ expressions
    def expr(self, e) -> T:
        """Type `e` (children first), run its rules, remember the type."""
        if e is None:
            return Ty.UNKNOWN_T
        if isinstance(e, A.TypeRef):
            return Ty.scalar_of(e.name)
        stack = [(e, False)]
        while stack:      # post-order without recursion: expressions may nest deeply
            node, done = stack.pop()
            if done:
                self.types[id(node)] = self._type_of(node)
                for rule in self.rules.get(type(node), ()):
                    rule(self, node)
                continue
            stack.append((node, True))
            for child in reversed(self._children(node)):
                stack.append((child, False))
        return self.types.get(id(e), Ty.UNKNOWN_T)

    def co_callee(self, node) -> Optional[list]:
        """The `__co__` functions of the file `node` calls (frontend/co_calls.py), or None."""
        return co_calls.callee(self.fn, node, lambda name: self.lookup(name) is not None)

    def _children(self, e) -> list:
        """The sub-expressions the walk types: of a call of a `__co__` function, its
        arguments (its name is the function's, not a name of the scope)."""
        if self.co_callee(e) is not None:
            return co_calls.call_args(e)
        return _expr_children(e)

    def _type_of(self, node) -> T:
        funcs = self.co_callee(node)
        if funcs is not None:  # what the callee declares it returns (sema checks the call)
            return _declared_type(funcs[0].return_type) if len(funcs) == 1 else Ty.UNKNOWN_T
        typer = EXPR_TYPE.get(type(node))
        return typer(self, node) if typer else Ty.UNKNOWN_T

    def t(self, e) -> T:
        return self.types.get(id(e), Ty.UNKNOWN_T)

    def _extent(self, domain, i: int, single: bool = True) -> Optional[int]:
        """The constant extent of dimension `i` of a domain (`[4, 8]`, `8`)."""
        if not single:
            return None
        if isinstance(domain, A.MdSpanLit):
            return self.fold(domain.elements[i]) if i < len(domain.elements) else None
        return self.fold(domain) if i == 0 and self.t(domain).kind == Ty.INT else None

    def fold(self, e) -> Optional[int]:
        """The integer value of `e` when compiling: literals, immutable names of
        known value, and + - * / % of those (C semantics); else None."""
        if isinstance(e, A.Name):
            sym = self.lookup(e.id)
            return sym.const if sym is not None else None
        if isinstance(e, A.Unary) and e.op in ("-", "+"):
            v = self.fold(e.operand)
            return None if v is None else (-v if e.op == "-" else v)
        if isinstance(e, A.Binary) and e.op in ("+", "-", "*", "/", "%"):
            a, b = self.fold(e.lhs), self.fold(e.rhs)
            if a is None or b is None:
                return None
            return fold_int(A.Binary(op=e.op, lhs=A.IntLit(value=a, suffix="", text="", loc=e.loc),
                                     rhs=A.IntLit(value=b, suffix="", text="", loc=e.loc),
                                     loc=e.loc))
        return fold_int(e) if isinstance(e, A.IntLit) else None

    def from_unknown(self, e) -> bool:
        """Whether `e` reads a name derived from a `??` dimension."""
        for node in A.walk(e):
            if isinstance(node, A.Name):
                sym = self.lookup(node.id)
                if sym is not None and sym.unknown_dim:
                    return True
        return False

    def divergent(self, e) -> bool:
        """Whether `e` may differ between the threads of one parallel level:
        it names a parallel variable or a value derived from one, a mutable
        (which may have been assigned one), or calls something the walk cannot
        see into."""
        if e is None:
            return False
        for node in A.walk(e):
            if isinstance(node, A.Name):
                sym = self.lookup(node.id)
                if sym is None or sym.divergent or sym.mutable:
                    return True
            elif isinstance(node, (A.CallExpr, A.Call, A.MethodCall, A.Index)):
                return True
        return False


# ---------------------------------------------------------------------- helpers

def _expr_fields(s) -> list:
    out = []
    for name in s.__dataclass_fields__:
        if name == "loc":
            continue
        v = getattr(s, name)
        if isinstance(v, A.Expr):
            out.append(v)
        elif isinstance(v, list):
            out += [x for x in v if isinstance(x, A.Expr)]
    return out


def _expr_children(e) -> list:
    if isinstance(e, A.Call):     # template arguments may be C++ names
        return list(e.args)
    if isinstance(e, A.SizeOf) and isinstance(e.operand, A.TypeRef):
        return []
    out = []
    for name in e.__dataclass_fields__:
        if name in ("loc", "parenthesized"):
            continue
        v = getattr(e, name)
        if isinstance(v, A.Expr):
            out.append(v)
        elif isinstance(v, list):
            out += [x for x in v if isinstance(x, A.Expr)]
    return out


STMT_WALK: dict[type, Callable] = {
    A.Block: Checker.s_Block,
    A.If: Checker.s_If,
    A.While: Checker.s_While,
    A.ParallelBy: Checker.s_ParallelBy,
    A.InThreads: Checker.s_InThreads,
    A.With: Checker.s_With,
    A.Foreach: Checker.s_Foreach,
    A.Apply: Checker.s_Apply,
    A.ScalarDecl: Checker.s_ScalarDecl,
    A.ITupleDecl: Checker.s_ITupleDecl,
    A.MdSpanDecl: Checker.s_MdSpanDecl,
    A.BufferDecl: Checker.s_BufferDecl,
    A.FragDecl: Checker.s_FragDecl,
    A.EventDecl: Checker.s_EventDecl,
    A.Assign: Checker.s_Assign,
    A.DmaOp: Checker.s_DmaOp,
    A.MmaFill: Checker.s_MmaFill,
    A.MmaLoad: Checker.s_MmaLoad,
    A.MmaOp: Checker.s_MmaOp,
    A.BufferMap: Checker.s_BufferMap,
    A.Swap: Checker.s_Swap,
    A.AsmStmt: Checker.s_AsmStmt,
}


def _declared_type(t) -> T:
    """The type a function's written return type gives its call's value (`auto`, and a
    shape named by the callee's own names, leave what sema finds)."""
    if isinstance(t, A.MdSpanType):
        fixed = t.rank if t.rank is not None else len(t.dims) if t.dims and (
            len(t.dims) > 1 or isinstance(t.dims[0], A.IntLit)) else None
        return T(Ty.DATA, rank=fixed, elem=t.elem.name, storage="global")
    if isinstance(t, A.TypeRef) and t.name not in ("auto", "void"):
        return Ty.scalar_of(t.name)
    return Ty.UNKNOWN_T


def _element_loc(b: A.WithBinding, i: int):
    """Where the `i`-th name of a matcher `{x, y}` is written (the binding's place when the
    AST was built without them)."""
    return b.element_locs[i] if i < len(b.element_locs) else b.loc
