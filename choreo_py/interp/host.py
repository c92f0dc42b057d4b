"""A `__co__` function as a host program on the CPU: allocate, launch in order, return.

The function's host buffers (`ir.Function.locals`) are allocated (zeroed, or
filled with their initialiser: runner.allocate) with the shapes their
declarations give (symbolic dimensions bound from the arguments), its
kernels run in the order of their `Launch` statements, and
the buffer it returns is the call's result. Arguments are given in the
order the parameters are written: tensors for tensor parameters, integers
for scalar ones (which the IR knows as dimensions; a float parameter takes a float).
"""
from __future__ import annotations

from typing import Optional

from .. import ir
import torch

from ..host import binding
from ..host.execute import function_result

from .runner import RunStats, allocate, interpret_module
from .scalars import TORCH_DTYPES, round_to


#: what the interpreter takes (host/binding.py): its element types' tensors (unsigned types
#: widened), on the CPU or a GPU (torch computes the tiles where the tensors are)
INTERPRETER = binding.Engine("the interpreter", TORCH_DTYPES, ("cpu", "cuda"))


def bind_args(fn: ir.Function, args: tuple, kwargs: dict,
              engine: binding.Engine = INTERPRETER) -> tuple[dict, dict]:
    """(tensors by parameter name, dimensions by name) from a call's arguments, checked
    (host/binding.py) for the engine that runs the call."""
    names = fn.arg_names or [p.name for p in fn.params]
    if len(args) > len(names):
        raise TypeError(f"{fn.name}() takes {len(names)} arguments ({len(args)} given)")
    given = dict(zip(names, args))
    for k, v in kwargs.items():
        if k in given:
            raise TypeError(f"{fn.name}() got two values for '{k}'")
        given[k] = v
    tensor_names = {p.name for p in fn.params}
    tensors = {k: v for k, v in given.items() if k in tensor_names}
    others = {k: v for k, v in given.items() if k not in tensor_names}
    sizes = [d.name for p in fn.params for d in p.shape if isinstance(d, ir.Sym)]
    binding.check_names(fn.name, [p.name for p in fn.params], given,
                        [n for n in names if n not in tensor_names] + sizes)
    floats = {x.name: x.dtype for k in fn.kernels for x in k.scalars
              if x.dtype in ("f32", "f16", "bf16")}
    dims = {k: _scalar(k, v, floats.get(k)) for k, v in others.items()}
    binding.bind(fn.name, binding.slots(fn.params), tensors, engine, dims)
    return tensors, dims


def _scalar(name: str, value, float_type: Optional[str]):
    """A scalar argument: an int, or for a float parameter its value rounded to the type."""
    if isinstance(value, torch.Tensor) and value.numel() != 1:
        raise binding.BindingError(f"{name}: a scalar argument, got a tensor of "
                                   f"{value.numel()} elements")
    if float_type is None:
        return int(value)
    return float(round_to(torch.tensor(float(value)), float_type))


def call_function(module: ir.Module, fn: ir.Function, args: tuple, kwargs: dict,
                  stats: Optional[RunStats] = None, **run_options):
    """Runs `fn` with the caller's arguments in the interpreter; returns its result tensor
    (None for a function that returns nothing)."""
    tensors, dims = bind_args(fn, args, kwargs)
    bound = allocate(fn, tensors, dims)
    kernel_dims = {k: v for k, v in bound.items() if k not in {p.name for p in fn.params}}
    values: dict = {}
    st = interpret_module(module, tensors, function=fn.name, host_values=values,
                          **run_options, **kernel_dims)
    if stats is not None:
        stats.blocks += st.blocks
        stats.statements += st.statements
    return function_result(fn, tensors, values)

