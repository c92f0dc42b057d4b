"""Shared buffers whose shape only the launch knows (ir.RunBuffer): `shared T [M] x;` with
`M` a dimension or a scalar argument, and `=> shared` of a tile with run-time extents.

They lie after the static shared plan (and the per-thread area) of a thread kernel, each
16-byte aligned; their offsets are expressions in the kernel's dimensions, and the launch
adds what KERNELS[name]['SMEM_RUN'] computes to SMEM_BYTES. tests/co/run_sized_shared.co
uses four of them (one sized by a scalar argument, unused, which moves the others) with a
static one; it runs in the interpreter and the emulator (both targets) against a torch
reference and assembles with ptxas, as do the two corpus files that declare such buffers.
"""
from __future__ import annotations

import os

import pytest
import torch

import choreo_py
from choreo_py.diagnostics import ChoreoError
from choreo_py.driver import compile_file
from choreo_py.runtime.build import find_ptxas, ptxas

PATH = os.path.join(os.path.dirname(__file__), "co", "run_sized_shared.co")
SHARED = os.environ.get("CHOREO_SHARED", os.path.join(os.path.dirname(__file__), "..", "..",
                                                       "shared"))
CORPUS = [os.path.join(SHARED, "corpus", "tests", "gpu", "codegen", "cute", f"{n}.co")
          for n in ("extern_smem", "func_attribute_max_dynamic_shared_memory_size")]
# N = 300 floats: the run-time-sized buffers need more than the 1 KiB of base-rounding slack
# that SMEM_BYTES holds, so a launch sized without SMEM_RUN fails (test below).
B, N, K, W = 2, 300, 5, 7


def _inputs(device="cpu", n=N):
    x = torch.arange(B * n, dtype=torch.float32).reshape(B, n).sin().to(device)
    return x, torch.zeros(B, n, device=device), torch.zeros(B, K, dtype=torch.int32,
                                                           device=device)


def _want(x):
    n_ = x.shape[1]
    y = 2 * x.cpu().flip(1) + torch.arange(1, B + 1, dtype=torch.float32)[:, None]
    c = [k + sum(1 for n in range(n_) if n % K == k) for k in range(K)]
    return y, torch.tensor([c] * B, dtype=torch.int32)


def _check(x, y, c):
    want_y, want_c = _want(x)
    assert torch.equal(y.cpu(), want_y)
    assert torch.equal(c.cpu(), want_c)


def test_the_interpreter_runs_it():
    x, y, c = _inputs(n=70)  # fewer elements: the interpreter is the slower of the two
    choreo_py.interpret(PATH, target="sm_90a").flip(x, y, c, W)
    _check(x, y, c)


@pytest.mark.emu
@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_the_emulator_runs_the_ptx(target):
    x, y, c = _inputs()
    choreo_py.emulate_program(PATH, target=target, schedule="random", seed=1).flip(x, y, c, W)
    _check(x, y, c)


@pytest.mark.emu
def test_a_launch_without_the_run_time_bytes_overruns(monkeypatch):
    """The emulator's shared window is what the launch asks for: sized by SMEM_BYTES alone,
    the buffers after the static plan lie outside it."""
    import choreo_py.emu.program as program

    monkeypatch.setattr(program, "launch_smem", lambda info, dims, arch, name:
                        int(info["SMEM_BYTES"]))
    x, y, c = _inputs()
    with pytest.raises(Exception, match="outside the .*-byte window"):
        choreo_py.emulate_program(PATH, target="sm_90a").flip(x, y, c, W)


def test_the_module_sizes_the_launch_from_the_dimensions(tmp_path):
    text = compile_file(PATH, "pyptx", "sm_90a")
    ns: dict = {}
    exec(compile(text, "run_sized_shared.py", "exec"), ns)  # noqa: S102 - our own output
    info = ns["KERNELS"]["flip"]
    assert info["SMEM_BYTES"] == 128 + 1024  # the static f32[32] tile, plus the base rounding
    # pad: 7 -> 16 bytes, row: 4N, rev: 4N, count: 4K = 20 -> 32
    assert info["SMEM_RUN"](**{"B": B, "N": N, "K": K, "W": W}) == 16 + 8 * N + 32
    from choreo_py.targets import launch_smem

    with pytest.raises(ValueError, match="kernel 'flip' needs .* bytes of shared memory for "
                                         r"these dimensions \(the limit is 232448\)"):
        launch_smem(info, {"B": 1, "N": 40000, "K": 1, "W": 1}, "sm_90a", "flip")
    plain = compile_file(os.path.join(os.path.dirname(__file__), "co", "thread_shift.co"),
                         "pyptx", "sm_90a")
    assert "SMEM_RUN" not in plain  # kernels without them: the module format unchanged


def test_the_ir_prints_and_reads_them_back():
    from choreo_py.driver import compile_file as compile_

    text = compile_(PATH, "ir", "sm_90a")
    assert "shared_run rev: f32[N]" in text and "shared_run pad: s8[W]" in text
    from choreo_py.ir import parse as ir_parse, printer as ir_printer

    assert ir_printer.print_module(ir_parse.parse_module(text)) == text


@pytest.mark.ptxas
@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_ptxas_accepts_the_program_and_the_corpus_files(target):
    if find_ptxas() is None:
        pytest.skip("ptxas (CUDA 12.8+) is not on PATH")
    for path in [PATH] + [p for p in CORPUS if os.path.exists(p)]:
        ptxas(compile_file(path, "ptx", target), target)


def _refused(tmp_path, body: str, target="sm_90a") -> str:
    path = tmp_path / "t.co"
    path.write_text("__co__ void k(global f32 [N] o, int M) {\n  parallel p by 2 : block {\n"
                    f"{body}\n    parallel q by 4 : thread {{ o.at(q) = 1.0f; }}\n  }}\n}}\n")
    with pytest.raises(ChoreoError) as info:
        compile_file(str(path), "ptx", target)
    return str(info.value)


def test_refusals_name_what_is_not_built(tmp_path):
    assert "a local buffer whose shape is only known at run time" in _refused(
        tmp_path, "    local f32 [M] l;")
    assert "an array of shared buffer whose shape is only known at run time" in _refused(
        tmp_path, "    shared f32 [M] a[2];")
    got = _refused(tmp_path, "    n = p + 1;\n    shared f32 [n] s;")
    assert "the shared buffer 's', whose shape depends on values computed in the kernel" in got
    for target in ("sm_90a", "sm_100a"):  # their places are thread-kernel code's only
        got = _refused(tmp_path, "    shared event e;\n    shared f32 [M] s;", target)
        assert got.startswith(f"{tmp_path / 't.co'}:4:") and ("the shared buffer 's', whose "
                                                             "shape is only known at run time, in "
                                                             "a kernel of MMAs, events or roles "
                                                             f"is not lowered for {target}") in got


@pytest.mark.gpu
def test_gpu():
    x, y, c = _inputs("cuda")
    choreo_py.load(PATH).flip(x, y, c, W)
    torch.cuda.synchronize()
    _check(x, y, c)
