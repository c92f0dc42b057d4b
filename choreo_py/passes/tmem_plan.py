"""Tensor-memory plan: the TMEM cells of every MMA accumulator and TMEM-resident A operand.

For targets with tensor memory (targets.Target.tmem_columns; sm_100a: 128
lanes x 512 columns of 32 bits per CTA) an MMA accumulator lives in TMEM,
not in registers. This pass gives every accumulator fragment (the target of
`mma.fill` / `mma`, and the sum a block-scaled MMA folds into, which only
applies write) and every register A operand (e.g. the seed's bf16
`acc_s_cast`) a region per instance of the role that issues the MMAs, and
records the map on the kernel (`ir.TmemMap`), printed as

    tmem_alloc 512 used=512 role={1, 2}
    tmem acc_s[1]: acc layout=F lanes=32q+16+:16 cols=0+:128

Layout rules (PTX ISA 9.1, 9.7.16.10.5 "Data path layout organization"):

* M = 128 (layout D): row r is lane r. An instance uses all 128 lanes, so
  every instance needs its own columns.
* M = 64 (layout F, cta_group::1 without .ws): 4x1 data paths, half used.
  Rows 16q..16q+15 sit in lanes 32q + a + (0..15) with lane alignment
  a in {0, 16}. Two M=64 instances of an accumulator fed from shared memory
  share the same columns, one at alignment 0 and one at 16: instance i gets
  a = 16 * (i % 2) and the column block of pair i // 2 (CUTLASS's default
  "Interleaved" tmem_frg allocation does the same for M=64 accumulators).
  That is the one sharing of columns: the two regions have no lane in common.
* An A operand read from TMEM, and the accumulator of every MMA that reads
  one, stay at lane alignment 0 with a column block per instance. A and D of
  such an MMA must sit on the same lanes, and CUTLASS allocates both
  "NonInterleaved" (lane 0) for its TMEM-A atoms (SM100_MMA_*_TS): the upper
  half-subpartition as an A source is a path no CUTLASS kernel exercises, so
  the lowering does not depend on it. For the seed this uses exactly 512
  columns: S 0..127 (lanes 0/16), O 128..383, P 384..511.
* Columns: an f32 (or f16, unpacked: 9.7.16.10.4.1) accumulator [M, N] takes N
  columns; a 16-bit A operand [M, K] takes K / 2 (two elements packed per
  32-bit cell, the lower column in the low half), read by the
  `tcgen05.mma [d], [a-tmem], b-desc, ...` form. An operand that form cannot
  take (A not K-major, not 16-bit, or a different M than its accumulator)
  stays out of TMEM and is listed as staged through shared memory.
* Regions start on 32-column boundaries (the allocation unit; no finer column
  alignment rule for MMA operands is stated in the ISA). The allocation is
  the next power of two >= 32 covering every region (9.7.16.7.1); more than
  the target's columns is an error naming each region.

Regions never alias, but for one pair the program names: a block operand
declared `frag bf16[M, K] p : block in s` gets the region of accumulator s's
first K / 2 columns (FA4's P over S), marked `in=s`, once tmem_host_order.py
proves nothing touches S after P is written. The seed's P has its own columns:
it overlaps QK[current] (writes acc_s) with PV[previous] (reads acc_s_cast), so
P over S would need a second S buffer the schedule does not have.

What cannot be planned (MMAs in several roles, a fragment shape tcgen05 has
no layout for) is not an error of the program: the map records why
(`refused`), the backend refuses the kernel with it, and the interpreter
runs the kernel as written.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from .. import ir
from ..diagnostics import ChoreoError
from ..ir.tmem_rules import ALLOC_UNIT, alloc_columns, check_mma_shape, describe
from ..targets import Target
from . import tmem_host_order


# ---------------------------------------------------------------- IR scan

@dataclass
class _MmaUse:
    stmt: ir.Mma
    role: Optional[ir.Role]


class _Unplanned(Exception):
    """Why the kernel's MMAs have no TMEM plan (recorded, not raised to the user)."""

    def __init__(self, message: str, loc) -> None:
        super().__init__(message)
        self.message, self.loc = message, loc


def _mma_uses(stmts: list[ir.Stmt], role: Optional[ir.Role] = None) -> list[_MmaUse]:
    uses: list[_MmaUse] = []
    for s in stmts:
        if isinstance(s, ir.Mma):
            uses.append(_MmaUse(s, role))
        inner = s if isinstance(s, ir.Role) else role
        for block in ir.child_blocks(s):
            uses += _mma_uses(block, inner)
    return uses


def _operand_problem(kernel: ir.Kernel, use: _MmaUse) -> Optional[str]:
    """Why this MMA's register A operand cannot be read from TMEM, or None."""
    a = kernel.frag(use.stmt.a)
    acc = kernel.frag(use.stmt.acc)
    if not use.stmt.layout.startswith("row"):
        return "A must be K-major ('row') to be read from tensor memory"
    if a.dtype not in ("bf16", "f16"):
        return f"{a.dtype} A operands are not packed two per TMEM column"
    if acc is None or a.shape[0] != acc.shape[0]:
        return "A and the accumulator must have the same M"
    return None


def _collect(kernel: ir.Kernel, uses: list[_MmaUse]):
    """(frag, kind) in first-use order, the owning role, staged operands, and the
    fragments an MMA with a TMEM A operand touches (kept at lane alignment 0)."""
    wanted: list[tuple[ir.Frag, str]] = []
    staged: dict[str, str] = {}
    seen: set[str] = set()
    lane0: set[str] = set()
    loaded = {s.frag for s in ir.walk(kernel.body) if isinstance(s, ir.MmaLoad)}
    for use in uses:
        names = [(use.stmt.acc, "acc")]
        if isinstance(use.stmt.a, str) and use.stmt.a in loaded:
            pass  # an mma.load fragment: the lowering refuses mma.load by name first
        elif isinstance(use.stmt.a, str):
            problem = _operand_problem(kernel, use)
            if problem:
                staged[use.stmt.a] = problem
            else:
                names.append((use.stmt.a, "operand"))
                lane0.update((use.stmt.a, use.stmt.acc))
                host = kernel.frag(use.stmt.a).host
                lane0.update((host,) if host else ())  # P over S: on the lanes P needs
        for name, kind in names:
            if name not in seen:
                seen.add(name)
                wanted.append((kernel.frag(name), kind))
    for name in staged:
        if kernel.frag(name).host:
            f = kernel.frag(name)
            raise ChoreoError(f"'{name}' is declared in the columns of '{f.host}', but it "
                              f"cannot be read from tensor memory: {staged[name]}", f.loc)
    wanted += [(f, "acc") for f in _folded_accumulators(kernel, seen)]
    roles = {id(u.role): u.role for u in uses}
    if len(roles) > 1:
        raise _Unplanned("tcgen05 lowering: MMAs of one kernel must sit in one role "
                         f"(found {len(roles)})", uses[0].stmt.loc)
    return wanted, next(iter(roles.values())), staged, lane0


def _folded_accumulators(kernel: ir.Kernel, seen: set[str]) -> list[ir.Frag]:
    """Accumulators that no MMA writes, only applies: the sums a block-scaled MMA folds its
    scaled partial products into (sema/mma_scale.py). They live in tensor memory beside
    their parts, in the MMA role's columns, as every accumulator of the kernel does: each
    fold reads the part and the sum with tcgen05.ld and writes the sum back with
    tcgen05.st. (Blackwell's own block-scaled MMAs, tcgen05 kind::mxf8f6f4 / mxf4
    .block_scale, take ue8m0 scale factors per 32 or 16 K elements from tensor memory; a
    program's f32 scales are no such factors, hence the fold.)"""
    used = {s.acc for s in ir.walk(kernel.body) if isinstance(s, (ir.MmaFill, ir.MmaStore))}
    return [f for f in kernel.frags if f.layout == "acc" and f.name in used and f.name not in seen]


def _columns(frag: ir.Frag, kind: str) -> int:
    rows, cols = frag.shape
    try:
        if kind == "acc":
            check_mma_shape(rows, cols)
        elif rows not in (64, 128) or cols % 16:
            raise ValueError(f"an A operand is [64 or 128, a multiple of 16], got {list(frag.shape)}")
    except ValueError as e:
        raise _Unplanned(f"tcgen05 lowering: '{frag.name}': {e}", frag.loc) from None
    return cols // 2 if kind == "operand" else cols


# ---------------------------------------------------------------- placement

def _place(wanted, instances: int, lane0: frozenset = frozenset()) -> list[ir.TmemRegion]:
    """Column blocks per instance group: M = 64 instances share a block two by two
    (lane alignments 0 and 16) unless the fragment is in `lane0` (a TMEM A operand
    or its accumulator); M = 128 instances and `lane0` fragments each take a block."""
    regions: list[ir.TmemRegion] = []
    next_col = 0
    for frag, kind in wanted:
        if frag.host:
            continue  # laid over its accumulator's columns, below
        rows = frag.shape[0]
        ncols = _columns(frag, kind)
        per_block = 2 if rows == 64 and frag.name not in lane0 else 1
        for group in range((instances + per_block - 1) // per_block):
            start = -(-next_col // ALLOC_UNIT) * ALLOC_UNIT
            for inst in range(group * per_block, min(instances, (group + 1) * per_block)):
                regions.append(ir.TmemRegion(
                    frag=frag.name, instance=inst, kind=kind, layout="F" if rows == 64 else "D",
                    lane=16 * (inst % 2) if per_block == 2 else 0, col=start, ncols=ncols))
            next_col = start + ncols
    return regions + [r for frag, kind in wanted if frag.host
                      for r in _hosted(frag, kind, regions)]


def _hosted(frag: ir.Frag, kind: str, placed: list[ir.TmemRegion]) -> list[ir.TmemRegion]:
    """`frag ... p : block in s`: p's region of each instance starts at s's first column
    and lanes. It must fit: the same rows (data-path layout), no more columns than s."""
    hosts = [r for r in placed if r.frag == frag.host]
    if kind != "operand" or not hosts or hosts[0].kind != "acc":
        raise ChoreoError(f"'{frag.name}' is declared in the columns of '{frag.host}': only "
                          "an MMA's A operand read from tensor memory can lie in the columns "
                          "of an MMA accumulator", frag.loc)
    ncols = _columns(frag, kind)
    layout = "F" if frag.shape[0] == 64 else "D"
    if layout != hosts[0].layout or ncols > hosts[0].ncols:
        raise ChoreoError(f"'{frag.name}' ({frag.dtype}{list(frag.shape)}: {ncols} columns, "
                          f"layout {layout}) does not fit in the columns of '{frag.host}' "
                          f"({hosts[0].ncols} columns, layout {hosts[0].layout})", frag.loc)
    return [ir.TmemRegion(frag=frag.name, instance=h.instance, kind=kind, layout=layout,
                          lane=h.lane, col=h.col, ncols=ncols, host=h.frag) for h in hosts]


def _oversubscribed(kernel: ir.Kernel, target: Target, regions, used: int) -> ChoreoError:
    parts = "; ".join(describe(r, kernel.frag(r.frag)) for r in regions)
    return ChoreoError(f"tensor memory over-subscribed in '{kernel.name}': the MMA fragments "
                       f"need {used} columns, more than the {target.tmem_columns} of "
                       f"{target.name} ({parts})", kernel.loc)


def plan(kernel: ir.Kernel, target: Target) -> Optional[ir.TmemMap]:
    """The map of `kernel`'s MMA fragments (None without MMAs); a plan that needs more
    columns than the target has is a ChoreoError naming every region."""
    uses = _mma_uses(kernel.body)
    if not uses:
        return None
    try:
        wanted, role, staged, lane0 = _collect(kernel, uses)
        instances = len(role.members) if role is not None else 1
        regions = _place(wanted, instances, frozenset(lane0))
    except _Unplanned as why:
        return ir.TmemMap(role=None, refused=why.message, loc=why.loc)
    for frag, _ in wanted:
        if frag.host:
            tmem_host_order.check_order(kernel, frag)
    used = max((r.col + r.ncols for r in regions), default=0)
    if used > target.tmem_columns:
        raise _oversubscribed(kernel, target, regions, used)
    return ir.TmemMap(role=role.members if role is not None else None,
                      alloc=alloc_columns(used, target.tmem_columns) if regions else 0,
                      used=used, regions=regions, staged=staged)


def run(kernel: ir.Kernel, target: Target) -> None:
    if not target.tmem_columns or kernel.tmem is not None:
        return  # no tensor memory, or a map read back from IR text
    kernel.tmem = plan(kernel, target)
