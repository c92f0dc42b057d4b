"""Fragments shared between roles: the block's accumulators (`mma.fill ... : block`).

A fragment is registers: each thread group that runs code using it has its
own, even when it is declared in the block (a thread started there gets a
copy). An accumulator declared `: block` is the block's instead (tensor
memory on sm_100a): every role started inside the block sees the same one.
Such a fragment is shared data, so its
accesses are checked for races as shared buffers are: a read or write by one
role must be ordered (wait, event) after a conflicting access by another.

An MMA's update of the fragment is the access of its future (it happens when
the MMA runs, so the reader must be ordered after its completion: `wait` on
the future, then an event). Chained MMAs of one issuing thread into the same
accumulator are ordered by the tensor core and do not conflict.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass

from .errors import RaceError


@dataclass
class _Access:
    write: bool
    agent: int
    epoch: int
    issuer: int        # the issuing thread of an MMA update, else the agent
    mma: bool
    loc: object
    what: str


class SharedFrags:
    def __init__(self) -> None:
        self.history: dict[int, list[_Access]] = {}

    def access(self, st, write: bool, agent, loc, what: str, issuer=None) -> None:
        """Records an access to fragment state `st` if it is shared; RaceError on a conflict."""
        if not getattr(st, "shared", False):
            return
        mma = issuer is not None
        who = issuer.id if mma else agent.id
        kept = []
        for a in self.history.get(id(st), ()):
            ordered = agent.clock.get(a.agent, 0) >= a.epoch
            chained = mma and a.mma and a.issuer == who
            if not ordered and not chained and (write or a.write):
                mine, theirs = ("writes" if write else "reads"), ("write" if a.write else "read")
                raise RaceError(
                    f"data race on fragment '{st.name}' (shared by the block's roles): {what} "
                    f"{mine} it while the {theirs} by {a.what} (at {a.loc}) is not ordered "
                    "before it: no wait or event orders them", loc,
                    [(f"the conflicting {theirs}: {a.what}", a.loc)])
            if not (ordered and write):
                kept.append(a)
        kept.append(_Access(write, agent.id, agent.clock[agent.id], who, mma, loc, what))
        self.history[id(st)] = kept


def inherit(kernel, frags: dict) -> dict:
    """The fragments a thread started in this scope sees: the block's accumulators are the
    same states (marked shared); any other fragment is the thread's own copy, as registers
    are (an accumulator declared in the block without `: block` is one per thread group)."""
    out = {}
    for name, st in frags.items():
        decl = kernel.frag(name)
        if decl is not None and decl.block:
            st.shared = True
            out[name] = st
        else:
            out[name] = copy.deepcopy(st)
    return out
