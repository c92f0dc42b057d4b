"""The role pipeline of a warp-specialised kernel: its dependency graph, read from the
step programs of the PTX census (bench/model_ptx.py `program_of`), and the period of
its step loop in steady state, found by running the programs against each other.

The graph. A role's trip waits on barriers (`mbarrier.try_wait`); a barrier is
signalled by a plain `mbarrier.arrive`, by the TMA loads announced with
`expect_tx` on it, or by a `tcgen05.commit` (it arrives when the committing thread's
MMAs are done). An edge runs from each signalling role to each waiting role, with
the lag the wait's parity gives (bench/model_ptx.py `wait_lag`: a `ready` ring of S
slots waits for the signal of S trips earlier). A barrier that a role both signals
and waits for (an MMA thread waiting for its own commit) is private to each of the
role's instances; any other is shared: its round completes when every signalling
instance has signalled.

The run. Every instance of every role runs T trips of its program; the next op
taken is always the one that can start earliest (so shared pipes serve requests
in time order):
- work: max(instructions, MUFU ops x 32 lanes / (MUFU per clock / sub-partitions))
  clocks: one warp of the role on its own SM sub-partition, issuing one
  instruction per clock. Assumption: the warps of one warpgroup are on the four
  distinct sub-partitions (warp w on sub-partition w mod 4), and the run does not
  charge the sharing of a sub-partition by warps of different roles: the issue and
  sfu bounds of bench/model.py `step_bounds` account for that sharing over a trip.
- mma: a run of MMAs on the CTA's tensor pipe, first come first served, at the
  tensor rate (half for M=64 on Blackwell) / tensor_eff; issuing does not block.
- tma: the bytes through the CTA's copy engine at l2_bytes_per_clock, first come
  first served; the barrier's signal is the copy's end (load latency is not
  charged: the rings hide it in steady state).
- commit: a signal when the thread's last MMA ends; wg_commit / wg_wait: wgmma
  groups (wait until at most N are pending).
- wait: until the barrier's round for (trip - lag) is complete.
The period is the mean trip time over the second half of the run (every role runs
at least T trips; one may run a few ahead).
"""
from __future__ import annotations

from dataclasses import dataclass, field

TRIPS = 16


@dataclass(frozen=True)
class Edge:
    signaller: str
    waiter: str
    key: str
    kind: str   # "tma", "mma" (tcgen05.commit), "arrive"
    lag: int


def _signals(program) -> dict:
    """key -> (kind, signals per trip) of one role's program."""
    out: dict = {}
    for op in program:
        kind = {"tma": "tma", "commit": "mma", "arrive": "arrive"}.get(op.kind)
        if kind:
            k, n = out.get(op.key, (kind, 0))
            out[op.key] = (k if k != "arrive" else kind, n + 1)
    return out


def graph(census) -> list[Edge]:
    """The dependency edges between the roles of a census, in role order."""
    roles = [r for r in census.roles if r.program]
    sig = {r.name: _signals(r.program) for r in roles}
    edges = []
    for w in roles:
        seen = set()
        for op in w.program:
            if op.kind != "wait" or op.key in seen:
                continue
            seen.add(op.key)
            for s in roles:
                if op.key in sig[s.name]:
                    edges.append(Edge(s.name, w.name, op.key, sig[s.name][op.key][0], op.lag))
    return edges


@dataclass
class _Inst:
    role: object
    index: int
    trip: int = 0
    pc: int = 0
    now: float = 0.0
    last_mma: float = 0.0
    groups: list = field(default_factory=list)
    sent: dict = field(default_factory=dict)     # key -> signals made so far
    waited: dict = field(default_factory=dict)   # key -> waits made in this trip
    ends: list = field(default_factory=list)     # finish time of each trip
    stalls: dict = field(default_factory=dict)   # key -> clocks waited (second half)


@dataclass
class Rates:
    """Clocks per unit of each pipe for one CTA (bench/model.py fills it)."""
    mma_clocks: object          # function: tuple of Mma -> clocks (tensor_eff applied)
    tma_bytes_per_clock: float
    sfu_clocks_per_op: float    # one warp's MUFU op: 32 lanes / (MUFU per clock / SMSPs)


def _work(mix, rates: Rates) -> float:
    return max(float(mix.instr), mix.sfu * rates.sfu_clocks_per_op)


class _Barriers:
    """Rounds of each barrier scope: when every signalling instance has signalled."""

    def __init__(self, census):
        self.signallers: dict = {}
        for r in census.roles:
            for key, (_, per_trip) in _signals(r.program).items():
                self.signallers.setdefault(key, []).append((r, per_trip))
        self.waiters = {(r.name, op.key) for r in census.roles for op in r.program
                        if op.kind == "wait"}
        self.times: dict = {}   # scope -> list of per-round lists of signal times

    def scope(self, inst: _Inst, key: str):
        """A barrier the role both signals and waits for is its instance's own."""
        private = (inst.role.name, key) in self.waiters and any(
            r is inst.role for r, _ in self.signallers.get(key, []))
        return (key, inst.role.name, inst.index) if private else (key,)

    def needed(self, scope) -> int:
        if len(scope) == 3:
            return 1
        return sum(r.instances for r, _ in self.signallers.get(scope[0], []))

    def per_trip(self, key: str, role) -> int:
        own = [n for r, n in self.signallers.get(key, []) if r is role]
        return own[0] if own else max((n for _, n in self.signallers.get(key, [])), default=1)

    def signal(self, inst: _Inst, key: str, t: float) -> None:
        n = inst.sent.get(key, 0)
        inst.sent[key] = n + 1
        rounds = self.times.setdefault(self.scope(inst, key), [])
        while len(rounds) <= n:
            rounds.append([])
        rounds[n].append(t)

    def complete(self, scope, n: int):
        """The time round n completes, or None while a signal is missing."""
        rounds = self.times.get(scope, [])
        if n >= len(rounds) or len(rounds[n]) < self.needed(scope):
            return None
        return max(rounds[n])


def _ready(inst: _Inst, bars: _Barriers):
    """When the instance's next op can start (None: blocked on a barrier)."""
    op = inst.role.program[inst.pc]
    if op.kind != "wait":
        return inst.now
    a = bars.per_trip(op.key, inst.role)
    j = min(inst.waited.get(op.key, 0), a - 1)
    if inst.trip < op.lag:
        return inst.now
    n = inst.role.pre.get(op.key, (0, 0))[0] + (inst.trip - op.lag) * a + j
    done = bars.complete(bars.scope(inst, op.key), n)
    return None if done is None else max(inst.now, done)


def _step(inst: _Inst, start: float, bars: _Barriers, pipes: dict, rates: Rates, trips: int):
    op = inst.role.program[inst.pc]
    if op.kind == "wait" and trips // 2 <= inst.trip < trips:
        inst.stalls[op.key] = inst.stalls.get(op.key, 0.0) + start - inst.now
    inst.now = start
    if op.kind == "wait":
        inst.waited[op.key] = inst.waited.get(op.key, 0) + 1
    elif op.kind == "work":
        inst.now += _work(op.mix, rates)
    elif op.kind == "mma":
        begin = max(inst.now, pipes["tensor"])
        pipes["tensor"] = inst.last_mma = begin + rates.mma_clocks(op.mmas)
    elif op.kind == "tma":
        begin = max(inst.now, pipes["tma"])
        pipes["tma"] = begin + op.nbytes / rates.tma_bytes_per_clock
        bars.signal(inst, op.key, pipes["tma"])
    elif op.kind == "commit":
        bars.signal(inst, op.key, max(inst.now, inst.last_mma))
    elif op.kind == "arrive":
        bars.signal(inst, op.key, inst.now)
    elif op.kind == "wg_commit":
        inst.groups.append(inst.last_mma)
    elif op.kind == "wg_wait" and len(inst.groups) > op.lag:
        inst.now = max(inst.now, inst.groups[len(inst.groups) - 1 - op.lag])
    inst.pc += 1
    if inst.pc == len(inst.role.program):
        inst.pc, inst.waited = 0, {}
        inst.ends.append(inst.now)
        inst.trip += 1


def run(census, rates: Rates, trips: int = TRIPS) -> dict:
    """The steady-state period (clocks per trip) and where each role waited."""
    insts = [_Inst(r, i) for r in census.roles if r.program for i in range(r.instances)]
    if not insts:
        return {"period": 0.0, "stalls": {}}
    bars, pipes = _Barriers(census), {"tensor": 0.0, "tma": 0.0}
    for x in insts:   # what the code before the loop signalled, at time 0
        for key, (_, sent) in x.role.pre.items():
            for _ in range(sent):
                bars.signal(x, key, 0.0)
    limit = trips + 4   # a role may run ahead of the others (a peeled step, free ring slots)

    def ready(x):
        return _ready(x, bars) if x.trip < limit else None
    when = [ready(x) for x in insts]   # an instance's start changes only when it steps,
    while True:                        # a blocked one's when a barrier is signalled
        live = [(t, k) for k, t in enumerate(when) if t is not None]
        if not live:
            break
        start, k = min(live)
        signals = insts[k].role.program[insts[k].pc].kind in ("tma", "commit", "arrive")
        _step(insts[k], start, bars, pipes, rates, trips)
        when[k] = ready(insts[k])
        if signals:
            when = [ready(x) if t is None else t for x, t in zip(insts, when)]
    stuck = [x for x in insts if x.trip < trips]
    if stuck:
        where = ", ".join(f"{x.role.name}#{x.index} at barrier {x.role.program[x.pc].key}"
                          for x in stuck)
        raise ValueError(f"the role pipeline deadlocks: {where} (a wait no signal meets)")
    half = trips // 2
    ends = [max(x.ends[t] for x in insts) for t in range(trips)]
    stalls = {}
    for x in insts:
        for key, v in x.stalls.items():
            name = f"{x.role.name}#{x.index}"
            stalls.setdefault(name, {})[key] = v / (trips - half)
    return {"period": (ends[-1] - ends[half - 1]) / (trips - half), "stalls": stalls}
