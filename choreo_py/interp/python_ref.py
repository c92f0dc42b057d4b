"""`choreo run --ref MODULE:FUNCTION`: a reference written in Python.

The named checks (`--check matmul`, `sdpa`, ...) cover the usual kernels; a
kernel with an epilogue of its own (a ReLU, a bias, a scale) needs its own
reference. FUNCTION is called with the function's parameters as keyword
arguments (CPU tensors, float32 copies; outputs are absent) and returns the
expected output: a tensor when the kernel writes one parameter, or a dict
{parameter name: tensor}. MODULE is an importable module name or a path to
a `.py` file (relative to the current directory).
"""
from __future__ import annotations

import importlib
import importlib.util
import os
import sys

import torch

from .api import UsageError


def load_reference(spec: str, option: str = "--ref"):
    """The callable named by `module:function` (a usage error if it is not one); `option`
    names the command-line option in the messages (`choreo tune --timer` loads one too)."""
    module_name, sep, func_name = spec.rpartition(":")
    if not sep or not module_name or not func_name:
        raise UsageError(f"{option} {spec}: expected MODULE:FUNCTION "
                         f"(e.g. {option} refs.py:gemm_relu)")
    try:
        if module_name.endswith(".py") or os.sep in module_name:
            loaded = importlib.util.spec_from_file_location("choreo_ref", module_name)
            if loaded is None or not os.path.isfile(module_name):
                raise UsageError(f"{option} {spec}: cannot read '{module_name}'")
            module = importlib.util.module_from_spec(loaded)
            loaded.loader.exec_module(module)
        else:
            if os.getcwd() not in sys.path:
                sys.path.insert(0, os.getcwd())
            module = importlib.import_module(module_name)
    except UsageError:
        raise
    except Exception as err:  # noqa: BLE001 - the user's module: any failure is theirs
        raise UsageError(f"{option} {spec}: importing '{module_name}' failed: "
                         f"{type(err).__name__}: {err}") from None
    fn = getattr(module, func_name, None)
    if not callable(fn):
        raise UsageError(f"{option} {spec}: '{module_name}' has no function '{func_name}'")
    return fn


def python_reference(spec: str, inputs: dict, reads: set[str], writes: set[str]):
    """{output name: expected float32 tensor} from the reference named by `spec`."""
    fn = load_reference(spec)
    args = {name: t.float().clone() for name, t in inputs.items() if name in reads}
    try:
        result = fn(**args)
    except Exception as err:  # noqa: BLE001
        raise UsageError(f"--ref {spec} raised {type(err).__name__}: {err}") from None
    if isinstance(result, torch.Tensor):
        outs = sorted(writes - reads) or sorted(writes)
        if len(outs) != 1:
            raise UsageError(f"--ref {spec} returned one tensor, but the kernel writes "
                             f"{', '.join(outs) or 'nothing'}: return a dict name -> tensor")
        result = {outs[0]: result}
    if not isinstance(result, dict) or not result:
        raise UsageError(f"--ref {spec} must return a tensor or a dict name -> tensor, "
                         f"not {type(result).__name__}")
    expected = {}
    for name, t in result.items():
        if name not in inputs:
            raise UsageError(f"--ref {spec} returned '{name}', which is not a parameter")
        t = torch.as_tensor(t).float()
        if tuple(t.shape) != tuple(inputs[name].shape):
            raise UsageError(f"--ref {spec}: '{name}' has shape {list(t.shape)}, the parameter "
                             f"{list(inputs[name].shape)}")
        expected[name] = t
    return expected
