"""Hopper's MMA unit for the lowering core: wgmma (see core/target_base.py).

- Accumulators live in registers: m64nNk16 with f32 accumulation gives
  each of a warpgroup's 128 threads N/2 registers; register k of thread
  t = 32w + l (w: warp in the warpgroup, l: lane) holds
  row 16w + l/4 + 8((k%4)/2), column 8(k/4) + 2(l%4) + k%2.
  The 4 lanes of a quad share a row (butterfly shuffles over lanes 1, 2).
- `mma` issues one wgmma per 16-wide k-step between `wgmma.fence` and
  `commit_group`. A shared operand is a matrix descriptor:
  (address >> 4) | (LBO >> 4) << 16 | (SBO >> 4) << 32 | mode << 62, mode
  1/2/3 = 128/64/32-byte swizzle; K-major tiles (A, and B of `row.row`)
  step 16 columns inside a stripe and jump stripes; the MN-major B of
  `row.col` steps 16 rows (LBO = distance between 64-column stripes).
  A register operand (RS form) feeds registers 4k..4k+3 at k-step k.
- `mma.fill 0` right before an MMA into the same accumulator is scale-d = 0
  on the first k-step (no zeroing moves).
- `wait f` is `wgmma.wait_group N` with N from the core's in-flight analysis.
"""
from __future__ import annotations

from choreo_py import ir, targets

from ..core.f16_values import round_f16
from ..core.fragments import k_steps, mma_accumulator
from ..core.descriptors import desc_add, tile_descriptor
from ..core.context import Lowering
from ..core.target_base import AccLayout, Target
from ..core.writer import V
from . import sparse

_SWIZZLE_MODE = {128: 1, 64: 2, 32: 3}
_KINDS = {"bf16": "bf16", "f16": "f16", "f8_e4m3": "e4m3", "f8_e5m2": "e5m2"}
#: input kind -> K of one wgmma (32 bytes of each row: k16 for 16-bit inputs, k32 for fp8)
_K_STEP = {"bf16": 16, "f16": 16, "e4m3": 32, "e5m2": 32}


def _quad_layout(split: targets.RowSplit, n: int) -> AccLayout:
    """m64nN's registers from the target's row split: register k of a thread holds row
    8((k%4)/2) past its base and, per row, the split's columns of owner 0 in order
    (pair k%2 of run k/4), offset by the thread's col_base."""
    cols = split.columns(n, 0)
    regs = 2 * len(cols)
    return AccLayout(
        rows=64, cols=n,
        row_off=tuple(8 * ((k % 4) // 2) for k in range(regs)),
        col_off=tuple(cols[split.run * (k // 4) + (k % 2)] for k in range(regs)),
        row_lanes=split.lanes, col_base_max=split.col_base(n, split.owners - 1))


class Sm90Target(Target):
    #: `mma.fill.f16` accumulators: f32 registers rounded to f16 after every synchronous
    #: MMA into them (wgmma's own f16 accumulation would round inside a K loop where the
    #: interpreter rounds once per statement)
    f16_accumulators = True

    #: a warpgroup's index in uniform registers: its QK's Q descriptor is stepped with
    #: UIADD3, not rebuilt and converted (R2UR) before each of the loop's 8 wgmmas
    uniform_instance_index = True

    def min_blocks_per_sm(self, launch_bounds) -> int:
        """Always declared, 1 without launch_bounds, as the hand-written wgmma kernels the
        code was shaped after do (bench/reference/handwritten_sm90_*.py): ptxas then sizes
        the entry registers for one block per SM, which their roles' setmaxnreg repartition."""
        lb = launch_bounds
        return lb[1] if lb and len(lb) > 1 and lb[1] else 1

    # ------------------------------------------------------------ layout
    def check_block_frag(self, frag: ir.Frag, loc) -> None:
        raise self.refuse(f"the ': block' fragment '{frag.name}' (one tile the block's roles "
                          "share; wgmma reads a register A operand from the warpgroup that issues "
                          "it)", loc)

    def acc_layout(self, frag: ir.Frag, loc) -> AccLayout:
        m, n = frag.shape
        if frag.block:  # sm_100a keeps it in tensor memory; wgmma has only registers
            raise self.refuse("a ': block' accumulator (one tile the block's roles share; wgmma "
                              "accumulates in the registers of the warpgroup that issues it)", loc)
        if m != 64:
            raise self.refuse(f"an accumulator of {m} rows per warpgroup (wgmma tiles are 64 rows)",
                              loc)
        if n % 8 or not 8 <= n <= 256:
            raise self.refuse(f"an accumulator of {n} columns (wgmma takes 8..256, multiples of 8)",
                              loc)
        return _quad_layout(self.record.row_split(m), n)

    def thread_bases(self, lw: Lowering) -> tuple[V, V]:
        def row_base() -> V:
            w = lw.w
            warp = w.reg("u32", "warp")
            w.op("shr.u32", warp, lw.role.local_tid, 5)
            rb = w.reg("s32", "row_base")
            w.op("and.b32", rb, lw.role.local_tid, 31)
            w.op("shr.u32", rb, rb, 2)
            w.op("mad.lo.s32", rb, warp, 16, rb)
            return rb

        def col_base() -> V:  # the quad's thread t (lane % 4) starts at the split's run t
            cb = lw.w.reg("s32", "col_base")
            lw.w.op("and.b32", cb, lw.role.local_tid, 3)
            lw.w.op("shl.b32", cb, cb, self.record.row_split(64).run.bit_length() - 1)
            return cb
        self._check_warpgroup(lw, None)
        return lw.once(("row_base",), row_base), lw.once(("col_base",), col_base)

    def declare_acc(self, lw: Lowering, frag: ir.Frag) -> str:
        lay = self.acc_layout(frag, frag.loc)
        return lw.w.array("f32", lay.regs, frag.name)

    def fill(self, lw: Lowering, frag: ir.Frag, value: V) -> None:
        arr = lw.frags[frag.name].array
        for k in range(self.acc_layout(frag, frag.loc).regs):
            lw.w.op("mov.f32", V(f"{arr}[{k}]", "f32"), value)

    def wait(self, lw: Lowering, groups_after: int) -> None:
        lw.w.call("ptx.wgmma.wait_group", str(groups_after))

    # ------------------------------------------------------------ mma
    def declare_sparse_meta(self, lw: Lowering, frag: ir.Frag, loc) -> str:
        kind = sparse.meta_kind(lw, frag.name, loc, _KINDS)
        return lw.w.array("b32", sparse.meta_registers(frag, kind), frag.name)

    def load_sparse_meta(self, lw: Lowering, fi, s: ir.MmaLoad) -> None:
        self._check_warpgroup(lw, s.loc)
        sparse.load_meta(lw, fi, s, sparse.meta_kind(lw, s.frag, s.loc, _KINDS))

    def issue(self, lw: Lowering, s: ir.Mma, zero_first: bool) -> None:
        self._check_warpgroup(lw, s.loc)
        if isinstance(s, ir.SparseMma):
            return self._issue_sparse(lw, s, zero_first)
        acc = mma_accumulator(lw, s)
        m, n = acc.frag.shape
        if acc.frag.dtype == "f16" and s.future is not None:
            raise lw.refuse("an asynchronous MMA into an f16 accumulator", s.loc)
        a_kind, k, a_regs = self._a_operand(lw, s)
        b = lw.memory.layout(s.b.base, s.loc)
        b_shape = _shape(s.b)
        want = (n, k) if s.layout == "row.row" else (k, n)
        if b_shape != want:
            raise lw.refuse(f"mma.{s.layout} with B of shape {list(b_shape)} (expected "
                            f"{list(want)})", s.loc)
        kind = _KINDS.get(b.dtype)
        if kind is None or kind != a_kind:
            raise lw.refuse(f"an MMA on {a_kind} x {b.dtype}", s.loc)
        ks = _K_STEP[kind]
        if k % ks:
            raise lw.refuse(f"an MMA with K = {k} (a multiple of {ks})", s.loc)
        trans_b = 0 if s.layout == "row.row" else 1
        fp8 = ks == 32
        if fp8 and (trans_b or a_regs is not None):
            # wgmma takes 8-bit inputs K-major from shared memory only (no transpose bits)
            raise lw.refuse(f"an fp8 MMA with {'B as mma.row.col' if trans_b else 'A in registers'}",
                            s.loc)
        b_desc, b_col0 = self._desc(lw, s.b, s.loc, mn_major=bool(trans_b))
        a_desc = None
        if a_regs is None:
            a_desc, a_col0 = self._desc(lw, s.a, s.loc, mn_major=False)
            a_lay = lw.memory.layout(s.a.base, s.loc)
        w = lw.w
        opcode = f"wgmma.mma_async.sync.aligned.m64n{n}k{ks}.f32.{kind}.{kind}"
        w.call("ptx.wgmma.fence")
        for i, kk in enumerate(k_steps(lw, s, k, ks)):
            scale_d = 0 if (zero_first and i == 0) else 1
            if trans_b:
                bd = desc_add(lw, b_desc, kk * 16 * b.row_bytes)
            else:
                bd = desc_add(lw, b_desc, _kmajor_step(b, b_col0, kk, ks))
            if a_regs is None:
                ad = desc_add(lw, a_desc, _kmajor_step(a_lay, a_col0, kk, ks))
                trans = () if fp8 else (0, trans_b)
                w.op(opcode, f"list({acc.array})", ad, bd, scale_d, 1, 1, *trans)
            else:
                regs = "[" + ", ".join(f"{a_regs}[{4 * kk + j}]" for j in range(4)) + "]"
                w.op(opcode, f"list({acc.array})", regs, bd, scale_d, 1, 1, trans_b)
        w.call("ptx.wgmma.commit_group")
        if s.future is None:
            w.call("ptx.wgmma.wait_group", "0")
            if acc.frag.dtype == "f16":
                round_f16(lw, [V(f"{acc.array}[{r}]", "f32")
                               for r in range(self.acc_layout(acc.frag, s.loc).regs)])

    def _issue_sparse(self, lw: Lowering, s: ir.SparseMma, zero_first: bool) -> None:
        """wgmma.mma_async.sp steps (lowering/sm90/sparse.py): packed A and B through
        descriptors, the metadata register of the step, sparsity selector 0."""
        acc = mma_accumulator(lw, s)
        n = acc.frag.shape[1]
        a_kind, half, _ = self._a_operand(lw, s)
        a_lay, b = lw.memory.layout(s.a.base, s.loc), lw.memory.layout(s.b.base, s.loc)
        k = 2 * half
        if s.layout != "row.row" or _shape(s.b) != (n, k):
            raise lw.refuse(f"a sparse mma.{s.layout} with B of shape {list(_shape(s.b))} "
                            f"(wgmma.sp takes B K-major: [{n}, {k}], mma.row.row)", s.loc)
        kind = _KINDS.get(b.dtype)
        if kind is None or kind != a_kind:
            raise lw.refuse(f"a sparse MMA on {a_lay.dtype} x {b.dtype}", s.loc)
        if acc.frag.dtype != "f32":
            raise lw.refuse(f"a sparse MMA into a {acc.frag.dtype} accumulator", s.loc)
        ks = sparse.K_STEP[kind]
        if k % ks:
            raise lw.refuse(f"a sparse MMA with K = {k} (a multiple of {ks})", s.loc)
        meta = lw.frags[s.meta]
        if meta.frag.shape != (64, k // 8):
            raise lw.refuse(f"a sparse MMA whose metadata '{s.meta}' is not [64, {k // 8}]",
                            s.loc)
        b_desc, b_col0 = self._desc(lw, s.b, s.loc, mn_major=False)
        a_desc, a_col0 = self._desc(lw, s.a, s.loc, mn_major=False)
        w = lw.w
        opcode = f"wgmma.mma_async.sp.sync.aligned.m64n{n}k{ks}.f32.{kind}.{kind}"
        trans = () if ks == 64 else (0, 0)  # 8-bit inputs have no transpose operands
        w.call("ptx.wgmma.fence")
        for kk in range(k // ks):
            sparse.check_in_atom(lw, a_lay, a_col0 + kk * ks // 2, ks // 2, "packed A", s.loc)
            sparse.check_in_atom(lw, b, b_col0 + kk * ks, ks, "B", s.loc)
            ad = desc_add(lw, a_desc, _kmajor_step(a_lay, a_col0, kk, ks // 2))
            bd = desc_add(lw, b_desc, _kmajor_step(b, b_col0, kk, ks))
            scale_d = 0 if (zero_first and kk == 0) else 1
            w.op(opcode, f"list({acc.array})", ad, bd, meta.reg(kk), 0, scale_d, 1, 1, *trans)
        w.call("ptx.wgmma.commit_group")
        w.call("ptx.wgmma.wait_group", "0")

    def _a_operand(self, lw: Lowering, s: ir.Mma):
        if isinstance(s.a, str):
            fi = lw.frags.get(s.a)
            if fi is None or fi.kind != "operand":
                raise lw.refuse(f"an MMA whose A '{s.a}' is not a register operand", s.loc)
            if fi.frag.shape[0] != 64:
                raise lw.refuse("a register operand of other than 64 rows", s.loc)
            return _KINDS.get(fi.frag.dtype), fi.frag.shape[1], fi.array
        shape = _shape(s.a)
        if shape[0] != 64:
            raise lw.refuse(f"an MMA whose A tile has {shape[0]} rows (wgmma: 64)", s.loc)
        lay = lw.memory.layout(s.a.base, s.loc)
        return _KINDS.get(lay.dtype), shape[1], None

    def _desc(self, lw: Lowering, view: ir.View, loc, *, mn_major: bool):
        """Descriptor of a shared tile's origin (wgmma layout bits: swizzle mode, SBO = 8
        rows, LBO = the stripe stride for MN-major tiles, 16 B for K-major ones)."""
        def bits(lay) -> int:
            sbo = 8 * lay.row_bytes
            lbo = lay.stripe_bytes if mn_major else 16
            return (_SWIZZLE_MODE[lay.swizzle] << 62) | ((sbo >> 4) << 32) | ((lbo >> 4) << 16)
        return tile_descriptor(lw, view, loc, bits)

    def _check_warpgroup(self, lw: Lowering, loc) -> None:
        if lw.role is None or lw.role.threads != 128:
            raise self.refuse("MMA fragments outside a warpgroup (parallel ... : group-4) role",
                              loc)


def _shape(v: ir.View) -> tuple:
    return tuple(e.value if isinstance(e, ir.Const) else None for e in v.shape)


def _kmajor_step(lay, col0: int, kk: int, ks: int = 16) -> int:
    def at(c: int) -> int:
        return (c // lay.stripe_cols) * lay.stripe_bytes + (c % lay.stripe_cols) * lay.esize
    return at(col0 + ks * kk) - at(col0)

