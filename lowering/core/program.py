"""A file of several kernels, some of them MMA/TMA kernels: one PTX module, an entry each.

A file whose kernels are all thread kernels is simt.py's (`KERNELS`, a pointer
per tensor). When one of its kernels is an MMA kernel (wgmma / tcgen05, TMA,
events), each kernel is still lowered on its own, by the lowering that fits it:
MMA kernels by kernel.py (a fresh target per kernel: the targets keep per-kernel
state, such as the tensor-memory plan), thread kernels by simt.py. The module
then holds `KERNELS` as simt.py writes it; an MMA kernel's entry adds `PARAMS`
(its tensor maps and dimensions, as the single-kernel module has them) and
`ENTRY` (its PTX name). `KERNEL.ptx()` is every entry in one PTX module.

Host code around the kernels is what host programs allow (runtime/host_program.py
launches the entries in order; the interpreter runs the same IR); a call of another
`__co__` function from host code is refused (the interpreter runs it). Kernels marked
`device cpu` (`: device(cpu)` regions) are the host's: they have no entry.
"""
from __future__ import annotations

from dataclasses import replace

from choreo_py import ir

from . import simt
from .kernel import launch_facts, lower_kernel_body
from .kernel import lower_module as lower_one_kernel_module
from .names import TopLevel
from .writer import ptx_entry_name


def gpu_kernels(module: ir.Module) -> ir.Module:
    """The module without its `device cpu` kernels (regions the host runs: no PTX)."""
    if not any(k.device for f in module.functions for k in f.kernels):
        return module
    return ir.Module([replace(f, kernels=[k for k in f.kernels if not k.device])
                      for f in module.functions], module.source)


def lower_module(module: ir.Module, target, source_name: str) -> str:
    """The backends' entry: a file of one MMA kernel, or of thread kernels only, as
    kernel.py lowers it (its module format unchanged); several kernels with an MMA kernel
    among them as one module of entries (below)."""
    refuse_host_calls(module, target)
    module = gpu_kernels(module)
    found = [k for f in module.functions for k in f.kernels]
    if not found and module.functions:
        return host_only_module(target.arch, source_name)
    if len(found) > 1 and not all(simt.is_thread_kernel(k) for k in found):
        return lower_program_module(module, target, source_name)
    return lower_one_kernel_module(module, target, source_name)


def lower_program_module(module: ir.Module, target, source_name: str) -> str:
    refuse_host_calls(module, target)
    module = gpu_kernels(module)
    if not any(f.kernels for f in module.functions):
        return host_only_module(target.arch, source_name)
    entries, types = [], {"u32", "s32", "u64", "pred", "b16", "b32", "b64", "f32"}
    scope = TopLevel()
    for fn in module.functions:
        for k in fn.kernels:
            names = simt.entry_names(k.name, scope)
            if simt.is_thread_kernel(k):
                part = simt.lower_thread_kernel(k, target, source_name)
                types |= part["types"]
                entries += simt._entry_text(part, names)
            else:
                lw, body = lower_kernel_body(k, target.for_kernel())
                facts = launch_facts(lw, fn)
                types |= facts["types"]
                entries += _mma_entry(lw.k, facts, body, names)
    return _text(entries, sorted(types), target.arch, source_name)


def refuse_host_calls(module: ir.Module, target) -> None:
    """A call of one `__co__` function from another's host code (ir.HostCall) is the
    interpreter's (`choreo run`): the GPU's host programs (runtime/host_program.py) run
    each function's own launches only, so a module holding one is refused at the call."""
    for fn in module.functions:
        for s in ir.walk(fn.body):
            if isinstance(s, ir.HostCall):
                raise target.refuse(f"a call of the __co__ function '{s.func}' from the host "
                                    f"code of '{fn.name}' (it runs in 'choreo run')", s.loc)


def host_only_module(arch: str, source_name: str) -> str:
    """A file whose functions launch no GPU kernel (host code only, or `: device(cpu)`
    regions and host code over tensor elements, which the host runs): a module of no
    entries, its PTX the header alone (ptxas assembles it; the host program needs no
    cubin). The header's PTX version is the one pyptx writes for `arch`."""
    from pyptx.kernel import _default_version_for_arch  # the version its kernels carry

    major, minor = _default_version_for_arch(arch)
    header = f".version {major}.{minor}\n.target {arch}\n.address_size 64\n"
    return "\n".join([
        f'"""Kernels of {source_name}, compiled by choreo-py for {arch}: none (its functions',
        'are host code; they launch no GPU kernel)."""',
        "",
        f'ARCH = "{arch}"',
        "KERNELS = {}",
        "",
        "",
        "class _Module:",
        '    """The PTX module: the header, no entry."""',
        "",
        "    def ptx(self):",
        f"        return {header!r}",
        "",
        "",
        "KERNEL = _Module()",
        "",
    ])


def _mma_entry(k: ir.Kernel, f: dict, body: str, names: dict) -> list[str]:
    name, grid = names["fn"], names["grid"]
    return [
        "",
        "",
        f"def {name}():",
        body,
        "",
        "",
        f"def {grid}({f['grid_params']}):",
        f"    return ({', '.join(f['grid'])})",
        "",
        "",
        f"{name}.__name__ = {ptx_entry_name(k.name)!r}",
        f"KERNELS[{k.name!r}] = dict(",
        f"    THREADS={f['threads']},",
        f"    SMEM_BYTES={f['smem']},",
        f"    TENSORS={tuple(p.name for p in k.params)!r},",
        f"    DIMS={tuple(f['dims'])!r},",
        f"    PARAMS={tuple(f['params'])!r},",
        f"    ENTRY={ptx_entry_name(k.name)!r},",
        f"    grid={grid},",
        "    KERNEL=kernel(",
        "        arch=ARCH,",
        f"        raw_params={f['raw']!r},",
        '        extern_smem="smem",',
        f"        block=({f['threads']}, 1, 1),",
        f"        raw_directives={f['directives']!r},",
        f"    )({name}),",
        ")",
    ]


def _text(entries: list[str], types: list[str], arch: str, source_name: str) -> str:
    out = [
        f'"""Kernels of {source_name}, compiled by choreo-py for {arch}.',
        "",
        "Each ptx.* call emits one PTX instruction; a comment names the Choreo statement",
        "each block comes from. The launcher reads KERNELS: per kernel its parameters",
        "(thread kernels: a pointer per tensor, then the symbolic dimensions; MMA kernels:",
        "PARAMS, tensor maps and dimensions), grid(), THREADS and SMEM_BYTES.",
        '"""',
        "from pyptx import kernel, ptx, reg",
        f"from pyptx.types import {', '.join(types)}",
        "",
        f'ARCH = "{arch}"',
        "KERNELS = {}",
        *entries,
    ]
    return "\n".join(out + simt.module_tail(prelude=False))
