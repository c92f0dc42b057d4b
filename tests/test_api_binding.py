"""One binding check (host/binding.py) for interpret, emulate, emulate_program and load():
each defect of the Python API's argument handling is a BindingError (a ChoreoRuntimeError
and a UsageError) naming the parameter and the rule, with the same words in every engine,
and the valid call still works. The cases are those of the API's defect reproducer."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

import choreo_py
from choreo_py.diagnostics import ChoreoRuntimeError, UsageError
from choreo_py.host.binding import BindingError

ROOT = Path(__file__).resolve().parent.parent
GEMM = str(ROOT / "examples" / "gemm.co")
VADD = str(ROOT / "examples" / "vector_add.co")
CAUSAL = str(ROOT / "examples" / "flash_atten_causal.co")
bf = torch.bfloat16


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CHOREO_PY_CACHE_DIR", str(tmp_path))


def _gemm_inputs():
    g = torch.Generator().manual_seed(0)
    return {"A": torch.randn(128, 64, generator=g).to(bf),
            "B": torch.randn(128, 64, generator=g).to(bf), "C": torch.empty(128, 128, dtype=bf)}


def _emulate(t):
    return choreo_py.emulate(GEMM, t, target="sm_90a")


def _interpret(t):
    return choreo_py.interpret(GEMM, t, target="sm_90a")


BAD = [  # (case, change to the valid inputs, message)
    ("f32 A", lambda t: t.update(A=t["A"].float()), "A: dtype torch.float32, gemm takes "
                                                     "torch.bfloat16 (bf16)"),
    ("f32 C", lambda t: t.update(C=t["C"].float()), "C: dtype torch.float32, gemm takes "
                                                     "torch.bfloat16 (bf16)"),
    ("no C", lambda t: t.pop("C"), "no tensor for parameter 'C' of gemm (its parameters: A, B, C)"),
    ("rank-3 A", lambda t: t.update(A=t["A"][None]), "A: 3 dimensions, gemm takes 2 ['M', 'K']"),
    ("extra D", lambda t: t.update(D=torch.zeros(3)), "gemm has no parameter 'D' (its "
                                                      "parameters: A, B, C)"),
    ("non-contiguous A", lambda t: t.update(A=t["A"].T.contiguous().T),
     "A: not contiguous (call .contiguous())"),
    ("numpy A", lambda t: t.update(A=t["A"].float().numpy()),
     "A: expected a torch.Tensor, got numpy.ndarray"),
    ("meta A", lambda t: t.update(A=torch.empty(128, 64, dtype=bf, device="meta")), "A: on meta; "),
]


@pytest.mark.parametrize("run", [_emulate, _interpret], ids=["emulate", "interpret"])
@pytest.mark.parametrize("case,change,message", BAD, ids=[c[0] for c in BAD])
def test_a_call_that_does_not_fit_is_refused_by_parameter_and_rule(run, case, change, message):
    t = _gemm_inputs()
    change(t)
    with pytest.raises(BindingError) as info:
        run(t)
    assert str(info.value).startswith(message)
    assert isinstance(info.value, ChoreoRuntimeError) and isinstance(info.value, UsageError)


@pytest.mark.parametrize("run", [_emulate, _interpret], ids=["emulate", "interpret"])
def test_the_valid_call_still_works(run):
    t = _gemm_inputs()
    run(t)
    ref = t["A"].float() @ t["B"].float().T
    assert (t["C"].float() - ref).norm() / ref.norm() < 1e-2


def test_tensors_given_as_a_list_name_no_tensor():
    t = list(_gemm_inputs().values())
    with pytest.raises(BindingError) as info:
        choreo_py.interpret(GEMM, t, target="sm_90a")
    assert str(info.value) == ("gemm: the tensors are given as a dict of parameter name -> "
                               "tensor (A, B, C), not as a list")


@pytest.mark.parametrize("lib", ["interpret", "emulate_program"])
def test_library_calls_share_the_check(lib):
    f = getattr(choreo_py, lib)(VADD, target="sm_90a")
    a = torch.randn(512)
    with pytest.raises(BindingError, match=r"^a: expected a torch.Tensor, got numpy.ndarray$"):
        f.vector_add(a.numpy(), a)
    with pytest.raises(BindingError, match=r"^vector_add has no parameter 'x' \(its parameters: "
                                           r"a, b\)$"):
        f.vector_add(x=a, b=a)
    with pytest.raises(BindingError, match=r"^b: dtype torch.float16, vector_add takes "
                                           r"torch.float32 \(f32\)$"):
        f.vector_add(a, a.half())
    assert torch.equal(f.vector_add(a, a), a + a)


@pytest.mark.parametrize("lib", ["interpret", "emulate_program"])
def test_vector_add_covers_a_size_that_is_no_multiple_of_its_tile(lib):
    """N = 1000 with 256-thread blocks: the last block's threads past N do nothing (every
    output was written: 232 were not, with N / 256 blocks)."""
    a, b = torch.randn(1000), torch.randn(1000)
    assert torch.equal(getattr(choreo_py, lib)(VADD, target="sm_90a").vector_add(a, b), a + b)


def test_emulate_checks_the_entry_asserts(capsys):
    """As `run` and load() do: the causal example's assert forbids Q_SEQ != KV_SEQ."""
    from choreo_py import cli
    from choreo_py.runtime.kernel import AssertionFailed

    q = torch.zeros(1, 128, 1, 128, dtype=bf)
    kv = torch.zeros(1, 1024, 1, 128, dtype=bf)
    with pytest.raises(AssertionFailed, match="assertion failed: the causal mask pairs query"):
        choreo_py.emulate(CAUSAL, dict(Q=q, K=kv, V=kv, O=torch.zeros_like(q)), target="sm_90a")
    rc = cli.main(["emulate", CAUSAL, "--shape", "B=1,H=1,Q_SEQ=128,KV_SEQ=1024"])
    err = capsys.readouterr().err
    assert rc == 1 and "flash_atten_causal.co:17:3: error: assertion failed: the causal" in err
    assert 'assert(Q_SEQ == KV_SEQ, "the causal' in err and "Traceback" not in err
