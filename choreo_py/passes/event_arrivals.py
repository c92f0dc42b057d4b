"""Arrival counts: how many arrivals complete one generation of each event.

An mbarrier completes a phase when its pending count reaches zero; the
count it is initialised with must equal the arrivals one generation gets.
Every role instance that can trigger an event arrives once per generation
(its thread 0 arrives for the instance), so the count is the sum, over the
distinct regions (roles, parallel bodies, or the block itself) holding a
`trigger` of it, of their instance counts; several triggers of one event in
one region count once. An event nobody triggers gets 1 (it never completes).
`trigger e after qk` (an MMA future) counts as any trigger: the issuing thread's
one tcgen05.commit is its instance's one arrival.

This is the one place the rule lives: the backends initialise mbarriers
with `Event.arrivals`, the interpreter completes generations with it, and
the static pipeline check simulates with it.
"""
from __future__ import annotations

from .. import ir


def role_instances(kernel: ir.Kernel) -> tuple[dict[str, dict], dict[int, int]]:
    """(event -> {region: instances triggering it}, id(Role/Parallel) -> instances per block)."""
    triggerers: dict[str, dict] = {}
    instances: dict[int, int] = {}

    def visit(stmts, mult: int, outer: int, region) -> None:
        for s in stmts:
            if isinstance(s, ir.Trigger):
                triggerers.setdefault(s.event.event, {})[region] = mult
            if isinstance(s, ir.Parallel):
                instances[id(s)] = mult * s.extent
                visit(s.body, mult * s.extent, mult, ("parallel", id(s)))
            elif isinstance(s, ir.Role):
                n = outer * len(s.members) if s.members else mult
                instances[id(s)] = n
                visit(s.body, n, outer, ("role", id(s)))
            else:
                for block in ir.child_blocks(s):
                    visit(block, mult, outer, region)

    visit(kernel.body, 1, 1, ("block",))
    return triggerers, instances


def arrivals(kernel: ir.Kernel) -> dict[str, int]:
    """Event name -> arrivals per generation (the stored fact when the pass has run)."""
    if all(e.arrivals is not None for e in kernel.events):
        return {e.name: e.arrivals for e in kernel.events}
    triggerers, _ = role_instances(kernel)
    return {e.name: e.arrivals if e.arrivals is not None
            else max(1, sum(triggerers.get(e.name, {}).values())) for e in kernel.events}


def run(kernel: ir.Kernel, target=None) -> None:
    """The same on every target: the count follows from the roles alone."""
    counts = arrivals(kernel)
    for e in kernel.events:
        e.arrivals = counts[e.name]
