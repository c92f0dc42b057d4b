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
  stores drained (`cp.async.bulk.wait_group`), barrier waits.
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

    def mma_flops(self) -> int:
        return sum(x.flops for x in self.mmas)


@dataclass
class Role:
    name: str
    instances: int
    threads: int          # 128 (a warpgroup) or 1 (an issuing thread)
    step: Mix | None      # one trip of the step loop
    tile: Mix             # once per tile (prologue, epilogue)


@dataclass
class KernelCensus:
    name: str
    warpgroups: int
    roles: list


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


def mix_of(lines: list[str], idescs: dict) -> Mix:
    mix, group = Mix(), 0
    for ln in lines:
        if LABEL.match(ln) or ln.startswith("."):
            continue
        mix.instr += 1
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


def _role(lines, loops, idescs, region) -> Role:
    name, first, last, instances, threads = region
    inside = [lp for lp in loops if first <= lp[0] and lp[1] <= last and not lp[2]]
    busy = [lp for lp in inside if _busy(lines, lp)]
    steps = [lp for lp in busy if not any(_contains(lp, o) for o in busy)]
    if not steps:
        return Role(name, instances, threads, None, mix_of(lines[first:last], idescs))
    step = steps[0]
    around = [lp for lp in inside if _contains(lp, step)]
    tile = min(around, key=lambda lp: lp[1] - lp[0]) if around else (first, last - 1, False)
    tile_lines = lines[tile[0]:step[0]] + lines[step[1] + 1:tile[1] + 1]
    return Role(name, instances, threads, mix_of(lines[step[0]:step[1] + 1], idescs),
                mix_of(tile_lines, idescs))


def census(ptx: str) -> KernelCensus:
    """The roles of the kernel in `ptx` with their step and tile mixes."""
    lines = _statements(ptx)
    name = next((ln.split()[-1].split("(")[0] for ln in lines if ln.startswith(".visible .entry")
                 or ln.startswith(".entry")), "?")
    m = MAXNTID.search(ptx)
    warpgroups = int(m.group(1)) // 128 if m else 1
    loops, idescs = _loops(lines), _idescs(lines)
    roles = [_role(lines, loops, idescs, r) for r in _role_regions(lines, warpgroups)]
    return KernelCensus(name, warpgroups, roles)
