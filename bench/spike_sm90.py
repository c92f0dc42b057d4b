"""sm_90a spike: build, check and time the hand-written pyptx FA and GEMM on an H100/H200.

    python3 bench/spike_sm90.py            # everything, each section in its own process
    python3 bench/spike_sm90.py build      # trace + ptxas -v (no GPU needed)
    python3 bench/spike_sm90.py check      # correctness vs SDPA (fp32 math) and a @ b
    python3 bench/spike_sm90.py time       # CUDA-event medians: ours, SDPA cuDNN/flash, cuBLAS
    python3 bench/spike_sm90.py ref        # reference compiler's CUDA build (.ref/croq_fa)

Sections run in separate processes (with time limits) so that a faulting or
hanging kernel cannot take the other sections' results with it.  Results go
to stdout and, when $OUT is set, to $OUT/spike_results.json.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "reference"))
from timing import event_times, graph_times, sdpa_runs  # noqa: E402
OUT = os.environ.get("OUT")
RESULTS: dict = {}


def log(msg: str = "") -> None:
    print(msg, flush=True)


def save(section: str) -> None:
    if OUT:
        with open(os.path.join(OUT, f"spike_{section}.json"), "w") as f:
            json.dump(RESULTS, f, indent=1)


# ---------------------------------------------------------------------------
def section_build() -> None:
    import handwritten_sm90_fa as fa
    import handwritten_sm90_gemm as gm

    for name, src in (("fa_causal", fa.flash_attention_ptx(True)),
                      ("fa_full", fa.flash_attention_ptx(False)),
                      ("gemm", gm.gemm_ptx())):
        _, info = fa.ptxas_compile(src)
        lines = [l.strip() for l in info.splitlines() if "Used" in l or "spill" in l or "C75" in l]
        RESULTS[name] = lines
        log(f"[build] {name}: {len(src.splitlines())} PTX lines; " + " | ".join(lines))
    save("build")


# ---------------------------------------------------------------------------
def rel_err(out, ref) -> float:
    return float((out.float() - ref).norm() / ref.norm())


def sdpa_ref(q, k, v, causal: bool):
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with sdpa_kernel(SDPBackend.MATH):
        o = F.scaled_dot_product_attention(
            q.float().transpose(1, 2), k.float().transpose(1, 2), v.float().transpose(1, 2),
            is_causal=causal)
    return o.transpose(1, 2)


def section_check_gemm() -> None:
    import torch
    from handwritten_sm90_gemm import gemm

    ok_all = True
    for (M, N, K) in ((128, 256, 64), (256, 512, 192), (512, 768, 1024), (2048, 2048, 2048)):
        a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(K, N, device="cuda", dtype=torch.bfloat16)
        out = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
        gemm(a, b, out=out)
        torch.cuda.synchronize()
        ref = a.float() @ b.float()
        nan = bool(torch.isnan(out).any())
        err = rel_err(out, ref)
        ok = (not nan) and err < 1e-2
        ok_all &= ok
        RESULTS[f"gemm {M}x{N}x{K}"] = {"rel_err": err, "nan": nan, "ok": ok}
        log(f"[check] gemm M={M} N={N} K={K}: rel_err={err:.2e} unwritten/NaN={nan} {'PASS' if ok else 'FAIL'}")
        if not ok and M * N <= 512 * 768:
            d = (out.float() - ref).abs()
            blocks = d.reshape(M // 64, 64, N // 64, 64).amax(dim=(1, 3))
            log("  max |err| per 64x64 block:\n" + str(blocks.cpu()))
    RESULTS["gemm_ok"] = ok_all
    save("check_gemm")
    sys.exit(0 if ok_all else 3)


def section_check_fa() -> None:
    import torch
    from handwritten_sm90_fa import flash_attention

    ok_all = True
    cases = [
        (1, 1, 128, False), (1, 1, 128, True),
        (1, 2, 256, True), (1, 2, 256, False),
        (1, 2, 384, True), (1, 2, 1024, True), (1, 2, 1024, False),
        (2, 3, 512, True), (2, 3, 640, False),
    ]
    for (B, H, S, causal) in cases:
        q, k, v = (torch.randn(B, S, H, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        for kind in ("random", "uniform"):
            if kind == "uniform":
                if S > 256:
                    continue
                q = torch.zeros_like(q)      # P is uniform: isolates the P@V path
            out = torch.full_like(q, float("nan"))
            flash_attention(q, k, v, causal=causal, out=out)
            torch.cuda.synchronize()
            ref = sdpa_ref(q, k, v, causal)
            nan = bool(torch.isnan(out).any())
            err = rel_err(out, ref)
            ok = (not nan) and err < 2e-2
            ok_all &= ok
            key = f"fa B={B} H={H} S={S} causal={causal} {kind}"
            RESULTS[key] = {"rel_err": err, "nan": nan, "ok": ok}
            log(f"[check] {key}: rel_err={err:.2e} NaN/unwritten={nan} {'PASS' if ok else 'FAIL'}")
            if not ok:
                d = (out.float() - ref).abs().nan_to_num(1e9)
                blocks = d.reshape(B, S // 64, 64, H, 2, 64).amax(dim=(2, 5))[0, :, 0, :]
                log("  max |err| per (64 query rows, 64 dims) block, b=0 h=0:\n" + str(blocks.cpu()))
    # The timed shapes, checked on a slice of heads (the fp32 reference is S x S per head).
    for (B, H, S, causal) in ((2, 16, 8192, True), (8, 16, 1024, False)):
        q, k, v = (torch.randn(B, S, H, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        out = torch.full_like(q, float("nan"))
        flash_attention(q, k, v, causal=causal, out=out)
        torch.cuda.synchronize()
        nan = bool(torch.isnan(out).any())
        hs = slice(H - 2, H)
        ref = sdpa_ref(q[:, :, hs], k[:, :, hs], v[:, :, hs], causal)
        err = rel_err(out[:, :, hs], ref)
        ok = (not nan) and err < 2e-2
        ok_all &= ok
        key = f"fa B={B} H={H} S={S} causal={causal} (heads {H - 2}..{H - 1} checked)"
        RESULTS[key] = {"rel_err": err, "nan": nan, "ok": ok}
        log(f"[check] {key}: rel_err={err:.2e} NaN/unwritten={nan} {'PASS' if ok else 'FAIL'}")
        del q, k, v, out, ref
        torch.cuda.empty_cache()
    # bf16 flash SDPA against the same fp32 reference, for scale
    import torch.nn.functional as F
    q, k, v = (torch.randn(1, 1024, 2, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    o = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                       is_causal=True).transpose(1, 2)
    RESULTS["sdpa_bf16_rel_err_S1024"] = rel_err(o, sdpa_ref(q, k, v, True))
    log(f"[check] (torch SDPA bf16 vs the same fp32 reference: rel_err={RESULTS['sdpa_bf16_rel_err_S1024']:.2e})")
    RESULTS["fa_ok"] = ok_all
    save("check_fa")
    sys.exit(0 if ok_all else 3)


# ---------------------------------------------------------------------------
def time_fn(fn, warmup: int, reps: int):
    """(median, min, max) ms per call from CUDA events."""
    ts = event_times(fn, warmup, reps)
    return ts[len(ts) // 2], ts[0], ts[-1]


def time_graph(fn, calls: int, replays: int = 10):
    """(median, min, max) ms per call from CUDA-graph replays."""
    ts = graph_times(fn, calls, replays)
    return ts[len(ts) // 2], ts[0], ts[-1]


def section_time() -> None:
    import torch
    from handwritten_sm90_fa import flash_attention
    from handwritten_sm90_gemm import gemm

    only_ours = os.environ.get("SPIKE_ONLY_OURS") == "1"
    skip_fa = os.environ.get("SPIKE_SKIP_FA") == "1"        # our FA failed its check
    skip_gemm = os.environ.get("SPIKE_SKIP_GEMM") == "1"
    log(f"[time] torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}, "
        f"{torch.cuda.get_device_name()}, {torch.cuda.get_device_properties(0).multi_processor_count} SMs")
    # Bring the clocks up before the first timed case (the card idles at 345 MHz).
    w = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    t0 = time.time()
    while time.time() - t0 < 2.0:
        for _ in range(20):
            torch.matmul(w, w)
        torch.cuda.synchronize()
    del w
    shapes = [(2, 16, 8192, True), (1, 16, 4096, True), (4, 16, 2048, True), (8, 16, 1024, True),
              (8, 16, 1024, False)]
    table = []
    for (B, H, S, causal) in shapes:
        q, k, v = (torch.randn(B, S, H, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        out = torch.empty_like(q)
        flops = 4 * B * H * S * S * 128 / (2 if causal else 1)
        reps = 30 if S >= 4096 else 100
        row = {"shape": f"B={B} H={H} S={S} {'causal' if causal else 'full'}"}
        impls = [] if skip_fa else [("ours", lambda: flash_attention(q, k, v, causal=causal, out=out))]
        if not only_ours:
            sdpa = sdpa_runs(q, k, v, causal)
            impls += [("sdpa_cudnn", sdpa["cudnn"]), ("sdpa_flash", sdpa["flash"])]
        # Two interleaved rounds of CUDA-graph timing, then per-call events once.
        for method in ("graph", "graph2", "events"):
            for name, fn in impls:
                row.setdefault(name, {})
                try:
                    if method.startswith("graph"):
                        med, lo, hi = time_graph(fn, calls=10 if S >= 4096 else 40)
                    else:
                        med, lo, hi = time_fn(fn, warmup=5 if S >= 4096 else 20, reps=reps)
                    row[name][method] = {"ms": med, "min": lo, "max": hi, "tflops": flops / med / 1e9}
                    log(f"[time] {row['shape']} {name} [{method}]: median {med:.4f} ms "
                        f"(min {lo:.4f}, max {hi:.4f}) {flops / med / 1e9:.1f} TFLOP/s")
                except Exception as e:  # noqa: BLE001 - report and continue
                    row[name][method] = {"error": repr(e)[:200]}
                    log(f"[time] {row['shape']} {name} [{method}]: ERROR {e!r}"[:300])
        table.append(row)
        del q, k, v, out
        torch.cuda.empty_cache()
    if not skip_fa:   # second timing of our largest case: run-to-run spread
        q, k, v = (torch.randn(2, 8192, 16, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        out = torch.empty_like(q)
        med, lo, hi = time_fn(lambda: flash_attention(q, k, v, causal=True, out=out), 5, 30)
        RESULTS["ours_repeat_B2_S8192_ms"] = med
        log(f"[time] repeat ours B=2 H=16 S=8192 causal: median {med:.4f} ms "
            f"{4 * 2 * 16 * 8192 ** 2 * 128 / 2 / med / 1e9:.1f} TFLOP/s")
        del q, k, v, out

    # GEMM 8192^3: ours vs cuBLAS
    n = 8192
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
    gemms = [("gemm_cublas", lambda: torch.matmul(a, b, out=c))]
    if not skip_gemm:
        gemms.insert(0, ("gemm_ours", lambda: gemm(a, b, out=c)))
    for rnd in (1, 2):
        for name, fn in gemms:
            try:
                med, lo, hi = time_graph(fn, calls=10)
                RESULTS[f"{name}_r{rnd}"] = {"ms": med, "tflops": 2 * n ** 3 / med / 1e9}
                log(f"[time] {name} 8192^3 round {rnd}: median {med:.4f} ms (min {lo:.4f}, max {hi:.4f}) "
                    f"{2 * n ** 3 / med / 1e9:.1f} TFLOP/s")
            except Exception as e:  # noqa: BLE001
                RESULTS[f"{name}_r{rnd}"] = {"error": repr(e)[:200]}
                log(f"[time] {name}: ERROR {e!r}"[:300])
    RESULTS["fa_table"] = table
    save("time")
    log("[table] TFLOP/s: CUDA-graph replay round 1 / round 2 (device time per call); per-call events median in ()")
    for row in table:
        cells = []
        for name in ("ours", "sdpa_cudnn", "sdpa_flash"):
            r = row.get(name, {})
            g1 = r.get("graph", {}).get("tflops")
            g2 = r.get("graph2", {}).get("tflops")
            e = r.get("events", {}).get("tflops")
            cells.append(f"{name} {g1:.1f}/{g2:.1f} ({e:.1f})" if g1 and g2 and e else f"{name} n/a")
        log(f"[table] {row['shape']}: " + " | ".join(cells))


# ---------------------------------------------------------------------------
def section_ref() -> None:
    d = os.path.join(ROOT, ".ref", "croq_fa")
    if not os.path.isdir(d):
        log("[ref] .ref/croq_fa not present: skipped")
        return
    exe = os.path.join(d, "bin", "fa_zc")
    if not os.path.exists(exe):
        subprocess.run(["bash", "build_and_run.sh", "zc", "--build-only"], cwd=d, check=True)
    res = subprocess.run([exe], cwd=d, capture_output=True, text=True, timeout=240)
    log("[ref] " + "\n[ref] ".join((res.stdout + res.stderr).strip().splitlines()))


# ---------------------------------------------------------------------------
def section_native() -> None:
    """pyptx's own launch path (Kernel.__call__ with torch tensors) on a tiny kernel."""
    import torch
    from pyptx import Tile, kernel, ptx, reg
    from pyptx.types import f32, u32

    @kernel(in_specs=(Tile("M", 256, f32),), out_specs=(Tile("M", 256, f32),),
            grid=lambda M: (M, 1, 1), block=(256, 1, 1), arch="sm_90a")
    def twice(X, Y):
        px, py = ptx.global_ptrs(X, Y)
        idx = reg.scalar(u32)
        ptx.inst.mad.lo.u32(idx, reg.from_(ptx.special.ctaid.x(), u32), 256,
                            reg.from_(ptx.special.tid.x(), u32))
        off = idx * 4                                   # mul.wide.u32 -> u64
        v = reg.scalar(f32)
        ptx.inst.ld.global_.f32(v, ptx.addr(px + off))
        ptx.inst.add.f32(v, v, v)
        ptx.inst.st.global_.f32(ptx.addr(py + off), v)
        ptx.ret()

    x = torch.randn(1024, 256, device="cuda")
    t0 = time.perf_counter()
    y = twice(x)
    torch.cuda.synchronize()
    first = time.perf_counter() - t0
    ok = bool(torch.equal(y, 2 * x))
    t0 = time.perf_counter()
    for _ in range(200):
        y = twice(x)
    torch.cuda.synchronize()
    per_call = (time.perf_counter() - t0) / 200
    from pyptx import torch_support
    RESULTS["native"] = {"ok": ok, "first_call_s": first, "host_us_per_call": per_call * 1e6,
                         "cpp_ext": torch_support._CPP_EXT is not None}
    log(f"[native] pyptx Kernel.__call__(torch): correct={ok} first call {first:.1f} s, "
        f"then {per_call * 1e6:.1f} us/call host; C++ torch extension loaded={torch_support._CPP_EXT is not None}")
    save("native")


# ---------------------------------------------------------------------------
SECTIONS = {
    "build": (section_build, 300),
    "check_gemm": (section_check_gemm, 120),
    "check_fa": (section_check_fa, 150),
    "time": (section_time, 300),
    "ref": (section_ref, 300),
    "native": (section_native, 150),
}


def main() -> None:
    args = sys.argv[1:]
    if args and args[0] in SECTIONS:
        SECTIONS[args[0]][0]()
        return
    if args and args[0] == "check":
        section_check_gemm()
        section_check_fa()
        return
    # Orchestrate: start the reference build in the background (CPU only),
    # run the GPU sections one at a time, each in its own process.
    ref_dir = os.path.join(ROOT, ".ref", "croq_fa")
    ref_build = None
    if os.path.isdir(ref_dir) and "noref" not in args:
        ref_build = subprocess.Popen(["bash", "build_and_run.sh", "zc", "--build-only"], cwd=ref_dir,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    order = ["build", "check_gemm", "check_fa", "time"]
    status = {}
    env = dict(os.environ)
    for sec in order:
        t0 = time.time()
        try:
            r = subprocess.run([sys.executable, __file__, sec], timeout=SECTIONS[sec][1], env=env)
            status[sec] = f"rc={r.returncode}"
        except subprocess.TimeoutExpired:
            status[sec] = "TIMEOUT"
            log(f"[{sec}] TIMEOUT after {SECTIONS[sec][1]} s (hang?)")
        if sec == "check_gemm" and status[sec] != "rc=0":
            env["SPIKE_SKIP_GEMM"] = "1"
        if sec == "check_fa" and status[sec] != "rc=0" and "time_anyway" not in args:
            env["SPIKE_SKIP_FA"] = "1"
        log(f"[{sec}] {status[sec]} in {time.time() - t0:.1f} s")
    if ref_build is not None:
        out, _ = ref_build.communicate(timeout=300)
        log("[ref-build] " + "\n[ref-build] ".join(out.strip().splitlines()[-4:]))
        try:
            r = subprocess.run([sys.executable, __file__, "ref"], timeout=SECTIONS["ref"][1])
            status["ref"] = f"rc={r.returncode}"
        except subprocess.TimeoutExpired:
            status["ref"] = "TIMEOUT"
    if "nonative" not in args:
        try:
            r = subprocess.run([sys.executable, __file__, "native"], timeout=SECTIONS["native"][1])
            status["native"] = f"rc={r.returncode}"
        except subprocess.TimeoutExpired:
            status["native"] = "TIMEOUT"
    log("[summary] " + json.dumps(status))


if __name__ == "__main__":
    main()
