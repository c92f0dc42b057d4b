"""The mutation gate: single-instruction mutants of the examples' sm_100a / sm_90a PTX,
each run in the strict emulator, and whether the emulator rejects it.

Classes (each a rule of the hardware a correct kernel must keep):
  del_wait      delete an mbarrier.try_wait, tcgen05.wait::ld/st, wgmma.wait_group or
                cp.async.bulk.wait_group
  del_fence     delete a tcgen05.fence::*, fence.proxy.async or fence.mbarrier_init
  del_arrive    delete an mbarrier.arrive* or bar.arrive
  del_commit    delete a tcgen05.commit, wgmma.commit_group or cp.async.bulk.commit_group
  del_barrier   delete a bar.sync / barrier.sync
  flip_parity   xor the parity operand of an mbarrier.try_wait.parity with 1
  shift_tmem    move a tcgen05.ld/st/mma tensor-memory address 8 columns right
  desc_field    flip one field of a tcgen05.mma shared-memory or instruction descriptor

Each mutant runs at three shapes (S = 128 random; S = 256 with the keys past the first
KV tile four times larger, so the row max grows and a skipped O rescale shows; S = 512
random: four KV tiles, so a K/V ring slot released inside the KV loop is refilled and a
deleted release shows (at three tiles only the prologue's slot is), and every tile weighs
in the softmax, so an error in the first tile's scores of a second query tile shows: at
S = 256 the larger later keys hide it) under three schedules, stopping at the first run
the emulator rejects. Outcomes: `caught` (the report's first line), `wrong` (ran, but O
is further from SDPA than TOLERANCE or than WORSE times the unmutated kernel's error at
the same shape and schedule: the emulator let wrong PTX pass), `benign` (ran and
matched, and `redundant` proves from straight-line code that the ordering the
instruction gave is given again), `passes` (ran and matched: benign only if an ISA
reason says so, see docs/emulator_sm100.md), `timeout`.

  nice python bench/mutate_ptx.py --per-class 6 --out bench/data/mutation_gate.tsv
"""
from __future__ import annotations

import argparse
import dataclasses
import re
import signal
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from choreo_py.emu.api import run_spec  # noqa: E402
from choreo_py.emu.launch import from_co  # noqa: E402

EXAMPLES = {   # name -> (path, target, defines, causal)
    "causal": ("examples/flash_atten_causal.co", "sm_100a", None, True),
    "blackwell": ("examples/flash_atten_blackwell.co", "sm_100a", {"NUM_SMS": "1"}, False),
    "causal_sm90": ("examples/flash_atten_causal.co", "sm_90a", None, True),
}
SHAPES = ((128, 1), (256, 4), (512, 1))  # (S, growth of the keys past the first tile)
SCHEDULES = ("round_robin", "random", "greedy")
TOLERANCE = 2e-2
# A mutant whose O is this many times further from SDPA than the unmutated kernel's (same
# shape, inputs and schedule; bf16 rounding of O alone gives ~1.7e-3) computed something
# else, even when under TOLERANCE (a descriptor field that moves few elements would).
WORSE = 3.0
OP = re.compile(r"^\s*(@!?%\w+\s+)?([a-z][\w.:]*)")

_DELETE = {
    "del_wait": ("mbarrier.try_wait", "tcgen05.wait::", "wgmma.wait_group",
                 "cp.async.bulk.wait_group"),
    "del_fence": ("tcgen05.fence::", "fence.proxy.async", "fence.mbarrier_init"),
    "del_arrive": ("mbarrier.arrive", "bar.arrive"),
    "del_commit": ("tcgen05.commit", "wgmma.commit_group", "cp.async.bulk.commit_group"),
    "del_barrier": ("bar.sync", "barrier.sync"),
}
# (name, bit) of the fields flipped: shared-memory descriptor (PTX ISA "Matrix
# Descriptors": start address >> 4 at 0, LBO at 16, SBO at 32, layout type at 61) and
# instruction descriptor (D format at 4, A type at 7, A/B major at 15/16, N >> 3 at 17,
# M >> 4 at 24).
SMEM_FIELDS = (("start", 1), ("lbo", 16), ("sbo", 32), ("layout", 62))
IDESC_FIELDS = (("d_fmt", 4), ("a_type", 7), ("a_major", 15), ("b_major", 16), ("n", 17),
                ("m", 24))


def opcode(line: str) -> str:
    m = OP.match(line)
    return m.group(2) if m else ""


def _declare(lines: list, decl: str) -> list:
    i = next(k for k, t in enumerate(lines) if t.strip() == "{")
    return lines[:i + 1] + ["\t" + decl] + lines[i + 1:]


def delete(lines, i):
    return lines[:i] + ["\t// mutated: deleted"] + lines[i + 1:]


def skip_wait(lines, i):
    """An mbarrier wait deleted: its predicate says complete at once (a plain deletion
    would leave the predicate unwritten, a register misuse, not the missing wait)."""
    m = re.match(r"^\s*(@!?%\w+\s+)?mbarrier\.(?:try|test)_wait[\w.:]*\s+(%\w+)\s*,", lines[i])
    if m is None:
        return delete(lines, i)
    return lines[:i] + [f"\t{m.group(1) or ''}mov.pred {m.group(2)}, 1;  // mutated: wait deleted"] \
        + lines[i + 1:]


def flip_parity(lines, i):
    m = re.search(r",\s*([^,;]+);\s*$", lines[i])
    par = m.group(1).strip()
    pred = OP.match(lines[i]).group(1) or ""
    new = lines[i][:m.start(1)] + "%mut_par" + lines[i][m.end(1):]
    out = lines[:i] + [f"\t{pred}xor.b32 %mut_par, {par}, 1;", new] + lines[i + 1:]
    return _declare(out, ".reg .b32 %mut_par;")


def shift_tmem(lines, i):
    m = re.search(r"\[(%\w+)(?:\+(\d+))?\]", lines[i])
    off = int(m.group(2) or 0) + 8
    return lines[:i] + [lines[i][:m.start()] + f"[{m.group(1)}+{off}]" + lines[i][m.end():]] \
        + lines[i + 1:]


def desc_field(which: int, bit: int):
    """Flip `bit` of tcgen05.mma operand `which` (1: A desc, 2: B desc, 3: idesc)."""
    def mutate(lines, i):
        head, ops = lines[i].split("]", 1)
        parts = [p.strip() for p in ops.rstrip().rstrip(";").split(",")]
        # parts[0] == '' (after the [d] operand)
        op = parts[which]
        ty = "b32" if which == 3 else "b64"
        pred = OP.match(lines[i]).group(1) or ""
        if re.fullmatch(r"-?\d+|0[xX][0-9a-fA-F]+", op):
            parts[which] = str(int(op, 0) ^ (1 << bit))
            return lines[:i] + [head + "]" + ", ".join(parts) + ";"] + lines[i + 1:]
        parts[which] = f"%mut_{ty}"
        new = head + "]" + ", ".join(parts) + ";"
        out = lines[:i] + [f"\t{pred}xor.{ty} %mut_{ty}, {op}, {1 << bit};", new] + lines[i + 1:]
        return _declare(out, f".reg .{ty} %mut_{ty};")
    return mutate


def sites(ptx: str):
    """Every (class, detail, line index, mutate) of the PTX."""
    lines = ptx.splitlines()
    for i, line in enumerate(lines):
        op = opcode(line)
        if not op:
            continue
        for cls, prefixes in _DELETE.items():
            if op.startswith(prefixes):
                yield cls, op, i, skip_wait if op.startswith("mbarrier.") and cls == "del_wait" \
                    else delete
        if op.startswith("mbarrier.try_wait.parity"):
            yield "flip_parity", op, i, flip_parity
        if op.startswith(("tcgen05.ld", "tcgen05.st", "tcgen05.mma")) and "[" in line:
            yield "shift_tmem", op, i, shift_tmem
        if op.startswith("tcgen05.mma"):
            a_smem = "[" not in line.split("]", 1)[1]
            for name, bit in SMEM_FIELDS:
                if a_smem:
                    yield "desc_field", f"A.{name}", i, desc_field(1, bit)
                yield "desc_field", f"B.{name}", i, desc_field(2, bit)
            for name, bit in IDESC_FIELDS:
                yield "desc_field", f"idesc.{name}", i, desc_field(3, bit)


# ------------------------------------------------------------- static reasons a pass is benign
_BRANCH = ("bra", "ret", "exit", "call", "brx")
_THREAD_SYNC = ("bar.sync", "barrier.sync", "bar.arrive", "barrier.arrive", "mbarrier.arrive",
                "bar.red")
_REGISTER_ONLY = ("add.", "sub.", "mov.", "mad.lo.", "mul.lo.", "and.", "or.", "xor.", "shl.",
                  "shr.", "cvt.u", "cvt.s", "setp.", "selp.")


_BRA = re.compile(r"\bbra(?:\.uni)?\s+([\w$]+)\s*;")


def _wait_loops(lines) -> set:
    """Labels of wait loops: `L: [register ops] mbarrier.try_wait ...; @!p bra L;`. Such a
    loop only spins on its wait; a straight-line reading may pass through it."""
    heads = set()
    for i, t in enumerate(lines):
        name = t.strip()[:-1]
        if not t.strip().endswith(":"):
            continue
        waited = False
        for u in lines[i + 1:i + 8]:
            op = opcode(u)
            m = _BRA.search(u)
            if m:
                if m.group(1) == name and waited:
                    heads.add(name)
                break
            if op.startswith(("mbarrier.try_wait", "mbarrier.test_wait")):
                waited = True
            elif op and not op.startswith(_REGISTER_ONLY):
                break
    return heads


def _straight(lines, i, step, loops):
    """(index, opcode) of the instructions from line i onward (step 1) or backward (-1),
    up to a label or a branch where other paths join or leave (the wait loops `loops`,
    from _wait_loops, read through)."""
    k = i + step
    while 0 <= k < len(lines):
        t = lines[k].strip()
        if t.endswith(":"):
            if t[:-1] not in loops:
                return
        elif op := opcode(lines[k]):
            if op.split(".")[0] in _BRANCH:
                m = _BRA.search(lines[k])
                if not (m and m.group(1) in loops):
                    return
            else:
                yield k, op
        k += step


_AFTER, _BEFORE, _WAIT_ST = ("tcgen05.fence::after_thread_sync",
                              "tcgen05.fence::before_thread_sync", "tcgen05.wait::st")
_SYNC_OR_WAIT = _THREAD_SYNC + ("mbarrier.try_wait", "mbarrier.test_wait", "bar.warp.sync")
# opcode deleted -> (direction, the same ordering given again by, unless first, reason):
# PTX ISA, tcgen05 memory consistency (the fences order all of the warp's earlier / later
# synchronisations) and tcgen05.wait (wait::st waits for all of the thread's prior st)
_GIVEN_AGAIN = {
    _AFTER: ((1, _AFTER, ("tcgen05.",),
              "another fence::after_thread_sync (line {}) precedes the warp's next tcgen05 "
              "operation"),
             (-1, _AFTER, _SYNC_OR_WAIT,
              "the warp's fence::after_thread_sync at line {} follows its last thread "
              "synchronisation already")),
    _BEFORE: ((1, _BEFORE, _THREAD_SYNC,
               "another fence::before_thread_sync (line {}) precedes the next thread "
               "synchronisation"),),
    _WAIT_ST: ((1, _WAIT_ST, _THREAD_SYNC + ("tcgen05.mma", "tcgen05.ld", "tcgen05.commit"),
                "a later tcgen05.wait::st (line {}) completes the same stores before the "
                "thread's next synchronisation"),
               (-1, _WAIT_ST, ("tcgen05.st",),
                "no tcgen05.st since the thread's tcgen05.wait::st at line {}: nothing to "
                "wait for")),
}


def _first(lines, i, step, want, stop, loops):
    """Line index of the first `want` from line i (straight-line) before any `stop`."""
    for k, o in _straight(lines, i, step, loops):
        if o.startswith(want):
            return k
        if o.startswith(stop):
            return None
    return None


def redundant(lines, i) -> str:
    """Why deleting line i cannot change what the kernel computes, where a straight-line
    reading proves it ('' where it does not): the ordering it gives is given again."""
    op = opcode(lines[i])
    loops = _wait_loops(lines)
    for step, want, stop, why in next((r for o, r in _GIVEN_AGAIN.items() if op.startswith(o)),
                                      ()):
        k = _first(lines, i, step, want, stop, loops)
        if k is not None:
            return why.format(k + 1)
    if op.startswith(("bar.sync", "barrier.sync")):
        count = lines[i].split(",")[-1].strip(" ;")
        for k, o in _straight(lines, i, -1, loops):
            if o.startswith(("bar.sync", "barrier.sync")):
                if lines[k].split(",")[-1].strip(" ;") == count:
                    return (f"between the previous barrier over the same threads (line {k + 1})"
                            " and this one the threads run only fences, register arithmetic"
                            " and arrivals: nothing new to order")
                return ""
            if not (o.startswith(("tcgen05.fence", "fence.proxy", "mbarrier.arrive"))
                    or o.startswith(_REGISTER_ONLY)):
                return ""
    return ""


def sample(items: list, n: int | None) -> list:
    if n is None or len(items) <= n:
        return items
    step = len(items) / n
    return [items[int(k * step)] for k in range(n)]


def inputs(s: int, grow: int):
    g = torch.Generator().manual_seed(0)
    t = {n: torch.randn(1, s, 1, 128, generator=g).bfloat16() for n in "QKV"}
    if grow != 1:
        t["K"][:, 128:] *= grow
    t["O"] = torch.full((1, s, 1, 128), float("nan")).bfloat16()
    return t


def sdpa(t, causal: bool):
    q, k, v = (t[n].float().transpose(1, 2) for n in "QKV")
    return torch.nn.functional.scaled_dot_product_attention(
        q, k, v, is_causal=causal, scale=128 ** -0.5).transpose(1, 2)


class _Timeout(Exception):
    pass


def _alarm(*_):
    raise _Timeout()


def run_one(spec, ptx: str, causal: bool, s: int, grow: int, schedule: str, limit: int,
            base: float | None = None):
    """(outcome, detail) of one run; `base`, the unmutated kernel's error in this run."""
    t = inputs(s, grow)
    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(limit)
    try:
        run_spec(dataclasses.replace(spec, ptx=ptx), t, schedule=schedule, strict=True)
    except _Timeout:
        return "timeout", f"more than {limit} s"
    except Exception as e:   # every emulator report (race, deadlock, misuse, parse)
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        return "caught", f"{type(e).__name__}: {first}"
    finally:
        signal.alarm(0)
    ref = sdpa(t, causal)
    o = t["O"].float()
    rel = float("inf") if o.isnan().any() else ((o - ref).norm() / ref.norm()).item()
    bound = TOLERANCE if base is None else min(TOLERANCE, WORSE * base)
    if not rel < bound:
        return "wrong", f"rel {rel:.3g}" + (f" (unmutated {base:.3g})" if base is not None else "")
    return "passes", f"rel {rel:.3g}"


def rel_error(detail: str) -> float:
    """The error a passing run's detail reports (`rel 0.00174`)."""
    return float(detail.split()[1])


def judge(spec, ptx: str, causal: bool, limit: int = 120, bases: dict | None = None):
    """The first run that rejects or mismatches, else `passes` (all nine runs).
    `bases`: (S, grow, schedule) -> the unmutated kernel's error there."""
    last = None
    for s, grow in SHAPES:
        for schedule in SCHEDULES:
            base = (bases or {}).get((s, grow, schedule))
            outcome, detail = run_one(spec, ptx, causal, s, grow, schedule, limit, base)
            where = f"S={s} grow={grow} {schedule}"
            if outcome != "passes":
                return outcome, detail, where
            last = detail
    return "passes", last, "all"


def gate(examples, per_class, out, classes=None, log=sys.stderr):
    rows = []
    for name in examples:
        path, target, defines, causal = EXAMPLES[name]
        spec = from_co(str(ROOT / path), target, defines=defines)
        bases = {}
        for s, grow in SHAPES:
            for schedule in SCHEDULES:
                outcome, detail = run_one(spec, spec.ptx, causal, s, grow, schedule, 300)
                assert outcome == "passes", (name, s, grow, schedule, outcome, detail)
                bases[(s, grow, schedule)] = rel_error(detail)
        lines = spec.ptx.splitlines()
        by_class: dict = {}
        for cls, detail, i, mutate in sites(spec.ptx):
            if classes is None or cls in classes:
                by_class.setdefault(cls, []).append((detail, i, mutate))
        for cls, items in sorted(by_class.items()):
            for detail, i, mutate in sample(items, per_class):
                t0 = time.time()
                ptx = "\n".join(mutate(list(lines), i)) + "\n"
                outcome, what, where = judge(spec, ptx, causal, bases=bases)
                why = redundant(lines, i) if outcome == "passes" else ""
                if why:
                    outcome, what = "benign", f"{what}; {why}"
                rows.append((name, target, cls, detail, i + 1, lines[i].strip(), outcome,
                             where, what, len(items)))
                print(f"{name} {cls} {detail} line {i + 1}: {outcome} ({where}) {what[:160]} "
                      f"[{time.time() - t0:.1f} s]", file=log, flush=True)
                if out:
                    _write(out, rows)
    return rows


def _write(out: Path, rows) -> None:
    head = "example\ttarget\tclass\tdetail\tptx_line\tinstruction\toutcome\trun\treport\tsites\n"
    out.write_text(head + "".join("\t".join(str(x).replace("\t", " ") for x in r) + "\n"
                                  for r in rows))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--examples", default="causal,blackwell")
    ap.add_argument("--per-class", type=int, default=None,
                    help="sites per class and example, evenly spaced (default: all)")
    ap.add_argument("--classes", default=None)
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args()
    rows = gate(a.examples.split(","), a.per_class, a.out,
                set(a.classes.split(",")) if a.classes else None)
    counts: dict = {}
    for r in rows:
        counts.setdefault((r[0], r[2]), {}).setdefault(r[6], 0)
        counts[(r[0], r[2])][r[6]] += 1
    for key, c in sorted(counts.items()):
        print(*key, c)
    return 0


if __name__ == "__main__":
    sys.exit(main())
