"""`call f(...)` of a device function the file defines: inlined into the kernel's IR.

choreo_py/frontend/c_subset.py reads the functions (scalar parameters, a C subset
body). A call is replaced by the function's body with its parameters bound, so the
interpreter, the emulator and both backends see plain IR statements and no PTX `call`:

- as a statement (`call f(x);`): parameters and locals become mutable scalars of the
  kernel (renamed apart), the body's assignments, `if`s and `printf`s their IR forms;
  a final `return` is evaluated and dropped;
- as a value (`mutable int y = call f(x);`): a function whose body is declarations
  and a final `return` (no assignment, branch or print) is its returned expression,
  with the parameters and locals substituted (so it is safe anywhere an expression is,
  a loop condition included).

`template<int m, ...>` parameters take the call's compile-time template arguments.
A function the file does not define (an external one) is refused by name: the backends
assemble each module as a whole program (`ptxas` without `-c`), with nothing to link
an external function from, and the interpreter has no body to run. So is one outside
the subset, with the construct that puts it there.
"""
from __future__ import annotations

from typing import Optional

from ..frontend import ast as A
from ..frontend import c_subset as C
from .. import ir
from ..ir import build as B
from .values import Scalar, Unsupported


class DeviceFuncBuilder:
    """Mixin of the statement builder (needs scalar, const_int, emit, block state)."""

    def _device_funcs(self) -> dict:
        cached = self.__dict__.get("_dev_funcs")
        if cached is None:
            cached = {}
            for text in getattr(self.func, "device_code", ()):
                cached.update(C.functions(text))
            self.__dict__["_dev_funcs"] = cached
        return cached

    def _device_func(self, c: A.Call) -> C.DeviceFunc:
        f = self._device_funcs().get(c.func)
        if f is None:
            raise Unsupported(f"the device function '{c.func}', which this file does not "
                              "define (a kernel's PTX is assembled whole: there is no "
                              "external function to link)", c.loc)
        if f.outside is not None:
            raise Unsupported(f"the device function '{c.func}', whose C is outside the "
                              f"subset read here ({f.outside})", c.loc)
        if self.kernel is None:
            raise Unsupported(f"'call {c.func}' outside a kernel", c.loc)
        return f

    def _bindings(self, f: C.DeviceFunc, c: A.Call) -> tuple[dict, list]:
        """(template parameters -> constants, (parameter, dtype, value) of the arguments)."""
        targs = c.template_args or []
        if len(targs) != len(f.template):
            # (C++ may overload the name: a mismatch is a call this reader cannot resolve)
            raise Unsupported(f"'{f.name}' with {len(targs)} template argument(s) (its "
                              f"definition here takes {len(f.template)})", c.loc)
        env = {}
        for name, a in zip(f.template, targs):
            if not isinstance(a, A.Expr):
                raise Unsupported(f"a type template argument of '{f.name}'", c.loc)
            env[name] = ("expr", ir.Const(self.const_int(a, f"a template argument of "
                                                         f"'{f.name}'"), "s32"))
        if len(c.args) != len(f.params):
            raise Unsupported(f"'{f.name}' with {len(c.args)} argument(s) (its definition "
                              f"here takes {len(f.params)})", c.loc)
        args = [(n, dt, B.convert(self.scalar(a, dt), dt)) for (n, dt), a in zip(f.params, c.args)]
        return env, args

    # ------------------------------------------------------------ calls as statements
    def inline_call(self, c: A.Call) -> None:
        f = self._device_func(c)
        env, args = self._bindings(f, c)
        n = self.__dict__.get("_dev_calls", 0)
        self.__dict__["_dev_calls"] = n + 1
        prefix = f"{f.name.replace('::', '_')}__{n}__"
        for name, dt, value in args:
            env[name] = ("var", prefix + name, dt)
            self.emit(ir.Var(prefix + name, dt, value, loc=c.loc))
        _Inliner(self, f, prefix, c).run(f.body, env, top=True)

    # ------------------------------------------------------------ calls as values
    def e_Call(self, c: A.Call, hint=None):
        f = self._device_func(c)
        if f.ret == "void":
            raise Unsupported(f"the value of '{f.name}', a void function", c.loc)
        *decls, last = f.body or [("return", None)]
        if last[0] != "return" or last[1] is None or any(d[0] != "decl" for d in decls):
            raise Unsupported(f"the device function '{f.name}' used as a value (only a body "
                              "of declarations and a final 'return' is inlined as a value)",
                              c.loc)
        env, args = self._bindings(f, c)
        for name, dt, value in args:
            env[name] = ("expr", value)
        inl = _Inliner(self, f, "", c)
        for _, dt, name, init in decls:
            if init is None:
                raise Unsupported(f"the local '{name}' of '{f.name}' without a value", c.loc)
            env[name] = ("expr", B.convert(inl.expr(init, env), dt))
        return Scalar(B.convert(inl.expr(last[1], env), f.ret))


class _Inliner:
    def __init__(self, builder, f: C.DeviceFunc, prefix: str, call: A.Call) -> None:
        self.b, self.f, self.prefix, self.call = builder, f, prefix, call
        self.count = 0

    def refuse(self, what: str) -> Unsupported:
        return Unsupported(f"{what} in the device function '{self.f.name}'", self.call.loc)

    def run(self, stmts: list, env: dict, top: bool = False) -> None:
        for k, s in enumerate(stmts):
            if s[0] == "return" and not (top and k == len(stmts) - 1):
                raise self.refuse("a 'return' before the end of the function")
            getattr(self, "s_" + s[0])(s, env)

    def fresh(self, name: str) -> str:
        self.count += 1
        return f"{self.prefix}{name}__{self.count}"

    def s_decl(self, s, env) -> None:
        _, dt, name, init = s
        if init is None:
            raise self.refuse(f"the local '{name}' without a value")
        value = B.convert(self.expr(init, env), dt)
        reg = self.fresh(name)
        self.b.emit(ir.Var(reg, dt, value, loc=self.call.loc))
        env[name] = ("var", reg, dt)

    def s_seq(self, s, env) -> None:
        self.run(s[1], env)

    def s_block(self, s, env) -> None:
        self.run(s[1], dict(env))

    def s_assign(self, s, env) -> None:
        _, name, op, value = s
        slot = env.get(name)
        if slot is None or slot[0] != "var":
            raise self.refuse(f"an assignment to '{name}', which is not a local or a parameter")
        cur = ir.Sym(slot[1], slot[2])
        rhs = self.expr(value, env)
        new = rhs if op == "=" else B.binop(op[:-1], cur, rhs)
        self.b.emit(ir.Assign(slot[1], B.convert(new, slot[2]), loc=self.call.loc))

    def s_if(self, s, env) -> None:
        _, cond, then, orelse = s
        c = B.convert(self.expr(cond, env), "bool")
        saved = self.b.out
        try:
            self.b.out = []
            self.run(then, dict(env))
            t = self.b.out
            self.b.out = []
            self.run(orelse, dict(env))
            e = self.b.out
        finally:
            self.b.out = saved
        self.b.emit(ir.If(c, t, e, loc=self.call.loc))

    def s_return(self, s, env) -> None:
        if s[1] is not None:
            self.expr(s[1], env)  # checked; the statement call drops the value

    def s_printf(self, s, env) -> None:
        _, fmt, args = s
        items, k, parts = [], 0, fmt.split("%")
        items.append(parts[0])
        i = 1
        while i < len(parts):
            part = parts[i]
            if part == "" and i + 1 < len(parts):  # "%%"
                items.append("%" + parts[i + 1])
                i += 2
                continue
            spec = part[:1]
            if spec not in ("d", "i", "u", "f") or k >= len(args):
                raise self.refuse(f"the printf conversion '%{part[:2]}'" if spec not in
                                  ("d", "i", "u", "f") else "a printf with too few arguments")
            v = self.expr(args[k], env)
            if (spec == "f") != ir.is_float(v.dtype):
                raise self.refuse(f"'%{spec}' of a {v.dtype} value")
            items += [v, part[1:]]
            k += 1
            i += 1
        if k != len(args):
            raise self.refuse("a printf with more arguments than conversions")
        self.b.emit(ir.Print([x for x in items if not (isinstance(x, str) and x == "")],
                             loc=self.call.loc, c_format=True))

    # ------------------------------------------------------------ expressions
    def expr(self, e, env) -> ir.Expr:
        kind = e[0]
        if kind == "num":
            return ir.Const(e[1], e[2])
        if kind == "name":
            slot = env.get(e[1])
            if slot is None:
                raise self.refuse(f"the name '{e[1]}'")
            return slot[1] if slot[0] == "expr" else ir.Sym(slot[1], slot[2])
        if kind == "un":
            v = self.expr(e[2], env)
            if e[1] == "+":
                return v
            if e[1] == "!":
                return ir.Un("!", B.convert(v, "bool"), "bool")
            if e[1] == "~" and ir.is_float(v.dtype):
                raise self.refuse("'~' of a float")
            return ir.Un(e[1], v, v.dtype)
        if kind == "bin":
            a, b = self.expr(e[2], env), self.expr(e[3], env)
            if e[1] in ("&&", "||"):
                a, b = B.convert(a, "bool"), B.convert(b, "bool")
            return B.binop(e[1], a, b)
        if kind == "tern":
            c = B.convert(self.expr(e[1], env), "bool")
            t, f = B.promote("?:", self.expr(e[2], env), self.expr(e[3], env))
            rt = B.result_type(t, f)
            return ir.Select(c, B.convert(t, rt), B.convert(f, rt), rt)
        raise self.refuse(f"the expression {kind}")
