"""Reading the IR printer's text back into IR (the inverse of ir.printer).

`parse_module(text)` returns the `ir.Module` whose printed form is `text`,
so passes and backends can be tested from IR text, and the golden IR files
are checked to round-trip. What the text does not spell out is derived as
sema derives it (ir/parse_exprs.py types the expressions). Source locations
are not part of the text: the parsed IR has none.

Statements are read by a table keyed by their leading word (`_STATEMENTS`),
as the printer writes them by a table of node kinds; expressions, views and
the names in scope are read by ir/parse_exprs.py.
"""
from __future__ import annotations

import ast
import re
from typing import Callable, Optional

from choreo_py import ir
from .parse_exprs import Exprs, IRParseError, Scope

# ---------------------------------------------------------------- statements


class _Lines:
    def __init__(self, text: str) -> None:
        self.lines = [(n, line.strip()) for n, line in enumerate(text.splitlines(), 1)]
        self.i = 0

    def peek(self) -> Optional[str]:
        while self.i < len(self.lines) and not self.lines[self.i][1]:
            self.i += 1
        return self.lines[self.i][1] if self.i < len(self.lines) else None

    def take(self) -> str:
        line = self.peek()
        if line is None:
            raise IRParseError("unexpected end of the text")
        self.i += 1
        return line

    @property
    def number(self) -> int:
        return self.lines[min(self.i, len(self.lines) - 1)][0] if self.lines else 0


class _Parser:
    def __init__(self, text: str) -> None:
        self.lines = _Lines(text)
        self.scope = Scope(None, [])
        self.kernels: dict[str, ir.Kernel] = {}

    def exprs(self, text: str) -> Exprs:
        return Exprs(text, self.scope)

    # -- module
    def module(self) -> ir.Module:
        functions: list[ir.Function] = []
        pending: list[ir.Kernel] = []
        while self.lines.peek() is not None:
            head = self.lines.peek()
            try:
                if head.startswith("kernel "):
                    pending.append(self.kernel())
                elif head.startswith("func "):
                    functions.append(self.function(pending))
                    pending = []
                else:
                    raise IRParseError(f"expected 'kernel' or 'func', found '{head}'")
            except IRParseError as e:
                raise IRParseError(f"line {self.lines.number}: {e}") from None
        return ir.Module(functions)

    def header(self, line: str, word: str) -> tuple[str, list[ir.Param]]:
        m = re.fullmatch(rf"{word} (\w+)\((.*?)\)(?: -> \w+| -> nothing \(declared [^)]*\))? \{{",
                         line)
        if m is None:
            raise IRParseError(f"not a {word} header: '{line}'")
        params = []
        for item in _split_top(m.group(2)):
            pm = re.fullmatch(r"(\w+): (\w+) (\w+)\[(.*)\]", item.strip())
            if pm is None:
                raise IRParseError(f"not a parameter: '{item}'")
            self.scope = Scope(None, [])
            shape = tuple(self.exprs(d).expr() for d in _split_top(pm.group(4)))
            params.append(ir.Param(pm.group(1), pm.group(3), shape, pm.group(2)))
        return m.group(1), params

    def function(self, kernels: list[ir.Kernel]) -> ir.Function:
        head = self.lines.take()
        name, params = self.header(head, "func")
        result = re.search(r"\) -> (\w+) \{$", head)
        missing = re.search(r"\) -> nothing \(declared ([^)]*)\) \{$", head)  # (no `return`)
        arg_names = [p.name for p in params]
        locals_: list[ir.Param] = []
        while (self.lines.peek() or "").startswith(("host ", "args ")):
            line = self.lines.take()
            if line.startswith("args "):
                arg_names = [a.strip() for a in line[5:].split(",")]
                continue
            decl, _, init = line[5:].partition(" = ")
            _, found = self.header(f"func _({decl}) {{", "func")
            if init:
                self.scope = Scope(None, [])
                found[0].init = self.exprs(init).expr()
            locals_ += found
        self.scope = Scope(None, params + locals_)
        body = self.block()
        return ir.Function(name, params, kernels, body, locals=locals_,
                           result=result.group(1) if result else None, arg_names=arg_names,
                           missing_return=missing.group(1) if missing else None)

    def kernel(self) -> ir.Kernel:
        name, params = self.header(self.lines.take(), "kernel")
        k = ir.Kernel(name, params, [])
        self.scope = Scope(k, params)
        while True:
            line = self.lines.peek()
            word = line.split(" ", 1)[0]
            if word not in _DECLS:
                break
            _DECLS[word](self, k, self.lines.take())
        k.body = self.block()
        return k

    # -- kernel declarations
    def decl_grid(self, k: ir.Kernel, line: str) -> None:
        for item in re.split(r", (?=\w+ < )", line[len("grid "):]):
            var, _, extent = item.strip().partition(" < ")
            k.grid.append(ir.GridDim(var, self.exprs(extent).expr()))
            self.scope.syms[var] = "s32"

    def decl_scalars(self, k: ir.Kernel, line: str) -> None:
        for item in line[len("scalars "):].split(", "):
            name, _, dtype = item.partition(": ")
            k.scalars.append(ir.Sym(name, dtype))
            self.scope.syms[name] = dtype

    def decl_writes_back(self, k: ir.Kernel, line: str) -> None:
        for item in line[len("writes_back "):].split(", "):
            host, _, copy = item.partition(" = ")
            k.writes_back.append((host, copy))

    def decl_alias(self, k: ir.Kernel, line: str) -> None:
        m = re.fullmatch(r"alias (\w+) = (\w+)\[([\d, ]+)\]", line)
        k.aliases.append(ir.Alias(m.group(1), m.group(2),
                                  tuple(int(x) for x in m.group(3).split(","))))

    def decl_run_buffer(self, k: ir.Kernel, line: str) -> None:
        m = re.fullmatch(r"shared_run (\w+): (\w+)\[(.*)\]", line)
        if m is None:
            raise IRParseError(f"not a run-time-sized shared buffer: '{line}'")
        dims = tuple(self.exprs(d).expr() for d in _split_top(m.group(3)))
        k.run_buffers.append(ir.RunBuffer(m.group(1), m.group(2), dims))

    def decl_bounds(self, k: ir.Kernel, line: str) -> None:
        k.launch_bounds = tuple(None if x.strip() == "_" else int(x)
                                for x in line[len("launch_bounds "):].split(","))

    def decl_cooperative(self, k: ir.Kernel, line: str) -> None:
        k.cooperative = True

    def decl_device(self, k: ir.Kernel, line: str) -> None:
        k.device = line.split()[1]

    def decl_smem(self, k: ir.Kernel, line: str) -> None:
        k.smem_total = int(line.split()[1])

    def decl_tmem_slot(self, k: ir.Kernel, line: str) -> None:
        k.tmem_slot = int(line.split()[1])

    def decl_tmem_alloc(self, k: ir.Kernel, line: str) -> None:
        m = re.fullmatch(r"tmem_alloc (\d+) used=(\d+) role=(none|\{[\d, ]*\})", line)
        if m is None:
            raise IRParseError(f"not a tensor-memory allocation: '{line}'")
        role = None if m.group(3) == "none" else tuple(
            int(x) for x in m.group(3)[1:-1].split(",") if x.strip())
        k.tmem = ir.TmemMap(role, int(m.group(1)), int(m.group(2)))

    def decl_tmem(self, k: ir.Kernel, line: str) -> None:
        staged = re.fullmatch(r"tmem (\w+): staged \((.*)\)", line)
        m = re.fullmatch(r"tmem (\w+)\[(\d+)\]: (acc|operand) layout=([DF]) "
                         r"lanes=(32q\+)?(\d+)\+:(\d+) cols=(\d+)\+:(\d+)(?: in=(\w+))?", line)
        if k.tmem is None or (m is None and staged is None):
            raise IRParseError(f"not a tensor-memory region after 'tmem_alloc': '{line}'")
        if staged is not None:
            k.tmem.staged[staged.group(1)] = staged.group(2)
            return
        frag, inst, kind, layout, per_quarter, lane, count, col, ncols, host = m.groups()
        if (per_quarter, count) != (("32q+", "16") if layout == "F" else (None, "128")):
            raise IRParseError(f"layout {layout} with lanes '{line.split('lanes=')[1]}'")
        k.tmem.regions.append(ir.TmemRegion(frag, int(inst), kind, layout, int(lane), int(col),
                                            int(ncols), host))

    def decl_tmem_refused(self, k: ir.Kernel, line: str) -> None:
        k.tmem = ir.TmemMap(None, refused=line[len("tmem_refused "):])

    def decl_buffer(self, k: ir.Kernel, line: str) -> None:
        m = re.fullmatch(r"(shared|local) (\w+)(?:\[(\d+)\])?: (\w+)\[([\d, ]*)\]"
                         r"(?: swizzle=(\d+))?( layout-free)?(?: offset=(\d+))?(?: = (.*))?", line)
        if m is None:
            raise IRParseError(f"not a buffer declaration: '{line}'")
        storage, name, count, dtype, shape, swz, free, off, init = m.groups()
        b = ir.Buffer(name, storage, dtype, tuple(int(d) for d in shape.split(",")),
                      int(count) if count else None, int(swz) if swz else None,
                      offset=int(off) if off else None, free_swizzle=bool(free))
        if init is not None:
            b.init = self.exprs(init).expr()
        k.buffers.append(b)

    def decl_event(self, k: ir.Kernel, line: str) -> None:
        m = re.fullmatch(r"event ([\w.]+)(?:\[(\d+)\])? (ready|pending)(?: storage=(\w+))?"
                         r"(?: arrivals=(\d+))?(?: offset=(\d+))?", line)
        if m is None:
            raise IRParseError(f"not an event declaration: '{line}'")
        name, slots, state, storage, arrivals, off = m.groups()
        k.events.append(ir.Event(name, int(slots) if slots else None, state == "ready",
                                 storage or "shared", offset=int(off) if off else None,
                                 arrivals=int(arrivals) if arrivals else None))

    # -- statements
    def block(self) -> list[ir.Stmt]:
        body: list[ir.Stmt] = []
        while True:
            line = self.lines.take()
            if line == "}":
                return body
            body.append(self.statement(line, body))

    def statement(self, line: str, body: list[ir.Stmt]) -> ir.Stmt:
        word = re.match(r"[\w.]+", line)
        key = word.group(0) if word else line[:1]
        for prefix, handler in _STATEMENTS:
            if key == prefix or (prefix[-1] in "._" and key.startswith(prefix)):
                return handler(self, line, body)
        return self.assignment_like(line)

    def region(self, head: str) -> list[ir.Stmt]:
        if not head.endswith(" {"):
            raise IRParseError(f"expected a region '{{' after '{head}'")
        saved = dict(self.scope.syms)
        body = self.block()
        self.scope.syms = saved
        return body

    def s_let(self, line: str, body) -> ir.Stmt:
        name, _, value = line[4:].partition(" = ")
        e = self.exprs(value)
        v = e.expr()
        e.done()
        self.scope.syms[name] = v.dtype
        return ir.Let(name, v)

    def s_var(self, line: str, body) -> ir.Stmt:
        m = re.fullmatch(r"var (\w+): (\w+) = (.*)", line)
        e = self.exprs(m.group(3))
        v = ir.Var(m.group(1), m.group(2), e.expr())
        self.scope.syms[v.name] = v.dtype
        return v

    def s_view(self, line: str, body) -> ir.Stmt:
        name, _, text = line[5:].partition(" = ")
        v = self.exprs(text).view()
        self.scope.views[name] = self.scope.place_dtype(v.base)
        return ir.ViewDef(name, v)

    def s_for(self, line: str, body) -> ir.Stmt:
        m = re.fullmatch(r"for (\w+) in (.*?)\.\.(.*?)(?: step (.*))? \{", line)
        if m is None:
            raise IRParseError(f"not a for loop: '{line}'")
        start, stop = self.exprs(m.group(2)).expr(), self.exprs(m.group(3)).expr()
        step = self.exprs(m.group(4)).expr() if m.group(4) else ir.Const(1, "s32")
        self.scope.syms[m.group(1)] = "s32"
        return ir.For(m.group(1), start, stop, self.region(line), step)

    def s_while(self, line: str, body) -> ir.Stmt:
        return ir.While(self.exprs(line[6:-2]).expr(), self.region(line))

    def s_if(self, line: str, body) -> ir.Stmt:
        s = ir.If(self.exprs(line[3:-2]).expr(), self.region(line))
        if self.lines.peek() == "else {":
            s.orelse = self.region(self.lines.take())
        return s

    def s_parallel(self, line: str, body) -> ir.Stmt:
        m = re.fullmatch(r"parallel (\w+) < (\d+) : ([\w-]+) \((\d+) threads each\) \{", line)
        if m is None:
            raise IRParseError(f"not a parallel region: '{line}'")
        self.scope.syms[m.group(1)] = "s32"
        return ir.Parallel(m.group(1), int(m.group(2)), m.group(3), int(m.group(4)),
                           self.region(line))

    def s_role(self, line: str, body) -> ir.Stmt:
        if line == "role.sync":
            return ir.RoleSync()
        m = re.fullmatch(r"(role|role\.sync) \((.*)\) = \{([\d, ]*)\}(?: maxregs=(\d+))? \{", line)
        if m is None:
            raise IRParseError(f"not a role: '{line}'")
        members = tuple(int(x) for x in m.group(3).split(",") if x.strip())
        return ir.Role(m.group(2), self.exprs(m.group(2)).expr(), members, self.region(line),
                       is_async=m.group(1) == "role",
                       max_regs=int(m.group(4)) if m.group(4) else None)

    def s_simple(self, line: str, body) -> ir.Stmt:
        return {"break": ir.Break, "continue": ir.Continue, "sync.shared": ir.SyncShared,
                "sync.warp": ir.SyncWarp, "sync.grid": ir.GridSync, "yield": ir.Yield}[line]()

    def s_fence(self, line: str, body) -> ir.Stmt:
        return ir.Fence(line[len("fence."):])

    def s_bar(self, line: str, body) -> ir.Stmt:
        m = re.fullmatch(r"bar\.(sync|arrive) (.*), (\d+)", line)
        return ir.NamedBarrier(m.group(1), self.exprs(m.group(2)).expr(), int(m.group(3)))

    def s_launch(self, line: str, body) -> ir.Stmt:
        return ir.Launch(line.split()[1])

    def s_call(self, line: str, body) -> ir.Stmt:
        """`call f(a = &x, n = e) -> r[: dtype]`: ir.HostCall (`&x`: the caller's tensor)."""
        m = re.fullmatch(r"call (\w+)\((.*)\)(?: -> (\w+)(?:: (\w+))?)?", line)
        if m is None:
            raise IRParseError(f"not a call: '{line}'")
        tensors, scalars, values = [], [], []
        for item in _split_top(m.group(2)) if m.group(2) else []:
            name, eq, value = item.strip().partition(" = ")
            if not eq:
                raise IRParseError(f"not an argument 'name = value': '{item.strip()}'")
            if value.startswith("&"):
                tensors.append((name, value[1:]))
            else:
                e = self.exprs(value)
                scalars, values = scalars + [name], values + [e.expr()]
                e.done()
        if m.group(4):  # a scalar result: a host variable from here on
            self.scope.syms[m.group(3)] = m.group(4)
        return ir.HostCall(m.group(1), tuple(tensors), tuple(scalars), tuple(values),
                           m.group(3), m.group(4))

    def s_assert(self, line: str, body) -> ir.Stmt:
        m = re.fullmatch(r"assert (.*), ('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")", line)
        return ir.Assert(self.exprs(m.group(1)).expr(), ast.literal_eval(m.group(2)))

    def s_print(self, line: str, body) -> ir.Stmt:
        c_format = line.startswith("printf ")
        items, rest = [], line[len("printf " if c_format else "print "):]
        while rest:
            m = re.match(r"('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")(, |$)", rest)
            if m:  # a text item (quoted as Python writes it: it may hold commas)
                items.append(ast.literal_eval(m.group(1)))
            else:
                m = re.match(r"(.*?)(, (?=['\"])|$)", rest)
                items += [self.exprs(x).expr() for x in _split_top(m.group(1))]
            rest = rest[m.end():]
        return ir.Print(items, c_format=c_format)

    def s_asm(self, line: str, body) -> ir.Stmt:
        m = re.match(r"asm(\.volatile)? ('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"); ", line)
        if m is None:
            raise IRParseError(f"not an asm statement: '{line}'")
        parts = line[m.end():].split("; ")
        if len(parts) != 3 or not parts[0].startswith("out") or not parts[1].startswith("in") \
                or not parts[2].startswith("clobber"):
            raise IRParseError(f"an asm statement needs 'out ...; in ...; clobber ...': '{line}'")
        outs, ins = (self._asm_operands(p.split(" ", 1)[1] if " " in p else "")
                     for p in parts[:2])
        clob = parts[2][len("clobber"):].strip()
        clobbers = [ast.literal_eval(c.strip()) for c in _split_top(clob)] if clob else []
        return ir.Asm(ast.literal_eval(m.group(2)), outs, ins, m.group(1) is not None, clobbers)

    def _asm_operands(self, text: str) -> list:
        out = []
        for item in (_split_top(text) if text.strip() else []):
            m = re.fullmatch(r"\s*(?:\[(\w+)\] )?('[^']*'|\"[^\"]*\") (.*)", item)
            if m is None:
                raise IRParseError(f"not an asm operand: '{item}'")
            out.append(ir.AsmOperand(ast.literal_eval(m.group(2)), self.exprs(m.group(3)).expr(),
                                     m.group(1)))
        return out

    def s_setmaxnreg(self, line: str, body) -> ir.Stmt:
        m = re.fullmatch(r"setmaxnreg\.(inc|dec) (\d+)", line)
        return ir.SetMaxRegs(int(m.group(2)), m.group(1) == "inc")

    def s_wait(self, line: str, body) -> ir.Stmt:
        items: list = []
        for item in _split_top(line[5:]):
            item = item.strip()
            if item.startswith("future "):
                items.append(ir.FutureRef(item[7:]))
            else:
                items.append(self.exprs(item).event_ref())
        return ir.Wait(items)

    def s_trigger(self, line: str, body) -> ir.Stmt:
        text, _, after = line[8:].partition(" after ")
        return ir.Trigger(self.exprs(text).event_ref(),
                          [a.strip() for a in after.split(",")] if after else [])

    def s_frag(self, line: str, body) -> ir.Stmt:
        m = re.fullmatch(r"frag (\w+): (\w+)\[([\d, ]*)\] layout=(\w+)( : block(?: in (\w+))?)?"
                         r"(?: = (.*))?", line)
        f = ir.Frag(m.group(1), m.group(2), tuple(int(d) for d in m.group(3).split(",") if d.strip()),
                    m.group(4), block=bool(m.group(5)), host=m.group(6))
        self.scope.k.frags.append(f)
        init = self.exprs(m.group(7)).expr() if m.group(7) else None
        return ir.FragDecl(f, init)

    def s_apply(self, line: str, body) -> ir.Stmt:
        m = re.fullmatch(r"apply \(([\w, ]*)\) in (\w+)\[([\d, ]*)\]( warp-vote)?"
                         r"(?: exp2-split=([\d.e+-]+))?(?: exp2-poly=k%16 in \{([\d, ]*)\})? \{",
                         line)
        indices = tuple(x.strip() for x in m.group(1).split(","))
        for i in indices:
            self.scope.syms[i] = "s32"
        poly = tuple(int(c) for c in m.group(6).split(",")) if m.group(6) else ()
        return ir.Apply(indices, tuple(int(d) for d in m.group(3).split(",")), m.group(2),
                        self.region(line), warp_vote=bool(m.group(4)),
                        exp2_fraction=float(m.group(5)) if m.group(5) else None, exp2_poly=poly)

    def s_all_reduce(self, line: str, body) -> ir.Stmt:
        m = re.fullmatch(r"all_reduce_(\w+)\((\w+)\)", line)
        return ir.AllReduce(m.group(1), m.group(2))

    def s_mma(self, line: str, body) -> ir.Stmt:
        if line.startswith("mma.fill "):
            acc, _, value = line[9:].partition(", ")
            return ir.MmaFill(acc, self.exprs(value).expr())
        if line.startswith(("mma.store ", "mma.store.transp ", "mma.store.direct ")):
            head, _, dst = line.partition(" => ")
            op, acc = head.split(" ", 1)
            return ir.MmaStore(acc, self.exprs(dst).view(), transposed=op.endswith(".transp"),
                               direct=op.endswith(".direct"))
        if line.startswith("mma.load "):
            src, _, frag = line[9:].partition(" => ")
            return ir.MmaLoad(frag, self.exprs(src).view())
        m = re.fullmatch(r"mma\.sync\.(\w+\.\w+) (\w+) \+= (\w+) \* (\w+)", line)
        if m:  # the warp form: both operands are fragments
            return ir.WarpMma(m.group(2), m.group(3), m.group(4), m.group(1))
        return self.mma(line, None)

    def mma(self, line: str, future: Optional[str]) -> ir.Stmt:
        m = re.fullmatch(r"mma\.([\w.]+?)(\.async)? (\w+) \+= (.*?)(?: sparse=(\w+))?"
                         r"(?: k_schedule=\[(.*?)\])?(?: commit=([\w.]+))?", line)
        if m is None:
            raise IRParseError(f"not an MMA: '{line}'")
        a_text, b_text = _split_product(m.group(4))
        a = self.exprs(a_text).view() if "<" in a_text else a_text
        sched = tuple(int(x) for x in m.group(6).split(",")) if m.group(6) else None
        b = self.exprs(b_text).view()
        if m.group(5):  # 2:4 sparse A, its metadata fragment
            return ir.SparseMma(m.group(3), a, b, m.group(1), future, sched,
                                completion=m.group(7), meta=m.group(5))
        return ir.Mma(m.group(3), a, b, m.group(1), future, sched, completion=m.group(7))

    def copy(self, line: str, future: Optional[str]) -> ir.Stmt:
        m = re.fullmatch(r"(tma\.load|tma\.store|dma\.copy)((?:\.\w+(?:<[^>]*>)?)*)( \[leader\])? "
                         r"(.*) => (.*)", line)
        if m is None:
            raise IRParseError(f"not a copy: '{line}'")
        kind, mods = m.group(1), re.findall(r"\.(\w+(?:<[^>]*>)?)", m.group(2))
        dst_text, rows = m.group(5), None
        if kind == "tma.store" and dst_text.endswith("]") and " [rows " in dst_text:
            dst_text, rows_text = dst_text[:-1].rsplit(" [rows ", 1)
            rows = self.exprs(rows_text).expr()
        src, dst = self.exprs(m.group(4)).view(), self.exprs(dst_text).view()
        leader = m.group(3) is not None
        swz = next((int(x[7:]) for x in mods if x.startswith("swizzle")), None)
        if kind == "tma.load":
            evict = next((x for x in mods if x not in ("async",) and not x.startswith("swizzle")),
                         None)
            return ir.TmaLoad(src, dst, future, evict, swz, leader_only=leader)
        if kind == "tma.store":
            return ir.TmaStore(src, dst, leader_only=leader, future=future, rows=rows)
        op = ir.DmaCopy(src, dst, future, swz, leader_only=leader)
        for x in mods:
            if x.startswith("transp<"):
                op.transpose = tuple(int(v) for v in x[7:-1].split(","))
            elif x.startswith("pad<"):
                low, high, value = x[4:-1].split(";")
                op.pad = (tuple(int(v) for v in low.split(",")),
                          tuple(int(v) for v in high.split(",")), self.exprs(value).expr())
        return op

    def assignment_like(self, line: str) -> ir.Stmt:
        m = re.fullmatch(r"(\w+) := (.*)", line)
        if m:
            return ir.Assign(m.group(1), self.exprs(m.group(2)).expr())
        m = re.fullmatch(r"(\w+) = (tma\.|dma\.|mma\.)(.*)", line)
        if m:
            rest = m.group(2) + m.group(3)
            return self.mma(rest, m.group(1)) if rest.startswith("mma.") else \
                self.copy(rest, m.group(1))
        m = re.fullmatch(r"(\w+) = reduce_(\w+)\((\w+), dim=(\d+)\)", line)
        if m:
            return ir.Reduce(m.group(2), m.group(1), m.group(3), int(m.group(4)))
        m = re.fullmatch(r"(\w+) = copy\((\w+)\)", line)
        if m:
            return ir.FragCopy(m.group(1), m.group(2))
        return self.element_store(line)

    def s_atomic(self, line: str, body) -> ir.Stmt:
        """`atomic_add view[i, j], value` (`atomic_cas view[i], compare, value`; `... into old`:
        the old value goes to the variable `old`)."""
        op, _, rest = line.partition(" ")
        e = self.exprs(rest)
        name = e.take()
        view = e.view_after(name)
        index = e.index()
        e.take(",")
        value, compare = e.expr(), None
        if e.accept(","):
            value, compare = e.expr(), value
        result = e.take() if e.accept("into") else None
        s = ir.BufStore(view, index, value, atomic=op[len("atomic_"):], compare=compare,
                        result=result)
        e.done()
        return s

    def element_store(self, line: str) -> ir.Stmt:
        e = self.exprs(line)
        name = e.take()
        if self.scope.frag(name) is not None and e.peek() == "[":
            index = e.index()
            e.take("=")
            s = ir.ElemStore(name, index, e.expr())
        elif e.peek() in ("<", "["):
            view = e.view_after(name)
            index = e.index()
            e.take("=")
            s = ir.BufStore(view, index, e.expr())
        else:
            raise IRParseError(f"not a statement: '{line}'")
        e.done()
        return s


def _copy_stmt(p: _Parser, line: str, body) -> ir.Stmt:
    return p.copy(line, None)


_DECLS: dict[str, Callable] = {
    "grid": _Parser.decl_grid, "scalars": _Parser.decl_scalars,
    "writes_back": _Parser.decl_writes_back, "alias": _Parser.decl_alias,
    "launch_bounds": _Parser.decl_bounds,
    "cooperative": _Parser.decl_cooperative,
    "device": _Parser.decl_device,
    "shared_memory": _Parser.decl_smem, "tmem_slot": _Parser.decl_tmem_slot,
    "tmem_alloc": _Parser.decl_tmem_alloc, "tmem": _Parser.decl_tmem,
    "tmem_refused": _Parser.decl_tmem_refused,
    "shared": _Parser.decl_buffer, "shared_run": _Parser.decl_run_buffer,
    "local": _Parser.decl_buffer, "event": _Parser.decl_event,
}

# (leading word, handler); a word ending in '.' matches every word it starts
_STATEMENTS: list[tuple[str, Callable]] = [
    ("let", _Parser.s_let), ("var", _Parser.s_var), ("view", _Parser.s_view),
    ("for", _Parser.s_for), ("while", _Parser.s_while), ("if", _Parser.s_if),
    ("parallel", _Parser.s_parallel), ("role", _Parser.s_role), ("role.", _Parser.s_role),
    ("break", _Parser.s_simple), ("yield", _Parser.s_simple), ("continue", _Parser.s_simple),
    ("sync.shared", _Parser.s_simple), ("sync.warp", _Parser.s_simple),
    ("sync.grid", _Parser.s_simple), ("fence.", _Parser.s_fence), ("bar.", _Parser.s_bar), ("launch", _Parser.s_launch),
    ("call", _Parser.s_call),
    ("assert", _Parser.s_assert), ("print", _Parser.s_print), ("printf", _Parser.s_print), ("asm", _Parser.s_asm),
    ("asm.", _Parser.s_asm),
    ("setmaxnreg.", _Parser.s_setmaxnreg), ("wait", _Parser.s_wait),
    ("trigger", _Parser.s_trigger), ("frag", _Parser.s_frag), ("apply", _Parser.s_apply),
    ("tma.", _copy_stmt), ("dma.", _copy_stmt), ("mma.", _Parser.s_mma),
    ("all_reduce_", _Parser.s_all_reduce), ("atomic_", _Parser.s_atomic),
]


def _split_product(text: str) -> tuple[str, str]:
    """`a * b` of an MMA, split at the ` * ` outside the operands' views."""
    depth = 0
    for i, c in enumerate(text):
        depth += {"<": 1, ">": -1}.get(c, 0)
        if depth == 0 and text.startswith(" * ", i):
            return text[:i], text[i + 3:]
    raise IRParseError(f"not an MMA product: '{text}'")


def _split_top(text: str) -> list[str]:
    """`text` split at the commas outside brackets."""
    out, depth, start = [], 0, 0
    for i, c in enumerate(text):
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == "," and depth == 0:
            out.append(text[start:i])
            start = i + 1
    if text[start:].strip():
        out.append(text[start:])
    return out


def parse_module(text: str) -> ir.Module:
    """The module whose printed form (ir.printer.print_module) is `text`."""
    return _Parser(text).module()
