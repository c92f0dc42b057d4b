"""The emulator's fast paths give what the general code they stand in for gives.

Each fast path (docs/emulator.md, "Speed") replaces a per-lane loop or a round trip
through torch by one numpy operation; these tests run both on the same inputs, the
cases that fall back to the general code included (an access across two tensors, an
address outside every tensor, stores of two lanes to the same bytes).
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

from choreo_py.emu.isa_fp6 import FP6_FP4_PAIRS, float_encoder
from choreo_py.emu.memory import GlobalMemory
from choreo_py.ir import subbyte


def _f32_probes(dtype: str) -> np.ndarray:
    """Every code's value and the midpoints between codes, each with its 4 f32 neighbours
    either side, both signs; zeros, infinities, NaN, huge values; random bit patterns."""
    mags = np.array(subbyte.magnitudes(dtype), dtype=np.float64)
    points = np.concatenate([mags, (mags[1:] + mags[:-1]) / 2, mags * 2, [1e30, 3.4e38]])
    points = points.astype(np.float32)
    near = [points]
    up, down = points.copy(), points.copy()
    for _ in range(4):
        up, down = np.nextafter(up, np.float32(np.inf)), np.nextafter(down, np.float32(-np.inf))
        near += [up, down]
    vals = np.concatenate(near + [np.array([0.0, np.inf, np.nan], np.float32)])
    vals = np.concatenate([vals, -vals])
    bits = np.random.default_rng(0).integers(0, 1 << 32, 100_000, dtype=np.uint64)
    return np.concatenate([vals, bits.astype(np.uint32).view(np.float32)])


@pytest.mark.parametrize("dtype", sorted({d for d, _ in FP6_FP4_PAIRS.values()}))
def test_fp6_fp4_encoder_matches_subbyte_encode(dtype):
    x = _f32_probes(dtype)
    want = subbyte.encode(torch.from_numpy(x.copy()), dtype).numpy().astype(np.uint32)
    with np.errstate(all="ignore"):  # as the emulator runs (api.run_spec): NaN bit patterns
        got = float_encoder(dtype)(x)
    assert got.dtype == np.uint32
    assert np.array_equal(got, want), x[got != want][:8]


def _memory():
    gm = GlobalMemory()
    a = np.arange(256, dtype=np.uint8)
    b = np.arange(64, dtype=np.uint8) + 100
    return gm, gm.add("a", a), a, gm.add("b", b), b


def _loop_load(gm, addrs, nbytes):
    out = np.zeros((len(addrs), nbytes), dtype=np.uint8)
    for i, x in enumerate(addrs.tolist()):
        raw, off, _ = gm._must(x, nbytes)
        out[i] = raw[off:off + nbytes]
    return out


def test_global_loads_gather_as_the_per_lane_loop():
    gm, pa, a, pb, b = _memory()
    rng = np.random.default_rng(1)
    for nbytes in (1, 2, 4, 8, 16):
        for _ in range(20):
            addrs = (pa + rng.integers(0, 256 - nbytes, 32)).astype(np.uint64)
            got = gm.load(addrs, nbytes)
            assert got.shape == (32, nbytes) and got.dtype == np.uint8
            assert np.array_equal(got, _loop_load(gm, addrs, nbytes))
    mixed = np.array([pa + 4, pb + 8, pa], dtype=np.uint64)  # two tensors: the loop's way
    assert np.array_equal(gm.load(mixed, 4), _loop_load(gm, mixed, 4))
    with pytest.raises(IndexError, match=f"global address {pa + 300:#x} \\(4 bytes\\)"):
        gm.load(np.array([pa, pa + 300, pa + 400], dtype=np.uint64), 4)


def test_global_stores_scatter_as_the_per_lane_loop():
    rng = np.random.default_rng(2)
    for nbytes in (1, 4, 8):
        for overlap in (False, True):
            gm, pa, a, _, _ = _memory()
            ref_gm, ref_pa, ref_a, _, _ = _memory()
            offs = rng.permutation(256 // nbytes)[:32] * nbytes
            if overlap:  # lanes 3 and 9 write the same bytes: the later lane's value stays
                offs[9] = offs[3]
            data = rng.integers(0, 256, (32, nbytes), dtype=np.uint8)
            gm.store((pa + offs).astype(np.uint64), data)
            for i, x in enumerate((ref_pa + offs).tolist()):
                raw, off, _ = ref_gm._must(x, nbytes)
                raw[off:off + nbytes] = data[i]
            assert np.array_equal(a, ref_a)
    gm, pa, a, pb, b = _memory()
    before = a.copy()
    with pytest.raises(IndexError, match="outside every tensor"):
        gm.store(np.array([pa, pa + 1000], dtype=np.uint64), np.ones((2, 4), np.uint8))
    assert np.array_equal(a[4:], before[4:]) and (a[:4] == 1).all()  # lane 0 stored first


class _Inst:  # the fields _binary_fn and _by_constant read
    def __init__(self, opcode: str) -> None:
        self.opcode, self.parts = opcode, tuple(opcode.split("."))


@pytest.mark.parametrize("name", ["shl", "shr", "div", "rem"])
def test_integer_ops_by_an_immediate_match_the_general_form(name):
    from choreo_py.emu.isa_alu import _binary_fn, _by_constant
    from choreo_py.emu.lanes import NP
    from choreo_py.emu.operands import const

    rng = np.random.default_rng(3)
    tested = 0
    for t in ("u16", "s16", "b32", "u32", "s32", "u64", "s64", "b64"):
        dt = np.dtype(NP[t])
        info = np.iinfo(dt)
        edges = np.array([info.min, info.max, 0, -1 if dt.kind == "i" else 1, 7], dtype=dt)
        a = np.concatenate([edges, rng.integers(info.min, info.max, 27, dtype=dt, endpoint=True)])
        bits = dt.itemsize * 8
        bt = "u32" if name in ("shl", "shr") else t
        for k in (0, 1, 3, 7, bits - 1, bits, bits + 5, -1, -7, info.max):
            if k < 0 and (bt != t or dt.kind == "u"):
                continue
            inst = _Inst(f"{name}.{t}")
            c = const(k, bt)
            fast = _by_constant(inst, name, t, c)
            if fast is None:
                assert k == 0 and name in ("div", "rem")
                continue
            want = _binary_fn(name, inst, t)(a, c)
            got = fast(a)
            assert got.dtype == want.dtype and np.array_equal(got, want), (t, k)
            tested += 1
    assert tested >= 60


def test_one_lane_shared_index_matches_the_array_form():
    from types import SimpleNamespace

    from choreo_py.emu.isa_mem import _one_lane_index, _smem_index

    class Fault(Exception):
        pass

    def warp(lane, one):
        mask = np.zeros(32, dtype=bool)
        mask[lane] = True
        cta = SimpleNamespace(smem=np.zeros(1024 + 256, np.uint8), smem_base=1024)
        return SimpleNamespace(cta=cta, mask=mask, one=lane if one else -1, inst=None,
                               machine=SimpleNamespace(misuse=lambda msg, inst: Fault(msg)))

    def index(w, addrs, size):
        try:
            return _smem_index(w, addrs, size)
        except Fault as e:
            return str(e)

    rng = np.random.default_rng(4)
    checked = fallbacks = 0
    for x in [1024, 1028, 1030, 1279, 1276, 1272, 1023, 0, 2**63 - 2, 2**63, 2**64 - 4] + \
            list(rng.integers(900, 1400, 60)):
        for size in (1, 2, 4, 8, 16, 12):
            lane = int(rng.integers(0, 32))
            addrs = rng.integers(0, 2**64, 32, dtype=np.uint64)
            addrs[lane] = x
            fast, general = index(warp(lane, True), addrs, size), index(warp(lane, False), addrs, size)
            assert type(fast) is type(general)
            assert np.array_equal(fast, general) if isinstance(fast, np.ndarray) else fast == general
            fallbacks += _one_lane_index(warp(lane, True), addrs, size) is None
            checked += 1
    assert checked == 426 and 0 < fallbacks < checked
