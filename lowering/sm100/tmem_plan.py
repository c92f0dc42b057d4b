"""Tensor-memory column plan for the sm_100a backend.

On sm_100a an MMA accumulator lives in tensor memory (TMEM: 128 lanes x 512
columns of 32 bits per CTA), not in registers. This pass gives every
accumulator fragment (`layout == "acc"`, the target of `mma.fill` / `mma`) and
every register A operand (`layout == "operand"`, e.g. the seed's bf16
`acc_s_cast`) a TMEM region per instance of the role that owns it.

Layout rules (PTX ISA 9.1, 9.7.16.10.5 "Data path layout organization"):

* M = 128 (layout D): row r is lane r. An instance uses all 128 lanes, so
  every instance needs its own columns.
* M = 64 (layout F, cta_group::1 without .ws): 4x1 data paths, half used.
  Rows 16q..16q+15 sit in lanes 32q + a + (0..15) with lane alignment
  a in {0, 16}. Two M=64 instances of an accumulator fed from shared memory
  share the same columns, one at alignment 0 and one at 16: instance i gets
  a = 16 * (i % 2) and the column block of pair i // 2 (CUTLASS's default
  "Interleaved" tmem_frg allocation does the same for M=64 accumulators).
* An A operand read from TMEM, and the accumulator of every MMA that reads
  one, stay at lane alignment 0 with a column block per instance. A and D of
  such an MMA must sit on the same lanes, and CUTLASS allocates both
  "NonInterleaved" (lane 0) for its TMEM-A atoms (SM100_MMA_*_TS): the upper
  half-subpartition as an A source is a path no CUTLASS kernel exercises, so
  the lowering does not depend on it. For the seed this uses exactly 512
  columns: S 0..127 (lanes 0/16), O 128..383, P 384..511.
* Columns: an f32 (or f16, unpacked: 9.7.16.10.4.1) accumulator [M, N] takes N
  columns; a 16-bit A operand [M, K] takes K / 2 columns (two elements packed
  per 32-bit cell, the lower column in the low half), read by the
  `tcgen05.mma [d], [a-tmem], b-desc, ...` form. An operand that form cannot
  take (A not K-major, not 16-bit, or a different M than its accumulator)
  stays out of TMEM and is listed as staged through shared memory.
* Regions start on 32-column boundaries (the allocation unit; no finer column
  alignment rule for MMA operands is stated in the ISA). The allocation is
  the next power of two >= 32 covering every region (9.7.16.7.1); more than
  512 columns is a ChoreoError naming each region.

Regions never alias: the seed overlaps QK[current] (writes acc_s) with
PV[previous] (reads acc_s_cast), so FA4's trick of writing P over S would need
a second S buffer the schedule does not have.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from choreo_py import ir
from choreo_py.diagnostics import ChoreoError

from . import descriptors as d

REGION_ALIGN = 32


@dataclass(frozen=True)
class TmemRegion:
    frag: str
    kind: str            # "acc" | "operand"
    dtype: str
    rows: int            # M
    cols: int            # logical columns: N of an accumulator, K of an operand
    instance: int        # role instance (0 = first member of the role)
    layout: str          # "D" (M = 128) | "F" (M = 64)
    lane_align: int      # 0 | 16
    col_start: int       # first 32-bit column, relative to the allocation
    ncols: int           # 32-bit columns used

    @property
    def offset(self) -> int:
        """TMEM address of the region relative to the allocated base."""
        return d.tmem_addr(self.lane_align, self.col_start)

    def describe(self) -> str:
        return (f"{self.frag}[{self.instance}] {self.dtype}[{self.rows}, {self.cols}] "
                f"layout {self.layout} lanes+{self.lane_align} "
                f"cols {self.col_start}..{self.col_start + self.ncols - 1} ({self.ncols})")


@dataclass
class TmemPlan:
    kernel: str
    role: Optional[str]              # condition of the role holding the MMAs
    instances: int
    regions: list[TmemRegion] = field(default_factory=list)
    staged: dict[str, str] = field(default_factory=dict)   # operand -> why it is not in TMEM
    columns_used: int = 0
    alloc_columns: int = 0

    def region(self, frag: str, instance: int = 0) -> TmemRegion:
        for r in self.regions:
            if r.frag == frag and r.instance == instance:
                return r
        raise KeyError(f"no TMEM region for {frag}[{instance}]")

    def summary(self) -> str:
        lines = [f"tmem plan for {self.kernel}: role ({self.role}) x {self.instances}, "
                 f"{self.columns_used} columns used, tcgen05.alloc {self.alloc_columns}"]
        lines += ["  " + r.describe() for r in self.regions]
        lines += [f"  {name}: staged through shared memory ({why})" for name, why in self.staged.items()]
        return "\n".join(lines)

    __str__ = summary


# ---------------------------------------------------------------- IR scan

@dataclass
class _MmaUse:
    stmt: ir.Mma
    role: Optional[ir.Role]


def _mma_uses(stmts: list[ir.Stmt], role: Optional[ir.Role] = None) -> list[_MmaUse]:
    uses: list[_MmaUse] = []
    for s in stmts:
        if isinstance(s, ir.Mma):
            uses.append(_MmaUse(s, role))
        inner = s if isinstance(s, ir.Role) else role
        for block in ir.child_blocks(s):
            uses += _mma_uses(block, inner)
    return uses


def _role_text(role: Optional[ir.Role]) -> Optional[str]:
    return None if role is None else role.name


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
        for name, kind in names:
            if name not in seen:
                seen.add(name)
                wanted.append((kernel.frag(name), kind))
    roles = {id(u.role): u.role for u in uses}
    if len(roles) > 1:
        raise ChoreoError("tcgen05 lowering: MMAs of one kernel must sit in one role "
                          f"(found {len(roles)})", uses[0].stmt.loc)
    return wanted, next(iter(roles.values())), staged, lane0


def _columns(frag: ir.Frag, kind: str) -> int:
    rows, cols = frag.shape
    try:
        if kind == "acc":
            d.check_mma_shape(rows, cols)
        elif rows not in (64, 128) or cols % 16:
            raise ValueError(f"an A operand is [64 or 128, a multiple of 16], got {list(frag.shape)}")
    except ValueError as e:
        raise ChoreoError(f"tcgen05 lowering: '{frag.name}': {e}", frag.loc) from None
    return cols // 2 if kind == "operand" else cols


# ---------------------------------------------------------------- placement

def _place(wanted, instances: int, lane0: frozenset = frozenset()) -> list[TmemRegion]:
    """Column blocks per instance group: M = 64 instances share a block two by two
    (lane alignments 0 and 16) unless the fragment is in `lane0` (a TMEM A operand
    or its accumulator); M = 128 instances and `lane0` fragments each take a block."""
    regions: list[TmemRegion] = []
    next_col = 0
    for frag, kind in wanted:
        rows = frag.shape[0]
        ncols = _columns(frag, kind)
        per_block = 2 if rows == 64 and frag.name not in lane0 else 1
        for group in range((instances + per_block - 1) // per_block):
            start = -(-next_col // REGION_ALIGN) * REGION_ALIGN
            for inst in range(group * per_block, min(instances, (group + 1) * per_block)):
                regions.append(TmemRegion(
                    frag=frag.name, kind=kind, dtype=frag.dtype, rows=rows, cols=frag.shape[1],
                    instance=inst, layout="F" if rows == 64 else "D",
                    lane_align=16 * (inst % 2) if per_block == 2 else 0,
                    col_start=start, ncols=ncols))
            next_col = start + ncols
    return regions


def _oversubscribed(kernel: ir.Kernel, regions: list[TmemRegion], used: int) -> ChoreoError:
    parts = "; ".join(r.describe() for r in regions)
    return ChoreoError(f"tensor memory over-subscribed in '{kernel.name}': the MMA fragments "
                       f"need {used} columns, more than the {d.TMEM_COLUMNS} of sm_100a "
                       f"({parts})", kernel.loc)


def plan_tmem(kernel: ir.Kernel) -> TmemPlan:
    """Place every MMA accumulator and TMEM-resident A operand of `kernel`."""
    uses = _mma_uses(kernel.body)
    if not uses:
        return TmemPlan(kernel.name, None, 0)
    wanted, role, staged, lane0 = _collect(kernel, uses)
    instances = len(role.members) if role is not None else 1
    regions = _place(wanted, instances, frozenset(lane0))
    used = max(r.col_start + r.ncols for r in regions)
    if used > d.TMEM_COLUMNS:
        raise _oversubscribed(kernel, regions, used)
    return TmemPlan(kernel.name, _role_text(role), instances, regions, staged,
                    columns_used=used, alloc_columns=d.alloc_columns(used))
