"""Element reads under a condition run only where the condition holds; a read out of bounds
is reported at the read.

An `if` inside `apply` is if-converted (its stores are `selp`), and so are the arms of `?:`
and the right sides of `&&` / `||`: their values are computed on every path, so each element
read among them is a load predicated by its condition (Lowering.element_load), never an
unconditional load whose value a `selp` drops (gemm_bias_guarded_read.co read BIAS past its
end on the last partial N tile). The interpreter reads only the points a condition selects;
an unguarded read out of bounds is located at the read's own line:col, by the interpreter and
by the emulator (which names the PTX instruction, the thread and the block).

tests/co: gemm_bias_guarded_read.co (the guarded bias of the repro), gemm_bias_oob_location.co
(the same without the guard), guarded_apply_forms.co (if/else, nested ifs, a let, `?:`, `&&`,
`||` in an apply over the accumulator), guarded_thread_reads.co (`?:`, `&&`, `||` in per-thread
code; -D NOGUARD reads past the end), global_oob_runtime.co (a thread kernel reading a.at(t + k)
for a run-time k).
"""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import choreo_py
from choreo_py.driver import compile_file
from choreo_py.emu.report import MemoryFault
from choreo_py.runtime.build import find_ptxas, ptxas

CO = Path(__file__).resolve().parent / "co"
GUARDED = str(CO / "gemm_bias_guarded_read.co")
UNGUARDED = str(CO / "gemm_bias_oob_location.co")
FORMS = str(CO / "guarded_apply_forms.co")
THREADS = str(CO / "guarded_thread_reads.co")
RUNTIME_OOB = str(CO / "global_oob_runtime.co")
TARGETS = ["sm_90a", "sm_100a"]
M, N, K = 200, 136, 100  # a partial last tile in M and in N


def _gemm_inputs(seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    return {"A": torch.randn(M, K, generator=gen).bfloat16(),
            "B": torch.randn(N, K, generator=gen).bfloat16(),
            "BIAS": (2 * torch.randn(N, generator=gen)).bfloat16(),
            "C": torch.zeros(M, N, dtype=torch.bfloat16)}


def _silu_ref(t):
    return F.silu(t["A"].float() @ t["B"].float().T + t["BIAS"].float())


def _forms_ref(t):
    """guarded_apply_forms.co's epilogue, column n of N."""
    x = t["A"].float() @ t["B"].float().T
    b = t["BIAS"].float()
    x = x + b.abs()
    x[:, :-1] += b[1:]                                  # n + 1 < N ? ... + BIAS[n + 1]
    x[:, 1:] += (b[:-1] > 1.0).float()                  # n >= 1 && BIAS[n - 1] > 1
    return torch.where(b < -1.0, x * 0.5, x)            # n >= N || BIAS[n] < -1


def _close(got, want, tol=2e-2) -> bool:
    return float((got.float() - want).norm() / want.norm()) < tol


def _thread_ref(x):
    n = x.numel()
    right = torch.cat([x[1:], torch.zeros(1)])
    left = torch.cat([torch.zeros(1), x[:-1]])
    first = torch.arange(n) == 0
    up = ((~first) & (left > 0)).float()
    down = (first | (left < 0)).float() * 2
    return right + up + down


def _global_loads(ptx: str) -> list[str]:
    return [ln.strip() for ln in ptx.splitlines() if re.search(r"\bld\.global\.", ln)]


# ---------------------------------------------------------------- the PTX

@pytest.mark.parametrize("target", TARGETS)
def test_the_guarded_bias_load_is_predicated_by_its_guard(target):
    ptx = compile_file(GUARDED, "ptx", target)
    loads = _global_loads(ptx)
    assert loads and all(ln.startswith("@%q") for ln in loads), loads[:4]
    guards = {ln.split()[0][1:] for ln in loads}
    selps = set(re.findall(r"selp\.f32 %acc\d+, %\w+, %acc\d+, (%\w+);", ptx))
    assert guards <= selps  # each load stands under the predicate of the store it feeds
    if find_ptxas() is None:
        pytest.skip("ptxas (CUDA 12.8+) is not on PATH")
    _, report = ptxas(ptx, target, verbose=True)
    assert "0 bytes spill stores" in report, report


@pytest.mark.parametrize("target", TARGETS)
def test_an_unguarded_read_stays_a_plain_load(target):
    loads = _global_loads(compile_file(UNGUARDED, "ptx", target))
    assert loads and not any(ln.startswith("@") for ln in loads)


@pytest.mark.parametrize("target", TARGETS)
def test_every_guarded_form_in_apply_predicates_its_loads(target):
    ptx = compile_file(FORMS, "ptx", target)
    loads = _global_loads(ptx)
    assert loads and all(ln.startswith("@%") for ln in loads), \
        [ln for ln in loads if not ln.startswith("@")][:4]
    if find_ptxas() is None:
        pytest.skip("ptxas (CUDA 12.8+) is not on PATH")
    ptxas(ptx, target)


@pytest.mark.parametrize("target", TARGETS)
def test_lazy_operands_in_thread_code_predicate_their_loads(target):
    ptx = compile_file(THREADS, "ptx", target)
    loads = _global_loads(ptx)
    assert len(loads) == 3 and all(ln.startswith("@%") for ln in loads), loads
    if find_ptxas() is None:
        pytest.skip("ptxas (CUDA 12.8+) is not on PATH")
    ptxas(ptx, target)


def test_the_pyptx_module_names_each_access():
    text = compile_file(RUNTIME_OOB, "pyptx", "sm_90a")
    assert re.search(r"ptx\.inst\.ld\.global_\.f32\(.*\)  # at global_oob_runtime\.co:6:17$",
                     text, re.M)
    assert re.search(r"ptx\.inst\.st\.global_\.f32\(.*\)  # at global_oob_runtime\.co:6:7$",
                     text, re.M)


# ---------------------------------------------------------------- the interpreter

@pytest.mark.parametrize("target", TARGETS)  # owners 4 and 1
def test_the_interpreter_reads_the_guarded_bias_only_in_bounds(target):
    t = _gemm_inputs()
    choreo_py.interpret(GUARDED, t, target=target)
    assert _close(t["C"], _silu_ref(t))


@pytest.mark.parametrize("target", TARGETS)
def test_the_interpreter_runs_every_guarded_form(target):
    t = _gemm_inputs(1)
    choreo_py.interpret(FORMS, t, target=target)
    assert _close(t["C"], _forms_ref(t))


def test_the_interpreter_locates_an_unguarded_read_at_the_read():
    with pytest.raises(choreo_py.interp.InterpError) as info:
        choreo_py.interpret(UNGUARDED, _gemm_inputs(), target="sm_90a")
    assert info.value.message == "index 136 outside extent 136 of view BIAS[0:136]"
    assert (info.value.loc.line, info.value.loc.col) == (54, 51)


def test_thread_code_reads_lazy_operands_only_where_taken():
    x = torch.randn(100)
    y = torch.full_like(x, float("nan"))
    choreo_py.interpret(THREADS, {"X": x, "Y": y})
    assert torch.equal(y, _thread_ref(x))


def test_thread_code_locates_an_unguarded_read_at_the_read():
    with pytest.raises(choreo_py.interp.InterpError) as info:
        choreo_py.interpret(THREADS, {"X": torch.randn(100), "Y": torch.zeros(100)},
                            defines={"NOGUARD": "1"})
    assert "outside extent 100" in info.value.message
    assert (info.value.loc.line, info.value.loc.col) == (12, 19)


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "choreo_py", *args], capture_output=True,
                          text=True, timeout=600)


def test_run_reports_the_read_with_its_source_line_and_caret():
    res = _cli("run", UNGUARDED, "--target", "sm_90a", "--shape", f"M={M},N={N},K={K}")
    assert res.returncode == 1, res.stderr
    head, line, caret = res.stderr.strip().splitlines()[:3]
    assert head.endswith("gemm_bias_oob_location.co:54:51: error: index 136 outside extent "
                         "136 of view BIAS[0:136]")
    assert line[caret.index("^"):].startswith("BIAS.at(tn * BN + j)")


# ---------------------------------------------------------------- the emulator

@pytest.mark.emu
@pytest.mark.parametrize("target", TARGETS)
def test_the_emulator_runs_guarded_thread_reads(target):
    x = torch.randn(100)
    y = torch.full_like(x, float("nan"))
    choreo_py.emulate_program(THREADS, target=target).guarded(x, y)
    assert torch.equal(y, _thread_ref(x))


@pytest.mark.emu
@pytest.mark.parametrize("target", TARGETS)
def test_the_emulator_locates_an_unguarded_read(target):
    lib = choreo_py.emulate_program(THREADS, target=target, defines={"NOGUARD": "1"})
    with pytest.raises(MemoryFault) as info:
        lib.guarded(torch.randn(100), torch.zeros(100))
    err = info.value
    assert (err.loc.line, err.loc.col) == (12, 19)
    assert re.match(r"ld\.global\.f32 reads 4 bytes at 0x[0-9a-f]+, outside every tensor, in "
                    r"thread 35 of block \(1, 0, 0\)$", err.message), err.message
    text = err.render()
    assert "guarded_thread_reads.co:12:19: error:" in text
    assert "Y.at(n) = X.at(n + 1);" in text and re.search(r"\.ptx:\d+ \(guarded_thread_reads"
                                                          r"\.co:12\): ld\.global\.f32", text)


@pytest.mark.emu
@pytest.mark.parametrize("target", TARGETS)
def test_emulate_exits_1_with_the_located_fault(target):
    res = _cli("emulate", RUNTIME_OOB, "--target", target, "--arg", "k=256")
    assert res.returncode == 1, res.stderr
    lines = res.stderr.strip().splitlines()
    assert re.search(r"global_oob_runtime\.co:6:17: error: ld\.global\.f32 reads 4 bytes at "
                     r"0x[0-9a-f]+, outside every tensor, in thread \d+ of block \(0, 0, 0\)$",
                     lines[0]), lines
    assert lines[1].strip() == "c.at(t) = a.at(t + k);"
    assert lines[2].index("^") == lines[1].index("a.at")
    assert "ld.global.f32" in lines[3] and "internal error" not in res.stderr


@pytest.mark.emu
@pytest.mark.slow
@pytest.mark.parametrize("target", TARGETS)
def test_the_emulator_runs_the_guarded_bias_in_bounds(target):
    from choreo_py.emu.api import emulate

    t = _gemm_inputs()
    emulate(GUARDED, t, target=target)
    assert _close(t["C"], _silu_ref(t))


@pytest.mark.emu
@pytest.mark.slow
@pytest.mark.parametrize("target", TARGETS)
def test_the_emulator_runs_every_guarded_form(target):
    from choreo_py.emu.api import emulate

    t = _gemm_inputs(1)
    emulate(FORMS, t, target=target)
    assert _close(t["C"], _forms_ref(t))


@pytest.mark.emu
@pytest.mark.slow
def test_the_emulator_locates_the_unguarded_bias_read():
    from choreo_py.emu.api import emulate

    with pytest.raises(MemoryFault) as info:
        emulate(UNGUARDED, _gemm_inputs(), target="sm_90a")
    assert (info.value.loc.line, info.value.loc.col) == (54, 51)
    assert info.value.message.startswith("ld.global.b16 reads 2 bytes at ")
