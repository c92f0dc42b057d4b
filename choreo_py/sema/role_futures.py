"""A TMA load's future waited by another role becomes an event the load triggers.

(Run by sema on each kernel it builds, before the IR is verified: the IR has no
future shared between roles.)

    inthreads (p == 0) { f = tma.copy.async src => shared; }
    inthreads (p == 1) { wait f; ... f.data ... }

The future belongs to the copy, which the first role issues; the second role
waits for the same copy (on the GPU: the mbarrier the TMA completes). The IR
keeps futures on the path that defines them, and publishes a load to other
threads through an event (`trigger e after f`), so the pass writes it that
way:

    inthreads (p == 0) { f = tma.copy.async src => shared; trigger __loaded_f after f; }
    inthreads (p == 1) { wait __loaded_f; ... }

with one event per such future. Both statements must be at the top of their
roles' bodies (each runs once): in a loop each round would need a generation
of its own, which is written with `e.at(order)` in the program; that form is
refused by name here.
"""
from __future__ import annotations

from .. import ir
from .values import Unsupported

PREFIX = "__loaded_"


def run(kernel: ir.Kernel, target=None) -> None:
    for par in [s for s in ir.walk(kernel.body) if isinstance(s, ir.Parallel)]:
        roles = [s for s in par.body if isinstance(s, ir.Role)]
        if len(roles) > 1:
            _roles(kernel, roles)


def _loads(role: ir.Role) -> dict[str, ir.TmaLoad]:
    return {s.future: s for s in role.body if isinstance(s, ir.TmaLoad) and s.future}


def _roles(kernel: ir.Kernel, roles: list) -> None:
    issued = {}  # future -> the role whose body issues it
    for r in roles:
        for name in _loads(r):
            issued[name] = r
    crossing = set()
    for r in roles:
        for s in ir.walk(r.body):
            if not isinstance(s, ir.Wait):
                continue
            for item in s.items:
                owner = issued.get(getattr(item, "future", None))
                if owner is None or owner is r:
                    continue
                if s not in r.body:
                    raise Unsupported(f"waiting inside a loop or branch for '{item.future}', "
                                      "which another role loads", s.loc)
                crossing.add(item.future)
    for name in sorted(crossing):
        _publish(kernel, issued[name], name)
        for r in roles:
            for s in ir.walk(r.body):
                if isinstance(s, ir.Wait):
                    s.items = [ir.EventRef(PREFIX + name) if getattr(x, "future", None) == name
                               else x for x in s.items]


def _publish(kernel: ir.Kernel, role: ir.Role, name: str) -> None:
    event = PREFIX + name
    if kernel.event(event) is not None:
        raise Unsupported(f"a program event named '{event}'", kernel.loc)
    load = _loads(role)[name]
    kernel.events.append(ir.Event(event, None, loc=load.loc))
    at = role.body.index(load)
    role.body.insert(at + 1, ir.Trigger(ir.EventRef(event), [name], loc=load.loc))
