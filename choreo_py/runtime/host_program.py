"""Host programs on the GPU: a file of several kernels as Python callables.

The generated module of a file of thread kernels (lowering/core/simt.py), or
of several kernels some of which are MMA kernels (lowering/core/program.py),
holds `KERNELS`: per kernel its tensors (pointers) or, for an MMA kernel, its
PARAMS (tensor maps), its dimensions, grid() and block size. A call of a
`__co__` function binds its arguments, allocates its host buffers on the
arguments' device, launches its kernels in order on torch's current stream
(a `: device(cpu)` region runs on the host in its place: run_on_host) and
returns its result. The host statements around the launches (loops, branches,
host scalars, prints, whole-tensor copies) run as host/execute.py defines them,
the interpreter's semantics: a launch inside a host loop passes that
iteration's values as the kernel's scalar arguments. The module is assembled
once per device (one cubin, an entry per kernel).
"""
from __future__ import annotations

import ctypes
import os
import struct

from choreo_py import ir, targets
from choreo_py.ir import subbyte
from choreo_py.host import Library
from choreo_py.host import binding
from choreo_py.host.execute import HostRun, function_result

from . import build
from .launch import word


def torch_dtypes() -> dict:
    """Element types -> torch dtypes of the same width (the GPU reads the bits)."""
    import torch

    return {"bool": torch.bool, "s8": torch.int8, "u8": torch.uint8, "s16": torch.int16,
            "u16": torch.uint16, "s32": torch.int32, "u32": torch.uint32, "s64": torch.int64,
            "u64": torch.uint64, "f16": torch.float16, "bf16": torch.bfloat16,
            "f32": torch.float32, "f64": torch.float64, "f8_e4m3": torch.float8_e4m3fn,
            "f8_e5m2": torch.float8_e5m2,
            # sub-byte types: a uint8 code per element (choreo_py/ir/subbyte.py)
            **{t: torch.uint8 for t in subbyte.TYPES}}


class ThreadProgram:
    """The compiled kernels of one file and their launches. `launcher(program)` makes what
    runs each launch: CudaLauncher (the GPU, by default), or the PTX emulator's
    (choreo_py/emu/program.py), which runs the same launches on CPU tensors."""

    def __init__(self, path: str, target: str, module: ir.Module, text: str,
                 launcher=None) -> None:
        self.path, self.target, self.module, self.text = path, target, module, text
        self.filename = f"<choreo {os.path.basename(path)}>"  # of the module's code objects
        self.loaded = build.run_module(text, self.filename)
        self.kernels = self.loaded.KERNELS
        self._make_launcher = launcher or CudaLauncher
        self.launcher = self._make_launcher(self)
        self.cooperative: frozenset = frozenset()  # tensors its MMA kernels copy without TMA
        self._builds: dict = {}

    def for_launch(self, name: str, tensors: dict) -> "ThreadProgram":
        """The build that runs this launch: this one, or (for tensors whose rows TMA cannot
        copy: strides not 16-byte multiples) the one whose kernels copy them with the
        threads (lowering/core/tma_fallback.py), built once."""
        from .launch import unaligned_tmaps

        info = self.kernels[name]
        names = unaligned_tmaps(info.get("PARAMS", ()), tensors) | self.cooperative
        if names <= self.cooperative:
            return self
        if names not in self._builds:
            text = build.program_text(self.module, self.path, self.target, names)
            other = ThreadProgram(self.path, self.target, self.module, text, self._make_launcher)
            other.cooperative = names
            self._builds[names] = other
        return self._builds[names]

    def ptx(self) -> str:
        return self.loaded.ptx()

    def call(self, fn: ir.Function, args: tuple, kwargs: dict):
        from choreo_py.interp.host import bind_args
        from choreo_py.interp.runner import allocate, check_assert

        engine = binding.Engine(self.launcher.engine_name, torch_dtypes(), self.launcher.devices)
        tensors, dims = bind_args(fn, args, kwargs, engine)
        device = self.launcher.device(tensors)
        bound = allocate(fn, tensors, dims, device=device, dtypes=torch_dtypes())

        def launch(s: ir.Launch, env: dict) -> None:
            kernel = self.module.kernel(s.kernel)
            if kernel is not None and kernel.device == "cpu":
                run_on_host(kernel, tensors, env, device)
            else:
                self.launcher.launch(s.kernel, tensors, env, device)

        def show(s: ir.Print, env: dict) -> None:  # after the device's work (and printf)
            from choreo_py.interp.printing import host_print

            self.launcher.sync(device)
            host_print(s, env)

        def copy(s: ir.DmaCopy, env: dict) -> None:  # on the stream, after the launches
            tensors[s.dst.base].copy_(tensors[s.src.base])

        run = HostRun(dict(bound), launch, show, check_assert, copy)
        run.run(fn.body)
        return function_result(fn, tensors, run.env)


class HostLauncher:
    """What runs a function of host code only (no kernel: its scalars, loops and prints):
    nothing to launch or wait for, so it needs no GPU; its buffers live on the arguments'
    device (the CPU when it has none)."""

    def __init__(self, program: ThreadProgram) -> None:
        self.program = program

    @staticmethod
    def device(tensors: dict):
        import torch

        return next(iter(tensors.values())).device if tensors else torch.device("cpu")

    engine_name, devices = "a host function", ("cpu", "cuda")

    @staticmethod
    def sync(device) -> None:
        if device is not None and device.type == "cuda":
            import torch

            torch.cuda.synchronize(device)


class CudaLauncher:
    """Launches a program's kernels on a CUDA device, on torch's current stream (the module
    assembled by ptxas once, loaded once per device)."""

    def __init__(self, program: ThreadProgram) -> None:
        self.program = program
        self._cuda: dict = {}  # (device, kernel) -> CudaKernel
        self._cubin = None

    @staticmethod
    def device(tensors: dict):
        import torch

        return next(iter(tensors.values())).device if tensors else torch.device("cuda")

    engine_name, devices = "a CUDA kernel", ("cuda",)  # what host/binding.py checks for

    @staticmethod
    def sync(device) -> None:
        import torch

        torch.cuda.synchronize(device)

    def _kernel(self, name: str, device):
        from .launch import CudaKernel

        key = (str(device), name)
        if key not in self._cuda:
            if self._cubin is None:
                self._cubin = build.ptxas(self.program.ptx(), self.program.target)[0]
            info = self.program.kernels[name]
            self._cuda[key] = CudaKernel(self._cubin, info.get("ENTRY", name),
                                         info["SMEM_BYTES"], device)
        return self._cuda[key]

    def launch(self, name: str, tensors: dict, dims: dict, device) -> None:
        import torch

        other = self.program.for_launch(name, tensors)
        if other is not self.program:
            return other.launcher.launch(name, tensors, dims, device)
        info = self.program.kernels[name]
        if "PARAMS" in info:  # an MMA kernel: tensor maps and dimensions (program.py)
            from .launch import kernel_param

            params = [kernel_param(p, tensors, dims) for p in info["PARAMS"]]
        else:
            if info.get("COOPERATIVE"):  # the grid barrier's two words, zeroed on the stream
                import torch

                tensors = dict(tensors, __grid_sync=torch.zeros(2, dtype=torch.int32,
                                                                device=device))
            params = [ctypes.c_uint64(tensors[t].data_ptr()) for t in info["TENSORS"]]
            params += [ctypes.c_uint32(word(dims[d])) for d in info["DIMS"]]
        grid = info["grid"](**{d: dims[d] for d in info["DIMS"]})
        k = self._kernel(name, device)
        if "SMEM_RUN" in info:  # shared buffers sized by this launch's dimensions
            k.resize_smem(targets.launch_smem(info, dims, self.program.target, name))
        stream = torch.cuda.current_stream(device).cuda_stream
        if info.get("COOPERATIVE"):
            k.launch_cooperative(name, grid, info["THREADS"], k.pack(params), stream)
        else:
            k.launch(grid, info["THREADS"], k.pack(params), stream)


def run_on_host(kernel: ir.Kernel, tensors: dict, dims: dict, device) -> None:
    """A `: device(cpu)` region: after the work queued before it, on the host's copies of
    its tensors (the interpreter's executor runs it), its writes copied back."""
    import torch

    from choreo_py.interp.runner import run_kernel
    from choreo_py.interp.scalars import TORCH_DTYPES

    if torch.device(device).type == "cuda":
        torch.cuda.current_stream(device).synchronize()
    host = {p.name: tensors[p.name].cpu().to(TORCH_DTYPES[p.dtype]) for p in kernel.params}
    st = run_kernel(kernel, host, {d: dims[d] for d in kernel.symbolic_dims})
    dims.update(st.host_writes or {})  # (`dims`: the host program's environment)
    for name, t in host.items():
        tensors[name].copy_(t.to(tensors[name].dtype))


def library(path: str, target: str, program, rec, first_error=None, launcher=None) -> Library:
    """The file's functions as callables on the GPU (or what `launcher` runs launches on:
    ThreadProgram), each compiled on its first call (for the call's shapes where it needs
    them). `first_error`: the whole file did not build; unless some function can (or may,
    once its dimensions are known), it is raised here."""
    from choreo_py.host.specialize import Functions

    funcs = Functions(program, rec, strict=True)
    if first_error is not None and not (_only_shape_limits(first_error)
                                        and _some_function_may_build(funcs)):
        raise first_error
    programs: dict[int, ThreadProgram] = {}
    needs_sizes: set[int] = set()  # generic IR the backend refused: built per call's sizes

    def compiled(fn) -> None:
        if id(fn) not in programs:
            module = funcs.module(fn)
            text = build.pyptx_text(module, path, target)
            if "\nKERNELS = {}" not in text:  # one MMA kernel: as an entry of a program
                text = build.program_text(module, path, target)
            runs = launcher or (None if any(f.kernels for f in module.functions) else HostLauncher)
            programs[id(fn)] = (fn, ThreadProgram(path, target, module, text, runs))

    def run(name, args, kwargs):
        from choreo_py.diagnostics import ChoreoError

        fn = funcs.get(name, args, kwargs)
        if id(fn) not in needs_sizes:
            try:
                compiled(fn)
            except ChoreoError:
                special = funcs.for_call(name, args, kwargs)
                if special is None or special is fn:
                    raise
                needs_sizes.add(id(fn))
        if id(fn) in needs_sizes:  # the lowering needs the sizes as numbers
            fn = funcs.for_call(name, args, kwargs)
            compiled(fn)
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
