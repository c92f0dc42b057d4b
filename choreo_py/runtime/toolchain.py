"""Where the CUDA tools the project runs on the CPU are: ptxas (build.py assembles with
it, cache.py names its version, pairing.py probes with it). A leaf of runtime/, so that
each of them can import it (build.find_ptxas is the same function)."""
from __future__ import annotations

import os
import shutil


def find_ptxas() -> str | None:
    """The ptxas the project uses, everywhere: the one on PATH, else the CUDA default."""
    for cand in (shutil.which("ptxas"), "/usr/local/cuda/bin/ptxas"):
        if cand and os.path.isfile(cand):
            return cand
    return None
