# lit configuration of the FileCheck suite (tests/lit/): each .co file carries its
# own RUN: lines (how to run the compiler on it) and CHECK: lines (what the output
# must contain, in order), as in LLVM, MLIR and Triton. Run from the repository:
#
#     lit -v tests/lit            (tests/test_lit.py does this under pytest)
#
# Substitutions: %choreo is this Python running the compiler (`python -m choreo_py`),
# %FileCheck the `filecheck` of the same environment; `not` is lit's own.
import os
import shutil
import sys

import lit.formats

config.name = "choreo-py"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".co"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.test_source_root, ".lit_out")
config.excludes = ["Inputs"]

root = os.path.dirname(os.path.dirname(config.test_source_root))
bindir = os.path.dirname(sys.executable)
filecheck = shutil.which("filecheck", path=bindir) or shutil.which("filecheck")
if filecheck is None:
    lit_config.fatal("filecheck not found (pip install filecheck)")
config.substitutions.append(("%choreo", f'"{sys.executable}" -m choreo_py'))
config.substitutions.append(("%FileCheck", f'"{filecheck}"'))
config.environment["PYTHONPATH"] = root + os.pathsep + os.environ.get("PYTHONPATH", "")
for var in ("HOME", "XDG_CACHE_HOME", "CHOREO_PY_NO_CACHE", "CHOREO_PY_CACHE_DIR", "PATH"):
    if var in os.environ:
        config.environment[var] = os.environ[var]
if shutil.which("ptxas", path=os.environ.get("PATH")):
    config.available_features.add("ptxas")
