"""A loaded kernel as a torch custom operator, so that it composes with
`torch.compile` and CUDA graphs.

    gemm = choreo_py.load("examples/gemm.co")
    torch.ops.choreo.gemm_<hash>(a, b, c)   # == gemm.op(a, b, c) == gemm(a, b, c)

The operator is defined with `torch.library.custom_op` from the kernel's
parameters: every parameter is a tensor, the ones the kernel writes are
declared mutated (`Tensor(a!)` in the schema), and it returns nothing, as
the kernel does. Its fake (meta) implementation does nothing: a mutating
operator's outputs are its inputs, whose shapes the tracer already knows.
With that, torch.compile traces through the call (it functionalises the
mutation) instead of breaking the graph, and a CUDA graph captures the
launch, which goes to torch's current stream (launch.py). On CPU tensors
the operator runs the reference interpreter.

The name carries a hash of the generated code: two kernels of one name
(two files, two targets) are two operators, and loading the same kernel
again in a process returns the operator already registered.
"""
from __future__ import annotations

import hashlib

NAMESPACE = "choreo"
_REGISTERED: dict[str, object] = {}


def op_name(fn) -> str:
    digest = hashlib.sha256(f"{fn.target}\0{fn.source}".encode()).hexdigest()[:12]
    return f"{fn.name}_{digest}"


def schema(fn) -> str:
    """`(Tensor A, Tensor B, Tensor(a0!) C) -> ()` for gemm(A, B, C) writing C."""
    args = []
    for i, (name, _, _) in enumerate(fn.meta.TENSORS):
        mutated = f"(a{i}!)" if name in fn.writes else ""
        args.append(f"Tensor{mutated} {name}")
    return f"({', '.join(args)}) -> ()"


def register(fn):
    """The custom operator of `fn` (registered on first use)."""
    import torch

    name = op_name(fn)
    if name in _REGISTERED:
        return _REGISTERED[name]
    qualname = f"{NAMESPACE}::{name}"
    names = [n for n, _, _ in fn.meta.TENSORS]

    def impl(*tensors) -> None:
        fn(*tensors)

    def cpu(*tensors) -> None:
        # CPU tensors run in the reference interpreter: the same operator then works
        # (slowly) without a GPU, which is how the suite checks torch.compile on it.
        from choreo_py.interp.api import interpret

        interpret(fn.path, dict(zip(names, tensors)), include_dirs=fn.include_dirs,
                  defines=fn.defines, target=fn.target,
                  owners=4 if fn.target == "sm_90a" else 1)

    def fake(*tensors) -> None:
        return None

    lib = torch.library.Library(NAMESPACE, "FRAGMENT")
    lib.define(f"{name}{schema(fn)}")
    lib.impl(name, impl, "CUDA")
    lib.impl(name, cpu, "CPU")
    torch.library.register_fake(qualname, fake, lib=lib)
    op = getattr(getattr(torch.ops, NAMESPACE), name)
    op._choreo_library = lib  # the registration lives as long as the operator is referenced
    op._choreo_params = names
    _REGISTERED[name] = op
    return op
