"""Futures and events: what may be waited, named, exchanged and selected.

`wait` blocks on an asynchronous operation's future or on an event; a
synchronous operation is complete when its statement ends, so its future is
never waited.  An asynchronous copy is only observable through a name, so it
has one; and every asynchronous future of a function is waited (directly,
through `select`, after a `swap`/`rotate`, or by a `trigger ... after`)
before the function ends, or its data may be read while still in flight.
A `dma.any` placeholder only stands for a copy issued later into the same
name.  `swap`/`rotate` exchange futures of one type declared in one scope;
`select` picks among candidates of one type with an integer selector.
"""
from __future__ import annotations

from ..frontend import ast as A
from . import types as Ty


def _root_name(e):
    while isinstance(e, (A.MethodCall, A.Index, A.Member)):
        e = e.base
    return e.id if isinstance(e, A.Name) else None


def _mark_waited(ck, e) -> None:
    """`wait f`, `wait select(c, f, g)`: the futures named count as waited."""
    names = [node.id for node in A.walk(e) if isinstance(node, A.Name)]
    while names:
        sym = ck.lookup(names.pop())
        if sym is not None and not sym.waited:
            sym.waited = True
            names += sym.sources


def wait(ck, s: A.Wait) -> None:
    for target in s.targets:
        t = ck.t(target)
        name = _root_name(target) or "this expression"
        if t.kind == Ty.FUTURE and not t.is_async and not t.placeholder:
            ck.lenient_error(f"'{name}' is the future of a synchronous operation, which is complete "
                     "when its statement ends; only asynchronous futures and events are "
                     "waited", target.loc)
        elif t.kind in (Ty.INT, Ty.FLOAT, Ty.BOOL, Ty.ITUPLE, Ty.MDSPAN, Ty.DATA,
                        Ty.STRING, Ty.BOUNDED):
            ck.error(f"'{name}' is {Ty.describe(t.kind)}; only asynchronous futures and "
                     "events are waited", target.loc)
        _mark_waited(ck, target)


def trigger(ck, s: A.Trigger) -> None:
    for dep in s.after:
        _mark_waited(ck, dep)


def dma_named(ck, s: A.DmaOp) -> None:
    if s.is_async and not s.future and s.operation != "any":
        ck.error(f"the asynchronous '{s.engine}.{s.operation}' has no future: name it "
                 f"('f = {s.engine}.{s.operation}.async ...') and wait on it", s.loc)
    for dep in s.after:
        _mark_waited(ck, dep)


def unwaited(ck, fn: A.FunctionDef) -> None:
    open_scopes = [sym for scope in ck.scopes for sym in scope.futures]
    for sym in ck.extra.get("async_futures", []) + open_scopes:
        if sym.type.kind != Ty.FUTURE or not sym.type.is_async or sym.type.placeholder:
            continue
        if not sym.waited:
            ck.lenient_error(f"the asynchronous future '{sym.name}' is never waited (wait on it, or "
                     "on a 'select' of it, before the function ends)", sym.loc)


def track_futures(ck, scope) -> None:
    """At each scope's end: remember its async futures for the function's end."""
    ck.extra.setdefault("async_futures", []).extend(
        s for s in scope.futures if s.type.kind == Ty.FUTURE and s.type.is_async
        and not s.type.placeholder)


def placeholder_init(ck, s) -> None:
    value = s.value if isinstance(s, A.Assign) else s.init
    if isinstance(value, A.Name):
        sym = ck.lookup(value.id)
        if sym is not None and sym.type.placeholder and sym.type.kind == Ty.FUTURE \
                and sym.type.rank is None and sym.type.elem is None:
            if isinstance(s, A.ScalarDecl) or ck.extra.get("assign_declares"):
                ck.error(f"'{value.id}' is a 'dma.any' placeholder; it only receives a copy "
                         "issued later and initialises nothing else", value.loc)


def swap(ck, s: A.Swap) -> None:
    word = "rotate" if s.rotate else "swap"
    syms = [ck.lookup(n) for n in s.names]
    if len(s.names) < 2:
        return
    for name, sym in zip(s.names, syms):
        if sym is not None and sym.type.kind not in (Ty.FUTURE, Ty.UNKNOWN):
            ck.error(f"'{word}' exchanges futures, but '{name}' is "
                     f"{Ty.describe(sym.type.kind)}", s.loc)
            return
        if sym is not None:
            sym.waited = True     # what is exchanged is waited under another name
    known = [(n, y) for n, y in zip(s.names, syms) if y is not None]
    if len(known) < 2:
        return
    (n0, y0), scope0 = known[0], _scope_of(ck, known[0][0])
    for n, y in known[1:]:
        if _scope_of(ck, n) is not scope0:
            ck.error(f"'{word}' of '{n0}' and '{n}', which are declared in different scopes",
                     s.loc)
            return
        if not _same_future(y0.type, y.type):
            ck.lenient_error(f"'{word}' of futures of different types ('{n0}' and '{n}')", s.loc)
            return


def _scope_of(ck, name: str):
    for scope in reversed(ck.scopes):
        if name in scope.names:
            return scope
    return None


def _same_future(a, b) -> bool:
    if a.placeholder or b.placeholder or Ty.UNKNOWN in (a.kind, b.kind):
        return True
    for field in ("rank", "elem", "storage"):
        x, y = getattr(a, field), getattr(b, field)
        if x is not None and y is not None and x != y:
            return False
    return a.is_async == b.is_async


def select(ck, c: A.CallExpr) -> None:
    if c.func != "select" or len(c.args) < 2:
        return
    sel, cands = c.args[0], c.args[1:]
    st = ck.t(sel)
    if st.kind in (Ty.FLOAT, Ty.FUTURE, Ty.EVENT, Ty.DATA, Ty.STRING, Ty.MDSPAN, Ty.ITUPLE):
        ck.error(f"the selector of 'select' is {Ty.describe(st.kind)}, not an integer",
                 sel.loc)
    v = ck.fold(sel)
    if v is not None and not 0 <= v < len(cands):
        ck.error(f"the selector {v} is outside the {len(cands)} candidates of 'select'",
                 sel.loc)
    t0 = ck.t(cands[0])
    for cand in cands[1:]:
        t = ck.t(cand)
        if Ty.UNKNOWN in (t0.kind, t.kind):
            continue
        if t.kind != t0.kind or (t.kind == Ty.FUTURE and not _same_future(t0, t)):
            ck.error("the candidates of 'select' differ in type "
                     f"({Ty.describe(t0.kind)} and {Ty.describe(t.kind)})", cand.loc)
            return


RULES = {
    A.Wait: [wait],
    A.Trigger: [trigger],
    A.DmaOp: [dma_named],
    A.Assign: [placeholder_init],
    A.ScalarDecl: [placeholder_init],
    A.Swap: [swap],
    A.CallExpr: [select],
}
EXIT_RULES = {"scope": [track_futures], A.FunctionDef: [unwaited]}
