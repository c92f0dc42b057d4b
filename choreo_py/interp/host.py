"""A `__co__` function as a host program on the CPU: allocate, launch in order, return.

The function's host buffers (`ir.Function.locals`) are allocated (zeroed,
or filled with their initialiser) with the shapes their declarations give (symbolic dimensions bound from the
arguments), its kernels run in the order of their `Launch` statements, and
the buffer it returns is the call's result. Arguments are given in the
order the parameters are written: tensors for tensor parameters, integers
for scalar ones (which the IR knows as dimensions).
"""
from __future__ import annotations

from typing import Optional

import torch

from .. import ir
from .errors import InterpError
from .runner import RunStats, interpret_module, bind_dims
from .scalars import TORCH_DTYPES


def bind_args(fn: ir.Function, args: tuple, kwargs: dict) -> tuple[dict, dict]:
    """(tensors by parameter name, dimensions by name) from a call's arguments."""
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
    dims = {k: int(v) for k, v in given.items() if k not in tensor_names}
    missing = [p.name for p in fn.params if p.name not in tensors]
    if missing:
        raise TypeError(f"{fn.name}() is missing the tensor(s) {', '.join(missing)}")
    return tensors, dims


def allocate(fn: ir.Function, tensors: dict, dims: dict, device=None,
             dtypes: Optional[dict] = None) -> dict[str, int]:
    """Binds every dimension from the arguments and adds the zeroed host buffers to `tensors`;
    returns the dimensions. `dtypes`: the torch dtype of each element type (default: the
    interpreter's, which widens unsigned types; a GPU needs the exact widths)."""
    probe = ir.Kernel(fn.name, list(fn.params), [], loc=fn.loc)
    if dtypes is None:
        bound = bind_dims(probe, tensors, dims) if fn.params else dict(dims)
    else:
        bound = dict(dims)
        for p in fn.params:
            t = tensors[p.name]
            if t.dtype != dtypes.get(p.dtype) or t.dim() != len(p.shape):
                raise InterpError(f"'{p.name}' must be a {p.dtype} tensor of rank "
                                  f"{len(p.shape)}", p.loc)
            for d, n in zip(p.shape, t.shape):
                if isinstance(d, ir.Sym) and bound.setdefault(d.name, int(n)) != n:
                    raise InterpError(f"'{p.name}' has {d.name} = {n}, but {d.name} = "
                                      f"{bound[d.name]} elsewhere", p.loc)
                if isinstance(d, ir.Const) and d.value != n:
                    raise InterpError(f"'{p.name}' dimension is {n}, the function needs "
                                      f"{d.value}", p.loc)
    table = dtypes or TORCH_DTYPES
    for p in fn.locals:
        shape = []
        for d in p.shape:
            if isinstance(d, ir.Sym):
                if d.name not in bound:
                    raise InterpError(f"the dimension '{d.name}' of '{p.name}' is not bound "
                                      "by the arguments", p.loc)
                shape.append(bound[d.name])
            else:
                shape.append(int(d.value))
        where = device if device is not None else _device(tensors)
        tensors[p.name] = _filled(shape, table[p.dtype], where,
                                  p.init.value if p.init is not None else 0)
    return bound


#: Unsigned dtypes that torch creates and fills only as their signed twin (same bits).
_SIGNED_TWIN = {getattr(torch, n): t for n, t in (("uint16", torch.int16), ("uint32", torch.int32),
                                                  ("uint64", torch.int64)) if hasattr(torch, n)}


def _filled(shape, dtype, device, value):
    """A tensor of `value`s; unsigned 16..64-bit ones are filled through their signed twin
    (CUDA kernels for filling them may be missing) and viewed back."""
    twin = _SIGNED_TWIN.get(dtype)
    if twin is None:
        return torch.full(shape, value, dtype=dtype, device=device)
    bits = torch.iinfo(twin).bits
    signed = value - (1 << bits) if value >= 1 << (bits - 1) else value
    return torch.full(shape, signed, dtype=twin, device=device).view(dtype)


def _device(tensors: dict):
    return next((t.device for t in tensors.values() if isinstance(t, torch.Tensor)), "cpu")


def call_function(module: ir.Module, fn: ir.Function, args: tuple, kwargs: dict,
                  stats: Optional[RunStats] = None, **run_options):
    """Runs `fn` with the caller's arguments in the interpreter; returns its result tensor
    (None for a function that returns nothing)."""
    tensors, dims = bind_args(fn, args, kwargs)
    bound = allocate(fn, tensors, dims)
    kernel_dims = {k: v for k, v in bound.items() if k not in {p.name for p in fn.params}}
    st = interpret_module(module, tensors, function=fn.name, **run_options, **kernel_dims)
    if stats is not None:
        stats.blocks += st.blocks
        stats.statements += st.statements
    return tensors[fn.result] if fn.result is not None else None
