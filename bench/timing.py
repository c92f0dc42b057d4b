"""Device-time measurements shared by the benchmarks (CUDA events, CUDA-graph replay).

Both return every sample, sorted, in milliseconds per call; callers take the median
(and the extremes where they report them).
"""
from __future__ import annotations

# One implementation of the CUDA-event timing, shared with the autotuner (which times
# each configuration with it): per-call event pairs around `reps` calls after `warmup`.
from choreo_py.runtime.autotune import event_times  # noqa: F401 - re-exported


def graph_times(fn, calls: int, replays: int = 10) -> list[float]:
    """`calls` launches captured in one CUDA graph (after 3 warm-up calls on a side
    stream), replayed `replays` times; each sample is a replay's time / `calls`."""
    import torch

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(calls):
            fn()
    g.replay()
    torch.cuda.synchronize()
    ts = []
    for _ in range(replays):
        st, en = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        st.record()
        g.replay()
        en.record()
        torch.cuda.synchronize()
        ts.append(st.elapsed_time(en) / calls)
    return sorted(ts)


def sdpa_runs(q, k, v, causal: bool) -> dict:
    """torch SDPA on BSHD tensors through one backend each: {"cudnn": fn, "flash": fn}."""
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    qt, kt, vt = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)

    def run(backend):
        def fn():
            with sdpa_kernel(backend):
                return F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)
        return fn

    return {"cudnn": run(SDPBackend.CUDNN_ATTENTION), "flash": run(SDPBackend.FLASH_ATTENTION)}
