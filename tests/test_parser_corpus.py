"""The reference compiler's test programs (../shared/corpus, when present):
accepted files must parse and pass the parse-level checks; files it rejects
in its front end must be rejected here too, with a location.

Two rejected files only fail under `-D` options of their RUN lines
(error_mutables.co, intrinsic_scope_invalid.co); without them they are valid.
"""
import json
from pathlib import Path

import pytest
from conftest import shared_dir, shared_path

from choreo_py import frontend
from choreo_py.frontend import parse_checks
from choreo_py.diagnostics import ChoreoError

CORPUS = shared_path("corpus") or Path("/nonexistent")
NEEDS_DEFINES = {"tests/parse/error_mutables.co", "tests/parse/intrinsic_scope_invalid.co"}


def _records():
    manifest = CORPUS / "manifest.json"
    if not manifest.exists():
        return []
    return [r for r in json.loads(manifest.read_text()) if r.get("ref") is not False]


RECORDS = _records()
pytestmark = pytest.mark.skipif(not RECORDS, reason=f"{shared_dir() / 'corpus'} is not available")


def _front_end(path: Path):
    program = frontend.parse_file(str(path))
    parse_checks.check(program)
    return program


@pytest.mark.parametrize("rec", [r for r in RECORDS if r["expect"] == "accept"],
                         ids=lambda r: r["path"])
def test_accepted_files_parse(rec):
    program = _front_end(CORPUS / rec["path"])
    assert program.items, rec["path"]  # raises on an error; a file has code


@pytest.mark.parametrize("rec", [r for r in RECORDS if r["expect"] == "reject"
                                 and r["kind"] == "frontend"
                                 and r["path"] not in NEEDS_DEFINES], ids=lambda r: r["path"])
def test_rejected_files_fail_with_a_location(rec):
    with pytest.raises(ChoreoError) as info:
        _front_end(CORPUS / rec["path"])
    assert info.value.loc is not None and info.value.loc.line > 0


def _checked(path: Path):
    """What `choreo check FILE` does (a plain check: the whole-language pass, then sema)."""
    return frontend.check_program(frontend.parse_file(str(path)))


@pytest.mark.parametrize("rec", [r for r in RECORDS if r["expect"] == "accept"
                                 and r["kind"] != "preprocess"], ids=lambda r: r["path"])
def test_accepted_files_pass_check(rec):
    """The conformance score's accept half, in-process: a valid program passes `check`
    (a regression here is a drop of ../shared/tools/conformance.py's score)."""
    program = _checked(CORPUS / rec["path"])  # raises ChoreoError on a rejection
    assert program.loc is not None


@pytest.mark.parametrize("rec", [r for r in RECORDS if r["expect"] == "reject"
                                 and r["kind"] == "frontend"
                                 and r["path"] not in NEEDS_DEFINES], ids=lambda r: r["path"])
def test_rejected_files_fail_check_with_a_location(rec):
    with pytest.raises(ChoreoError) as info:
        _checked(CORPUS / rec["path"])
    assert info.value.loc is not None and info.value.loc.line > 0
