"""Random valid Choreo programs, each with the result it must give (difftest's generator).

    program = generate(seed)          # deterministic from the seed
    program.source                    # the .co text
    program.inputs                    # name -> numpy array (the function's inputs)
    program.expected                  # name -> numpy array, computed here (the third opinion)

Pure: no compiler, no torch. The programs are valid by construction: every name is
declared before use in a scope that sees it, every global read is in bounds (guarded by
`n < N`, or an index taken `% N`), shared buffers are written in one phase and read in a
later one with a `sync.shared` between (at the thread body's top level, where every thread
of the block reaches it), loops terminate, and the program's arithmetic has no undefined
behaviour on its inputs: the generator runs it here on the inputs it made and draws again
when a signed operation overflows, a divisor is zero, a shift leaves the type or a float
converts to an integer out of range. What C leaves to the implementation is not generated
(signed left shifts of negative values, unary minus of u32).

Families (one chosen per seed):
  thread  per-thread code over mutable scalars (typed/untyped, s32 u32 f32 f16 bf16),
          foreach / ranged foreach / while loops with loop-carried values, break, if/else,
          element reads and guarded writes of global tensors, shared buffers with barriers,
          block, group (warp) and group-4 (warpgroup) levels.
  copy    tiled copies: dma.copy / tma.copy of `subspan(...).at(...)` tiles into shared
          memory, a per-thread transform, a copy back out (N a multiple of the tile).
  mma     the GEMM template (A [M,K] x B [N,K]^T) with random tile sizes, dtypes, stages.

Exact ops are compared bit for bit (NaNs equal whatever their payload). The approximate
ops carry a tolerance (`APPROX`): their values only reach an output through the output's
own expression, never a condition, an index or an integer, so the error cannot grow past
the bound recorded with the output.
"""
from __future__ import annotations

import math
import random
import struct
from dataclasses import dataclass, field

import numpy as np


from difftest_ast import *  # noqa: F401,F403 - the pieces (tests reach them here)
from difftest_ast import UB, bf16_round, int_binop  # noqa: F401
from difftest_thread import Program, thread_program  # noqa: F401

# ---------------------------------------------------------------- tiled copies

COPY_TYPES = {"f32": np.float32, "s32": np.int32, "f16": np.float16}
#: The per-element transform of the copy kernel: (Choreo text of x's image, numpy of it).
COPY_OPS = {
    "s32": (("x", lambda x, r, c, bm, bk: x), ("x * 3 + bm", lambda x, r, c, bm, bk: x * 3 + bm),
            ("x ^ c", lambda x, r, c, bm, bk: x ^ c), ("-x + r", lambda x, r, c, bm, bk: -x + r)),
    "f32": (("x", lambda x, r, c, bm, bk: x), ("x * 2.0f", lambda x, r, c, bm, bk: x * np.float32(2)),
            ("x + 1.5f", lambda x, r, c, bm, bk: x + np.float32(1.5)), ("-x", lambda x, r, c, bm, bk: -x)),
    "f16": (("x", lambda x, r, c, bm, bk: x),
            ("__to<f16>(__to<f32>(x) * 2.0f)", lambda x, r, c, bm, bk: np.float16(np.float32(x) * 2)),
            ("__to<f16>(__to<f32>(x) + 0.5f)", lambda x, r, c, bm, bk: np.float16(np.float32(x) + np.float32(0.5)))),
}


def copy_program(seed: int, rng: random.Random) -> Program:
    """Tiles of X copied into shared memory (dma.copy or tma.copy of a subspan(...).at(...)),
    transformed element by element by the block's threads (optionally transposed), and
    copied out to Y the same way."""
    t = rng.choice(list(COPY_TYPES))
    tm = rng.choice((8, 16, 32))
    tk = rng.choice((8, 16, 32, 64))
    transpose = tm == tk and rng.random() < 0.4
    gm, gk = rng.randint(1, 3), rng.randint(1, 3)
    m, k = tm * gm, tk * gk
    load, store = rng.choice(("dma", "tma")), rng.choice(("dma", "tma"))
    future = rng.random() < 0.5
    text, fn = rng.choice(COPY_OPS[t])
    src_name = "xt.data" if future else "xs"
    ydims = (k, m) if transpose else (m, k)
    lines = [f"__co__ void k(global {t}[M, K] X, global {t}[{'K, M' if transpose else 'M, K'}] Y) {{",
             f"  parallel {{bm, bk}} by [M / {tm}, K / {tk}] : block {{"]
    if future:
        lines.append(f"    xt = {load}.copy X.subspan({tm}, {tk}).at(bm, bk) => shared;")
    else:
        lines += [f"    shared {t}[{tm}, {tk}] xs;", f"    {load}.copy X.subspan({tm}, {tk}).at(bm, bk) => xs;"]
    ys_shape = f"{tk}, {tm}" if transpose else f"{tm}, {tk}"
    lines += [f"    shared {t}[{ys_shape}] ys;",
              f"    parallel r by {tm} : thread {{",
              f"      foreach c in [{tk}] {{",
              f"        x = {src_name}.at(r, c);",
              f"        ys.at({'c, r' if transpose else 'r, c'}) = {text};",
              "      }", "    }",
              f"    {store}.copy ys => Y.subspan({ys_shape}).at({'bk, bm' if transpose else 'bm, bk'});",
              "  }", "}"]
    dt = COPY_TYPES[t]
    if t == "s32":
        x = np.array([[rng.randint(-1000, 1000) for _ in range(k)] for _ in range(m)], dt)
    else:
        x = np.array([[rng.uniform(-4, 4) for _ in range(k)] for _ in range(m)], np.float32).astype(dt)
    y = np.zeros(ydims, dt)
    with np.errstate(all="ignore"):
        for i in range(m):
            for j in range(k):
                v = fn(x[i, j] if t != "s32" else int(x[i, j]), i % tm, j % tk, i // tm, j // tk)
                if transpose:
                    y[j, i] = v
                else:
                    y[i, j] = v
    inputs = {"X": x, "Y": np.full(ydims, -7, dt)}
    feats = {f"copy:{load}-{store}", f"dtype:{t}"} | ({"transpose"} if transpose else set()) | (
        {"future"} if future else set())
    return Program(seed, "copy", "\n".join(lines) + "\n", "k", inputs, ("Y",), {"Y": y}, {}, feats,
                   f"M={m} K={k} tile {tm}x{tk}")


# ---------------------------------------------------------------- MMA kernels

GEMM_TEMPLATE = """// C = A @ B^T, {dt} A [M, K] and B [N, K], f32 accumulation (examples/gemm.co's form).
#define BM {bm}
#define BN {bn}
#define BK {bk}
#define WG_M 64
#define STAGES {stages}

__co__ void gemm(global {dt}[M, K] A, global {dt}[N, K] B, global {dt}[M, N] C) {{
  [[launch_bounds(_, 1)]]
  parallel.async {{tn, tm}} by [cdiv(N, BN), cdiv(M, BM)] : block {{
    shared {dt}[BM, BK] a_buf[STAGES];
    shared {dt}[BN, BK] b_buf[STAGES];
    shared {dt}[BM, BN] c_buf;
    shared event full[STAGES], empty[STAGES] = ready;
    k_tiles = cdiv(K, BK);
    parallel p by [BM / WG_M + 1] : group-4 {{
      inthreads.async (p == 0) {{
        mutable u32 order = 0;
        foreach {{kt}} in [k_tiles] {{
          slot = order % STAGES;
          wait empty.at(order);
          a_load = tma.load.async.swiz A.subspan(BM, BK).at(tm, kt) => a_buf[slot];
          b_load = tma.load.async.swiz B.subspan(BN, BK).at(tn, kt) => b_buf[slot];
          trigger full.at(order++) after a_load, b_load;
        }}
      }}
      inthreads.async (p > 0) {{
        cid = p - 1;
        mutable u32 order = 0;
        acc = mma.fill.f32 0.0f;
        foreach {{kt}} in [k_tiles] {{
          slot = order % STAGES;
          wait full.at(order);
          step = mma.row.row.async acc, a_buf[slot].subspan(WG_M, BK).at(cid, 0), b_buf[slot];
          wait step;
          trigger empty.at(order++);
        }}
        mma.store acc, c_buf.subspan(WG_M, BN).at(cid, 0);
        tma.copy c_buf => C.subspan(BM, BN).at(tm, tn);
      }}
    }}
  }}
}}
"""


def half_round(x: np.ndarray, dt: str) -> np.ndarray:
    if dt == "f16":
        return x.astype(np.float16)
    return np.vectorize(lambda v: bf16_round(v), otypes=[np.float32])(x.astype(np.float32))


def mma_program(seed: int, rng: random.Random) -> Program:
    """The GEMM template with random tiles (BM 64/128, BN 64/128, BK 32/64), stages (1-4),
    dtype (bf16, f16) and problem sizes (whole tiles, or ragged edges the TMA clips).
    The accumulation order differs between executors: the comparison allows the
    products' rounding (2^-8 of sum |a||b|, bf16's precision) plus C's rounding."""
    dt = rng.choice(("bf16", "f16"))
    bm, bn, bk = rng.choice((64, 128)), rng.choice((64, 128)), rng.choice((32, 64))
    stages = rng.randint(1, 4)
    m = bm * rng.randint(1, 2) - rng.choice((0, 0, 16))
    n = bn * rng.randint(1, 2) - rng.choice((0, 0, 8))
    kk = bk * rng.randint(1, 3)
    src = GEMM_TEMPLATE.format(dt=dt, bm=bm, bn=bn, bk=bk, stages=stages)
    nr = np.random.default_rng(rng.randrange(2 ** 32))
    a = half_round(nr.uniform(-1, 1, (m, kk)), dt)
    b = half_round(nr.uniform(-1, 1, (n, kk)), dt)
    af, bf = a.astype(np.float64), b.astype(np.float64)
    ref = af @ bf.T
    tol = 2 ** -8 * (np.abs(af) @ np.abs(bf).T) + 2 ** -7 * np.abs(ref) + 1e-6
    c0 = np.full((m, n), -7.0, np.float32)
    inputs = {"A": a, "B": b, "C": half_round(c0, dt)}
    expected = half_round(ref, dt)
    return Program(seed, "mma", src, "gemm", inputs, ("C",), {"C": expected}, {"C": tol},
                   {f"mma:{dt}", f"tile:{bm}x{bn}x{bk}", f"stages:{stages}"},
                   f"M={m} N={n} K={kk} {dt} {bm}x{bn}x{bk} stages={stages}",
                   ("A", "B", "C") if dt == "bf16" else ())


# ---------------------------------------------------------------- entry

FAMILIES = {"thread": thread_program, "copy": copy_program, "mma": mma_program}
FAMILY_WEIGHTS = {"thread": 0.75, "copy": 0.15, "mma": 0.10}
MAX_DRAWS = 200


def generate(seed: int, family: str | None = None) -> Program:
    """The program of `seed` (and its inputs and expected outputs); deterministic."""
    rng = random.Random(f"difftest:{seed}")
    fam = family or rng.choices(list(FAMILY_WEIGHTS), weights=list(FAMILY_WEIGHTS.values()))[0]
    for draw in range(MAX_DRAWS):
        sub = random.Random(f"difftest:{seed}:{fam}:{draw}")
        try:
            return FAMILIES[fam](seed, sub)
        except UB:
            continue
    raise RuntimeError(f"seed {seed}: no program without undefined behaviour in {MAX_DRAWS} draws")


