"""A target is one backend folder plus one record: added here without an edit anywhere else.

The record is sm_90a's under the name sm_90x, its backend the folder-like unit
tests/sm90x/ (a Target subclass with the base's hooks, lowering/core/target_base.py),
joined to the table by targets.register. The thread-kernel examples lower through
it to the PTX sm_90a gets, but for the `.target` line: the name reaches the module
from the record, and nothing else in the lowering depends on which record it is.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

import sm90x
from choreo_py import cli, targets
from choreo_py.diagnostics import ChoreoError
from choreo_py.driver import compile_file

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
THREAD_KERNELS = ["vector_add", "softmax", "rmsnorm", "transpose"]


@pytest.fixture
def sm_90x():
    """The renamed architecture, in the table for the test only."""
    record = dataclasses.replace(targets.get("sm_90a"), name="sm_90x", backend="sm90x")
    targets.register(record, lowering=sm90x)
    try:
        yield record
    finally:
        targets.unregister("sm_90x")


def _compile(name: str, emit: str, target: str) -> str:
    return compile_file(str(EXAMPLES / f"{name}.co"), emit, target)


@pytest.mark.parametrize("name", THREAD_KERNELS)
def test_its_ptx_is_sm_90a_s_but_the_target_line(sm_90x, name):
    new, old = _compile(name, "ptx", "sm_90x"), _compile(name, "ptx", "sm_90a")
    new_lines, old_lines = new.splitlines(), old.splitlines()
    assert len(new_lines) == len(old_lines)
    differ = [(a, b) for a, b in zip(new_lines, old_lines) if a != b]
    assert differ == [(".target sm_90x", ".target sm_90a")]


@pytest.mark.parametrize("name", THREAD_KERNELS)
def test_its_pyptx_names_it_where_sm_90a_s_names_sm_90a(sm_90x, name):
    new, old = _compile(name, "pyptx", "sm_90x"), _compile(name, "pyptx", "sm_90a")
    assert 'ARCH = "sm_90x"' in new and "sm_90a" not in new
    assert new.replace("sm_90x", "sm_90a") == old


def test_it_is_a_choice_of_the_cli_while_registered(sm_90x):
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if a.dest == "cmd").choices["compile"]
    assert "sm_90x" in next(a for a in sub._actions if a.dest == "target").choices
    assert targets.get("sm_90x") is sm_90x


def test_an_mma_kernel_is_refused_by_name(sm_90x):
    """The base target has no MMA unit: its defaults refuse, naming the target."""
    with pytest.raises(ChoreoError, match="is not lowered for sm_90x yet"):
        _compile("gemm", "pyptx", "sm_90x")


def test_unregistered_the_table_is_as_it_was(sm_90x):
    targets.unregister("sm_90x")
    try:
        assert targets.NAMES == ("sm_100a", "sm_90a")
        assert targets.registered_lowering("sm90x") is None
        with pytest.raises(targets.UnknownTarget, match="choose sm_100a, sm_90a"):
            targets.get("sm_90x")
    finally:
        targets.register(sm_90x, lowering=sm90x)  # (the fixture takes it out again)


def test_a_name_is_registered_once(sm_90x):
    with pytest.raises(ValueError, match="'sm_90x' is already in the table"):
        targets.register(sm_90x)
