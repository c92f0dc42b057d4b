"""The SASS census of a kernel: instruction classes per loop and per warp role, read from
the machine code ptxas made (nvdisasm of a cubin), not from the PTX.

    python3 bench/model_sass.py FILE.cubin [--loops]     # the role step loops' counts

Why SASS: ptxas reschedules, unrolls, fuses (FFMA2 pairs two FMAs, FMNMX3 takes three
operands) and expands (ex2 without .ftz, the polynomial exponential) what the PTX says,
so the issue slots, the MUFU work and the FMA-pipe work a warp really spends per K/V step
are only in the SASS. The census finds loops (a branch back to a label), tells the spin
loops of a barrier wait (SYNCS.PHASECHK retried, NANOSLEEP) from work loops, and names
each work loop's role by what it holds: tcgen05/wgmma MMAs (UTC*MMA, HGMMA) -> mma
(Hopper: consumer, which also has the softmax), TMA loads (UTMALDG) -> load, MUFU.EX2 ->
softmax, tensor-memory loads and stores without exponentials -> correction.
"""
from __future__ import annotations

import argparse
import functools
import glob
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass, field

_LINE = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s+(@!?U?P[T0-9]+\s+)?([A-Z][A-Za-z0-9_.]*)(.*?);")
_LABEL = re.compile(r"^(\.L_x_\d+):")
_TARGET = re.compile(r"`\((\.L_x_\d+)\)")
_FUNC = re.compile(r"^\s*\.text\.(\S+):")


@dataclass(frozen=True)
class Ins:
    """One SASS instruction: address, predicate guard, opcode with modifiers, operands."""
    addr: int
    pred: str
    op: str
    args: str

    @property
    def base(self) -> str:
        return self.op.split(".")[0]


@dataclass
class Loop:
    """Instructions [start, end] (addresses), closed by a backward branch at end."""
    start: int
    end: int
    body: list = field(default_factory=list)
    children: list = field(default_factory=list)
    spin: bool = False
    role: str = ""

    @property
    def size(self) -> int:
        return len(self.body)


def nvdisasm_path() -> str | None:
    """nvdisasm from $NVDISASM, PATH, or the nvidia-cuda-nvdisasm wheel beside this Python."""
    env = os.environ.get("NVDISASM")
    if env and os.path.exists(env):
        return env
    found = shutil.which("nvdisasm")
    if found:
        return found
    for site in sys.path:
        for cand in glob.glob(os.path.join(site, "nvidia", "cu1*", "bin", "nvdisasm")):
            return cand
    return None


@functools.lru_cache(maxsize=32)
def disassemble(cubin: str) -> str:
    """The SASS text of a cubin (nvdisasm -c: code sections only)."""
    tool = nvdisasm_path()
    if tool is None:
        raise FileNotFoundError("nvdisasm not found (pip install nvidia-cuda-nvdisasm, or set NVDISASM)")
    return subprocess.run([tool, "-c", cubin], check=True, capture_output=True, text=True).stdout


def parse(text: str) -> dict:
    """Per function: (instructions in address order, {label: address})."""
    funcs: dict = {}
    name, ins, labels, pending = None, [], {}, []
    for line in text.splitlines():
        m = _FUNC.match(line)
        if m:
            name, ins, labels, pending = m.group(1), [], {}, []
            funcs[name] = (ins, labels)
            continue
        m = _LABEL.match(line.strip())
        if m:
            pending.append(m.group(1))
            continue
        m = _LINE.match(line)
        if m and name is not None:
            i = Ins(int(m.group(1), 16), (m.group(2) or "").strip(), m.group(3), m.group(4).strip())
            for lab in pending:
                labels[lab] = i.addr
            pending = []
            ins.append(i)
    return funcs


def main_function(funcs: dict) -> tuple:
    """The kernel with the most instructions (a cubin may hold helper kernels)."""
    return max(funcs.values(), key=lambda f: len(f[0]))


def _is_spin(body: list) -> bool:
    """A barrier wait's retry loop: a PHASECHK (try_wait) or NANOSLEEP and no real work."""
    ops = [i.base for i in body]
    waits = any(i.op.startswith("SYNCS.PHASECHK") for i in body) or "NANOSLEEP" in ops
    work = sum(1 for i in body if classify(i) in ("fp32", "mufu_ex2", "mma", "tma_load",
                                                  "ldtm", "sttm", "smem"))
    return waits and work == 0


_STUB = {"MOV", "IMAD", "UMOV", "SYNCS", "NANOSLEEP", "YIELD", "BRA"}


def _retry_return(ins: list, k: int) -> bool:
    """Whether the unconditional branch ins[k] ends an out-of-line wait retry: ptxas puts
    a try_wait's retry after the kernel's EXIT (MOV, PHASECHK, NANOSLEEP, a spin, then a
    branch back behind the wait); that branch closes no loop of the kernel."""
    if ins[k].pred:
        return False
    stub = []
    for j in range(k - 1, max(k - 12, -1), -1):
        prev = ins[j]
        if prev.base == "EXIT" or (prev.base == "BRA" and not prev.pred):
            break
        stub.append(prev)
    return bool(stub) and all(x.base in _STUB for x in stub) and any(
        x.op.startswith("SYNCS.PHASECHK") for x in stub)


def _outline_return(ins: list, k: int, labels: dict, index: dict) -> bool:
    """Whether the unconditional branch ins[k] back to t returns from a block ptxas moved out
    of line (a wait's retry, a divergent collective): the instruction before t is a
    conditional branch (NOPs skipped) to s inside (t, ins[k]], and s follows an EXIT or an unconditional
    branch, so only that jump enters it. A loop's own back edge is not of this shape."""
    i = ins[k]
    t = labels[_TARGET.search(i.args).group(1)]
    j = index[t]
    if i.pred or j == 0:
        return False
    while j > 1 and ins[j - 1].base == "NOP":
        j -= 1
    before = ins[j - 1]
    guarded = before.pred or ".DIV" in before.op  # BRA.DIV: taken when the warp diverged
    m = _TARGET.search(before.args) if before.base == "BRA" and guarded else None
    if not m or m.group(1) not in labels:
        return False
    s = labels[m.group(1)]
    if not t < s <= i.addr or index[s] == 0:
        return False
    lead = ins[index[s] - 1]
    return lead.base == "EXIT" or (lead.base == "BRA" and not lead.pred)


def loops(ins: list, labels: dict) -> list:
    """The loops of a function, outermost first, each with its children."""
    found = []
    index = {x.addr: n for n, x in enumerate(ins)}
    for k, i in enumerate(ins):
        if i.base != "BRA" or ".ANY" in i.op:
            continue  # BRA.U.ANY: the ELECT loop of a warp-uniform op, one trip a warp
        t = _TARGET.search(i.args)
        if not t or t.group(1) not in labels or labels[t.group(1)] > i.addr:
            continue
        if labels[t.group(1)] == i.addr:
            continue  # BRA to itself: the trap ptxas puts after the last EXIT
        if _retry_return(ins, k) or _outline_return(ins, k, labels, index):
            continue
        start = labels[t.group(1)]
        body = [x for x in ins if start <= x.addr <= i.addr]
        found.append(Loop(start, i.addr, body))
    found.sort(key=lambda lp: (lp.start, -lp.end))
    uniq = []
    for lp in found:  # two back branches to one label: keep the longer
        if uniq and uniq[-1].start == lp.start:
            uniq[-1].end = max(uniq[-1].end, lp.end)
            continue
        uniq.append(lp)
    for lp in uniq:
        lp.body = [x for x in ins if lp.start <= x.addr <= lp.end]
        lp.spin = _is_spin(lp.body)
    for lp in uniq:  # parent: the smallest loop strictly containing it
        outer = [o for o in uniq if o is not lp and o.start <= lp.start and lp.end <= o.end]
        if outer:
            min(outer, key=lambda o: o.end - o.start).children.append(lp)
    for lp in uniq:
        lp.role = _role(lp.body)
    return uniq


# ------------------------------------------------------------------ classes

_FP32 = {"FFMA", "FMUL", "FADD", "FFMA2", "FMUL2", "FADD2"}
_PAIRED = {"FFMA2", "FMUL2", "FADD2"}


def classify(i: Ins) -> str:
    """The class of one instruction for the pipes the model charges."""
    b, op = i.base, i.op
    if b in _FP32:
        return "fp32"
    if b == "MUFU":
        return "mufu_ex2" if op.startswith("MUFU.EX2") else "mufu_other"
    if b in ("FMNMX", "FMNMX3"):
        return "fmnmx"
    if b in ("UTCHMMA", "UTCMMA", "UTCQMMA", "UTCOMMA", "UTCIMMA", "HGMMA"):
        return "mma"
    if b in ("UTMALDG", "UBLKCP"):
        return "tma_load"
    if b in ("UTMASTG", "UBLKRED", "UTMAREDG"):
        return "tma_store"
    if b == "LDTM":
        return "ldtm"
    if b == "STTM":
        return "sttm"
    if b in ("LDS", "STS", "LDSM", "STSM", "ATOMS"):
        return "smem"
    if b == "SYNCS" or b in ("BAR", "UTCBAR"):
        return "barrier"
    if b in ("F2FP", "F2F", "I2F", "F2I", "F2IP", "I2FP"):
        return "cvt"
    return "other"


def _role(body: list) -> str:
    c = Counter(classify(i) for i in body)
    if c["mma"]:
        return "consumer" if c["mufu_ex2"] else "mma"
    if c["tma_load"]:
        return "load"
    if c["mufu_ex2"]:
        return "softmax"
    if c["ldtm"] or c["sttm"]:
        return "correction"
    return "other"


def tmem_words(i: Ins) -> float:
    """32-bit words one thread moves with an LDTM/STTM, on average over the warp: a
    .DDdpBBbit shape moves DD lanes x BB bits per repetition over the warp's 32 threads
    (16x256b: 4 words, 32x32b: 1); .xN repeats it. The PTX 16x32bx2 shape becomes two
    SASS instructions (.16dp32bit_t0_t15 and _t16_t31), each for half the threads: 1/2
    a repetition each, on average."""
    m = re.search(r"\.(\d+)dp(\d+)bit", i.op)
    rep = re.search(r"\.x(\d+)", i.op)
    n = int(rep.group(1)) if rep else 1
    if not m:
        return n  # LDTM.xN: the 32x32b shape
    return int(m.group(1)) * int(m.group(2)) / (32 * 32) * n


@dataclass(frozen=True)
class Mix:
    """Per thread (warp) and per trip of a loop: what its instructions ask of each pipe."""
    instr: int
    fp32: int          # FP32 arithmetic instructions (an FFMA2 is one)
    fp32_paired: int   # of which f32x2 forms (FFMA2, FMUL2, FADD2)
    ex2: int
    mufu_other: int
    fmnmx: int
    cvt: int
    mma: int
    tma_load: int
    ldtm: int
    sttm: int
    tmem_words: float  # 32-bit words a thread moves to or from tensor memory
    smem: int
    barrier: int
    mma_a_smem: int = 0  # MMAs whose A operand is a shared-memory descriptor (not TMEM/registers)

    def row(self) -> str:
        return (f"{self.instr} instr, {self.fp32} fp32 ({self.fp32_paired} x2), {self.ex2} ex2, "
                f"{self.fmnmx} fmnmx, {self.cvt} cvt, {self.mma} mma, {self.tma_load} tma, "
                f"{self.ldtm}/{self.sttm} ldtm/sttm ({self.tmem_words} words), {self.smem} smem, "
                f"{self.barrier} barrier")


def mix(body: list, skip: tuple = ()) -> Mix:
    """Counts over a loop body, leaving out the instructions of the loops in `skip` (its
    spin loops: a wait retried costs the waiting warp nothing the model charges)."""
    out = set()
    for lp in skip:
        out.update(x.addr for x in lp.body)
    ins = [i for i in body if i.addr not in out]
    c = Counter(classify(i) for i in ins)
    return Mix(len(ins), c["fp32"], sum(1 for i in ins if i.base in _PAIRED), c["mufu_ex2"],
               c["mufu_other"], c["fmnmx"], c["cvt"], c["mma"], c["tma_load"], c["ldtm"],
               c["sttm"], sum(tmem_words(i) for i in ins if classify(i) in ("ldtm", "sttm")),
               c["smem"], c["barrier"], sum(1 for i in ins if classify(i) == "mma" and _a_smem(i)))


def _a_smem(i: Ins) -> bool:
    """UTCHMMA gdesc[A], gdesc[B], tmem[D] ... reads A from shared memory (tmem[..] first:
    A in tensor memory); HGMMA.MxNxK D, gdesc[..] has A and B in shared memory (a register
    second: A in registers)."""
    args = [a.strip() for a in i.args.split(",")]
    first = args[1] if i.base == "HGMMA" and len(args) > 1 else args[0]
    return first.startswith("gdesc")


def _spins_inside(lp: Loop) -> tuple:
    todo, out = list(lp.children), []
    while todo:
        c = todo.pop()
        if c.spin:
            out.append(c)
        todo.extend(c.children)
    return tuple(out)


@functools.lru_cache(maxsize=32)
def step_loops(cubin: str) -> dict:
    """Per role, its steady-state K/V loop and that loop's Mix (spin loops left out): the
    innermost work loop of the role (no child loop of the same role; the loop around it
    is the tile loop, with the epilogue's conversions and stores) with the most of the
    role's key instruction (MMAs, TMA loads, ex2, tensor-memory words), the shorter on a
    tie (a causal kernel's masked copy of the loop is the longer one and runs on the
    diagonal steps only)."""
    ins, labels = main_function(parse(disassemble(cubin)))
    key = {"mma": "mma", "consumer": "mma", "load": "tma_load", "softmax": "ex2",
           "correction": "tmem_words"}
    best: dict = {}
    for lp in loops(ins, labels):
        if lp.spin or lp.role not in key:
            continue
        m = mix(lp.body, _spins_inside(lp))
        if any(not c.spin and c.role == lp.role for c in lp.children):
            continue
        rank = (getattr(m, key[lp.role]), -m.instr)
        old = best.get(lp.role)
        if old is None or rank > (getattr(old[1], key[lp.role]), -old[1].instr):
            best[lp.role] = (lp, m)
    return best


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("cubin")
    ap.add_argument("--loops", action="store_true", help="every loop, not only the step loops")
    a = ap.parse_args(argv)
    try:
        return _print(a)
    except (OSError, subprocess.CalledProcessError) as err:
        detail = (getattr(err, "stderr", "") or "").strip()
        print(f"model_sass.py: error: {err}{': ' + detail if detail else ''}", file=sys.stderr)
        return 2


def _print(a) -> int:
    if a.loops:
        ins, labels = main_function(parse(disassemble(a.cubin)))
        for lp in loops(ins, labels):
            print(f"{lp.start:#07x}-{lp.end:#07x} {'spin' if lp.spin else lp.role:10s} "
                  f"{mix(lp.body, _spins_inside(lp)).row()}")
        return 0
    for role, (lp, m) in sorted(step_loops(a.cubin).items()):
        print(f"{role:10s} {lp.start:#07x}-{lp.end:#07x}: {m.row()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
