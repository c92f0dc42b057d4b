"""Stable text form of the tile IR: one op per line, regions indented.

The output is part of the golden tests, so it must be deterministic and
must change only when the IR changes.
"""
from __future__ import annotations

from choreo_py import ir

_PREC = {
    "||": 1, "&&": 2, "|": 3, "^": 4, "&": 5, "==": 6, "!=": 6,
    "<": 7, "<=": 7, ">": 7, ">=": 7, "<<": 8, ">>": 8,
    "+": 9, "-": 9, "*": 10, "/": 10, "%": 10,
}


def expr(e: ir.Expr, parent: int = 0) -> str:
    """`e` as text; `parent` is the precedence of the operator around it (parentheses
    where `e` binds less tightly)."""
    printer = EXPRESSIONS.get(type(e))
    if printer is None:
        raise TypeError(f"not an IR expression: {e!r}")
    return printer(e, parent)


def _bin(e: ir.Bin, parent: int) -> str:
    p = _PREC[e.op]
    text = f"{expr(e.lhs, p)} {e.op} {expr(e.rhs, p + 1)}"
    return f"({text})" if p < parent else text


def _select(e: ir.Select, parent: int) -> str:
    text = f"{expr(e.cond, 1)} ? {expr(e.if_true, 1)} : {expr(e.if_false, 1)}"
    return f"({text})" if parent else text


def _call(e: ir.Call, parent: int) -> str:
    args = ", ".join(expr(a) for a in e.args)
    return f"to<{e.dtype}>({args})" if e.fn == "to" else f"{e.fn}({args})"


def _index(index) -> str:
    return ", ".join(expr(i) for i in index)


def _const(c: ir.Const) -> str:
    v = c.value
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        if v != v:
            return "nan"
        if v in (float("inf"), float("-inf")):
            return "-inf" if v < 0 else "inf"
        return f"{v!r}:{c.dtype}"
    return str(v) if c.dtype in ("s32",) else f"{v}:{c.dtype}"


#: The printer of each expression kind (tests/test_ir_coverage.py checks every kind has one).
EXPRESSIONS = {
    ir.Const: lambda e, parent: _const(e),
    ir.Sym: lambda e, parent: e.name,
    ir.Bin: _bin,
    ir.Un: lambda e, parent: f"{e.op}{expr(e.operand, 11)}",
    ir.Select: _select,
    ir.Call: _call,
    ir.Elem: lambda e, parent: f"{e.frag}[{_index(e.index)}]",
    ir.BufElem: lambda e, parent: f"{view(e.view)}[{_index(e.index)}]",
}


def shape(dims) -> str:
    return "[" + ", ".join(expr(d) if isinstance(d, ir.Expr) else str(d) for d in dims) + "]"


def view(v: ir.View) -> str:
    base = v.base if v.slot is None else f"{v.base}[{expr(v.slot)}]"
    parts = []
    for off, ext, keep in zip(v.offsets, v.extents, v.keep):
        o = expr(off)
        parts.append(f"{o}+:{expr(ext)}" if keep else f"{o}")
    return f"{base}<{', '.join(parts)}>"


def event_ref(r: ir.EventRef) -> str:
    if r.order is not None:
        return f"{r.event}.at({expr(r.order)})"
    if r.index is not None:
        return f"{r.event}[{expr(r.index)}]"
    return r.event


def _leader(s) -> str:
    return " [leader]" if s.leader_only else ""


def _item(x) -> str:
    return event_ref(x) if isinstance(x, ir.EventRef) else f"future {x.future}"


class _Printer:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.depth = 0

    def emit(self, text: str) -> None:
        self.lines.append("  " * self.depth + text)

    def region(self, head: str, body: list[ir.Stmt]) -> None:
        self.emit(head + " {")
        self.depth += 1
        for s in body:
            self.stmt(s)
        self.depth -= 1
        self.emit("}")

    def stmt(self, s: ir.Stmt) -> None:
        method = STATEMENTS.get(type(s))
        if method is None:
            raise TypeError(f"no printer for {type(s).__name__}")
        method(self, s)

    # -- scalars and control
    def s_Let(self, s): self.emit(f"let {s.name} = {expr(s.value)}")
    def s_Var(self, s): self.emit(f"var {s.name}: {s.dtype} = {expr(s.init)}")
    def s_Assign(self, s): self.emit(f"{s.name} := {expr(s.value)}")
    def s_ViewDef(self, s): self.emit(f"view {s.name} = {view(s.view)}")
    def s_Break(self, s): self.emit("break")
    def s_Yield(self, s): self.emit("yield")
    def s_Continue(self, s): self.emit("continue")
    def s_SyncShared(self, s): self.emit("sync.shared")
    def s_SyncWarp(self, s): self.emit("sync.warp")
    def s_GridSync(self, s): self.emit("sync.grid")
    def s_Fence(self, s): self.emit(f"fence.{s.scope}")
    def s_RoleSync(self, s): self.emit("role.sync")
    def s_NamedBarrier(self, s): self.emit(f"bar.{s.op} {expr(s.barrier)}, {s.count}")
    def s_Launch(self, s): self.emit(f"launch {s.kernel}")

    def s_HostCall(self, s):
        args = [f"{p} = &{t}" for p, t in s.tensors] + \
            [f"{n} = {expr(v)}" for n, v in zip(s.scalars, s.values)]
        result = "" if s.result is None else f" -> {s.result}" + (
            f": {s.result_dtype}" if s.result_dtype else "")
        self.emit(f"call {s.func}({', '.join(args)}){result}")
    def s_Assert(self, s): self.emit(f"assert {expr(s.cond)}, {s.message!r}")

    def s_Print(self, s):
        self.emit(("printf " if s.c_format else "print ") + ", ".join(repr(x) if isinstance(x, str) else expr(x)
                                       for x in s.items))

    def s_Asm(self, s):
        def ops(xs):
            return ", ".join((f"[{o.name}] " if o.name else "") + f"{o.constraint!r} {expr(o.expr)}"
                             for o in xs)
        def part(word, text):
            return f"{word} {text}" if text else word
        self.emit(f"asm{'.volatile' if s.volatile else ''} {s.template!r}; "
                  f"{part('out', ops(s.outputs))}; {part('in', ops(s.inputs))}; "
                  f"{part('clobber', ', '.join(repr(c) for c in s.clobbers))}")

    def s_For(self, s):
        step = "" if s.step == ir.Const(1, "s32") else f" step {expr(s.step)}"
        self.region(f"for {s.var} in {expr(s.start)}..{expr(s.stop)}{step}", s.body)

    def s_While(self, s): self.region(f"while {expr(s.cond)}", s.body)

    def s_If(self, s):
        self.region(f"if {expr(s.cond)}", s.then)
        if s.orelse:
            self.region("else", s.orelse)

    def s_Parallel(self, s):
        self.region(f"parallel {s.var} < {s.extent} : {s.level} ({s.threads} threads each)", s.body)

    def s_Role(self, s):
        members = ", ".join(str(m) for m in s.members)
        regs = f" maxregs={s.max_regs}" if s.max_regs is not None else ""
        kind = "role" if s.is_async else "role.sync"
        self.region(f"{kind} ({expr(s.cond)}) = {{{members}}}{regs}", s.body)

    def s_SetMaxRegs(self, s):
        self.emit(f"setmaxnreg.{'inc' if s.increase else 'dec'} {s.count}")

    # -- data movement and events
    def s_TmaLoad(self, s):
        mods = "".join(f".{m}" for m in (s.evict,) if m)
        swz = f".swizzle{s.swizzle}" if s.swizzle else ""
        lhs = f"{s.future} = " if s.future else ""
        kind = "tma.load.async" if s.future else "tma.load"
        self.emit(f"{lhs}{kind}{mods}{swz}{_leader(s)} {view(s.src)} => {view(s.dst)}")

    def s_TmaStore(self, s):
        lhs, kind = (f"{s.future} = ", "tma.store.async") if s.future else ("", "tma.store")
        rows = f" [rows {expr(s.rows)}]" if s.rows is not None else ""
        self.emit(f"{lhs}{kind}{_leader(s)} {view(s.src)} => {view(s.dst)}{rows}")

    def s_DmaCopy(self, s):
        lhs = f"{s.future} = " if s.future else ""
        swz = f".swizzle{s.swizzle}" if s.swizzle else ""
        if s.transpose:
            swz += f".transp<{','.join(map(str, s.transpose))}>"
        if s.pad:
            low, high, value = s.pad
            swz += f".pad<{','.join(map(str, low))};{','.join(map(str, high))};{expr(value)}>"
        self.emit(f"{lhs}dma.copy{'.async' if s.future else ''}{swz}{_leader(s)} "
                  f"{view(s.src)} => {view(s.dst)}")

    def s_Wait(self, s): self.emit("wait " + ", ".join(_item(x) for x in s.items))

    def s_Trigger(self, s):
        after = f" after {', '.join(s.after)}" if s.after else ""
        self.emit(f"trigger {event_ref(s.event)}{after}")

    # -- fragments and MMA
    def s_FragDecl(self, s):
        f = s.frag
        init = f" = {expr(s.init)}" if s.init is not None else ""
        block = " : block" if f.block else ""  # the block's accumulator
        block += f" in {f.host}" if f.host else ""
        self.emit(f"frag {f.name}: {f.dtype}{shape(f.shape)} layout={f.layout}{block}{init}")

    def s_MmaFill(self, s): self.emit(f"mma.fill {s.acc}, {expr(s.value)}")

    def s_Mma(self, s):
        a = s.a if isinstance(s.a, str) else view(s.a)
        lhs = f"{s.future} = " if s.future else ""
        sched = f" k_schedule={list(s.k_schedule)}" if s.k_schedule else ""
        commit = f" commit={s.completion}" if s.completion else ""
        sparse = f" sparse={s.meta}" if isinstance(s, ir.SparseMma) else ""
        self.emit(f"{lhs}mma.{s.layout}{'.async' if s.future else ''} {s.acc} += {a} * "
                  f"{view(s.b)}{sparse}{sched}{commit}")

    def s_WarpMma(self, s): self.emit(f"mma.sync.{s.layout} {s.acc} += {s.a} * {s.b}")

    def s_MmaStore(self, s):
        mod = ".transp" if s.transposed else ".direct" if s.direct else ""
        self.emit(f"mma.store{mod} {s.acc} => {view(s.dst)}")
    def s_MmaLoad(self, s): self.emit(f"mma.load {view(s.src)} => {s.frag}")

    def s_Apply(self, s):
        notes = " warp-vote" if s.warp_vote else ""
        if s.exp2_fraction is not None:
            notes += f" exp2-split={s.exp2_fraction!r}"
        if s.exp2_poly:
            notes += f" exp2-poly=k%16 in {{{', '.join(map(str, s.exp2_poly))}}}"
        self.region(f"apply ({', '.join(s.indices)}) in {s.domain}{shape(s.shape)}{notes}",
                    s.body)

    def s_ElemStore(self, s):
        self.emit(f"{s.frag}[{', '.join(expr(i) for i in s.index)}] = {expr(s.value)}")

    def s_BufStore(self, s):
        where = f"{view(s.view)}[{', '.join(expr(i) for i in s.index)}]"
        if s.atomic:
            cmp = f"{expr(s.compare)}, " if s.compare is not None else ""
            old = f" into {s.result}" if s.result else ""
            self.emit(f"atomic_{s.atomic} {where}, {cmp}{expr(s.value)}{old}")
            return
        self.emit(f"{where} = {expr(s.value)}")

    def s_Reduce(self, s): self.emit(f"{s.dst} = reduce_{s.kind}({s.src}, dim={s.dim})")
    def s_AllReduce(self, s): self.emit(f"all_reduce_{s.kind}({s.frag})")
    def s_FragCopy(self, s): self.emit(f"{s.dst} = copy({s.src})")


#: The printer of each statement kind (tests/test_ir_coverage.py checks every kind has one).
STATEMENTS = {
    ir.Let: _Printer.s_Let, ir.Var: _Printer.s_Var, ir.Assign: _Printer.s_Assign,
    ir.ViewDef: _Printer.s_ViewDef, ir.Break: _Printer.s_Break, ir.Yield: _Printer.s_Yield,
    ir.Continue: _Printer.s_Continue,
    ir.Print: _Printer.s_Print, ir.Asm: _Printer.s_Asm, ir.SyncShared: _Printer.s_SyncShared,
    ir.SyncWarp: _Printer.s_SyncWarp, ir.GridSync: _Printer.s_GridSync,
    ir.Fence: _Printer.s_Fence, ir.RoleSync: _Printer.s_RoleSync,
    ir.NamedBarrier: _Printer.s_NamedBarrier, ir.Launch: _Printer.s_Launch,
    ir.HostCall: _Printer.s_HostCall,
    ir.Assert: _Printer.s_Assert,
    ir.For: _Printer.s_For, ir.While: _Printer.s_While, ir.If: _Printer.s_If,
    ir.Parallel: _Printer.s_Parallel, ir.Role: _Printer.s_Role,
    ir.SetMaxRegs: _Printer.s_SetMaxRegs, ir.TmaLoad: _Printer.s_TmaLoad,
    ir.TmaStore: _Printer.s_TmaStore, ir.DmaCopy: _Printer.s_DmaCopy, ir.Wait: _Printer.s_Wait,
    ir.Trigger: _Printer.s_Trigger, ir.FragDecl: _Printer.s_FragDecl,
    ir.MmaFill: _Printer.s_MmaFill, ir.Mma: _Printer.s_Mma, ir.SparseMma: _Printer.s_Mma, ir.MmaStore: _Printer.s_MmaStore,
    ir.MmaLoad: _Printer.s_MmaLoad, ir.Apply: _Printer.s_Apply, ir.WarpMma: _Printer.s_WarpMma,
    ir.ElemStore: _Printer.s_ElemStore, ir.BufStore: _Printer.s_BufStore,
    ir.Reduce: _Printer.s_Reduce, ir.AllReduce: _Printer.s_AllReduce,
    ir.FragCopy: _Printer.s_FragCopy,
}


def buffer_decl(b: ir.Buffer) -> str:
    """`shared a_buf[4]: bf16[128, 64] swizzle=128 offset=0`; a swizzle the
    free-tile-swizzle pass chose is marked `layout-free`."""
    arr = f"[{b.count}]" if b.count else ""
    swz = f" swizzle={b.swizzle}" if b.swizzle else ""
    free = " layout-free" if b.free_swizzle else ""
    init = f" = {expr(b.init)}" if b.init is not None else ""
    off = f" offset={b.offset}" if b.offset is not None else ""
    return f"{b.storage} {b.name}{arr}: {b.dtype}{shape(b.shape)}{swz}{free}{off}{init}"


def event_decl(e: ir.Event) -> str:
    """`event kf[2] pending arrivals=1 offset=196608`."""
    arr = f"[{e.slots}]" if e.slots else ""
    storage = "" if e.storage == "shared" else f" storage={e.storage}"
    arrivals = f" arrivals={e.arrivals}" if e.arrivals is not None else ""
    off = f" offset={e.offset}" if e.offset is not None else ""
    return f"event {e.name}{arr} {'ready' if e.ready else 'pending'}{storage}{arrivals}{off}"


def tmem_lines(m: ir.TmemMap) -> list[str]:
    """The tensor-memory map: `tmem_alloc 512 used=512 role={1, 2}`, then one line per
    region, `tmem acc_s[1]: acc layout=F lanes=32q+16+:16 cols=0+:128` (layout F: 16
    lanes of each 32-lane subpartition q; layout D: `lanes=0+:128`), and one per operand
    staged through shared memory; or `tmem_refused <why>` when no plan could be made."""
    if m.refused is not None:
        return [f"tmem_refused {m.refused}"]
    role = "none" if m.role is None else "{" + ", ".join(map(str, m.role)) + "}"
    out = [f"tmem_alloc {m.alloc} used={m.used} role={role}"]
    for r in m.regions:
        lanes = f"{r.lane}+:128" if r.layout == "D" else f"32q+{r.lane}+:16"
        out.append(f"tmem {r.frag}[{r.instance}]: {r.kind} layout={r.layout} lanes={lanes} "
                   f"cols={r.col}+:{r.ncols}" + (f" in={r.host}" if r.host else ""))
    out += [f"tmem {name}: staged ({why})" for name, why in m.staged.items()]
    return out


def print_kernel(k: ir.Kernel, p: _Printer | None = None) -> str:
    p = p or _Printer()
    params = ", ".join(f"{q.name}: {q.storage} {q.dtype}{shape(q.shape)}" for q in k.params)
    p.emit(f"kernel {k.name}({params}) {{")
    p.depth += 1
    grid = ", ".join(f"{g.var} < {expr(g.extent)}" for g in k.grid)
    p.emit(f"grid {grid}")
    if k.scalars:
        p.emit("scalars " + ", ".join(f"{x.name}: {x.dtype}" for x in k.scalars))
    if k.device:
        p.emit(f"device {k.device}")
    if k.writes_back:
        p.emit("writes_back " + ", ".join(f"{h} = {c}" for h, c in k.writes_back))
    if k.cooperative:
        p.emit("cooperative")
    if k.launch_bounds:
        p.emit("launch_bounds " + ", ".join("_" if x is None else str(x) for x in k.launch_bounds))
    if k.smem_total is not None:
        p.emit(f"shared_memory {k.smem_total}")
    if k.tmem_slot is not None:
        p.emit(f"tmem_slot {k.tmem_slot}")
    for line in tmem_lines(k.tmem) if k.tmem is not None else ():
        p.emit(line)
    for b in k.buffers:
        p.emit(buffer_decl(b))
    for b in k.run_buffers:
        p.emit(f"shared_run {b.name}: {b.dtype}[{', '.join(expr(d) for d in b.shape)}]")
    for a in k.aliases:
        p.emit(f"alias {a.name} = {a.base}{shape(a.shape)}")
    for e in k.events:
        p.emit(event_decl(e))
    for s in k.body:
        p.stmt(s)
    p.depth -= 1
    p.emit("}")
    return "\n".join(p.lines) + "\n"


def print_module(m: ir.Module) -> str:
    p = _Printer()
    for f in m.functions:
        for k in f.kernels:
            print_kernel(k, p)
            p.emit("")
        params = ", ".join(f"{q.name}: {q.storage} {q.dtype}{shape(q.shape)}" for q in f.params)
        result = f" -> {f.result}" if f.result else ""
        if f.missing_return:
            result = f" -> nothing (declared {f.missing_return})"
        host = [f"host {q.name}: {q.storage} {q.dtype}{shape(q.shape)}"
                + (f" = {expr(q.init)}" if q.init is not None else "") for q in f.locals]
        if f.arg_names and f.arg_names != [q.name for q in f.params]:
            host.insert(0, "args " + ", ".join(f.arg_names))
        p.emit(f"func {f.name}({params}){result} {{")
        p.depth += 1
        for line in host:  # the call's arguments in order, then the buffers the host allocates
            p.emit(line)
        for s in f.body:
            p.stmt(s)
        p.depth -= 1
        p.emit("}")
        p.emit("")
    return "\n".join(p.lines).rstrip("\n") + "\n"
