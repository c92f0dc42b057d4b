"""bench/model.py and bench/model_ptx.py: the PTX census of the compiled examples,
the step bounds' arithmetic, the schedules, and that the fit finds parameters it
was given (measurements made by the model itself)."""
from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
import model as M  # noqa: E402


def _shapes(mix):
    return Counter((x.m, x.n, x.k, x.a_from) for x in mix.mmas)


def test_census_of_the_seed_sm90():
    c = M.census_of("seed", "sm_90a")
    producer, consumer = c.roles
    assert (producer.instances, producer.threads) == (1, 1)
    assert (consumer.instances, consumer.threads) == (2, 128)
    assert producer.step.tma_bytes == 2 * 128 * 128 * 2      # a K and a V tile per step
    assert producer.tile.tma_bytes == 128 * 128 * 2          # Q once per tile
    assert _shapes(consumer.step) == {(64, 128, 16, "smem"): 8, (64, 128, 16, "reg"): 8}
    assert consumer.step.ex2 == 66                           # 64 scores + 2 row scales
    assert {x.group for x in consumer.step.mmas} == {0, 1}   # QK and PV: two commit groups
    assert consumer.tile.store_drains == 1


def test_census_reads_tcgen05_shapes_from_the_descriptor():
    c = M.census_of("seed", "sm_100a")
    assert _shapes(c.roles[1].step) == {(64, 128, 16, "smem"): 8, (64, 128, 16, "tmem"): 8}
    g = M.census_of("gemm", "sm_100a")
    assert _shapes(g.roles[1].step) == {(64, 128, 16, "smem"): 4}
    assert g.roles[0].step.tma_bytes == (128 + 128) * 64 * 2


def test_persistent_census_has_a_tile_loop():
    c = M.census_of("persistent", "sm_90a")
    assert c.roles[0].tile.waits == 1          # the producer waits for q_shared to be free
    assert c.roles[1].step.instr == M.census_of("seed", "sm_90a").roles[1].step.instr


def test_step_bounds_arithmetic():
    p = M.Params(tensor_eff=0.5, l2_bytes_per_clock=32.0, latency_us=1.0)
    b = M.step_bounds(M.census_of("seed", "sm_90a"), M.H200, p)
    # 2 warpgroups x (QK + PV) of 64 x 128 x 128 at 4096 FLOP/clock, halved efficiency
    assert b["tensor"] == pytest.approx(2 * 2 * 2 * 64 * 128 * 128 / 4096 / 0.5)
    # Q (16 KB) + K (32 KB) + V (32 KB) per warpgroup, and the 64 KB TMA writes
    assert b["smem"] == pytest.approx((2 * (16 + 32 + 32) + 64) * 1024 / 128)
    assert b["l2"] == pytest.approx(65536 / 32.0)
    bw = M.step_bounds(M.census_of("seed", "sm_100a"), M.B200, M.Params(tensor_eff=1.0))
    assert bw["tensor"] == pytest.approx(2 * 2 * 2 * 64 * 128 * 128 / (8192 / 2))  # M=64: half
    d = M.step_bounds(M.design_census(), M.B200, M.Params(tensor_eff=1.0))
    assert d["tensor"] == pytest.approx(4 * 2 * 128 * 128 * 128 / 8192)


def test_attention_work_counts_steps():
    w = M.attention_work(1, 2, 1024, causal=True)
    assert sum(s for s, _ in w.items) == 2 * 8 * 9 // 2 and len(w.items) == 16
    wp = M.attention_work(1, 2, 1024, causal=True, persistent=True)
    assert [s for s, _ in wp.items] == [9] * 8 and sum(t for _, t in wp.items) == 16
    odd = M.attention_work(1, 1, 640, causal=True, persistent=True)  # 5 tiles: a lone middle
    assert [(s, t) for s, t in odd.items] == [(6, 2), (6, 2), (3, 1)]
    assert M.attention_work(1, 1, 512, causal=False).items == ((4, 1),) * 4


def test_makespan_list_scheduling_and_stride():
    w = M.Work("grid", ((3, 1), (1, 1), (1, 1), (1, 1)), 2, 0, 0.0)
    assert M.makespan(w, 1.0, 0.0, False) == 3.0      # the long one on one SM
    wp = M.Work("persistent", ((3, 1), (1, 1), (1, 1), (1, 1)), 2, 0, 0.0)
    assert M.makespan(wp, 1.0, 0.0, False) == 4.0     # items 0 and 2 on block 0
    # peeled: a tile of n steps costs (n - 1) steps + its tile part: 12, 10, 10, 10 on 2 SMs
    assert M.makespan(w, 1.0, 10.0, True) == 22.0


def test_causal_is_cheaper_and_the_persistent_kernel_balances():
    p = M.Params()
    shape = {"B": 1, "H": 16, "S": 4096}
    causal = M.predict_row("seed", dict(shape, causal=True), M.H200, p, 1500.0)
    full = M.predict_row("noncausal", dict(shape, causal=False), M.H200, p, 1500.0)
    pers = M.predict_row("persistent", dict(shape, causal=True), M.H200, p, 1500.0)
    assert causal["ms"] < full["ms"] and pers["ms"] < causal["ms"]


def test_fit_recovers_the_parameters_it_was_given():
    truth = M.Params(tensor_eff=0.8, l2_bytes_per_clock=48.0, latency_us=1.5)
    cases = [("seed", {"B": 8, "H": 16, "S": 1024, "causal": True}, 1500.0),
             ("seed", {"B": 64, "H": 16, "S": 128, "causal": True}, 1500.0),
             ("gemm", {"M": 4096, "N": 4096, "K": 2048}, 1500.0)]
    rows = [(n, s, M.predict_row(n, s, M.H200, truth, f)["tflops"], f) for n, s, f in cases]
    got = M.fit(rows)
    assert max(abs(r[3] - 1) for r in M.compare(rows, got)) < 0.01
    assert got.tensor_eff == pytest.approx(0.8, abs=0.02)
    assert got.latency_us == pytest.approx(1.5, abs=0.1)


def test_rows_from_a_measure_run(tmp_path):
    """The calibration reads bench/model_measure.py's JSON: checked rows of the examples
    only, each with the SM clock sampled during its timing."""
    import json

    def row(role, shape, ok, tflops, mhz):
        t = {"ms": 1.0, "tflops": tflops, "clocks": {"sm_mhz": mhz}}
        return {"role": role, "shape": shape, "check": {"ok": ok},
                "times": {"graph_r1": t, "sustained": t}}
    data = {"rows": [row("seed", {"B": 8, "H": 16, "S": 1024, "causal": True}, True, 400.0, 1500),
                     row("persistent", {"B": 8, "H": 16, "S": 1024, "causal": True}, False, 9.0, 1500),
                     row("cublas", {"M": 64, "N": 64, "K": 64}, True, 700.0, 1500),
                     row("gemm", {"M": 8192, "N": 8192, "K": 4096}, True, 500.0, 1400)]}
    path = tmp_path / "m.json"
    path.write_text(json.dumps(data))
    rows = M.rows_from_measure(str(path))
    assert [(r[0], r[2], r[3]) for r in rows] == [("seed", 400.0, 1500.0), ("gemm", 500.0, 1400.0)]
    cmp = M.compare(rows, M.Params())
    assert all(c[2] > 0 for c in cmp)
