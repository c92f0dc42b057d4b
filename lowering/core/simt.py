"""Kernels of plain threads: element-wise code, `dma.copy`, `parallel ... : thread`.

A kernel with no MMA, fragment or event statement is lowered here, one
PTX thread per thread of the program: the block has as many threads as its
widest parallel region (`parallel q by 64` -> 64; `: group` -> 32 per
instance), statements outside a parallel region run in every thread (they
compute the same values), and the end of a parallel region joins its
threads with `bar.sync 0`.

`dma.copy` between global and shared memory is cooperative: every thread of
the block moves elements tid, tid + THREADS, ... with plain `ld`/`st` (no
alignment requirement: rows of any width), after a barrier that lets earlier
writers finish and before one that publishes the tile. A copy from or to a
thread's `local` buffer is that thread's own loop. `tma.copy` is such a copy
too: nothing in a kernel without MMAs, events or roles observes how a tile
moves (the same values land in the same places). Asynchronous copies
complete before the statement after them (a stronger order than the program
asks for), so `wait` on their futures has nothing left to do.

A file of several kernels (several parallel regions, several functions)
becomes one PTX module with an entry per kernel (`KERNELS`).
"""
from __future__ import annotations

from choreo_py import ir
from choreo_py.diagnostics import ChoreoError

from . import control, dma, grid_sync, params, thread_frags, warp_mma
from .asm import lower_asm
from .context import Lowering
from .conversions import assign_scalar
from .grid import dim_params
from .grid import py_expr as _py_expr
from .names import TopLevel, dim_param, ptr_param, py_name
from .memory import SMEM_ALIGN
from .threads import RAW, WIDENED, Places, ThreadExprs, barrier
from .writer import V, Writer, ptx_entry_name

_SPECIAL = ("%ctaid.x", "%ctaid.y", "%ctaid.z")
is_thread_kernel = ir.is_thread_kernel  # the kernels lowered here (the rule is the IR's)


def block_threads(k: ir.Kernel) -> int:
    par = [s for s in ir.walk(k.body) if isinstance(s, ir.Parallel)]
    threads = max((p.extent * p.threads for p in par), default=1)
    if any(isinstance(s, ir.WarpMma) for s in _outside_parallel(k.body)):
        threads = -(-threads // 32) * 32  # a warp MMA in the block's code: whole warps run it
    return threads


def _outside_parallel(stmts: list):
    for s in stmts:
        yield s
        if not isinstance(s, ir.Parallel):
            for block in ir.child_blocks(s):
                yield from _outside_parallel(block)


class ThreadLowering(Lowering):
    """The lowering state plus where the kernel's data lives."""

    places: Places
    threads: int
    widened_types = WIDENED

    def exprs(self, loc) -> ThreadExprs:
        return ThreadExprs(self, self.places, loc)


def _expr(lw: ThreadLowering, e: ir.Expr, loc, hint: str = "t", dst=None) -> V:
    return lw.exprs(loc).value(e, hint, dst)


def lower_thread_kernel(k: ir.Kernel, target, source_name: str) -> dict:
    """{name, body, params, threads, smem, grid, dims} of one kernel."""
    k = thread_frags.as_locals(k)  # a `: thread` region's fragments: local buffers
    w = Writer()
    lw = ThreadLowering(k, target, w)
    lw.threads = block_threads(k)
    lw.printf_formats = []  # (symbol, bytes) of println formats (module-level strings)
    if lw.threads > 1024:
        raise lw.refuse(f"a block of {lw.threads} threads (at most 1024)", k.loc)
    if len(k.grid) > 3:
        raise lw.refuse("a block grid of more than 3 dimensions", k.loc)
    local_base = ((k.smem_total or 0) + 15) // 16 * 16
    lw.places = Places(lw, local_base, lw.threads)
    smem = local_base + lw.places.local_bytes * lw.threads
    limit = target.record.smem_limit
    if smem > limit:
        raise lw.refuse(f"{smem} bytes of shared and per-thread memory (the limit is {limit})",
                        k.loc)
    run = _run_bytes(lw, smem)
    lw.enter_region()
    _prologue(lw)
    warp_mma.setup(lw)
    _body(lw, k.body)
    lw.leave_region()
    return {"name": k.name, "body": w.text(), "threads": lw.threads, "smem": smem, "run": run,
            "dims": k.symbolic_dims,
            "tensors": [p.name for p in k.params] + ([grid_sync.PARAM] if k.cooperative else []),
            "cooperative": k.cooperative,
            "grid": k.grid, "types": w.types_used, "strings": lw.printf_formats}


def _run_bytes(lw: ThreadLowering, smem: int) -> ir.Expr | None:
    """The bytes the launch adds to the static plan for the run-time-sized shared buffers
    (host-side: the dimensions are the launch's), None without any. Their shapes may name
    only the kernel's dimensions and scalar arguments: the host computes the size."""
    k = lw.k
    if not k.run_buffers:
        return None
    known = set(k.symbolic_dims)
    for b in k.run_buffers:
        for d in b.shape:
            if ir.sym_names(d) - known:
                raise lw.refuse(f"the shared buffer '{b.name}', whose shape depends on values "
                                "computed in the kernel", b.loc)
    return ir.Bin("+", ir.Const(lw.places.run_base - smem, "s32"), lw.places.run_bytes, "s32")


def _prologue(lw: ThreadLowering) -> None:
    w, k = lw.w, lw.k
    w.source(k.loc, f"kernel {k.name}")
    lw.next_statement()
    for p in k.params:
        r = w.reg("u64", f"{p.name}_ptr")
        w.call("ptx.param", "u64", f'"{ptr_param(p.name)}"', f"dst={r.text}")
        g = w.reg("u64", f"{p.name}_g")
        w.op("cvta.to.global.u64", g, r)
        lw.places.pointers[p.name] = g
    params.bind_dims(lw)  # dimensions, then scalar arguments (their bits: 32-bit words)
    if k.cooperative:
        grid_sync.pointer(lw)
    for g, special in zip(k.grid, _SPECIAL):
        r = w.reg("u32", g.var)
        w.op("mov.u32", r, f"ptx.sreg(\"{special}\")")
        lw.bind(g.var, r, nonneg=True, uniform=True)
    lw.tid = w.reg("u32", "tid")
    w.op("mov.u32", lw.tid, 'ptx.sreg("%tid.x")')
    raw = w.reg("u32", "smem_raw")
    w.op("mov.u32", raw, '"smem"')
    lw.smem_base = w.reg("u32", "smem_base")
    w.op("add.u32", lw.smem_base, raw, SMEM_ALIGN - 1)
    w.op("and.b32", lw.smem_base, lw.smem_base, -SMEM_ALIGN)


def _body(lw: ThreadLowering, stmts: list) -> None:
    for s in stmts:
        lw.next_statement()
        _one(lw, s)


def _block(lw: ThreadLowering, stmts: list) -> None:
    for s in stmts:
        _one(lw, s)


def _one(lw: ThreadLowering, s: ir.Stmt) -> None:
    lw.stmt_memo = {}
    if not isinstance(s, (ir.Parallel, ir.ViewDef)):
        lw.w.source(s.loc)
    handler = _HANDLERS.get(type(s))
    if handler is None:
        raise lw.refuse(_NAMES.get(type(s), f"the statement {type(s).__name__} in a thread "
                                              "kernel"), getattr(s, "loc", None))
    handler(lw, s)
    lw.stmt_memo = {}  # an enclosing statement's rest follows this one's branches


def _let(lw: ThreadLowering, s: ir.Let) -> None:
    v = _expr(lw, s.value, s.loc, hint=s.name)
    # A loop body's value, or a mutable variable's register (`int b = v;`: b keeps the
    # value v has now): a register of its own.
    if not v.is_const and (lw.depth > 0 or lw.holds_mutable(v)):
        v = lw.w.reg(v.ty, s.name, init=v)
    lw.bind(s.name, v, nonneg=control.nonneg(lw, s.value, s.loc), uniform=lw.uniform(s.value))


def _var(lw: ThreadLowering, s: ir.Var) -> None:
    from .exprs import reg_type

    r = lw.w.reg(reg_type(s.dtype, lw, s.loc), s.name)
    assign_scalar(lw.exprs(s.loc), s.dtype, s.init, r)
    lw.var_types[s.name] = s.dtype
    lw.bind(s.name, r, mutable=True, nonneg=s.dtype.startswith("u"))


def _assign(lw: ThreadLowering, s: ir.Assign) -> None:
    b = lw.lookup(s.name)
    if b is None or not b.mutable:
        raise lw.refuse(f"assigning '{s.name}', which is not a mutable scalar,", s.loc)
    assign_scalar(lw.exprs(s.loc), lw.var_types.get(s.name, ""), s.value, b.value)


def _store(lw: ThreadLowering, s: ir.BufStore) -> None:
    dtype = lw.places.base_shape(s.view.base, s.loc)[2]
    if isinstance(s.value, ir.BufElem) and s.value.dtype == dtype and dtype in RAW:
        # An element copied as it is (fp8 has no arithmetic here): its bits move.
        v = lw.places.load(s.value.view, s.value.index, RAW[dtype], s.loc)
        lw.places.store(s.view, s.index, RAW[dtype], v, s.loc)
        return
    v = _expr(lw, s.value, s.loc, hint="val")
    if s.atomic:
        _atomic(lw, s, dtype, v)
        return
    lw.places.store(s.view, s.index, dtype, v, s.loc)


_BITS_OPS = ("and", "or", "xor", "exch", "cas")


def _atomic(lw: ThreadLowering, s: ir.BufStore, dtype: str, v: V) -> None:
    """`__atomic_*` as a statement: one `red` (a reduction the memory system applies; no
    value back) for add, sub (an add of the negated value), min, max and the bitwise
    operations; `atom` (whose old value goes unused) for exch and cas."""
    ints = ("s32", "u32", "u64", "s64")
    if dtype not in ints + (("f32",) if s.atomic in ("add", "exch") else ()):
        raise lw.refuse(f"an atomic {s.atomic} on {dtype}", s.loc)
    w = lw.w
    space, addr = lw.places.address(s.view, s.index, s.loc)
    wide = dtype in ("s64", "u64")
    if s.atomic in _BITS_OPS:
        ty = "b64" if wide else "b32"
    elif s.atomic in ("add", "sub"):  # red.add has no .s64: two's complement is the same
        ty = {"s64": "u64", "s32": "u32"}.get(dtype, dtype) if s.atomic == "sub" else \
            {"s64": "u64"}.get(dtype, dtype)
    else:
        ty = dtype
    if v.is_const:
        v = w.reg(v.ty, "c", init=v)
    if s.atomic == "sub":
        neg = w.reg(v.ty, "neg")
        w.op("neg.s64" if wide else "neg.s32", neg, v)
        v = neg
    where = f"ptx.addr({addr.text})"
    if s.result is not None:  # the old value wanted: atom, whose destination is the variable
        b = lw.lookup(s.result)
        if b is None or not b.mutable:
            raise lw.refuse(f"an atomic's old value in '{s.result}'", s.loc)
        args = [where] + ([_cas_compare(lw, s)] if s.atomic == "cas" else []) + [v]
        op = "add" if s.atomic == "sub" else s.atomic
        w.op(f"atom.{space}.{op}.{ty}", b.value, *args)
        return
    if s.atomic == "exch":
        w.op(f"atom.{space}.exch.{ty}", w.reg(v.ty, "old"), where, v)
    elif s.atomic == "cas":
        w.op(f"atom.{space}.cas.{ty}", w.reg(v.ty, "old"), where, _cas_compare(lw, s), v)
    else:
        w.op(f"red.{space}.{'add' if s.atomic == 'sub' else s.atomic}.{ty}", where, v)


def _cas_compare(lw: ThreadLowering, s: ir.BufStore) -> V:
    cmp = _expr(lw, s.compare, s.loc, hint="cmp")
    return lw.w.reg(cmp.ty, "c", init=cmp) if cmp.is_const else cmp


def _parallel(lw: ThreadLowering, s: ir.Parallel) -> None:
    """One instance per `threads` threads; the threads past the region's width skip it,
    and all meet at its end (the join)."""
    w = lw.w
    width = s.extent * s.threads
    lw.push()
    inst = w.reg("u32", s.var)
    if s.threads == 1:
        w.op("mov.u32", inst, lw.tid)
    else:
        w.op("div.u32", inst, lw.tid, s.threads)
    # Uniform (the same in every thread that computes it) only when one instance spans
    # the block: conditions on it may then guard block barriers (_branch).
    lw.bind(s.var, inst, nonneg=True, uniform=width == s.threads and lw.threads == width)
    end = w.label(f"{s.var}_join")
    if width < lw.threads:
        if any(isinstance(t, (ir.DmaCopy, ir.SyncShared, ir.RoleSync, ir.Parallel))
               for t in ir.walk(s.body)):
            raise lw.refuse("a block barrier inside a parallel region narrower than the block",
                            s.loc)
        # The skipped threads of a warp the region only partly covers never reach it.
        if width % 32 and any(isinstance(t, ir.SyncWarp) for t in ir.walk(s.body)):
            raise lw.refuse("a warp barrier inside a parallel region that covers part of a "
                            "warp", s.loc)
        outside = w.reg("pred", f"{s.var}_out")
        w.op("setp.ge.u32", outside, lw.tid, width)
        w.bra(end, outside)
    lw.enter_region()
    _body(lw, s.body)
    lw.leave_region()
    w.put_label(end)
    lw.pop()
    barrier(lw)


def _has_barrier(stmts: list) -> bool:
    """Whether `stmts` meet at a barrier: a shared copy, a sync (the block's or the
    warp's), a parallel join."""
    return any(isinstance(t, (ir.SyncShared, ir.SyncWarp, ir.RoleSync, ir.Parallel, ir.DmaCopy))
               for t in ir.walk(stmts))


def _branch(lw: ThreadLowering, s) -> None:
    """`if` / `while`: a block barrier inside needs every thread of the block to take the
    same way (else the threads that do wait for those that never come)."""
    bodies = [s.then, s.orelse] if isinstance(s, ir.If) else [s.body]
    if any(_has_barrier(b) for b in bodies) and not lw.uniform(s.cond):
        per_thread = all(isinstance(t, ir.DmaCopy) and "local" in (
            lw.places.base_shape(t.src.base, t.loc)[0], lw.places.base_shape(t.dst.base, t.loc)[0])
            for b in bodies for t in ir.walk(b)
            if isinstance(t, (ir.DmaCopy, ir.SyncShared, ir.SyncWarp, ir.RoleSync,
                              ir.Parallel)))
        if not per_thread:
            raise lw.refuse("a block barrier (a shared dma.copy, a sync, a parallel region) "
                            "under a condition that may differ between threads", s.loc)
    if isinstance(s, ir.If):
        control.if_(lw, s, lambda b: _block(lw, b))
    else:
        control.while_(lw, s, lambda b: _block(lw, b))


def _wait(lw: ThreadLowering, s: ir.Wait) -> None:
    """Copies complete when issued here: a wait on their futures has nothing to wait for."""
    for item in s.items:
        if not isinstance(item, ir.FutureRef):
            raise lw.refuse("waiting on an event in a thread kernel", s.loc)


def _print(lw: ThreadLowering, s: ir.Print) -> None:
    """`println`: a device printf (`vprintf(format, args)`): the format is a global string of
    the module, the values 64-bit words of a per-thread local buffer."""
    w = lw.w
    fmt, values = ir.print_format(s.items, s.c_format)
    words = [_word64(lw, v, s.loc, s.c_format) for v in values]
    sym = f"{ptx_entry_name(lw.k.name)}_fmt{len(lw.printf_formats)}"
    lw.printf_formats.append((sym, fmt.encode() + b"\0"))
    args = w.reg("u64", "pargs")
    if words:
        buf = w.fresh("pbuf")
        w.call("ptx.raw", f'".local .align 8 .b8 {buf}[{8 * len(words)}];"')
        w.op("mov.u64", args, f'"{buf}"')
        for i, x in enumerate(words):
            w.op("st.local.b64", f"ptx.addr({args.text}, {8 * i})", x)
        w.op("cvta.local.u64", args, args)
    else:
        w.op("mov.u64", args, 0)
    f = w.reg("u64", "pfmt")
    w.op("mov.u64", f, f'"{sym}"')
    w.op("cvta.global.u64", f, f)
    p0, p1, r0 = (w.fresh(x) for x in ("pf_param", "pa_param", "pr_param"))
    for line in (f".param .b64 {p0};", f"st.param.b64 [{p0}], {f.ptx_name()};",
                 f".param .b64 {p1};", f"st.param.b64 [{p1}], {args.ptx_name()};",
                 f".param .b32 {r0};", f"call ({r0}), vprintf, ({p0}, {p1});"):
        w.call("ptx.raw", repr(line))


def _asm(lw: ThreadLowering, s: ir.Asm) -> None:
    def store(place, reg: V) -> None:
        if isinstance(place, ir.BufElem):
            dtype = lw.places.base_shape(place.view.base, s.loc)[2]
            lw.places.store(place.view, place.index, dtype, reg, s.loc)
            return
        b = lw.lookup(place.name)
        if b is None or not b.mutable:
            raise lw.refuse(f"an asm output into '{place.name}', which is not a mutable scalar,",
                            s.loc)
        if b.value.ty == reg.ty or b.value.ty[1:] == reg.ty[1:]:
            lw.w.op(f"mov.{reg.ty}", b.value, reg)
        else:
            lw.w.op(f"cvt.{b.value.ty}.{reg.ty.replace('b', 'u')}", b.value, reg)

    lower_asm(lw, s, lambda e, hint: _expr(lw, e, s.loc, hint=hint), store)


def _word64(lw: ThreadLowering, e: ir.Expr, loc, c_format: bool = False) -> V:
    """A printf argument: an integer as a signed (or unsigned) 64-bit word, a float as a
    double, a condition as the address of "true" or "false" (`%s`; a C printf's `%d`:
    0 or 1)."""
    w = lw.w
    v = _expr(lw, e, loc, hint="pv")
    if v.is_const:
        v = w.reg(v.ty, "pv", init=v)
    if v.ty == "f32":
        out = w.reg("f64", "pw")
        w.op("cvt.f64.f32", out, v)
    elif v.ty == "pred" and not c_format:
        out = w.reg("u64", "pw")
        w.op("selp.b64", out, _global_text(lw, "true"), _global_text(lw, "false"), v)
    elif v.ty == "pred":
        out = w.reg("s64", "pw")
        w.op("selp.b64", out, 1, 0, v)
    elif v.ty in ("s32", "u32"):
        out = w.reg(v.ty[0] + "64", "pw")
        w.op(f"cvt.{out.ty}.{v.ty}", out, v)
    elif v.ty in ("s64", "u64"):
        out = v
    else:
        raise lw.refuse(f"printing a {e.dtype} value", loc)
    return out


def _global_text(lw: ThreadLowering, text: str) -> V:
    """The generic address of a module string `text` (one per kernel and text)."""
    sym = f"{ptx_entry_name(lw.k.name)}_{text}"
    if all(name != sym for name, _ in lw.printf_formats):
        lw.printf_formats.append((sym, text.encode() + b"\0"))
    a = lw.w.reg("u64", "ptext")
    lw.w.op("mov.u64", a, f'"{sym}"')
    lw.w.op("cvta.global.u64", a, a)
    return a


def _named_barrier(lw: ThreadLowering, s: ir.NamedBarrier) -> None:
    """`__bar_sync/arrive(id, count)` in a `: thread` region: each thread arrives on barrier
    `id` (sema checked the count: whole warps, at most the region's threads)."""
    if isinstance(s.barrier, ir.Const) and s.barrier.value == 0:
        raise lw.refuse(f"__bar_{s.op} on barrier 0 (the whole-block barrier of this backend's "
                        "own code)", s.loc)
    lw.w.source(s.loc)
    lw.w.op(f"bar.{s.op}", _expr(lw, s.barrier, s.loc, "bar_id"), V.imm(s.count, "u32"))


_NAMES = {ir.Launch: "a launch inside a kernel",
          ir.HostCall: "a call of a __co__ function inside a kernel",
          ir.ElemStore: "a store to a fragment element outside 'apply'"}

def _tma_store(lw: ThreadLowering, s: ir.TmaStore) -> None:
    if s.rows is not None:
        raise lw.refuse("'tma.copy.rows<n>' in a thread kernel (it is lowered in MMA kernels, "
                        "by their roles' threads)", s.loc)
    dma.copy(lw, dma.as_copy(s))


_HANDLERS = {
    ir.Let: _let,
    ir.Var: _var,
    ir.Assign: _assign,
    ir.ViewDef: lambda lw, s: None,
    ir.For: lambda lw, s: control.for_(lw, s, lambda b: _block(lw, b)),
    ir.While: lambda lw, s: _branch(lw, s),
    ir.If: lambda lw, s: _branch(lw, s),
    ir.Break: lambda lw, s: control.break_(lw, s),
    ir.Continue: lambda lw, s: control.continue_(lw, s),
    ir.Parallel: _parallel,
    ir.BufStore: _store,
    ir.DmaCopy: lambda lw, s: dma.copy(lw, s),
    ir.TmaLoad: lambda lw, s: dma.copy(lw, dma.as_copy(s)),
    ir.TmaStore: lambda lw, s: _tma_store(lw, s),
    ir.Wait: _wait,
    ir.SyncShared: lambda lw, s: barrier(lw),
    # Every lane of the warp (bar.warp.sync also orders their memory accesses).
    ir.SyncWarp: lambda lw, s: lw.w.op("bar.warp.sync", -1),
    # The thread leaves the kernel; later barriers wait only for threads that have not
    # exited (bar.sync counts the CTA's non-exited threads).
    ir.Yield: lambda lw, s: lw.w.op("ret"),
    ir.RoleSync: lambda lw, s: barrier(lw),
    ir.GridSync: grid_sync.grid_sync,
    ir.Fence: grid_sync.fence,
    ir.Print: _print,
    ir.Asm: _asm,
    ir.NamedBarrier: lambda lw, s: _named_barrier(lw, s),
    **warp_mma.HANDLERS,
}


# ---------------------------------------------------------------- module text

def module_text(parts: list[dict], arch: str, source_name: str) -> str:
    """The pyptx module of a file's thread kernels: one `kernel(...)` per entry, `KERNELS`
    (name -> its launch description) and `KERNEL` (all entries as one PTX module)."""
    types = sorted({"u32", "s32", "u64", "pred", "b16", "b32", "b64", "f32"}
                   .union(*(p["types"] for p in parts)))
    out = [
        f'"""Kernels of {source_name}, compiled by choreo-py for {arch} (per-thread code).',
        "",
        "Each ptx.* call emits one PTX instruction; a comment names the Choreo statement",
        "each block comes from. The launcher reads KERNELS: per kernel its parameters",
        "(a pointer per tensor, then the symbolic dimensions), grid(), THREADS and SMEM_BYTES.",
        '"""',
        "from pyptx import kernel, ptx, reg",
        f"from pyptx.types import {', '.join(types)}",
        "",
        f'ARCH = "{arch}"',
        "KERNELS = {}",
    ]
    prelude = _prelude([x for p in parts for x in p["strings"]])
    if prelude:
        out += ["", "# device printf: vprintf and the formats of println", f"PRELUDE = {prelude!r}"]
    scope = TopLevel()
    for p in parts:
        out += _entry_text(p, entry_names(p["name"], scope))
    return "\n".join(out + module_tail(bool(prelude)))


def module_tail(prelude: bool) -> list[str]:
    """The end of a generated module of several entries: `KERNEL.ptx()` joins the entries'
    PTX under the first one's header (and the printf prelude, when the module has one)."""
    joined = "head + PRELUDE + rest" if prelude else "head + rest"
    return [
        "",
        "",
        "class _Module:",
        '    """Every entry of the file in one PTX module (one header, entries in order)."""',
        "",
        "    def ptx(self):",
        "        texts = [k['KERNEL'].ptx() for k in KERNELS.values()]",
        "        head, rest = _split(texts[0])",
        f"        return {joined} + ''.join(_split(t)[1] for t in texts[1:])",
        "",
        "",
        "def _split(text):",
        "    cut = text.index('.visible .entry')",
        "    return text[:cut], text[cut:]",
        "",
        "",
        "KERNEL = _Module()",
        "",
    ]


def _prelude(strings: list) -> str:
    """Module-level PTX the entries' printf calls need (empty without println)."""
    if not strings:
        return ""
    lines = [".extern .func (.param .b32 func_retval0) vprintf(.param .b64 vprintf_param_0, "
             ".param .b64 vprintf_param_1);"]
    for sym, data in strings:
        lines.append(f".global .align 1 .b8 {sym}[{len(data)}] = "
                     f"{{{', '.join(str(b) for b in data)}}};")
    return "\n".join(lines) + "\n"


def _entry_text(p: dict, names: dict | None = None) -> list[str]:
    """One entry of the module. `names`: its top-level Python names (`fn`, `grid`,
    `smem`), unique in the module (module_names); PTX knows it as ptx_entry_name."""
    name, dims = p["name"], p["dims"]
    names = names or entry_names(name)
    fn, entry = names["fn"], ptx_entry_name(name)
    raw = [("u64", ptr_param(t)) for t in p["tensors"]] + [("u32", dim_param(d)) for d in dims]
    params, sym = dim_params(dims)
    grid = [_py_expr(g.extent, sym) for g in p["grid"]] + ["1"] * (3 - len(p["grid"]))
    return [
        "",
        "",
        f"def {fn}():",
        p["body"],
        "",
        "",
        f"def {names['grid']}({params}):",
        f"    return ({', '.join(grid)})",
        *_run_smem_text(p, names["smem"], params, sym),
        "",
        "",
        f"{fn}.__name__ = {entry!r}",
        f"KERNELS[{name!r}] = dict(",
        f"    THREADS={p['threads']},",
        f"    SMEM_BYTES={p['smem'] + SMEM_ALIGN},",
        f"    TENSORS={tuple(p['tensors'])!r},",
        f"    DIMS={tuple(dims)!r},",
        *(["    COOPERATIVE=True,  # cuLaunchCooperativeKernel (a grid-wide barrier)"]
          if p.get("cooperative") else []),
        *([f"    SMEM_RUN={names['smem']},  # + bytes of the run-time-sized shared buffers"]
          if p.get("run") is not None else []),
        f"    grid={names['grid']},",
        "    KERNEL=kernel(",
        "        arch=ARCH,",
        f"        raw_params={raw!r},",
        '        extern_smem="smem",',
        f"        block=({p['threads']}, 1, 1),",
        f"        raw_directives=[('maxntid', ({p['threads']}, 1, 1))],",
        f"    )({fn}),",
        ")",
    ]


def entry_names(name: str, scope: TopLevel | None = None) -> dict:
    """The top-level Python names of a kernel's entry: its function and its launch helpers,
    claimed in the module's `scope` (a program name mangled by py_name; the helpers'
    `_grid_`/`_smem_` prefixes are the compiler's)."""
    scope = scope or TopLevel()
    fn = scope.claim(py_name(name))
    return {"fn": fn, "grid": scope.claim(f"_grid_{fn}"), "smem": scope.claim(f"_smem_{fn}")}


def _run_smem_text(p: dict, helper: str, params: str, sym) -> list[str]:
    """`_smem_NAME(dims)`: the shared bytes a launch adds to SMEM_BYTES (run-time-sized
    shared buffers, ir.RunBuffer); nothing for a kernel without them."""
    if p.get("run") is None:
        return []
    return ["", "", f"def {helper}({params}):",
            f"    return {_py_expr(p['run'], sym)}"]


def lower_thread_module(module: ir.Module, target, source_name: str) -> str:
    parts = []
    for fn in module.functions:
        for k in fn.kernels:
            parts.append(lower_thread_kernel(k, target, source_name))
    if not parts:
        raise ChoreoError("the file has no kernel (no parallel region) to compile")
    return module_text(parts, target.arch, source_name)
