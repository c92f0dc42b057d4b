"""sm_90a backend on the CPU: generated pyptx (golden), ptxas resources (golden),
determinism, the CLI's --emit pyptx|ptx|cubin, and refusals by name and place.

Regenerate the goldens after an intended change with `pytest --update-goldens`.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from choreo_py.driver import compile_file
from choreo_py.runtime import build

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
GOLDEN = Path(__file__).resolve().parent / "golden" / "sm90"
KERNELS = ["flash_atten_causal", "flash_atten", "gemm", "flash_atten_persistent"]
needs_ptxas = pytest.mark.ptxas  # skipped without ptxas (conftest.py)


def _pyptx(name: str) -> str:
    return compile_file(str(EXAMPLES / f"{name}.co"), "pyptx", "sm_90a")


@pytest.fixture(scope="module")
def texts() -> dict:
    return {n: _pyptx(n) for n in KERNELS}


@pytest.mark.parametrize("name", KERNELS)
def test_pyptx_golden(name, texts, golden):
    golden(GOLDEN / f"{name}.pyptx", texts[name])


@pytest.mark.parametrize("name", KERNELS)
def test_module_is_readable_pyptx(name, texts):
    text = texts[name]
    assert text.startswith('"""Kernel `')
    assert "from pyptx import kernel, ptx, reg" in text
    # every statement block names its Choreo source line
    assert re.search(rf"# {name}\.co:\d+: ", text)
    compile(text, f"{name}.pyptx", "exec")


def _resources(ptxas_log: str, smem: int) -> str:
    keep = [line.split("ptxas info    : ")[-1].strip() for line in ptxas_log.splitlines()
            if re.search(r"Used \d+ registers|spill|stack frame", line)]
    return "\n".join(keep + [f"dynamic shared memory: {smem} bytes"]) + "\n"


@needs_ptxas
@pytest.mark.parametrize("name", KERNELS)
def test_ptxas_resources_golden(name, texts, golden):
    loaded = build.run_module(texts[name])
    _, log = build.ptxas(loaded.ptx(), "sm_90a", verbose=True)
    summary = _resources(log, loaded.SMEM_BYTES)
    assert "0 bytes spill stores, 0 bytes spill loads" in summary
    golden(GOLDEN / f"{name}.ptxas.txt", summary)


@needs_ptxas
def test_seed_has_no_spills_and_warpgroup_roles(texts):
    loaded = build.run_module(texts["flash_atten_causal"])
    ptx = loaded.ptx()
    assert ptx.count("setmaxnreg.dec.sync.aligned.u32 40") == 1
    assert ptx.count("setmaxnreg.inc.sync.aligned.u32 232") == 1
    assert ".maxntid 384, 1, 1" in ptx and ".minnctapersm 1" in ptx
    # QK (SS form, 8 k-steps) in the prologue and the loop; PV (RS form) in the loop and after it
    assert ptx.count("wgmma.mma_async") == 32
    assert "wgmma.wait_group.sync.aligned 1;" in ptx
    _, log = build.ptxas(ptx, "sm_90a", verbose=True)
    assert "0 bytes spill stores, 0 bytes spill loads" in log
    assert "C75" not in log  # no setmaxnreg / wgmma-serialisation warnings


@needs_ptxas
def test_persistent_kernel_loops_over_tiles_without_spills(texts):
    loaded = build.run_module(texts["flash_atten_persistent"])
    assert loaded.grid(B=8, Q_SEQ=1024, H=16, KV_SEQ=1024) == (132, 1, 1)
    ptx = loaded.ptx()
    assert ptx.count("setmaxnreg.dec.sync.aligned.u32 40") == 1
    assert ptx.count("setmaxnreg.inc.sync.aligned.u32 232") == 1
    # the seed's 32 wgmmas, once, inside the loops over items and tiles
    assert ptx.count("wgmma.mma_async") == 32
    # Q is a ring of one slot now: the producer waits for the consumers' release
    assert ptx.count("mbarrier.init.shared::cta.b64") == 10
    # the O tile is free once the store has read it; nothing of the kernel reads O
    assert ptx.count("cp.async.bulk.wait_group.read 0;") == 1
    assert "cp.async.bulk.wait_group 0;" not in ptx
    # one exit per role, after its loops
    assert ptx.count("ret;") == 2
    _, log = build.ptxas(ptx, "sm_90a", verbose=True)
    assert "0 bytes spill stores, 0 bytes spill loads" in log
    assert "C75" not in log

def test_lowering_is_deterministic(texts):
    assert _pyptx("flash_atten_causal") == texts["flash_atten_causal"]
    a = build.run_module(texts["gemm"]).ptx()
    b = build.run_module(texts["gemm"]).ptx()
    assert a == b


def test_cli_output_is_byte_identical_across_processes(tmp_path):
    outs = []
    for seed in ("1", "2"):
        out = tmp_path / f"seed{seed}.ptx"
        env = dict(os.environ, PYTHONHASHSEED=seed)
        subprocess.run([sys.executable, "-m", "choreo_py", "compile", "--target", "sm_90a",
                        "--emit", "ptx", str(EXAMPLES / "flash_atten_causal.co"), "-o", str(out)],
                       check=True, env=env, cwd=ROOT)
        outs.append(out.read_bytes())
    assert outs[0] == outs[1] and outs[0].startswith(b".version")


@needs_ptxas
def test_cli_emits_cubin(tmp_path):
    out = tmp_path / "gemm.cubin"
    subprocess.run([sys.executable, "-m", "choreo_py", "compile", "--target", "sm_90a",
                    "--emit", "cubin", str(EXAMPLES / "gemm.co"), "-o", str(out)],
                   check=True, cwd=ROOT)
    assert out.read_bytes()[:4] == b"\x7fELF"


def test_cli_writes_pyptx(tmp_path):
    out = tmp_path / "fa.py"
    res = subprocess.run([sys.executable, "-m", "choreo_py", "compile", "--target", "sm_90a",
                          "--emit", "pyptx", str(EXAMPLES / "flash_atten.co"), "-o", str(out)],
                         cwd=ROOT, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert out.read_text().startswith('"""Kernel `flash_atten` of flash_atten.co')



PRODUCER_STORE = ROOT / "bench" / "variants" / "flash_atten_persistent_producer_store.co"


def test_issue_only_role_stores_and_published_thread_writes_are_fenced():
    text = compile_file(str(PRODUCER_STORE), "pyptx", "sm_90a")
    start = text.index("inthreads.async (p == 0)")
    producer = text[start:text.index("inthreads.async (p > 0)", start)]
    # the producer role stays issue-only (one thread) with its TMA store
    assert "issue-only role" in producer
    assert "global_.shared__cta.bulk_group" in producer
    # the consumers publish o_buf with an event: every writer fences its stores into
    # the async proxy, the instance meets, one thread arrives
    consumer = text[text.index("inthreads.async (p > 0)", start):]
    tail = consumer[consumer.index("trigger of.at(o_order++)"):][:700]
    assert tail.index("ptx.fence.proxy_async_shared_cta()") < tail.index("ptx.bar.sync(inst_bar") \
        < tail.index("ptx.mbarrier.arrive(")


@needs_ptxas
def test_producer_store_variant_assembles_without_spills():
    loaded = build.run_module(compile_file(str(PRODUCER_STORE), "pyptx", "sm_90a"))
    _, log = build.ptxas(loaded.ptx(), "sm_90a", verbose=True)
    assert "0 bytes spill stores, 0 bytes spill loads" in log
