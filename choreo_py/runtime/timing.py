"""Timing kernels on the GPU with CUDA events: what the autotuner and the benchmarks
(bench/timing.py, bench/autotune.py) measure with."""
from __future__ import annotations

from typing import Callable

#: Before the first timing, the GPU runs the first configuration this long: an idle GPU
#: takes tens of milliseconds to reach its clocks, and whichever configuration is timed
#: first would otherwise be timed slow.
SPIN_UP_S = 0.2


def event_timer(warmup: int = 10, reps: int = 50) -> Callable:
    """The default timer: `timer(run, config)` -> per-call milliseconds of `reps` calls of
    `run`, each between two CUDA events on the current stream, after `warmup` calls, each
    with the L2 cache flushed first (see event_times)."""
    spun = []

    def timer(run, config):
        if not spun:
            spin_up(run, SPIN_UP_S)
            spun.append(True)
        return event_times(run, warmup, reps, flush=True)

    timer.needs_cuda = True
    return timer


def spin_up(fn, seconds: float) -> None:
    """Calls `fn` for `seconds` of wall time (see SPIN_UP_S)."""
    import time

    import torch

    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        for _ in range(8):
            fn()
        torch.cuda.synchronize()


_FLUSH = {}


def _l2_flusher():
    """A zero-fill of twice the GPU's L2 cache: run before a timed call, it leaves none
    of the previous call's data in L2. Without it, a call's time depends on what the call
    before it left there: a GEMM whose 64 MB operand nearly fits the H200's 50 MB L2
    measured 0.030 and 0.044 ms in two processes, and an interleaved comparison ranks by
    which configuration ran before which (the Triton do_bench convention)."""
    import torch

    dev = torch.cuda.current_device()
    if dev not in _FLUSH:
        size = torch.cuda.get_device_properties(dev).L2_cache_size
        _FLUSH[dev] = torch.empty(max(2 * size, 1 << 20), dtype=torch.int8, device="cuda")
    return _FLUSH[dev].zero_


def event_times(fn, warmup: int, reps: int, flush: bool = False) -> list[float]:
    """Per-call CUDA-event pairs around `reps` calls of `fn`, after `warmup` calls; sorted,
    in milliseconds (bench/timing.py's benchmarks time with the same function). With
    `flush`, the L2 cache is cleared before each timed call, outside its events."""
    import torch

    clear = _l2_flusher() if flush else None
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for i in range(reps):
        if clear is not None:
            clear()
        starts[i].record()
        fn()
        ends[i].record()
    torch.cuda.synchronize()
    return sorted(s.elapsed_time(e) for s, e in zip(starts, ends))
