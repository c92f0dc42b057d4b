"""What a (non-editable) install carries: every package folder of the tree, every module.

pyproject.toml lists the packages by hand (the top-level folders grammar/ and lowering/
are installed as choreo_py.grammar and choreo_py.lowering, which setuptools' discovery
cannot name), so a new package folder must be added there; these tests say which.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
tomllib = pytest.importorskip("tomllib")


def _config() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]


def _package_folders() -> dict[str, Path]:
    """Installed package name -> folder, for every folder holding an __init__.py."""
    out = {}
    for pkg, folder in _config()["package-dir"].items():
        base = ROOT / folder
        for init in sorted(base.rglob("__init__.py")):
            rel = init.parent.relative_to(base)
            if pkg == "choreo_py" and rel.parts and rel.parts[0] in ("grammar", "lowering"):
                continue
            out[".".join([pkg, *rel.parts])] = init.parent
    return out


def test_every_package_folder_is_listed():
    listed = set(_config()["packages"])
    folders = set(_package_folders())
    assert folders - listed == set(), f"package folders pyproject.toml does not install: {sorted(folders - listed)}"
    assert listed - folders == set(), f"packages pyproject.toml lists that are no folder: {sorted(listed - folders)}"


def test_a_build_carries_every_module(tmp_path):
    """setuptools' own build of the package (what a wheel holds) has every .py file of
    every package folder and the grammar."""
    build_lib = tmp_path / "lib"
    code = ("import sys; from setuptools import setup; "
            f"sys.argv = ['setup.py', '-q', 'build', '--build-base', {str(tmp_path / 'b')!r}, "
            f"'build_py', '--build-lib', {str(build_lib)!r}]; setup()")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    built = {p.relative_to(build_lib).as_posix() for p in build_lib.rglob("*") if p.is_file()}
    wanted = set()
    for pkg, folder in _package_folders().items():
        prefix = pkg.replace(".", "/")
        wanted |= {f"{prefix}/{p.name}" for p in folder.glob("*.py")}
    wanted.add("choreo_py/grammar/choreo.lark")
    missing = sorted(wanted - built)
    assert not missing, f"files a non-editable install lacks: {missing}"
