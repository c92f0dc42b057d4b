"""Block-scaled MMAs in sema (a mixin of ops.OpBuilder, through frag_ops.FragOpBuilder).

Two forms (docs/reference/mma.md, "Block-scaled MMA"):

- `mma.row.row.scale acc, a, b, sa, sb;`: acc(i, j) += (a @ b)(i, j) * sa(i) * sb;
- `mma.scale acc, sa, sb;` after plain MMAs on acc in the same block of statements:
  the MMAs on acc since the start of that block (or since the block's previous
  `mma.scale acc`) are folded into acc the same way, their product scaled.

`sa` is a 2-D f32 tile of shape [M, 1] or [1, M] (one scale per accumulator row),
`sb` an f32 scalar. Hopper has no block-scaled wgmma and tcgen05's block-scaled
kinds take ue8m0 scales, not f32 ones, so both forms are built from the constructs
every backend has: a partial accumulator `<acc>__part` of acc's type and shape,
zeroed (`mma.fill`), the MMAs into it, and the fold, an `apply` over acc:

    acc.at(i, j) = acc.at(i, j) + part.at(i, j) * (sa.at(i, 0) * sb)

computed in f32 and rounded once to acc's type. The MMAs into the part are
synchronous, so the fold reads their finished result; on sm_90a the part lives in
registers beside acc and the fold is per-thread code over the rows each thread holds; on
sm_100a both are in tensor memory (passes/tmem_plan.py gives the sum, which no MMA
writes, columns of its own) and the fold is a tcgen05.ld of both and a tcgen05.st of acc.
"""
from __future__ import annotations

from ..frontend import ast as A
from .. import ir
from ..ir import build as B
from .exprs import err
from .values import FragValue, Unsupported
from .views import static_shape


class ScaledMmaBuilder:
    # scale_segments: AST name of an accumulator -> its open segment {"part": Frag|None,
    # "filled": bool}; the MMAs on it go into the part until its `mma.scale`.

    def _segments(self) -> dict:
        if not hasattr(self, "scale_segments"):
            self.scale_segments = {}
        return self.scale_segments

    def part_of(self, acc: ir.Frag, loc) -> ir.Frag:
        """The partial accumulator of `acc` (one per accumulator and kernel)."""
        name = f"{acc.name}__part"
        part = self.kernel.frag(name)
        if part is None:
            part = ir.Frag(name, acc.dtype, acc.shape, loc=loc)
            self.kernel.frags.append(part)
            self.emit(ir.FragDecl(part, None, loc=loc))
        return part

    def zero_part(self, part: ir.Frag, loc) -> None:
        zero = ir.Const(0.0, part.dtype) if ir.is_float(part.dtype) else ir.Const(0, part.dtype)
        self.emit(ir.MmaFill(part.name, zero, loc=loc))

    def scaled_target(self, s: A.MmaOp, acc: ir.Frag) -> ir.Frag:
        """Where a plain MMA on `acc` accumulates: acc, or its part inside a segment that
        an `mma.scale` closes."""
        seg = self._segments().get(s.acc.id) if isinstance(s.acc, A.Name) else None
        if seg is None:
            return acc
        # (the segment's scan zeroed the part before the statement holding this MMA)
        assert seg["part"] is not None, "an MMA the segment's scan did not see"
        return seg["part"]

    def after_part_mma(self, acc: ir.Frag, part: ir.Frag, node) -> None:
        if not acc.shape:
            acc.shape = part.shape
        elif part.shape and acc.shape != part.shape:
            have, (m, n) = "[" + ", ".join(map(str, acc.shape)) + "]", part.shape
            raise err(f"accumulator '{acc.name}' is {have}, but this MMA produces [{m}, {n}]", node)

    # ------------------------------------------------------------ mma.<layout>.scale
    def scaled_mma(self, s: A.MmaOp, plain) -> None:
        """`mma.row.row.scale acc, a, b, sa, sb;`; `plain(s, target)` builds the MMA."""
        if s.is_async:
            raise Unsupported("an asynchronous scaled MMA", s.loc)
        acc = self._frag_of(s.acc, "the accumulator")
        if isinstance(s.acc, A.Name) and s.acc.id in self._segments():
            raise err(f"'{s.acc.id}' is folded by an 'mma.scale' later in this block; a scaled "
                      "MMA on it cannot be inside that segment", s)
        part = self.part_of(acc, s.loc)
        self.zero_part(part, s.loc)
        plain(s, part)
        self.after_part_mma(acc, part, s.acc)
        self.fold(acc, part, s.scale[0], s.scale[1], s)

    # ------------------------------------------------------------ mma.scale
    def s_MmaScale(self, s: A.MmaScale) -> None:
        acc = self._frag_of(s.acc, "the accumulator of 'mma.scale'")
        seg = self._segments().get(s.acc.id) if isinstance(s.acc, A.Name) else None
        if seg is None or seg["part"] is None:
            raise err(f"'mma.scale' needs an MMA on '{acc.name}' before it in its block "
                      "(the product it scales)", s)
        self.fold(acc, seg["part"], s.scales, s.value, s)

    def fold(self, acc: ir.Frag, part: ir.Frag, rows_node, scale_node, s) -> None:
        """acc += part * rows(i) * scale, as an apply over acc."""
        if not acc.shape:
            raise err(f"'{acc.name}' has no shape yet: no MMA on it precedes the scaling", s)
        rows = self.view_of(rows_node)
        shape = static_shape(rows.view)
        m = acc.shape[0]
        if rows.dtype != "f32":
            raise err(f"a block scale is f32; {self.describe(rows_node)} is {rows.dtype}",
                      rows_node)
        if shape not in ((m, 1), (1, m)):
            got = "of unknown shape" if shape is None else f"[{', '.join(map(str, shape))}]"
            raise err(f"the row scales of a [{m}, {acc.shape[1]}] accumulator are an [{m}, 1] "
                      f"or [1, {m}] tile; {self.describe(rows_node)} is {got}", rows_node)
        scale = self.scalar(scale_node, "f32")
        if not ir.is_float(getattr(scale, "dtype", "s32")) and \
                getattr(scale, "dtype", "s32") not in ir.INT_TYPES:
            raise err(f"the second scale is a number; {self.describe(scale_node)} is not",
                      scale_node)
        names = ("__si", "__sj")
        i, j = (ir.Sym(n, "s32") for n in names)
        zero = ir.Const(0, "s32")
        row = ir.BufElem(rows.view, (i, zero) if shape == (m, 1) else (zero, i), "f32")
        factor = B.binop("*", row, scale)
        part_elem = ir.Elem(part.name, (i, j), part.dtype)
        acc_elem = ir.Elem(acc.name, (i, j), acc.dtype)
        # (an f32 value stored into an f16 accumulator is rounded by the store, as an
        # element store of the program's own would be)
        value = B.assigned(B.binop("+", acc_elem, B.binop("*", part_elem, factor)), acc.dtype)
        body = [ir.ElemStore(acc.name, (i, j), value, loc=s.loc)]
        self.emit(ir.Apply(names, acc.shape, acc.name, body, loc=s.loc))

    # ------------------------------------------------------------ segments
    def scale_plan(self, stmts: list) -> dict:
        """{accumulator name: indices of its `mma.scale`s} of a block's own statements
        (computed once per block: most blocks have none)."""
        plan: dict = {}
        for k, x in enumerate(stmts):
            if isinstance(x, A.MmaScale) and isinstance(x.acc, A.Name):
                plan.setdefault(x.acc.id, []).append(k)
        return plan

    def open_scale_segments(self, plan: dict, stmts: list, i: int) -> None:
        """Before statement i of a block: open the segment of every accumulator that an
        `mma.scale` later in the block folds, zeroing its part before the segment's first
        MMA; close it after its `mma.scale`."""
        segs = self._segments()
        for name, ends in plan.items():
            if i - 1 in ends:
                segs.pop(name, None)
            if ends[-1] < i:
                continue
            seg = segs.get(name)
            if seg is None:
                seg = segs[name] = {"part": None, "filled": False, "owner": id(stmts)}
            elif seg["owner"] != id(stmts):
                raise Unsupported(f"'mma.scale' on '{name}' inside a block whose MMAs on it an "
                                  "outer 'mma.scale' already scales", stmts[i].loc)
            if not seg["filled"] and _mmas_on(stmts[i], name):
                v = self.scope.lookup(name)
                if not isinstance(v, FragValue):
                    raise err(f"'{name}' is not an accumulator", stmts[i])
                seg["part"] = self.part_of(v.frag, stmts[i].loc)
                self.zero_part(seg["part"], stmts[i].loc)
                seg["filled"] = True

    def close_scale_segments(self, plan: dict, stmts: list) -> None:
        segs = self._segments()
        for name in plan:
            if segs.get(name, {}).get("owner") == id(stmts):
                del segs[name]


def _mmas_on(stmt, name: str) -> bool:
    return any(isinstance(n, A.MmaOp) and not n.scale and isinstance(n.acc, A.Name)
               and n.acc.id == name for n in A.walk(stmt))
