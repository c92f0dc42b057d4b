"""`choreo_py.emulate(path, tensors, target=...)` and `emulate_ptx(ptx, launch, tensors)`."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Iterable, Optional

import numpy as np

from .launch import LaunchSpec, bind, check_call, from_co, tma_build
from .machine import DEFAULT_STEP_LIMIT, Machine
from .ptx_parse import parse_ptx


@dataclass
class EmuStats:
    ctas: int = 0
    instructions: int = 0      # warp instructions executed
    seconds: float = 0.0
    notes: list = field(default_factory=list)  # what relaxed mode let pass

    @property
    def rate(self) -> float:
        return self.instructions / self.seconds if self.seconds else 0.0


def run_spec(spec: LaunchSpec, tensors: dict, *, schedule: str = "round_robin", seed: int = 0,
             strict: bool = True, step_limit: int = DEFAULT_STEP_LIMIT,
             stats: Optional[EmuStats] = None, scalars: Optional[dict] = None) -> dict:
    check_call(spec, tensors, scalars)  # the tensors and the entry asserts, before anything
    spec = tma_build(spec, tensors)
    kernel = parse_ptx(spec.ptx)
    launch, _ = bind(spec, tensors, kernel.params, scalars)
    start = time.perf_counter()
    with np.errstate(all="ignore"):
        m = Machine(kernel, launch, schedule=schedule, seed=seed, strict=strict,
                    ptx_name=spec.ptx_name, step_limit=step_limit)
        m.run()
    if stats is not None:
        g = launch.grid
        stats.ctas += g[0] * g[1] * g[2]
        stats.instructions += m.instructions
        stats.seconds += time.perf_counter() - start
        stats.notes += m.notes
    return tensors


def emulate(path: str, tensors: dict, *, target: str = "sm_100a", schedule: str = "round_robin",
            seed: int = 0, strict: bool = True, include_dirs: Iterable[str] = (),
            defines: Optional[dict] = None, step_limit: int = DEFAULT_STEP_LIMIT,
            stats: Optional[EmuStats] = None) -> dict:
    """Compiles `path` for `target` and executes its PTX on the CPU, in place on `tensors`.

    `tensors` maps each kernel parameter name to a contiguous CPU tensor of
    its dtype. Faults of the program (races, deadlocks, misuse, forms the
    emulator does not model) raise `EmuError`s naming the PTX and .co lines.
    """
    spec = from_co(path, target, tuple(include_dirs), defines)
    return run_spec(spec, tensors, schedule=schedule, seed=seed, strict=strict,
                    step_limit=step_limit, stats=stats)


def emulate_ptx(ptx: str, launch: dict, tensors: dict, **kw) -> dict:
    """Raw PTX plus a JSON-style launch description (see launch.py)."""
    spec = LaunchSpec.from_json(ptx, launch, kw.pop("ptx_name", "kernel.ptx"))
    return run_spec(spec, tensors, **kw)
