"""The on-disk cache of compiled kernels (as Triton's: a second `load()` of the same
kernel, in any process, skips the compiler and ptxas).

An entry is a folder named by a hash of everything the output depends on:

- the source after preprocessing (so `#include`d files and `-D` values count,
  comments and the file's path do not),
- the defines and include folders as given,
- the target,
- the compiler: choreo-py's version and a hash of its own code (the package
  and the backends, so an edited checkout never reads a stale entry), the
  pyptx version, and ptxas's version line.

It holds the generated pyptx module, the PTX and the cubin with ptxas's log,
each written when first made (a machine without ptxas caches the PTX only).
Files are written to a temporary name and renamed, so a reader never sees a
partial file and concurrent writers agree.

`CHOREO_PY_CACHE_DIR` moves the cache (default `$XDG_CACHE_HOME/choreo-py/kernels`,
i.e. `~/.cache/choreo-py/kernels`); `CHOREO_PY_NO_CACHE=1` turns it off, as it
does the parser cache.
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import subprocess
from pathlib import Path
from typing import Iterable, Optional

FORMAT = "choreo-py kernel cache 1"
FILES = {"pyptx": "kernel.pyptx.py", "ptx": "kernel.ptx", "cubin": "kernel.cubin",
         "ptxas_log": "ptxas.log", "writes": "outputs.txt"}


def cache_dir() -> Optional[Path]:
    """The cache folder, or None when caching is off."""
    if os.environ.get("CHOREO_PY_NO_CACHE"):
        return None
    explicit = os.environ.get("CHOREO_PY_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "choreo-py" / "kernels"


@functools.lru_cache(maxsize=1)
def compiler_version() -> str:
    """choreo-py's version, a hash of its code, pyptx's version, ptxas's version line.

    Computing it reads every source file, imports importlib.metadata and runs
    `ptxas --version`: ~0.1 s, which a load served from the cache would spend on it in
    every new process. So it is kept in the cache under a fingerprint of the same
    inputs' file stats (path, size, mtime in ns: our sources, pyptx's, the ptxas binary),
    and recomputed only when one of them changes."""
    root = cache_dir()
    stamp = root / "versions" / _fingerprint() if root is not None else None
    if stamp is not None:
        try:
            return stamp.read_text(encoding="utf-8")
        except OSError:
            pass
    version = _compiler_version()
    if stamp is not None:
        write_whole(stamp, version)
    return version


def _source_roots() -> list[Path]:
    pkg = Path(__file__).resolve().parents[1]   # choreo_py/
    backends = pkg / "lowering"
    if not backends.is_dir():  # an editable checkout: the backends live in lowering/
        backends = pkg.parent / "lowering"
    return [pkg, backends]


def _sources(root: Path) -> list[Path]:
    return sorted(root.rglob("*.py")) + sorted(root.rglob("*.lark"))


def _fingerprint() -> str:
    """A hash of the stats of every file compiler_version() depends on."""
    import importlib.util

    from .toolchain import find_ptxas

    h = hashlib.sha256()
    spec = importlib.util.find_spec("pyptx")
    pyptx_roots = [Path(p) for p in (spec.submodule_search_locations or [])] if spec else []
    for root in _source_roots() + pyptx_roots:
        for f in _sources(root):
            st = f.stat()
            h.update(f"{f}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    exe = find_ptxas()
    if exe is not None:
        st = os.stat(exe)
        h.update(f"{exe}\0{st.st_size}\0{st.st_mtime_ns}".encode())
    return h.hexdigest()[:32]


def _compiler_version() -> str:
    from importlib import metadata

    from choreo_py.version import __version__

    h = hashlib.sha256()
    for root in _source_roots():
        for f in _sources(root):
            h.update(str(f.relative_to(root)).encode())
            h.update(f.read_bytes())
    try:
        pyptx = metadata.version("pyptx")
    except metadata.PackageNotFoundError:
        pyptx = "?"
    return f"{__version__}+{h.hexdigest()[:16]} pyptx {pyptx} ptxas {_ptxas_version()}"


def _ptxas_version() -> str:
    from .toolchain import find_ptxas

    exe = find_ptxas()
    if exe is None:
        return "none"
    try:
        out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.strip().splitlines()[-1] if out.strip() else "unknown"


def kernel_key(preprocessed: str, defines: Optional[dict], include_dirs: Iterable[str],
               target: str) -> str:
    blob = json.dumps({"format": FORMAT, "source": preprocessed,
                       "defines": sorted((defines or {}).items()),
                       "include": [str(d) for d in include_dirs], "target": target,
                       "compiler": compiler_version()}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


class Entry:
    """One kernel's folder: read what is there, add what is made."""

    def __init__(self, root: Path, key: str) -> None:
        self.path = root / key[:2] / key

    def read(self, what: str):
        f = self.path / FILES[what]
        try:
            data = f.read_bytes()
        except OSError:
            return None
        return data if what == "cubin" else data.decode("utf-8")

    def write(self, what: str, data) -> None:
        """Best effort: a cache that cannot be written only costs time."""
        raw = data if isinstance(data, bytes) else data.encode("utf-8")
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            tmp = self.path / f"{FILES[what]}.{os.getpid()}.tmp"
            tmp.write_bytes(raw)
            os.replace(tmp, self.path / FILES[what])
        except OSError:
            pass


def entry_for(preprocessed: str, defines, include_dirs, target: str) -> Optional[Entry]:
    root = cache_dir()
    if root is None:
        return None
    return Entry(root, kernel_key(preprocessed, defines, include_dirs, target))


def write_whole(path: Path, text: str) -> None:
    """Best effort, written whole (a temporary name, renamed): a reader sees all or none."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        pass
