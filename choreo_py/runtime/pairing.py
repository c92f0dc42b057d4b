"""Per kernel, whether the .f32x2 pairs of its applies are kept (lowering/core/f32x2.py,
PAIR = PROBE): the paired build is assembled by ptxas -v. A kernel whose entry made pairs
and spilled is probed again with its register cap 8 lower (`.maxnreg`) when that cap is
its own (launch_bounds, no setmaxnreg), and keeps its pairs there if ptxas reports no
spill; otherwise it is lowered again with scalar arithmetic.

Why ptxas decides, not an estimate: the pairs do not lengthen live ranges (with no
register cap ptxas gives the FA4 form of tests/test_row_vote.py 143 registers paired
against 153 scalar), yet at a kernel's cap ptxas 13.0 may spill a paired build that it
assembles without spills one step lower (tests/co/flash_atten_blackwell_commit.co: 24
bytes at its 168 registers, none at 160), and two kernels of the same shape and budget
part ways (examples/flash_atten_blackwell_persistent.co keeps its pairs with no spill):
no count the lowering can make tells them apart (docs/blackwell-notes.md, section 9,
has the measurements). A kernel that made no pair costs no
probe; without ptxas a paired kernel is lowered scalar (nothing can show that its pairs
assemble without spills).

The verdict is part of the output: the module's `F32X2` (kernel, verdict) pairs and, in
the PTX, a `// f32x2: ...` line per kernel after the header. It is deterministic for a
given ptxas, whose version the verdict names. The probe's PTX and cubin are kept for
the rest of the process (build.ptx_of, build.ptxas), so `--emit ptx` traces once and
`--emit cubin` or a launch assembles once; the probe's spill counts are kept in the
on-disk cache (runtime/cache.py, CHOREO_PY_NO_CACHE=1 turns it off), so a second compile
of the same kernel runs no ptxas for it.
"""
from __future__ import annotations

import functools
import hashlib
import json
import re
import subprocess
from typing import Callable

from choreo_py import ir, targets

from . import cache

_ENTRY = re.compile(r"^\.(?:visible|weak)?\s*\.?entry\s+(\w+)\s*\(", re.M)
_PAIRED = re.compile(r"\.f32x2\s")
_SPILL = re.compile(r"(\d+) bytes spill stores, (\d+) bytes spill loads")
_NOTE = re.compile(r"^F32X2 = (.*)$", re.M)


def lower(module: ir.Module, target: str, lower_text: Callable[[], str], tools) -> str:
    """`lower_text()` (the module's pyptx text), its kernels paired where the probe keeps
    the pairs, under a lower cap where that is what keeps them; the verdicts recorded.
    `tools`: runtime/build.py, which calls this with itself (its ptx_of, ptxas,
    find_ptxas, entry_reports, remember_ptx), so that this module imports nothing of it."""
    from choreo_py.lowering.core import f32x2
    if f32x2.PAIR != f32x2.PROBE or not targets.get(target).f32x2:
        return lower_text()
    text = lower_text()
    if "f32x2(" not in text:
        return text
    build = tools
    ptx = build.ptx_of(text)
    names = {_entry(k.name): k.name for f in module.functions for k in f.kernels}
    d = _Decision(ptx, target, lower_text, names, tools)
    if d.scalar or d.capped:
        if d.scalar or d.capped_text is None:
            with f32x2.decided(scalar=d.scalar, capped=d.capped):
                text = lower_text()
            ptx = build.ptx_of(text)
        else:
            text, ptx = d.capped_text, d.capped_ptx
    noted = with_note(text, d.verdicts)
    build.remember_ptx(noted, ptx_note(ptx, d.verdicts))
    return noted


class _Decision:
    """The probe's verdicts on a paired build (`ptx`): kernels that keep their pairs,
    kernels paired under a cap CAP_STEP lower (their pairs spilled at the cap, not below
    it; tried only where the cap is the kernel's own: _declared_cap), kernels lowered
    scalar. `capped_text`: the module with every kernel tried capped, the output when
    none of them goes scalar."""

    def __init__(self, ptx: str, target: str, lower_text, names: dict, tools) -> None:
        self.names, self.target, self.tools = names, target, tools
        self.verdicts, self.scalar, self.capped = {}, set(), set()
        self.capped_text = self.capped_ptx = None
        paired, spills = paired_entries(ptx), _probe(ptx, target, tools)
        if spills is None:
            for e, n in paired.items():
                self._say(e, f"scalar: {n} .f32x2 pairs not probed (no ptxas)", self.scalar)
            return
        self.probe = f"ptxas {ptxas_version(tools.find_ptxas())} -v"
        spilled = {e: spills[e] for e in paired if spills.get(e, (0, 0)) != (0, 0)}
        for e in sorted(paired.keys() - spilled.keys()):
            self._say(e, f"paired: {paired[e]} .f32x2, no spill under {self.probe}")
        tried = [e for e in spilled if _declared_cap(entry_text(ptx, e))]
        below = self._below(tried, lower_text) if tried else {}
        for e, at_cap in sorted(spilled.items()):
            self._judge(e, paired[e], at_cap, below.get(e) if e in tried else None)

    def _say(self, entry: str, verdict: str, into=None) -> None:
        name = self.names.get(entry, entry)
        self.verdicts[name] = verdict
        if into is not None:
            into.add(name)

    def _below(self, tried: list, lower_text) -> dict:
        """The probe's report on the build with the kernels `tried` capped lower."""
        from choreo_py.lowering.core import f32x2
        with f32x2.decided(capped={self.names.get(e, e) for e in tried}):
            self.capped_text = lower_text()
        self.capped_ptx = self.tools.ptx_of(self.capped_text)
        return _probe(self.capped_ptx, self.target, self.tools)

    def _judge(self, entry: str, count: int, at_cap: tuple, below) -> None:
        """A kernel whose pairs spilled at its cap: `below` what they did under the
        lower cap (None: not tried)."""
        said = f"{self.probe} reported {at_cap[0]} bytes spill stores, {at_cap[1]} bytes " \
               "spill loads"
        cap = _maxnreg(entry_text(self.capped_ptx, entry)) if below is not None else 0
        if below is not None and tuple(below) == (0, 0):
            self._say(entry, f"paired under .maxnreg {cap}: {count} .f32x2; at the kernel's "
                             f"cap {said}, at {cap} none", self.capped)
        elif below is not None:
            self._say(entry, f"scalar: paired ({count} .f32x2), {said}; under .maxnreg {cap}, "
                             f"{below[0]} bytes spill stores", self.scalar)
        else:
            self._say(entry, f"scalar: paired ({count} .f32x2), {said}", self.scalar)


def entry_text(ptx: str, entry: str) -> str:
    """The part of the PTX from `entry`'s `.entry` line to the next entry's."""
    marks = list(_ENTRY.finditer(ptx))
    for m, nxt in zip(marks, marks[1:] + [None]):
        if m.group(1) == entry:
            return ptx[m.start():nxt.start() if nxt else len(ptx)]
    return ""


def _declared_cap(text: str) -> bool:
    """Whether an entry's register cap is the kernel's own (launch_bounds: .minnctapersm),
    not repartitioned by its roles (setmaxnreg): the cap a lower one can stand in for.
    Without launch_bounds ptxas picks the registers itself, and a cap would override its
    choice of occupancy."""
    return ".minnctapersm" in text and "setmaxnreg" not in text


def _maxnreg(text: str) -> int:
    m = re.search(r"^\s*\.maxnreg\s+(\d+)", text, re.M)
    return int(m.group(1)) if m else 0


def _entry(kernel: str) -> str:
    from choreo_py.lowering.core.writer import ptx_entry_name
    return ptx_entry_name(kernel)


def paired_entries(ptx: str) -> dict:
    """entry -> how many .f32x2 instructions its PTX has (entries with none left out)."""
    marks = list(_ENTRY.finditer(ptx))
    out = {}
    for m, nxt in zip(marks, marks[1:] + [None]):
        n = len(_PAIRED.findall(ptx, m.end(), nxt.start() if nxt else len(ptx)))
        if n:
            out[m.group(1)] = n
    return out


def _probe(ptx: str, target: str, build):
    """entry -> (spill store bytes, spill load bytes) by ptxas -v (`build`: lower's
    tools), or None: no ptxas. Kept in the on-disk cache (runtime/cache.py) under a hash
    of the PTX, the target and ptxas's version: the same PTX gets the same report,
    without running ptxas again."""
    exe = build.find_ptxas()
    if exe is None:
        return None
    where = _cached(ptx, target, ptxas_version(exe))
    if where is not None and where.is_file():
        try:
            return {e: tuple(v) for e, v in json.loads(where.read_text("utf-8")).items()}
        except (OSError, ValueError):
            pass
    _, report = build.ptxas(ptx, target, verbose=True)
    parts = build.entry_reports(report)
    spills = {e: tuple(int(x) for x in m.groups()) for e, t in parts.items()
              if (m := _SPILL.search(t))}
    if where is not None:
        cache.write_whole(where, json.dumps(spills, sort_keys=True))
    return spills


def _cached(ptx: str, target: str, version: str):
    """The cache file of a probe's report (None: caching is off)."""
    from .cache import cache_dir
    root = cache_dir()
    if root is None:
        return None
    blob = json.dumps({"format": "f32x2 probe 1", "target": target,
                       "ptxas": version, "ptx": ptx}, sort_keys=True)
    return root / "f32x2-probe" / (hashlib.sha256(blob.encode()).hexdigest() + ".json")




@functools.lru_cache(maxsize=4)
def ptxas_version(exe: str) -> str:
    """The release of the ptxas `exe` (`13.0.88`), from `ptxas --version`."""
    res = subprocess.run([exe, "--version"], capture_output=True, text=True)
    m = re.search(r"V(\d+\.\d+\.\d+)", res.stdout)
    return m.group(1) if m else "?"


def with_note(text: str, verdicts: dict) -> str:
    """The module text with `F32X2 = ((kernel, verdict), ...)` after its ARCH line."""
    line = f"F32X2 = {tuple(sorted(verdicts.items()))!r}"
    head = "# the .f32x2 pairs per kernel (lowering/core/f32x2.py, choreo_py/runtime/pairing.py)"
    at = text.index("\nARCH = ")
    end = text.index("\n", at + 1)
    return text[:end + 1] + head + "\n" + line + text[end:]


def ptx_note(ptx: str, verdicts) -> str:
    """The PTX with a `// f32x2: kernel: verdict` line per kernel after `.address_size`."""
    if not verdicts:
        return ptx
    items = verdicts.items() if isinstance(verdicts, dict) else verdicts
    lines = "".join(f"// f32x2: {k}: {v}\n" for k, v in sorted(items))
    m = re.search(r"^\.address_size[^\n]*\n", ptx, re.M)
    at = m.end() if m else 0
    return ptx[:at] + lines + ptx[at:]


def note_of(text: str):
    """The (kernel, verdict) pairs a module text records (() if none)."""
    import ast
    m = _NOTE.search(text)
    return ast.literal_eval(m.group(1)) if m else ()
