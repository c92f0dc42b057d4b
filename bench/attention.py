"""FlashAttention forward on an H100/H200: choreo-py's compiled examples vs torch SDPA
(cuDNN and flash backends) vs the reference Choreo compiler's build, in one run.

    python3 bench/attention.py [--ref .ref/croq_fa] [--out bench/RESULTS.md]
    python3 bench/attention.py --rows family [--fa4]   # bench/attention_family.py's rows
    python3 bench/attention.py --rows varlen [--fa4]   # bench/attention_varlen.py's rows
    python3 bench/attention.py --backward [--fa4]      # bench/attention_bwd.py's rows

Shapes (bf16, D=128, BSHD): the causal seed (examples/flash_atten_causal.co) and
the persistent causal example (examples/flash_atten_persistent.co) at B=2 H=16
S=8192, B=1 S=4096, B=4 S=2048, B=8 S=1024, and the non-causal example at
B=2 H=16 S=8192.

Timing. "graph": 10 (S >= 4096) or 40 calls captured in one CUDA graph,
replayed 10 times, median per call; two rounds, interleaved across the
implementations, after a 2 s matmul warm-up (the card idles at low clocks).
"events": median of per-call CUDA-event pairs. "burst": the reference harness's
method for everyone: after 1.5 s idle (the card leaves its power-capped
clocks), 10 warm-up + 50 timed calls, CUDA events, median. The reference
build is timed by its own harness, built with nvcc in the same command. TFLOP/s = 4*B*H*S^2*D (/2 when causal) / time.
The ratio columns compare a choreo-py kernel's best figure with the best figure of
cuDNN and of the reference, whichever is higher.

Long because: one command times every peer by the same methods in one process (the
graph, event and burst timings, the reference build, the variant checkers); the row
families (family, varlen, backward) live in their own modules and only dispatch here.
"""
from __future__ import annotations

import argparse
import datetime
import os
import re
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "reference"))
from timing import event_times, graph_times, sdpa_runs  # noqa: E402

SHAPES = [(2, 16, 8192, True), (1, 16, 4096, True), (4, 16, 2048, True), (8, 16, 1024, True),
          (2, 16, 8192, False)]
# A diagnostic row: 1024 query tiles of one K/V tile each (every tile costs the same).
# The seed runs 1024 CTAs, about 7.8 per SM one after another; the persistent kernel
# runs 132 blocks of about 7.8 tiles each, so the difference in time is the seed's
# fixed cost per CTA (start, first loads, store before the next CTA) times 7.8.
DIAG_SHAPES = [(64, 16, 128, True)]
# `--rows peer`: the rows on which FA4's Hopper kernel was measured beside ours (issue 25).
PEER_SHAPES = [(2, 16, 8192, True), (1, 16, 4096, True), (4, 16, 2048, True),
               (8, 16, 1024, True), (2, 16, 8192, False), (1, 32, 16384, True),
               (16, 16, 512, True), (4, 16, 2048, False), (1, 16, 16384, False)]
FA4_LABEL = "flash-attn-4"


def log(msg: str = "") -> None:
    print(msg, flush=True)


def time_events(fn, warmup: int, reps: int) -> float:
    ts = event_times(fn, warmup, reps)
    return ts[len(ts) // 2]


def time_graph(fn, calls: int, replays: int = 10) -> float:
    ts = graph_times(fn, calls, replays)
    return ts[len(ts) // 2]


def warm_up() -> None:
    import torch

    w = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    t0 = time.time()
    while time.time() - t0 < 2.0:
        for _ in range(20):
            torch.matmul(w, w)
        torch.cuda.synchronize()


REF_LABEL = "reference (same process)"
REF_LIB_DIR = "/tmp/croq_fa_lib"
_REF_LIB: list = []  # the loaded reference library (bench/ref_lib.sh), once built


def reference_lib(build: subprocess.Popen | None):
    """The reference compiler's seed kernel as a library (bench/ref_lib.sh), or None."""
    import ctypes

    if build is not None and not _REF_LIB:
        out, _ = build.communicate(timeout=400)
        log("[ref lib build] " + " | ".join(out.strip().splitlines()[-2:]))
        path = os.path.join(REF_LIB_DIR, "libcroq_fa.so")
        if build.returncode == 0 and os.path.exists(path):
            ctypes.CDLL("libcuda.so.1", mode=ctypes.RTLD_GLOBAL)  # cuTensorMapEncodeTiled
            lib = ctypes.CDLL(path)
            lib.croq_fa_causal.restype = ctypes.c_int
            lib.croq_fa_causal.argtypes = [ctypes.c_void_p] * 4 + [ctypes.c_int] * 3 + [ctypes.c_void_p]
            _REF_LIB.append(lib)
        else:
            _REF_LIB.append(None)
    return _REF_LIB[0] if _REF_LIB else None


def reference_impl(q, k, v, o):
    """(label, fn) for the reference's kernel on these tensors, if it computes the seed's output."""
    import torch

    lib = reference_lib(None)
    if lib is None or q.shape != k.shape:
        return []
    b, s, h, _ = q.shape

    def fn():
        rc = lib.croq_fa_causal(q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(), b, s, h,
                                torch.cuda.current_stream().cuda_stream)
        if rc:
            raise RuntimeError(f"reference kernel launch: CUDA error {rc}")

    ref = torch.full_like(o, float("nan"))
    compiled("flash_atten_causal")(q, k, v, ref)
    o.fill_(float("nan"))
    fn()
    torch.cuda.synchronize()
    diff = float((o.float() - ref.float()).norm() / ref.float().norm())
    log(f"  {REF_LABEL}: |out - choreo-py seed's out| / |choreo-py seed's out| = {diff:.2e}")
    return [(REF_LABEL, fn)] if diff == diff and diff < 1e-2 else []


_COMPILED: dict = {}
HAND = False
FA4 = False
PERSISTENT = True
VARIANTS_RUN: list = []
NC_VARIANTS_RUN: list = []
METHODS = ("graph", "graph2", "events", "burst")
BURST_IDLE_S = 1.5

# Other work orders for the persistent example, as edits of its source (applied to a
# copy): they answer how much of its speed comes from which choice.
_ITEM = "item = round * NUM_SMS + blk;"
_UNPAIRED = [("pairs = cdiv(q_tiles, 2);", "pairs = q_tiles;"),
             ("foreach {half} in [(2 * pair + 1 == q_tiles) ? 1 : 2] {", "foreach {half} in [1] {")]
# The consumers' schedule inside a tile (FA3's choices, as Choreo statements):
# *rescale-early* rescales acc_o by the previous step's factor right after the next
# QK is issued (while it runs) instead of at the end of the step, so the next QK
# starts one rescale sooner; *pingpong* makes the two consumer warpgroups take turns
# issuing their MMAs (named barriers 1 and 2), so one's softmax overlaps the other's MMAs.
_RESCALE_EARLY = [
    ("frag f32[WG_M] scores_scale;", "frag f32[WG_M] scores_scale {1.0f};"),
    ("""                wait vf.at(v_pipe_order);
                pv = mma.row.col.async""",
     """                apply {i, j} in acc_o.span
                  acc_o.at(i, j) = acc_o.at(i, j) * scores_scale.at(i);
                wait vf.at(v_pipe_order);
                pv = mma.row.col.async"""),
    ("""                  acc_s_cast.at(i, j) = __to(acc_s.at(i, j));
                apply {i, j} in acc_o.span
                  acc_o.at(i, j) = acc_o.at(i, j) * scores_scale.at(i);
              }""",
     """                  acc_s_cast.at(i, j) = __to(acc_s.at(i, j));
              }"""),
    ("""              final_v_slot = v_pipe_order % V_STAGES;""",
     """              apply {i, j} in acc_o.span
                acc_o.at(i, j) = acc_o.at(i, j) * scores_scale.at(i);
              final_v_slot = v_pipe_order % V_STAGES;"""),
]

# Diagnostics (wrong results by design, timed without the check): where the time of
# a K/V step goes. *diag-noload*: after the first two K/V tiles of a query tile the
# producer only signals the ring (the consumers reuse stale tiles), so the L2 -> SM
# traffic of K/V disappears. *diag-noexp*: the score exponentials become plain FMAs.
_LOAD = {"k": ("""                k_load = tma.load.async.evict_last.swiz
                  K_head.subspan(BLOCK_N, DIM).at(bn, 0) => k_buf[k_slot];
                trigger kf.at(k_pipe_order++) after k_load;""", "K_head", "k_buf[k_slot]"),
         "v": ("""                v_load = tma.load.async.evict_last.swiz
                  V_head.subspan(BLOCK_N, DIM).at(bn, 0) => v_buf[v_slot];
                trigger vf.at(v_pipe_order++) after v_load;""", "V_head", "v_buf[v_slot]")}


def _skip_load(x: str) -> tuple[str, str]:
    old, head, dst = _LOAD[x]
    e = "kf" if x == "k" else "vf"
    order = f"{x}_pipe_order"
    new = f"""                if (issue < 2) {{
                  {x}_load = tma.load.async.evict_last.swiz
                    {head}.subspan(BLOCK_N, DIM).at(bn, 0) => {dst};
                  trigger {e}.at({order}) after {x}_load;
                }} else {{
                  trigger {e}.at({order});
                }}
                {order} = {order} + 1;"""
    return old, new


DIAGNOSTICS = {"diag-noload", "diag-noexp"}

VARIANTS = {
    # Q in registers (mma.load; wgmma RS form for every QK), a source of its own
    "qreg": "flash_atten_persistent_qreg.co",
    # a third K (or V) ring slot: the producer runs one more tile ahead (224 KB of tiles)
    "k3": [("#define K_STAGES 2", "#define K_STAGES 3")],
    "v3": [("#define V_STAGES 2", "#define V_STAGES 3")],
    "diag-noload": [_skip_load("k"), _skip_load("v")],
    "diag-noexp": [("""                  acc_s.at(i, j) = __exp2f(
                    acc_s.at(i, j) * 0.12751743f - scores_max.at(i) * 0.12751743f);""",
                    """                  acc_s.at(i, j) =
                    acc_s.at(i, j) * 0.12751743f - scores_max.at(i) * 0.12751743f;""")],
    "rescale-early": _RESCALE_EARLY,
    # the consumers take turns issuing their MMAs (named barriers), a source of its own
    "pingpong": "flash_atten_persistent_pingpong.co",
    # one query tile per item, in the seed's order (tiles of a head, longest first)
    "unpaired": _UNPAIRED,
    # pairs, but every other item runs its short tile first
    "alternate": [("bm = (half == 0) ? q_tiles - 1 - pair : pair;",
                   "bm = ((half + item) % 2 == 0) ? q_tiles - 1 - pair : pair;")],
    # the producer stores each tile's output (a source of its own, bench/variants/)
    "producer-store": "flash_atten_persistent_producer_store.co",
    # one tile per item, tile-major (longest first over all heads), zigzag over blocks
    "tile-major": _UNPAIRED + [
        (_ITEM, "item = round * NUM_SMS + ((round % 2 == 0) ? blk : NUM_SMS - 1 - blk);"),
        ("pair = item % pairs;", "pair = item / (H * B);"),
        ("head = item / pairs % H;", "head = item % H;"),
        ("batch = item / pairs / H;", "batch = item / H % B;")],
}


# The non-causal example's variants: parts joined by "+" (e.g. "oq+bn176"): "oq" stages O
# in q_shared (free after the last QK: 32 KB less shared memory), "bnN" sets BLOCK_N, "k3" /
# "v3" a third ring slot, "pnc" starts from the persistent non-causal program instead,
# "sched" from bench/variants/flash_atten_nc_sched.co, whose switches are the parts in
# capitals ("sched+FUSE+PP"); "r24" moves the register split from 40 / 232 to
# flash-attn-4's 24 / 240 (producer / consumers).
NC_PARTS = {
    "r24": [("call croq::cuda::setreg_dec(40);", "call croq::cuda::setreg_dec(24);"),
            ("call croq::cuda::setreg_inc(232);", "call croq::cuda::setreg_inc(240);")],
    "oq": [("    shared bf16[BLOCK_M, DIM] o_buf;\n", ""),
           ("mma.store acc_o, o_buf.subspan(WG_M, DIM).at(cid, 0);\n        tma.copy o_buf =>",
            "mma.store acc_o, q_shared.subspan(WG_M, DIM).at(cid, 0);\n        "
            "tma.copy q_shared =>")],
    "k3": VARIANTS["k3"], "v3": VARIANTS["v3"],
}
PERSISTENT_NC = os.path.join(ROOT, "bench", "variants", "flash_atten_persistent_nc.co")
NC_SCHED = os.path.join(ROOT, "bench", "variants", "flash_atten_nc_sched.co")


def nc_source(variant: str) -> str:
    """The text of a non-causal variant (see NC_PARTS), written under /tmp; its path."""
    parts = variant.split("+")
    base = (PERSISTENT_NC if "pnc" in parts else NC_SCHED if "sched" in parts
            else os.path.join(ROOT, "examples", "flash_atten.co"))
    text = open(base, encoding="utf-8").read()
    text = "".join(f"#define {p} 1\n" for p in parts if p.isupper()) + text
    for part in parts:
        reps = ([("#define BLOCK_N 128", f"#define BLOCK_N {int(part[2:])}")]
                if part.startswith("bn") else NC_PARTS.get(part, []))
        for old, new in reps:
            assert old in text, (variant, old)
            text = text.replace(old, new)
    path = os.path.join("/tmp", f"flash_atten_nc.{variant}.co")
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text)
    return path


def compiled(name: str, variant: str | None = None):
    import choreo_py

    key = (name, variant)
    if key not in _COMPILED:
        path = os.path.join(ROOT, "examples", f"{name}.co")
        if name == "flash_atten" and variant:
            path = nc_source(variant)
        elif isinstance(VARIANTS.get(variant), str):
            path = os.path.join(ROOT, "bench", "variants", VARIANTS[variant])
        elif variant:
            text = open(path, encoding="utf-8").read()
            for old, new in VARIANTS[variant]:
                assert old in text, (variant, old)
                text = text.replace(old, new)
            path = os.path.join("/tmp", f"{name}.{variant}.co")
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(text)
        _COMPILED[key] = choreo_py.load(path, target="sm_90a")
    return _COMPILED[key]


def implementations(q, k, v, o, causal: bool):
    name = "flash_atten_causal" if causal else "flash_atten"
    ours = compiled(name)
    impls = [("choreo-py", lambda: ours(q, k, v, o))]
    if causal and PERSISTENT:
        pers = compiled("flash_atten_persistent")
        impls.append(("choreo-py persistent", lambda: pers(q, k, v, o)))
    elif PERSISTENT:
        pers = compiled("flash_atten", "pnc")
        impls.append(("choreo-py persistent", lambda: pers(q, k, v, o)))
    if HAND:  # the hand-written pyptx kernel the backend was shaped after
        from handwritten_sm90_fa import flash_attention

        impls.append(("hand-written", lambda: flash_attention(q, k, v, causal=causal, out=o)))
    sdpa = sdpa_runs(q, k, v, causal)
    impls += [("cuDNN", sdpa["cudnn"]), ("FA2 (SDPA flash)", sdpa["flash"])]
    if FA4:
        impls.append((FA4_LABEL, fa4_impl(q, k, v, o, causal)))
    return impls


def fa4_impl(q, k, v, o, causal: bool):
    """FlashAttention-4's CuTe-DSL forward (its sm90 path on Hopper: FA3's design), checked
    once against our seed's output on the same tensors before it is timed."""
    import torch
    from flash_attn.cute import flash_attn_func

    got = flash_attn_func(q, k, v, causal=causal)
    got = got[0] if isinstance(got, tuple) else got
    o.fill_(float("nan"))
    compiled("flash_atten_causal" if causal else "flash_atten")(q, k, v, o)
    torch.cuda.synchronize()
    log(f"  {FA4_LABEL}: max |out - choreo-py's out| = {float((got.float() - o.float()).abs().max()):.3g}")
    return lambda: flash_attn_func(q, k, v, causal=causal)


def checked_variants(q, k, v, o, base: str, program: str, names: list, what: str):
    """`names`, variants of `program` (compiled(program, name)), each run once and checked
    against `base`'s output on the same tensors before it is timed (a diagnostic variant,
    DIAGNOSTICS, is timed whatever it computes)."""
    import torch

    ref = torch.full_like(o, float("nan"))
    compiled(base)(q, k, v, ref)
    out = []
    for name in names:
        try:
            f = compiled(program, name)
            o.fill_(float("nan"))
            f(q, k, v, o)
            torch.cuda.synchronize()
            diff = float((o.float() - ref.float()).abs().max())
            log(f"  variant {name}: max |out - {what}| = {diff}"
                + (" (a diagnostic: wrong results by design)" if name in DIAGNOSTICS else ""))
            if name in DIAGNOSTICS or (diff == diff and diff < 1e-2):  # not NaN
                out.append((f"variant {name}", lambda f=f: f(q, k, v, o)))
        except Exception as err:  # noqa: BLE001 - report and carry on
            log(f"  variant {name}: ERROR {err!r}"[:300])
    return out


def nc_variant_impls(q, k, v, o):
    """The non-causal example's variants (--nc-variants)."""
    return checked_variants(q, k, v, o, "flash_atten", "flash_atten", NC_VARIANTS_RUN,
                            "flash_atten's out")


def variant_impls(q, k, v, o):
    """The persistent example's variants, checked against the seed's output."""
    return checked_variants(q, k, v, o, "flash_atten_causal", "flash_atten_persistent",
                            VARIANTS_RUN, "seed's out")


def time_shape(b: int, h: int, s: int, causal: bool) -> dict:
    import torch

    q, k, v = (torch.randn(b, s, h, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    o = torch.empty_like(q)
    flops = 4 * b * h * s * s * 128 / (2 if causal else 1)
    calls = 10 if s >= 4096 else 40
    row: dict = {}
    impls = implementations(q, k, v, o, causal)
    if causal:
        impls[1:1] = reference_impl(q, k, v, o)
    if causal and PERSISTENT:
        impls += variant_impls(q, k, v, o)
    if not causal:
        impls += nc_variant_impls(q, k, v, o)
    for method in METHODS:
        for label, fn in impls:
            if label.startswith("variant") and method not in ("graph", "burst"):
                continue
            try:
                if method.startswith("graph"):
                    ms = time_graph(fn, calls)
                elif method == "events":
                    ms = time_events(fn, 10 if s >= 4096 else 20, 50 if s >= 4096 else 100)
                else:
                    torch.cuda.synchronize()
                    time.sleep(BURST_IDLE_S)
                    ms = time_events(fn, 10, 50)
                row.setdefault(label, {})[method] = flops / ms / 1e9
                log(f"  {label:18s} [{method}] {ms:.4f} ms  {flops / ms / 1e9:.1f} TFLOP/s")
            except Exception as err:  # noqa: BLE001 - report and carry on
                row.setdefault(label, {})[method] = None
                log(f"  {label:18s} [{method}] ERROR {err!r}"[:300])
    del q, k, v, o
    torch.cuda.empty_cache()
    return row


def gpu_state() -> str:
    q = "clocks.sm,power.draw,temperature.gpu,clocks_throttle_reasons.active"
    res = subprocess.run(["nvidia-smi", f"--query-gpu={q}", "--format=csv,noheader"],
                         capture_output=True, text=True)
    return res.stdout.strip()


def reference(ref_dir: str, build: subprocess.Popen | None, found: dict) -> dict:
    """Appends the reference harness's TFLOP/s per shape label to `found` (one run)."""
    if build is not None:
        out, _ = build.communicate(timeout=400)
        log("[ref build] " + " | ".join(out.strip().splitlines()[-3:]))
    exe = os.path.join(ref_dir, "bin", "fa_zc")
    if not os.path.exists(exe):
        log("[ref] no build: skipped")
        return found
    log(f"[ref] GPU before: {gpu_state()}")
    for _ in range(1):
        res = subprocess.run([exe], cwd=ref_dir, capture_output=True, text=True, timeout=300)
        text = res.stdout + res.stderr
        log("[ref] " + "\n[ref] ".join(text.strip().splitlines()))
        pat = r"\[(B=\d+ H=\d+ S=\d+ causal)\] median .*?\| ([\d.]+) TFLOPS"
        for label, tf in re.findall(pat, text):
            found.setdefault(label, []).append(float(tf))
    return found


def best(cell: dict) -> float | None:
    vals = [x for x in (cell or {}).values() if x]
    return max(vals) if vals else None


def fmt(x) -> str:
    return f"{x:.1f}" if x else "n/a"


def write_results(path: str, rows: list, env: dict, command: str) -> None:
    ours = ["choreo-py"] + (["choreo-py persistent"] if PERSISTENT else [])
    lines = [
        "# FlashAttention forward on the H200: choreo-py vs cuDNN, FA2 and the reference compiler",
        "",
        f"- GPU: {env['gpu']}; driver {env['driver']}; torch {env['torch']}, cuDNN {env['cudnn']}",
        f"- date: {env['date']}",
        f"- command: `{command}`",
        "- bf16, D=128, BSHD; TFLOP/s = 4·B·H·S²·D (/2 causal) / time. choreo-py, cuDNN and FA2:",
        "  CUDA-graph replay, two rounds (r1 / r2), per-call CUDA events (ev), and the reference",
        "  harness's method after 1.5 s idle (burst: 10 warm-up + 50 timed calls, events, median).",
        "  Reference: the reference compiler's build of the seed, its own harness (events, median",
        "  of 50), run before and after the others; and the same kernel and host code built as a",
        "  library (bench/ref_lib.sh) and timed here like the others, on the same tensors",
        "  (\"same process\"). Ratio: a choreo-py kernel's best figure / the best figure of",
        "  cuDNN and the reference (both ways of running it). Same-method ratios: for each of",
        "  r1 / r2 / ev / burst, the kernel's figure / the best rival's figure by that method.",
        "",
        "| shape | " + " | ".join(f"{o} r1 / r2 / ev / burst" for o in ours)
        + f" | cuDNN r1 / r2 / ev / burst | {REF_LABEL} r1 / r2 / ev / burst"
        + " | FA2 r1 / r2 / ev / burst | reference harness | "
        + (f"{FA4_LABEL} r1 / r2 / ev / burst | " if FA4 else "")
        + " | ".join(f"ratio {o}" for o in ours) + " | "
        + " | ".join(f"same-method ratios {o}" for o in ours) + " |"
        + (" hand-written r1 / r2 / ev |" if HAND else ""),
        "|---|" + "---|" * (3 * len(ours) + 4) + ("---|" if HAND else "") + ("---|" if FA4 else ""),
    ]
    for r in rows:
        cells = []
        for label in ours + ["cuDNN", REF_LABEL, "FA2 (SDPA flash)"]:
            c = r["times"].get(label)
            cells.append(" / ".join(fmt(c.get(m)) for m in METHODS) if c else "n/a")
        refs = r.get("ref") or []
        rival_labels = ["cuDNN", REF_LABEL] + ([FA4_LABEL] if FA4 else [])
        rivals = [x for x in [best(r["times"].get(lab)) for lab in rival_labels] + refs if x]
        ratios = []
        for o in ours:
            mine = best(r["times"].get(o))
            ratios.append(f"{mine / max(rivals):.3f}" if mine and rivals else "n/a")
        for o in ours:
            per = []
            for m in METHODS:
                mine = (r["times"].get(o) or {}).get(m)
                theirs = [x for x in ((r["times"].get(lab) or {}).get(m)
                                      for lab in rival_labels) if x]
                per.append(f"{mine / max(theirs):.3f}" if mine and theirs else "n/a")
            ratios.append(" / ".join(per))
        ref_cell = " / ".join(fmt(x) for x in refs) if refs else "n/a"
        if FA4:
            c = r["times"].get(FA4_LABEL)
            ref_cell += " | " + (" / ".join(fmt(c.get(m)) for m in METHODS) if c else "n/a")
        hand = r["times"].get("hand-written", {})
        extra = (" " + " / ".join(fmt(hand.get(m)) for m in ("graph", "graph2", "events")) + " |"
                 if HAND else "")
        lines.append(f"| {r['label']} | {' | '.join(cells)} | {ref_cell} | {' | '.join(ratios)} |"
                     + extra)
    if NC_VARIANTS_RUN:
        lines += ["", "Variants of the non-causal example (graph r1 / burst):", "",
                  "| shape | choreo-py | " + " | ".join(NC_VARIANTS_RUN) + " |",
                  "|---|---|" + "---|" * len(NC_VARIANTS_RUN)]
        for r in rows:
            if "non-causal" not in r["label"]:
                continue
            cells = []
            for label in ["choreo-py"] + [f"variant {v}" for v in NC_VARIANTS_RUN]:
                c = r["times"].get(label)
                cells.append(" / ".join(fmt(c.get(m)) for m in ("graph", "burst")) if c else "n/a")
            lines.append(f"| {r['label']} | {' | '.join(cells)} |")
    if VARIANTS_RUN:
        lines += ["", "Work orders of the persistent example (graph r1 / burst):", "",
                  "| shape | persistent (pairs) | " + " | ".join(VARIANTS_RUN) + " |",
                  "|---|---|" + "---|" * len(VARIANTS_RUN)]
        for r in rows:
            if "choreo-py persistent" not in r["times"]:
                continue
            cells = []
            for label in ["choreo-py persistent"] + [f"variant {v}" for v in VARIANTS_RUN]:
                c = r["times"].get(label)
                cells.append(" / ".join(fmt(c.get(m)) for m in ("graph", "burst")) if c else "n/a")
            lines.append(f"| {r['label']} | {' | '.join(cells)} |")
    lines.append("")
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("\n".join(lines))
    log("\n".join(lines))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ref", default=os.path.join(ROOT, ".ref", "croq_fa"))
    ap.add_argument("--out", default=None, help="default bench/RESULTS.md "
                    "(bench/RESULTS_family.md with --rows family)")
    ap.add_argument("--hand", action="store_true", help="also time bench/reference/handwritten_sm90_fa")
    ap.add_argument("--fa4", action="store_true",
                    help="also time FlashAttention-4's forward (flash_attn.cute: ../shared/tools/"
                         "fa4_wheels.sh brings it to the H200) as a peer named flash-attn-4")
    ap.add_argument("--rows", default="default", choices=("default", "peer", "family", "varlen"),
                    help="peer: the nine rows of the FA4 comparison (issue 25); family: "
                         "examples/flash_atten_family.co's rows (bench/attention_family.py: "
                         "GQA, bottom-right causal, a window, head dims 64 and 256), written "
                         "to bench/RESULTS_family.md unless --out names a file; varlen: "
                         "examples/flash_atten_varlen.co's rows (bench/attention_varlen.py: "
                         "packed batches of 1k-8k tokens beside flash-attn-4's varlen and "
                         "SDPA per sequence), to bench/RESULTS_varlen.md")
    ap.add_argument("--backward", action="store_true",
                    help="time the backward instead (bench/attention_bwd.py: ours beside "
                         "cuDNN, FA2 and, with --fa4, FlashAttention-4's), written to "
                         "bench/RESULTS_bwd.md unless --out names a file")
    ap.add_argument("--no-persistent", action="store_true",
                    help="leave out examples/flash_atten_persistent.co")
    ap.add_argument("--variants", default="",
                    help="comma-separated work orders of the persistent example to time too: "
                    + ", ".join(VARIANTS))
    ap.add_argument("--nc-variants", default="",
                    help="comma-separated variants of the non-causal example, parts joined by "
                         "'+': oq, bnN, k3, v3, r24, pnc, sched with FUSE / PP "
                         "(e.g. oq+bn176,pnc,sched+FUSE+PP+r24)")
    ap.add_argument("--only", default="",
                    help="time only the shapes whose label contains one of these "
                         "comma-separated strings (e.g. 'S=8192 causal')")
    ap.add_argument("--no-ref-lib", action="store_true",
                    help="do not build and time the reference's kernel in this process")
    args = ap.parse_args()
    global HAND, PERSISTENT, FA4
    HAND = args.hand
    FA4 = args.fa4
    PERSISTENT = not args.no_persistent
    VARIANTS_RUN[:] = [v for v in args.variants.split(",") if v]
    NC_VARIANTS_RUN[:] = [v for v in args.nc_variants.split(",") if v]
    command = "python3 bench/attention.py " + " ".join(sys.argv[1:])
    if args.backward:
        import attention_bwd

        attention_bwd.run(attention_bwd.DEFAULT, FA4,
                          args.out or os.path.join(ROOT, "bench", "RESULTS_bwd.md"),
                          args.only, command)
        return
    if args.rows == "varlen":
        import attention_varlen

        warm_up()
        attention_varlen.run(args.out or os.path.join(ROOT, "bench", "RESULTS_varlen.md"),
                             FA4, args.only, command)
        return
    if args.rows == "family":
        import attention_family

        warm_up()
        attention_family.run(args.out or os.path.join(ROOT, "bench", "RESULTS_family.md"),
                             FA4, args.only, command)
        return
    args.out = args.out or os.path.join(ROOT, "bench", "RESULTS.md")
    import torch

    build = libbuild = None
    if os.path.isdir(args.ref) and not os.path.exists(os.path.join(args.ref, "bin", "fa_zc")):
        build = subprocess.Popen(["bash", "build_and_run.sh", "zc", "--build-only"], cwd=args.ref,
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if os.path.isdir(args.ref) and not args.no_ref_lib:
        libbuild = subprocess.Popen(["bash", os.path.join(ROOT, "bench", "ref_lib.sh"), args.ref,
                                     REF_LIB_DIR], stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, text=True)
    smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                         capture_output=True, text=True).stdout.strip()
    env = {"gpu": torch.cuda.get_device_name(), "driver": smi.split(",")[-1].strip() if smi else "?",
           "torch": torch.__version__, "cudnn": torch.backends.cudnn.version(),
           "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")}
    # The reference harness runs before and after the timings below, so that
    # both sides are seen in the same thermal and clock states.
    refs = reference(args.ref, build, {}) if os.path.isdir(args.ref) else {}
    reference_lib(libbuild)
    warm_up()
    rows = []
    for b, h, s, causal in (PEER_SHAPES if args.rows == "peer" else SHAPES + DIAG_SHAPES):
        label = f"B={b} H={h} S={s} {'causal' if causal else 'non-causal'}"
        if args.only and not any(x in label for x in args.only.split(",")):
            continue
        log(f"[time] {label}  (GPU: {gpu_state()})")
        rows.append({"label": label, "times": time_shape(b, h, s, causal)})
    refs = reference(args.ref, None, refs) if os.path.isdir(args.ref) else {}
    for r in rows:
        r["ref"] = refs.get(r["label"])
    write_results(args.out, rows, env, command)


if __name__ == "__main__":
    main()
