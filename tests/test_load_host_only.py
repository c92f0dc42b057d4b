"""`choreo_py.load()` of a file of host code only (no parallel region, so no kernel).

Such a file is a host program whose functions run their scalars, loops and prints on the
host (runtime/host_program.py HostLauncher): load() gives a Library of them, which needs
no GPU, and the cache never keeps a kernel-less module as a single kernel.
"""
from __future__ import annotations

import os

import choreo_py
from choreo_py.host import Library

HERE = os.path.join(os.path.dirname(__file__), "co", "comock", "host_only.co")


def test_a_host_only_file_loads_as_a_library_whose_functions_run(capfd, monkeypatch, tmp_path):
    monkeypatch.setenv("CHOREO_PY_CACHE_DIR", str(tmp_path))
    for _ in range(2):  # the second load may find the cache: the same Library either way
        lib = choreo_py.load(HERE, target="sm_90a")
        assert isinstance(lib, Library)
        lib.count(4)
        assert capfd.readouterr().out == "sum 6 true\n"
        assert lib.twice(5) == 10


def test_one_function_of_it_by_name(capfd):
    fn = choreo_py.load(HERE, target="sm_100a", function="count")
    fn(3)
    assert capfd.readouterr().out == "sum 3 false\n"
