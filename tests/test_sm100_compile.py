"""sm_100a backend on the CPU: golden pyptx, PTX and ptxas resources of the three
examples, determinism, the CLI, refusals, and the compiled seed's tensor-memory
addresses and descriptors against the independent math of descriptors.py and the
TMEM map the IR records (pass tmem-plan).

Regenerate the goldens after an intended change with `pytest --update-goldens`.
"""
from __future__ import annotations

import copy
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from choreo_py import ir, targets
from choreo_py.diagnostics import ChoreoError, InternalError
from choreo_py.driver import compile_file, ir_of_file
from choreo_py.lowering.sm100 import descriptors as d
from choreo_py.lowering.sm100.target import Sm100Target
from choreo_py.passes import tmem_plan
from choreo_py.runtime import build

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
GOLDEN = Path(__file__).resolve().parent / "golden" / "sm100"
KERNELS = ["flash_atten_causal", "flash_atten", "gemm"]
SM100 = targets.get("sm_100a")
needs_ptxas = pytest.mark.ptxas  # skipped without ptxas (conftest.py)


@pytest.fixture(scope="module")
def texts() -> dict:
    return {n: compile_file(str(EXAMPLES / f"{n}.co"), "pyptx", "sm_100a") for n in KERNELS}


@pytest.fixture(scope="module")
def ptxs(texts) -> dict:
    return {n: build.run_module(t).ptx() for n, t in texts.items()}


def _count(text: str, pattern: str) -> int:
    return len(re.findall(pattern, text))


# ---------------------------------------------------------------- goldens

#: the attention kernels' text holds ptxas's verdict on their .f32x2 pairs
#: (choreo_py/runtime/pairing.py): without ptxas they are lowered scalar
PROBED = [pytest.param(n, marks=needs_ptxas) if n.startswith("flash") else n for n in KERNELS]


@pytest.mark.parametrize("name", PROBED)
def test_pyptx_golden(name, texts, golden):
    golden(GOLDEN / f"{name}.pyptx", texts[name])


@pytest.mark.parametrize("name", PROBED)
def test_ptx_golden(name, ptxs, golden):
    golden(GOLDEN / f"{name}.ptx", ptxs[name])


def _resources(log: str, smem: int) -> str:
    keep = [line.split("ptxas info    : ")[-1].strip() for line in log.splitlines()
            if re.search(r"Used \d+ registers|spill|stack frame", line)]
    return "\n".join(keep + [f"dynamic shared memory: {smem} bytes"]) + "\n"


@needs_ptxas
@pytest.mark.parametrize("name", KERNELS)
def test_ptxas_resources_golden(name, texts, ptxs, golden):
    _, log = build.ptxas(ptxs[name], "sm_100a", verbose=True)
    summary = _resources(log, build.run_module(texts[name]).SMEM_BYTES)
    assert "0 bytes spill stores, 0 bytes spill loads" in summary
    assert "0 bytes stack frame" in summary
    golden(GOLDEN / f"{name}.resources.txt", summary)


@pytest.mark.parametrize("name", KERNELS)
def test_module_is_readable_pyptx(name, texts):
    text = texts[name]
    assert text.startswith(f'"""Kernel `{"gemm" if name == "gemm" else "flash_atten"}` of {name}.co')
    assert 'ARCH = "sm_100a"' in text
    assert re.search(rf"# {name}\.co:\d+: ", text)  # blocks name their Choreo line
    compile(text, f"{name}.py", "exec")


# ---------------------------------------------------------------- determinism and the CLI

def test_output_is_deterministic(texts, ptxs):
    again = compile_file(str(EXAMPLES / "flash_atten_causal.co"), "pyptx", "sm_100a")
    assert again == texts["flash_atten_causal"]
    assert build.run_module(again).ptx() == ptxs["flash_atten_causal"]


def _cli(*args, cwd=ROOT, env=None):
    return subprocess.run([sys.executable, "-m", "choreo_py", "compile", *args], cwd=cwd,
                          env=env, capture_output=True, text=True)


def test_cli_ptx_is_byte_identical_across_processes(tmp_path):
    outs = []
    for seed in ("1", "2"):
        out = tmp_path / f"seed{seed}.ptx"
        res = _cli("--emit", "ptx", str(EXAMPLES / "flash_atten_causal.co"), "-o", str(out),
                   env=dict(os.environ, PYTHONHASHSEED=seed))
        assert res.returncode == 0, res.stderr
        outs.append(out.read_bytes())
    assert outs[0] == outs[1] and b".target sm_100a" in outs[0]


def test_cli_default_target_writes_module_beside_source(tmp_path):
    src = tmp_path / "flash_atten.co"
    shutil.copy(EXAMPLES / "flash_atten.co", src)
    res = _cli(str(src))
    assert res.returncode == 0, res.stderr
    out = tmp_path / "flash_atten.sm100a.py"
    assert out.read_text().startswith('"""Kernel `flash_atten` of flash_atten.co, compiled by '
                                      'choreo-py for sm_100a.')
    res = _cli("--emit", "ptx", str(src))
    assert res.returncode == 0, res.stderr
    assert ".target sm_100a" in (tmp_path / "flash_atten.sm100a.ptx").read_text()


@needs_ptxas
def test_cli_emits_cubin(tmp_path):
    out = tmp_path / "gemm.cubin"
    res = _cli("--emit", "cubin", str(EXAMPLES / "gemm.co"), "-o", str(out))
    assert res.returncode == 0, res.stderr
    assert out.read_bytes()[:4] == b"\x7fELF"


# ---------------------------------------------------------------- the seed against the hand kernel

def test_seed_instruction_census(ptxs):
    ptx = ptxs["flash_atten_causal"]
    # QK (prologue, loop) and PV (loop, final): 4 groups of 8 k-steps, one commit each
    assert _count(ptx, r"tcgen05\.mma\.cta_group::1\.kind::f16 ") == 32
    assert _count(ptx, r"tcgen05\.commit\.cta_group::1\.mbarrier::arrive::one\.shared::cluster") == 4
    assert _count(ptx, r"kind::f16 \[%acc_o_tmem\], \[%acc_s_cast_tmem(\+\d+)?\]") == 16
    # TMEM traffic equals the hand kernel's: S in prologue and loop, O rescale and epilogue
    # loads; P twice and O once stored
    assert _count(ptx, r"tcgen05\.ld\.sync\.aligned\.16x32bx2\.x64\.b32") == 4
    assert _count(ptx, r"tcgen05\.st\.sync\.aligned\.16x32bx2\.x32\.b32 \[%acc_s_cast_rows\], 32,") == 2
    assert _count(ptx, r"tcgen05\.st\.sync\.aligned\.16x32bx2\.x64\.b32 \[%acc_o_rows\], 64,") == 1
    for op in ("alloc", "dealloc", "relinquish_alloc_permit"):
        assert _count(ptx, rf"tcgen05\.{op}\.cta_group::1") == 1
    # row max (prologue, loop) and the final row sum combine the pair (t, t ^ 16) only
    assert _count(ptx, r"shfl\.sync\.bfly\.b32 %\w+, %\w+, 16, 31, -1") == 3
    assert _count(ptx, r"shfl\.sync\.bfly\.b32 [^;]*, [12], 31, -1") == 0
    assert ptx.count("setmaxnreg.inc.sync.aligned.u32 232") == 1


def test_acc_s_never_goes_back_to_tmem(ptxs):
    # QK overwrites S each step; the mask and exp write the register copy only
    assert not re.search(r"tcgen05\.st\.[^;]*\[%acc_s_rows\]", ptxs["flash_atten_causal"])


# ---------------------------------------------------------------- descriptors and TMEM addresses

@pytest.fixture(scope="module")
def seed_plan():
    return ir_of_file(str(EXAMPLES / "flash_atten_causal.co")).functions[0].kernels[0].tmem


def test_instruction_descriptors_in_ptx(ptxs):
    ptx = ptxs["flash_atten_causal"]
    qk = d.instr_desc_f16(64, 128, a_major="K", b_major="K")
    pv = d.instr_desc_f16(64, 128, a_major="K", b_major="MN", a_in_tmem=True)
    assert (qk, pv) == (0x04200490, 0x04210490)
    assert f"mov.b32 %idesc_{qk:08x}, {qk};" in ptx
    assert f"mov.b32 %idesc_{pv:08x}, {pv};" in ptx
    assert re.search(rf"kind::f16 \[%acc_s_tmem\], [^;]*%idesc_{qk:08x}", ptx)
    assert re.search(rf"kind::f16 \[%acc_o_tmem\], [^;]*%idesc_{pv:08x}", ptx)


def test_shared_memory_descriptors_in_ptx(ptxs):
    ptx = ptxs["flash_atten_causal"]
    kmajor, vdesc = d.kmajor_sw128_const(), d.mnmajor_sw128_const(128 * 128)
    assert (kmajor, vdesc) == (0x4000404000010000, 0x4000404004000000)
    # Q and K (prologue; the loop's ring base), V (loop; final)
    assert re.search(rf"or\.b64 %q_shared_desc, %q_shared_desc, {kmajor};", ptx)
    assert _count(ptx, rf"or\.b64 %k_buf_desc\w*, %k_buf_desc\w*, {kmajor};") == 2
    assert _count(ptx, rf"or\.b64 %v_buf_desc\w*, %v_buf_desc\w*, {vdesc};") == 2
    # k-steps move the start field by the ISA offsets (>> 4)
    ksteps = [d.kmajor_sw128_kstep(kk, rows=128) >> 4 for kk in range(1, 8)]
    assert ksteps == [2, 4, 6, 1024, 1026, 1028, 1030]
    for step in ksteps:
        assert re.search(rf"add\.s64 %desc_k\w*, %k_buf_desc, {step};", ptx)
        assert re.search(rf"add\.s64 %desc_k\w*, %q_shared_desc, {step};", ptx)
    for kk in range(1, 8):
        assert re.search(rf"add\.s64 %desc_k\w*, %v_buf_desc\w*, {d.mnmajor_sw128_kstep(kk) >> 4};",
                         ptx)


def test_tmem_offsets_in_ptx(ptxs, seed_plan):
    ptx = ptxs["flash_atten_causal"]
    assert f"[%smem_base+{_tmem_slot()}], {seed_plan.alloc};" in ptx
    # S: consumer 1 one lane half (16 lanes) on; O and P (the P@V operands in TMEM):
    # lane 0, their own columns per consumer.
    steps = {"acc_s": 16 << 16, "acc_o": 128, "acc_s_cast": 64}
    for frag, step in steps.items():
        assert _offset(seed_plan, frag, 1) - _offset(seed_plan, frag, 0) == step
        assert f"mad.lo.u32 %{frag}_tmem, %mma_instance, {step}, %tmem;" in ptx
        col = seed_plan.region(frag, 0).col
        if col:
            assert f"add.u32 %{frag}_tmem, %{frag}_tmem, {col};" in ptx
    # P@V k-step kk reads A 16 bf16 = 8 packed columns further
    for kk in range(1, 8):
        assert f"[%acc_s_cast_tmem+{8 * kk}]" in ptx


def _offset(plan: ir.TmemMap, frag: str, inst: int) -> int:
    r = plan.region(frag, inst)
    return d.tmem_addr(r.lane, r.col)


def _tmem_slot() -> int:
    k = ir_of_file(str(EXAMPLES / "flash_atten_causal.co")).functions[0].kernels[0]
    t = Sm100Target(SM100)
    t.prepare(k)
    return t.slot


_OPS = {"and": lambda a, b: a & b, "or": lambda a, b: a | b, "xor": lambda a, b: a ^ b,
        "shl": lambda a, b: a << b, "shr": lambda a, b: a >> b, "add": lambda a, b: a + b,
        "sub": lambda a, b: a - b, "mul": lambda a, b: a * b}


def _thread_values(ptx: str, tid: int, names: set) -> dict:
    """Integer registers of straight-line PTX for one thread (%tmem = 0: addresses come out
    relative to the allocation). Instructions on unknown inputs leave their output unknown."""
    regs: dict = {"%tid.x": tid}

    def val(x):
        x = x.strip()
        if re.fullmatch(r"-?\d+", x):
            return int(x)
        return regs.get(x)
    for m in re.finditer(r"^\s*(\w+)((?:\.\w+)*) (%\w+), ([^;]*);", ptx, re.M):
        op, mods, dst, args = m.group(1), m.group(2), m.group(3), m.group(4).split(",")
        if op == "ld" and mods == ".shared.b32" and dst.startswith("%tmem"):
            regs[dst] = 0
            continue
        vals = [val(a) for a in args]
        if None in vals:
            regs.pop(dst, None)
            continue
        if op == "mov" and len(vals) == 1:
            regs[dst] = vals[0]
        elif op == "mad" and len(vals) == 3:
            regs[dst] = (vals[0] * vals[1] + vals[2]) & 0xFFFFFFFF
        elif op in _OPS and len(vals) == 2:
            regs[dst] = _OPS[op](*vals) & 0xFFFFFFFF
        else:
            regs.pop(dst, None)
    return {n: regs.get(n) for n in names}


def test_thread_tmem_addresses_match_plan_and_layout(ptxs, seed_plan):
    """Every consumer thread's tcgen05.ld/st address and (row, column) base, evaluated from
    the PTX, against the TMEM map's regions and the .16x32bx2 thread map of descriptors.py."""
    ptx = ptxs["flash_atten_causal"]
    names = {"%acc_s_rows", "%acc_o_rows", "%acc_s_cast_rows", "%row_base", "%col_base",
             "%acc_s_tmem"}
    for tid in range(128, 384):
        got = _thread_values(ptx, tid, names)
        inst, local = tid // 128 - 1, tid % 128
        warp, lane = local // 32, local % 32
        for frag in ("acc_s", "acc_o", "acc_s_cast"):
            r = seed_plan.region(frag, inst)
            assert got[f"%{frag}_rows"] == d.ld_base_addr(64, warp, r.lane, r.col)
        assert got["%acc_s_tmem"] == _offset(seed_plan, "acc_s", inst)
        frag = d.thread_fragment(64, 128, warp, lane, acc_rows=SM100.acc_rows)
        assert (got["%row_base"], got["%col_base"], 64) == (frag.row, frag.col_start, frag.ncols)
        # the row is shared with lane ^ 16 only: the layout's row_lanes
        assert d.thread_fragment(64, 128, warp, lane ^ 16, acc_rows=SM100.acc_rows).row == frag.row


def test_acc_layout_is_the_tcgen05_ld_map():
    t = Sm100Target(SM100)
    lay = t.acc_layout(ir.Frag("x", "f32", (64, 128), "acc"), None)
    assert lay.row_lanes == (16,) and lay.regs == 64 and set(lay.row_off) == {0}
    assert lay.col_off == tuple(range(64)) and lay.col_base_max == 64
    lay = t.acc_layout(ir.Frag("x", "f32", (128, 64), "acc"), None)
    assert lay.row_lanes == () and lay.regs == 64 and lay.col_base_max == 0


# ---------------------------------------------------------------- refusals

def _seed_module():
    return ir_of_file(str(EXAMPLES / "flash_atten_causal.co"))


def _replanned(m):
    """`m` after an edit of its IR: the TMEM map planned again."""
    k = m.functions[0].kernels[0]
    k.tmem = None
    tmem_plan.run(k, targets.get("sm_100a"))
    return m


def test_tmem_oversubscription_names_the_accumulators():
    m = _seed_module()
    k = m.functions[0].kernels[0]
    for name in ("acc_s", "acc_o", "acc_s_cast"):
        k.frag(name).shape = (64, 256)
    with pytest.raises(ChoreoError) as e:
        _replanned(m)
    msg = e.value.message
    assert "over-subscribed" in msg and "1024 columns" in msg
    for part in ("acc_s[0]", "acc_o[1]", "acc_s_cast[1]"):
        assert part in msg


def test_operand_outside_tmem_is_refused_by_name():
    m = _seed_module()
    for s in ir.walk(m.functions[0].kernels[0].body):
        if getattr(s, "a", None) == "acc_s_cast":
            s.layout = "col.col"  # A not K-major: tcgen05 cannot read it from TMEM
    with pytest.raises(ChoreoError) as e:
        build.pyptx_text(_replanned(m), "flash_atten_causal.co", "sm_100a")
    assert "'acc_s_cast'" in e.value.message and "K-major" in e.value.message
    assert e.value.loc is not None and e.value.loc.line == 79  # its declaration


def test_cli_refusal_names_statement_and_place(tmp_path):
    # a dma.copy inside a role of an MMA kernel (thread kernels such as softmax.co lower it;
    # at block level, passes/sync_copies.py makes it a TMA load)
    src = (EXAMPLES / "gemm.co").read_text().replace(
        "        call croq::cuda::setreg_dec(40);\n",
        "        call croq::cuda::setreg_dec(40);\n"
        "        dma.copy C.subspan(BM, BN).at(tm, tn) => c_buf;\n")
    path = tmp_path / "gemm_dma.co"
    path.write_text(src)
    res = _cli(str(path), "-o", "-")
    assert res.returncode == 1
    assert re.search(r"gemm_dma\.co:26:9: error: dma\.copy is not lowered for sm_100a yet",
                     res.stderr)


def test_kernel_without_mma_has_no_tensor_memory():
    k = copy.deepcopy(_seed_module().functions[0].kernels[0])
    k.body = []
    with pytest.raises(ChoreoError, match="no role of members"):  # the map is stale now
        Sm100Target(SM100).prepare(k)
    k.tmem = None  # what the pass tmem-plan leaves a kernel without MMAs: no map
    t = Sm100Target(SM100)
    assert t.prepare(k) is k and k.tmem is None and not t.uses_tmem


def test_the_backend_reads_the_tmem_plan_and_never_makes_one():
    """The map is the pass's decision: a kernel with MMAs and no map is IR that skipped the
    pass pipeline, an internal error rather than a plan of the backend's own."""
    k = copy.deepcopy(_seed_module().functions[0].kernels[0])
    k.tmem = None
    with pytest.raises(InternalError, match="no tensor-memory map .*tmem-plan"):
        Sm100Target(SM100).prepare(k)
    assert k.tmem is None


# ---------------------------------------------------------------- other shapes

@pytest.mark.parametrize("example,old,new,m,n_pv,shape", [
    # head dim 64: O is [64, 64] while S and P are [64, 128]; TMEM S 0-127, O 128-191, P 192-255
    ("flash_atten.co", "#define DIM 128", "#define DIM 64", 64, 64, "16x32bx2"),
    # one 128-row consumer: layout D, a thread owns a row
    ("flash_atten_causal.co", "#define WG_M 64", "#define WG_M 128", 128, 128, "32x32b"),
    ("gemm.co", "#define WG_M 64", "#define WG_M 128", 128, None, "32x32b"),
])
def test_variant_shapes(tmp_path, example, old, new, m, n_pv, shape):
    src = (EXAMPLES / example).read_text()
    assert old in src
    path = tmp_path / example
    path.write_text(src.replace(old, new))
    ptx = compile_file(str(path), "ptx", "sm_100a")
    qk = d.instr_desc_f16(m, 128)
    assert f"mov.b32 %idesc_{qk:08x}, {qk};" in ptx
    if n_pv:
        pv = d.instr_desc_f16(m, n_pv, b_major="MN", a_in_tmem=True)
        assert f"mov.b32 %idesc_{pv:08x}, {pv};" in ptx
    assert re.search(rf"tcgen05\.ld\.sync\.aligned\.{shape}\.", ptx)
    if build.find_ptxas() is None:
        pytest.skip("ptxas not on PATH: the spill check did not run")
    _, log = build.ptxas(ptx, "sm_100a", verbose=True)
    assert "0 bytes spill stores, 0 bytes spill loads" in log
