"""Building the AST: functions, declarations and control statements."""
from __future__ import annotations

from typing import Optional

from lark import Token

from . import ast
from .astbuild_exprs import BuilderBase, mark_dim_indices, nodes

PARALLEL_LEVELS = ("device", "cluster", "block", "group-4", "group", "thread", "term")
SYNC_KINDS = ("shared", "global", "local", "barrier", "fence")



class _Names(list):
    """A `name_list`: the names, and in `.locs` where each is written."""

    def __init__(self, names, locs) -> None:
        super().__init__(names)
        self.locs = locs


def _as_list(x) -> list:
    """Statement callbacks return one statement or a list (`int a, b;`)."""
    if x is None:
        return []
    return x if isinstance(x, list) else [x]


class StmtBuilder(BuilderBase):

    # ------------------------------------------------------------ functions

    def start(self, c):
        return c[0]

    def function(self, c):
        _, ret, name, _, params, _, body = c
        return ast.FunctionDef(name=str(name), return_type=ret, params=params or [],
                               body=body, loc=self.tloc(c[0]))

    def params(self, c):
        return nodes(c)

    def param(self, c):
        storage, vtype, amp, name = c
        if storage is not None and str(storage) != "global":
            self.error(f"the {storage} data can not be used as a parameter", self.tloc(storage))
        return ast.Param(name=str(name) if name is not None else None, type=vtype,
                         storage=str(storage) if storage is not None else None,
                         by_ref=amp is not None, loc=self.loc(c))

    # ------------------------------------------------------------ blocks

    def block(self, c):
        stmts = []
        for item in c[1:-1]:
            stmts.extend(_as_list(item))
        return ast.Block(stmts=stmts, loc=self.tloc(c[0]))

    def stmt_or_empty(self, c):
        return None if isinstance(c[0], Token) else c[0]

    def body(self, c):
        item = c[0]
        if isinstance(item, ast.Block):
            return item
        if isinstance(item, Token):          # `;`: nothing
            return ast.Block(stmts=[], loc=self.tloc(item))
        stmts = _as_list(item)
        return ast.Block(stmts=stmts, loc=stmts[0].loc if stmts else self.loc(c))

    def stmt(self, c):
        return c[0]

    def attributes(self, c):
        return c

    def attribute(self, c):
        return ast.Attribute(name=str(c[2]), args=c[4] or [], loc=self.tloc(c[0]))

    def attributed_stmt(self, c):
        attrs, stmt = c
        target = stmt[0] if isinstance(stmt, list) and len(stmt) == 1 else stmt
        for attr in attrs:
            self._attach_attribute(attr, target)
        return stmt

    def _attach_attribute(self, attr, stmt) -> None:
        if attr.name in ("launch_bounds", "maxnreg"):
            if isinstance(stmt, ast.ParallelBy):
                stmt.attributes.append(attr)
                return
            self.error(f"'[[{attr.name}]]' only applies to a parallel-by statement", attr.loc)
        elif attr.name == "schedule":
            if isinstance(stmt, ast.MmaOp):
                stmt.issue_order = self._issue_order(attr)
                return
            self.error("[[schedule(k_tiles(...))]] only applies to an MMA execution statement",
                       attr.loc)
        elif attr.name == "exp2_split":
            if isinstance(stmt, ast.Apply):
                stmt.exp2_split = self._fraction(attr)
                return
            self.error("'[[exp2_split]]' only applies to an apply statement", attr.loc)
        else:
            self.error(f"unknown attribute '{attr.name}'", attr.loc)

    def _fraction(self, attr) -> Optional[float]:
        """`[[exp2_split(f)]]`: f of the apply's __exp2f elements on the FMA pipes, a
        constant in [0, 1] in sixteenths (the split repeats every 16 elements)."""
        args = attr.args
        lit = args[0] if len(args) == 1 else None
        v = lit.value if isinstance(lit, (ast.IntLit, ast.FloatLit)) else None
        if v is None or not 0 <= v <= 1 or (v * 16) != int(v * 16):
            self.error("'[[exp2_split(f)]]' takes one constant fraction in [0, 1], in "
                       "sixteenths (0, 0.25, 0.5, ...)", attr.loc)
            return None
        return float(v)

    def _issue_order(self, attr) -> list[int]:
        args = attr.args
        ok = (len(args) == 1 and isinstance(args[0], ast.CallExpr) and args[0].func == "k_tiles")
        if not ok:
            self.error("expected 'k_tiles(...)' inside the MMA schedule attribute", attr.loc)
            return []
        order = []
        for a in args[0].args:
            if isinstance(a, ast.IntLit):
                order.append(a.value)
            else:
                self.error("mma issue order entries must be non-negative integers", a.loc)
        return order

    def pragma_stmt(self, c):
        text = str(c[0])
        words = text.lstrip("#").split()
        if len(words) >= 4 and words[1] in ("croq", "choreo") and words[2] == "intrinsic":
            if words[3] in ("prefix", "namespace") and len(words) == 5:
                return ast.IntrinsicDirective(kind=words[3], value=words[4], loc=self.tloc(c[0]))
            self.error("expected 'prefix <name>' or 'namespace <name>' after "
                       f"'#pragma {words[1]} intrinsic'", self.tloc(c[0]))
        return ast.Pragma(text=text, loc=self.tloc(c[0]))

    # ------------------------------------------------------------ simple statements

    def expr_stmt(self, c):
        expr = c[0]
        if isinstance(expr, ast.CallExpr) and expr.func.startswith("__pragma_croq_intrinsic_"):
            return self._intrinsic_call(expr)
        if not isinstance(expr, (ast.CallExpr, ast.Call, ast.DimOf, ast.Unary)):
            self.error("expected a statement: an assignment, a declaration or a call", expr.loc)
        return ast.ExprStmt(expr=expr, loc=expr.loc)

    def _intrinsic_call(self, call):
        """`__pragma_croq_intrinsic_prefix("p_")`: the preprocessed `#pragma` form."""
        kind = call.func[len("__pragma_croq_intrinsic_"):]
        if kind in ("prefix", "namespace") and len(call.args) == 1 \
                and isinstance(call.args[0], ast.StringLit):
            return ast.IntrinsicDirective(kind=kind, value=call.args[0].value, loc=call.loc)
        self.error("malformed intrinsic directive", call.loc)
        return ast.ExprStmt(expr=call, loc=call.loc)

    def assign_op(self, c):
        return c[0]

    def assign_value(self, c):
        return c[0]

    def assign_stmt(self, c):
        target, op, value = c
        if isinstance(value, (ast.DmaOp, ast.MmaOp, ast.MmaFill, ast.MmaLoad,
                              ast.MmaStore, ast.MmaScale, ast.BufferMap)):
            return self._bind_future(target, op, value)
        if not isinstance(target, (ast.Name, ast.MethodCall, ast.Index, ast.Member)):
            self.error("this expression can not be assigned to", target.loc)
        return ast.Assign(target=target, op=str(op), value=value, loc=target.loc)

    def _bind_future(self, target, op, value):
        """`f = dma.copy ...`, `acc = mma.fill 0`: the operation names its result."""
        if not isinstance(target, ast.Name) or str(op) != "=":
            self.error("the result of a DMA, MMA or map operation must be bound with "
                       "'name = ...'", target.loc)
            return value
        value.loc = target.loc
        if isinstance(value, ast.DmaOp):
            value.future = target.id
        elif isinstance(value, ast.BufferMap):
            value.target = target.id
        elif isinstance(value, ast.MmaFill):
            if not value.declares:
                self.error("'mma.fill acc, v' fills an existing fragment and has no result",
                           target.loc)
            value.target = target
        elif isinstance(value, ast.MmaLoad):
            if not value.declares:
                self.error("'mma.load src, frag' loads into an existing fragment and has "
                           "no result", target.loc)
            value.target = target
        elif isinstance(value, ast.MmaOp):
            if not value.is_async:
                self.error("only an asynchronous MMA ('.async') has a result to bind",
                           target.loc)
            value.future = target.id
        else:
            self.error("this MMA operation has no result to bind", target.loc)
        return value

    def init_mark(self, c):
        return c[0]

    def rank(self, c):
        return self.rank_value(c[1])

    def array_dims(self, c):
        return nodes(c)

    def shape_decl_short(self, c):
        name, _, value = c
        return ast.MdSpanDecl(name=str(name), rank=None, value=_derivation(value),
                              loc=self.tloc(name))

    def shape_decl(self, c):
        _, rank, name, mark, value = c
        if str(mark) == "=":
            self.error("must use ':' to initialize a mdspan.", self.tloc(mark))
        return ast.MdSpanDecl(name=str(name), rank=rank, value=_derivation(value),
                              loc=self.tloc(name))

    def ituple_decl(self, c):
        _, rank, name, array, mark, value = c
        if array is not None:
            self.error("no ituple array is allowed.", self.tloc(name))
        elif mark is None:
            self.error("an ituple must be initialized.", self.tloc(name))
        elif str(mark) == ":":
            self.error("must use '=' to initialize an ituple.", self.tloc(mark))
        return ast.ITupleDecl(name=str(name), rank=rank, value=value, loc=self.tloc(name))

    def scalar_items(self, c):
        return nodes(c)

    def scalar_item(self, c):
        # (name, init): `x = e` and `x {e}` both initialise, at child 2
        return (c[0], c[2])

    def scalar_decl(self, c):
        storage, mutable, tname, items = c
        return [ast.ScalarDecl(name=str(n), type=tname, init=init, mutable=mutable is not None,
                               storage=str(storage) if storage is not None else None,
                               loc=self.tloc(n))
                for n, init in items]

    def untyped_scalar_decl(self, c):
        return [ast.ScalarDecl(name=str(n), type=None, init=init, mutable=True, loc=self.tloc(n))
                for n, init in c[1]]

    def buffer_items(self, c):
        return nodes(c)

    def buffer_item(self, c):
        return (c[0], c[1] or [], c[2])

    def buffer_init(self, c):
        return c[1]

    def _spanned(self, tname, dims):
        shape, rank = dims
        return ast.MdSpanType(elem=tname, dims=shape, rank=rank, loc=tname.loc)

    def buffer_decl(self, c):
        storage, tname, dims, items = c
        mtype = self._spanned(tname, dims)
        return [ast.BufferDecl(name=str(n), type=mtype, array_dims=arr, init=init,
                               storage=str(storage) if storage is not None else None,
                               loc=self.tloc(n))
                for n, arr, init in items]

    def frag_decl(self, c):
        _, tname, dims, items = c[:4]
        # [":" level_name ["in" NAME]]: the colon token, the level, then "in" and the name
        level = c[5] if len(c) > 5 else None
        host = c[-1] if len(c) > 7 else None  # `: block in s`: in the columns of accumulator s
        mtype = self._spanned(tname, dims)
        return [ast.FragDecl(name=str(n), type=mtype, elem=tname, array_dims=arr, init=init,
                             level=level, host=str(host) if host is not None else None,
                             host_loc=self.tloc(host) if host is not None else None,
                             loc=self.tloc(n))
                for n, arr, init in items]

    def frag_elem(self, c):
        return c[1]

    def frag_fill_decl(self, c):
        _, elem, name, arr, _, init, _ = c
        return ast.FragDecl(name=str(name), type=None, elem=elem, array_dims=arr or [],
                            init=init, loc=self.tloc(name))

    def event_count(self, c):
        return c[1]

    def event_items(self, c):
        return nodes(c)

    def event_item(self, c):
        name, arr, eq, init = c
        if init is not None and str(init) != "ready":
            self.error("event initializer must be 'ready'", self.tloc(init))
        return (name, arr or [], init is not None)

    def event_decl(self, c):
        storage, _, count, items = c
        return [ast.EventDecl(name=str(n), storage=str(storage) if storage is not None else None,
                              array_dims=arr, ready=ready, thread_count=count, loc=self.tloc(n))
                for n, arr, ready in items]

    def wait_stmt(self, c):
        return ast.Wait(targets=c[1], loc=self.tloc(c[0]))

    def scope_mod(self, c):
        return c[1]

    def trigger_stmt(self, c):
        _, scope, targets, _, after = c
        if scope is not None and str(scope) != "cluster":
            self.error("only 'cluster' scope is supported for trigger", self.tloc(scope))
        return ast.Trigger(targets=targets, after=after or [],
                           scope=str(scope) if scope is not None else None, loc=self.tloc(c[0]))

    def swap_kw(self, c):
        return c[0]

    def name_list(self, c):
        return _Names([str(t) for t in c if t.type == "NAME"],
                      [self.tloc(t) for t in c if t.type == "NAME"])

    def swap_stmt(self, c):
        kw = c[0]
        names = c[2] if len(c) == 4 else c[1]
        if str(kw) == "swap" and len(names) != 2:
            self.error("builtin function 'swap' accepts exactly two parameters", self.tloc(kw))
        if str(kw) == "rotate" and len(names) < 2:
            self.error("builtin function 'rotate' accepts two or more parameters", self.tloc(kw))
        return ast.Swap(names=list(names), rotate=str(kw) == "rotate", loc=self.tloc(kw))

    def return_stmt(self, c):
        return ast.Return(value=c[1], loc=self.tloc(c[0]))

    def break_stmt(self, c):
        return ast.Break(loc=self.tloc(c[0]))

    def continue_stmt(self, c):
        return ast.Continue(loc=self.tloc(c[0]))

    def yield_stmt(self, c):
        return ast.Yield(loc=self.tloc(c[0]))

    def fence_space(self, c):
        return c[1]

    def sync_stmt(self, c):
        kind, level, space = str(c[2]), c[4], c[5]
        if kind not in SYNC_KINDS:
            self.error(f"unknown synchronization 'sync.{kind}'", self.tloc(c[2]))
        if kind in ("barrier", "fence") and level is None:
            self.error(f"'sync.{kind}' needs a level: 'sync.{kind} : block'", self.tloc(c[2]))
        return ast.Sync(kind=kind, level=level, space=str(space) if space is not None else None,
                        loc=self.tloc(c[0]))

    def comptime_call_stmt(self, c):
        name = str(c[0])
        if name not in ("print", "println"):
            self.error(f"'{name}!' is not a compile-time builtin", self.tloc(c[0]))
        call = ast.CallExpr(func=name, args=c[3] or [], comptime=True, loc=self.tloc(c[0]))
        return ast.ExprStmt(expr=call, loc=call.loc)

    def inline_cpp_stmt(self, c):
        return ast.InlineCpp(code=c[2].value, loc=self.tloc(c[0]))

    # ------------------------------------------------------------ parallel

    def async_mod(self, c):
        return True

    def stream_bind(self, c):
        return c[1]

    def para_levels(self, c):
        return nodes(c)

    def parallel_stmt(self, c):
        _, is_async, stream, levels, body = c
        return ast.ParallelBy(levels=levels, is_async=bool(is_async),
                              stream=str(stream) if stream is not None else None,
                              attributes=[], body=body, loc=self.tloc(c[0]))

    def para_level(self, c):
        level, note = c
        if note is not None:
            level.level, level.device_target, level.cooperative = note
        return level

    def para_anon(self, c):
        return ast.ParallelLevel(var=None, elements=[], bounds=[c[1]], bracketed=False,
                                 loc=self.tloc(c[0]))

    def para_named(self, c):
        name, _, bound = c
        bounds = [bound]
        if isinstance(bound, ast.MdSpanLit) and not bound.parenthesized:
            # `p by [8]` means `p by 8`; several bounds need `{a, b} by [...]`
            if len(bound.elements) > 1:
                self.error(f"The parallel variable '{name}' can not be assigned multiple "
                           "bounds.", self.tloc(name))
            bounds = bound.elements[:1]
        return ast.ParallelLevel(var=str(name), elements=[], bounds=bounds, bracketed=False,
                                 loc=self.tloc(name))

    def para_grouped(self, c):
        var = str(c[0]) if str(c[1]) == "=" else None
        names = next(x for x in c if isinstance(x, list) and all(isinstance(n, str) for n in x))
        bounds = c[-2]
        seen = set()
        for n in ([var] if var else []) + names:
            if n in seen:
                self.error(f"the parallel variable '{n}' has been used in the same "
                           "parallel-by block", self.tloc(c[0]))
            seen.add(n)
        return ast.ParallelLevel(var=var, elements=list(names), bounds=bounds, bracketed=True,
                                 loc=self.tloc(c[0]))

    def level_note(self, c):
        _, level, target, coop = c
        if coop is not None and str(coop) != "cooperative":
            self.error(f"expected 'cooperative' but got '{coop}'", self.tloc(coop))
        if target is not None and level != "device":
            self.error("parameterized level annotation is only valid for 'device'",
                       self.tloc(c[0]))
        return level, str(target) if target is not None else None, coop is not None

    def level_name(self, c):
        name, dash, num = c
        text = str(name) + (f"-{num}" if dash is not None else "")
        if text not in PARALLEL_LEVELS:
            self.error(f"unknown parallel level '{text}' (expected one of: "
                       f"{', '.join(PARALLEL_LEVELS)})", self.tloc(name))
        return text

    def device_target(self, c):
        return c[1]

    def coop_mark(self, c):
        return c[1]

    def inthreads_stmt(self, c):
        _, is_async, _, cond, _, body = c
        return ast.InThreads(cond=cond, is_async=bool(is_async), body=body, loc=self.tloc(c[0]))

    # ------------------------------------------------------------ loops

    def withins(self, c):
        return nodes(c)

    def within_named(self, c):
        return ast.WithBinding(name=str(c[0]), elements=[], domain=c[2], loc=self.tloc(c[0]))

    def within_grouped(self, c):
        name = str(c[0]) if str(c[1]) == "=" else None
        names = c[3] if name is not None else c[1]
        return ast.WithBinding(name=name, elements=list(names), domain=c[-1],
                               loc=self.tloc(c[0]), element_locs=list(names.locs))

    def where_clause(self, c):
        return nodes(c[1:])

    def where_bind(self, c):
        return ast.WhereBind(lhs=str(c[0]), rhs=str(c[2]), loc=self.tloc(c[0]))

    def with_stmt(self, c):
        _, bindings, where, body = c
        return ast.With(bindings=bindings, where=where or [], body=body, loc=self.tloc(c[0]))

    def foreach_in(self, c):
        _, bindings, attrs, body = c
        return ast.Foreach(ranges=[], bindings=bindings, attrs=attrs or [], body=body,
                           loc=self.tloc(c[0]))

    def foreach_ranges(self, c):
        _, ranges, attrs, body = c
        return ast.Foreach(ranges=ranges, bindings=[], attrs=attrs or [], body=body,
                           loc=self.tloc(c[0]))

    def loop_ranges(self, c):
        return nodes(c)

    def loop_range(self, c):
        name, bounds = c
        return self._range(name, name, bounds)

    def loop_range_alias(self, c):
        return self._range(c[0], c[2], c[3])

    def _range(self, var, bound, bounds):
        lower = upper = step = None
        if bounds is not None:
            lower, upper, step = bounds
        return ast.LoopRange(var=str(var), bound=str(bound), lower=lower, upper=upper,
                             step=step, sliced=bounds is not None, loc=self.tloc(var))

    def range_bounds(self, c):
        _, lower, _, upper, _, step, _ = c
        return lower, upper, step

    def loop_suffixes(self, c):
        return nodes(c)

    def loop_suffix(self, c):
        name, _, args, _ = c
        if str(name) not in ("unroll", "vectorize"):
            self.error(f"unknown loop annotation '{name}' (expected 'unroll' or 'vectorize')",
                       self.tloc(name))
        return ast.LoopAttr(name=str(name), args=args or [], loc=self.tloc(name))

    def apply_stmt(self, c):
        return ast.Apply(indices=list(c[2]), domain=c[5], body=c[6], loc=self.tloc(c[0]))

    def while_stmt(self, c):
        return ast.While(cond=c[2], body=c[4], loc=self.tloc(c[0]))

    def if_stmt(self, c):
        return ast.If(cond=c[2], then=c[4], orelse=c[6], loc=self.tloc(c[0]))


def _derivation(value):
    """In `sp : base[(1), (0)]` a parenthesised index picks a dimension."""
    if isinstance(value, ast.Index):
        value.indices = mark_dim_indices(value.indices)
    return value
