"""The PTX census the performance model (bench/model.py) reads: per role of a
warp-specialised kernel, the instruction mix of one trip of its step loop and of
the once-per-tile code around it.

What it finds, and how (the generated PTX's own structure, nothing program-specific):
- roles: a region `@!%in_role.. bra.uni L_skip_role_N; ... L_skip_role_N:`; its
  instance count from the `setp.{eq,ge}.u32 %in_role.., %p_, K` in front of it
  (eq: one warpgroup, ge: every warpgroup from K on, of `.maxntid / 128`); one
  thread when the region starts by sending every thread but one away
  (`@%not_issuer bra`), else a warpgroup (128 threads).
- loops: a branch back to an earlier label. A loop whose body only spins on an
  `mbarrier.try_wait` is a barrier wait (counted, not a loop of its own).
- the step loop of a role: its innermost loop that holds an MMA or a TMA load;
  the tile region: the loop around it (a persistent kernel's item loop) or else
  the whole role, less the step loop.
- per region, per thread: instructions, `ex2`, MMAs with their shape (wgmma's
  mMnNkK; tcgen05's from the instruction descriptor the register was set to),
  where their A/B operands come from (shared memory, registers, tensor memory),
  the commit group each belongs to, bytes announced to TMA (`expect_tx`), bulk
  stores drained (`cp.async.bulk.wait_group`), barrier waits; and the pipes of
  the rest: MUFU ops (ex2, rcp, div, lg2, ...), FP32 arithmetic, cvt, 32-bit
  words moved by tcgen05.ld / tcgen05.st, shared-memory bytes of ld/st.shared
  and ld/stmatrix, mbarrier arrives and tcgen05 commits.
- a role whose innermost loop holds no MMA and no TMA load but waits on a
  barrier (a softmax warpgroup fed through tensor memory) has that loop as its
  step loop. A block inside a step loop skipped by a forward branch to an
  `L_endif_N` label (the generated `if`: the last tile's masking; pyptx's `if_`
  branches to `$_else_N` alike) is counted once
  per tile, not per trip.
- the step program of each role (bench/model_pipe.py reads it): the trip's
  barrier waits, arrives, commits, MMAs and TMA loads in program order with the
  instruction work between them (see `program_of`).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

LABEL = re.compile(r"^\s*([$\w]+):\s*$")
BRANCH = re.compile(r"\bbra(?:\.uni)?\s+([$\w]+)\s*;")
ROLE_SKIP = re.compile(r"@!%(in_role\w*)\s+bra(?:\.uni)?\s+(L_skip_role_\d+)\s*;")
ROLE_SETP = re.compile(r"setp\.(eq|ge)\.u32\s+%(in_role\w*),\s*%p_,\s*(\d+)\s*;")
WGMMA = re.compile(r"wgmma\.mma_async\.\S*?\.m(\d+)n(\d+)k(\d+)\.")
TCGEN05 = re.compile(r"tcgen05\.mma\.cta_group::(\d)\.kind::(\w+)\s+\[[^\]]*\],\s*([^,]+),\s*([^,]+),\s*(%\w+)")
IDESC = re.compile(r"mov\.b32\s+(%\w+),\s*(\d+)\s*;")
EXPECT_TX = re.compile(r"mbarrier\.arrive\.expect_tx\S*\s+[^,]+,\s*\[[^\]]*\],\s*(\d+)\s*;")
MAXNTID = re.compile(r"\.maxntid\s+(\d+)")
MUFU = re.compile(r"^(?:@\S+\s+)?(?:(?:ex2|rcp|rsqrt|lg2|sin|cos|tanh)\.|div\.\w+\.f32\s)")
#: `mov.b64 %rd, {%f0, %f1}` / `mov.b64 {%f0, %f1}, %rd`: the operands of the .f32x2
#: instructions (lowering/core/f32x2.py), which ptxas allocates as register pairs: no
#: instruction issues for them (bench/model_sass.py counts the SASS itself)
PAIR_MOVE = re.compile(r"^mov\.b64\s+(\{[^}]*\},\s*\S+|\S+,\s*\{[^}]*\})\s*;")
FP32 = re.compile(r"^(?:@\S+\s+)?(add|sub|mul|fma|max|min|neg|abs)(?:\.\w+)*\.f32(?:x2)?\s")
TMEM_MOVE = re.compile(r"tcgen05\.(ld|st)\.sync\.aligned\.(\d+x\d+b(?:x2)?)(?:\.x(\d+))?")
TMEM_WORDS = {"32x32b": 1, "16x64b": 1, "16x128b": 2, "16x256b": 4, "16x32bx2": 1}
SMEM_MOVE = re.compile(r"\b(ld|st)\.shared(?:::cta)?(?:\.v(\d))?\.[bfsu](\d+)\s")
MATRIX = re.compile(r"\b(ld|st)matrix\.sync\.aligned\.m8n8\.x(\d)")
GUARD = re.compile(r"bra(?:\.uni)?\s+(L_endif_\d+|\$_else_\d+)\s*;")


@dataclass(frozen=True)
class Mma:
    m: int
    n: int
    k: int
    a_from: str  # "smem", "reg" (wgmma RS) or "tmem" (tcgen05 [a])
    group: int   # index of the commit group in the region

    @property
    def flops(self) -> int:
        return 2 * self.m * self.n * self.k

    @property
    def smem_bytes(self) -> int:
        """Bytes the MMA reads from shared memory (bf16 operands): B always, A when it is there."""
        a = self.m * self.k * 2 if self.a_from == "smem" else 0
        return a + self.n * self.k * 2


@dataclass
class Mix:
    """Per-thread counts over a region of code (one trip of it)."""
    instr: int = 0
    ex2: int = 0
    waits: int = 0       # mbarrier.try_wait sites (each a spin on a barrier)
    bars: int = 0        # bar.sync / bar.arrive
    tma_bytes: int = 0   # bytes announced to TMA loads (expect_tx)
    tma_loads: int = 0
    store_drains: int = 0  # cp.async.bulk.wait_group: a store's round trip on the path
    mmas: list = field(default_factory=list)
    sfu: int = 0         # MUFU ops: ex2 and rcp, rsqrt, lg2, sin, cos, tanh, f32 div (one each)
    fp32: int = 0        # FP32 add/sub/mul/fma/max/min (FMA and ALU pipes)
    cvt: int = 0
    tmem_ld_words: int = 0   # 32-bit words per thread read by tcgen05.ld
    tmem_st_words: int = 0   # ... written by tcgen05.st
    smem_ld_bytes: int = 0   # bytes per thread of ld.shared / ldmatrix
    smem_st_bytes: int = 0   # ... of st.shared / stmatrix
    arrives: int = 0     # mbarrier.arrive (with or without expect_tx)
    commits: int = 0     # tcgen05.commit (an arrive when the issued MMAs complete)

    def mma_flops(self) -> int:
        return sum(x.flops for x in self.mmas)


@dataclass
class Role:
    name: str
    instances: int
    threads: int          # 128 (a warpgroup) or 1 (an issuing thread)
    step: Mix | None      # one trip of the step loop
    tile: Mix             # once per tile (prologue, epilogue)
    program: list = field(default_factory=list)  # the step's Ops (program_of)
    pre: dict = field(default_factory=dict)   # key -> (waits, signals) before the step loop


@dataclass
class KernelCensus:
    name: str
    warpgroups: int
    roles: list
    barriers: dict = field(default_factory=dict)  # key -> name (from its waits' parity registers)


def role_kind(role) -> str:
    """What a role does, for reports: load, MMA issue, softmax (MUFU work), epilogue."""
    m = role.step
    if m is None:
        return "epilogue" if role.threads >= 128 else "once per tile"
    parts = (["TMA loads"] if m.tma_loads else []) + (["MMAs"] if m.mmas else []) \
        + (["softmax"] if m.sfu else [])
    who = "1 thread" if role.threads == 1 else f"{role.instances} x 128 threads"
    return f"{' + '.join(parts) or 'waits'}, {who}"


def barrier_names(lines: list[str]) -> dict:
    """key -> the event the generated code named it after: the parity register a wait
    reads is `<event>_phase` (`%kf_phase_2` waits on `kf`)."""
    out = {}
    for ln in lines:
        if (m := TRY_WAIT.search(ln)) and (n := re.match(r"%(\w+?)_phase(?:_\d+)?$", m.group(2))):
            out.setdefault(barrier_key(m.group(1)), n.group(1))
    return out


def _statements(text: str) -> list[str]:
    """The kernel body, one statement or label per entry, comments dropped."""
    out = []
    for line in text.splitlines():
        line = line.split("//")[0].strip()
        if line:
            out.append(line)
    return out


def _loops(lines: list[str]) -> list[tuple[int, int, bool]]:
    """(first, last, is_spin) for every backward branch."""
    where = {m.group(1): i for i, ln in enumerate(lines) if (m := LABEL.match(ln))}
    loops = []
    for j, ln in enumerate(lines):
        m = BRANCH.search(ln)
        if m and m.group(1) in where and where[m.group(1)] < j:
            i = where[m.group(1)]
            body = lines[i:j + 1]
            spin = len(body) <= 4 and any("mbarrier.try_wait" in b for b in body)
            loops.append((i, j, spin))
    return loops


def _idescs(lines: list[str]) -> dict:
    return {m.group(1): int(m.group(2)) for ln in lines if (m := IDESC.search(ln))}


def _tcgen05_shape(value: int, cta_group: int) -> tuple[int, int]:
    """M and N from a kind::f16 instruction descriptor (M>>4 at bit 24, N>>3 at bit 17)."""
    m = ((value >> 24) & 0x1F) << 4
    n = ((value >> 17) & 0x3F) << 3
    return m * cta_group, n


def _mma(ln: str, idescs: dict, group: int) -> Mma | None:
    if m := WGMMA.search(ln):
        after_acc = ln.split("}", 1)[1].lstrip(", ")
        return Mma(int(m.group(1)), int(m.group(2)), int(m.group(3)),
                   "reg" if after_acc.startswith("{") else "smem", group)
    if m := TCGEN05.search(ln):
        mm, nn = _tcgen05_shape(idescs.get(m.group(5), 0), int(m.group(1)))
        a_from = "tmem" if m.group(3).strip().startswith("[") else "smem"
        return Mma(mm, nn, 16, a_from, group)
    return None


def _pipes(mix: Mix, ln: str) -> None:
    """The per-pipe counts of one statement (MUFU, FP32, cvt, TMEM and SMEM traffic)."""
    if MUFU.search(ln):
        mix.sfu += 1
    if FP32.search(ln):
        mix.fp32 += 1
    if ln.startswith("cvt.") or " cvt." in ln:
        mix.cvt += 1
    if m := TMEM_MOVE.search(ln):
        words = TMEM_WORDS.get(m.group(2), 1) * int(m.group(3) or 1)
        if m.group(1) == "ld":
            mix.tmem_ld_words += words
        else:
            mix.tmem_st_words += words
    for m in (SMEM_MOVE.search(ln), MATRIX.search(ln)):
        if m is None:
            continue
        nbytes = int(m.group(2) or 1) * int(m.group(3)) // 8 if m.re is SMEM_MOVE \
            else 4 * int(m.group(2))
        if m.group(1) == "ld":
            mix.smem_ld_bytes += nbytes
        else:
            mix.smem_st_bytes += nbytes
    if "mbarrier.arrive" in ln:
        mix.arrives += 1
    if re.search(r"tcgen05\.commit\b", ln):
        mix.commits += 1


def mix_of(lines: list[str], idescs: dict) -> Mix:
    mix, group = Mix(), 0
    for ln in lines:
        if LABEL.match(ln) or ln.startswith("."):
            continue
        if PAIR_MOVE.match(ln):  # an f32x2 pair built or taken apart: a register pair in SASS
            continue
        mix.instr += 1
        _pipes(mix, ln)
        if "ex2." in ln:
            mix.ex2 += 1
        if "mbarrier.try_wait" in ln:
            mix.waits += 1
        if re.search(r"\bbar\.(sync|arrive)\b", ln):
            mix.bars += 1
        if (m := EXPECT_TX.search(ln)):
            mix.tma_bytes += int(m.group(1))
        if "cp.async.bulk.tensor" in ln and ".global.mbarrier" in ln:
            mix.tma_loads += 1
        if "cp.async.bulk.wait_group" in ln:
            mix.store_drains += 1
        if (x := _mma(ln, idescs, group)) is not None:
            mix.mmas.append(x)
        if "wgmma.commit_group" in ln or re.search(r"tcgen05\.commit\b", ln):
            group += 1
    return mix


def _role_regions(lines: list[str], warpgroups: int) -> list[tuple[str, int, int, int, int]]:
    """(name, first, last, instances, threads) per role."""
    setps = {m.group(2): (m.group(1), int(m.group(3))) for ln in lines if (m := ROLE_SETP.search(ln))}
    ends = {m.group(1): i for i, ln in enumerate(lines) if (m := LABEL.match(ln))}
    out = []
    for i, ln in enumerate(lines):
        m = ROLE_SKIP.search(ln)
        if not m:
            continue
        op, k = setps.get(m.group(1), ("eq", 0))
        instances = 1 if op == "eq" else warpgroups - k
        head = " ".join(lines[i + 1:i + 6])
        threads = 1 if "%not_issuer" in head else 128
        out.append((f"role{len(out)}", i + 1, ends[m.group(2)], instances, threads))
    return out


def _contains(outer, inner) -> bool:
    return outer[0] <= inner[0] and inner[1] <= outer[1] and outer != inner


def _busy(lines, lp) -> bool:
    return any(_mma(ln, {}, 0) is not None or "tcgen05.mma" in ln or
               ("cp.async.bulk.tensor" in ln and ".global.mbarrier" in ln)
               for ln in lines[lp[0]:lp[1] + 1])


def _waits(lines, lp) -> bool:
    return any("mbarrier.try_wait" in ln for ln in lines[lp[0]:lp[1] + 1])


def split_guarded(body: list[str]) -> tuple[list[str], list[str]]:
    """(the statements every trip runs, those of blocks a forward branch to an
    `L_endif_N` label skips): a generated `if` runs on some trips only (pyptx's
    `if_` branches to `$_else_N` alike)."""
    every, guarded, until = [], [], None
    for ln in body:
        if until is not None:
            if (m := LABEL.match(ln)) and m.group(1) == until:
                until = None
                every.append(ln)
            else:
                guarded.append(ln)
            continue
        every.append(ln)
        if (m := GUARD.search(ln)) and any(LABEL.match(x) and LABEL.match(x).group(1) == m.group(1)
                                           for x in body):
            until = m.group(1)
    return every, guarded


def _role(lines, loops, idescs, region) -> Role:
    name, first, last, instances, threads = region
    inside = [lp for lp in loops if first <= lp[0] and lp[1] <= last and not lp[2]]
    busy = [lp for lp in inside if _busy(lines, lp)] or [lp for lp in inside if _waits(lines, lp)]
    steps = [lp for lp in busy if not any(_contains(lp, o) for o in busy)]
    if not steps:
        return Role(name, instances, threads, None, mix_of(lines[first:last], idescs))
    step = steps[0]
    around = [lp for lp in inside if _contains(lp, step)]
    tile = min(around, key=lambda lp: lp[1] - lp[0]) if around else (first, last - 1, False)
    every, guarded = split_guarded(lines[step[0]:step[1] + 1])
    tile_lines = lines[tile[0]:step[0]] + guarded + lines[step[1] + 1:tile[1] + 1]
    return Role(name, instances, threads, mix_of(every, idescs), mix_of(tile_lines, idescs),
                program_of(every, idescs), pre_counts(program_of(lines[tile[0]:step[0]], idescs)))


# ------------------------------------------------------------------ step programs

@dataclass(frozen=True)
class Op:
    """One step of a role's trip, in program order (bench/model_pipe.py runs them):
    work (instructions between synchronisations: `mix`), wait (for barrier `key`,
    the signal of `lag` trips earlier), arrive, tma (`nbytes` completing `key`),
    mma (a run of MMAs), commit (tcgen05: `key` arrives when this thread's MMAs
    are done), wg_commit / wg_wait (wgmma groups: wait until `lag` are pending)."""
    kind: str
    key: str = ""
    lag: int = 0
    nbytes: int = 0
    mmas: tuple = ()
    mix: Mix | None = None


ADDR = re.compile(r"\[\s*%?(\w+)\s*(?:\+\s*(\d+))?\s*\]")
TRY_WAIT = re.compile(r"mbarrier\.try_wait\S*\s+%\w+,\s*(\[[^\]]*\])\s*,\s*(%?\w+)")
WG_WAIT = re.compile(r"wgmma\.wait_group\S*\s+(\d+)")


def barrier_key(addr: str) -> str:
    """A barrier by its address's constant: a ring's slots share their base's offset
    (the slot is in the register), a lone barrier has its own."""
    m = ADDR.search(addr)
    return m.group(2) or m.group(1)


def _definition(body: list[str], upto: int, reg: str) -> list[str] | None:
    """The operands of the last statement before `upto` that writes `reg`."""
    pat = re.compile(r"^(\S+)\s+" + re.escape(reg) + r"\s*,\s*(.*?)\s*;")
    for ln in reversed(body[:upto]):
        if m := pat.match(ln):
            return [m.group(1)] + [x.strip() for x in m.group(2).split(",")]
    return None


def wait_lag(body: list[str], at: int, phase: str) -> int:
    """Trips between a wait and the signal it takes. The generated parity of a ring
    of S = 2^k slots is `(order >> k) & 1`, flipped (`xor 1`) for an event that
    starts `ready`: such a wait takes the signal of S trips earlier, the others the
    signal of their own trip (a toggled register or a constant: this trip's too)."""
    d = _definition(body, at, phase)
    if not d or d[0] != "xor.b32" or len(d) != 3 or d[1] == phase or d[2] != "1":
        return 0
    masked = _definition(body, at, d[1])
    shifted = _definition(body, at, masked[1]) if masked and masked[0] == "and.b32" else None
    if shifted and shifted[0].startswith("shr.") and shifted[2].isdigit():
        return 1 << int(shifted[2])
    return 1


def pre_counts(ops: list) -> dict:
    """key -> (waits, signals) of the code a role runs before its step loop (a peeled
    first step): the loop's trip t takes the rounds after these."""
    out: dict = {}
    for op in ops:
        if op.kind in ("wait", "arrive", "tma", "commit"):
            w, s = out.get(op.key, (0, 0))
            out[op.key] = (w + 1, s) if op.kind == "wait" else (w, s + 1)
    return out


def program_of(body: list[str], idescs: dict) -> list:
    """The trip as Ops: synchronisations and MMA runs in order, the instructions
    between them as work (a spin's try_wait and branch count as work too)."""
    ops, seg, group = [], [], 0

    def flush():
        if seg:
            ops.append(Op("work", mix=mix_of(seg, idescs)))
            seg.clear()
    for i, ln in enumerate(body):
        if LABEL.match(ln) or ln.startswith("."):
            continue
        seg.append(ln)
        sync = None
        if m := TRY_WAIT.search(ln):
            sync = Op("wait", barrier_key(m.group(1)), wait_lag(body, i, m.group(2)))
        elif (m := EXPECT_TX.search(ln)):
            sync = Op("tma", barrier_key(ln.split(",", 1)[1]), nbytes=int(m.group(1)))
        elif "mbarrier.arrive" in ln:
            sync = Op("arrive", barrier_key(ln.split(",", 1)[1]))
        elif re.search(r"tcgen05\.commit\b", ln):
            sync = Op("commit", barrier_key(ln))
        elif (x := _mma(ln, idescs, group)) is not None:
            flush()
            if ops and ops[-1].kind == "mma":
                ops[-1] = Op("mma", mmas=ops[-1].mmas + (x,))
            else:
                ops.append(Op("mma", mmas=(x,)))
            continue
        elif "wgmma.commit_group" in ln:
            sync, group = Op("wg_commit"), group + 1
        elif m := WG_WAIT.search(ln):
            sync = Op("wg_wait", lag=int(m.group(1)))
        if sync is not None:
            flush()
            ops.append(sync)
    flush()
    return ops


def census(ptx: str) -> KernelCensus:
    """The roles of the kernel in `ptx` with their step and tile mixes."""
    lines = _statements(ptx)
    name = next((ln.split()[-1].split("(")[0] for ln in lines if ln.startswith(".visible .entry")
                 or ln.startswith(".entry")), "?")
    m = MAXNTID.search(ptx)
    warpgroups = int(m.group(1)) // 128 if m else 1
    loops, idescs = _loops(lines), _idescs(lines)
    roles = [_role(lines, loops, idescs, r) for r in _role_regions(lines, warpgroups)]
    return KernelCensus(name, warpgroups, roles, barrier_names(lines))
