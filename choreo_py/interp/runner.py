"""Entry points: run one kernel over its grid, or a module's launches in order."""
from __future__ import annotations

import itertools
import random
from dataclasses import dataclass
from typing import Callable, Optional

import torch

from .. import ir
from ..passes import event_arrivals
from ..ir.eval import EvalError, evaluate
from ..host.execute import HostRun, function_result, kernel_env
from .errors import InterpError
from . import printing
from .executor import BlockRun
from .fragments import RowOwners
from .grid import GridBarrier, has_grid_sync
from .memory import Memory
from .scalars import TORCH_DTYPES, Evaluator
from .scheduler import Scheduler
from .sync import EventState

DEFAULT_STEP_LIMIT = 2_000_000


@dataclass
class RunStats:
    blocks: int = 0
    statements: int = 0
    scheduling_steps: int = 0
    # a host region's host variables at its end (ir.Kernel.writes_back): name -> value
    host_writes: Optional[dict] = None


def static_counts(kernel: ir.Kernel) -> tuple[dict[str, int], dict[int, int]]:
    """(arrivals per event generation, instances per Role/Parallel statement) of one block:
    the facts of passes/event_arrivals, the one place their rule lives."""
    _, instances = event_arrivals.role_instances(kernel)
    return event_arrivals.arrivals(kernel), instances


def bind_dims(kernel: ir.Kernel, tensors: dict, dims: Optional[dict]) -> dict[str, int]:
    """Symbolic dimensions from the tensors' shapes, checked against `dims`."""
    bound = dict(dims or {})
    for p in kernel.params:
        t = tensors.get(p.name)
        if t is None:
            raise InterpError(f"no tensor given for parameter '{p.name}'", p.loc)
        if not isinstance(t, torch.Tensor) or t.dim() != len(p.shape):
            raise InterpError(f"'{p.name}' must be a tensor of rank {len(p.shape)}", p.loc)
        if t.dtype != TORCH_DTYPES.get(p.dtype):
            raise InterpError(f"'{p.name}' is {p.dtype} but the tensor is {t.dtype}", p.loc)
        for d, n in zip(p.shape, t.shape):
            if isinstance(d, ir.Sym):
                if bound.setdefault(d.name, int(n)) != n:
                    raise InterpError(f"'{p.name}' has {d.name} = {n}, but {d.name} = "
                                      f"{bound[d.name]} elsewhere", p.loc)
            elif isinstance(d, ir.Const) and d.value != n:
                raise InterpError(f"'{p.name}' dimension is {n}, the kernel needs {d.value}", p.loc)
    return bound


# ---------------------------------------------------------------- host buffers

def allocate(fn: ir.Function, tensors: dict, dims: dict, device=None,
             dtypes: Optional[dict] = None) -> dict[str, int]:
    """Binds every dimension from the arguments and adds the zeroed host buffers to `tensors`;
    returns the dimensions. `dtypes`: the torch dtype of each element type (default: the
    interpreter's, which widens unsigned types; a GPU needs the exact widths)."""
    probe = ir.Kernel(fn.name, list(fn.params), [], loc=fn.loc)
    if dtypes is None:
        bound = bind_dims(probe, tensors, dims) if fn.params else dict(dims)
    else:
        bound = dict(dims)
        for p in fn.params:
            t = tensors[p.name]
            if t.dtype != dtypes.get(p.dtype) or t.dim() != len(p.shape):
                raise InterpError(f"'{p.name}' must be a {p.dtype} tensor of rank "
                                  f"{len(p.shape)}", p.loc)
            for d, n in zip(p.shape, t.shape):
                if isinstance(d, ir.Sym) and bound.setdefault(d.name, int(n)) != n:
                    raise InterpError(f"'{p.name}' has {d.name} = {n}, but {d.name} = "
                                      f"{bound[d.name]} elsewhere", p.loc)
                if isinstance(d, ir.Const) and d.value != n:
                    raise InterpError(f"'{p.name}' dimension is {n}, the function needs "
                                      f"{d.value}", p.loc)
    table = dtypes or TORCH_DTYPES
    for p in fn.locals:
        shape = [_local_dim(p, d, bound) for d in p.shape]
        if p.name in tensors:  # given by the caller (`interpret(path, tensors)`)
            continue
        where = device if device is not None else _device(tensors)
        tensors[p.name] = _filled(shape, table[p.dtype], where,
                                  p.init.value if p.init is not None else 0)
    return bound


def _local_dim(p: ir.Param, d: ir.Expr, bound: dict) -> int:
    """A host buffer's dimension: a constant, a dimension or scalar of the arguments, or an
    expression of them (`f / 3`), which must come out positive."""
    if isinstance(d, ir.Const):
        return int(d.value)
    missing = sorted(ir.sym_names(d) - set(bound))
    if missing:
        raise InterpError(f"the dimension '{missing[0]}' of '{p.name}' is not bound "
                          "by the arguments", p.loc)
    if isinstance(d, ir.Sym):
        return bound[d.name]
    try:
        n = evaluate(d, bound)
    except EvalError as x:
        raise InterpError(f"a dimension of '{p.name}': {x}", p.loc) from None
    if not isinstance(n, int) or n <= 0:
        raise InterpError(f"a dimension of '{p.name}' is {n} for these arguments: "
                          "dimensions must be positive", p.loc)
    return n


#: Unsigned dtypes that torch creates and fills only as their signed twin (same bits).
_SIGNED_TWIN = {getattr(torch, n): t for n, t in (("uint16", torch.int16), ("uint32", torch.int32),
                                                  ("uint64", torch.int64)) if hasattr(torch, n)}


def _filled(shape, dtype, device, value):
    """A tensor of `value`s; unsigned 16..64-bit ones are filled through their signed twin
    (CUDA kernels for filling them may be missing) and viewed back."""
    twin = _SIGNED_TWIN.get(dtype)
    if twin is None:
        return torch.full(shape, value, dtype=dtype, device=device)
    bits = torch.iinfo(twin).bits
    signed = value - (1 << bits) if value >= 1 << (bits - 1) else value
    return torch.full(shape, signed, dtype=twin, device=device).view(dtype)


def _device(tensors: dict):
    return next((t.device for t in tensors.values() if isinstance(t, torch.Tensor)), "cpu")



def run_kernel(kernel: ir.Kernel, tensors: dict[str, torch.Tensor],
               dims: Optional[dict[str, int]] = None, schedule: str = "round_robin",
               seed: int = 0, step_limit: int = DEFAULT_STEP_LIMIT, owners: int = 4,
               max_delay: int = 8, torch_threads: Optional[int] = 1,
               progress: Optional[Callable[[int, int], None]] = None) -> RunStats:
    """Runs every block of `kernel`'s grid on the CPU; global tensors are updated in place.

    `owners` is the number of threads sharing an accumulator row, or a target
    (targets.Target: its split of each accumulator's rows, fragments.RowOwners). `step_limit` bounds the statements one
    block may execute. Raises `InterpError` subclasses for program faults.
    `torch_threads` sets torch's intra-op threads for the run (restored
    after): the tensors are tiles, for which one thread is fastest and
    several only contend, ten times slower on a loaded machine. None keeps
    the current setting. `progress(done, total)` is called after each block.
    """
    saved = torch.get_num_threads()
    if torch_threads is not None:
        torch.set_num_threads(torch_threads)
    try:
        return _run(kernel, tensors, dims, schedule, seed, step_limit, owners, max_delay,
                    progress)
    except InterpError as err:
        d = err.diagnostics[0]
        if d.loc is None:  # locate it: the first role position named, else the kernel
            d.loc = next((n.loc for n in d.notes if n.loc is not None), kernel.loc)
        raise
    finally:
        torch.set_num_threads(saved)


def _run(kernel, tensors, dims, schedule, seed, step_limit, owners, max_delay,
         progress=None) -> RunStats:
    env0 = bind_dims(kernel, tensors, dims)
    owners = RowOwners.of(1 if ir.per_thread_frags(kernel) else owners)  # a thread's own arrays
    arrivals, instances = static_counts(kernel)
    rng = random.Random(seed)
    ev = Evaluator(None)
    extents = [ev.integer(g.extent, env0, kernel.loc) for g in kernel.grid]
    blocks = list(itertools.product(*(range(n) for n in extents)))
    if schedule == "random":  # blocks are independent: their order must not matter either
        rng.shuffle(blocks)
    stats = RunStats()
    if has_grid_sync(kernel):
        return _run_together(kernel, tensors, env0, blocks, arrivals, instances, owners,
                             Scheduler(schedule, rng, step_limit, max_delay=max_delay), stats)
    for coords in blocks:
        env = dict(env0, **{g.var: c for g, c in zip(kernel.grid, coords)})
        events = {e.name: EventState(e.name, e.slots, e.ready, arrivals.get(e.name, 1))
                  for e in kernel.events}
        sched = Scheduler(schedule, rng, step_limit, max_delay=max_delay)
        run = BlockRun(kernel, Memory(kernel, tensors, env0), events, sched, owners, instances)
        run.start(env)
        if kernel.writes_back:  # a host region: one block
            stats.host_writes = {h: run.main.env[c] for h, c in kernel.writes_back}
        stats.blocks += 1
        stats.statements += sched.steps
        stats.scheduling_steps += sched.ticks
        if progress is not None:
            progress(stats.blocks, len(blocks))
    return stats


def _run_together(kernel, tensors, env0, blocks, arrivals, instances, owners, sched,
                  stats) -> RunStats:
    """A cooperative launch with a grid-wide barrier: every block's thread in one scheduler
    (grid.py), as the GPU has them all resident."""
    grid = GridBarrier(len(blocks))
    for coords in blocks:
        env = dict(env0, **{g.var: c for g, c in zip(kernel.grid, coords)})
        events = {e.name: EventState(e.name, e.slots, e.ready, arrivals.get(e.name, 1))
                  for e in kernel.events}
        run = BlockRun(kernel, Memory(kernel, tensors, env0), events, sched, owners, instances)
        run.grid = grid
        run.begin(env)
    sched.run()
    stats.blocks += len(blocks)
    stats.statements += sched.steps
    stats.scheduling_steps += sched.ticks
    return stats


def _function_dims(fn: ir.Function, tensors: dict, dims: dict) -> dict:
    """The sizes the function is called with: given ones, and those its tensors give."""
    out = dict(dims)
    for p in fn.params:
        t = tensors.get(p.name)
        if isinstance(t, torch.Tensor) and t.dim() == len(p.shape):
            for d, n in zip(p.shape, t.shape):
                if isinstance(d, ir.Sym):
                    out.setdefault(d.name, int(n))
    return out


def check_assert(s: ir.Assert, dims: dict) -> None:
    """An entry assertion on the sizes: false stops the run before any kernel starts."""
    try:
        ok = evaluate(s.cond, dims)
    except EvalError as e:
        raise InterpError(f"assertion '{s.message}' cannot be evaluated: {e}", s.loc) from None
    if not ok:
        used = ", ".join(f"{n}={dims[n]}" for n in sorted(ir.sym_names(s.cond)) if n in dims)
        raise InterpError(f"assertion failed: {s.message} ({used})", s.loc)


def interpret_module(module: ir.Module, tensors: dict[str, torch.Tensor], *,
                     function: Optional[str] = None, schedule: str = "round_robin",
                     seed: int = 0, step_limit: int = DEFAULT_STEP_LIMIT, owners: int = 4,
                     progress: Optional[Callable[[int, int], None]] = None,
                     host_values: Optional[dict] = None, **dims: int) -> RunStats:
    """Runs the host program of one function (the named one, else the first): its
    launches in order (host/execute.py). `host_values` receives its host variables' last
    values (a scalar result among them)."""
    if not module.functions:
        raise InterpError("the module has no function to run")
    fn = module.functions[0] if function is None else module.function(function)
    if fn is None:
        raise InterpError(f"no function named '{function}'")
    options = dict(schedule=schedule, seed=seed, step_limit=step_limit, owners=owners,
                   progress=progress)
    host = _HostProgram(module, options)
    host.run(fn, tensors, dims, host_values)
    return host.total


class _HostProgram:
    """The host programs of a module's functions on the interpreter: one function's
    launches, prints, asserts and copies, and its calls of others (ir.HostCall), each
    run as a call of that function with the caller's tensors (by reference)."""

    def __init__(self, module: ir.Module, options: dict) -> None:
        self.module, self.options = module, options
        self.total = RunStats()

    def run(self, fn: ir.Function, tensors: dict, dims: dict,
            host_values: Optional[dict] = None) -> None:
        allocate(fn, tensors, dims)  # the function's host buffers the caller did not give
        run = HostRun(_function_dims(fn, tensors, dims),
                      lambda s, env: self.launch(s, env, tensors, dims),
                      lambda s, env: printing.host_print(s, env),
                      lambda s, env: check_assert(s, env),
                      lambda s, env: tensors[s.dst.base].copy_(tensors[s.src.base]),
                      lambda s, scalars, env: self.call(s, scalars, tensors))
        run.run(fn.body)
        if host_values is not None:
            host_values.update(run.env)

    def launch(self, s: ir.Launch, env: dict, tensors: dict, dims: dict) -> None:
        kernel = self.module.kernel(s.kernel)
        if kernel is None:
            raise InterpError(f"launch of unknown kernel '{s.kernel}'", s.loc)
        args = {p.name: tensors[p.name] for p in kernel.params if p.name in tensors}
        st = run_kernel(kernel, args, dict(dims, **kernel_env(kernel, env)), **self.options)
        env.update(st.host_writes or {})
        self.total.blocks += st.blocks
        self.total.statements += st.statements
        self.total.scheduling_steps += st.scheduling_steps

    def call(self, s: ir.HostCall, scalars: dict, tensors: dict):
        """The callee's result; a tensor result is the caller's buffer `s.result` from here
        on (the returned tensor itself, as co-mock's assignment of a call binds it)."""
        callee = self.module.function(s.func)
        if callee is None:
            raise InterpError(f"a call of '{s.func}', which the module does not hold", s.loc)
        args = {p: tensors[t] for p, t in s.tensors}
        values: dict = {}
        self.run(callee, args, dict(scalars), values)
        result = function_result(callee, args, values)
        if s.result is not None and s.result_dtype is None:
            tensors[s.result] = result
        return result
