"""Shared pytest configuration.

`--update-goldens` rewrites golden files instead of comparing against them;
use `check_golden(path, actual, request)` (or the `golden` fixture) in tests.

Markers (registered in pyproject.toml): a test marked `gpu` is skipped, with
the reason shown, where no CUDA GPU is present; one marked `ptxas` where
ptxas is not installed. `slow` marks the tests `-m "not slow"` leaves out.

Files outside the repository (the reference compiler's corpus, the seeds) are found
one way: `shared_path("corpus")` looks in $CHOREO_SHARED, else in `shared/` beside
the checkout, and `need_shared("corpus")` skips the calling test, with the place
it looked, when they are absent (a fresh clone has none).
"""
from __future__ import annotations

import difflib
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def shared_dir() -> Path:
    """Where the shared files are expected: $CHOREO_SHARED or ../shared."""
    return Path(os.environ.get("CHOREO_SHARED") or ROOT.parent / "shared")


def shared_path(*parts: str) -> Path | None:
    """`shared_dir()/parts...` if it exists, else None."""
    path = shared_dir().joinpath(*parts)
    return path if path.exists() else None


def need_shared(*parts: str) -> Path:
    """`shared_path(*parts)`, or skip the test saying what is missing and where."""
    path = shared_path(*parts)
    if path is None:
        pytest.skip(f"{shared_dir().joinpath(*parts)} is not available (set CHOREO_SHARED "
                    "to the folder holding corpus/ and seeds/)")
    return path


def pytest_addoption(parser):
    parser.addoption("--update-goldens", action="store_true", default=False,
                     help="rewrite golden files with the current output")


def _has_gpu() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def _has_ptxas() -> bool:
    from choreo_py.runtime.build import find_ptxas

    return find_ptxas() is not None


_NEEDS = {"gpu": (_has_gpu, "needs a CUDA GPU"), "ptxas": (_has_ptxas, "ptxas not on PATH")}


#: `pytest -m quick`: every stage once (preprocess, parse, check, IR, lowering for both
#: targets, ptxas, interpreter, emulator) and the layering rule, in under a minute on two
#: cores. Whole files, so a new test in one of them joins the loop; keep them fast.
QUICK = frozenset({
    "test_stages_smoke.py", "test_preprocess.py", "test_parser_decls.py",
    "test_check_scopes.py", "test_ir_verify.py", "test_interp_units.py",
    "test_emu_sm100_desc.py", "test_import_graph.py", "test_compile_imports.py",
})


def pytest_collection_modifyitems(config, items):
    found: dict[str, bool] = {}
    for item in items:
        if item.path.name in QUICK:
            item.add_marker(pytest.mark.quick)
        for name, (probe, reason) in _NEEDS.items():
            if item.get_closest_marker(name) is None:
                continue
            if name not in found:
                found[name] = probe()
            if not found[name]:
                item.add_marker(pytest.mark.skip(reason=reason))


def check_golden(path, actual: str, request) -> None:
    """Compare `actual` with the golden file at `path`; with --update-goldens,
    (re)write the file instead."""
    path = Path(path)
    if request.config.getoption("--update-goldens"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(actual, encoding="utf-8")
        return
    if not path.exists():
        pytest.fail(f"golden file {path} is missing; run pytest with --update-goldens")
    expected = path.read_text(encoding="utf-8")
    if actual != expected:
        diff = "".join(difflib.unified_diff(expected.splitlines(True), actual.splitlines(True),
                                            str(path), "actual", n=2))
        pytest.fail(f"output differs from {path} (run with --update-goldens to accept):\n"
                    + diff[:6000])


@pytest.fixture
def golden(request):
    """`golden(path, actual)`: check_golden bound to the current test."""
    return lambda path, actual: check_golden(path, actual, request)
