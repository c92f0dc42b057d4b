"""What the whole-compiler fuzzer (bench/fuzz.py) found, each kept as a regression:
conditions used as indices and stored into float elements, float indices, accumulators
without a shape, setmaxnreg in the wrong direction, absurd instance counts."""
from __future__ import annotations

import time
from pathlib import Path

import pytest

from choreo_py import cli, driver
from fa_helpers import assemble

ROOT = Path(__file__).resolve().parent.parent
TARGETS = ("sm_90a", "sm_100a")


def _variant(tmp_path, rel: str, old: str, new: str) -> Path:
    text = (ROOT / rel).read_text()
    assert old in text
    path = tmp_path / "f.co"
    path.write_text(text.replace(old, new))
    return path


def _err(capsys, path, *extra):
    rc = cli.main(["compile", str(path), "--emit", "ptx", "-o", "-", *extra])
    return rc, capsys.readouterr().err


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("rel,old,new", [
    ("examples/gemm.co", "slot = order % STAGES;", "slot = order && STAGES;"),
    ("tests/co/gemm_k_schedule.co", "slot = order % STAGES;", "slot = order < STAGES;"),
    ("examples/flash_atten_causal.co",
     "acc_o.at(i, j) = acc_o.at(i, j) * scores_scale.at(i);",
     "acc_o.at(i, j) = acc_o.at(i, j) < scores_scale.at(i);"),
])
def test_conditions_as_indices_and_values_assemble(tmp_path, rel, old, new, target):
    path = _variant(tmp_path, rel, old, new)
    ptx = driver.compile_file(str(path), "ptx", target)
    if assemble(ptx, target) is None:
        pytest.skip("ptxas is not installed")


def test_float_index_is_an_error(capsys, tmp_path):
    path = _variant(tmp_path, "examples/flash_atten.co", ".at(batch, 0, head, 0).sqz();\n    K_head",
                    ".at(batch, 0.5f, head, 0).sqz();\n    K_head")
    rc, err = _err(capsys, path)
    assert rc == 1 and "f.co:23:18: error: an index must be an integer, not f32" in err


def test_accumulator_without_an_mma_has_no_shape(capsys, tmp_path):
    path = _variant(tmp_path, "tests/co/attention_through_shared.co",
                    "        mma.row.row s, q_s, k_s;\n", "")
    for target in TARGETS:
        rc, err = _err(capsys, path, "--target", target)
        assert rc == 1
        assert "f.co:22:9: error: accumulator 's' has no shape: no MMA writes it" in err


@pytest.mark.parametrize("old,new,message", [
    ("setreg_inc(232)", "setreg_inc(64)",
     "f.co:37:9: error: setreg_inc(64) asks for fewer registers than the 168"),
    ("setreg_dec(40)", "setreg_dec(200)",
     "f.co:25:9: error: setreg_dec(200) asks for more registers than the 168"),
])
def test_setmaxnreg_direction(capsys, tmp_path, old, new, message):
    path = _variant(tmp_path, "examples/gemm.co", old, new)
    rc, err = _err(capsys, path, "--target", "sm_100a")
    assert rc == 1 and message in err


def test_absurd_instance_count_is_refused_quickly(capsys, tmp_path):
    path = _variant(tmp_path, "examples/gemm.co", "#define BM 128", "#define BM 4294967296")
    start = time.perf_counter()
    assert cli.main(["check", str(path)]) == 1
    assert time.perf_counter() - start < 60  # a hang guard, not a speed bound
    assert "'parallel p by 67108865': more than 262144 instances in one block" in \
        capsys.readouterr().err


def test_float_loop_bound_is_an_error(capsys, tmp_path):
    path = _variant(tmp_path, "examples/flash_atten_causal.co", "kv_bound = bm + 1;",
                    "kv_bound = bm + 0.5f;")
    rc, err = _err(capsys, path, "--target", "sm_100a")
    assert rc == 1 and "f.co:49:28: error: a loop bound must be an integer, not f32" in err


@pytest.mark.parametrize("target", TARGETS)
def test_condition_in_cdiv_assembles(tmp_path, target):
    path = _variant(tmp_path, "examples/flash_atten_persistent.co", "items = pairs * H * B;",
                    "items = pairs * H != B;")
    ptx = driver.compile_file(str(path), "ptx", target)
    if assemble(ptx, target) is None:
        pytest.skip("ptxas is not installed")


@pytest.mark.parametrize("target", TARGETS)
def test_fill_only_accumulator_is_refused_by_name(capsys, tmp_path, target):
    path = tmp_path / "f.co"
    path.write_text("__co__ void f() {\n  parallel b by 1 : block {\n"
                    "    shared bf16[64, 128] lhs;\n    parallel g by 1 : group-4 {\n"
                    "      acc = mma.fill.f32 0.0f;\n    }\n  }\n}\n")
    rc, err = _err(capsys, path, "--target", target)
    assert rc == 1
    assert "f.co:5:7: error: the accumulator 'acc' that no MMA gives a shape" in err


def test_infinite_initialiser_of_an_integer_is_located(capsys, tmp_path):
    """`mutable s32 row_max = -inf;` (fuzz mutant 6608 of examples/softmax.co): C gives an
    infinite value no integer; an error at the initialiser, not an OverflowError."""
    path = _variant(tmp_path, "examples/softmax.co", "mutable f32 row_max = -inf;",
                    "mutable s32 row_max = -inf;")
    for target in TARGETS:
        rc, err = _err(capsys, path, "--target", target)
        assert rc == 1, err
        assert "f.co:16:29: error: 'row_max' is s32: the value -inf (infinite or NaN) has no " \
               "integer value" in err
    assert cli.main(["check", str(path)]) == 1
    assert "f.co:16:29: error: 'row_max' is s32" in capsys.readouterr().err


@pytest.mark.parametrize("target", TARGETS)
def test_float_value_of_an_integer_atomic_assembles(tmp_path, target):
    """`__atomic_add(counts.at(bin), 0.5f)` on s32 counts (fuzz mutant 5994 of the corpus's
    atomic_add.co) emitted `red.add.s32` with an f32 operand; the value is converted."""
    path = tmp_path / "f.co"
    path.write_text("__co__ void k(global s32 [128] counts, global f32 [128] w) {\n"
                    "  parallel q by 128 : thread {\n"
                    "    __atomic_add(counts.at(q), 0.5f);\n"
                    "    __atomic_add(counts.at(q), w.at(q));\n"
                    "  }\n}\n")
    ptx = driver.compile_file(str(path), "ptx", target)
    assert "red" in ptx
    if assemble(ptx, target) is None:
        pytest.skip("ptxas is not installed")
