"""`load(path)` -> a callable over torch tensors (see the package docstring)."""
from __future__ import annotations

import ctypes
import os
from typing import Iterable, Optional

from choreo_py.host import binding
from choreo_py.ir import subbyte

from . import build
from .launch import ChoreoRuntimeError, kernel_param, unaligned_tmaps

_TORCH_DTYPES = {"bf16": "bfloat16", "f16": "float16", "f32": "float32", "s32": "int32",
                 "u8": "uint8", "f64": "float64", "s64": "int64", "s8": "int8",
                 "u32": "uint32", "f8_e4m3": "float8_e4m3fn", "f8_e5m2": "float8_e5m2",
                 **{t: "uint8" for t in subbyte.TYPES}}  # sub-byte types: uint8 codes


_NOTHING = object()  # a launch with an empty grid


def _gpu_engine(devices=("cuda",)):
    import torch

    return binding.Engine("a CUDA kernel", {k: getattr(torch, v) for k, v in _TORCH_DTYPES.items()},
                          devices)


class ChoreoFunction:
    """A compiled kernel: call it with torch CUDA tensors (the parameters, in order).

    `.ptx` and `.pyptx_source` are its generated code, `.resources` what it uses
    of the GPU (ptxas -v: registers, spills, shared memory), `.op` the same
    kernel as a torch custom operator (torch.compile, CUDA graphs). `.from_cache`
    tells whether `load()` found it in the on-disk cache (runtime/cache.py).
    """

    def __init__(self, path: str, target: str, text: str, entry=None,
                 writes: Iterable[str] = ()) -> None:
        self.path = path
        self.target = target
        self.source = text  # the generated pyptx module
        self.meta = build.LaunchModule(text, os.path.basename(path) + ".pyptx.py")
        self.name = self.meta.ENTRY
        self.writes = tuple(writes)  # the parameters the kernel writes (its outputs)
        self._entry = entry
        self.from_cache = False
        self._ptx: Optional[str] = None
        self._cubin: Optional[bytes] = None
        self._op = None
        self.ptxas_log = ""
        self._loaded: dict = {}  # device index -> CudaKernel
        self._launches: dict = {}  # argument signature -> (kernel, grid, packed parameters)
        self.cooperative: frozenset = frozenset()  # tensors this build copies without TMA
        self._builds: dict = {}  # such tensors -> the build that copies them so
        self.include_dirs, self.defines = (), {}

    def __repr__(self) -> str:
        args = ", ".join(f"{n}: {d}{list(s)}" for n, d, s in self.meta.TENSORS)
        return f"<choreo kernel {self.name}({args}) for {self.target}>"

    # A file of one kernel gives this callable where others give a Library: the function
    # is also reached by its name, as a Library's are (`load(p).gemm`, `load(p)["gemm"]`).
    def __getitem__(self, name: str) -> "ChoreoFunction":
        if name != self.name:
            raise KeyError(f"{os.path.basename(self.path)} has one __co__ function, "
                           f"'{self.name}', and no '{name}'")
        return self

    def __getattr__(self, name: str):
        if name.startswith("_") or name != self.__dict__.get("name"):
            raise AttributeError(name)
        return self

    # ------------------------------------------------------------ build
    @property
    def pyptx_source(self) -> str:
        """The generated pyptx module (Python that traces to the PTX)."""
        return self.source

    @property
    def ptx(self) -> str:
        if self._ptx is None:
            self._ptx = self._entry.read("ptx") if self._entry is not None else None
            if self._ptx is None:
                self._ptx = self.meta.ptx()
                if self._entry is not None:
                    self._entry.write("ptx", self._ptx)
        return self._ptx

    def cubin(self) -> bytes:
        """The kernel assembled by ptxas (from the cache when it holds it)."""
        if self._cubin is None:
            if self._entry is not None:
                self._cubin = self._entry.read("cubin")
                self.ptxas_log = self._entry.read("ptxas_log") or ""
            if self._cubin is None or not self.ptxas_log:
                self._cubin, self.ptxas_log = build.ptxas(self.ptx, self.target, verbose=True)
                if self._entry is not None:
                    self._entry.write("ptxas_log", self.ptxas_log)
                    self._entry.write("cubin", self._cubin)
        return self._cubin

    @property
    def resources(self):
        """Registers, spills and shared memory per block (`Resources`), from ptxas -v
        (assembles the kernel if that has not happened yet: needs ptxas)."""
        from .resources import parse_ptxas_log

        self.cubin()
        return parse_ptxas_log(self.ptxas_log, self.meta.SMEM_BYTES)

    @property
    def op(self):
        """This kernel as a torch custom operator (`torch.ops.choreo.<name>_<hash>`):
        same arguments, the outputs mutated in place; see runtime/torch_op.py."""
        if self._op is None:
            from .torch_op import register

            self._op = register(self)
        return self._op

    def _kernel(self, device):
        from .launch import CudaKernel

        idx = device.index if device.index is not None else 0
        if idx not in self._loaded:
            self._check_device(device)
            self._loaded[idx] = CudaKernel(self.cubin(), self.name, self.meta.SMEM_BYTES, device)
        return self._loaded[idx]

    def _check_device(self, device) -> None:
        import torch

        major, minor = torch.cuda.get_device_capability(device)
        want = self.target.removeprefix("sm_").rstrip("a")
        if f"{major}{minor}" != want:
            raise ChoreoRuntimeError(f"{self.name} was compiled for {self.target}; "
                                     f"{torch.cuda.get_device_name(device)} is sm_{major}{minor}")

    # ------------------------------------------------------------ call
    def bind(self, tensors, devices=("cuda",)) -> dict:
        """Checks the arguments (host/binding.py: the rules every engine applies); returns
        the symbolic dimensions they give. (`devices`: autotune also binds CPU tensors,
        which its launches run through `.op`, in the interpreter.)"""
        spec = self.meta.TENSORS
        if len(tensors) != len(spec):
            names = ", ".join(n for n, _, _ in spec)
            raise ChoreoRuntimeError(f"{self.name}({names}) takes {len(spec)} tensors, "
                                     f"got {len(tensors)}")
        dims = binding.bind(self.name, spec, {n: t for (n, _, _), t in zip(spec, tensors)},
                            _gpu_engine(devices))
        for t, (name, dtype, shape) in zip(tensors, spec):
            if t.numel() and t.data_ptr() % 16:
                raise ChoreoRuntimeError(f"{name}: the data is not 16-byte aligned (TMA needs it)")
        for d, v in dims.items():
            if v >= 2**31:
                raise ChoreoRuntimeError(f"dimension {d} = {v} does not fit in 32 bits")
        return dims

    def check_assertions(self, dims: dict) -> None:
        """The program's `assert(...)`s on its sizes, before anything is launched."""
        check_entry_assertions(self.meta.namespace.get("failed_assertions"), dims)

    def __call__(self, *tensors) -> None:
        import torch

        # Calls with the same tensors (addresses, shapes, strides, dtypes) reuse the
        # checked launch: grid and parameter block are built once.
        key = tuple((t.data_ptr(), t.shape, t.stride(), t.dtype, t.device) if
                    isinstance(t, torch.Tensor) else id(t) for t in tensors)
        launch = self._launches.get(key)
        if launch is None:
            launch = self._prepare(tensors)
            if len(self._launches) >= 256:
                self._launches.clear()
            self._launches[key] = launch
        if launch is _NOTHING:
            return
        kern, grid, params = launch
        stream = torch.cuda.current_stream(tensors[0].device).cuda_stream
        kern.launch(grid, self.meta.THREADS, params, stream)

    def _prepare(self, tensors):
        dims = self.bind(tensors)
        self.check_assertions(dims)
        grid = tuple(int(g) for g in self.meta.grid(**dims))
        if any(g == 0 for g in grid) or any(t.numel() == 0 for t in tensors):
            return _NOTHING
        by_name = {name: t for t, (name, _, _) in zip(tensors, self.meta.TENSORS)}
        names = unaligned_tmaps(self.meta.PARAMS, by_name)
        if names and not names <= self.cooperative:  # rows TMA cannot copy: another build
            return self.build_for(names | self.cooperative)._prepare(tensors)
        kern = self._kernel(tensors[0].device)
        params = [self._param(p, by_name, dims) for p in self.meta.PARAMS]
        return kern, grid, kern.pack(params)

    @staticmethod
    def _param(p, tensors: dict, dims: dict):
        return kernel_param(p, tensors, dims)

    def build_for(self, names: frozenset) -> "ChoreoFunction":
        """The build of this kernel whose copies of `names` the threads make (their rows
        are not 16-byte multiples in a call); compiled once, cached as `load`'s are."""
        got = self._builds.get(names)
        if got is None:
            got = self._builds[names] = _cooperative_build(self, names)
        return got


def load(path: str, target: Optional[str] = None, include_dirs: Iterable[str] = (),
         defines: Optional[dict] = None, function: Optional[str] = None):
    """Compiles the kernel of a .co file for `target` (default: the GPU present, else
    sm_100a); returns a callable over torch tensors. A file of thread kernels
    (host programs: result buffers, several kernels or functions) gives a
    `host.Library`: `lib.name(a, b)` returns the function's result; with
    `function`, that one function.

    A kernel compiled before (same source after preprocessing, defines, target
    and compiler) is read from the on-disk cache instead (runtime/cache.py).
    Raises `choreo_py.ChoreoError` (located) for errors in the program.
    (`choreo_py.load` is runtime/__init__.py's, which also takes `autotune=`.)
    """
    from choreo_py import frontend, targets
    from choreo_py.diagnostics import ChoreoError, take_warnings
    from choreo_py.lowering.core import simt
    from choreo_py.passes import pipeline

    from . import cache

    rec = targets.resolve(target)
    target = rec.name
    include_dirs = tuple(include_dirs)
    take_warnings()  # this call reports its own file's warnings, not an earlier call's
    unit = frontend.preprocess(path, include_dirs, defines)
    _warn_python(take_warnings())  # e.g. a -D value the file redefines
    entry = cache.entry_for(os.path.basename(path) + "\0" + unit.text, defines, include_dirs,
                            target)
    text = entry.read("pyptx") if entry is not None else None
    writes = entry.read("writes") if entry is not None and text is not None else None
    if text is not None and writes is not None and function is None:
        fn = ChoreoFunction(path, target, text, entry, writes.split())
        fn.from_cache = True
    else:
        program = _checked(unit)
        try:
            module = pipeline.build_module(program, rec)
        except ChoreoError as e:  # perhaps some functions only (host/specialize.py)
            from .host_program import library

            lib = library(path, target, program, rec, first_error=e)
            return lib if function is None else lib[function]
        kernels = [k for f in module.functions for k in f.kernels]
        # (a function that returns nothing though it promises a value is a host
        # program: its call gives a MissingResult, host/missing_result.py)
        one_kernel = len(kernels) == 1 and not module.functions[0].locals \
            and module.functions[0].missing_return is None \
            and not _checks_host_values(module.functions[0])
        if not kernels or all(simt.is_thread_kernel(k) for k in kernels) or not one_kernel \
                or any(k.scalars for k in kernels):
            # a host program: host code only (no kernel), thread kernels, or several kernels
            # (MMA ones among them), or result buffers the call allocates, or scalar
            # arguments (runtime/host_program.py)
            from .host_program import library

            lib = library(path, target, program, rec)
            return lib if function is None else lib[function]
        text = build.pyptx_text(module, path, target)
        writes = _written_params(module)
        if entry is not None:
            entry.write("writes", " ".join(writes))
            entry.write("pyptx", text)
        fn = ChoreoFunction(path, target, text, entry, writes)
    fn.include_dirs, fn.defines = include_dirs, dict(defines or {})
    return fn


def _cooperative_build(fn: ChoreoFunction, names: frozenset) -> ChoreoFunction:
    from choreo_py import frontend, targets
    from choreo_py.passes import pipeline

    from . import cache

    rec = targets.resolve(fn.target)
    unit = frontend.preprocess(fn.path, fn.include_dirs, fn.defines or None)
    key = os.path.basename(fn.path) + "\0" + unit.text + "\0cooperative=" + ",".join(sorted(names))
    entry = cache.entry_for(key, fn.defines or None, fn.include_dirs, fn.target)
    text = entry.read("pyptx") if entry is not None else None
    if text is None:
        module = pipeline.build_module(_checked(unit), rec)
        text = build.pyptx_text(module, fn.path, fn.target, names)
        if entry is not None:
            entry.write("pyptx", text)
    out = ChoreoFunction(fn.path, fn.target, text, entry, fn.writes)
    out.include_dirs, out.defines, out.cooperative = fn.include_dirs, fn.defines, names
    return out


def _checked(unit):
    """The preprocessed file parsed, with every language rule checked as `compile` does."""
    from choreo_py import check, frontend

    program = frontend.parse_unit(unit)
    frontend.check_parse_rules(program)
    from choreo_py.diagnostics import take_warnings

    check.check_program(program, True, building=True)
    _warn_python(take_warnings())  # (a missing `return`: check/context.py)
    return program


def check_entry_assertions(failed_assertions, dims: dict) -> None:
    """A compiled module's entry assertions (its `failed_assertions`, generated from the
    function's `assert(...)`s: lowering/core/kernel.py) on the call's sizes: the first that
    fails refuses the call, located at its assert, before anything runs. load()'s kernels
    and the emulator's launches of the same module both check them here."""
    if failed_assertions is None:
        return
    import inspect

    takes = inspect.signature(failed_assertions).parameters
    if not any(p.kind is p.VAR_KEYWORD for p in takes.values()):
        dims = {k: v for k, v in dims.items() if k in takes}
    failed = failed_assertions(**dims)
    if failed:
        message, where = failed[0]
        sizes = ", ".join(f"{k}={v}" for k, v in dims.items())
        raise AssertionFailed(where, f"assertion failed: {message} ({sizes})")


class AssertionFailed(ChoreoRuntimeError):
    """A call's sizes that an entry `assert(...)` of the program forbids: `where` is the
    assert's `file.co:line:col`, `text` the message; a command line prints it located."""

    def __init__(self, where: str, text: str) -> None:
        super().__init__(f"{where}: {text}")
        self.where, self.text = where, text

    def render(self, path: str) -> str:
        """The located report (source line, caret) for the assert in the file at `path`."""
        from choreo_py.diagnostics import Diagnostic
        from choreo_py.source import Loc

        line, col = (int(x) for x in self.where.rsplit(":", 2)[1:])
        return Diagnostic("error", self.text, Loc(path, line, col)).render()


def open_library(path: str, target: Optional[str] = None, include_dirs: Iterable[str] = (),
                 defines: Optional[dict] = None, launcher=None):
    """The file's `__co__` functions as a `host.Library` whose launches `launcher` runs
    (host_program.ThreadProgram; the PTX emulator's: choreo_py/emu/program.py). Unlike
    `load`, a file of one MMA kernel is a host program too, and nothing is cached."""
    from choreo_py import frontend, targets
    from choreo_py.diagnostics import ChoreoError, take_warnings
    from choreo_py.passes import pipeline

    from .host_program import library

    rec = targets.resolve(target)  # None: the GPU present, else sm_100a
    take_warnings()  # this call reports its own file's warnings, not an earlier call's
    unit = frontend.preprocess(path, tuple(include_dirs), defines)
    _warn_python(take_warnings())
    program = _checked(unit)
    try:
        pipeline.build_module(program, rec)
    except ChoreoError as e:  # perhaps some functions only (host/specialize.py)
        return library(path, rec.name, program, rec, first_error=e, launcher=launcher)
    return library(path, rec.name, program, rec, launcher=launcher)


def _warn_python(found) -> None:
    """The compiler's warnings, as Python warnings (the command line prints them)."""
    import warnings

    from choreo_py.diagnostics import ChoreoWarning

    for w in found:
        warnings.warn(w.render(), ChoreoWarning, stacklevel=3)


def _written_params(module) -> list[str]:
    """The parameters the first function's kernels write, in parameter order."""
    from choreo_py.interp.api import param_usage

    fn = module.functions[0]
    _, writes = param_usage(module, fn)
    return [p.name for p in fn.params if p.name in writes]


def _checks_host_values(fn) -> bool:
    """Whether the host code checks more than the sizes (`dims(c)` of a scalar `c`: an
    assertion on `c`): the launcher of one kernel checks only the sizes, a host program
    runs the host statements."""
    from choreo_py import ir

    sizes = {d.name for p in fn.params for d in p.shape if isinstance(d, ir.Sym)}
    return any(isinstance(s, ir.Assert) and not ir.sym_names(s.cond) <= sizes
               for s in fn.body)
