"""Host programs on the GPU: a file of several kernels as Python callables.

The generated module of a file of thread kernels (lowering/core/simt.py), or
of several kernels some of which are MMA kernels (lowering/core/program.py),
holds `KERNELS`: per kernel its tensors (pointers) or, for an MMA kernel, its
PARAMS (tensor maps), its dimensions, grid() and block size. A call of a
`__co__` function binds its arguments, allocates its host buffers on the
arguments' device, launches its kernels in order on torch's current stream
(a `: device(cpu)` region runs on the host in its place: run_on_host) and
returns its result. The module is assembled once per device (one cubin, an
entry per kernel).
"""
from __future__ import annotations

import ctypes
import os
import struct

from choreo_py import ir
from choreo_py.host import Library

from . import build


def torch_dtypes() -> dict:
    """Element types -> torch dtypes of the same width (the GPU reads the bits)."""
    import torch

    return {"bool": torch.bool, "s8": torch.int8, "u8": torch.uint8, "s16": torch.int16,
            "u16": torch.uint16, "s32": torch.int32, "u32": torch.uint32, "s64": torch.int64,
            "u64": torch.uint64, "f16": torch.float16, "bf16": torch.bfloat16,
            "f32": torch.float32, "f64": torch.float64, "f8_e4m3": torch.float8_e4m3fn,
            "f8_e5m2": torch.float8_e5m2}


class ThreadProgram:
    """The compiled kernels of one file and their launches."""

    def __init__(self, path: str, target: str, module: ir.Module, text: str) -> None:
        self.path, self.target, self.module, self.text = path, target, module, text
        self.loaded = build.run_module(text, f"<choreo {os.path.basename(path)}>")
        self.kernels = self.loaded.KERNELS
        self._cuda: dict = {}  # (device, kernel) -> CudaKernel

    def ptx(self) -> str:
        return self.loaded.ptx()

    def _kernel(self, name: str, device):
        from .launch import CudaKernel

        key = (str(device), name)
        if key not in self._cuda:
            if "cubin" not in self.__dict__:
                self.cubin = build.ptxas(self.ptx(), self.target)[0]
            info = self.kernels[name]
            self._cuda[key] = CudaKernel(self.cubin, info.get("ENTRY", name),
                                         info["SMEM_BYTES"], device)
        return self._cuda[key]

    def call(self, fn: ir.Function, args: tuple, kwargs: dict):
        import torch

        from choreo_py.interp.host import bind_args
        from choreo_py.interp.runner import allocate

        tensors, dims = bind_args(fn, args, kwargs)
        device = next(iter(tensors.values())).device if tensors else torch.device("cuda")
        for name, t in tensors.items():
            if t.device != device or not t.is_contiguous():
                raise ValueError(f"'{name}' must be a contiguous tensor on {device}")
        bound = allocate(fn, tensors, dims, device=device, dtypes=torch_dtypes())
        stream = torch.cuda.current_stream(device).cuda_stream
        for s in fn.body:
            if isinstance(s, ir.Print):  # after the device's work (and its printf) so far
                from choreo_py.interp.printing import host_print

                torch.cuda.synchronize(device)
                host_print(s, bound)
            if not isinstance(s, ir.Launch):
                continue
            kernel = self.module.kernel(s.kernel)
            if kernel is not None and kernel.device == "cpu":
                run_on_host(kernel, tensors, bound, device)
            else:
                self._launch(s.kernel, tensors, bound, device, stream)
        return tensors[fn.result] if fn.result is not None else None

    def _launch(self, name: str, tensors: dict, dims: dict, device, stream: int) -> None:
        info = self.kernels[name]
        if "PARAMS" in info:  # an MMA kernel: tensor maps and dimensions (program.py)
            from .launch import kernel_param

            params = [kernel_param(p, tensors, dims) for p in info["PARAMS"]]
        else:
            params = [ctypes.c_uint64(tensors[t].data_ptr()) for t in info["TENSORS"]]
            params += [ctypes.c_uint32(scalar_word(dims[d])) for d in info["DIMS"]]
        grid = info["grid"](**{d: dims[d] for d in info["DIMS"]})
        k = self._kernel(name, device)
        k.launch(grid, info["THREADS"], k.pack(params), stream)


def scalar_word(value) -> int:
    """The 32-bit kernel argument of a dimension or scalar: an int as it is (two's
    complement), a float (a float parameter's value, interp.host.bind_args) as its f32 bits."""
    if isinstance(value, float):
        return struct.unpack("<I", struct.pack("<f", value))[0]
    return int(value) & 0xFFFFFFFF


def run_on_host(kernel: ir.Kernel, tensors: dict, dims: dict, device) -> None:
    """A `: device(cpu)` region: after the work queued before it, on the host's copies of
    its tensors (the interpreter's executor runs it), its writes copied back."""
    import torch

    from choreo_py.interp.runner import run_kernel
    from choreo_py.interp.scalars import TORCH_DTYPES

    if torch.device(device).type == "cuda":
        torch.cuda.current_stream(device).synchronize()
    host = {p.name: tensors[p.name].cpu().to(TORCH_DTYPES[p.dtype]) for p in kernel.params}
    run_kernel(kernel, host, {d: dims[d] for d in kernel.symbolic_dims})
    for name, t in host.items():
        tensors[name].copy_(t.to(tensors[name].dtype))


def library(path: str, target: str, program, rec, first_error=None) -> Library:
    """The file's functions as callables on the GPU, each compiled on its first call (for
    the call's shapes where it needs them). `first_error`: the whole file did not build;
    unless some function can (or may, once its dimensions are known), it is raised here."""
    from choreo_py.host.specialize import Functions

    funcs = Functions(program, rec, strict=True)
    if first_error is not None and not (_only_shape_limits(first_error)
                                        and _some_function_may_build(funcs)):
        raise first_error
    programs: dict[int, ThreadProgram] = {}

    def run(name, args, kwargs):
        fn = funcs.get(name, args, kwargs)
        if id(fn) not in programs:
            module = funcs.module(fn)
            text = build.pyptx_text(module, path, target)
            if "\nKERNELS = {}" not in text:  # one MMA kernel: as an entry of a program
                text = build.program_text(module, path, target)
            programs[id(fn)] = (fn, ThreadProgram(path, target, module, text))
        return programs[id(fn)][1].call(fn, args, kwargs)

    return Library({n: funcs.arg_names(n) for n in funcs.names()}, run, os.path.basename(path))


#: What a whole-file, shape-generic build may report that a function built on its own, or
#: for a call's shapes, need not: a construct refused by name, a size known only at run time.
_DEFERRABLE = ("is not supported by the tile IR yet", "must be a compile-time integer")


def _only_shape_limits(error) -> bool:
    msgs = [d.message for d in error.diagnostics] or [str(error)]
    return all(any(m in msg for m in _DEFERRABLE) for msg in msgs)


def _some_function_may_build(funcs) -> bool:
    from choreo_py.frontend import ast as A

    for name in funcs.names():
        try:
            funcs.get(name)
            return True
        except Exception:  # noqa: BLE001 - a refusal: see whether the shapes would help
            params = funcs.ast[name].params
            if any(isinstance(p.type, A.TypeRef) or any(isinstance(d, A.Name) for d in
                   (p.type.dims or [])) for p in params if p.name):
                return True
    return False
