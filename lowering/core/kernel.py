"""Lowering of one kernel to a pyptx module (the core's entry point).

The module holds, besides the kernel function, what a launcher needs:
`PARAMS` (kernel parameters in order: tensor maps and symbolic
dimensions), `TENSORS` (the function's tensors with their dtypes and
shapes), `grid(**dims)`, `THREADS` and `SMEM_BYTES`. The runtime
(choreo_py/runtime) reads these; nothing else about the kernel is needed
at launch.
"""
from __future__ import annotations

from .names import dim_param, ptr_param

from choreo_py import ir
from choreo_py.diagnostics import ChoreoError
from choreo_py.sema.limits import entry_registers

from . import (analysis, control, epilogue, events, f32x2, fragments, global_reads, params,
               roles, simt)
from .context import Lowering
from .grid import dim_params
from .grid import py_expr as _py_expr
from .memory import SMEM_ALIGN, Memory
from .target_base import Target
from .writer import Writer, module_safe, ptx_entry_name
from choreo_py.construct_names import describe

_SPECIAL = ("%ctaid.x", "%ctaid.y", "%ctaid.z")


def lower_module(module: ir.Module, target: Target, source_name: str) -> str:
    """The pyptx module text of the file's one kernel, for `target`."""
    arch = target.arch
    found = [(f, k) for f in module.functions for k in f.kernels]
    if not found:
        raise ChoreoError("no kernel to compile (no `parallel ... : block` in a __co__ "
                          "function)")
    if all(simt.is_thread_kernel(k) for _, k in found):
        return simt.lower_thread_module(module, target, source_name)
    if len(found) > 1:  # (program.py lowers these: several kernels, MMA ones among them)
        raise ChoreoError(f"a file with several kernels is not lowered for {arch} yet",
                          found[1][1].loc)
    fn, kernel = found[0]
    for s in fn.body:
        if not isinstance(s, (ir.Launch, ir.Assert)):
            raise ChoreoError(f"host code other than launching the kernel is not lowered for "
                              f"{arch} yet", getattr(s, "loc", fn.loc))
    return lower_kernel(kernel, fn, target, source_name)


def lower_kernel(k: ir.Kernel, fn: ir.Function, target: Target, source_name: str) -> str:
    lw, body = lower_kernel_body(k, target)
    return _module(lw, fn, body, source_name)


def lower_kernel_body(k: ir.Kernel, target: Target) -> tuple[Lowering, str]:
    """(the lowering state, the kernel function's body text) of one MMA kernel."""
    k = target.prepare(k)
    w = Writer()
    lw = Lowering(k, target, w)
    lw.facts = analysis.analyse(k, target.record)
    target.start(lw)
    if len(k.grid) > 3:
        raise lw.refuse("a block grid of more than 3 dimensions", k.loc)
    if k.run_buffers:  # their places are thread-kernel code's (threads.Places) only
        b = k.run_buffers[0]
        raise lw.refuse(f"the shared buffer '{b.name}', whose shape is only known at run time, "
                        "in a kernel of MMAs, events or roles", b.loc)
    lw.enter_region()
    _prologue(lw)
    lw.memory = Memory(lw)
    prefetch = w.mark()
    target.before_events(lw)
    events.init_events(lw)  # ends with a block barrier
    target.after_events(lw)
    events.plain_phases(lw, k.body)
    events.sync_load_phases(lw)
    _region(lw, k.body, top=True)
    lw.leave_region()
    with w.into(prefetch):
        _prefetch_tensor_maps(lw)
    _register_budget(lw)
    return lw, w.text()


#: Registers ptxas needs beyond an instruction's own register operands (its address, the
#: values live across it): measured for a tcgen05.st of 64 registers in gemm_block_p.co
#: with six and with seven warpgroups: ptxas asks for "a register target of 82" (80 and
#: 72 each thread had); five warpgroups (96 each) assemble.
_REG_RESERVE = 18


def _register_budget(lw: Lowering) -> None:
    """An instruction whose register operands cannot all be held in what each thread gets
    at launch (65,536 registers shared by the block's threads, launch_bounds blocks per
    SM) fails in ptxas ("Insufficient registers"): refused here, at its statement."""
    regs, opcode, loc = lw.w.widest
    threads = _threads(lw.k)
    lb = lw.k.launch_bounds
    blocks = (lb[1] if lb and len(lb) > 1 and lb[1] else 1)
    entry = entry_registers(threads, blocks)
    if regs + _REG_RESERVE > entry:
        raise ChoreoError(f"{opcode} takes {regs} registers at once, but each of the block's "
                          f"{threads} threads gets {entry} ({blocks} block(s) per SM share "
                          f"65,536): fewer threads or warpgroups, or a narrower tile",
                          loc or lw.k.loc)


def _prefetch_tensor_maps(lw: Lowering) -> None:
    """Thread 0 pulls every tensor map into the descriptor cache while the block starts up."""
    w = lw.w
    if not lw.memory.maps:
        return
    w.comment("tensor maps: prefetched once per block, ahead of the first copy")
    first = w.reg("pred", "prefetcher")
    w.op("setp.eq.u32", first, lw.tid, 0)
    for m in lw.memory.maps:
        sym = w.reg("u64", f"{m.name}_pf")
        w.op("mov.b64", sym, f'"{m.name}"')
        w.op("cvta.param.u64", sym, sym)
        w.op("prefetch.tensormap", f"ptx.addr({sym.text})", pred=first)


def _prologue(lw: Lowering) -> None:
    w, k = lw.w, lw.k
    w.source(k.loc, f"kernel {k.name}")
    lw.next_statement()
    if k.aliases:
        raise lw.refuse("'span_as' (a reshaped view) in an MMA kernel", k.aliases[0].loc)
    if k.cooperative:  # (thread kernels have the grid barrier: lowering/core/grid_sync.py)
        raise lw.refuse("a cooperative launch (': block<cooperative>') of an MMA kernel", k.loc)
    params.bind_dims(lw)  # dimensions, then scalar arguments
    lw.prologue_mark = w.mark()  # pointers of tensors read by element (global_reads.py)
    lw.element_reader = global_reads.load
    for g, special in zip(k.grid, _SPECIAL):
        r = w.reg("u32", g.var)
        w.op("mov.u32", r, f"ptx.sreg(\"{special}\")")
        lw.bind(g.var, r, nonneg=True, uniform=True)
    lw.tid = w.reg("u32", "tid")
    w.op("mov.u32", lw.tid, 'ptx.sreg("%tid.x")')
    w.comment(f"dynamic shared memory, base rounded up to {SMEM_ALIGN} B")
    raw = w.reg("u32", "smem_raw")
    w.op("mov.u32", raw, '"smem"')
    lw.smem_base = w.reg("u32", "smem_base")
    w.op("add.u32", lw.smem_base, raw, SMEM_ALIGN - 1)
    w.op("and.b32", lw.smem_base, lw.smem_base, -SMEM_ALIGN)


def _region(lw: Lowering, stmts: list, top: bool = False) -> None:
    """A straight-line list run by the same threads; marks let invariants be hoisted."""
    lw.enter_region() if not top else None
    for i, s in enumerate(stmts):
        lw.next_statement()
        _stmt(lw, s, stmts, i)
    lw.leave_region() if not top else None


def _block(lw: Lowering, stmts: list) -> None:
    """A nested block (loop or branch body): same region, deeper."""
    lw.target.block_boundary(lw)
    i = 0
    while i < len(stmts):
        i = _stmt(lw, stmts[i], stmts, i)


def _stmt(lw: Lowering, s: ir.Stmt, stmts: list, i: int) -> int:
    """Lowers stmts[i] (and, for leader-only runs, the ones after it); returns the next index."""
    if getattr(s, "leader_only", False):
        j = i
        while j < len(stmts) and getattr(stmts[j], "leader_only", False):
            j += 1
        if lw.role is None:
            raise lw.refuse("a leader-only statement outside a role", s.loc)
        rest = stmts[j:]
        group: list = []
        for t in stmts[i:j]:  # (a row-bounded store: all the role's threads, roles.py)
            if roles.role_wide(lw, t):
                if group:
                    roles.leader_block(lw, group, lambda u: _one(lw, u, last=False))
                    group = []
                lw.w.source(t.loc)
                roles.role_wide_store(lw, t, last=not rest and t is stmts[j - 1])
            else:
                group.append(t)
        if group:
            roles.leader_block(lw, group, lambda t: _one(lw, t, last=not rest))
        return j
    _one(lw, s, last=i == len(stmts) - 1)
    return i + 1


def _one(lw: Lowering, s: ir.Stmt, last: bool) -> None:
    w = lw.w
    lw.stmt_memo = {}
    if not isinstance(s, (ir.Parallel, ir.Role, ir.ViewDef)):
        w.source(s.loc)
    refused = lw.target.record.refuses.get(type(s).__name__)
    if refused is not None:  # what the target's record says its backend does not lower
        raise lw.refuse(refused, getattr(s, "loc", None))
    handler = lw.target.handlers.get(type(s)) or _HANDLERS.get(type(s))
    if handler is None:
        raise lw.refuse(_NAMES.get(type(s)) or describe(s), getattr(s, "loc", None))
    lw.target.before_stmt(lw, s)
    handler(lw, s, last)
    lw.target.after_stmt(lw, s)
    # The rest of an enclosing statement (a loop's latch) follows this one's branches:
    # nothing computed in it is reused there.
    lw.stmt_memo = {}


def _parallel(lw: Lowering, s: ir.Parallel, last: bool) -> None:
    roles.parallel(lw, s, lambda body: _role_region(lw, body), last)


def _role_region(lw: Lowering, body: list) -> None:
    """The statements one instance of a parallel region runs (its roles included)."""
    lw.target.enter_role(lw)
    lw.enter_region()
    for i, s in enumerate(body):
        lw.next_statement()
        _stmt(lw, s, body, i)
    lw.target.leave_role(lw)  # still in the region: its registers are live
    lw.leave_region()


def _nested_role(lw: Lowering, s: ir.Role, last: bool) -> None:
    """A role nested in a role of single threads (sema/role_forms.py): a branch its
    members take."""
    if lw.role is None:
        raise lw.refuse(_NAMES[ir.Role], s.loc)
    w = lw.w
    w.source(s.loc)
    control.if_(lw, ir.If(s.cond, s.body, [], loc=s.loc), lambda b: _block(lw, b))


def _mma(lw: Lowering, s: ir.Mma) -> None:
    # An MMA reads shared memory through the async proxy: tiles this instance's threads
    # wrote (mma.store) are fenced into it, and every thread's writes are done, first.
    lw.instance_sync_if_dirty()
    lw.target.issue(lw, s, id(s) in lw.facts.zero_first)


# Statements with no handler at this level (targets.Target.refuses lists what a
# target refuses everywhere; a role is lowered by the parallel region holding it).
_NAMES = {ir.Role: "inthreads.async outside a parallel region",
          ir.ElemStore: "a fragment element store outside an apply",
          ir.Assert: "an assert inside a kernel (asserts are checked at the function's entry)",
          ir.Print: "println in an MMA kernel", ir.Asm: "inline asm in an MMA kernel"}

_HANDLERS = {
    ir.Let: lambda lw, s, last: control.let(lw, s),
    ir.Var: lambda lw, s, last: control.var(lw, s),
    ir.Assign: lambda lw, s, last: control.assign(lw, s),
    ir.ViewDef: lambda lw, s, last: None,
    ir.For: lambda lw, s, last: control.for_(lw, s, lambda b: _block(lw, b)),
    ir.While: lambda lw, s, last: control.while_(lw, s, lambda b: _block(lw, b)),
    ir.If: lambda lw, s, last: control.if_(lw, s, lambda b: _block(lw, b)),
    ir.Break: lambda lw, s, last: control.break_(lw, s),
    ir.Continue: lambda lw, s, last: control.continue_(lw, s),
    ir.Parallel: _parallel,
    ir.Role: _nested_role,
    ir.SetMaxRegs: lambda lw, s, last: roles.setmaxnreg(lw, s),
    ir.RoleSync: lambda lw, s, last: roles.role_sync(lw, s),
    ir.NamedBarrier: lambda lw, s, last: roles.named_barrier(lw, s),
    ir.TmaLoad: lambda lw, s, last: roles.tma_load(lw, s),
    ir.TmaStore: lambda lw, s, last: roles.tma_store(lw, s, last),
    ir.Wait: lambda lw, s, last: events.wait(lw, s),
    ir.Trigger: lambda lw, s, last: events.trigger(lw, s),
    ir.FragDecl: lambda lw, s, last: fragments.declare(lw, s),
    ir.MmaFill: lambda lw, s, last: fragments.fill(lw, s),
    ir.Mma: lambda lw, s, last: _mma(lw, s),
    ir.SparseMma: lambda lw, s, last: _mma(lw, s),
    ir.MmaStore: lambda lw, s, last: epilogue.mma_store(lw, s),
    ir.MmaLoad: lambda lw, s, last: epilogue.mma_load(lw, s),
    ir.Apply: lambda lw, s, last: fragments.apply(lw, s),
    ir.Reduce: lambda lw, s, last: fragments.reduce(lw, s),
    ir.AllReduce: lambda lw, s, last: fragments.all_reduce(lw, s),
    ir.FragCopy: lambda lw, s, last: fragments.copy(lw, s),
}


# ---------------------------------------------------------------- module text

def _threads(k: ir.Kernel) -> int:
    """The block's threads: its widest parallel region's (one at the top, or several that
    join, in loops and branches too)."""
    par = [s for s in ir.walk(k.body) if isinstance(s, ir.Parallel)]
    return max((p.extent * (p.threads or 1) for p in par), default=1)


#: C operators on sizes (non-negative: `/` and `%` agree with Python's) -> Python.
_PY_OPS = {"+": "+", "-": "-", "*": "*", "/": "//", "%": "%", "==": "==", "!=": "!=",
           "<": "<", "<=": "<=", ">": ">", ">=": ">=", "&&": "and", "||": "or"}


def _assertions(fn: ir.Function, dims: list[str], source_name: str) -> list[str]:
    """`failed_assertions(dims)`, only for a function with entry assertions: the launcher
    refuses sizes the program says it cannot handle, instead of computing garbage."""
    asserts = [s for s in fn.body if isinstance(s, ir.Assert)]
    if not asserts:
        return []
    params, sym = dim_params(dims)
    out = [f"def failed_assertions({params}):",
           '    """The assert(...)s of the source these sizes break: (message, where)."""',
           "    out = []"]
    for s in asserts:
        try:
            cond = _py_expr(s.cond, sym)
        except ChoreoError:
            raise ChoreoError("an assert whose condition the launcher cannot compute", s.loc)
        out += [f"    if not {cond}:",
                f"        out.append(({s.message!r}, "
                f"'{source_name}" + (f":{s.loc.line}:{s.loc.col}" if s.loc else "") + "'))"]
    return out + ["    return out", "", ""]


def _py_expr(e: ir.Expr, sym=str) -> str:
    """Host-side Python for a grid extent (dims are keyword arguments)."""
    if isinstance(e, ir.Const):
        return str(e.value)
    if isinstance(e, ir.Sym):
        return sym(e.name)
    if isinstance(e, ir.Bin) and e.op in _PY_OPS:
        return f"({_py_expr(e.lhs, sym)} {_PY_OPS[e.op]} {_py_expr(e.rhs, sym)})"
    if isinstance(e, ir.Un) and e.op in ("!", "-"):
        return f"({'not ' if e.op == '!' else '-'}{_py_expr(e.operand, sym)})"
    if isinstance(e, ir.Call) and e.fn == "to" and not ir.is_float(e.dtype):
        return f"int({_py_expr(e.args[0], sym)})"
    if isinstance(e, ir.Call) and e.fn == "cdiv":
        a, b = (_py_expr(x, sym) for x in e.args)
        return f"(-(-{a} // {b}))"
    if isinstance(e, ir.Call) and e.fn in ("min", "max"):
        return f"{e.fn}({', '.join(_py_expr(x, sym) for x in e.args)})"
    raise ChoreoError("a grid extent that the launcher cannot compute")


def launch_facts(lw: Lowering, fn: ir.Function) -> dict:
    """What a launcher needs of a lowered MMA kernel (its module, or its entry in a module of
    several kernels: program.py)."""
    k = lw.k
    dims = k.symbolic_dims
    params = [("tmap", m.name, m.tensor, m.dtype, m.box, m.swizzle) for m in lw.memory.maps]
    params += [("dim", dim_param(d), d) for d in dims]
    pointers = global_reads.params(lw)
    params += [("ptr", ptr_param(t), t) for t in pointers]
    grid_params, sym = dim_params(dims)
    lb = k.launch_bounds
    threads = _threads(k)
    directives = [("maxntid", (threads, 1, 1))]
    blocks = lw.target.min_blocks_per_sm(lb)
    if blocks is not None:
        directives.append(("minnctapersm", (blocks,)))
    if blocks is not None and f32x2.capped(k.name):  # pairs spilled at the cap, not below
        directives.append(("maxnreg", (entry_registers(threads, blocks) - f32x2.CAP_STEP,)))
    return {
        "threads": threads,
        "smem": (k.smem_total or 0) + SMEM_ALIGN,
        "dims": dims,
        "params": params,
        "raw": [("b8.align64.array128", m.name) for m in lw.memory.maps]
        + [("u32", dim_param(d)) for d in dims] + [("u64", ptr_param(t)) for t in pointers],
        "tensors": [(p.name, p.dtype, tuple(x.value if isinstance(x, ir.Const) else x.name
                                            for x in p.shape)) for p in fn.params],
        "grid_params": grid_params,
        "grid": [_py_expr(g.extent, sym) for g in k.grid] + ["1"] * (3 - len(k.grid)),
        "types": {"u32", "s32", "u64", "pred", "b32", "b64", "f32"} | lw.w.types_used,
        "py_name": module_safe(k.name),  # `def grid():` would replace the launcher's grid()
        "directives": directives,
    }


def _module(lw: Lowering, fn: ir.Function, body: str, source_name: str) -> str:
    k = lw.k
    f = launch_facts(lw, fn)
    threads, smem, dims, params, raw, tensors = (f["threads"], f["smem"], f["dims"],
                                                 f["params"], f["raw"], f["tensors"])
    grid_params, grid, py_name, directives = (f["grid_params"], f["grid"], f["py_name"],
                                              f["directives"])
    types = sorted(f["types"])
    out = [
        f'"""Kernel `{k.name}` of {source_name}, compiled by choreo-py for {lw.target.arch}.',
        "",
        "Each ptx.* call emits one PTX instruction (ptx.mbarrier.wait: its try_wait",
        "spin loop); a comment names the Choreo statement each block comes from.",
        "The launcher reads PARAMS, TENSORS, grid(), THREADS and SMEM_BYTES.",
        '"""',
        "from pyptx import kernel, ptx, reg",
        f"from pyptx.types import {', '.join(types)}",
        "",
        f'ARCH = "{lw.target.arch}"',
        f'ENTRY = "{ptx_entry_name(k.name)}"',
        f"THREADS = {threads}",
        f"SMEM_BYTES = {smem}  # shared-memory plan ({k.smem_total or 0} B) + {SMEM_ALIGN} B "
        "to align the base",
        "# kernel parameters, in order: (\"tmap\", param, tensor, dtype, box innermost first, "
        "swizzle bytes) | (\"dim\", param, name)"
        + (" | (\"ptr\", param, tensor)" if any(p[0] == "ptr" for p in params) else ""),
        f"PARAMS = {tuple(params)!r}",
        f"TENSORS = {tuple(tensors)!r}",
        "",
        "",
        f"def grid({grid_params}):",
        f"    return ({', '.join(grid)})",
        "",
        "",
        *_assertions(fn, dims, source_name),
        f"def {py_name}():",
        body,
        "",
        "",
        f"{py_name}.__name__ = ENTRY",
        "KERNEL = kernel(",
        "    arch=ARCH,",
        f"    raw_params={raw!r},",
        '    extern_smem="smem",',
        "    block=(THREADS, 1, 1),",
        "    # a register cap at entry (launch_bounds(_, 1)) is what lets setmaxnreg take effect",
        f"    raw_directives={directives!r},",
        f")({py_name})",
        "",
    ]
    return "\n".join(out)
