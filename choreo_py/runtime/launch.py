"""CUDA side of the runtime: load a cubin into torch's context, encode tensor maps, launch.

Uses cuda-python's driver bindings (`cuda.bindings.driver`): the module is
loaded into torch's primary context, tensor maps are encoded with
cuTensorMapEncodeTiled and passed by value (the `__grid_constant__`
convention the generated kernels declare), and the kernel is launched on
torch's current stream, so it composes with torch ops and CUDA graphs.
"""
from __future__ import annotations

import ctypes
import functools
import math
import struct
from typing import Any, Sequence

from choreo_py.diagnostics import ChoreoRuntimeError  # noqa: F401 (imported from here too)
from choreo_py.ir import subbyte

#: element type -> the tensor map's data type (1-byte types move as bytes: a TMA copy
#: does not convert)
_DTYPES = {"bf16": "BFLOAT16", "f16": "FLOAT16", "f32": "FLOAT32", "u8": "UINT8",
           "s8": "UINT8", "f8_e4m3": "UINT8", "f8_e5m2": "UINT8", "s32": "INT32",
           "u32": "UINT32", **{t: "UINT8" for t in subbyte.TYPES}}
_SWIZZLE = {0: "NONE", 32: "32B", 64: "64B", 128: "128B"}


def check_tma_strides(name: str, strides) -> None:
    """A tensor map's byte strides (of dimensions 1..) are multiples of 16: the driver
    refuses to encode any other (cuTensorMapEncodeTiled's globalStrides). The emulator
    applies the same rule, so a kernel it runs is one the GPU can launch."""
    for s in strides:
        if s % 16:
            raise ChoreoRuntimeError(f"{name}: rows of {s} bytes; TMA needs strides that are "
                                     f"multiples of 16 bytes")


def unaligned_tmaps(params, tensors: dict) -> frozenset:
    """Tensors of a module's tensor-map parameters whose byte strides break
    `check_tma_strides`, as `name:bytes` (the alignment of their rows): the launcher runs
    the build that copies them with the threads (lowering/core/tma_fallback.py) instead."""
    out = set()
    for p in params:
        if p[0] == "tmap" and p[2] in tensors:  # (a tensor not given: the binding says so)
            t = tensors[p[2]]
            strides = [s * t.element_size() for s in t.stride()[:-1]]
            if any(s % 16 for s in strides):
                out.add(f"{p[2]}:{math.gcd(16, *strides)}")  # (the rows' alignment)
    return frozenset(out)


def word(value) -> int:
    """A dimension or scalar argument as the 32-bit word a kernel parameter holds: an
    integer's two's complement, a float's f32 bits (lowering/core/params.py)."""
    if isinstance(value, float):
        return struct.unpack("<I", struct.pack("<f", value))[0]
    return int(value) & 0xFFFFFFFF


def kernel_param(p, tensors: dict, dims: dict):
    """One kernel parameter of a module's PARAMS: ("dim", param, name) -> its value,
    ("tmap", param, tensor, dtype, box, swizzle) -> the tensor's TMA descriptor,
    ("ptr", param, tensor) -> its address (a tensor the kernel reads by element)."""
    if p[0] == "dim":
        return ctypes.c_uint32(word(dims[p[2]]))
    if p[0] == "ptr":
        return ctypes.c_uint64(tensors[p[2]].data_ptr())
    _, _, name, dtype, box, swizzle = p
    t = tensors[name]
    esize = t.element_size()
    sizes = tuple(reversed(t.shape))
    strides = tuple(s * esize for s in reversed(t.stride()))[1:]
    check_tma_strides(name, strides)
    return tensor_map(t.data_ptr(), dtype, sizes, strides, tuple(box), swizzle)


class LaunchError(RuntimeError):
    pass


def driver():
    try:
        from cuda.bindings import driver as drv
    except ImportError as err:  # pragma: no cover - depends on the machine
        raise LaunchError("running a compiled kernel needs cuda-python "
                          "(pip install cuda-python)") from err
    return drv


def check(result, what: str):
    drv = driver()
    if result[0] != drv.CUresult.CUDA_SUCCESS:
        raise LaunchError(f"{what} failed: {result[0]}")
    return result[1] if len(result) > 1 else None


class CudaKernel:
    """One cubin loaded on one device."""

    def __init__(self, cubin: bytes, entry: str, smem_bytes: int, device) -> None:
        import torch

        drv = driver()
        with torch.cuda.device(device):
            torch.empty(1, device=device)  # makes torch's primary context current
            check(drv.cuInit(0), "cuInit")
            self.module = check(drv.cuModuleLoadData(cubin), "cuModuleLoadData")
            self.fn = check(drv.cuModuleGetFunction(self.module, entry.encode()),
                            "cuModuleGetFunction")
            attr = drv.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
            check(drv.cuFuncSetAttribute(self.fn, attr, smem_bytes), "cuFuncSetAttribute")
        self.smem = smem_bytes

    def resize_smem(self, smem_bytes: int) -> None:
        """The dynamic shared memory of the next launches (a kernel whose shared buffers are
        sized at run time): the function's attribute follows it, as the driver asks past 48 KB."""
        if smem_bytes != self.smem:
            drv = driver()
            attr = drv.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
            check(drv.cuFuncSetAttribute(self.fn, attr, smem_bytes), "cuFuncSetAttribute")
            self.smem = smem_bytes

    @staticmethod
    def pack(params: Sequence[Any]):
        """The kernelParams array: tensor maps by value (their address), scalars as ctypes.

        The returned object keeps the parameters alive as long as it lives."""
        ptrs = (ctypes.c_void_p * len(params))()
        for i, p in enumerate(params):
            ptrs[i] = ctypes.addressof(p) if isinstance(p, ctypes._SimpleCData) else int(p.getPtr())
        return (ptrs, list(params))

    def resident_blocks(self, threads: int) -> tuple[int, int]:
        """(blocks of this kernel one SM holds at once, SMs of the device)."""
        drv = driver()
        per_sm = check(drv.cuOccupancyMaxActiveBlocksPerMultiprocessor(self.fn, threads,
                                                                        self.smem),
                       "cuOccupancyMaxActiveBlocksPerMultiprocessor")
        dev = check(drv.cuCtxGetDevice(), "cuCtxGetDevice")
        attr = drv.CUdevice_attribute
        if not check(drv.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH, dev),
                     "cuDeviceGetAttribute"):
            raise LaunchError("this device does not support cooperative launches")
        sms = check(drv.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev),
                    "cuDeviceGetAttribute")
        return int(per_sm), int(sms)

    def launch_cooperative(self, name: str, grid, threads: int, packed, stream: int) -> None:
        """cuLaunchCooperativeKernel: every block resident at once (a grid-wide barrier waits
        for all of them); a grid that cannot be is refused here, by name, before it hangs."""
        per_sm, sms = self.resident_blocks(threads)
        blocks = int(grid[0]) * int(grid[1]) * int(grid[2])
        if blocks > per_sm * sms:
            raise LaunchError(f"the cooperative kernel '{name}' has {blocks} blocks, but at most "
                              f"{per_sm * sms} ({per_sm} per SM x {sms} SMs) can be resident at "
                              "once: its grid-wide barrier needs every block running")
        drv = driver()
        err = drv.cuLaunchCooperativeKernel(self.fn, *grid, threads, 1, 1, self.smem,
                                            drv.CUstream(stream), ctypes.addressof(packed[0]))
        if err[0] != drv.CUresult.CUDA_SUCCESS:
            raise LaunchError(f"cuLaunchCooperativeKernel failed: {err[0]}")

    def launch(self, grid, threads: int, packed, stream: int) -> None:
        drv = driver()
        args = (self.fn, *grid, threads, 1, 1, self.smem, drv.CUstream(stream),
                ctypes.addressof(packed[0]))
        try:
            err = drv.cuLaunchKernel(*args, 0)
        except TypeError:  # bindings that want extra=None
            err = drv.cuLaunchKernel(*args, None)
        if err[0] != drv.CUresult.CUDA_SUCCESS:
            raise LaunchError(f"cuLaunchKernel failed: {err[0]}")


@functools.lru_cache(maxsize=512)
def tensor_map(ptr: int, dtype: str, dims: tuple, strides: tuple, box: tuple, swizzle: int):
    """cuTensorMapEncodeTiled over a tensor (dims/box innermost first, strides in bytes).

    Cached: a map depends only on these values and stays valid while the
    memory does (a freed and reused address with the same shape gives the
    same map)."""
    drv = driver()
    rank = len(dims)
    res = drv.cuTensorMapEncodeTiled(
        getattr(drv.CUtensorMapDataType, f"CU_TENSOR_MAP_DATA_TYPE_{_DTYPES[dtype]}"),
        rank, ptr,
        [drv.cuuint64_t(int(d)) for d in dims],
        [drv.cuuint64_t(int(s)) for s in strides],
        [drv.cuuint32_t(int(b)) for b in box],
        [drv.cuuint32_t(1)] * rank,
        drv.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
        getattr(drv.CUtensorMapSwizzle, f"CU_TENSOR_MAP_SWIZZLE_{_SWIZZLE[swizzle]}"),
        drv.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
        drv.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
    )
    if res[0] != drv.CUresult.CUDA_SUCCESS:
        raise LaunchError(f"cuTensorMapEncodeTiled failed: {res[0]} (dims {dims}, "
                          f"strides {strides}, box {box}, swizzle {swizzle})")
    return res[1]
