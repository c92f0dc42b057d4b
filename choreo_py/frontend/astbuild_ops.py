"""Building the AST: DMA/TMA transfers, MMA operations and inline assembly.

The grammar collects `.name<args>` modifiers generically; here they are
interpreted.  Unknown or misplaced modifiers are errors at the modifier.
Value checks that need the whole statement (eviction order, sparsity
pattern...) live in parse_checks.py, working from `DmaOp.modifiers`.
"""
from __future__ import annotations

from lark import Token

from . import ast
from .astbuild_exprs import TYPE_ALIASES, BuilderBase, nodes

DMA_OPERATIONS = ("copy", "load", "pad", "transp", "any")
DMA_ATTRIBUTES = ("swiz", "swizzle", "sp", "zfill", "promote", "multicast",
                  "evict_first", "evict_last", "rows")
MMA_LAYOUTS = ("row", "col")
ELEMENT_TYPES = frozenset("""
    f64 tf32 f32 f16 bf16 f8 f8_e4m3 f8_e5m2 f8_ue4m3 f8_ue8m0 f6_e2m3 f6_e3m2 f4_e2m1
    bin1 u1 u2 s2 u4 s4 u6 s6 u8 s8 u16 s16 u32 s32 u64 s64
""".split())


class OpBuilder(BuilderBase):

    # ------------------------------------------------------------ modifiers

    def modifiers(self, c):
        return c

    def modifier(self, c):
        _, name, args = c
        return ast.Modifier(name=str(name), args=args or [], loc=self.tloc(c[0]))

    def modifier_args(self, c):
        return nodes(c)

    def modifier_arg(self, c):
        lhs, colon, rhs = c
        if colon is None:
            return lhs
        return ast.Binary(op=":", lhs=lhs, rhs=rhs, loc=lhs.loc)

    def _no_args(self, mod) -> None:
        if mod.args:
            self.error(f"'.{mod.name}' takes no '<...>' arguments", mod.loc)

    # ------------------------------------------------------------ DMA / TMA

    def dma_kw(self, c):
        return c[0]

    def transfer(self, c):
        src, _, dst, _, after = c
        return src, dst, after or []

    def transfer_target(self, c):
        if isinstance(c[0], Token):     # `=> local`
            return ast.StorageTarget(storage=str(c[0]), loc=self.tloc(c[0]))
        return c[0]

    def dma_stmt(self, c):
        return c[0]

    def dma_op(self, c):
        kw, mods, transfer = c
        engine = str(kw)
        op_mod = mods[0]
        if op_mod.name not in DMA_OPERATIONS:
            self.error(f"unknown {engine.upper()} operation '{engine}.{op_mod.name}' (expected "
                       f"{', '.join(engine + '.' + o for o in DMA_OPERATIONS)})", op_mod.loc)
        op = ast.DmaOp(engine=engine, operation=op_mod.name, future=None, src=None, dst=None,
                       modifiers=mods, loc=self.tloc(kw))
        self._dma_config(op, op_mod)
        rest = mods[1:]
        if rest and rest[0].name == "async":
            self._no_args(rest[0])
            op.is_async, rest = True, rest[1:]
        for mod in rest:
            self._dma_attribute(op, mod)
        if transfer is None:
            if op.operation != "any":
                self.error(f"expected a source after '{engine}.{op.operation}'", op_mod.loc)
        else:
            if op.operation == "any":
                self.error(f"'{engine}.any' is a placeholder and takes no operands", op_mod.loc)
            op.src, op.dst, op.after = transfer
        return op

    def _dma_config(self, op, mod) -> None:
        if op.operation == "pad":
            if len(mod.args) != 4 or not all(isinstance(a, ast.ITupleLit) for a in mod.args[:3]):
                self.error("expected 'dma.pad<{low...}, {high...}, {mid...}, value>'", mod.loc)
                return
            low, high, mid, value = mod.args
            op.pad = ast.PadConfig(low=low.elements, high=high.elements, mid=mid.elements,
                                   value=value, loc=mod.loc)
        elif op.operation == "transp":
            if not mod.args or not all(isinstance(a, ast.IntLit) for a in mod.args):
                self.error("expected a permutation: 'dma.transp<1, 0>'", mod.loc)
                return
            op.transpose = [a.value for a in mod.args]
        elif mod.args:
            self._no_args(mod)

    def _dma_attribute(self, op, mod) -> None:
        name = mod.name
        if name in ("swiz", "swizzle"):
            op.swizzle = self._swizzle(mod)
        elif name == "sp":
            op.sparse = self._sparse_pattern(mod)
        elif name == "promote":
            op.promote = self._single_int(mod)
        elif name in ("evict_first", "evict_last"):
            self._no_args(mod)
            if op.evict is None:
                op.evict = name
        elif name in ("zfill", "multicast"):
            self._no_args(mod)
            setattr(op, name, True)
        elif name == "rows":  # `.rows<n>`: a store of the box's first n rows
            if len(mod.args) != 1:
                self.error("'.rows' expects one count: '.rows<n>'", mod.loc)
            else:
                op.rows = mod.args[0]
        elif name == "async":
            self.error(f"'.async' must directly follow the operation: "
                       f"'{op.engine}.{op.operation}.async'", mod.loc)
        else:
            self.error(f"unknown {op.engine.upper()} modifier '.{name}'", mod.loc)

    def _swizzle(self, mod):
        """Explicit `.swiz<N>` gives N; a bare `.swiz` lets the compiler choose."""
        if not mod.args:
            return "auto"
        value = self._single_int(mod)
        if value is not None and value not in (32, 64, 128):
            self.error("swizzle value must be 128, 64, or 32", mod.args[0].loc)
        return value

    def _single_int(self, mod):
        if len(mod.args) != 1 or not isinstance(mod.args[0], ast.IntLit):
            self.error(f"'.{mod.name}' expects one integer: '.{mod.name}<N>'", mod.loc)
            return None
        return mod.args[0].value

    def _sparse_pattern(self, mod):
        args = mod.args
        if not args:
            return (2, 4)
        if len(args) == 1 and isinstance(args[0], ast.Binary) and args[0].op == ":":
            args = [args[0].lhs, args[0].rhs]
        if len(args) == 2 and all(isinstance(a, ast.IntLit) for a in args):
            return (args[0].value, args[1].value)
        self.error("expected a sparsity pattern: '.sp<2:4>'", mod.loc)
        return (2, 4)

    # ------------------------------------------------------------ MMA

    def mma_stmt(self, c):
        return c[0]

    def mma_op(self, c):
        kw, mods, operands = c[:3]
        level = c[4] if len(c) > 4 else None
        loc = self.tloc(kw)
        operands = operands or []
        first = mods[0].name
        if level is not None and (first != "fill" or len(operands) != 1):
            self.error(f"': {level}' says where an accumulator lives: only a declaring "
                       "'acc = mma.fill.T v : block' takes it", self.tloc(c[3]))
        elif level is not None and level != "block":
            self.error(f"an accumulator can be declared ': block' (one tile the block's roles "
                       f"share), not ': {level}'", self.tloc(c[3]))
        if first == "fill":
            fill = self._mma_fill(mods, operands, loc)
            fill.level = level if level == "block" else None
            return fill
        if first == "load":
            return self._mma_load(mods, operands, loc)
        if first == "store":
            return self._mma_store(mods, operands, loc)
        if first == "scale":
            return self._mma_scale(mods, operands, loc)
        if first in MMA_LAYOUTS:
            return self._mma_exec(mods, operands, loc)
        self.error(f"unknown MMA operation 'mma.{first}' (expected mma.fill, mma.load, "
                   "mma.row.col and the other layouts, mma.store or mma.scale)", mods[0].loc)
        return ast.MmaFill(target=ast.Name(id="?", loc=loc), value=ast.IntLit(
            value=0, suffix="", text="0", loc=loc), loc=loc)

    def _operands(self, what, operands, counts, loc):
        if len(operands) not in counts:
            want = " or ".join(str(n) for n in counts)
            self.error(f"'{what}' takes {want} operand{'s' if counts != (1,) else ''}, "
                       f"got {len(operands)}", loc)
            return False
        return True

    def _placeholder(self, loc):
        return ast.Name(id="?", loc=loc)

    def _mma_fill(self, mods, operands, loc):
        elem = None
        for mod in mods[1:]:
            self._no_args(mod)
            if mod.name in ELEMENT_TYPES and elem is None:
                elem = ast.TypeRef(name=TYPE_ALIASES.get(mod.name, mod.name), spelling=mod.name,
                                   loc=mod.loc)
            else:
                self.error(f"unknown modifier '.{mod.name}' for 'mma.fill' (expected an "
                           "element type such as '.f32')", mod.loc)
        if not self._operands("mma.fill", operands, (1, 2), loc):
            operands = (operands + [self._placeholder(loc)] * 2)[:2]
        if len(operands) == 2:
            return ast.MmaFill(target=operands[0], value=operands[1], elem=elem, declares=False,
                               loc=loc)
        return ast.MmaFill(target=self._placeholder(loc), value=operands[0], elem=elem, loc=loc)

    def _mma_load(self, mods, operands, loc):
        op = ast.MmaLoad(target=None, source=self._placeholder(loc), loc=loc)
        for mod in mods[1:]:
            if mod.name == "frag":
                self._no_args(mod)
            elif mod.name in ("swiz", "swizzle"):
                op.swizzle = self._swizzle(mod)
            elif mod.name == "async":
                self._no_args(mod)
                op.is_async = True
            else:
                self.error(f"unknown modifier '.{mod.name}' for 'mma.load'", mod.loc)
        if self._operands("mma.load", operands, (1, 2), loc):
            op.source = operands[0]
            if len(operands) == 2:
                op.target, op.declares = operands[1], False
        return op

    def _mma_exec(self, mods, operands, loc):
        layout = [m for m in mods[:2]]
        if len(layout) < 2 or layout[1].name not in MMA_LAYOUTS:
            self.error("an MMA needs the layouts of both operands: 'mma.row.col' "
                       "(or row.row, col.row, col.col)", mods[0].loc)
        op = ast.MmaOp(layout=".".join(m.name for m in layout), acc=self._placeholder(loc),
                       a=self._placeholder(loc), b=self._placeholder(loc), loc=loc)
        for mod in mods[2:]:
            self._no_args(mod)
            if mod.name == "async":
                op.is_async = True
            elif mod.name == "sp":
                op.sparse = True
            elif mod.name == "scale":
                pass
            else:
                self.error(f"unknown modifier '.{mod.name}' for an MMA", mod.loc)
        scaled = any(m.name == "scale" for m in mods[2:])
        counts = (5,) if scaled else (3, 4) if op.sparse else (3,)
        if self._operands(f"mma.{op.layout}", operands, counts, loc):
            op.acc, op.a, op.b = operands[:3]
            if scaled:
                op.scale = operands[3:]
            elif len(operands) == 4:
                op.metadata = operands[3]
        return op

    def _mma_store(self, mods, operands, loc):
        op = ast.MmaStore(source=self._placeholder(loc), dst=self._placeholder(loc), loc=loc)
        for mod in mods[1:]:
            self._no_args(mod)
            if mod.name == "async":
                op.is_async = True
            elif mod.name == "transp":
                op.transposed = True
            elif mod.name == "mask":
                op.mask = [self._placeholder(loc)]
            elif mod.name == "direct":
                op.direct = True
            else:
                self.error(f"unknown modifier '.{mod.name}' for 'mma.store'", mod.loc)
        counts = (3, 4) if op.mask else (2,)
        if self._operands("mma.store", operands, counts, loc):
            op.source, op.dst = operands[:2]
            op.mask = operands[2:]
        return op

    def _mma_scale(self, mods, operands, loc):
        for mod in mods[1:]:
            self.error(f"unknown modifier '.{mod.name}' for 'mma.scale'", mod.loc)
        if not self._operands("mma.scale", operands, (3,), loc):
            operands = [self._placeholder(loc)] * 3
        return ast.MmaScale(acc=operands[0], scales=operands[1], value=operands[2], loc=loc)

    # ------------------------------------------------------------ asm

    def asm_kw(self, c):
        return c[0]

    def asm_tail(self, c):
        return c

    def asm_piece(self, c):
        return c[0]

    def asm_operand(self, c):
        _, name, _, constraint, _, expr, _ = c
        if expr is None:                     # a clobber: just a string
            return constraint
        return ast.AsmOperand(constraint=constraint.value, expr=expr,
                              symbolic_name=str(name) if name is not None else None,
                              loc=constraint.loc)

    def asm_stmt(self, c):
        kw, volatile, _, template, tail, _ = c
        sections: list[list] = [[]]
        for piece in tail or []:
            if isinstance(piece, Token):
                if str(piece) == ":":
                    sections.append([])
                elif str(piece) == "::":
                    sections += [[], []]
            else:
                sections[-1].append(piece)
        if len(sections) > 4:
            self.error("too many ':' sections in an asm statement", self.tloc(kw))
        outputs, inputs, clobbers = (sections[1:] + [[], [], []])[:3]
        return ast.AsmStmt(template=template.value, volatile=volatile is not None,
                           outputs=[o for o in outputs if isinstance(o, ast.AsmOperand)],
                           inputs=[i for i in inputs if isinstance(i, ast.AsmOperand)],
                           clobbers=[s.value for s in clobbers if isinstance(s, ast.StringLit)],
                           loc=self.tloc(kw))
