"""The one place a program's names become names of the generated module and its PTX.

A Choreo name is any identifier the language does not reserve (check refuses its
keywords and type names: choreo_py/check/names.py). The generated pyptx module is
Python, and its PTX has a module scope of its own, so a valid Choreo name can still
be a Python keyword (`lambda`), a built-in or a name the module defines (`reg`,
`grid`, `KERNEL`), a PTX module-scope symbol (`smem`, `vprintf`), a word ptxas
parses as its own (`WARP_SZ`), or so long that ptxas crashes (it segfaults on a
30,000-character identifier). Every generated identifier that comes from a program
name goes through `mangle` with the reserved set of its namespace:

    ordinary names              unchanged              (`blk`, `gemm`)
    reserved, or ending in `_`   a `_` appended         (`lambda` -> `lambda_`, `a_` -> `a__`)
    longer than MAX_LEN          a prefix, `_h`, a hash, `_`

The map is injective (collision-free) on the names of one namespace: an unchanged
name never ends in `_`, and stripping the one appended `_` gives the name back; a
long name's output differs from every short one's by its length and `_h<hash>_`
shape (up to a collision of 48 bits of SHA-256). Names the compiler derives from a
mangled name (`<entry>_fmt0`, `_grid_<kernel>`) use a suffix or prefix that
`mangle` never produces for a program name of that namespace (see the reserved
patterns below). Deterministic: the same name always maps to the same text.
"""
from __future__ import annotations

import builtins
import hashlib
import keyword
import re

#: ptxas reads identifiers of tens of thousands of characters badly (a segfault at
#: 30,000); PTX names are kept well inside what it handles, and readable.
MAX_LEN = 64
_PREFIX = 40

#: Names the generated Python module defines or imports at its top level (every
#: pyptx type, as a module may import any of them), and Python's own names.
PY_MODULE_NAMES = frozenset("""
    kernel ptx reg pyptx ARCH KERNELS KERNEL ENTRY THREADS SMEM_BYTES PARAMS TENSORS LAUNCHES
    DIMS grid failed_assertions dims
    b8 b16 b32 b64 b128 bf16 bf16x2 e4m3 e5m2 f16 f16x2 f32 f64 pred s8 s16 s32 s64 tf32
    u8 u16 u32 u64 PtxType
""".split()) | frozenset(keyword.kwlist) | frozenset(keyword.softkwlist) | frozenset(dir(builtins))

#: Symbols of the PTX module's scope besides the entries (the dynamic shared memory,
#: printf's callee) and words ptxas parses as its own where an identifier stands.
PTX_MODULE_NAMES = frozenset({"smem", "vprintf", "WARP_SZ", "_"})

#: Program names that would read as a compiler-derived name of the namespace: the
#: module's private helpers (`_grid_k`, `_smem_k`, `_Module`) start with `_` in Python;
#: printf's format strings are `<entry>_fmt<n>` in PTX.
_PY_DERIVED = re.compile(r"^_")
_PTX_DERIVED = re.compile(r"_fmt\d+$")


def mangle(name: str, reserved: frozenset, derived: re.Pattern | None = None) -> str:
    """`name` as an identifier of a namespace that reserves `reserved` (and the names
    `derived` matches, the compiler's own): see the module docstring for the map."""
    if len(name) > MAX_LEN:
        digest = hashlib.sha256(name.encode("utf-8")).hexdigest()[:12]
        return f"{name[:_PREFIX]}_h{digest}_"
    if name in reserved or name.endswith("_") or (derived is not None and derived.search(name)):
        return name + "_"
    return name


def py_name(name: str) -> str:
    """A program name (a kernel, a size) as a name of the generated module's top level."""
    return mangle(name, PY_MODULE_NAMES, _PY_DERIVED)


def ptx_name(name: str) -> str:
    """A program name (a kernel) as a PTX module-scope identifier: its entry."""
    return mangle(name, PTX_MODULE_NAMES, _PTX_DERIVED)


def short(hint: str) -> str:
    """A hint for a name the writer makes unique itself (registers, labels, parameters):
    only the length needs bounding; the writer's own counter keeps them apart."""
    return mangle(hint, frozenset()) if len(hint) > MAX_LEN else hint


def ptr_param(tensor: str) -> str:
    """The PTX parameter of a tensor's pointer (entry scope: `ptr_` keeps it off the rest)."""
    return f"ptr_{short(tensor)}"


def dim_param(dim: str) -> str:
    """The PTX parameter of a symbolic size."""
    return f"dim_{short(dim)}"


#: Top-level names of a module of several entries that no entry may take (the module's
#: own helpers besides PY_MODULE_NAMES).
_MODULE_HELPERS = frozenset({"_Module", "_split", "PRELUDE"})


class TopLevel:
    """The top level of one generated module: every name defined there is claimed once,
    so an entry's function and its helpers (`_grid_<fn>`) never replace one another,
    whatever the program's names (a kernel `_grid_k` beside a kernel `k`)."""

    def __init__(self) -> None:
        self.taken = set(PY_MODULE_NAMES | _MODULE_HELPERS)

    def claim(self, want: str) -> str:
        name, n = want, 1
        while name in self.taken:
            n += 1
            name = f"{want}_{n}"
        self.taken.add(name)
        return name
