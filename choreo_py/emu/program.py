"""Host programs in the emulator: a file's `__co__` functions with every launch run as PTX.

`emulate_program(path, target=...)` returns the file's functions as callables
over CPU tensors, like `choreo_py.load`: the host program runtime
(runtime/host_program.ThreadProgram) binds the arguments, allocates the host
buffers, runs `: device(cpu)` regions and launches the kernels in program
order; EmuLauncher, its launcher here, executes each launch's PTX entry
(the same instructions as the GPU's module, traced with `// file.co:N`
comments) in the emulator. A thread entry gets a pointer per tensor and the
dimensions, an MMA entry its PARAMS (tensor maps, dimensions), as the CUDA
launcher gives them. Faults (races, deadlocks, forms not modelled) raise
EmuError, naming the entry's PTX line and the Choreo statement.
"""
from __future__ import annotations

import functools
import os
from dataclasses import replace
from typing import Iterable, Optional

from choreo_py.targets import launch_smem

from .api import EmuStats, run_spec
from .launch import LaunchSpec, traced_ptx
from .machine import DEFAULT_STEP_LIMIT
from .ptx_parse import parse_ptx


class EmuLauncher:
    """Runs a ThreadProgram's launches in the emulator, one after another (a launch's
    writes are in the tensors before the next starts, as on one CUDA stream)."""

    def __init__(self, program, *, schedule: str = "round_robin", seed: int = 0,
                 strict: bool = True, step_limit: int = DEFAULT_STEP_LIMIT,
                 stats: Optional[EmuStats] = None) -> None:
        self.program = program
        self.options = dict(schedule=schedule, seed=seed, strict=strict, step_limit=step_limit,
                            stats=stats)
        self._specs: dict = {}  # kernel -> (LaunchSpec without parameters, PTX parameter names)

    engine_name, devices = "the emulator", ("cpu",)  # what host/binding.py checks for

    @staticmethod
    def device(tensors: dict):
        import torch

        device = next(iter(tensors.values())).device if tensors else torch.device("cpu")
        if device.type != "cpu":
            raise ValueError(f"the emulator runs on CPU tensors, not {device}")
        return device

    @staticmethod
    def sync(device) -> None:
        """Launches run to completion in launch(): nothing is left to wait for."""

    def _spec(self, name: str):
        if name not in self._specs:
            p = self.program
            info = p.kernels[name]
            ptx = traced_ptx(p.loaded.namespace, p.text, p.filename, info["KERNEL"],
                             co_path=p.path)
            stem = os.path.splitext(os.path.basename(p.path))[0]
            spec = LaunchSpec(ptx, (), (int(info["THREADS"]), 1, 1), int(info["SMEM_BYTES"]),
                              [], entry=info.get("ENTRY", name), arch=p.target,
                              ptx_name=f"{stem}.{p.target.replace('_', '')}.{name}.ptx")
            self._specs[name] = (spec, [q.name for q in parse_ptx(ptx).params])
        return self._specs[name]

    def launch(self, name: str, tensors: dict, dims: dict, device) -> None:
        other = self.program.for_launch(name, tensors)  # (rows TMA cannot copy: another build)
        if other is not self.program:
            return other.launcher.launch(name, tensors, dims, device)
        info = self.program.kernels[name]
        spec, names = self._spec(name)
        coop = bool(info.get("COOPERATIVE"))
        if coop:  # the grid barrier's two words, zeroed per launch as the runtime does
            import torch

            tensors = dict(tensors, __grid_sync=torch.zeros(2, dtype=torch.int32))
        params, used = _params(info, names, dims)
        grid = tuple(int(g) for g in info["grid"](**{d: dims[d] for d in info["DIMS"]}))
        smem = launch_smem(info, dims, self.program.target, name)  # SMEM_RUN: by the dims
        run_spec(replace(spec, grid=grid, params=params, cooperative=coop, shared_bytes=smem),
                 {t: tensors[t] for t in used}, **self.options)


def _params(info: dict, names: list, dims: dict) -> tuple[list, list]:
    """(the launch's parameters as LaunchSpec lists them, the tensors they address): an MMA
    entry's PARAMS with its dimensions' values; a thread entry's pointer per tensor, then
    its dimensions (32-bit), in the order of the entry's PTX parameters."""
    from choreo_py.runtime.launch import word

    if "PARAMS" in info:
        params = [("u32", p[1], word(dims[p[2]])) if p[0] == "dim" else tuple(p)
                  for p in info["PARAMS"]]
        return params, sorted({p[2] for p in params if p[0] in ("tmap", "ptr")})
    tensors, sizes = list(info["TENSORS"]), list(info["DIMS"])
    if len(names) != len(tensors) + len(sizes):
        raise ValueError(f"the entry has {len(names)} parameters; KERNELS gives {len(tensors)} "
                         f"tensors and {len(sizes)} dimensions")
    params = [("ptr", n, t) for n, t in zip(names, tensors)]
    # a float argument as its f32 bits, as the GPU's launch packs it (runtime/launch.word)
    params += [("u32", n, word(dims[d])) for n, d in zip(names[len(tensors):], sizes)]
    return params, tensors


def emulate_program(path: str, *, target: Optional[str] = None, schedule: str = "round_robin",
                    seed: int = 0, strict: bool = True, include_dirs: Iterable[str] = (),
                    defines: Optional[dict] = None, step_limit: int = DEFAULT_STEP_LIMIT,
                    stats: Optional[EmuStats] = None, function: Optional[str] = None):
    """The `__co__` functions of `path` as callables over CPU tensors (`lib.name(a, b)`
    returns the function's result), each kernel launch executed by the emulator for
    `target` (default: the GPU present, else sm_100a). Strict mode unless `strict=False`;
    `schedule`/`seed` pick the warp order; `stats` collects what ran."""
    from choreo_py.runtime.kernel import open_library

    launcher = functools.partial(EmuLauncher, schedule=schedule, seed=seed, strict=strict,
                                 step_limit=step_limit, stats=stats)
    lib = open_library(path, target, include_dirs, defines, launcher)
    return lib if function is None else lib[function]
