"""The targets: one record per GPU architecture, read by every stage.

Everything that differs between sm_90a and sm_100a and is not code lives
here: the backend package under `choreo_py.lowering`, the `-arch` ptxas
takes, the device capability that selects the target at run time, the
memory limits the passes check, how the threads share the rows of an MMA
accumulator (which the lowering's register layout and the interpreter both
read), the instructions some have and others lack, and the IR statements
the backend refuses by name. The CLI's choices, the driver, the passes, the
interpreter and the runtime all read this table, and the lowering gets its
target's record with its Target (lowering/core/target_base.py); nothing else
names a target's facts.

A target is a record here and a backend folder (lowering/<backend>/, whose
`TARGET` subclasses the core's Target). `register` adds one from outside the
package, with its backend unit (tests/test_new_target.py).

This module imports nothing of the compiler, so every layer may read it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

# Dynamic shared memory one block may use: 227 KiB on both Hopper and
# Blackwell (CUDA programming guide, "Compute capabilities", table of
# technical specifications: 228 KB per SM, 1 KB reserved per block).
_SMEM_227K = 227 * 1024
# The rounding of the shared-memory base every generated kernel does (to 1 KiB: pyptx declares
# the extern window `.align 128`); its SMEM_BYTES asks for this much beyond what it uses.
SMEM_ALIGN = 1024


@dataclass(frozen=True)
class Target:
    name: str                 # "sm_100a": the --target spelling, and ARCH in generated modules
    backend: str              # the package under choreo_py.lowering that lowers the IR
    ptxas_arch: str           # ptxas -arch=...
    capability: tuple[int, int]  # torch.cuda.get_device_capability() of a GPU that runs it
    smem_limit: int           # bytes of dynamic shared memory per block
    tmem_columns: int         # 32-bit tensor-memory columns per CTA (0: no tensor memory)
    tmem_lanes: int           # tensor-memory lanes per CTA
    # How the threads of a warpgroup share the rows of an MMA accumulator in registers,
    # by the accumulator's rows: the layout the backend loads it in (its acc_layout
    # builds its registers from this entry, the interpreter its owners of each column).
    acc_rows: dict
    # MMA completion is tracked by mbarriers the compiler adds (tcgen05.commit
    # arrives on one): the MMA-barrier pass runs only for such targets.
    mma_barriers: bool
    # IR statements the backend refuses by name: node class name -> what the
    # refusal calls it (the lowering core adds "is not lowered for <target> yet").
    refuses: dict = field(default_factory=dict)
    # The fp6/fp4 conversions to and from f32/f16 (cvt ... .e2m3x2/.e3m2x2/.e2m1x2; PTX 8.6,
    # sm_100a and later): without them fp6/fp4 data can only be copied.
    fp6_fp4_cvt: bool = False
    # min/max.f32 of three inputs (sm_100a and later): a reduction tree of max or min
    # combines three values at a node (lowering/core/fragments.tree).
    minmax3: bool = False
    # add/sub/mul/fma on packed float32 pairs (.f32x2; PTX 8.6, sm_100a): the independent
    # float32 arithmetic of an apply is issued two elements at a time (lowering/core/f32x2.py).
    f32x2: bool = False

    def row_split(self, rows: int) -> "RowSplit":
        """The split of a `rows`-row accumulator's rows; a fragment of another row count
        (a thread's own array) is held by one thread."""
        return self.acc_rows.get(rows, WHOLE_ROW)


@dataclass(frozen=True)
class RowSplit:
    """How the threads that share one row of a register accumulator divide its N columns.

    `lanes` are the shfl.bfly lane masks that join the owners of a row (so there are
    2 ** len(lanes) owners, owner t the t-th of them in lane order); owner t holds
    runs of `run` consecutive columns, every owners-th run from run t (0: one run of
    N / owners columns each). wgmma (sm_90a): lanes (1, 2), runs of 2, so thread t of
    a quad holds columns 8k + 2t, 8k + 2t + 1. tcgen05.ld (sm_100a): M = 64 is
    `.16x32bx2` with the second half-warp N/2 columns on, so lanes l and l ^ 16 share
    a row, each half of it; M = 128 is `.32x32b`, one thread per row.
    """
    lanes: tuple = ()
    run: int = 0

    @property
    def owners(self) -> int:
        return 1 << len(self.lanes)

    def run_of(self, n: int) -> int:
        """Columns of one run in an N-wide row."""
        return self.run or max(n // self.owners, 1)

    def owner(self, n: int, col: int) -> int:
        return (col // self.run_of(n)) % self.owners

    def columns(self, n: int, t: int) -> tuple:
        """Owner t's columns of an N-wide row, in the order of its registers."""
        return tuple(c for c in range(n) if self.owner(n, c) == t)

    def owner_of_lane(self, lane: int) -> int:
        """Which of its row's owners lane `lane` is (bit i of it: lane & lanes[i])."""
        return sum(1 << i for i, m in enumerate(self.lanes) if lane & m)

    def col_base(self, n: int, t: int) -> int:
        """Owner t's first column (its registers' columns are this plus an offset)."""
        return t * self.run_of(n)


WHOLE_ROW = RowSplit()


_COMMON_REFUSALS = {
    "DmaCopy": "dma.copy",
    "BufStore": "a store to a buffer element (per-thread buffer code)",
    "SyncShared": "sync.shared",
    "SyncWarp": "a warp barrier (sync.barrier : group)",
    "GridSync": "a grid-wide barrier (its cooperative launch is refused first)",
    "Fence": "sync.fence",
    "Yield": "a yield",
    "Launch": "a launch inside a kernel",
    "HostCall": "a call of a __co__ function inside a kernel",
    # (lowered per thread, lowering/core/warp_mma.py, in kernels of no other MMA form)
    "WarpMma": "an MMA on register fragments in a kernel with events, TMA or other MMAs",
}

TARGETS: dict[str, Target] = {
    "sm_100a": Target(
        name="sm_100a", backend="sm100", ptxas_arch="sm_100a", capability=(10, 0),
        smem_limit=_SMEM_227K, tmem_columns=512, tmem_lanes=128,
        acc_rows={64: RowSplit(lanes=(16,)), 128: WHOLE_ROW},
        mma_barriers=True, fp6_fp4_cvt=True, minmax3=True, f32x2=True,
        refuses={**_COMMON_REFUSALS,
                 "MmaLoad": "mma.load (a register A operand; tcgen05 takes A from shared "
                            "memory, so pass the shared tile to the MMA)"}),
    "sm_90a": Target(
        name="sm_90a", backend="sm90", ptxas_arch="sm_90a", capability=(9, 0),
        smem_limit=_SMEM_227K, tmem_columns=0, tmem_lanes=0,
        acc_rows={64: RowSplit(lanes=(1, 2), run=2)},
        mma_barriers=False, refuses=dict(_COMMON_REFUSALS)),
}

NAMES = tuple(TARGETS)  # the --target choices, the default first
COMPILE_DEFAULT = "sm_100a"
#: backend name -> its lowering unit, for records registered with one (register)
_LOWERINGS: dict = {}


class UnknownTarget(ValueError):
    pass


def register(record: Target, lowering=None) -> Target:
    """Adds `record` to the table, for every stage to read (get(), the CLI's choices, the
    passes, the runtime): a target is a record here and a backend folder, and this is how
    one joins without an edit of this file (a test's renamed architecture, a backend kept
    outside the package). `lowering`: the backend unit of a record whose `backend` names
    no folder of lowering/, an object whose `TARGET` is its lowering/core/target_base.py
    Target subclass (what such a folder's __init__.py holds). Returns the record."""
    global NAMES
    if record.name in TARGETS:
        raise ValueError(f"target '{record.name}' is already in the table")
    TARGETS[record.name] = record
    if lowering is not None:
        _LOWERINGS[record.backend] = lowering
    NAMES = tuple(TARGETS)
    return record


def unregister(name: str) -> None:
    """Takes a registered target out of the table again (and its lowering unit, when no
    other record names its backend)."""
    global NAMES
    record = TARGETS.pop(name)
    if not any(t.backend == record.backend for t in TARGETS.values()):
        _LOWERINGS.pop(record.backend, None)
    NAMES = tuple(TARGETS)


def registered_lowering(backend: str):
    """The lowering unit `register` was given for `backend`, or None."""
    return _LOWERINGS.get(backend)


def get(name: str) -> Target:
    """The record of `name`; an unknown name raises UnknownTarget listing the known ones."""
    t = TARGETS.get(name)
    if t is None:
        raise UnknownTarget(f"unknown target '{name}' (choose {', '.join(NAMES)})")
    return t


def for_capability(capability: tuple[int, int]) -> Optional[Target]:
    """The target a GPU of this compute capability runs, if any."""
    return next((t for t in TARGETS.values() if t.capability == tuple(capability)), None)


def _gpu_capability() -> Optional[tuple[int, int]]:
    """The current CUDA device's capability, or None without torch or a GPU."""
    try:
        import torch
    except ImportError:
        return None
    try:
        if not torch.cuda.is_available():
            return None
        return tuple(torch.cuda.get_device_capability())
    except Exception:  # noqa: BLE001 - a broken driver means "no GPU" here
        return None


def default_runtime_target() -> str:
    """The target of `run`, `emulate` and `load()` without --target: the GPU present
    (its compute capability), else sm_100a."""
    cap = _gpu_capability()
    t = for_capability(cap) if cap is not None else None
    return t.name if t is not None else COMPILE_DEFAULT


def resolve(name: Optional[str]) -> Target:
    """`name`'s record; None picks the runtime default."""
    return get(name if name is not None else default_runtime_target())


def launch_smem(info: dict, dims: dict, arch: str, name: str) -> int:
    """The dynamic shared memory one launch of a generated kernel asks for: its `SMEM_BYTES`,
    plus, where the kernel has shared buffers sized at run time, what its `SMEM_RUN` computes
    from the launch's dimensions. Past the target's limit the launch is refused here, by
    name (ValueError), before the driver refuses it without one."""
    n = int(info["SMEM_BYTES"])
    run = info.get("SMEM_RUN")
    if run is None:
        return n
    n += int(run(**{d: dims[d] for d in info["DIMS"]}))
    limit = get(arch).smem_limit + SMEM_ALIGN
    if n > limit:
        raise ValueError(f"kernel '{name}' needs {n - SMEM_ALIGN} bytes of shared memory for "
                         f"these dimensions (the limit is {limit - SMEM_ALIGN})")
    return n
