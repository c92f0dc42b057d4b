"""Writes the generated pyptx module: Python text, one call per PTX instruction.

The lowering never builds PTX itself. It writes a Python module whose kernel
function, when traced by pyptx, emits the instructions; `--emit pyptx`
prints that module and `--emit ptx` runs it. This file is the only place
that knows how that text is spelled.

Registers get readable names: the Python variable `bm` is the PTX register
`%bm`. Names are made unique per module and kept clear of pyptx's own
automatic names (`%r12`, `%p3`, ...) and of PTX special registers.

Code is kept flat (labels and predicated branches, never `ptx.if_` blocks,
whose nesting pyptx 0.1.1 mispairs). Chunks make hoisting possible: a mark
is an empty chunk at the current position that later lines can be written
into (loop-invariant values placed before the loop that needs them).
Inside `pairing` (an apply, on a target with .f32x2 forms) instructions are held and
written when the block ends, or at the next line that is not an instruction or a
declaration, in the order f32x2.pair gives them.
"""
from __future__ import annotations

import keyword
import math
import os
import re
import struct
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Optional, Union

from choreo_py.source import SOURCES, Loc

from . import f32x2, names

INDENT = "    "

#: PTX special registers and pyptx's automatic register prefixes: a
#: register named like one of these would clash.
_PTX_RESERVED = {
    "tid", "ntid", "laneid", "warpid", "nwarpid", "ctaid", "nctaid", "smid", "nsmid",
    "gridid", "clock", "clock64", "globaltimer", "envreg", "pm", "lanemask_eq",
    "lanemask_le", "lanemask_lt", "lanemask_ge", "lanemask_gt", "dynamic_smem_size",
    "total_smem_size", "aggr_smem_size", "cluster_ctarank", "clusterid",
}
_AUTO_NAME = re.compile(r"^(?:p|rs|r|rd|rq|h|hh|f|fd|b)(?:\d*|arr\d+_\d*)$")
#: Names the generated module itself uses.
_PY_RESERVED = {
    "ptx", "reg", "kernel", "pred", "b16", "b32", "b64", "s32", "s64", "u32", "u64", "f32",
    "f16", "bf16", "list", "range", "grid", "KERNEL", "ARCH", "ENTRY", "THREADS",
    "SMEM_BYTES", "PARAMS", "TENSORS", "LAUNCHES",
}


def module_safe(name: str) -> str:
    """A program name as a name of the generated module's top level (names.py_name)."""
    return names.py_name(name)


def ptx_entry_name(name: str) -> str:
    """The PTX entry of a kernel (names.ptx_name: `smem` -> `smem_`, long names shortened)."""
    return names.ptx_name(name)


def f32_hex(x: float) -> str:
    """PTX f32 immediate with the exact bit pattern (`0f3F800000` for 1.0)."""
    x = float(x)
    if abs(x) > 3.4028235677973366e38 and not math.isinf(x):  # past FLT_MAX + ulp/2
        x = math.copysign(math.inf, x)  # what round-to-nearest gives, as a folded f32 would
    return "0f%08X" % struct.unpack("<I", struct.pack("<f", x))[0]


@dataclass(frozen=True)
class V:
    """A value in the generated code: a register (by its Python name) or an immediate.

    `ty` is the PTX type name ("s32", "u32", "f32", "pred", "b32", "u64", ...).
    For an immediate, `const` holds the Python value and `text` its spelling.
    """

    text: str
    ty: str
    const: Optional[Union[int, float, bool]] = None

    @property
    def is_const(self) -> bool:
        return self.const is not None

    @staticmethod
    def imm(value, ty: str) -> "V":
        if ty == "pred":
            return V("1" if value else "0", ty, bool(value))
        if ty in ("f32", "f64"):
            return V(f'"{f32_hex(value)}"', ty, float(value))
        return V(str(int(value)), ty, int(value))

    def ptx_name(self) -> str:
        """How PTX spells this value (for operands written inside strings)."""
        if self.is_const:
            return self.text.strip('"')
        return "%" + self.text


class Mark:
    """An insertion point: an empty chunk that lines can be added to later."""

    def __init__(self, chunk: list[str]) -> None:
        self.chunk = chunk


class Writer:
    def __init__(self) -> None:
        self._chunks: list[list[str]] = [[]]
        self._target: Optional[list[str]] = None
        self._names: set[str] = set()
        self._labels: dict[str, int] = {}
        self._arrays: dict[str, int] = {}  # register array -> its length
        self._loc: Optional[Loc] = None  # the statement whose code is being written
        #: (registers, opcode, statement) of the instruction with the most register
        #: operands: ptxas must hold them all at once (kernel.py checks the budget)
        self.widest: tuple[int, str, Optional[Loc]] = (0, "", None)
        self._last_src: Optional[tuple[str, int]] = None
        self.types_used: set[str] = set()
        self._recs: Optional[list] = None  # instructions held for pairing (f32x2.py)
        self._packs: dict = {}  # (x, y) -> the .b64 register that holds them, while valid
        self._solo = 0  # > 0: the instructions written now are never paired

    # ------------------------------------------------------------ text
    def _out(self) -> list[str]:
        return self._target if self._target is not None else self._chunks[-1]

    def line(self, text: str) -> None:
        if self._recs is not None and self._target is None:
            if text.startswith("#"):  # a comment keeps its place among the instructions
                self._recs.append(f32x2.Inst(text=INDENT + text))
                return
            if " = reg." not in text:  # (a declaration goes ahead: it precedes any use)
                self._flush_pairs()
        self._out().append(INDENT + text)

    def comment(self, text: str) -> None:
        for part in text.splitlines():
            self.line("# " + part)

    def blank(self) -> None:
        if self._recs is not None and self._target is None:
            self._recs.append(f32x2.Inst(text=""))
            return
        out = self._out()
        if out and out[-1] != "":
            out.append("")

    def source(self, loc: Optional[Loc], what: Optional[str] = None) -> None:
        """`# file.co:LINE: statement` before the code of a statement (once per line)."""
        if loc is None:
            return
        self._loc = loc
        key = (loc.file, loc.line)
        if key == self._last_src and self._target is None:
            return
        if self._target is None:
            self._last_src = key
        text = what if what is not None else source_statement(loc)
        self.line(f"# {os.path.basename(loc.file)}:{loc.line}: {text}")

    def text(self) -> str:
        return "\n".join(line for chunk in self._chunks for line in chunk)

    # ------------------------------------------------------------ hoisting
    def mark(self) -> Mark:
        """An insertion point here; the lines after it go to a new chunk."""
        if self._target is not None:
            return Mark(self._target)  # nested: insert at the redirect target
        self._flush_pairs()
        m = Mark([])
        self._chunks.append(m.chunk)
        self._chunks.append([])
        return m

    def writing_into(self, mark: Optional[Mark]) -> bool:
        """Whether the lines written now go to `mark` (an `into(mark)` block is open)."""
        return mark is not None and self._target is mark.chunk

    @contextmanager
    def into(self, mark: Optional[Mark]):
        """Write to `mark` (or here when None) for the duration of the block."""
        if mark is None:
            yield
            return
        old = self._target
        self._target = mark.chunk
        try:
            yield
        finally:
            self._target = old

    # ------------------------------------------------------------ names
    def fresh(self, hint: str) -> str:
        base = names.short(re.sub(r"[^A-Za-z0-9_]", "_", hint) or "v")
        if base[0].isdigit():
            base = "v" + base
        if (base in _PTX_RESERVED or base in _PY_RESERVED or keyword.iskeyword(base)
                or _AUTO_NAME.match(base)):
            base += "_"
        name, n = base, 1
        while name in self._names:
            n += 1
            name = f"{base}_{n}"
        self._names.add(name)
        return name

    def reg(self, ty: str, hint: str, init: Optional[V] = None) -> V:
        """Declares a register; `init` (a V) is moved into it."""
        name = self.fresh(hint)
        self.types_used.add(ty)
        self.line(f'{name} = reg.scalar({ty}, name="%{name}")')
        v = V(name, ty)
        if init is not None:
            self.op(f"mov.{_mov_type(ty)}", v, init)
        return v

    def array(self, ty: str, count: int, hint: str) -> str:
        """Declares `count` registers `%name0..`; returns the Python name of the array.

        ptxas rejects a parameterised name whose base ends in a digit, and the
        element names must not be taken."""
        base = hint if not hint[-1:].isdigit() else hint + "_"
        while True:
            name = self.fresh(base)
            if name[-1].isdigit():
                self._names.discard(name)
                base = name + "_"
                continue
            elems = [f"{name}{i}" for i in range(count)]
            if not any(e in self._names for e in elems):
                break
            base = name + "_"
        self._names.update(elems)  # keep scalar names off the element names
        self._arrays[name] = count
        self.types_used.add(ty)
        self.line(f'{name} = reg.array({ty}, {count}, name="%{name}")')
        return name

    def label(self, hint: str) -> str:
        hint = names.short(hint)
        n = self._labels.get(hint, 0)
        self._labels[hint] = n + 1
        return f"L_{hint}_{n}"

    # ------------------------------------------------------------ instructions
    def op(self, opcode: str, *operands, pred: Optional[V] = None, negate: bool = False,
           at: Optional[Loc] = None) -> None:
        """`ptx.inst.<opcode>(operands)`; opcode is dotted PTX (`add.s32`, `shfl.sync.bfly.b32`).
        `at`: the source of an element access, as a comment `# at file.co:LINE:COL` (the
        emulator reports a fault of the access there; the PTX is the same without it)."""
        regs = sum(self._registers(o) for o in operands)
        if regs > self.widest[0]:
            self.widest = (regs, opcode, self._loc)
        if self._recs is not None and self._target is None:
            self._recs.append(f32x2.record(opcode, operands, pred, negate, at, self._solo > 0))
            return
        self._op_line(opcode, operands, pred, negate, at)

    def _op_line(self, opcode: str, operands, pred: Optional[V], negate: bool,
                 at: Optional[Loc]) -> None:
        path = ".".join(_py_attr(part) for part in opcode.split("."))
        args = [_arg(o) for o in operands]
        if pred is not None:
            args.append(f"pred={'~' if negate else ''}{pred.text}")
        where = f"  # at {os.path.basename(at.file)}:{at.line}:{at.col}" if at is not None else ""
        self.line(f"ptx.inst.{path}({', '.join(args)}){where}")

    def _registers(self, o) -> int:
        """Registers an operand names: a register, a list of them, `list(array)`."""
        if isinstance(o, V):
            return 0 if o.is_const else 1
        if isinstance(o, (list, tuple)):
            return sum(self._registers(x) for x in o)
        m = _LIST_OF.fullmatch(str(o))
        return self._arrays.get(m.group(1), 0) if m else 0

    # ------------------------------------------------------------ f32x2 pairs
    @contextmanager
    def pairing(self, on: bool):
        """Holds the instructions written in the block and pairs their independent f32
        add/sub/mul/fma into .f32x2 forms (f32x2.py) when `on` (a target that has them);
        a nested block joins the open one."""
        if not on or self._recs is not None:
            yield
            return
        self._recs = []
        self._packs = {}
        try:
            yield
        finally:
            self._flush_pairs()
            self._recs = None

    @contextmanager
    def solo(self):
        """The instructions written in the block stay scalar (they still move, as the
        cone of a pair that needs them)."""
        self._solo += 1
        try:
            yield
        finally:
            self._solo -= 1

    def _flush_pairs(self) -> None:
        recs, self._recs = self._recs, None
        if recs:
            for r in f32x2.pair(recs):
                self._emit_held(r)
        self._packs = {}
        if recs is not None:
            self._recs = []

    def _emit_held(self, r) -> None:
        if r.pair is not None:
            return self._emit_pair(*r.pair)
        if r.text is not None:
            out = self._out()
            if r.text or (out and out[-1] != ""):
                out.append(r.text)
            return
        self._forget(r.defs if r.pure else f32x2.mentioned(r))
        self._op_line(r.opcode, r.operands, r.pred, r.negate, r.at)

    def _emit_pair(self, a: "f32x2.Inst", b: "f32x2.Inst") -> None:
        """a and b as one .f32x2 instruction: packed sources, the pair, the results
        unpacked into a's and b's registers."""
        srcs = [self._pack(x, y) for x, y in zip(a.operands[1:], b.operands[1:])]
        d = self.reg("b64", "x2")
        self._op_line(a.opcode[: -len("f32")] + "f32x2", (d, *srcs), None, False, a.at)
        self._forget(a.defs | b.defs)
        self._op_line("mov.b64", ([a.operands[0], b.operands[0]], d), None, False, None)
        self._packs[(a.operands[0].text, b.operands[0].text)] = d  # a later pair reads d

    def _pack(self, x: V, y: V) -> V:
        key = (x.text, y.text)
        if key not in self._packs:
            r = self.reg("b64", "x2in")
            src = f32x2.imm64(x, y) if x.is_const else [x, y]
            self._op_line("mov.b64", (r, src), None, False, None)
            self._packs[key] = r
        return self._packs[key]

    def _forget(self, names_written) -> None:
        """Drops the packs of registers just written (or, for an instruction the pairing
        cannot read, of every name it spells)."""
        stale = [k for k in self._packs
                 if any(t in names_written or t.split("[")[0] in names_written for t in k)]
        for k in stale:
            del self._packs[k]

    def call(self, fn: str, *args: str) -> None:
        """A typed pyptx call (`ptx.mbarrier.wait`, `ptx.bra`, ...), arguments already spelled."""
        self.line(f"{fn}({', '.join(args)})")

    def put_label(self, name: str) -> None:
        self.line(f'ptx.label("{name}")')

    def bra(self, label: str, pred: Optional[V] = None, negate: bool = False,
            uni: bool = False) -> None:
        """`bra`; `uni`: the guard is the same in every active thread of a warp (`bra.uni`),
        which lets ptxas keep the code after it warp-uniform."""
        if pred is not None and pred.is_const:
            if bool(pred.const) == negate:
                return
            pred = None
        guard = "" if pred is None else f", pred={'~' if negate else ''}{pred.text}"
        if uni:
            self.line(f'ptx.inst.bra.uni("{label}"{guard})')
        else:
            self.line(f'ptx.bra("{label}"{guard})')


_LIST_OF = re.compile(r"list\((\w+)\)")


def _mov_type(ty: str) -> str:
    return {"pred": "pred"}.get(ty, ty)


def _py_attr(part: str) -> str:
    """PTX modifier -> pyptx attribute (`global` -> `global_`, `4d` -> `_4d`, `::` -> `__`)."""
    part = part.replace("::", "__")
    if part[:1].isdigit():
        return "_" + part
    if keyword.iskeyword(part):
        return part + "_"
    return part


def _arg(o) -> str:
    if isinstance(o, V):
        return o.text
    if isinstance(o, (list, tuple)):
        return "[" + ", ".join(_arg(x) for x in o) + "]"
    return str(o)


def source_statement(loc: Loc) -> str:
    """The Choreo statement starting at `loc`: its line, joined with continuation lines."""
    first = SOURCES.line(loc)
    if first is None:
        return "?"
    parts = [first.strip()]  # the whole line: declarations point into it (`event qf;`)
    line = loc.line
    while not _code_of(parts[-1]).endswith((";", "{", "}")) and len(parts) < 4:
        line += 1
        nxt = SOURCES.line(Loc(loc.file, line, 1))
        if nxt is None:
            break
        parts.append(nxt.strip())
    return " ".join(_code_of(" ".join(p for p in parts if p)).split())[:160]


def _code_of(line: str) -> str:
    """A line without its `//` comment and trailing space; by `find`, not a regex: one with
    a `\\s*` before `//` retries at every blank and is quadratic in a long run of them."""
    cut = line.find("//")
    return (line if cut < 0 else line[:cut]).rstrip()
