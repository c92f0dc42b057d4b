"""The pass pipeline: the ordered passes that turn sema's IR into the IR a backend lowers.

Each pass is a function `(kernel, target) -> None` in a file of its own,
named for the IR fact it decides. `build_module` is the one way from a parsed
program to that IR (parse-level rules, sema, then these passes in order); the
driver (`choreo compile`, `--print-ir-after PASS`), `load()` and the
interpreter all call it. A pass that is meaningful for some targets only
says so itself (it returns at once for the others), so the list is the same
for every target.
"""
from __future__ import annotations

from typing import Callable, Iterable, Optional

from .. import frontend, ir, sema
from ..diagnostics import ChoreoError, warn
from ..ir.verify import verify_kernel
from ..targets import Target
from . import (budget, copy_swizzle, event_arrivals, exp2_split, fragment_layout,
               free_tile_swizzle, global_mma_stores, mma_roles, one_region,
               mma_barriers, pipeline_check, smem_limit, smem_plan, static_faults, sync_copies,
               tmem_plan, tmem_row_vote, warp_copies)

Pass = Callable[[ir.Kernel, Target], None]


class BeyondTheLanguage(ChoreoError):
    """A kernel past what the hardware runs (threads, registers), one that would hang, or
    one with a race on a tile: `compile` refuses it; `check` and the interpreter judge the
    language's rules, which it does not break, and warn."""


def _static_faults(kernel: ir.Kernel, target: Target) -> None:
    """Faults every run reaching them would report: errors for `check` too. Races on a
    tile (read before its copy is waited, handed back under an MMA) are compile errors
    only: the interpreter runs the program to show them."""
    try:
        static_faults.check_kernel(kernel)
    except static_faults.Races as e:
        raise BeyondTheLanguage(diagnostics=e.diagnostics) from None


def _budget(kernel: ir.Kernel, target: Target) -> None:
    try:
        budget.check_kernel(kernel)
    except ChoreoError as e:
        raise BeyondTheLanguage(diagnostics=e.diagnostics) from None


def _tmem_plan(kernel: ir.Kernel, target: Target) -> None:
    """More tensor memory than the target has: `compile` refuses, the interpreter (which
    keeps accumulators in its own memory) warns and runs the kernel."""
    try:
        tmem_plan.run(kernel, target)
    except ChoreoError as e:
        raise BeyondTheLanguage(diagnostics=e.diagnostics) from None


def _static_hangs(kernel: ir.Kernel, target: Target) -> None:
    """The simple fallback for kernels the pipeline check gave up on (an event waited on
    and never triggered)."""
    found = static_faults.hangs(kernel)
    if found:
        raise BeyondTheLanguage(diagnostics=found)


PASSES: tuple[tuple[str, Pass], ...] = (
    # faults every run reaching them would report (a view out of bounds for every index,
    # an accumulator read before its MMA is waited): errors for `check` too
    ("static-faults", _static_faults),
    ("budget", _budget),                         # threads and registers the block may have
    ("warp-copies", warp_copies.run),            # mma.sync kernels: a synchronous TMA copy -> dma.copy
    ("sync-copies", sync_copies.run),            # MMA kernels: a synchronous copy -> TMA + event
    ("global-mma-stores", global_mma_stores.run),  # mma.store into global -> staging + TMA
    ("one-region", one_region.run),              # MMA kernels: a block of one 1-instance region is it
    ("mma-roles", mma_roles.run),                # sm_100a: a region's MMAs -> its instances' role
    ("copy-swizzle", copy_swizzle.run),          # a buffer's swizzle from the copies that fill it
    ("fragment-layout", fragment_layout.run),    # acc / operand / row / row_partial
    ("event-arrivals", event_arrivals.run),      # arrivals that complete an event generation
    ("smem-plan", smem_plan.run),                # byte offsets of buffers and events
    ("free-tile-swizzle", free_tile_swizzle.run),  # swizzles of tiles no statement observes
    ("mma-barriers", mma_barriers.run),          # sm_100a: MMA completion mbarriers, TMEM slot
    ("smem-limit", smem_limit.run),              # the plan fits the target's shared memory
    ("tmem-plan", _tmem_plan),                   # tensor memory: the column map of MMA fragments
    ("tmem-row-vote", tmem_row_vote.run),        # sm_100a: row-guarded TMEM updates skip by warp vote
    ("exp2-split", exp2_split.run),              # P's 2^x: which elements run on the FMA pipes
    ("verify", verify_kernel),                   # the IR's rules, the TMEM map's in the target's bounds
    ("pipeline-check", pipeline_check.run),      # producers and consumers agree on event rings
    ("static-hangs", _static_hangs),             # where the pipeline check gave up
)
NAMES = tuple(name for name, _ in PASSES)


def run_kernel(kernel: ir.Kernel, target: Target, *, strict: bool = True,
               stop_after: Optional[str] = None) -> None:
    """Runs the passes over `kernel` in order, up to and including `stop_after`.

    Not strict (`choreo check`, the interpreter): a pipeline-check finding is a
    warning, so that the program can still be judged or run to show the hang."""
    pipeline_failed = False
    for name, fn in PASSES:
        if name == "static-hangs" and pipeline_failed:
            continue  # already reported, in the pipeline check's own terms
        try:
            fn(kernel, target)
        except (pipeline_check.PipelineError, BeyondTheLanguage) as e:
            if strict:
                raise
            pipeline_failed |= isinstance(e, pipeline_check.PipelineError)
            for d in e.diagnostics:
                warn(d.message, d.loc)
        if name == stop_after:
            return


def assume_asserts(fn: ir.Function) -> None:
    """Gives each kernel of `fn` the function's asserts on its sizes as assumptions: they
    are checked at the function's entry, before any launch, so no launch violates them
    (a static check that reasons about sizes must not report sizes they exclude)."""
    sizes = {d.name for p in fn.params for d in p.shape if isinstance(d, ir.Sym)}
    conds = [s.cond for s in fn.body if isinstance(s, ir.Assert)
             and ir.sym_names(s.cond) <= sizes]
    for k in fn.kernels:
        k.assumes = list(conds)


def run_function(fn: ir.Function, target: Target, *, strict: bool = True,
                 stop_after: Optional[str] = None) -> None:
    """The passes over every kernel of `fn`, under the function's asserts."""
    assume_asserts(fn)
    for k in fn.kernels:
        run_kernel(k, target, strict=strict, stop_after=stop_after)


def run_module(module: ir.Module, target: Target, *, strict: bool = True,
               stop_after: Optional[str] = None) -> ir.Module:
    for fn in module.functions:
        run_function(fn, target, strict=strict, stop_after=stop_after)
    return module


def build_module(program, target: Target, *, strict: bool = True,
                 stop_after: Optional[str] = None) -> ir.Module:
    """The IR of a parsed program with the passes run (up to `stop_after`).

    Strict (`compile`, `load()`): every finding is an error. Not strict (the
    interpreter): pipeline-check findings are warnings."""
    frontend.check_parse_rules(program)
    if strict:
        return run_module(sema.build_module(program), target, stop_after=stop_after)
    funcs, errors = [], []

    def build(func, callees):  # each function once, its passes run (its callers' too)
        fn = sema.build_function(func, strict=False, callees=callees)
        run_function(fn, target, strict=False, stop_after=stop_after)
        return fn
    callees = sema.Callees(build)
    for func in program.functions:
        try:
            funcs.append(callees.get(func))
        except ChoreoError as e:
            errors += e.diagnostics
    if errors:
        raise ChoreoError(diagnostics=errors)
    return ir.Module(funcs, program.file)


def ir_of_file(path: str, target: Target, include_dirs: Iterable[str] = (),
               defines: Optional[dict] = None, *, strict: bool = True) -> ir.Module:
    return build_module(frontend.parse_file(path, include_dirs, defines), target, strict=strict)
