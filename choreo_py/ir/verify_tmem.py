"""The verifier's rules for a kernel's tensor-memory map (`ir.TmemMap`, pass tmem-plan).

A map the backend reads must describe cells that exist and that no two
regions share:
- the allocation is a power of two of at least 32 columns and at most the
  target's (9.7.16.7.1), and covers every region; `used` is where the last
  region ends;
- a region lies inside the target's lanes and the allocation's columns, its
  layout is the one of its fragment's rows (D: 128 rows from lane 0; F: 64 rows,
  16 lanes of each 32-lane subpartition from lane 0 or 16), and it has the
  columns its fragment needs (an accumulator [M, N]: N; a 16-bit A operand
  [M, K]: K / 2);
- each fragment has exactly one region per instance of the map's role;
- no two regions have a cell in common. The one sharing the plan makes, two
  M = 64 instances in one column block at lanes +0 and +16, has none. The one
  exception is the program's: `frag bf16[M, K] p : block in s` puts p's region
  (marked `in=s`) inside s's region of the same instance, and a region marked so
  must be that fragment's and lie wholly inside its host's cells.

Without a target the geometry is that of the targets with tensor memory.
"""
from __future__ import annotations

from typing import Optional

from choreo_py import ir, targets
from choreo_py.diagnostics import Diagnostics

_LAYOUT_ROWS = {"D": 128, "F": 64}


def _geometry(target: Optional[targets.Target]) -> tuple[int, int]:
    if target is not None:
        return target.tmem_lanes, target.tmem_columns
    have = [t for t in targets.TARGETS.values() if t.tmem_columns]
    return min(t.tmem_lanes for t in have), min(t.tmem_columns for t in have)


def _roles(stmts: list[ir.Stmt]):
    return (s for s in ir.walk(stmts) if isinstance(s, ir.Role))


def _region(k: ir.Kernel, r: ir.TmemRegion, lanes: int, diags: Diagnostics,
            alloc: int) -> None:
    frag = k.frag(r.frag)
    if frag is None:
        diags.error(f"tensor-memory region {r.frag}[{r.instance}]: no fragment '{r.frag}'", k.loc)
        return
    if r.kind not in ("acc", "operand") or frag.layout != r.kind:
        diags.error(f"tensor-memory region {r.frag}[{r.instance}]: kind '{r.kind}' but the fragment's layout is '{frag.layout}'",
                    frag.loc)
    rows = frag.shape[0] if len(frag.shape) == 2 else None
    if _LAYOUT_ROWS.get(r.layout) != rows:
        diags.error(f"tensor-memory region {r.frag}[{r.instance}]: layout {r.layout} for a fragment of {rows} rows", frag.loc)
    if r.lane not in ((0,) if r.layout == "D" else (0, 16)):
        diags.error(f"tensor-memory region {r.frag}[{r.instance}]: layout {r.layout} cannot start at lane +{r.lane}", frag.loc)
    elif max(r.lanes) >= lanes:
        diags.error(f"tensor-memory region {r.frag}[{r.instance}]: lanes past the {lanes} of tensor memory", frag.loc)
    if len(frag.shape) == 2:
        want = frag.shape[1] // 2 if r.kind == "operand" else frag.shape[1]
        if r.ncols != want:
            diags.error(f"tensor-memory region {r.frag}[{r.instance}]: {r.ncols} columns, but {frag.dtype}{list(frag.shape)} "
                        f"takes {want}", frag.loc)
    if r.host != frag.host:
        diags.error(f"tensor-memory region {r.frag}[{r.instance}]: placed in "
                    f"{r.host or 'its own columns'}, but the fragment is declared in "
                    f"{frag.host or 'its own'}", frag.loc)
    if r.col < 0 or r.col + r.ncols > alloc:
        diags.error(f"tensor-memory region {r.frag}[{r.instance}]: columns {r.col}..{r.col + r.ncols - 1} outside the allocation "
                    f"of {alloc}", frag.loc)


def _instances(k: ir.Kernel, m: ir.TmemMap, diags: Diagnostics) -> None:
    count = 1
    if m.role is not None:
        if not any(s.members == m.role for s in _roles(k.body)):
            diags.error(f"tensor-memory map: no role of members {set(m.role)}", k.loc)
        count = len(m.role)
    for name in dict.fromkeys(r.frag for r in m.regions):
        got = sorted(r.instance for r in m.regions if r.frag == name)
        if got != list(range(count)):
            diags.error(f"tensor-memory map: '{name}' has regions for instances {got}, the role "
                        f"has {count}", k.loc)
        if name in m.staged:
            diags.error(f"tensor-memory map: '{name}' is both placed and staged", k.loc)


def _hosted_in(a: ir.TmemRegion, b: ir.TmemRegion, a_lanes, b_lanes) -> bool:
    """`a` is the program's `p : block in s` region inside `b` (s, same instance): the one
    pair allowed to share cells, and only when all of a's cells are b's."""
    return (a.host == b.frag and a.instance == b.instance and b.col <= a.col
            and a.col + a.ncols <= b.col + b.ncols and a_lanes <= b_lanes)


def _overlaps(k: ir.Kernel, regions: list[ir.TmemRegion], diags: Diagnostics) -> None:
    lanes = [frozenset(r.lanes) for r in regions]
    for i, a in enumerate(regions):
        for j in range(i):
            b = regions[j]
            if _hosted_in(a, b, lanes[i], lanes[j]) or _hosted_in(b, a, lanes[j], lanes[i]):
                continue
            if a.col < b.col + b.ncols and b.col < a.col + a.ncols and lanes[i] & lanes[j]:
                diags.error(f"tensor-memory regions {b.frag}[{b.instance}] and "
                            f"{a.frag}[{a.instance}] share cells (lanes and columns)", k.loc)


def check(k: ir.Kernel, target: Optional[targets.Target], diags: Diagnostics) -> None:
    """Adds an error to `diags` for each rule `k.tmem` breaks (none without a map)."""
    m = k.tmem
    if m is None:
        return
    if target is not None and not target.tmem_columns:
        diags.error(f"a tensor-memory map on {target.name}, which has no tensor memory", k.loc)
        return
    if m.refused is not None:
        if m.regions:
            diags.error("tensor-memory map: regions in a map that was refused", k.loc)
        return
    lanes, columns = _geometry(target)
    if m.alloc < 32 or m.alloc > columns or m.alloc & (m.alloc - 1):
        diags.error(f"tensor-memory allocation of {m.alloc} columns (a power of two in "
                    f"[32, {columns}])", k.loc)
    end = max((r.col + r.ncols for r in m.regions), default=0)
    if m.used != end:
        diags.error(f"tensor-memory map: used={m.used}, but the regions end at column {end}",
                    k.loc)
    for r in m.regions:
        _region(k, r, lanes, diags, m.alloc)
    _instances(k, m, diags)
    _overlaps(k, m.regions, diags)
    for name in m.staged:
        if k.frag(name) is None:
            diags.error(f"tensor-memory map: staged operand '{name}' is no fragment", k.loc)


def check_tmem_map(k: ir.Kernel, target: Optional[targets.Target] = None) -> None:
    """`check` on its own, raising the errors (the backend's check of the map it reads)."""
    diags = Diagnostics(limit=50)
    check(k, target, diags)
    diags.raise_if_errors()
