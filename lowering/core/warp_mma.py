"""Warp MMAs on register fragments (the mma.sync / WMMA form) in thread kernels.

A kernel whose MMAs take both operands from `mma.load` (ir.WarpMma, in a
`: group` level: one warp; in a `: group-4` level each of the 4 warps holds a
quarter of the rows of A and of the accumulator, and all of B; in the block's
code every warp computes it) keeps its fragments in the registers of the
warp's lanes, as `mma.sync` wants them; it is otherwise a thread kernel
(simt.py). A fragment is cut into tiles of one instruction (m16n8k16 for
f16/bf16, m16n8k32 for s8/u8, m16n8k8 for f32 operands, taken as tf32) and
each lane holds, per tile, the elements the PTX ISA gives lane (g, t) =
(lane / 4, lane % 4): 4 b32 registers of A, 2 of B, 4 of the accumulator.
A fragment smaller than its tiles (an 8 x 4 A) holds zeros past its edges,
so any shape is one or more whole instructions.

`mma.load` reads each element with a plain `ld` (global or shared memory:
any alignment, either Choreo layout) and packs them; `mma.store` writes
the accumulator's elements the same way (rounded to the destination's
type). Elements past the fragment's edges are neither read nor written.
Which tile layout a fragment has (A, B or accumulator) follows from the
MMAs that use it (`roles`). An f16 accumulator is kept in f32 registers and
rounded to f16 after every MMA and element store (the interpreter's f16
fragment); an element-wise `apply` (and `acc += v`) runs per element a lane
holds. Not done: ldmatrix / stmatrix and vector loads for tiles that would
allow them (every element is its own `ld` / `st`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from choreo_py import ir
from choreo_py.ir import build as B

from .f16_values import round_f16
from .threads import ThreadExprs
from .writer import V

#: operand type -> (k of one instruction, elements per b32 register, PTX operand type,
#: accumulator type)
FAMILIES = {
    "f16": (16, 2, "f16", "f32"), "bf16": (16, 2, "bf16", "f32"),
    "s8": (32, 4, "s8", "s32"), "u8": (32, 4, "u8", "s32"),
    "f32": (8, 1, "tf32", "f32"),
}
TILE_M, TILE_N = 16, 8  # every family's m and n
_G, _T = "__mma_g", "__mma_t"  # the lane's group id (lane / 4) and its thread in the group
_W = "__mma_w"  # in a warpgroup: the warp's index (its share of the rows)


@dataclass
class WarpFrag:
    """One fragment's registers: `regs` b32 (operands) or f32/s32 (accumulators) per tile."""

    frag: ir.Frag
    role: str  # "a" | "b" | "acc"
    layout: Optional[str]  # B only: the MMA's layout ("row.row": B is [N, K])
    family: tuple
    tiles: tuple[int, int]
    array: str
    regs_per_tile: int
    split: int = 1  # warps sharing its rows (4 in a `: group-4` level; B is whole in each)

    def reg(self, i: int, j: int, r: int) -> V:
        ty = "b32" if self.role != "acc" else _acc_reg(self.frag.dtype)
        return V(f"{self.array}[{(i * self.tiles[1] + j) * self.regs_per_tile + r}]", ty)


def roles(k: ir.Kernel) -> dict[str, list]:
    """fragment -> [(role, B's layout, operand type, warps sharing the rows, where)] from the
    kernel's warp MMAs."""
    out: dict = {}
    for s, level in _with_levels(k.body, None):
        if isinstance(s, ir.WarpMma):
            dtype = k.frag(s.a).dtype
            split = 4 if level == "group-4" else 1
            for name, role, lay in ((s.acc, "acc", None), (s.a, "a", None), (s.b, "b", s.layout)):
                out.setdefault(name, []).append((role, lay, dtype, split if role != "b" else 1,
                                                 s.loc))
    return out


def _with_levels(stmts: list, level):
    """(statement, level of the innermost parallel region around it)."""
    for s in stmts:
        yield s, level
        inner = s.level if isinstance(s, ir.Parallel) else level
        for block in ir.child_blocks(s):
            yield from _with_levels(block, inner)


def _frag(lw, name: str, loc) -> WarpFrag:
    """The registers of fragment `name` (declared on first use: PTX registers are the
    kernel's, wherever the statement that first names them sits)."""
    made = lw.warp_frags.get(name)
    if made is not None:
        return made
    f = lw.k.frag(name)
    uses = lw.warp_roles.get(name)
    if f is None or not uses or len(f.shape) != 2:
        raise lw.refuse(f"the fragment '{name}', which no MMA on register fragments uses,", loc)
    role, lay, dtype, split, _ = uses[0]
    if any(u[:4] != uses[0][:4] for u in uses):
        raise lw.refuse(f"the fragment '{name}' used in two ways (operand roles, layouts or "
                        "types) by MMAs on register fragments", loc)
    family = FAMILIES.get(dtype)
    if family is None:
        raise lw.refuse(f"an MMA on register fragments of {dtype}", uses[0][4])
    if role == "acc" and f.dtype != family[3] and not (f.dtype == "f16" and family[3] == "f32"):
        raise lw.refuse(f"a {f.dtype} accumulator of {dtype} operands (the mma.sync form "
                        f"accumulates them in {family[3]})", uses[0][4])
    if f.shape[0] % split:
        raise lw.refuse(f"the fragment '{name}' of {f.shape[0]} rows, shared by the {split} "
                        "warps of a warpgroup", uses[0][4])
    rows, cols = _logical(_local_shape(f.shape, split), role, lay)
    tile = _tile(role, family)
    tiles = (-(-rows // tile[0]), -(-cols // tile[1]))
    per = {"a": 4, "b": 2, "acc": 4}[role]
    ty = "b32" if role != "acc" else _acc_reg(f.dtype)
    wf = WarpFrag(f, role, lay, family, tiles, lw.w.array(ty, tiles[0] * tiles[1] * per, name),
                  per, split)
    lw.warp_frags[name] = wf
    return wf


def _acc_reg(dtype: str) -> str:
    """An accumulator's register type: an f16 one is held in f32 registers, rounded to f16
    after every MMA and element store (what the interpreter's f16 fragment holds)."""
    return "f32" if dtype in ("f32", "f16") else dtype


def _local_shape(shape, split: int) -> tuple[int, int]:
    """The part of a fragment one warp holds: its rows split among `split` warps."""
    return (shape[0] // split, shape[1])


def _logical(shape, role: str, layout) -> tuple[int, int]:
    """A fragment's [rows, cols] as the instruction sees it (B: [K, N])."""
    return tuple(shape[::-1]) if role == "b" and layout == "row.row" else tuple(shape)


def _tile(role: str, family) -> tuple[int, int]:
    return {"a": (TILE_M, family[0]), "b": (family[0], TILE_N), "acc": (TILE_M, TILE_N)}[role]


def setup(lw) -> None:
    """The kernel's fragment roles; each lane's (g, t), computed once at the entry."""
    lw.warp_frags, lw.warp_roles = {}, roles(lw.k)
    if not lw.warp_roles:
        return
    w = lw.w
    g, t = w.reg("s32", "mma_g"), w.reg("s32", "mma_t")
    w.op("shr.u32", g, lw.tid, 2)
    w.op("and.b32", g, g, 7)
    w.op("and.b32", t, lw.tid, 3)
    lw.bind(_G, g, nonneg=True)
    lw.bind(_T, t, nonneg=True)
    if any(u[3] > 1 for uses in lw.warp_roles.values() for u in uses):
        wi = w.reg("s32", "mma_w")  # the warp's place in its warpgroup
        w.op("shr.u32", wi, lw.tid, 5)
        w.op("and.b32", wi, wi, 3)
        lw.bind(_W, wi, nonneg=True)


# ---------------------------------------------------------------- element positions

def _positions(wf: WarpFrag, r: int, e: int) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    """(row, col) inside one tile of element e of register r, each as (times g, times t,
    constant), as the PTX ISA lays out mma.sync's fragments."""
    tk, per_reg = wf.family[0], wf.family[1]
    if wf.role == "a":
        return (1, 0, 8 * (r & 1)), (0, per_reg, e + (tk // 2) * (r >> 1))
    if wf.role == "b":  # (k, n)
        return (0, per_reg, e + (tk // 2) * r), (1, 0, 0)
    return (1, 0, 8 * (r >> 1)), (0, 2, r & 1)


def _axis_expr(form, base: int) -> ir.Expr:
    a, b, c = form
    e = B.const(base + c)
    for coef, sym in ((a, _G), (b, _T)):
        if coef:
            e = B.binop("+", e, B.binop("*", ir.Sym(sym, "s32"), B.const(coef), "s32"), "s32")
    return e


def _bound(lw, form, base: int, limit: int, hint: str):
    """True, False, or a predicate register: base + a*g + b*t + c < limit."""
    a, b, c = form
    lo, hi = base + c, base + c + 7 * a + 3 * b
    if hi < limit:
        return True
    if lo >= limit:
        return False
    sym, coef = (_G, a) if a else (_T, b)
    p = lw.w.reg("pred", hint)
    lw.w.op("setp.lt.s32", p, lw.lookup(sym).value, -(-(limit - lo) // coef))
    return p


def _elements(lw, wf: WarpFrag):
    """(tile i, tile j, register, element, logical (row, col) exprs, in-bounds) of every
    element a lane holds; rows and columns are the fragment's logical [rows, cols] (B:
    [K, N])."""
    limits = _logical(_local_shape(wf.frag.shape, wf.split), wf.role, wf.layout)
    th, tw = _tile(wf.role, wf.family)
    per_reg = 1 if wf.role == "acc" else wf.family[1]
    for i in range(wf.tiles[0]):
        for j in range(wf.tiles[1]):
            for r in range(wf.regs_per_tile):
                for e in range(per_reg):
                    rf, cf = _positions(wf, r, e)
                    yield i, j, r, e, (rf, i * th), (cf, j * tw), limits


def _index(wf: WarpFrag, row, col) -> tuple[ir.Expr, ir.Expr]:
    """The view's index of logical (row, col) of this warp's part: a row.row B is stored
    [N, K]; in a warpgroup, warp w's rows start at w * rows / 4."""
    r, c = _axis_expr(*row), _axis_expr(*col)
    if wf.split > 1:
        share = B.binop("*", ir.Sym(_W, "s32"), B.const(wf.frag.shape[0] // wf.split), "s32")
        r = B.binop("+", r, share, "s32")
    return (c, r) if wf.role == "b" and wf.layout == "row.row" else (r, c)


def _always_inside(row, col, limits) -> bool:
    """Whether the element is inside the fragment in every lane."""
    return all(base + c + 7 * a + 3 * b < limit
               for ((a, b, c), base), limit in zip((row, col), limits))


def _guarded(lw, row, col, limits, body) -> None:
    """body() for an element inside the fragment; nothing for one past its edges."""
    w = lw.w
    pr = _bound(lw, row[0], row[1], limits[0], "in_r")
    pc = _bound(lw, col[0], col[1], limits[1], "in_c")
    if pr is False or pc is False:
        return
    preds = [p for p in (pr, pc) if p is not True]
    if not preds:
        body()
        return
    p = preds[0]
    if len(preds) == 2:
        p = w.reg("pred", "inb")
        w.op("and.pred", p, preds[0], preds[1])
    skip = w.label("mma_edge")
    w.bra(skip, p, negate=True)
    body()
    w.put_label(skip)


# ---------------------------------------------------------------- statements

def frag_decl(lw, s: ir.FragDecl) -> None:
    wf = _frag(lw, s.frag.name, s.loc)
    if s.init is not None:
        _fill(lw, wf, s.init.value, s.loc)


def mma_fill(lw, s: ir.MmaFill) -> None:
    _fill(lw, _frag(lw, s.acc, s.loc), s.value.value, s.loc)


def _fill(lw, wf: WarpFrag, value, loc) -> None:
    if wf.role != "acc":
        raise lw.refuse(f"filling the MMA operand '{wf.frag.name}' (a register fragment)", loc)
    ty = _acc_reg(wf.frag.dtype)
    imm = V.imm(value, ty)  # (an f16 accumulator's value: sema rounded it to f16)
    for i in range(wf.tiles[0]):
        for j in range(wf.tiles[1]):
            for r in range(wf.regs_per_tile):
                lw.w.op(f"mov.{'f32' if ty == 'f32' else 'b32'}", wf.reg(i, j, r), imm)


#: how one element is read: (ld type, register type) per element type
_LD = {"f16": ("b16", "b16"), "bf16": ("b16", "b16"), "s8": ("u8", "u32"), "u8": ("u8", "u32"),
       "f32": ("f32", "f32"), "s32": ("s32", "s32")}


def mma_load(lw, s: ir.MmaLoad) -> None:
    """Each element the lane holds, read with `ld` (zero past the fragment's edges), packed
    into its register as mma.sync reads it (element 0 in the low bits)."""
    wf = _frag(lw, s.frag, s.loc)
    w = lw.w
    src_type = lw.places.base_shape(s.src.base, s.loc)[2]
    want = wf.frag.dtype
    if src_type != want or want not in _LD:
        raise lw.refuse(f"mma.load of {src_type} data into the {want} fragment '{wf.frag.name}'",
                        s.loc)
    ld, rty = _LD[want]
    per_reg = 1 if wf.role == "acc" else wf.family[1]
    parts: dict = {}
    for i, j, r, e, row, col, limits in _elements(lw, wf):
        v = w.reg(rty, "fe")
        if not _always_inside(row, col, limits):  # zero where the fragment has no element
            w.op(f"mov.{'b16' if rty == 'b16' else ('f32' if rty == 'f32' else 'b32')}", v,
                 V.imm(0, "s32") if rty != "f32" else V.imm(0.0, "f32"))

        def read(v=v, row=row, col=col):
            space, addr = lw.places.address(s.src, _index(wf, row, col), s.loc)
            w.op(f"ld.{space}.{ld}", v, f"ptx.addr({addr.text})")
        _guarded(lw, row, col, limits, read)
        parts.setdefault((i, j, r), []).append(v)
        if len(parts[(i, j, r)]) == per_reg:
            _pack(lw, wf, wf.reg(i, j, r), parts.pop((i, j, r)))


def _pack(lw, wf: WarpFrag, dst: V, elems: list) -> None:
    w = lw.w
    if wf.role == "acc" and wf.frag.dtype == "f16":
        w.op("cvt.f32.f16", dst, elems[0])
    elif wf.role == "acc":
        w.op(f"mov.{'f32' if wf.frag.dtype == 'f32' else 'b32'}", dst, elems[0])
    elif len(elems) == 2:
        w.op("mov.b32", dst, elems)
    elif len(elems) == 4:  # bytes: b0 | b1 << 8 | b2 << 16 | b3 << 24
        w.op("mov.b32", dst, elems[0])
        for n, b in enumerate(elems[1:], 1):
            sh = w.reg("b32", "byte")
            w.op("shl.b32", sh, b, 8 * n)
            w.op("or.b32", dst, dst, sh)
    else:  # f32 taken as tf32: rounded to nearest, ties away (what the interpreter does)
        w.op("cvt.rna.tf32.f32", dst, elems[0])


def mma_store(lw, s: ir.MmaStore) -> None:
    """Each accumulator element the lane holds, rounded to the destination's type
    (`mma.store.transp`: element (i, j) to (j, i) of the destination; `.direct` is what
    this store does anyway: each lane its elements)."""
    wf = _frag(lw, s.acc, s.loc)
    if wf.role != "acc":
        raise lw.refuse(f"mma.store of the MMA operand '{s.acc}'", s.loc)
    dtype = lw.places.base_shape(s.dst.base, s.loc)[2]
    if (dtype == "s32") != (wf.frag.dtype == "s32") or dtype not in ("f32", "f16", "bf16", "s32"):
        raise lw.refuse(f"mma.store of a {wf.frag.dtype} accumulator into {dtype} data", s.loc)
    for i, j, r, _, row, col, limits in _elements(lw, wf):
        value = wf.reg(i, j, r)

        def write(value=value, row=row, col=col):
            at = _index(wf, row, col)
            lw.places.store(s.dst, at[::-1] if s.transposed else at, dtype, value, s.loc)
        _guarded(lw, row, col, limits, write)


def warp_mma(lw, s: ir.WarpMma) -> None:
    """acc += a @ b as mma.sync instructions: one per (m tile, n tile, k tile); an f16
    accumulator is summed in f32 and rounded to f16 after the MMA."""
    acc, a, b = (_frag(lw, n, s.loc) for n in (s.acc, s.a, s.b))
    if (acc.role, a.role, b.role) != ("acc", "a", "b"):
        raise lw.refuse("an MMA whose fragments are used in other roles elsewhere", s.loc)
    tk, _, ptype, acc_type = a.family
    kind = "f32" if acc_type == "f32" else "s32"
    opcode = f"mma.sync.aligned.m16n8k{tk}.row.col.{kind}.{ptype}.{ptype}.{kind}"
    for i in range(acc.tiles[0]):
        for j in range(acc.tiles[1]):
            d = [acc.reg(i, j, r) for r in range(4)]
            for kk in range(a.tiles[1]):
                lw.w.op(opcode, d, [a.reg(i, kk, r) for r in range(4)],
                        [b.reg(kk, j, r) for r in range(2)], d)
            if acc.frag.dtype == "f16":  # the MMA's sum, rounded once (as the interpreter)
                for reg in d:
                    round_f16(lw, [reg])


def apply(lw, s: ir.Apply) -> None:
    """`apply {i, j} in acc.span { acc.at(i, j) = ... }` (and `acc += v`): the body once per
    element the lane holds, i and j its row and column; the body's stores and reads are
    accumulator elements at (i, j) (element-wise: each lane sees only its own)."""
    wf = _frag(lw, s.domain, s.loc)
    if wf.role != "acc" or len(s.indices) != 2:
        raise lw.refuse(f"'apply' over the MMA operand '{s.domain}'", s.loc)
    frags = _elementwise(lw, s)
    for i, j, r, _, row, col, limits in _elements(lw, wf):
        def body(i=i, j=j, r=r, row=row, col=col):
            lw.stmt_memo = {}  # the names below are this element's
            lw.push()
            x = ApplyExprs(lw, {n: f.reg(i, j, r) for n, f in frags.items()}, s.loc)
            for name, e in zip(s.indices, _index(wf, row, col)):
                lw.bind(name, x.value(e, name), nonneg=True)
            for st in s.body:
                dst = frags[st.frag].reg(i, j, r)
                x.value(st.value, "ev", dst=dst)
                if frags[st.frag].frag.dtype == "f16":
                    round_f16(lw, [dst])
            lw.pop()
            lw.stmt_memo = {}
        _guarded(lw, row, col, limits, body)


def _elementwise(lw, s: ir.Apply) -> dict:
    """The accumulators an element-wise apply body touches (refused otherwise)."""
    at = tuple(ir.Sym(n, "s32") for n in s.indices)
    domain = _frag(lw, s.domain, s.loc)
    out = {s.domain: domain}
    for st in s.body:
        if not isinstance(st, ir.ElemStore) or tuple(st.index) != at:
            raise lw.refuse("an 'apply' body other than element stores at its own index, on "
                            "register fragments of an MMA", getattr(st, "loc", s.loc))
        reads = [e for e in ir.expr_walk(st.value) if isinstance(e, ir.Elem)]
        for name in [st.frag] + [e.frag for e in reads]:
            f = _frag(lw, name, s.loc)
            if f.role != "acc" or f.tiles != domain.tiles:
                raise lw.refuse(f"'apply' on '{name}', which is not an accumulator of "
                                f"'{s.domain}''s shape", s.loc)
            out[name] = f
        if any(tuple(e.index) != at for e in reads):
            raise lw.refuse("an 'apply' body reading a fragment element at another index",
                            s.loc)
    return out


class ApplyExprs(ThreadExprs):
    """Expressions of an apply body: a fragment element is its register in this lane."""

    def __init__(self, lw, regs: dict, loc) -> None:
        super().__init__(lw, lw.places, loc)
        self.regs = regs

    def leaf(self, e: ir.Expr):
        if isinstance(e, ir.Elem):
            return self.regs[e.frag]
        return super().leaf(e)


HANDLERS = {ir.FragDecl: frag_decl, ir.MmaFill: mma_fill, ir.MmaLoad: mma_load,
            ir.MmaStore: mma_store, ir.WarpMma: warp_mma, ir.Apply: apply}
