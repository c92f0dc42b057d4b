"""A performance model of the compiled kernels: time from the PTX, a machine record
and the role pipeline's critical path. bench/MODEL.md explains it with its tables.

    python3 bench/model.py                       # first check against bench/RESULTS.md
    python3 bench/model.py --calibrate M.json    # fit on a bench/model_measure.py run
    python3 bench/model.py --blackwell [--params P.json]   # sm_100a predictions, B200
    python3 bench/model.py --table               # issue 26: flash-attn-4 as the yardstick, from SASS
    python3 bench/model.py --ptx-table --params bench/model_params.json   # issue 13's PTX table

Long because: the machines, workloads, schedules, the fit and the report tables that
read them are one command line's; the PTX census, the role pipeline and the design
kernel's description are their own modules (model_ptx, model_pipe, model_design).

What is modelled, and why.
- The work of a kernel is its tiles (query tiles, output tiles); a tile costs
  `trips` trips of its consumer's step loop plus its once-per-tile code. The step
  loop's instruction mix comes from the PTX (bench/model_ptx.py): MMA shapes and
  operand sources, TMA bytes, ex2, instructions, per role and role instance.
- One trip of the step loop takes the longest of the pipes it needs, in clocks
  per CTA (the pipes run concurrently: MMAs are asynchronous, TMA is a copy
  engine, the roles are different warps):
    tensor  = MMA FLOPs / (rate per SM; half rate for M=64 tcgen05) / tensor_eff
    smem    = (operand bytes the MMAs read from shared memory + TMA bytes written) / 128 B
    l2      = TMA bytes / l2_bytes_per_clock (an SM's share of L2 when all SMs stream)
    issue   = instructions of the warps that share one SM sub-partition (1 per clock)
    sfu     = ex2 of those warps x 32 lanes / 4 per clock (16 per SM)
    chain   = the role pipeline's own period: every role's step program (its waits,
              arrives, commits, MMAs and TMA loads in program order, read from the
              PTX) run against the others' (bench/model_pipe.py); with one query tile
              a block-accumulator kernel's QK -> softmax -> PV serialise here.
  This is the critical path of a software pipeline in steady state: either a
  shared resource or one role's own dependence chain sets the period.
- The once-per-tile code (prologue QK and softmax, final PV, epilogue) is serial:
  its MMAs at the tensor rate, then its instructions, plus `latency` for each
  memory round trip it waits for: the store drain of the epilogue, and the first
  loads of a tile in a non-persistent kernel (a persistent kernel's producer
  loads the next tile during the epilogue).
- Schedules: a grid of CTAs (one per SM here: their shared memory allows no
  second) is dispatched in grid order to the SM that frees first (list
  scheduling); a persistent grid takes its items by static stride. Causal
  attention gives a query tile as many K/V steps as tiles up to the diagonal.
- Kernel time = the busiest SM's clocks / clock, plus one latency for the launch,
  and at least the HBM time of the bytes every input and output must cross once.

Parameters: the machine records (published rates) and three calibrated ones, each a
property of a pipe, not of a row: `tensor_eff` (the fraction of the MMA rate a
pipelined step loop gets), `l2_bytes_per_clock`, `latency_us`. See bench/MODEL.md.
"""
from __future__ import annotations

import argparse
import heapq
import json
import os
import sys
from dataclasses import asdict, dataclass, replace

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import model_design  # noqa: E402
import model_pipe  # noqa: E402
import model_ptx  # noqa: E402


# ------------------------------------------------------------------ machines

@dataclass(frozen=True)
class Machine:
    """Per-SM rates per clock (architecture) and the chip's size (product)."""
    name: str
    sms: int
    clock_mhz: float        # the clock NVIDIA's peak figure implies (prediction default)
    tensor_flops: int       # dense bf16 FLOP / clock / SM (f32 accumulate)
    hbm_gb_s: float
    m64_half_rate: bool     # tcgen05.mma with M=64 on one CTA uses half the datapath
    sfu_per_clock: int = 16     # MUFU ex2 / clock / SM
    smem_bytes: int = 128       # shared-memory bytes / clock / SM
    subpartitions: int = 4      # SMSPs, each issuing one warp instruction / clock


# H200 SXM: GH100 with 132 SMs; 989.4 TFLOP/s dense BF16 (NVIDIA H100/H200 datasheets;
# the H100 whitepaper quotes it at 1830 MHz: 989.4e12 / (132 * 1830e6) = 4096 / clock / SM);
# HBM3e 4.8 TB/s (H200 datasheet). The card runs up to 1980 MHz and is power-capped
# (700 W) at 1395-1455 MHz on long attention runs (bench/RESULTS.md): calibration
# always uses the clock measured during the timing.
H200 = Machine("H200", 132, 1830.0, 4096, 4800.0, False)
# B200 (HGX B200, 1000 W): 148 SMs; 2.25 PFLOP/s dense BF16 (4.5 with 2:4 sparsity; per 8
# GPUs 18 dense, 36 sparse). TF32 is a different figure (1.1 PFLOP/s dense, 2.2 sparse per
# GPU; 18 PFLOPS sparse per 8 GPUs) and is not used here (bench/MODEL.md section 2 cites
# both); HBM3e 8 TB/s per GPU. Per SM per clock Blackwell's tensor core is
# twice Hopper's (8192); 2.25e15 / (148 * 8192) = 1856 MHz is the clock the figure implies.
# MUFU 16 / clock / SM and shared memory 128 B / clock / SM as on Hopper (CUDA C++
# Programming Guide, throughput table, compute capability 9.0 and 10.0).
B200 = Machine("B200", 148, 1856.0, 8192, 8000.0, True)
MACHINES = {"H200": H200, "B200": B200}


@dataclass(frozen=True)
class Params:
    """The calibrated parameters (bench/MODEL.md: what each stands for)."""
    tensor_eff: float = 0.85        # prior: cuBLAS reached 0.85-0.93 of the rate at its clock
    l2_bytes_per_clock: float = 40.0  # prior: ~10 TB/s over 132 SMs at 1.9 GHz
    latency_us: float = 1.0         # prior: one global round trip plus its synchronisation


# ------------------------------------------------------------------ workloads

@dataclass(frozen=True)
class Work:
    """A kernel at a shape: its tiles' step counts in dispatch order, and how they run."""
    kind: str            # "grid" (one CTA per tile) or "persistent" (blocks take items)
    items: tuple         # per item: (steps, tiles): K/V (or K) steps and tiles in it
    blocks: int          # concurrent blocks (SMs, or the persistent grid)
    bytes_once: int      # bytes every input and output crosses HBM at least once
    flops: float


def attention_work(b, h, s, causal, persistent=False, blocks=132, block_m=128) -> Work:
    """Query tiles of block_m rows (one per CTA), K/V steps of 128 keys; causal tile t
    (0-based) has the steps up to its diagonal, (t + 1) * block_m / 128."""
    tiles = -(-s // block_m)
    flops = 4.0 * b * h * s * s * 128 / (2 if causal else 1)
    once = 4 * b * s * h * 128 * 2
    if not persistent:
        kv = -(-s // 128)
        steps = [-(-(tiles - t) * block_m // 128) if causal else kv
                 for t in range(tiles)]  # longest first
        items = tuple((st, 1) for _ in range(b * h) for st in steps)
        return Work("grid", items, blocks, once, flops)
    pairs = -(-tiles // 2)
    per_head = []
    for p in range(pairs):  # the persistent example: pair (tiles-1-p, p), a pair's steps
        two = 2 * p + 1 != tiles
        st = (tiles - p) + (p + 1 if two else 0)
        per_head.append((st if causal else tiles * (2 if two else 1), 2 if two else 1))
    return Work("persistent", tuple(per_head * (b * h)), blocks, once, flops)


def blackwell_work(b, h, s, causal, blocks=148) -> Work:
    """examples/flash_atten_blackwell.co's persistent order: items of two 128-row query
    tiles (256 rows) of one head, numbered longest first over all heads (causal: query
    block bm = blocks - 1 - item / heads, min(2 bm + 2, KV tiles) steps), taken in a snake:
    in round r block w takes item r * blocks + w (r even) or r * blocks + blocks - 1 - w
    (r odd) (its NUM_SMS define is the B200's 148 SMs). makespan() gives item i to block
    i % blocks, so the items are listed in that order: round r's reversed when r is odd."""
    qb, kv = -(-s // 256), -(-s // 128)
    steps = [min(2 * (qb - 1 - t) + 2, kv) if causal else kv for t in range(qb)]
    order = [(st, 1) for st in steps for _ in range(b * h)]
    items = []
    for r in range(0, len(order), blocks):
        chunk = order[r:r + blocks]
        if r // blocks % 2:  # block w takes the round's item blocks - 1 - w
            chunk = (chunk + [(0, 0)] * (blocks - len(chunk)))[::-1]
        items += chunk
    return Work("persistent", tuple(items), blocks, 4 * b * s * h * 128 * 2,
                4.0 * b * h * s * s * 128 / (2 if causal else 1))


def gemm_work(m, n, k, blocks=132, bm=128, bn=128, bk=64) -> Work:
    tiles = (-(-m // bm)) * (-(-n // bn))
    return Work("grid", tuple(((-(-k // bk)), 1) for _ in range(tiles)), blocks,
                (m * k + n * k + m * n) * 2, 2.0 * m * n * k)


def design_work(b, h, s, causal, blocks=148) -> Work:
    """The design kernel's persistent order: items (256-row m-block, head), m-block
    fastest, CTA w takes items w, w+148, ...; a K/V step serves both 128-row stages."""
    mblocks = s // 256
    steps = [(2 * mb + 2) if causal else s // 128 for mb in range(mblocks)]
    items = tuple((st, 1) for _ in range(b * h) for st in steps)
    return Work("persistent", items, blocks, 4 * b * s * h * 128 * 2,
                4.0 * b * h * s * s * 128 / (2 if causal else 1))


# ------------------------------------------------------------------ one step, one tile

def _mma_clocks(mmas, m: Machine) -> float:
    def rate(x):
        half = m.m64_half_rate and x.m < 128
        return m.tensor_flops * (0.5 if half else 1.0)
    return sum(x.flops / rate(x) for x in mmas)


def _smsp_load(census, mach: Machine, which: str) -> tuple[float, float]:
    """(issue, sfu) clocks on the busiest SM sub-partition for one trip: each warpgroup
    instance puts one warp on every sub-partition; single-thread roles add their warp."""
    issue = sfu = single = 0.0
    for r in census.roles:
        mix = getattr(r, which)
        if mix is None:
            continue
        if r.threads >= 128:
            issue += r.instances * mix.instr
            sfu += r.instances * mix.ex2 * 32 / (mach.sfu_per_clock / mach.subpartitions)
        else:
            single = max(single, mix.instr)
    return issue + single, sfu


def _mma_role(census):
    return next((r for r in census.roles if r.step and r.step.mmas), None)


def pipe_rates(mach: Machine, p: Params) -> model_pipe.Rates:
    """The per-CTA pipe rates the role-pipeline run uses (bench/model_pipe.py)."""
    return model_pipe.Rates(lambda mmas: _mma_clocks(mmas, mach) / p.tensor_eff,
                            p.l2_bytes_per_clock,
                            32 / (mach.sfu_per_clock / mach.subpartitions))


_PERIODS: dict = {}


def _chain(census, mach: Machine, p: Params) -> float:
    """The role pipeline's own period: its roles' step programs run against each other
    (their waits, the shared tensor pipe and copy engine; bench/model_pipe.py). Cached:
    the fit asks for it at every grid point, and latency_us does not enter it."""
    key = (id(census), mach.name, p.tensor_eff, p.l2_bytes_per_clock)
    if key not in _PERIODS:
        _PERIODS[key] = (census, model_pipe.run(census, pipe_rates(mach, p))["period"])
    return _PERIODS[key][1]


def step_bounds(census, mach: Machine, p: Params) -> dict:
    """Clocks per trip of the step loop for one CTA, per pipe."""
    tensor = sum(r.instances * _mma_clocks(r.step.mmas, mach) for r in census.roles if r.step)
    smem_b = sum(r.instances * (sum(x.smem_bytes for x in r.step.mmas) + r.step.tma_bytes)
                 for r in census.roles if r.step)
    tma_b = sum(r.instances * r.step.tma_bytes for r in census.roles if r.step)
    issue, sfu = _smsp_load(census, mach, "step")
    return {"tensor": tensor / p.tensor_eff, "smem": smem_b / mach.smem_bytes,
            "l2": tma_b / p.l2_bytes_per_clock, "issue": issue, "sfu": sfu,
            "chain": _chain(census, mach, p)}


def tile_clocks(census, mach: Machine, p: Params, clock_mhz: float, persistent: bool) -> float:
    """The once-per-tile serial part: its MMAs, its instructions, its round trips."""
    tensor = sum(r.instances * _mma_clocks(r.tile.mmas, mach) for r in census.roles)
    issue, sfu = _smsp_load(census, mach, "tile")
    drains = max(r.tile.store_drains for r in census.roles)
    trips = drains + (0 if persistent else 1)
    return tensor / p.tensor_eff + max(issue, sfu) + trips * p.latency_us * clock_mhz


def tile_has_a_step(census) -> bool:
    """Whether the once-per-tile code does one step's MMAs itself (a peeled prologue)."""
    role = _mma_role(census)
    return role is not None and bool(role.tile.mmas)


# ------------------------------------------------------------------ schedule

def makespan(work: Work, step: float, tile: float, peeled: bool) -> float:
    """Clocks of the busiest block."""
    def cost(item):
        steps, tiles = item
        return (steps - (tiles if peeled else 0)) * step + tiles * tile
    costs = [cost(it) for it in work.items]
    if work.kind == "persistent":
        per = [0.0] * work.blocks
        for i, c in enumerate(costs):
            per[i % work.blocks] += c
        return max(per)
    if len(set(costs)) == 1:  # every CTA the same: whole waves
        return -(-len(costs) // work.blocks) * costs[0]
    heap = [0.0] * min(work.blocks, len(costs))
    for c in costs:
        heapq.heappush(heap, heapq.heappop(heap) + c)
    return max(heap)


def bound_of(bounds: dict) -> str:
    """The pipe that sets the trip; the role pipeline ("chain") only where it is longer
    than every pipe by more than a clock (a pipeline that keeps a pipe busy runs at it)."""
    pipes = {k: v for k, v in bounds.items() if k != "chain"}
    top = max(pipes, key=pipes.get)
    return "chain" if bounds["chain"] > pipes[top] + 1.0 else top


def predict(census, work: Work, mach: Machine, p: Params, clock_mhz: float | None = None) -> dict:
    """Predicted time (ms) and its parts."""
    f = clock_mhz or mach.clock_mhz
    bounds = step_bounds(census, mach, p)
    step = bounds[bound_of(bounds)]   # a chain within a clock of a pipe runs at the pipe
    tile = tile_clocks(census, mach, p, f, work.kind == "persistent")
    clocks = makespan(work, step, tile, tile_has_a_step(census))
    ms = clocks / (f * 1e3) + p.latency_us * 1e-3
    ms = max(ms, work.bytes_once / (mach.hbm_gb_s * 1e6))
    return {"ms": ms, "tflops": work.flops / ms / 1e9, "step_clocks": step,
            "bound": bound_of(bounds), "bounds": bounds, "tile_clocks": tile,
            "clock_mhz": f}


# ------------------------------------------------------------------ kernels

EXAMPLES = {"seed": "flash_atten_causal", "persistent": "flash_atten_persistent",
            "noncausal": "flash_atten", "gemm": "gemm",
            "blackwell": "flash_atten_blackwell", "blackwell_causal": "flash_atten_blackwell_causal"}
_CENSUS: dict = {}


def census_of(name: str, target: str):
    """The census of an example's PTX, compiled in-process (choreo_py.load)."""
    key = (name, target)
    if key not in _CENSUS:
        import choreo_py

        fn = choreo_py.load(os.path.join(ROOT, "examples", EXAMPLES[name] + ".co"), target=target)
        _CENSUS[key] = model_ptx.census(fn.ptx)
    return _CENSUS[key]


def census_of_file(path: str, target: str, defines: dict | None = None):
    """The census of any .co file's PTX (a kernel the examples table does not name)."""
    import choreo_py

    fn = choreo_py.load(path, target=target, defines=defines)
    if not hasattr(type(fn), "ptx"):
        raise ValueError(f"{path}: a host program (several kernels or functions); the model "
                         "takes one warp-specialised kernel")
    census = model_ptx.census(fn.ptx)
    if _mma_role(census) is None:
        raise ValueError(f"{path}: no role with a step loop of MMAs in its {target} PTX")
    return census


def work_of(name: str, shape: dict, mach: Machine) -> Work:
    if name == "gemm":
        return gemm_work(shape["M"], shape["N"], shape["K"], mach.sms)
    if name == "design":
        return design_work(shape["B"], shape["H"], shape["S"], shape["causal"], mach.sms)
    if name.startswith("blackwell"):
        assert query_rows(census_of(name, "sm_100a")) == 256  # the order above is of 256-row items
        return blackwell_work(shape["B"], shape["H"], shape["S"], shape["causal"], mach.sms)
    rows = 128
    return attention_work(shape["B"], shape["H"], shape["S"], shape["causal"],
                          persistent=name == "persistent", blocks=mach.sms, block_m=rows)


def query_rows(census) -> int:
    """Query rows a CTA owns: the bytes its roles load once per tile (Q, bf16, D = 128)."""
    return sum(r.tile.tma_bytes for r in census.roles) // (128 * 2)


# ------------------------------------------------------------------ the design kernel

def design_census() -> model_ptx.KernelCensus:
    """The design kernel's census, described from its source (bench/model_design.py)."""
    if "design" not in _CENSUS:
        _CENSUS["design"] = model_design.census()
    return _CENSUS["design"]


# ------------------------------------------------------------------ rows

# The first check: graph-replay round 1 (r1) TFLOP/s of bench/RESULTS.md's final run
# (2026-11-30 01:39 UTC), at the clocks that run recorded: S=8192 rows began at
# 1455 MHz and 1395 MHz (power cap), the short rows at 1980 MHz. Earlier numbers, not the
# calibration (bench/model_measure.py makes that run).
RESULTS_R1 = [
    ("seed", {"B": 2, "H": 16, "S": 8192, "causal": True}, 595.2, 1425.0),
    ("seed", {"B": 1, "H": 16, "S": 4096, "causal": True}, 496.3, 1980.0),
    ("seed", {"B": 4, "H": 16, "S": 2048, "causal": True}, 492.9, 1980.0),
    ("seed", {"B": 8, "H": 16, "S": 1024, "causal": True}, 385.3, 1980.0),
    ("seed", {"B": 64, "H": 16, "S": 128, "causal": True}, 90.7, 1980.0),
    ("persistent", {"B": 2, "H": 16, "S": 8192, "causal": True}, 630.2, 1425.0),
    ("persistent", {"B": 1, "H": 16, "S": 4096, "causal": True}, 600.4, 1980.0),
    ("persistent", {"B": 4, "H": 16, "S": 2048, "causal": True}, 506.5, 1980.0),
    ("persistent", {"B": 8, "H": 16, "S": 1024, "causal": True}, 443.1, 1980.0),
    ("persistent", {"B": 64, "H": 16, "S": 128, "causal": True}, 110.6, 1980.0),
    ("noncausal", {"B": 2, "H": 16, "S": 8192, "causal": False}, 631.7, 1425.0),
]


def shape_label(name: str, shape: dict) -> str:
    if "M" in shape:
        return f"{name} M={shape['M']} N={shape['N']} K={shape['K']}"
    c = "causal" if shape["causal"] else "non-causal"
    return f"{name} B={shape['B']} H={shape['H']} S={shape['S']} {c}"


def predict_row(name: str, shape: dict, mach: Machine, p: Params, clock: float | None,
                target: str = "sm_90a") -> dict:
    census = design_census() if name == "design" else census_of(name, target)
    work = work_of(name, shape, mach)
    if name == "persistent":  # the example's grid is its NUM_SMS define (132), not the SM count
        work = replace(work, blocks=132)
    return predict(census, work, mach, p, clock)


def rows_from_measure(path: str, method: str = "sustained") -> list:
    """(name, shape, TFLOP/s, SM MHz) of a bench/model_measure.py run, checked rows only."""
    data = json.load(open(path, encoding="utf-8"))
    out = []
    for r in data["rows"]:
        t = next((x for x in (r["times"].get(method), r["times"].get("graph_r1"))
                  if x and "tflops" in x), None)
        if r["role"] not in EXAMPLES or not r["check"]["ok"] or not t:
            continue
        mhz = (t.get("clocks") or {}).get("sm_mhz") or H200.clock_mhz
        out.append((r["role"], r["shape"], t["tflops"], float(mhz)))
    return out


def compare(rows: list, p: Params) -> list:
    """Predicted vs measured per row: (label, measured, predicted, ratio, bound, MHz)."""
    out = []
    for name, shape, measured, mhz in rows:
        pr = predict_row(name, shape, H200, p, mhz)
        out.append((shape_label(name, shape), measured, pr["tflops"], pr["tflops"] / measured,
                    pr["bound"], mhz))
    return out


def fit(rows: list) -> Params:
    """The three parameters that minimise the largest |predicted/measured - 1| over the
    rows (ties: the sum of squares), on a coarse grid and then a finer one around its
    best. Every row counts, the diagnostic one too: it sees the per-tile latency best."""
    def score(p):
        errs = [abs(r[3] - 1) for r in compare(rows, p)]
        return (max(errs), sum(e * e for e in errs))

    coarse = ([0.5 + 0.05 * i for i in range(11)], [16.0 + 8 * i for i in range(11)],
              [0.25 * i for i in range(1, 17)])
    best = _search(coarse, score, None)
    b = best[1]
    fine = ([b.tensor_eff + 0.01 * i for i in range(-5, 6)],
            [b.l2_bytes_per_clock + 2.0 * i for i in range(-4, 5) if b.l2_bytes_per_clock + 2 * i > 0],
            [max(0.05, b.latency_us + 0.05 * i) for i in range(-5, 6)])
    return _search(fine, score, best)[1]


def _search(grid, score, best):
    for eff in grid[0]:
        for l2 in grid[1]:
            for lat in grid[2]:
                p = Params(round(eff, 4), round(l2, 4), round(lat, 4))
                s = score(p)
                if best is None or s < best[0]:
                    best = (s, p)
    return best


# ------------------------------------------------------------------ reports

def table(cmp: list) -> str:
    lines = ["| kernel and shape | SM MHz | measured TFLOP/s | predicted | predicted / measured "
             "| bound of the step |", "|---|---|---|---|---|---|"]
    for label, meas, pred, ratio, bound, mhz in cmp:
        lines.append(f"| {label} | {mhz:.0f} | {meas:.1f} | {pred:.1f} | {ratio:.3f} | {bound} |")
    return "\n".join(lines)


BLACKWELL_SHAPES = [{"B": 2, "H": 16, "S": 8192, "causal": True},
                    {"B": 2, "H": 16, "S": 8192, "causal": False},
                    {"B": 8, "H": 16, "S": 1024, "causal": True},
                    {"B": 8, "H": 16, "S": 1024, "causal": False}]


def blackwell(p: Params) -> str:
    """sm_100a predictions on a B200: the compiled seed (flash_atten_causal.co, and
    flash_atten.co for the non-causal rows) and the design kernel."""
    lines = ["| shape | compiled seed TFLOP/s (bound) | design kernel TFLOP/s (bound) | design / seed |",
             "|---|---|---|---|"]
    for sh in BLACKWELL_SHAPES:
        seed = predict_row("seed" if sh["causal"] else "noncausal", sh, B200, p, None, "sm_100a")
        design = predict_row("design", sh, B200, p, None)
        lines.append(f"| {shape_label('', sh).strip()} | {seed['tflops']:.0f} ({seed['bound']}) | "
                     f"{design['tflops']:.0f} ({design['bound']}) | "
                     f"{design['tflops'] / seed['tflops']:.2f} |")
    return "\n".join(lines)


def _step_name(name: str, causal: bool) -> str:
    """The example that runs a shape: the causal files for causal rows (the seed is causal only)."""
    if name == "seed":
        return "seed" if causal else "noncausal"
    if name == "blackwell":
        return "blackwell_causal" if causal else "blackwell"
    return name


# The kernels whose grid is persistent (blocks take work items): their once-per-tile code
# has no load round trip (the next item's loads run under this one's end).
PERSISTENT = ("persistent", "design", "blackwell", "blackwell_causal")

FA4_KERNELS = (("design", "the design kernel"), ("blackwell", "compiled flash_atten_blackwell"),
               ("seed", "compiled seed"))


def fa4_table(p: Params) -> str:
    """Issue 13's table: the design kernel, the compiled Blackwell example and the compiled
    seed on a B200 (sm_100a), with the goal's two ratios."""
    head = ("| shape | " + " | ".join(f"{t} TFLOP/s (bound)" for _, t in FA4_KERNELS)
            + " | example / design | example / seed | goal (>= 0.90, >= 2.00) |")
    lines = [head, "|" + "---|" * 7]
    for sh in BLACKWELL_SHAPES:
        got = {n: predict_row(_step_name(n, sh["causal"]), sh, B200, p, None, "sm_100a")
               for n, _ in FA4_KERNELS}
        vs_d = got["blackwell"]["tflops"] / got["design"]["tflops"]
        vs_s = got["blackwell"]["tflops"] / got["seed"]["tflops"]
        ok = "met" if vs_d >= 0.90 and vs_s >= 2.0 else "not met"
        lines.append(f"| {shape_label('', sh).strip()} | "
                     + " | ".join(f"{got[n]['tflops']:.0f} ({got[n]['bound']})" for n, _ in FA4_KERNELS)
                     + f" | {vs_d:.2f} | {vs_s:.2f} | {ok} |")
    return "\n".join(lines)


def fa4_steps(p: Params) -> str:
    """Per step of each kernel on the B200: the pipe bounds, the role pipeline's period and
    where its roles wait (clocks per trip, steady state)."""
    lines = ["| kernel | query rows per step | tensor | smem | l2 | issue | sfu | pipeline | "
             "per-tile | waits per trip (role: barrier clocks) |", "|" + "---|" * 10]
    for name in ("design", "blackwell", "blackwell_causal", "seed", "noncausal"):
        c = design_census() if name == "design" else census_of(name, "sm_100a")
        b = step_bounds(c, B200, p)
        run = model_pipe.run(c, pipe_rates(B200, p))
        waits = "; ".join(f"{r}: " + ", ".join(f"{c.barriers.get(k, k)} {v:.0f}"
                                                for k, v in sorted(w.items()) if v >= 1)
                          for r, w in run["stalls"].items() if any(v >= 1 for v in w.values()))
        rows = 256 if name == "design" else query_rows(c)
        label = "design" if name == "design" else EXAMPLES[name] + ".co"
        lines.append(f"| {label} | {rows} | " + " | ".join(
            f"{b[k]:.0f}" for k in ("tensor", "smem", "l2", "issue", "sfu", "chain"))
            + f" | {tile_clocks(c, B200, p, B200.clock_mhz, name in PERSISTENT):.0f} | {waits} |")
    return "\n".join(lines)


def graph_table(name: str) -> str:
    """The role dependency graph of one kernel (bench/model_pipe.py `graph`)."""
    c = design_census() if name == "design" else census_of(name, "sm_100a")
    kinds = {r.name: f"{r.name} ({model_ptx.role_kind(r)})" for r in c.roles}
    lines = ["| signaller | waiter | barrier (event) | signal | lag (trips) |", "|---|---|---|---|---|"]
    for e in model_pipe.graph(c):
        bar = f"{e.key} ({c.barriers[e.key]})" if e.key in c.barriers else e.key
        lines.append(f"| {kinds[e.signaller]} | {kinds[e.waiter]} | {bar} | {e.kind} | {e.lag} |")
    return "\n".join(lines)


def steps_table(p: Params) -> str:
    """Per-step bounds (clocks per CTA) of every kernel the report uses."""
    cases = [("seed", "sm_90a", H200), ("persistent", "sm_90a", H200),
             ("noncausal", "sm_90a", H200), ("gemm", "sm_90a", H200),
             ("seed", "sm_100a", B200), ("design", None, B200)]
    lines = ["| kernel | target | tensor | smem | l2 | issue | sfu | chain | per-tile |",
             "|---|---|---|---|---|---|---|---|---|"]
    for name, target, mach in cases:
        c = design_census() if name == "design" else census_of(name, target)
        b = step_bounds(c, mach, p)
        tile = tile_clocks(c, mach, p, mach.clock_mhz, name in PERSISTENT)
        lines.append(f"| {name} | {target or 'sm_100a (source)'} | "
                     + " | ".join(f"{b[k]:.0f}" for k in ("tensor", "smem", "l2", "issue", "sfu",
                                                          "chain"))
                     + f" | {tile:.0f} |")
    return "\n".join(lines)


def table_report(p: Params, params_path: str | None) -> str:
    """The whole markdown section bench/RESULTS.md carries (python3 bench/model.py --table)."""
    src = params_path or "the priors"
    return (f"Machine: {B200.name}, {B200.sms} SMs at {B200.clock_mhz:.0f} MHz, "
            f"{B200.tensor_flops} dense BF16 FLOP/clock/SM, HBM {B200.hbm_gb_s:.0f} GB/s "
            f"(published rates, bench/MODEL.md section 2); parameters {asdict(p)} ({src}). "
            "A prediction of a model, calibrated on the H200 as in bench/MODEL.md section 5; "
            "no Blackwell GPU ran these kernels.\n\n" + fa4_table(p)
            + "\n\nPer step on the B200 (clocks per CTA per trip of the step loop; pipeline = "
            "the role pipeline's period, bench/model_pipe.py):\n\n" + fa4_steps(p)
            + "\n\nRole graph of flash_atten_blackwell.co (from its PTX):\n\n"
            + graph_table("blackwell") + "\n\nRole graph of the design kernel (from its source, "
            "bench/model_design.py):\n\n" + graph_table("design"))


def predict_cli(args, p: Params) -> int:
    """One kernel file at one shape on one machine: the prediction and its bounds."""
    shape = {k: int(v) for k, v in (kv.split("=") for kv in args.shape.split(","))}
    if "causal" in shape:
        shape["causal"] = bool(shape["causal"])
    mach = MACHINES[args.machine]
    name = {"grid": "gemm" if "M" in shape else "seed", "pairs": "persistent",
            "stride": "design"}[args.schedule]
    if name == "seed" and not shape["causal"]:
        name = "noncausal"
    census = census_of_file(args.kernel, args.target)
    work = work_of(name, shape, mach)
    if name in ("seed", "noncausal"):   # a CTA's query rows from its own Q loads
        work = attention_work(shape["B"], shape["H"], shape["S"], shape["causal"],
                              blocks=mach.sms, block_m=query_rows(census) or 128)
    if name == "persistent":
        work = replace(work, blocks=132)
    print(json.dumps(predict(census, work, mach, p), indent=1))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calibrate", metavar="MEASURE_JSON",
                    help="fit the parameters on a bench/model_measure.py run and compare")
    ap.add_argument("--method", default="sustained",
                    help="which timing of the run to use (sustained, graph_r1, graph_r2, burst)")
    ap.add_argument("--params", help="a JSON of Params to use (as --save-params writes)")
    ap.add_argument("--save-params", help="write the fitted parameters here")
    ap.add_argument("--blackwell", action="store_true", help="print the sm_100a predictions")
    ap.add_argument("--table", action="store_true",
                    help="flash-attn-4 against its published B200 figures, then the four "
                         "kernels side by side as ranges, from the SASS of cubins built here "
                         "(bench/model_fa4.py, bench/MODEL.md section 9)")
    ap.add_argument("--ptx-table", action="store_true",
                    help="issue 13's table from the PTX census (bench/MODEL.md section 8)")
    ap.add_argument("--kernel", metavar="FILE.co",
                    help="predict this kernel (with --target, --machine, --shape, --schedule)")
    ap.add_argument("--target", default="sm_100a")
    ap.add_argument("--machine", default="B200", choices=sorted(MACHINES))
    ap.add_argument("--shape", default="B=2,H=16,S=8192,causal=1",
                    help="attention B,H,S,causal or GEMM M,N,K")
    ap.add_argument("--schedule", default="grid", choices=["grid", "pairs", "stride"],
                    help="grid: one CTA per 128-row tile; pairs: the persistent example's "
                         "items; stride: the design kernel's 256-row items over the SMs")
    ap.add_argument("--fit-first-check", action="store_true",
                    help="also fit the parameters on bench/RESULTS.md's numbers (a first look only)")
    args = ap.parse_args()
    p = Params(**json.load(open(args.params))) if args.params else Params()
    if args.table:
        import subprocess

        import model_fa4

        try:
            print(model_fa4.report())
        except (OSError, subprocess.CalledProcessError) as err:
            detail = getattr(err, "stderr", "") or ""
            print(f"model.py: error: {err}{': ' + detail.strip() if detail else ''}", file=sys.stderr)
            return 2
        return 0
    if args.ptx_table:
        print(table_report(p, args.params))
        return 0
    if args.kernel:
        try:
            return predict_cli(args, p)
        except (ValueError, OSError) as err:
            print(f"model.py: error: {err}", file=sys.stderr)
            return 2
    print(f"parameters: {asdict(p)}\n\nper-step bounds, clocks per CTA:\n{steps_table(p)}\n")
    if args.calibrate:
        rows = rows_from_measure(args.calibrate, args.method)
        print(f"calibration run {args.calibrate} ({args.method}), prior parameters:\n"
              f"{table(compare(rows, p))}\n")
        p = fit(rows)
        print(f"fitted: {asdict(p)}\n{table(compare(rows, p))}\n")
        if args.save_params:
            json.dump(asdict(p), open(args.save_params, "w"), indent=1)
    else:
        print("first check, bench/RESULTS.md graph r1 (earlier sessions' numbers), "
              f"prior parameters, at the clocks that run recorded:\n{table(compare(RESULTS_R1, p))}\n")
        at_cap = [(n, s, t, 1425.0) for n, s, t, _ in RESULTS_R1]
        print(f"the same, every row at 1425 MHz (the power-capped clock):\n{table(compare(at_cap, p))}\n")
        if args.fit_first_check:
            for label, rows in (("recorded clocks", RESULTS_R1), ("1425 MHz", at_cap)):
                q = fit(rows)
                print(f"fitted on these earlier numbers ({label}; not the calibration): "
                      f"{asdict(q)}\n{table(compare(rows, q))}\n")
    if args.blackwell:
        print(f"B200 (sm_100a), parameters {asdict(p)}:\n{blackwell(p)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
