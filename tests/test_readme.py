"""The README's "Use" lines work verbatim from the repository root (run here in a copy of
examples/, since `compile` writes beside its source), and the README points to the guide."""
from __future__ import annotations

import contextlib
import io
import re
import shlex
import shutil
from pathlib import Path

import pytest

from choreo_py import cli
from choreo_py.runtime.build import find_ptxas

ROOT = Path(__file__).resolve().parent.parent


def _use_lines() -> list[str]:
    text = (ROOT / "README.md").read_text()
    use = text[text.index("## Use"):]
    block = re.search(r"```sh\n(.*?)```", use, re.S).group(1)
    return [ln.split(" #", 1)[0].strip() for ln in block.splitlines() if ln.strip()]


def _cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


@pytest.mark.parametrize("line", _use_lines())
def test_use_line_runs(line, tmp_path, monkeypatch):
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    monkeypatch.chdir(tmp_path)
    words = shlex.split(line)
    assert words[0] == "choreo"
    if "cubin" in words and find_ptxas() is None:
        pytest.skip("needs ptxas")
    if words[1] == "tune" and not _cuda():
        pytest.skip("`choreo tune` times on a CUDA GPU; none here")
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = cli.main(words[1:])
    assert rc == 0, f"`{line}` exited {rc}:\n{out.getvalue()}{err.getvalue()}"
    if words[1] == "compile" and "-o" not in words:
        assert list((tmp_path / "examples").glob("*.sm*.py")), "compile wrote nothing beside the source"


def test_readme_points_to_the_guide():
    text = (ROOT / "README.md").read_text()
    assert "mkdocs build --strict" in text and "docs/" in text
