"""A call of another `__co__` function from host code: one `ir.HostCall`.

`b = f(x, n);`, `call f(x, n);` and `f(x);` (frontend/co_calls.py says which nodes are
calls) run `f` as co-mock runs it: its tensor parameters are the caller's tensors
(by reference: its writes are the caller's), its scalar parameters take the values,
and `b` names what it returns, a tensor (a host buffer of the caller, the returned
tensor itself) or a number (a host variable). The arguments are read against the
callee's IR (`Callees` builds each function once): its parameters' element types,
ranks and fixed dimensions, and the shape of its result in the caller's terms.

Refused by name: a call inside an expression (the host calls a function as a
statement), a recursive call, a call of an overloaded name, a view or a shared or
local buffer as an argument (whole tensors are passed), a scalar argument read from
tensor elements; inside a parallel region (device code), the rule checks' refusal
(choreo_py/check/context.py), in their words.
"""
from __future__ import annotations

from typing import Callable, Optional

from ..frontend import ast as A
from ..frontend import bindings, co_calls
from .. import ir
from ..diagnostics import ChoreoError
from ..ir import build as B
from ..ir.printer import shape as print_shape
from .exprs import err
from .values import Refused, Scalar, Tensor, Unsupported, kind_of

#: The forms a call takes as an expression.
CALL_FORMS = (A.DimOf, A.CallExpr, A.Call)


class RecursiveCall(Unsupported):
    """A call of a function whose IR is being built (directly or through others)."""


class Callees:
    """The IR of a program's functions as their callers need it, each built once by
    `build(func, callees)` (sema's build; a driver's may run the passes too), the error
    of one that does not build kept and raised again."""

    def __init__(self, build: Callable) -> None:
        self.build = build
        self.done: dict[int, object] = {}
        self.busy: set[int] = set()

    def get(self, func: A.FunctionDef, loc=None) -> ir.Function:
        key = id(func)
        if key in self.busy:
            raise RecursiveCall(f"a recursive call of the __co__ function '{func.name}'", loc)
        if key not in self.done:
            self.busy.add(key)
            try:
                self.done[key] = self.build(func, self)
            except ChoreoError as e:
                self.done[key] = e
            finally:
                self.busy.discard(key)
        got = self.done[key]
        if isinstance(got, ChoreoError):
            raise got
        return got


class CoCallBuilder:
    """Mixin of KernelBuilder (needs value, scalar, emit, scope, locals, callees)."""

    def co_callee(self, node) -> Optional[list]:
        """The `__co__` functions `node` calls, or None (frontend/co_calls.py)."""
        if type(node) not in CALL_FORMS:
            return None
        return co_calls.callee(self.func, node, lambda name: self.scope.lookup(name) is not None)

    def is_co_call(self, s: A.Stmt) -> bool:
        """Whether the statement `s` is a call of a `__co__` function."""
        form = co_calls.call_statement(s)
        return form is not None and self.co_callee(form[0]) is not None

    def holds_co_call(self, s: A.Stmt) -> bool:
        """Whether `s` calls a `__co__` function somewhere inside it (its host code runs on
        the host, not in a region of one instance)."""
        return any(self.co_callee(n) is not None for n in A.walk(s))

    def co_call_elsewhere(self, node) -> Unsupported:
        """The refusal of a call met where no call statement of the host is: in a kernel
        (the rule checks' words), or inside an expression of host code."""
        name = co_calls.called_name(node)
        if not self.on_host:
            refusal = co_calls.in_kernel_call(node)
            return Refused(refusal.message, refusal.loc)
        return Unsupported(f"a call of the __co__ function '{name}' inside an expression (the "
                           f"host calls one as a statement: 'b = {name}(...);' or "
                           f"'call {name}(...);')", node.loc)

    # ------------------------------------------------------------ the call statement
    def host_call(self, s: A.Stmt) -> None:
        node, target = co_calls.call_statement(s)
        name = co_calls.called_name(node)
        funcs = self.co_callee(node)
        if len(funcs) > 1:
            raise Unsupported(f"a call of the overloaded __co__ function '{name}'", node.loc)
        callee = self._callee_ir(funcs[0], node.loc)
        tensors, scalars, subst = self._arguments(funcs[0], callee, co_calls.call_args(node), node)
        result = None if target is None else self._result(callee, subst, target, node)
        self.emit(ir.HostCall(name, tuple(tensors), tuple(n for n, _ in scalars),
                              tuple(v for _, v in scalars), *(result or (None, None)),
                              loc=node.loc))
        if result is not None:
            self._bind_result(target, result, s)

    def _callee_ir(self, func: A.FunctionDef, loc) -> ir.Function:
        try:
            return self.callees.get(func, loc)
        except RecursiveCall as u:  # (through another function: said at this call)
            raise RecursiveCall(u.construct, loc) from None
        except Unsupported as u:
            raise Unsupported(f"a call of the __co__ function '{func.name}', whose IR does not "
                              f"build ({u.construct})", loc) from None
        except ChoreoError:
            raise Unsupported(f"a call of the __co__ function '{func.name}', whose IR does not "
                              "build (its errors are reported at its definition)", loc) from None

    def _arguments(self, func: A.FunctionDef, callee: ir.Function, args: list, node):
        """([(parameter, caller tensor)], [(parameter, value)], callee dimension -> caller
        expression) of the call's arguments, each checked against its parameter."""
        if any(p.name is None for p in func.params):
            raise Unsupported(f"a call of '{func.name}', which has an unnamed parameter", node.loc)
        if len(args) != len(func.params):
            raise err(f"'{func.name}' takes {len(func.params)} argument"
                      f"{'s' * (len(func.params) != 1)}, but the call passes {len(args)}", node)
        tensors, scalars, subst = [], [], {}
        params = {p.name: p for p in callee.params}
        for i, (p, a) in enumerate(zip(func.params, args), 1):
            if p.name in params:
                tensors.append((p.name, self._tensor_arg(params[p.name], a, i, func, subst)))
            else:
                scalars.append((p.name, self._scalar_arg(p, a, i, func, subst)))
        return tensors, scalars, subst

    def _tensor_arg(self, p: ir.Param, a: A.Expr, i: int, func, subst: dict) -> str:
        v = self.value(a)
        if not isinstance(v, Tensor):
            what = kind_of(v)
            if isinstance(v, Scalar):
                raise err(f"argument {i} of '{func.name}' is {what}; its parameter '{p.name}' "
                          f"is a {p.dtype} tensor", a)
            raise Unsupported(f"{what} as argument {i} of '{func.name}' (whole tensors and host "
                              "buffers are passed)", a.loc)
        q = v.param
        if q.dtype != p.dtype or len(q.shape) != len(p.shape):
            raise err(f"argument {i} of '{func.name}' is a {q.dtype} tensor of rank "
                      f"{len(q.shape)}; its parameter '{p.name}' is {p.dtype} of rank "
                      f"{len(p.shape)}", a)
        for d, e in zip(p.shape, q.shape):
            self._same_dim(d, e, subst, a, f"argument {i} of '{func.name}'")
        return q.name

    def _scalar_arg(self, p: A.Param, a: A.Expr, i: int, func, subst: dict) -> ir.Expr:
        dtype = p.type.name if isinstance(p.type, A.TypeRef) else None
        v = self.value(a, dtype)
        if not isinstance(v, Scalar):
            raise err(f"argument {i} of '{func.name}' is {kind_of(v)}; its parameter "
                      f"'{p.name}' is {dtype}", a)
        if any(isinstance(x, (ir.BufElem, ir.Elem)) for x in ir.expr_walk(v.expr)):
            raise Unsupported(f"a tensor element as argument {i} of '{func.name}' (name it "
                              "first: 'int x = t.at(i);')", a.loc)
        value = B.convert(v.expr, dtype) if dtype else v.expr
        self._same_dim(ir.Sym(p.name, value.dtype), value, subst, a, f"argument {i}")
        return value

    @staticmethod
    def _same_dim(d: ir.Expr, e: ir.Expr, subst: dict, node, what: str) -> None:
        """Binds the callee's dimension `d` to the caller's `e` (their constants agree)."""
        if isinstance(d, ir.Sym):
            d = subst.setdefault(d.name, e)
            if d is e:
                return
        n, m = B.as_int(d), B.as_int(e)
        if n is not None and m is not None and n != m:
            raise err(f"{what}: a dimension is {m}, where the function needs {n}", node)

    # ------------------------------------------------------------ the result
    def _result(self, callee: ir.Function, subst: dict, target: str, node):
        """(the caller's name for the result, its dtype for a scalar, None for a tensor)."""
        if callee.missing_return is not None:
            raise err(f"'{callee.name}' (declared to return '{callee.missing_return}') ends "
                      f"without a 'return' statement: its call has no value for '{target}'",
                      node)
        if callee.result is None:
            raise err(f"'{callee.name}' returns nothing (a void function): its call has no "
                      f"value for '{target}'", node)
        returned = next((p for p in callee.params + callee.locals if p.name == callee.result),
                        None)
        if returned is None:  # a number (sema/host.py): the caller's host variable `target`
            old = self.scope.lookup(target)
            updates = isinstance(old, Scalar) and old.mutable  # (assigned from a copy)
            return (self._fresh(f"{target}__value") if updates else target), \
                _scalar_result_type(callee)
        shape = tuple(self._caller_dim(d, subst, callee, node) for d in returned.shape)
        local = ir.Param(self._fresh(target), returned.dtype, shape, "global", loc=node.loc)
        self.locals.append(local)
        return local.name, None

    def _caller_dim(self, d: ir.Expr, subst: dict, callee, node) -> ir.Expr:
        missing = sorted(ir.sym_names(d) - set(subst))
        if missing:
            raise Unsupported(f"the result of '{callee.name}', whose shape names '{missing[0]}', "
                              "which no argument gives", node.loc)
        return B.substitute(d, subst)

    def _fresh(self, name: str) -> str:
        """A name of the caller's host program no other names (results are renamed apart)."""
        taken = self.__dict__.setdefault("_call_results", set())
        taken |= {p.name for p in self.params + self.locals}
        out, n = name, 1
        while out in taken or self.scope.lookup(out) is not None:
            out, n = f"{name}__{n}", n + 1
        taken.add(out)
        return out

    def _bind_result(self, target: str, result: tuple, s: A.Stmt) -> None:
        name, dtype = result
        old = self.scope.lookup(target)
        if dtype is None and isinstance(old, Tensor):  # co-mock copies into a named buffer
            return self._copy_result(self.locals[-1], old.param, s)
        if name != target:  # `m = f(a);` of a mutable variable m: assigned the value
            self.scope.bind(name, Scalar(ir.Sym(name, dtype), kind="let", loc=s.loc))
            value = B.assigned(ir.Sym(name, dtype), old.dtype)
            return self.emit(ir.Assign(getattr(old.expr, "name", target), value, loc=s.loc))
        decision = bindings.assignment(target, "=", self.seen(target))
        if decision.action == bindings.REFUSE and not self.checking:
            raise err(decision.message, s.target)
        self.scope.bind(target, Tensor(self.locals[-1], loc=s.loc) if dtype is None else
                        Scalar(ir.Sym(name, dtype), kind="let", loc=s.loc))

    def _copy_result(self, result: ir.Param, into: ir.Param, s: A.Stmt) -> None:
        """`b = f(a);` of a tensor `b` declared before: the result copied into it (its
        other names, a caller's among them, see the values)."""
        typed = lambda p: f"{p.dtype}{print_shape(p.shape)}"
        if typed(result) != typed(into):
            raise Unsupported(f"the {typed(result)} result of '{co_calls.called_name(s.value)}' "
                              f"assigned to '{s.target.id}', a {typed(into)} tensor", s.loc)
        whole = lambda p: ir.View(p.name, tuple(ir.Const(0, "s32") for _ in p.shape),
                                  tuple(p.shape), tuple(True for _ in p.shape))
        self.emit(ir.DmaCopy(whole(result), whole(into), loc=s.loc))


def _scalar_result_type(callee: ir.Function) -> str:
    """The type of the number a function returns: its `__result` host variable's."""
    return next(s.value.dtype for s in callee.body
                if isinstance(s, ir.Let) and s.name == callee.result)
