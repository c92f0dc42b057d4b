"""A small parser for the PTX subset that pyptx emits (one statement a line).

It keeps, for every instruction, its PTX line number and text and the
Choreo source line (`// file.co:N` comments, see launch.py) so that every
report can be given in the user's terms. Registers are numbered once here;
the machine keeps them in a per-warp list indexed by that number.
"""
from __future__ import annotations

import re
import struct
from dataclasses import dataclass, field
from typing import Optional

# Storage dtype of a register by its declared PTX type (numpy names).
REG_STORAGE = {
    "pred": "bool", "b8": "uint8", "u8": "uint8", "s8": "int8",
    "b16": "uint16", "u16": "uint16", "s16": "int16", "f16": "uint16", "bf16": "uint16",
    "b32": "uint32", "u32": "uint32", "s32": "int32", "f32": "float32",
    "b64": "uint64", "u64": "uint64", "s64": "int64", "f64": "float64",
    "f16x2": "uint32", "bf16x2": "uint32",
}

SPECIAL_REGS = ("%tid", "%ntid", "%ctaid", "%nctaid", "%laneid", "%warpid", "%nwarpid",
                "%smid", "%clock", "%clock64", "%globaltimer", "%lanemask")


class PtxSyntaxError(ValueError):
    pass


@dataclass
class Operand:
    """kind: reg | imm | sreg | sym | addr | vec | tmap | sink."""

    kind: str
    text: str
    reg: int = -1              # reg: register number
    value: object = None       # imm: int or ('f32'|'f64', bits); sreg/sym: name
    base: Optional["Operand"] = None  # addr/tmap: register or symbol (None: absolute)
    offset: int = 0            # addr: byte offset
    items: tuple = ()          # vec: operands; tmap: coordinate operands


@dataclass
class Inst:
    idx: int
    line: int                  # 1-based PTX line
    text: str                  # the statement as written
    opcode: str                # dotted, e.g. "add.f32"
    operands: list
    guard: int = -1            # predicate register number, -1: unguarded
    guard_neg: bool = False
    co: Optional[str] = None   # "file.co:N" of the Choreo statement
    parts: tuple = ()
    fn: object = None          # the decoded executor (machine)
    data: object = None        # a handler's pre-decoded facts
    srcs: tuple = ()           # register numbers read (for async-register races)
    at: Optional[str] = None   # "path.co:N:C" of the element it accesses (`// at ...` before it)

    def where(self, ptx_name: str = "kernel.ptx") -> str:
        co = f" ({self.co})" if self.co else ""
        return f"{ptx_name}:{self.line}{co}: {self.text}"


@dataclass
class Param:
    name: str
    ptype: str                 # "u32", "u64", "b8"...
    size: int                  # bytes
    align: int


@dataclass
class Kernel:
    name: str
    params: list
    reg_names: list            # number -> name
    reg_types: list            # number -> declared PTX type
    insts: list
    labels: dict               # name -> instruction index
    target: str = ""
    maxntid: tuple = ()
    minnctapersm: int = 0      # .minnctapersm (0: none)
    maxnreg: int = 0           # .maxnreg (0: none)
    reg_index: dict = field(default_factory=dict)
    shared_window: tuple = ("smem",)  # names of the dynamic shared window (.extern .shared)
    variables: dict = field(default_factory=dict)  # other .global/.local/.param variables: space

    def reg(self, name: str) -> int:
        return self.reg_index[name]


_CO = re.compile(r"//\s*([\w./-]+\.co:\d+)")
# `// at path.co:N:C`: the element access of the next instruction (launch.traced_ptx)
_AT = re.compile(r"//\s*at\s+(\S+\.co:\d+:\d+)")
_REG_DECL = re.compile(r"\.reg\s+\.(\w+)\s+(.+?);")
# `.extern .shared .align 128 .b8 NAME[];`: the dynamic shared memory window, whatever its name
_EXTERN_SHARED = re.compile(r"\.extern\s+\.shared\s+(?:\.align\s+\d+\s+)?\.\w+\s+([\w$]+)\s*\[\s*\]")
#: a variable of a state space the emulator gives no storage (`.local .align 8 .b8 buf[8];`)
_VARIABLE = re.compile(r"\.(global|local|param|const)\s+(?:\.align\s+\d+\s+)?\.\w+\s+([\w$]+)")
_PARAM = re.compile(r"\.param\s+(?:\.align\s+(\d+)\s+)?\.(\w+)\s+(\w+)(?:\[(\d+)\])?")
_SIZES = {"b8": 1, "u8": 1, "s8": 1, "b16": 2, "u16": 2, "s16": 2, "f16": 2, "b32": 4,
          "u32": 4, "s32": 4, "f32": 4, "b64": 8, "u64": 8, "s64": 8, "f64": 8}


def _split_top(s: str) -> list[str]:
    """Splits on commas outside [] and {}."""
    out, depth, cur = [], 0, []
    for ch in s:
        if ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
        if ch == "," and depth == 0:
            out.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    tail = "".join(cur).strip()
    if tail:
        out.append(tail)
    return out


_LABEL_DEF = re.compile(r"^\s*([\w$]+):")


def _scope_labels(lines: list) -> list:
    """Labels declared inside a nested `{ }` block are local to it (PTX ISA, "Statements":
    a block scopes its labels and variables; each inline-asm block of CuTe DSL's PTX reuses
    `LAB_WAIT:`/`DONE:`). Renames each block's own labels, and their uses inside it, apart
    (`DONE` -> `DONE$b3`), so that a branch reaches the label of its own block."""
    out = list(lines)
    stack: list = []          # (start line, labels defined directly in the block)
    body_open = False
    for i, raw in enumerate(lines):
        line = raw.split("//", 1)[0].strip()
        if line == "{":
            if not body_open:
                body_open = True
            else:
                stack.append((i, []))
            continue
        if line == "}" and stack:
            start, names = stack.pop()
            if names:
                pat = re.compile(r"(?<![\w$])(" + "|".join(map(re.escape, names)) + r")(?![\w$])")
                for j in range(start, i):
                    out[j] = pat.sub(lambda m: f"{m.group(1)}$b{start}", out[j])
            continue
        m = _LABEL_DEF.match(line)
        if m and stack:
            stack[-1][1].append(m.group(1))
    return out


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.reg_index: dict[str, int] = {}
        self.reg_names: list[str] = []
        self.reg_types: list[str] = []
        self.symbols: set[str] = {"smem"}

    def declare(self, name: str, ptype: str) -> None:
        if name not in self.reg_index:
            self.reg_index[name] = len(self.reg_names)
            self.reg_names.append(name)
            self.reg_types.append(ptype)

    def decl_regs(self, ptype: str, names: str) -> None:
        for item in names.split(","):
            item = item.strip()
            m = re.fullmatch(r"(%?[\w$]+)<(\d+)>", item)  # `%` optional: inline asm
            if m:
                for i in range(int(m.group(2))):
                    self.declare(f"{m.group(1)}{i}", ptype)
            elif item:
                self.declare(item, ptype)

    # ------------------------------------------------------------ operands
    def operand(self, s: str, lineno: int) -> Operand:
        s = s.strip()
        if s.startswith("{"):
            items = tuple(self.operand(x, lineno) for x in _split_top(s[1:-1]))
            return Operand("vec", s, items=items)
        if s.startswith("["):
            return self.address(s[1:-1].strip(), s, lineno)
        if "|" in s:  # `d|p` (PTX ISA: elect.sync, shfl.sync, setp's second predicate)
            items = tuple(self.operand(x, lineno) for x in s.split("|"))
            return Operand("vec", s, items=items)
        if s == "_":
            return Operand("sink", s)
        if s.startswith("%"):
            if s in self.reg_index:
                return Operand("reg", s, reg=self.reg_index[s])
            if s.split(".")[0] in SPECIAL_REGS:
                return Operand("sreg", s, value=s)
            raise PtxSyntaxError(f"line {lineno}: undeclared register {s}")
        if s in self.reg_index:  # a register declared without '%' (`.reg .u32 t;` in asm)
            return Operand("reg", s, reg=self.reg_index[s])
        return self.immediate_or_symbol(s, lineno)

    def immediate_or_symbol(self, s: str, lineno: int) -> Operand:
        low = s.lower()
        if re.fullmatch(r"0f[0-9a-f]{8}", low):
            return Operand("imm", s, value=("f32", int(s[2:], 16)))
        if re.fullmatch(r"0d[0-9a-f]{16}", low):
            return Operand("imm", s, value=("f64", int(s[2:], 16)))
        if re.fullmatch(r"-?0x[0-9a-f]+u?", low):
            return Operand("imm", s, value=int(low.rstrip("u"), 16))
        if re.fullmatch(r"-?\d+u?", low):
            return Operand("imm", s, value=int(low.rstrip("u")))
        if re.fullmatch(r"-?\d+\.\d*(e[-+]?\d+)?", low):
            bits = struct.unpack("<Q", struct.pack("<d", float(s)))[0]
            return Operand("imm", s, value=("f64", bits))
        if re.fullmatch(r"[A-Za-z_$][\w$]*", s):
            return Operand("sym", s, value=s)
        raise PtxSyntaxError(f"line {lineno}: cannot read operand '{s}'")

    def address(self, inner: str, text: str, lineno: int) -> Operand:
        parts = _split_top(inner)
        if len(parts) == 2 and parts[1].startswith("{"):  # [tmap, {c0, c1, ...}]
            base = self.operand(parts[0], lineno)
            coords = self.operand(parts[1], lineno).items
            return Operand("tmap", text, base=base, items=coords)
        m = re.fullmatch(r"([^+\-]+?)\s*(?:([+-])\s*(\w+))?", inner)
        if m is None:
            raise PtxSyntaxError(f"line {lineno}: cannot read address '{text}'")
        head, sign, off = m.group(1).strip(), m.group(2), m.group(3)
        offset = int(off, 0) * (-1 if sign == "-" else 1) if off else 0
        if re.fullmatch(r"-?\d+|0x[0-9a-fA-F]+", head):
            return Operand("addr", text, base=None, offset=int(head, 0) + offset)
        return Operand("addr", text, base=self.operand(head, lineno), offset=offset)

    # ------------------------------------------------------------ statements
    def instruction(self, stmt: str, lineno: int, idx: int, co) -> Inst:
        guard, neg = -1, False
        body = stmt
        if body.startswith("@"):
            g, _, body = body.partition(" ")
            neg = g.startswith("@!")
            name = g[2:] if neg else g[1:]
            if name not in self.reg_index:
                raise PtxSyntaxError(f"line {lineno}: undeclared predicate {name}")
            guard = self.reg_index[name]
            body = body.strip()
        opcode, _, rest = body.partition(" ")
        if opcode.split(".")[0] == "call":  # `call (ret), fn, (args)`: kept as written, for
            operands = [Operand("sym", x.strip(), value=x.strip())  # the decoder's refusal
                        for x in _split_top(rest)]
        else:
            operands = [self.operand(x, lineno) for x in _split_top(rest)] if rest.strip() else []
        srcs = tuple(sorted({r for op in operands[1:] for r in _regs_of(op)}))
        return Inst(idx, lineno, stmt, opcode, operands, guard, neg, co,
                    tuple(opcode.split(".")), srcs=srcs)

    def parse(self) -> Kernel:
        lines = _scope_labels(self.text.split("\n"))
        name, params, target, maxntid = None, [], "", ()
        bounds = {".minnctapersm": 0, ".maxnreg": 0}
        insts: list[Inst] = []
        labels: dict[str, int] = {}
        co = at = None
        in_params = in_body = False
        windows: list[str] = []
        variables: dict[str, str] = {}
        for lineno, raw in enumerate(lines, 1):
            am = _AT.search(raw)
            cm = _CO.search(raw) if am is None else None
            if am:
                at = am.group(1)
            if cm:
                co = cm.group(1)
            line = raw.split("//", 1)[0].strip()
            if not line:
                continue
            if line.startswith(".target"):
                target = line.split()[1].rstrip(",;")
                continue
            xm = _EXTERN_SHARED.match(line)
            if xm and name is None:  # module scope: the dynamic shared window's name
                windows.append(xm.group(1))
                self.symbols.add(xm.group(1))
                continue
            vm = _VARIABLE.match(line)
            if vm and not in_params:  # named by the refusal of an instruction that uses it
                variables[vm.group(2)] = vm.group(1)
                continue
            if ".entry" in line:
                m = re.search(r"\.entry\s+([\w$]+)\s*\(?", line)
                name = m.group(1)
                in_params = "(" in line and ")" not in line
                continue
            if in_params:
                if line.startswith(")"):
                    in_params = False
                    continue
                pm = _PARAM.search(line)
                if pm:
                    ptype, pname = pm.group(2), pm.group(3)
                    count = int(pm.group(4) or 1)
                    params.append(Param(pname, ptype, _SIZES.get(ptype, 1) * count,
                                        int(pm.group(1) or _SIZES.get(ptype, 1))))
                    self.symbols.add(pname)
                continue
            if line.startswith((".maxntid", ".reqntid")):  # .reqntid: the exact block, a
                # bound as .maxntid is (PTX ISA, "Performance-Tuning Directives: .reqntid")
                maxntid = tuple(int(x) for x in re.findall(r"\d+", line))
                continue
            if line.split(" ")[0] in bounds:
                bounds[line.split(" ")[0]] = int(re.findall(r"\d+", line)[0])
                continue
            if name is None:
                continue
            if line == "{":
                in_body = True
                continue
            if not in_body or line in ("{", "}"):
                continue
            rm = _REG_DECL.match(line)
            if rm:
                self.decl_regs(rm.group(1), rm.group(2))
                continue
            if line.startswith("."):
                continue  # other directives (.shared inside the body, .pragma)
            lm = re.fullmatch(r"([\w$]+):", line)
            if lm:
                labels[lm.group(1)] = len(insts)
                continue
            for stmt in (s.strip() for s in line.split(";")):
                if stmt:
                    insts.append(self.instruction(stmt, lineno, len(insts), co))
                    insts[-1].at, at = at, None
        if name is None:
            raise PtxSyntaxError("no .entry function in the PTX")
        # The closing brace of an entry is an implicit exit (a thread kernel ends with its
        # last join's bar.sync; a branch may target a label just before the brace).
        insts.append(self.instruction("ret", len(lines), len(insts), co))
        return Kernel(name, params, self.reg_names, self.reg_types, insts, labels, target,
                      maxntid, bounds[".minnctapersm"], bounds[".maxnreg"], self.reg_index,
                      tuple(windows) or ("smem",), variables)


def _regs_of(op: Operand):
    if op.kind == "reg":
        yield op.reg
    elif op.kind in ("vec", "tmap"):
        for it in op.items:
            yield from _regs_of(it)
    if op.base is not None:
        yield from _regs_of(op.base)


def parse_ptx(text: str) -> Kernel:
    """The first .entry of `text` (the subset of PTX pyptx writes)."""
    return _Parser(text).parse()
