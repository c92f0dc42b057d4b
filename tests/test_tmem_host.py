"""`frag bf16[M, K] p : block in s`: a block operand laid over the columns of a block
accumulator (FA4's P over S). The plan puts p's region inside s's and marks it `in=s`;
the printer, the IR parser and the verifier carry the mark, and the verifier lets only
that pair share cells."""
from __future__ import annotations

from pathlib import Path

import pytest

from choreo_py import targets
from choreo_py.diagnostics import ChoreoError
from choreo_py.driver import compile_file, ir_of_file
from choreo_py.ir.parse import parse_module
from choreo_py.ir.printer import print_module
from choreo_py.ir.verify import verify_kernel
from choreo_py.passes import tmem_plan

ROOT = Path(__file__).resolve().parent.parent
SM100 = targets.get("sm_100a")
OWN = "frag bf16[BM, BN] p : block;"


def _variant(tmp_path, decl: str) -> str:
    src = (ROOT / "examples/gemm_block_p.co").read_text()
    assert OWN in src
    path = tmp_path / "p_over_s.co"
    path.write_text(src.replace(OWN, decl))
    return str(path)


@pytest.fixture
def over_s() -> str:
    return compile_file(str(ROOT / "examples/gemm_block_p_over_s.co"), emit="ir",
                        target="sm_100a")


def _tmem(text: str) -> list[str]:
    return [ln.strip() for ln in text.splitlines() if ln.strip().startswith("tmem ")]


def test_p_lies_in_the_columns_of_s(over_s):
    assert _tmem(over_s) == [
        "tmem s[0]: acc layout=D lanes=0+:128 cols=0+:128",
        "tmem o[0]: acc layout=D lanes=0+:128 cols=128+:128",
        "tmem p[0]: operand layout=D lanes=0+:128 cols=0+:64 in=s",
    ]
    assert "tmem_alloc 256 used=256 role={1}" in over_s
    assert "frag p: bf16[128, 128] layout=operand : block in s" in over_s


def test_without_the_clause_p_has_its_own_columns(tmp_path):
    text = compile_file(_variant(tmp_path, OWN), emit="ir", target="sm_100a")
    assert "tmem p[0]: operand layout=D lanes=0+:128 cols=256+:64" in _tmem(text)


def test_the_map_round_trips_and_verifies(over_s):
    module = parse_module(over_s)
    assert print_module(module) == over_s
    verify_kernel(module.functions[0].kernels[0], SM100)


@pytest.mark.parametrize("old, new, message", [
    (" in=s", "", "placed in its own columns, but the fragment is declared in s"),
    ("cols=0+:64 in=s", "cols=0+:64 in=o", "placed in o, but the fragment is declared in s"),
    ("cols=0+:64 in=s", "cols=128+:64 in=s", "regions o.0. and p.0. share cells"),
    ("cols=0+:64 in=s", "cols=96+:64 in=s", "regions s.0. and p.0. share cells"),
])
def test_the_verifier_allows_only_the_declared_pair_inside_its_host(over_s, old, new, message):
    kernel = parse_module(over_s.replace(old, new)).functions[0].kernels[0]
    with pytest.raises(ChoreoError, match=message):
        verify_kernel(kernel, SM100)


def test_an_unknown_host_is_a_located_error(tmp_path, capsys):
    from choreo_py import cli
    path = _variant(tmp_path, "frag bf16[BM, BN] p : block in q;")
    assert cli.main(["check", path]) != 0
    err = capsys.readouterr().err
    assert "p_over_s.co:25:36: error: 'p' is declared in the columns of 'q', which is no block " \
           "accumulator" in err
    assert err.count("^") == 1


def test_an_operand_wider_than_its_host_is_a_located_error():
    path = str(ROOT / "examples/gemm_block_p_over_s.co")
    kernel = ir_of_file(path, target="sm_100a").functions[0].kernels[0]
    kernel.tmem = None
    kernel.frag("s").shape = (128, 32)  # 32 columns; p (bf16[128, 128]) needs 64
    with pytest.raises(ChoreoError, match=r"'p' \(bf16\[128, 128\]: 64 columns, layout D\) does "
                                          r"not fit in the columns of 's' \(32 columns") as e:
        tmem_plan.plan(kernel, SM100)
    assert e.value.loc is not None and e.value.loc.line == 25


# ---------------------------------------------------------------- the order proof, the example

EXAMPLE = ROOT / "examples" / "gemm_block_p_over_s.co"
SHAPES = [(128, 128, 256), (256, 96, 384)]  # one and two M tiles, a partial N tile


def _inputs(m, n, k, seed=5):
    import torch
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(m, k, generator=g).to(torch.bfloat16)
    b = torch.randn(n, k, generator=g).to(torch.bfloat16)
    return a, b, torch.full((m, n), float("nan")).to(torch.bfloat16)


def _reference(a, b, bk=128, bn=128):
    """S = A B^T over every K step (f32), P = bf16(S / 16), O = P B_last^T: the last K
    step's B tile, B padded to BN rows and K to BK columns as the TMA loads are."""
    import torch
    m, k = a.shape
    kp = -(-k // bk) * bk
    ap = torch.zeros(m, kp, dtype=torch.float64)
    ap[:, :k] = a.double()
    bp = torch.zeros(bn, kp, dtype=torch.float64)
    bp[:b.shape[0], :k] = b.double()
    s = (ap @ bp.T).float()
    return ((s * 0.0625).to(torch.bfloat16).double() @ bp[:, kp - bk:].T)[:, :b.shape[0]]


def _close(c, a, b) -> bool:
    ref = _reference(a, b)
    err = (c.double() - ref).abs().max()
    return not c.float().isnan().any() and bool(err <= ref.abs().max() * 2 ** -6 + 1e-2)


def test_the_example_puts_p_inside_s():
    text = compile_file(str(EXAMPLE), emit="ir", target="sm_100a")
    assert _tmem(text)[-1] == "tmem p[0]: operand layout=D lanes=0+:128 cols=0+:64 in=s"
    assert "tmem_alloc 256 used=256 role={1}" in text


def test_s_accumulated_after_p_is_written_is_refused(tmp_path, capsys):
    """gemm_block_p.co accumulates S in every K step after P was written there (in the
    emulator, P over S gives a relative error of 0.4 at K = 256): not provable."""
    from choreo_py import cli
    path = _variant(tmp_path, "frag bf16[BM, BN] p : block in s;")
    assert cli.main(["compile", path, "-o", str(tmp_path / "x.py")]) != 0
    err = capsys.readouterr().err
    assert "p_over_s.co:25:23: error: 'p' cannot lie in the columns of 's'" in err


@pytest.mark.parametrize("old, new, message", [
    ("        trigger s_full;\n", "", "line 41 touches 's' and is not provably ordered"),
    # Without 'wait qk;' the future check now refuses first (an earlier, also-correct
    # error), so the order proof is not reached: either refusal is accepted.
    ("          wait qk;\n", "", ("line 41 touches 's' and is not provably ordered",
                                   "v.co:44:11: error: the asynchronous future 'qk' is never waited")),
    ("    shared event s_full, p_full, o_done;", "    shared event s_full = ready, p_full, o_done;",
     "line 41 touches 's' and is not provably ordered"),
    ("        mma.store o, c_buf;", "        mma.store s, c_buf;",
     "line 63 touches 's' and is not provably ordered"),
    ("p.at(i, j) = __to(s.at(i, j) * 0.0625f);", "p.at(i, j) = __to(s.at(j, i) * 0.0625f);",
     "reads 's' other than at its own indices"),
])
def test_what_the_order_proof_refuses(tmp_path, capsys, old, new, message):
    from choreo_py import cli
    src = EXAMPLE.read_text()
    assert old in src
    path = tmp_path / "v.co"
    path.write_text(src.replace(old, new))
    assert cli.main(["compile", str(path), "-o", str(tmp_path / "x.py")]) != 0
    err = capsys.readouterr().err
    p_over_s = "v.co:25:23: error: 'p' cannot lie in the columns of 's'"
    if isinstance(message, tuple):
        proof, earlier = message
        assert (p_over_s in err and proof in err) or earlier in err, err
    else:
        assert p_over_s in err and message in err


@pytest.mark.ptxas
def test_ptxas_accepts_the_example_without_spills():
    from block_helpers import assert_no_spills
    assert_no_spills(compile_file(str(EXAMPLE), emit="ptx", target="sm_100a"))


@pytest.mark.parametrize("shape", SHAPES)
def test_interpreter_matches_torch(shape):
    import choreo_py
    a, b, c = _inputs(*shape)
    choreo_py.interpret(str(EXAMPLE), dict(A=a, B=b, C=c))
    assert _close(c, a, b)


@pytest.mark.emu
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("schedule", ["round_robin", "reverse", "random"])
def test_emulator_matches_torch_strict(shape, schedule):
    from block_helpers import emulate_strict
    a, b, c = _inputs(*shape)
    assert emulate_strict(EXAMPLE, dict(A=a, B=b, C=c), schedule) == []
    assert _close(c, a, b)
