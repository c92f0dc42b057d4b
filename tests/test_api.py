"""The Python API as a kernel author uses it: choreo_py.ChoreoError (located), load()
with .ptx / .pyptx_source / .resources, the on-disk kernel cache, the torch custom
operator (torch.compile on CPU tensors runs the interpreter)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import choreo_py
from choreo_py.runtime import cache

torch = pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parent.parent
GEMM = str(ROOT / "examples" / "gemm.co")
needs_ptxas = pytest.mark.ptxas


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.delenv("CHOREO_PY_NO_CACHE", raising=False)
    monkeypatch.setenv("CHOREO_PY_CACHE_DIR", str(tmp_path / "kernels"))
    return tmp_path / "kernels"


def test_choreo_error_is_exported_and_located(tmp_path):
    bad = tmp_path / "bad.co"
    bad.write_text("__co__ void f(global f32[N] X) {\n  s2 = 3;\n}\n")
    with pytest.raises(choreo_py.ChoreoError) as info:
        choreo_py.load(str(bad), target="sm_90a")
    err = info.value
    assert (err.file, err.line, err.col) == (str(bad), 2, 3)
    assert str(err).splitlines() == [
        f"{bad}:2:3: error: {err.message}", "  s2 = 3;", "  ^"]
    assert err.message.startswith("'s2' is a type name")


def test_load_gives_the_generated_code(cache_dir):
    k = choreo_py.load(GEMM, target="sm_90a")
    assert k.pyptx_source.startswith('"""') and "ENTRY = \"gemm\"" in k.pyptx_source
    assert ".entry gemm(" in k.ptx and ".target sm_90a" in k.ptx
    assert k.writes == ("C",)



def test_a_one_kernel_file_reaches_its_function_by_name_as_a_library_does(cache_dir):
    k = choreo_py.load(GEMM, target="sm_90a")
    assert k["gemm"] is k and k.gemm is k
    with pytest.raises(KeyError, match="gemm.co has one __co__ function, 'gemm', and no 'gem'"):
        k["gem"]
    with pytest.raises(AttributeError):
        k.gem

@needs_ptxas
@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_resources_come_from_ptxas(cache_dir, target):
    r = choreo_py.load(GEMM, target=target).resources
    assert 24 <= r.registers <= 255 and r.spills == 0
    assert r.dynamic_smem >= 2 * 4 * 128 * 64  # the A and B rings of the GEMM, bf16
    assert r.shared_bytes == r.static_smem + r.dynamic_smem


@needs_ptxas
def test_second_load_is_served_from_the_cache(cache_dir):
    first = choreo_py.load(GEMM, target="sm_90a")
    assert not first.from_cache
    cubin = first.cubin()
    second = choreo_py.load(GEMM, target="sm_90a")
    assert second.from_cache and second.pyptx_source == first.pyptx_source
    assert second.cubin() == cubin and second.resources == first.resources
    entries = [p for p in cache_dir.glob("*/*") if p.parent.name != "versions"]
    assert len(entries) == 1
    assert sorted(p.name for p in entries[0].iterdir()) == [
        "kernel.cubin", "kernel.ptx", "kernel.pyptx.py", "outputs.txt", "ptxas.log"]


_LOAD_IN_A_NEW_PROCESS = (
    "import sys, choreo_py\n"
    "k = choreo_py.load(sys.argv[1], target='sm_90a')\n"
    "k.cubin()\n"
    "print(k.from_cache)\n")


@needs_ptxas
def test_second_load_in_a_new_process_is_served_from_the_cache(cache_dir):
    """What bench/compile.py --cache times: the cache outlives the process that filled it."""
    env = dict(os.environ, CHOREO_PY_CACHE_DIR=str(cache_dir))
    env.pop("CHOREO_PY_NO_CACHE", None)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    seen = [subprocess.run([sys.executable, "-c", _LOAD_IN_A_NEW_PROCESS, GEMM], cwd=ROOT,
                           env=env, capture_output=True, text=True, check=True).stdout.split()
            for _ in range(2)]
    assert seen == [["False"], ["True"]]


def test_the_key_covers_defines_target_and_source(cache_dir, tmp_path):
    src = tmp_path / "g.co"
    src.write_text(Path(GEMM).read_text())
    base = choreo_py.load(str(src), target="sm_90a")
    assert not base.from_cache
    assert choreo_py.load(str(src), target="sm_90a").from_cache
    assert not choreo_py.load(str(src), target="sm_100a").from_cache
    assert not choreo_py.load(str(src), target="sm_90a", defines={"UNUSED": "3"}).from_cache
    moved = tmp_path / "elsewhere" / "g.co"  # the same file in another folder: the same kernel
    moved.parent.mkdir()
    moved.write_text(src.read_text())
    assert choreo_py.load(str(moved), target="sm_90a").from_cache
    src.write_text(src.read_text().replace("#define BK 64", "#define BK 32"))
    assert not choreo_py.load(str(src), target="sm_90a").from_cache


def test_the_cache_can_be_turned_off(cache_dir, monkeypatch):
    monkeypatch.setenv("CHOREO_PY_NO_CACHE", "1")
    assert not choreo_py.load(GEMM, target="sm_90a").from_cache
    assert not choreo_py.load(GEMM, target="sm_90a").from_cache
    assert not cache_dir.exists()


def test_a_new_process_reads_the_cache(cache_dir):
    code = ("import choreo_py; k = choreo_py.load(%r, target='sm_90a'); k.ptx; "
            "print(k.from_cache)" % GEMM)
    env = dict(os.environ, CHOREO_PY_CACHE_DIR=str(cache_dir))
    runs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           env=env, check=True).stdout.strip() for _ in range(2)]
    assert runs == ["False", "True"]


@needs_ptxas
def test_a_cache_hit_parses_nothing_and_imports_no_pyptx(cache_dir, monkeypatch):
    # A load served from the cache reads the launch description and the cubin: it neither
    # parses the program nor imports pyptx nor compiles the kernel function (the bulk of the
    # generated module), and still gives the same PTX on demand.
    code = ("import sys, choreo_py; k = choreo_py.load(%r, target='sm_90a'); k.cubin(); "
            "print(k.from_cache, 'pyptx' in sys.modules, 'torch' in sys.modules, "
            "k.meta.THREADS); k.ptx; print('pyptx' in sys.modules)" % GEMM)
    env = dict(os.environ, CHOREO_PY_CACHE_DIR=str(cache_dir))
    subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, check=True).stdout.split("\n")
    assert out[:2] == ["True False False 384", "False"], out  # k.ptx: read from the cache
    from choreo_py import frontend

    def no_parse(*a, **k):
        raise AssertionError("a cache hit parsed the program")

    monkeypatch.setattr(frontend, "parse_unit", no_parse)
    cached = choreo_py.load(GEMM, target="sm_90a")
    assert cached.from_cache and cached.ptx == cached.meta.ptx()


def test_the_compiler_version_is_kept_under_a_fingerprint(cache_dir, monkeypatch):
    cache.compiler_version.cache_clear()
    first = cache.compiler_version()
    stamps = list((cache_dir / "versions").iterdir())
    assert len(stamps) == 1 and stamps[0].read_text() == first
    cache.compiler_version.cache_clear()
    stamps[0].write_text("stamped")          # read back, not recomputed, while stats hold
    assert cache.compiler_version() == "stamped"
    cache.compiler_version.cache_clear()
    monkeypatch.setattr(cache, "_fingerprint", lambda: "changed-sources")
    assert cache.compiler_version() == first  # a changed file: computed again
    cache.compiler_version.cache_clear()


def test_the_kernel_is_a_torch_custom_op(cache_dir):
    k = choreo_py.load(GEMM, target="sm_90a")
    op = k.op
    assert op is choreo_py.load(GEMM, target="sm_90a").op
    assert str(op.default._schema).endswith("(Tensor A, Tensor B, Tensor(a2!) C) -> ()")
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():  # the fake implementation: shapes only, no launch
        a, b = torch.empty(256, 64, dtype=torch.bfloat16), torch.empty(128, 64, dtype=torch.bfloat16)
        op(a, b, torch.empty(256, 128, dtype=torch.bfloat16))


def test_torch_compile_traces_through_the_op_on_cpu(cache_dir):
    """On CPU tensors the operator runs the interpreter; torch.compile (aot_eager: the
    functionalisation of the mutation, without inductor's slow C++ build) gives eager's
    result and stays one graph."""
    k = choreo_py.load(GEMM, target="sm_90a")
    g = torch.Generator().manual_seed(0)
    a = torch.randn(128, 64, generator=g).bfloat16()
    b = torch.randn(128, 64, generator=g).bfloat16()

    def step(a, b):
        c = torch.empty(a.shape[0], b.shape[0], dtype=torch.bfloat16)
        k.op(a, b, c)
        return torch.relu(c.float()) * 2

    eager = step(a, b)
    ref = torch.relu(a.float() @ b.float().T) * 2
    assert ((eager - ref).norm() / ref.norm()) < 1e-2
    torch._dynamo.reset()
    compiled = torch.compile(step, backend="aot_eager", fullgraph=True)(a, b)
    assert torch.equal(compiled, eager)


def test_a_define_the_file_overrides_is_a_python_warning(cache_dir):
    from choreo_py.interp import ChoreoWarning

    with pytest.warns(ChoreoWarning, match=r"gemm.co:6:9: warning: 'WG_M' redefined: this "
                                           r"#define overrides -D WG_M=32"):
        choreo_py.load(GEMM, target="sm_90a", defines={"WG_M": "32"})
