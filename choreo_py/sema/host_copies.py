"""Host variables a kernel assigns: the kernel's own copy, and the host region's write-back.

A kernel receives a host variable's value, as it receives its other scalar
arguments (`ir.Kernel.scalars`); the reference's model (co-mock) runs each
instance of a parallel region on a snapshot of the host's scalars, so that
`sum += p;` inside `parallel p by 4` changes that instance's copy and the
host's `sum` is the same after the region as before. Here a kernel that
assigns the host variable `s` starts with `mutable s = s;` of its own
(`ir.Var` named `s__local`), which every later statement of the kernel reads
and writes: on a GPU a register initialised from the argument.

Host code that co-mock runs in the host's own memory (a `foreach` over tensor
elements, host DMA: sema/host_code.py, host_data_region) is built as a region
of one instance the host runs (`device cpu`); there the assignments are the
host's: the region lists them in `ir.Kernel.writes_back` (printed `writes_back
s = s__local`), and the engine that runs the region (the interpreter,
runtime/host_program.py) sets each host variable from the region's copy at
its end.
"""
from __future__ import annotations

from ..diagnostics import warn
from ..frontend import ast as A
from .. import ir
from .values import Scalar

#: The suffix of a kernel's own copy of a host variable.
LOCAL = "__local"


def assigned_names(stmts: list[A.Stmt]) -> list[str]:
    """Names that `stmts` assign (`x = ...`, `x += ...`, `x++`, `++x` anywhere), in order
    of first appearance, less those the statements declare themselves (their own)."""
    return list(_first_assignments(stmts))


def _first_assignments(stmts: list[A.Stmt]) -> dict:
    """{name: the node of its first assignment} for assigned_names."""
    out: dict = {}
    declared: set[str] = set()
    for s in stmts:
        for n in A.walk(s):
            name = None
            if isinstance(n, A.Assign) and isinstance(n.target, A.Name):
                name = n.target.id
            elif isinstance(n, A.Unary) and n.op in ("post++", "post--", "++", "--") and \
                    isinstance(n.operand, A.Name):
                name = n.operand.id
            elif isinstance(n, A.ScalarDecl):
                declared.add(n.name)
            if name is not None and name not in out:
                out[name] = n
    return {x: n for x, n in out.items() if x not in declared}


def _warn_unchanged(name: str, node: A.Node) -> None:
    """A kernel's assignment to a host variable changes the instance's copy only (the
    reference's model; on a GPU each thread's register): the host's value after the
    kernel is the one before it, which a reduction into the variable does not expect."""
    warn(f"'{name}' is a host variable: each instance of the parallel region assigns its "
         f"own copy, and the host's '{name}' is unchanged after the region (to combine the "
         f"instances' values, store them in a buffer and reduce it on the host)", node.loc)


class HostCopyBuilder:
    """Mixin of KernelBuilder (needs scope, host_scope, kernel, note_host_reads)."""

    def copy_host_vars(self, stmts: list[A.Stmt], write_back: bool) -> list[ir.Stmt]:
        """The kernel's copies of the host variables `stmts` assign, bound in the kernel's
        scope; with `write_back` (a host region) recorded in `writes_back`."""
        copies: list[ir.Stmt] = []
        for name, node in _first_assignments(stmts).items():
            v = self.host_scope.lookup(name)
            if not (isinstance(v, Scalar) and v.mutable and v.kind == "var"):
                continue
            if not write_back:
                _warn_unchanged(name, node)
            self.note_host_reads(v)
            local = name + LOCAL
            copies.append(ir.Var(local, v.dtype, v.expr, loc=v.loc))
            self.scope.bind(name, Scalar(ir.Sym(local, v.dtype), mutable=True, kind="var",
                                         loc=v.loc))
            if write_back:
                self.kernel.writes_back.append((v.expr.name, local))
        return copies
