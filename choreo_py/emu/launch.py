"""What a launch is made of: PTX, grid, block, shared bytes, parameters, tensors.

Two sources:
- a generated pyptx module (`choreo compile --emit pyptx`): its PARAMS,
  TENSORS, THREADS, SMEM_BYTES and grid(); its PTX is traced with the
  module's `# file.co:N:` comments carried into the PTX as `// file.co:N`
  lines (the PTX instructions are the same as `--emit ptx`'s);
- raw PTX plus a JSON launch description (`LaunchSpec.from_json`), for
  hand-written kernels:

    {"grid": [gx, gy, gz], "block": [bx, by, bz], "shared_bytes": N,
     "params": [{"name": "n", "u32": 128},
                {"name": "tmap_A", "tmap": "A", "box": [64, 128], "swizzle": 128},
                {"name": "ptr_C", "ptr": "C"}],
     "tensors": {"A": {"dtype": "bf16", "shape": [256, 64], "init": "randn"},
                 "C": {"dtype": "f32", "shape": [256, 256], "init": "zeros"}}}

    Tensor-map boxes are innermost first; dtype and sizes come from the tensor.
    A tensor-map parameter is either the 128-byte map itself (`.param .align 64
    .b8 tmap[128]`, choreo's PTX) or a `.u64` holding its address (pyptx's
    `X_tma_desc`): the emulator keeps the map at the parameter's own place and
    gives the pointer that address.
"""
from __future__ import annotations

import json
import os
import re
import struct
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from choreo_py.host import binding
from choreo_py.ir import subbyte
from choreo_py.runtime.kernel import check_entry_assertions
from choreo_py.runtime.launch import check_tma_strides, unaligned_tmaps

from .machine import Launch
from .memory import ESIZE, PARAM_WINDOW, GlobalMemory, ParamSpace, TensorMap
from .report import HostProgramModule

_CO_COMMENT = re.compile(r"#\s*([\w./-]+\.co:\d+):")
# `  # at file.co:N:C` after an element access (lowering/core/writer.py: Writer.op's `at`)
_AT_COMMENT = re.compile(r"#\s*at\s+([\w./-]+\.co):(\d+:\d+)\s*$")
_INT_VIEW = {2: "int16", 4: "int32", 8: "int64", 1: "uint8"}
TORCH_DTYPES = {"bf16": "bfloat16", "f16": "float16", "f32": "float32", "s32": "int32",
                "u8": "uint8", "f64": "float64", "s64": "int64", "s8": "int8",
                "f8_e4m3": "float8_e4m3fn", "f8_e5m2": "float8_e5m2",
                **{t: "uint8" for t in subbyte.TYPES}}  # sub-byte types: uint8 codes


@dataclass
class LaunchSpec:
    ptx: str
    grid: object                    # tuple, or callable(**dims) -> tuple
    block: tuple
    shared_bytes: int
    params: list                    # ("dim", param, name) | ("tmap", param, tensor, dtype, box, swz)
                                    # | ("u32"/"u64"/"s32", param, value) | ("ptr", param, tensor)
    tensors: tuple = ()             # (name, dtype, shape) as the module's TENSORS
    entry: str = ""
    arch: str = ""
    ptx_name: str = "kernel.ptx"
    extra: dict = field(default_factory=dict)
    cooperative: bool = False       # cuLaunchCooperativeKernel: the CTAs run together
    rebuild: object = None          # callable(tensor names) -> the spec of the build copying
                                    # those tensors without TMA (from_co's; tma_fallback.py)
    assertions: object = None       # the module's failed_assertions (its entry asserts)

    @staticmethod
    def from_json(ptx: str, desc: dict, ptx_name: str = "kernel.ptx") -> "LaunchSpec":
        params = []
        for p in desc.get("params", []):
            if "tmap" in p:
                t = desc["tensors"][p["tmap"]]
                params.append(("tmap", p["name"], p["tmap"], t["dtype"], tuple(p["box"]),
                               int(p.get("swizzle", 0))))
            elif "ptr" in p:
                params.append(("ptr", p["name"], p["ptr"]))
            else:
                (kind, value), = [(k, v) for k, v in p.items() if k != "name"]
                params.append((kind, p["name"], int(value)))
        tensors = tuple((n, t["dtype"], tuple(t["shape"])) for n, t in desc.get("tensors", {}).items())
        return LaunchSpec(ptx, tuple(desc["grid"]), tuple(desc.get("block", (128,))),
                          int(desc.get("shared_bytes", 0)), params, tensors,
                          ptx_name=ptx_name, extra=desc)


def traced_ptx(ns: dict, module_text: str, filename: str, kernel=None,
               co_path: Optional[str] = None) -> str:
    """The module's PTX (or that of `kernel`, one of its KERNELS' entries) with `// file.co:N`
    before each run of instructions from one statement, and `// at path.co:N:C` before an
    element access (`co_path`: the source's path, so that a fault can quote its line)."""
    import pyptx._trace as trace
    from pyptx.ir.nodes import Comment, Instruction, Label

    co_at: dict[int, str] = {}
    access_at: dict[int, str] = {}
    current = None
    for i, line in enumerate(module_text.split("\n"), 1):
        m = _CO_COMMENT.search(line)
        if m:
            current = m.group(1)
        co_at[i] = current
        a = _AT_COMMENT.search(line)
        if a:
            file = co_path if co_path and os.path.basename(co_path) == a.group(1) else a.group(1)
            access_at[i] = f"{file}:{a.group(2)}"
    original = trace.TraceContext.emit
    last = [None]

    def emit(self, stmt):
        if isinstance(stmt, (Instruction, Label)):
            import sys
            f = sys._getframe(1)
            while f is not None and f.f_code.co_filename != filename:
                f = f.f_back
            co = co_at.get(f.f_lineno) if f is not None else None
            if co and co != last[0]:
                last[0] = co
                original(self, Comment(f"\t// {co}"))
            at = access_at.get(f.f_lineno) if f is not None else None
            if at and isinstance(stmt, Instruction):
                original(self, Comment(f"\t// at {at}"))
        original(self, stmt)

    trace.TraceContext.emit = emit
    try:
        return (kernel or ns["KERNEL"]).ptx()
    finally:
        trace.TraceContext.emit = original


def from_pyptx_module(text: str, filename: str, co_path: Optional[str] = None) -> LaunchSpec:
    ns: dict = {"__name__": "choreo_generated"}
    exec(compile(text, filename, "exec"), ns)  # noqa: S102 - the compiler's own output
    if "grid" not in ns:  # a module of several entries (a host program's kernels)
        base = os.path.basename(filename)
        what = base.split(".co.")[0] + ".co" if ".co." in base else base
        raise HostProgramModule(
            f"{what} is a host program (its functions' "
            f"host code launches its {len(ns.get('KERNELS', {}))} kernel(s)): its module runs "
            "one entry at a time; emulate the program's .co file (`choreo emulate FILE.co`, "
            "choreo_py.emulate_program), or an entry's PTX with choreo_py.emu.emulate_ptx")
    ptx = traced_ptx(ns, text, filename, co_path=co_path)
    return LaunchSpec(ptx, ns["grid"], (int(ns["THREADS"]), 1, 1), int(ns["SMEM_BYTES"]),
                      list(ns["PARAMS"]), tuple(ns["TENSORS"]), ns["ENTRY"], ns["ARCH"],
                      ptx_name=os.path.basename(filename).replace(".pyptx.py", "") + ".ptx",
                      assertions=ns.get("failed_assertions"))


def from_co(path: str, target: str, include_dirs=(), defines=None, cooperative=()) -> LaunchSpec:
    """Compiles a .co file for `target` and describes its launch; `cooperative`: tensors
    copied by the threads instead of TMA (see `tma_build`)."""
    from choreo_py.driver import ir_of_file
    from choreo_py.runtime import build

    module = ir_of_file(path, include_dirs, defines, target=target)
    text = build.pyptx_text(module, path, target, cooperative)
    base = os.path.basename(path)
    spec = from_pyptx_module(text, f"{base}.{target.replace('_', '')}.pyptx.py", path)
    spec.ptx_name = f"{os.path.splitext(base)[0]}.{target.replace('_', '')}.ptx"
    builds: dict = {}

    def rebuild(names):
        key = frozenset(names) | frozenset(cooperative)
        if key not in builds:
            builds[key] = from_co(path, target, include_dirs, defines, tuple(sorted(key)))
        return builds[key]
    spec.rebuild = rebuild
    return spec




def _engine():
    import torch

    return binding.Engine("the emulator", {k: getattr(torch, v) for k, v in TORCH_DTYPES.items()},
                  ("cpu",))


def check_call(spec: LaunchSpec, tensors, scalars: Optional[dict] = None) -> dict:
    """The call's tensors against the launch's parameters (host/binding.py: the rules the
    interpreter and load() apply too), then the module's entry assertions on the sizes
    they give (as load()'s kernels check them); returns the sizes. A launch of a host
    program's entry (no TENSORS: its call was bound already) is not checked again."""
    dims = dict(scalars or {})
    if spec.tensors:
        # a cooperative launch's grid-barrier words: the launcher's own parameter, no tensor
        # of the function (program.py, the runtime add it per launch)
        hidden = ("__grid_sync",) if spec.cooperative else ()
        dims = binding.bind(spec.entry or spec.ptx_name, spec.tensors, tensors, _engine(), dims,
                            extra=hidden)
    check_entry_assertions(spec.assertions, dims)
    return dims


def tma_build(spec: LaunchSpec, tensors: dict) -> LaunchSpec:
    """The build of the kernel for these tensors: the spec, or (for tensors whose rows TMA
    cannot copy) the build that copies them with the threads, as the GPU launcher picks it
    (runtime/kernel.py). A spec of raw PTX has no other build: `bind` refuses such maps."""
    tried: set = set()
    while spec.rebuild is not None:
        names = unaligned_tmaps(spec.params, tensors)
        if not names or names <= tried:
            break
        tried |= names
        spec = spec.rebuild(tried)
    return spec


def _numpy_of(t):
    """A numpy array sharing the tensor's storage (bits as integers for 16-bit floats)."""
    import torch

    if not t.is_contiguous():
        raise ValueError("emulated tensors must be contiguous")
    if t.device.type != "cpu":
        raise ValueError(f"emulated tensors live on the CPU, not {t.device}")
    es = t.element_size()
    return t.view(getattr(torch, _INT_VIEW[es])).numpy() if t.is_floating_point() else t.numpy()


def bind(spec: LaunchSpec, tensors: dict, kernel_params, scalars: Optional[dict] = None) -> tuple:
    """(Launch, dims): tensors mapped into global memory, parameters encoded. `scalars`: the
    values of the kernel's scalar arguments (a `bool` or `int` parameter that is no tensor
    dimension), passed as its ("dim", ...) parameters are."""
    gmem = GlobalMemory()
    addr = {}
    dims: dict = {k: v if isinstance(v, float) else int(v) for k, v in (scalars or {}).items()}
    for name, _, shape in spec.tensors:  # (checked by check_call)
        dims.update({want: int(size) for size, want in zip(tensors[name].shape, shape)
                     if isinstance(want, str)})
    for name, t in tensors.items():
        addr[name] = gmem.add(name, _numpy_of(t))
    ps = ParamSpace(kernel_params)
    sizes = {p.name: p.size for p in kernel_params}
    for p in spec.params:
        kind, pname = p[0], p[1]
        if pname not in sizes:
            raise ValueError(f"launch parameter {pname} is not a parameter of the kernel")
        if kind == "dim":  # a float argument: its f32 bits (runtime/launch.word)
            v = dims[p[2]]
            v = struct.unpack("<I", struct.pack("<f", v))[0] if isinstance(v, float) else v
            ps.set_scalar(pname, v, sizes[pname])
        elif kind == "tmap":
            _, _, tname, dtype, box, swz = p
            t = tensors[tname]
            es = ESIZE[dtype]
            tdims = tuple(int(s) for s in reversed(t.shape))
            strides = tuple(int(s) * es for s in reversed(t.stride()))[1:]
            check_tma_strides(tname, strides)
            ps.set_tmap(pname, TensorMap(tname, dtype, addr[tname], tdims, strides,
                                         tuple(int(b) for b in box), int(swz)))
            if sizes[pname] == 8:  # a pointer to the map (pyptx's `.param .u64 X_tma_desc`)
                ps.set_scalar(pname, PARAM_WINDOW + ps.offsets[pname], 8)
        elif kind == "ptr":
            ps.set_scalar(pname, addr[p[2]], 8)
        else:
            ps.set_scalar(pname, int(p[2]), sizes[pname])
    grid = spec.grid(**dims) if callable(spec.grid) else spec.grid
    return Launch(tuple(int(g) for g in grid), spec.block, spec.shared_bytes, ps, gmem,
                  cooperative=spec.cooperative), dims


def make_tensors(desc: dict, seed: int = 0) -> dict:
    """Tensors of a JSON launch description ("init": randn | zeros | nan | arange)."""
    import torch

    g = torch.Generator().manual_seed(seed)
    out = {}
    for name, t in desc.get("tensors", {}).items():
        dt = getattr(torch, TORCH_DTYPES[t["dtype"]])
        shape = tuple(t["shape"])
        init = t.get("init", "zeros")
        if init == "randn":
            x = torch.randn(shape, generator=g).to(dt)
        elif init == "nan":
            x = torch.full(shape, float("nan")).to(dt)
        elif init == "arange":
            x = torch.arange(int(np.prod(shape))).reshape(shape).to(dt)
        else:
            x = torch.zeros(shape, dtype=dt)
        out[name] = x.contiguous()
    return out


def load_json(path: str) -> dict:
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)
