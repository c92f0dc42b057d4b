"""The one check of a call's tensors against a function's parameters.

The interpreter (`interpret`, its library calls), the emulator (`emulate`,
`emulate_program`) and the GPU runtime (`load()`) all bind a call here, so
a tensor that does not fit is refused before anything runs, with the same
words whichever runs it: the parameter's name and the rule it breaks (its
dtype, rank, sizes, contiguity, device; a tensor missing, one too many, or
something that is no tensor). An engine says what it takes (`Engine`: its
element types' torch dtypes and the devices it runs on); the rest is one
rule for all. A refusal is a `BindingError`: a ChoreoRuntimeError (what
`load()` always raised) and a UsageError (what the command lines report
as a usage error).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Optional, Sequence

from ..diagnostics import ChoreoRuntimeError, UsageError


class BindingError(ChoreoRuntimeError, UsageError):
    """A call's argument that does not fit the function's parameter."""


@dataclass(frozen=True)
class Engine:
    """What runs the call: its name in messages, the torch dtype of each element type it
    reads, the device types its tensors live on (in order of preference)."""
    name: str
    dtypes: Mapping
    devices: tuple = ("cpu",)


#: a parameter: (name, element type, sizes: an int or a dimension's name each)
Slot = tuple


def slots(params) -> list[Slot]:
    """The slots of ir.Params (a constant size as its int, a symbolic one as its name)."""
    from .. import ir

    return [(p.name, p.dtype, tuple(d.name if isinstance(d, ir.Sym) else int(d.value)
                                    for d in p.shape)) for p in params]


def bind(fname: str, params: Sequence[Slot], tensors, engine: Engine,
         dims: Optional[Mapping] = None, extra: Sequence[str] = ()) -> dict:
    """Checks `tensors` (parameter name -> tensor) against `params`; returns the dimensions
    their shapes give (checked against `dims`). `extra`: other names the call may give
    (scalar arguments)."""
    names = [p[0] for p in params]
    if not isinstance(tensors, Mapping):
        raise BindingError(f"{fname}: the tensors are given as a dict of parameter name -> "
                           f"tensor ({', '.join(names)}), not as a {type(tensors).__name__}")
    check_names(fname, names, tensors, extra)
    missing = [n for n in names if n not in tensors]
    if missing:
        raise BindingError(f"no tensor for parameter {', '.join(map(repr, missing))} of "
                           f"{fname} (its parameters: {', '.join(names)})")
    bound = {k: v for k, v in (dims or {}).items()}
    device = None
    for name, dtype, shape in params:
        t = tensors[name]
        _tensor(name, t, dtype, shape, engine, fname)
        device = _device(name, t, device, engine)
        for axis, (size, want) in enumerate(zip(t.shape, shape)):
            _size(name, axis, int(size), want, shape, bound, fname)
    return bound


def check_names(fname: str, names: Sequence[str], given, extra: Sequence[str] = ()) -> None:
    """A name the call gives that is no parameter of the function (nor one of `extra`: its
    dimensions and scalar arguments, where the call may give them)."""
    unknown = [n for n in given if n not in names and n not in extra]
    if unknown:
        raise BindingError(f"{fname} has no parameter {', '.join(_show(n) for n in unknown)} "
                           f"(its parameters: {', '.join(names)})")


def _show(name) -> str:
    """A name as a message quotes it (a non-string key by its type alone: no tensor dumps)."""
    return repr(name) if isinstance(name, str) else f"<a {type(name).__name__} key>"


def _tensor(name, t, dtype, shape, engine: Engine, fname: str) -> None:
    import torch

    if not isinstance(t, torch.Tensor):
        kind = type(t)
        what = f"{kind.__module__}.{kind.__name__}" if kind.__module__ != "builtins" \
            else kind.__name__
        raise BindingError(f"{name}: expected a torch.Tensor, got {what}")
    want = engine.dtypes.get(dtype)
    if t.dtype != want:
        raise BindingError(f"{name}: dtype {t.dtype}, {fname} takes {want} ({dtype})")
    if t.dim() != len(shape):
        raise BindingError(f"{name}: {t.dim()} dimensions, {fname} takes {len(shape)} "
                           f"{list(shape)}")
    if not t.is_contiguous():
        raise BindingError(f"{name}: not contiguous (call .contiguous())")


def _device(name, t, device, engine: Engine):
    if t.device.type not in engine.devices:
        raise BindingError(f"{name}: on {t.device}; {engine.name} takes tensors on "
                           f"{' or '.join(engine.devices)}")
    if device is not None and t.device != device:
        raise BindingError(f"{name}: on {t.device}, the other tensors on {device}")
    return t.device


def _size(name, axis: int, size: int, want, shape, bound: dict, fname: str) -> None:
    if isinstance(want, int):
        if size != want:
            raise BindingError(f"{name}: dimension {axis} is {size}, {fname} takes {want} "
                               f"({list(shape)})")
    elif bound.setdefault(want, size) != size:
        raise BindingError(f"{name}: dimension {axis} ({want}) is {size}, but {want} = "
                           f"{bound[want]} (given by an earlier tensor or the call)")
