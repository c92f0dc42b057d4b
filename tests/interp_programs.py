"""Tile IR of the example programs, built by hand with the `ir` constructors.

These stand in for the semantic analysis until it lands: each kernel is
the statement-for-statement IR of an example file (the causal seed
`examples/flash_atten_causal.co`, `examples/flash_atten.co`,
`examples/gemm.co`), with every statement located at the line it comes
from. Flags build the broken variants the interpreter tests use.
"""
from __future__ import annotations

import math
from pathlib import Path

from choreo_py import ir
from choreo_py.source import Loc

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
F, T = False, True
SCALE = 0.12751743  # log2(e) / sqrt(128), as written in the seed
#: Whether the IR marks collective copies (`RoleSync` + `leader_only`), as sema emits them.
COLLECTIVES = hasattr(ir, "RoleSync")


class Src:
    """Locations in an example file, found in source order by a moving cursor."""

    def __init__(self, name: str) -> None:
        self.path = EXAMPLES / name
        self.text = self.path.read_text()
        self.pos = 0

    def __call__(self, snippet: str) -> Loc:
        i = self.text.find(snippet, self.pos)
        if i < 0:
            raise LookupError(f"{snippet!r} not found after offset {self.pos} of {self.path}")
        self.pos = i + 1
        line = self.text.count("\n", 0, i) + 1
        col = i - (self.text.rfind("\n", 0, i) + 1) + 1
        return Loc(str(self.path), line, col)


# ---------------------------------------------------------------- expressions


def S(name: str, dtype: str = "s32") -> ir.Sym:
    return ir.Sym(name, dtype)


def C(v, dtype: str | None = None) -> ir.Const:
    return ir.Const(v, dtype or ("f32" if isinstance(v, float) else "s32"))


def _e(x, like=None):
    if isinstance(x, ir.Expr):
        return x
    dtype = "f32" if isinstance(x, float) else getattr(like, "dtype", "s32")
    return ir.Const(x, dtype if not isinstance(x, float) else "f32")


def _t(a: ir.Expr, b: ir.Expr) -> str:
    for t in ("f32", "u32"):
        if t in (a.dtype, b.dtype):
            return t
    return "s32"


def bin_(op: str, a, b) -> ir.Bin:
    a = _e(a, b if isinstance(b, ir.Expr) else None)
    b = _e(b, a)
    dtype = "bool" if op in ("<", "<=", ">", ">=", "==", "!=", "&&", "||") else _t(a, b)
    return ir.Bin(op, a, b, dtype)


def add(a, b): return bin_("+", a, b)
def sub(a, b): return bin_("-", a, b)
def mul(a, b): return bin_("*", a, b)
def mod(a, b): return bin_("%", a, b)


def cdiv(a, b) -> ir.Call:
    return ir.Call("cdiv", (_e(a), _e(b)), "s32")


def el(frag: str, *idx: str, dtype: str = "f32") -> ir.Elem:
    return ir.Elem(frag, tuple(S(i) for i in idx), dtype)


def exp2(x) -> ir.Call:
    return ir.Call("exp2", (x,), "f32")


# ---------------------------------------------------------------- views and statements


def view(base: str, offsets, extents, keep=None, slot=None) -> ir.View:
    keep = keep or (T,) * len(offsets)
    return ir.View(base, tuple(_e(o) for o in offsets), tuple(_e(e) for e in extents),
                   tuple(keep), slot)


def head(t: str, seq: str) -> ir.View:
    """`T.subspan(1, SEQ, 1, DIM).at(batch, 0, head, 0).sqz()`."""
    return view(t, (S("batch"), 0, S("head"), 0), (1, S(seq), 1, 128), (F, T, F, T))


def head_tile(t: str, row_tile) -> ir.View:
    """`T_head.subspan(128, DIM).at(row_tile, 0)`, normalised onto the 4-D tensor."""
    return view(t, (S("batch"), mul(row_tile, 128), S("head"), 0), (1, 128, 1, 128), (F, T, F, T))


def whole(buf: str, shape, slot=None) -> ir.View:
    return view(buf, (0,) * len(shape), shape, slot=slot)


def order_ref(event: str, var: str) -> ir.EventRef:
    return ir.EventRef(event, order=S(var, "u32"))


def incr(var: str, loc) -> ir.Assign:
    """The post-increment half of `e.at(order++)`."""
    return ir.Assign(var, add(S(var, "u32"), C(1, "u32")), loc)


def apply2(dom: str, body, loc, shape=(64, 128)) -> ir.Apply:
    return ir.Apply(("i", "j"), shape, dom, body, loc)


def apply1(dom: str, body, loc) -> ir.Apply:
    return ir.Apply(("i",), (64,), dom, body, loc)


def store(frag: str, idx, value, loc) -> ir.ElemStore:
    return ir.ElemStore(frag, tuple(S(i) for i in idx), value, loc)


def scaled_exp(L) -> ir.Apply:
    """acc_s.at(i, j) = exp2(acc_s.at(i, j) * c - scores_max.at(i) * c)."""
    loc = L("apply {i, j} in acc_s.span\n")
    v = exp2(sub(mul(el("acc_s", "i", "j"), SCALE), mul(el("scores_max", "i"), SCALE)))
    return apply2("acc_s", [store("acc_s", "ij", v, loc=L("acc_s.at(i, j) = __exp2f("))], loc)


def row_sum(L) -> ir.Apply:
    loc = L("apply {i, j} in acc_s.span\n")
    v = add(el("scores_sum", "i"), el("acc_s", "i", "j"))
    return apply2("acc_s", [store("scores_sum", "i", v, loc=L("scores_sum.at(i) ="))], loc)


def cast_p(L) -> ir.Apply:
    loc = L("apply {i, j} in acc_s_cast.span")
    v = ir.Call("to", (el("acc_s", "i", "j"),), "bf16")
    return apply2("acc_s_cast", [store("acc_s_cast", "ij", v, loc=L("acc_s_cast.at(i, j) ="))], loc)


def rescale_o(L) -> ir.Apply:
    loc = L("apply {i, j} in acc_o.span")
    v = mul(el("acc_o", "i", "j"), el("scores_scale", "i"))
    return apply2("acc_o", [store("acc_o", "ij", v, loc=L("acc_o.at(i, j) ="))], loc)


# ---------------------------------------------------------------- FlashAttention


FA_FRAGS = [
    ir.Frag("scores_max", "f32", (64,), "row"), ir.Frag("scores_max_prev", "f32", (64,), "row"),
    ir.Frag("scores_scale", "f32", (64,), "row"), ir.Frag("scores_sum", "f32", (64,), "row_partial"),
    ir.Frag("logsum", "f32", (64,), "row_partial"), ir.Frag("acc_s_cast", "bf16", (64, 128), "operand"),
    ir.Frag("acc_s", "f32", (64, 128), "acc"), ir.Frag("acc_o", "f32", (64, 128), "acc"),
]


def flash_attention(causal: bool = True, tail_mask: bool = True, all_reduce: bool = True,
                    trigger_kf: bool = True, wait_kf: bool = True,
                    release_k_early: bool = False, role_sync: bool = True) -> ir.Kernel:
    """The seed (causal) or examples/flash_atten.co (non-causal).

    tail_mask=False drops the non-causal prologue mask (valid when KV_SEQ is a
    multiple of 128). all_reduce=False drops `all_reduce_sum(logsum)`;
    trigger_kf=False drops `trigger kf.at(...) after k_load` (keeping the
    increment); wait_kf=False drops the prologue's `wait kf.at(...)`;
    release_k_early=True moves the prologue's `trigger ke.at(...)` before
    `wait first_qk`, releasing the K slot while the QK MMA may still read it;
    role_sync=False drops the consumers' meeting before their shared o_buf store.
    """
    L = Src("flash_atten_causal.co" if causal else "flash_atten.co")
    params = [ir.Param(n, "bf16", (S("B"), S(seq), S("H"), C(128)), loc=L(f"] {n}"))
              for n, seq in (("Q", "Q_SEQ"), ("K", "KV_SEQ"), ("V", "KV_SEQ"), ("O", "Q_SEQ"))]
    kloc = L("parallel.async {tile, head, batch}")
    grid = [ir.GridDim("tile", cdiv(S("Q_SEQ"), 128)), ir.GridDim("head", S("H")),
            ir.GridDim("batch", S("B"))]
    body: list[ir.Stmt] = []
    if causal:
        body.append(ir.Let("bm", sub(sub(cdiv(S("Q_SEQ"), 128), 1), S("tile")), loc=L("bm =")))
    else:
        body.append(ir.Let("bm", S("tile"), loc=L("bm =")))
    for n, seq in (("Q", "Q_SEQ"), ("K", "KV_SEQ"), ("V", "KV_SEQ"), ("O", "Q_SEQ")):
        body.append(ir.ViewDef(f"{n}_head", head(n, seq), loc=L(f"{n}_head =")))
    buffers = [ir.Buffer("q_shared", "shared", "bf16", (128, 128), swizzle=128, loc=L("q_shared;")),
               ir.Buffer("k_buf", "shared", "bf16", (128, 128), 2, swizzle=128, loc=L("k_buf[")),
               ir.Buffer("v_buf", "shared", "bf16", (128, 128), 2, swizzle=128, loc=L("v_buf[")),
               ir.Buffer("o_buf", "shared", "bf16", (128, 128), swizzle=128, loc=L("o_buf;"))]
    events = [ir.Event("qf", None, loc=L("qf;")), ir.Event("kf", 2, loc=L("kf[")),
              ir.Event("vf", 2, loc=L("vf[")), ir.Event("ke", 2, True, loc=L("ke[")),
              ir.Event("ve", 2, True, loc=L("ve["))]
    if causal:
        body.append(ir.Let("kv_bound", add(S("bm"), 1), loc=L("kv_bound =")))
    else:
        body.append(ir.Let("kv_bound", cdiv(S("KV_SEQ"), 128), loc=L("kv_bound =")))
        body.append(ir.Let("last_valid", sub(S("KV_SEQ"), mul(sub(S("kv_bound"), 1), 128)),
                           L("last_valid =")))
    ploc = L("parallel p by")
    prod = _producer(L, causal, trigger_kf)
    cons = _consumer(L, causal, tail_mask, all_reduce, wait_kf, release_k_early, role_sync)
    body.append(ir.Parallel("p", 3, "group-4", 128, [prod, cons], loc=ploc))
    return ir.Kernel("flash_atten", params, grid, buffers, events, list(FA_FRAGS), body,
                     launch_bounds=(None, 1), loc=kloc)


def _producer(L, causal: bool, trigger_kf: bool) -> ir.Role:
    loc = L("inthreads.async (p == 0)")
    s: list[ir.Stmt] = [ir.SetMaxRegs(40, False, loc=L("call croq::cuda::setreg_dec"))]
    s.append(ir.TmaLoad(head_tile("Q", S("bm")), whole("q_shared", (128, 128)), "q_load",
                        "evict_first", 128, loc=L("q_load =")))
    s.append(ir.Trigger(ir.EventRef("qf"), ["q_load"], loc=L("trigger qf after")))
    s.append(ir.Var("k_pipe_order", "u32", C(0, "u32"), loc=L("mutable u32 k_pipe_order")))
    s.append(ir.Var("v_pipe_order", "u32", C(0, "u32"), loc=L("mutable u32 v_pipe_order")))
    floc = L("foreach {issue}")
    bn = sub(S("bm"), S("issue")) if causal else sub(sub(S("kv_bound"), 1), S("issue"))
    loop = [ir.Let("bn", bn, loc=L("bn =")),
            ir.Let("k_slot", mod(S("k_pipe_order", "u32"), 2), loc=L("k_slot =")),
            ir.Let("v_slot", mod(S("v_pipe_order", "u32"), 2), loc=L("v_slot =")),
            ir.Wait([order_ref("ke", "k_pipe_order")], loc=L("wait ke.at")),
            ir.TmaLoad(head_tile("K", S("bn")), whole("k_buf", (128, 128), S("k_slot", "u32")),
                       "k_load", "evict_last", 128, loc=L("k_load =")),
            ir.Trigger(order_ref("kf", "k_pipe_order"), ["k_load"], loc=L("trigger kf.at"))]
    if not trigger_kf:
        loop.pop()
    loop += [incr("k_pipe_order", loc=L("k_pipe_order++")),
             ir.Wait([order_ref("ve", "v_pipe_order")], loc=L("wait ve.at")),
             ir.TmaLoad(head_tile("V", S("bn")), whole("v_buf", (128, 128), S("v_slot", "u32")),
                        "v_load", "evict_last", 128, loc=L("v_load =")),
             ir.Trigger(order_ref("vf", "v_pipe_order"), ["v_load"], loc=L("trigger vf.at")),
             incr("v_pipe_order", loc=L("v_pipe_order++"))]
    s.append(ir.For("issue", C(0), S("kv_bound"), loop, loc=floc))
    return ir.Role("producer", ir.Bin("==", S("p"), C(0), "bool"), (0,), s, True, 40, loc=loc)


def _q_view() -> ir.View:
    return view("q_shared", (mul(S("cid"), 64), 0), (64, 128))


def _consumer(L, causal: bool, tail_mask: bool, all_reduce: bool, wait_kf: bool,
              release_k_early: bool, role_sync: bool) -> ir.Role:
    loc = L("inthreads.async (p > 0)")
    s: list[ir.Stmt] = [ir.SetMaxRegs(232, True, loc=L("call croq::cuda::setreg_inc")),
                        ir.Let("cid", sub(S("p"), 1), loc=L("cid =")),
                        ir.Var("k_pipe_order", "u32", C(0, "u32"), loc=L("mutable u32 k_pipe_order")),
                        ir.Var("v_pipe_order", "u32", C(0, "u32"), loc=L("mutable u32 v_pipe_order")),
                        ir.Wait([ir.EventRef("qf")], loc=L("wait qf"))]
    fr = {f.name: f for f in FA_FRAGS}
    for name, init in (("scores_max", -math.inf), ("scores_max_prev", None), ("scores_scale", None),
                       ("scores_sum", 0.0), ("logsum", 0.0), ("acc_s_cast", None)):
        s.append(ir.FragDecl(fr[name], None if init is None else C(init), loc=L(f"] {name}")))
    k = S("k_pipe_order", "u32")
    s += [ir.MmaFill("acc_s", C(0.0), loc=L("acc_s = mma.fill")),
          ir.Let("first_k_slot", mod(k, 2), loc=L("first_k_slot ="))]
    wloc = L("wait kf.at")
    if wait_kf:
        s.append(ir.Wait([order_ref("kf", "k_pipe_order")], wloc))
    s += [ir.Mma("acc_s", _q_view(), whole("k_buf", (128, 128), S("first_k_slot", "u32")),
                 "row.row", "first_qk", loc=L("first_qk =")),
          ir.Wait([ir.FutureRef("first_qk")], loc=L("wait first_qk")),
          ir.Trigger(order_ref("ke", "k_pipe_order"), [], loc=L("trigger ke.at")),
          incr("k_pipe_order", loc=L("k_pipe_order++"))]
    if release_k_early:
        s[-3:] = s[-2:] + s[-3:-2]
    if causal or tail_mask:
        mloc, iloc, sloc = L("apply {i, j} in acc_s.span {"), L("if ("), L("acc_s.at(i, j) = -inf")
        cond = bin_(">", S("j"), add(mul(S("cid"), 64), S("i"))) if causal else \
            bin_(">=", S("j"), S("last_valid"))
        s.append(apply2("acc_s", [ir.If(cond, [store("acc_s", "ij", C(-math.inf), sloc)], loc=iloc)],
                        mloc))
    s.append(ir.Reduce("max", "scores_max", "acc_s", 1, loc=L("reduce_max(")))
    s += [scaled_exp(L), row_sum(L)]
    aloc = L("apply {i} in logsum.span")
    s.append(apply1("logsum", [store("logsum", "i", el("scores_sum", "i"), loc=L("logsum.at(i) ="))], aloc))
    s.append(cast_p(L))
    s.append(ir.MmaFill("acc_o", C(0.0), loc=L("acc_o = mma.fill")))
    s.append(_kv_loop(L))
    s += _epilogue(L, all_reduce, role_sync)
    return ir.Role("consumer", ir.Bin(">", S("p"), C(0), "bool"), (1, 2), s, True, 232, loc=loc)


def _kv_loop(L) -> ir.For:
    floc = L("foreach {step}")
    k, v = S("k_pipe_order", "u32"), S("v_pipe_order", "u32")
    b = [ir.Let("k_slot", mod(k, 2), loc=L("k_slot =")),
         ir.Let("prev_v_slot", mod(v, 2), loc=L("prev_v_slot =")),
         ir.MmaFill("acc_s", C(0.0), loc=L("acc_s = mma.fill")),
         ir.Wait([order_ref("kf", "k_pipe_order")], loc=L("wait kf.at")),
         ir.Mma("acc_s", _q_view(), whole("k_buf", (128, 128), S("k_slot", "u32")), "row.row", "qk",
                loc=L("qk =")),
         ir.Wait([order_ref("vf", "v_pipe_order")], loc=L("wait vf.at")),
         ir.Mma("acc_o", "acc_s_cast", whole("v_buf", (128, 128), S("prev_v_slot", "u32")), "row.col",
                "pv", loc=L("pv =")),
         ir.Wait([ir.FutureRef("qk")], loc=L("wait qk")),
         ir.Trigger(order_ref("ke", "k_pipe_order"), [], loc=L("trigger ke.at")),
         incr("k_pipe_order", loc=L("k_pipe_order++"))]
    b += [ir.FragCopy("scores_max_prev", "scores_max", loc=L("copy(")),
          ir.Reduce("max", "scores_max", "acc_s", 1, loc=L("reduce_max("))]
    aloc = L("apply {i} in scores_max.span")
    new_max = ir.Call("max", (el("scores_max", "i"), el("scores_max_prev", "i")), "f32")
    scale = exp2(sub(mul(el("scores_max_prev", "i"), SCALE), mul(el("scores_max", "i"), SCALE)))
    b.append(apply1("scores_max", [store("scores_max", "i", new_max, loc=L("scores_max.at(i) =")),
                                   store("scores_scale", "i", scale, loc=L("scores_scale.at(i) ="))], aloc))
    aloc = L("apply {i} in logsum.span")
    b.append(apply1("logsum", [store("logsum", "i", mul(el("logsum", "i"), el("scores_scale", "i")),
                                     L("logsum.at(i) ="))], aloc))
    b.append(scaled_exp(L))
    aloc = L("apply {i} in scores_sum.span")
    b.append(apply1("scores_sum", [store("scores_sum", "i", C(0.0), loc=L("scores_sum.at(i) ="))], aloc))
    b.append(row_sum(L))
    aloc = L("apply {i} in logsum.span")
    b.append(apply1("logsum", [store("logsum", "i", add(el("logsum", "i"), el("scores_sum", "i")),
                                     L("logsum.at(i) ="))], aloc))
    b += [ir.Wait([ir.FutureRef("pv")], loc=L("wait pv")),
          ir.Trigger(order_ref("ve", "v_pipe_order"), [], loc=L("trigger ve.at")),
          incr("v_pipe_order", loc=L("v_pipe_order++")), cast_p(L), rescale_o(L)]
    return ir.For("step", C(0), sub(S("kv_bound"), 1), b, loc=floc)


def _epilogue(L, all_reduce: bool, role_sync: bool) -> list[ir.Stmt]:
    v = S("v_pipe_order", "u32")
    s = [ir.Let("final_v_slot", mod(v, 2), loc=L("final_v_slot =")),
         ir.Wait([order_ref("vf", "v_pipe_order")], loc=L("wait vf.at")),
         ir.Mma("acc_o", "acc_s_cast", whole("v_buf", (128, 128), S("final_v_slot", "u32")),
                "row.col", "final_pv", loc=L("final_pv ="))]
    rloc = L("all_reduce_sum(logsum)")
    if all_reduce:
        s.append(ir.AllReduce("sum", "logsum", rloc))
    aloc = L("apply {i} in scores_scale.span")
    inv = bin_("/", C(1.0), el("logsum", "i"))
    s.append(apply1("scores_scale", [store("scores_scale", "i", inv, loc=L("scores_scale.at(i) ="))], aloc))
    s += [ir.Wait([ir.FutureRef("final_pv")], loc=L("wait final_pv")),
          ir.Trigger(order_ref("ve", "v_pipe_order"), [], loc=L("trigger ve.at")),
          incr("v_pipe_order", loc=L("v_pipe_order++")), rescale_o(L),
          ir.MmaStore("acc_o", view("o_buf", (mul(S("cid"), 64), 0), (64, 128)), loc=L("mma.store"))]
    # Both consumer warpgroups wrote o_buf: they meet, and one issues the store.
    # The destination names the ViewDef `O_head`: a view composed over a named view.
    cloc = L("tma.copy")
    o_store = ir.TmaStore(whole("o_buf", (128, 128)),
                          view("O_head", (mul(S("bm"), 128), 0), (128, 128)), loc=cloc)
    if COLLECTIVES:
        o_store.leader_only = True
        if role_sync:
            s.append(ir.RoleSync(loc=cloc))
    s.append(o_store)
    return s


# ---------------------------------------------------------------- GEMM


def gemm(declare_acc: bool = True) -> ir.Kernel:
    """examples/gemm.co: C = A @ B^T, bf16 in, f32 accumulate, bf16 out, 4-slot ring.

    declare_acc=False leaves `acc` out of the kernel's fragments, so that the
    accumulator takes its shape from the first MMA.
    """
    L = Src("gemm.co")
    params = [ir.Param("A", "bf16", (S("M"), S("K")), loc=L("] A")),
              ir.Param("B", "bf16", (S("N"), S("K")), loc=L("] B")),
              ir.Param("C", "bf16", (S("M"), S("N")), loc=L("] C"))]
    kloc = L("parallel.async {tn, tm}")
    grid = [ir.GridDim("tn", cdiv(S("N"), 128)), ir.GridDim("tm", cdiv(S("M"), 128))]
    buffers = [ir.Buffer("a_buf", "shared", "bf16", (128, 64), 4, 128, loc=L("a_buf[")),
               ir.Buffer("b_buf", "shared", "bf16", (128, 64), 4, 128, loc=L("b_buf[")),
               ir.Buffer("c_buf", "shared", "bf16", (128, 128), loc=L("c_buf;"))]
    events = [ir.Event("full", 4, loc=L("full[")), ir.Event("empty", 4, True, loc=L("empty["))]
    body: list[ir.Stmt] = [ir.Let("k_tiles", cdiv(S("K"), 64), loc=L("k_tiles ="))]
    ploc = L("parallel p by")
    o = S("order", "u32")
    rloc = L("inthreads.async (p == 0)")
    prod = [ir.SetMaxRegs(40, False, loc=L("call croq")),
            ir.Var("order", "u32", C(0, "u32"), loc=L("mutable u32 order"))]
    floc = L("foreach {kt}")
    loop = [ir.Let("slot", mod(o, 4), loc=L("slot =")),
            ir.Wait([order_ref("empty", "order")], loc=L("wait empty")),
            ir.TmaLoad(view("A", (mul(S("tm"), 128), mul(S("kt"), 64)), (128, 64)),
                       whole("a_buf", (128, 64), S("slot", "u32")), "a_load", None, 128, loc=L("a_load =")),
            ir.TmaLoad(view("B", (mul(S("tn"), 128), mul(S("kt"), 64)), (128, 64)),
                       whole("b_buf", (128, 64), S("slot", "u32")), "b_load", None, 128, loc=L("b_load =")),
            ir.Trigger(order_ref("full", "order"), ["a_load", "b_load"], loc=L("trigger full")),
            incr("order", loc=L("order++"))]
    prod.append(ir.For("kt", C(0), S("k_tiles"), loop, loc=floc))
    producer = ir.Role("producer", ir.Bin("==", S("p"), C(0), "bool"), (0,), prod, True, 40, loc=rloc)
    rloc = L("inthreads.async (p > 0)")
    cons = [ir.SetMaxRegs(232, True, loc=L("call croq")), ir.Let("cid", sub(S("p"), 1), loc=L("cid =")),
            ir.Var("order", "u32", C(0, "u32"), loc=L("mutable u32 order")),
            ir.MmaFill("acc", C(0.0), loc=L("acc = mma.fill"))]
    floc = L("foreach {kt}")
    loop = [ir.Let("slot", mod(o, 4), loc=L("slot =")),
            ir.Wait([order_ref("full", "order")], loc=L("wait full")),
            ir.Mma("acc", view("a_buf", (mul(S("cid"), 64), 0), (64, 64), slot=S("slot", "u32")),
                   whole("b_buf", (128, 64), S("slot", "u32")), "row.row", "step", loc=L("step =")),
            ir.Wait([ir.FutureRef("step")], loc=L("wait step")),
            ir.Trigger(order_ref("empty", "order"), [], loc=L("trigger empty")),
            incr("order", loc=L("order++"))]
    cons += [ir.For("kt", C(0), S("k_tiles"), loop, loc=floc),
             ir.MmaStore("acc", view("c_buf", (mul(S("cid"), 64), 0), (64, 128)), loc=L("mma.store")),
             ir.TmaStore(view("c_buf", (mul(S("cid"), 64), 0), (64, 128)),
                         view("C", (mul(add(mul(S("tm"), 2), S("cid")), 64), mul(S("tn"), 128)),
                              (64, 128)), loc=L("tma.copy"))]
    consumer = ir.Role("consumer", ir.Bin(">", S("p"), C(0), "bool"), (1, 2), cons, True, 232, loc=rloc)
    body.append(ir.Parallel("p", 3, "group-4", 128, [producer, consumer], loc=ploc))
    frags = [ir.Frag("acc", "f32", (64, 128), "acc")] if declare_acc else []
    return ir.Kernel("gemm", params, grid, buffers, events, frags, body, launch_bounds=(None, 1), loc=kloc)


def module_of(kernel: ir.Kernel) -> ir.Module:
    return ir.Module([ir.Function(kernel.name, kernel.params, [kernel], [ir.Launch(kernel.name)])])
