"""Declarations and operations: buffers, events, DMA/TMA, waits and triggers, and
builtin statements (fragments, MMA and `apply`: frag_ops.py).

Shape rules checked here (each error points at the operand):
- a copy moves a tile into a destination of the same shape;
"""
from __future__ import annotations

import math

from ..frontend import ast as A
from .. import ir
from ..ir import build as B
from . import arrays
from .exprs import err
from .values import (BufferValue, EventValue, FutureValue, Scalar, ShapeNotYetKnown, ShapeValue,
                     Unsupported, ViewValue)
from .views import static_shape
from .host import ATOMIC_TYPES
from .frag_ops import FragOpBuilder, fmt_shape

SWIZZLES = (32, 64, 128)


def auto_swizzle(row_bytes: int) -> int | None:
    """The swizzle that fits a tile's rows: the widest pattern not wider than a row."""
    for s in (128, 64, 32):
        if row_bytes >= s:
            return s
    return None


class OpBuilder(FragOpBuilder):
    """Mixin of KernelBuilder."""

    # ------------------------------------------------------------ declarations
    def _need_block(self, s, what: str) -> None:
        if self.kernel is None:
            raise err(f"{what} must be declared inside a 'parallel' block", s)

    def _array_count(self, s) -> int | None:
        """The slots of an array declaration, the product of its dimensions (sema/arrays.py);
        the dimensions are kept by the name `_array_dims` gives."""
        if not s.array_dims:
            return None
        dims = []
        for d in s.array_dims:
            n = self.const_int(d, "an array size")
            if n <= 0:
                raise err(f"an array size must be positive, not {n}", d)
            dims.append(n)
        self._pending_array_dims = tuple(dims)
        return math.prod(dims)

    def _array_dims(self, name: str, count: int | None) -> None:
        """Records the dimensions `_array_count` read for the declaration named `name`."""
        dims = self.__dict__.pop("_pending_array_dims", None)
        if count and dims is not None and len(dims) > 1:
            self.array_dims[name] = dims

    def array_shape(self, name: str, count: int | None) -> tuple[int, ...]:
        return self.array_dims.get(name, (count or 1,))

    def s_BufferDecl(self, s: A.BufferDecl) -> None:
        storage = s.storage or "local"
        if storage == "global":
            raise Unsupported("a global buffer declared in a kernel", s.loc)
        self._need_block(s, f"a {storage} buffer")
        if s.type.dims is None:
            raise err(f"'{s.name}' needs a shape", s.type)
        from .host import check_dtype

        check_dtype(s.type.elem.name, s.type.loc)
        dims = self._buffer_dims(s, storage)
        if not all(isinstance(d, int) for d in dims):
            return self._run_buffer(s, dims)
        init = None
        if s.init is not None:
            init = self.scalar(s.init, s.type.elem.name)
            if not isinstance(init, ir.Const):
                raise err("a buffer initialiser must be a constant", s.init)
        buf = ir.Buffer(self._unique(s), storage, s.type.elem.name, tuple(dims),
                        self._array_count(s), init=init, loc=s.loc)
        self._array_dims(buf.name, buf.count)
        self.kernel.buffers.append(buf)
        self.scope.bind(s.name, BufferValue(buf, loc=s.loc))

    def _buffer_dims(self, s: A.BufferDecl, storage: str) -> list:
        """The dimensions of a buffer declaration: integers, or (a shared buffer) expressions
        of the kernel's dimensions where only the run time knows them."""
        dims: list = []
        for d in s.type.dims:
            v = self.value(d)
            ds = v.dims if isinstance(v, ShapeValue) else (v.expr,) if isinstance(v, Scalar) else None
            if ds is None:
                raise err("a buffer dimension must be an integer or a shape", d)
            for x in ds:
                n = B.as_int(x)
                if n is None and storage != "shared":
                    raise Unsupported(f"a {storage} buffer whose shape is only known at run time",
                                      d.loc)
                if n is not None and n <= 0:
                    raise err(f"the mdspan size \"{n}\" is invalid: dimensions must be positive", d)
                dims.append(x if n is None else n)
        return dims

    def _run_buffer(self, s: A.BufferDecl, dims: list) -> None:
        """`shared T [M] x;` with `M` a run-time value: a `RunBuffer` (ir), its shape kept as
        expressions; no array of them, no initialiser (nothing sizes or fills it statically)."""
        if s.array_dims or s.init is not None:
            what = "an array of" if s.array_dims else "an initialised"
            raise Unsupported(f"{what} shared buffer whose shape is only known at run time",
                              s.loc)
        shape = tuple(B.const(d) if isinstance(d, int) else d for d in dims)
        buf = ir.RunBuffer(self._unique(s), s.type.elem.name, shape, loc=s.loc)
        self.kernel.run_buffers.append(buf)
        self.scope.bind(s.name, BufferValue(buf, loc=s.loc))

    def _unique(self, s) -> str:
        """The kernel-wide name of a declaration (`name__2` where an inner scope shadows)."""
        local = self.scope.local(s.name)
        if local is not None:
            where = f" at {local.loc.line}:{local.loc.col}" if local.loc else ""
            raise err(f"'{s.name}' is already declared in this scope{where}", s)
        name, n = s.name, 1
        while self.kernel.buffer(name) or self.kernel.event(name) or self.kernel.frag(name) \
                or self.kernel.run_buffer(name):
            n += 1
            name = f"{s.name}__{n}"
        return name

    def s_EventDecl(self, s: A.EventDecl) -> None:
        self._need_block(s, "an event")
        if (s.storage or "shared") != "shared":
            raise Unsupported(f"'{s.storage}' events", s.loc)
        if s.thread_count is not None:
            raise Unsupported("events with an explicit thread count", s.loc)
        ev = ir.Event(self._unique(s), self._array_count(s), s.ready, loc=s.loc)
        self._array_dims(ev.name, ev.slots)
        self.kernel.events.append(ev)
        self.scope.bind(s.name, EventValue(ev, loc=s.loc))

    # ------------------------------------------------------------ data movement
    def s_DmaOp(self, s: A.DmaOp) -> None:
        if s.sparse or s.zfill or s.promote or s.after \
                or (s.operation in ("pad", "transp") and s.engine != "dma"):
            raise Unsupported(f"'{s.engine}.{s.operation}' with these modifiers", s.loc)
        if s.operation == "any":
            return self.placeholder(s)
        if s.dst is None:
            raise Unsupported("a copy without a destination", s.loc)
        src = self.view_of(s.src)
        if s.multicast:  # the load every block of the cluster makes (sema/clusters.py)
            self.multicast_source(s, src)
        transpose, pad, shape = self.copy_layout(s, src)
        dst = self.rotated_dst(s, src, shape)
        rotated = dst is not None
        if dst is None:
            dst = self._implicit_dst(s, src, shape) if isinstance(s.dst, A.StorageTarget) \
                else self.view_of(s.dst)
        if transpose or pad:
            self.check_layout_shape(s, shape, dst)
        else:
            self._check_copy_shapes(s, src, dst)
        swizzle = self._swizzle(s, dst)
        src_store, dst_store = self._storage(src.view), self._storage(dst.view)
        if s.is_async and s.future is None:
            raise err("an asynchronous copy needs a future: 'f = ...'", s)
        if s.engine == "tma":
            if src_store == "global" and dst_store == "shared":
                op = ir.TmaLoad(src.view, dst.view, s.future if s.is_async else None, s.evict,
                                swizzle, loc=s.loc)
            elif src_store == "shared" and dst_store == "global":
                op = ir.TmaStore(src.view, dst.view, loc=s.loc,
                                 future=s.future if s.is_async else None,
                                 rows=self._row_count(s))
            else:
                raise err(f"TMA copies between global and shared memory, not from {src_store} "
                          f"to {dst_store}", s)
        else:
            op = ir.DmaCopy(src.view, dst.view, s.future if s.is_async else None, swizzle, loc=s.loc,
                            transpose=transpose, pad=pad)
        if s.rows is not None and not isinstance(op, ir.TmaStore):
            raise err("'.rows<n>' bounds a store into global memory: "
                      "'tma.copy.rows<n> <shared tile> => <global tile>'", s.rows)
        if rotated:
            op.future = None  # complete before the next statement (sema/rotations.py)
        self._emit_collective(op, s)
        if s.future:
            kind = s.engine if s.engine != "tma" else ("tma" if src_store == "global" else "tma_store")
            fut = FutureValue(s.future, kind, dst.view, loc=s.loc, rotated=rotated)
            fut.done = getattr(op, "future", None) is None
            self.bind_future(fut)

    def _row_count(self, s: A.DmaOp):
        """The integer n of `tma.copy.rows<n>` (a store of the box's first n rows), or None."""
        if s.rows is None:
            return None
        if s.is_async:
            raise err("'.rows<n>' stores are synchronous: not with '.async'", s.rows)
        v = self.value(s.rows)
        if not isinstance(v, Scalar) or v.expr.dtype not in ir.INT_TYPES:
            raise err("the count of '.rows<n>' must be an integer", s.rows)
        return v.expr

    def _instances(self) -> int:
        """How many thread-group instances execute the current statement."""
        if self.role is not None:
            return len(self.role.members)
        return self.in_parallel.extent if self.in_parallel is not None else 1

    def _emit_collective(self, op, s) -> None:
        """A copy is one operation of the group that executes it, not one per instance.

        With several instances (two consumer warpgroups storing the tile they
        both wrote), they meet first, one issues the copy, and they meet again
        once it is complete.
        """
        if self._instances() == 1 or "local" in (self._storage(op.src), self._storage(op.dst)):
            # One instance, or a copy from or into a thread's own local buffer: each thread
            # issues its own.
            self.emit(op)
            return
        if isinstance(op, (ir.TmaStore, ir.DmaCopy)) and op.future:
            # Issued by one thread for the group: made synchronous, so that its
            # future is complete for every instance (a stronger order, never a weaker one).
            op.future = None
        elif isinstance(op, ir.TmaLoad) and op.future and self.in_parallel.threads == 1:
            # A role of single threads: one elected thread issues it (sema/role_forms.py).
            self.elected_copy(op, self._instance_varying(op), s)
            return
        elif getattr(op, "future", None):
            raise Unsupported("an asynchronous copy issued by a role of several thread groups",
                              s.loc)
        varying = self._instance_varying(op)
        if varying and isinstance(op, ir.TmaStore):
            # Each group stores its own tile (`output_s[wg - 1] => output...at(wg - 1)`):
            # one copy per group, issued by the group's first thread, as a copy of a role
            # of one group is.
            self.emit(op)
            return
        op.leader_only = True
        if varying:
            # Valid Choreo (the reference compiles such copies, one per group); the tile IR
            # issues a role's copy once, for all its groups.
            raise Unsupported(f"a copy issued once for all {self._instances()} thread groups "
                              f"whose tile depends on '{varying}', which differs between them",
                              s.loc)
        self.emit(ir.RoleSync(loc=s.loc))
        self.emit(op)
        # A synchronous copy is complete for every instance when it returns: a load's
        # data is there, and a store has finished reading the buffer that the
        # instances may overwrite next (in a loop over tiles, say).
        self.emit(ir.RoleSync(loc=s.loc))

    def _instance_varying(self, op) -> str | None:
        """A name in the copy's views whose value differs between the group's instances."""
        var = self.in_parallel.var if self.in_parallel is not None else None
        varying = {var} if var else set()
        body = self.role.body if self.role is not None else []
        for st in list(ir.walk(self.out)) + list(ir.walk(body)):
            if isinstance(st, (ir.Let, ir.Assign, ir.Var)):
                value = st.value if not isinstance(st, ir.Var) else st.init
                if ir.sym_names(value) & varying:
                    varying.add(st.name)
        rows = getattr(op, "rows", None)
        for v in (op.src, op.dst):
            for e in (*v.offsets, *v.extents, *((v.slot,) if v.slot is not None else ()),
                      *((rows,) if rows is not None else ())):
                hit = ir.sym_names(e) & varying
                if hit:
                    return sorted(hit)[0]
        return None

    def _storage(self, v: ir.View) -> str:
        p, root = self.kernel.param(self.kernel.root(v.base)), self.kernel.root(v.base)
        b = self.kernel.buffer(root) or self.kernel.run_buffer(root)
        return p.storage if p else b.storage

    def _check_copy_shapes(self, s, src: ViewValue, dst: ViewValue) -> None:
        """TMA moves whole boxes: shapes must match. A DMA may fill the leading
        corner of a larger destination, never overflow a smaller one."""
        a, b = static_shape(src.view), static_shape(dst.view)
        if a is not None and b is not None and a != b:
            fits = len(a) == len(b) and all(x <= y for x, y in zip(a, b))
            if s.engine == "tma" or not fits:
                raise err(f"copy of a {fmt_shape(a)} tile into a {fmt_shape(b)} destination", s.src)
        if src.dtype != dst.dtype:
            raise err(f"copy from {src.dtype} data into a {dst.dtype} destination", s.dst)

    def _swizzle(self, s: A.DmaOp, dst: ViewValue) -> int | None:
        if s.swizzle is None:
            return None
        shape = static_shape(dst.view)
        row_bytes = shape[-1] * ir.dtype_bytes(dst.dtype) if shape else None
        if s.swizzle == "auto":
            if row_bytes is None:
                raise err("a bare '.swiz' needs a destination of known shape", s)
            return auto_swizzle(row_bytes)
        if s.swizzle not in SWIZZLES:
            raise err(f"'.swiz<{s.swizzle}>': the swizzle is 32, 64 or 128 bytes", s)
        if row_bytes is not None and row_bytes < s.swizzle:
            # Valid Choreo (the swizzle must only agree with the `mma.load` reading the
            # tile), and TMA writes such a box (its inner extent is at most the swizzle
            # span: rows packed densely, the pattern over 128-byte lines). But wgmma and
            # tcgen05 descriptors read an N-byte swizzle as atoms of 8 rows of N bytes, a
            # layout that shorter rows do not have; the IR's layouts are those atoms.
            fits = auto_swizzle(row_bytes)
            hint = f"'.swiz<{fits}>' fits them" if fits else "no swizzle fits them"
            raise Unsupported(f"'.swiz<{s.swizzle}>' wider than the destination's "
                              f"{row_bytes}-byte rows (an MMA reads a {s.swizzle}-byte swizzle "
                              f"as atoms of 8 rows of {s.swizzle} bytes; {hint})", s.loc)
        return s.swizzle

    # ------------------------------------------------------------ events
    def _event_ref(self, node: A.Expr, allow_increment: bool):
        post: list[ir.Stmt] = []
        if isinstance(node, A.Name):
            v = self.value(node)
            if isinstance(v, EventValue):
                return ir.EventRef(v.event.name), post
            if isinstance(v, FutureValue):
                return ir.FutureRef(v.name), post
            raise err(f"'{node.id}' is not an event or a future", node)
        if isinstance(node, A.Index):
            ref = self._event_slot(node)
            if ref is not None:
                return ref, post
        if isinstance(node, A.MethodCall) and node.method == "at":
            v = self.value(node.base)
            if not isinstance(v, EventValue):
                raise err("'.at(order)' here needs an event", node.base)
            if len(node.args) != 1:
                raise err("'.at(order)' on an event takes one logical order", node)
            arg = node.args[0]
            if isinstance(arg, A.Unary) and arg.op in ("post++", "post--"):
                if not allow_increment:
                    raise err("'order++' is allowed in 'trigger', not here", arg)
                if not isinstance(arg.operand, A.Name):
                    raise err("'++' needs a mutable variable", arg)
                var = self.scope.lookup(arg.operand.id)
                if not isinstance(var, Scalar) or not var.mutable:
                    raise err(f"'{arg.operand.id}' is not mutable", arg.operand)
                op = "+" if arg.op == "post++" else "-"
                post.append(ir.Assign(getattr(var.expr, "name", arg.operand.id),
                                      B.binop(op, var.expr, B.const(1), var.dtype), loc=arg.loc))
                return ir.EventRef(v.event.name, order=var.expr), post
            return ir.EventRef(v.event.name, order=self.index(arg)), post
        raise err("expected an event ('e', 'e[i]', 'e.at(order)') or a future", node)

    def _event_slot(self, node: A.Index) -> ir.EventRef | None:
        """`e[i]`, `e[i][j]`: the slot of an array of events (sema/arrays.py), every
        dimension subscribed."""
        chain = arrays.subscripts(node)
        v = self.value(chain[0] if chain else node.base)
        if chain is None or not isinstance(v, EventValue):
            return None
        dims = self.array_shape(v.event.name, v.event.slots)
        if len(chain[1]) > len(dims):
            raise err(f"'{arrays.shape_text(v.event.name, dims)}' is an array of events of "
                      f"{len(dims)} dimension(s), subscribed {len(chain[1])} times", node)
        if len(chain[1]) < len(dims):  # (a row of events at once: `trigger e[0]`)
            raise Unsupported(f"a partial subscription of the event array "
                              f"'{arrays.shape_text(v.event.name, dims)}'", node.loc)
        idx = [self.index(x) for x in chain[1]]
        for i, d, x in zip(idx, dims, chain[1]):
            k = B.as_int(i)
            if k is not None and not 0 <= k < d:
                raise err(f"index {k} is out of range for the dimension of {d} of event "
                          f"'{v.event.name}'", x)
        slot = arrays.linear(idx, dims)
        self._slot_range(v.event, slot, node)
        return ir.EventRef(v.event.name, index=slot)

    def _slot_range(self, ev: ir.Event, idx: ir.Expr, node) -> None:
        k = B.as_int(idx)
        if k is not None and not 0 <= k < (ev.slots or 1):
            raise err(f"slot {k} is out of range for event '{ev.name}'", node)

    def s_Wait(self, s: A.Wait) -> None:
        items = []
        for t in s.targets:
            ref, post = self._event_ref(t, allow_increment=False)
            if isinstance(ref, ir.FutureRef) and getattr(self.scope.lookup(ref.future), "done", False):
                continue  # the operation was made synchronous: nothing left to wait for
            items.append(ref)
        if items:
            self.emit(ir.Wait(items, loc=s.loc))

    def s_Trigger(self, s: A.Trigger) -> None:
        if s.scope == "cluster" and self.cluster is None:
            raise Unsupported("'trigger.cluster' outside a ': cluster' region", s.loc)
        if s.scope not in (None, "cluster"):
            raise Unsupported(f"'trigger.{s.scope}'", s.loc)
        # (`trigger.cluster e` in a cluster: the block's own trigger, sema/clusters.py)
        after, kinds = [], set()
        for f in s.after:
            v = self.value(f)
            if not isinstance(v, FutureValue):
                raise err(f"'after' takes futures; {self.describe(f)} is not one", f)
            if v.kind == "tma_store":
                raise err(f"'trigger ... after {v.name}': a shared-to-global TMA store has no "
                          "mbarrier completion; use a synchronous 'tma.copy' followed by a plain "
                          "'trigger'", f)
            if v.kind not in ("tma", "mma"):
                raise err(f"'trigger ... after {v.name}': only asynchronous global-to-shared TMA "
                          "loads and MMAs can complete an event", f)
            kinds.add(v.kind)
            after.append(v.name)
        if len(kinds) > 1:  # one completion mechanism per trigger: loaded bytes or a commit
            raise err("'trigger ... after' with both TMA loads and MMA futures; write one "
                      "trigger per kind", s.after[0])
        for t in s.targets:
            ref, post = self._event_ref(t, allow_increment=True)
            if isinstance(ref, ir.FutureRef):
                raise err("'trigger' takes events, not futures", t)
            self.emit(ir.Trigger(ref, after, loc=s.loc))
            for p in post:
                self.emit(p)

    def s_Sync(self, s: A.Sync) -> None:
        # `sync.barrier : block` is the block's barrier, the same meeting as `sync.shared`.
        # `: group` / `: thread` is the warp's (the threads of a group, or those a thread
        # level's instances share a warp with).
        block_barrier = s.kind == "barrier" and s.level in (None, "block")
        if s.kind == "barrier" and s.level in ("group", "thread"):
            self.emit(ir.SyncWarp(loc=s.loc))
            return
        if s.kind == "fence" and s.level in ("block", "thread"):
            self.emit(ir.Fence("gpu" if s.level == "block" else "cta", loc=s.loc))
            return
        if block_barrier and self.kernel is not None and self.kernel.cooperative:
            return self.grid_barrier(s)
        if s.kind != "shared" and not block_barrier:
            raise Unsupported(f"'sync.{s.kind}'" + (f" : {s.level}" if s.level else ""), s.loc)
        self.emit(ir.SyncShared(loc=s.loc))

    def grid_barrier(self, s: A.Sync) -> None:
        """`sync.barrier : block` in a cooperative kernel: all blocks of the grid meet."""
        if self.in_parallel is not None or self.role is not None:
            # Valid Choreo; the IR's grid barrier is a statement of the whole block.
            raise Unsupported("a grid-wide barrier inside a parallel region or role", s.loc)
        self.emit(ir.GridSync(loc=s.loc))

    def device_call(self, c: A.Call) -> None:
        if self.co_callee(c) is not None:  # a __co__ function in a kernel (sema/co_calls.py)
            raise self.co_call_elsewhere(c)
        short = c.func.split("::")[-1]
        if short in ("setreg_inc", "setreg_dec") and len(c.args) == 1:
            n = self.const_int(c.args[0], "a register count")
            if n % 8 or not 24 <= n <= 256:
                raise err(f"{short}({n}): the register count must be a multiple of 8 in [24, 256]",
                          c.args[0])
            if self.role is not None:
                self.role.max_regs = n
            self.emit(ir.SetMaxRegs(n, short == "setreg_inc", loc=c.loc))
            return
        self.inline_call(c)  # sema/device_funcs.py

    def builtin_stmt(self, c: A.CallExpr) -> None:
        fn = c.func
        if fn in ATOMIC_TYPES:
            return self.atomic(c)
        if fn in ("reduce_max", "reduce_sum"):
            if len(c.args) != 3:
                raise err(f"'{fn}(dst, src, dim)' takes 3 arguments", c)
            dst, src = self._frag_of(c.args[0], "the result"), self._frag_of(c.args[1], "the input")
            dim = self.const_int(c.args[2], "the reduced dimension")
            if not src.shape:
                raise ShapeNotYetKnown(f"reducing accumulator '{src.name}' before any MMA gives "
                                       "its shape", c.args[1].loc)
            if not 0 <= dim < len(src.shape):
                raise err(f"dimension {dim} is out of range for '{src.name}'", c.args[2])
            want = src.shape[:dim] + src.shape[dim + 1:]
            if not dst.shape:  # `r = mma.fill.f32 0.0f;` that no MMA shaped: the result's
                dst.shape = want  # shape, as an MMA gives its accumulator's (co-mock's too)
            if dst.shape != want:
                raise err(f"'{fn}' of {fmt_shape(src.shape)} over dimension {dim} gives {fmt_shape(want)}, "
                          f"but '{dst.name}' is {fmt_shape(dst.shape)}", c.args[0])
            self.emit(ir.Reduce(fn[7:], dst.name, src.name, dim, loc=c.loc))
            return
        if fn in ("all_reduce_sum", "all_reduce_max"):
            if len(c.args) != 1:
                raise err(f"'{fn}' takes one fragment", c)
            f = self._frag_of(c.args[0], "the operand")
            if len(f.shape) != 1:
                raise err(f"'{fn}' combines a 1-D row vector; '{f.name}' is {fmt_shape(f.shape)}",
                          c.args[0])
            self.emit(ir.AllReduce(fn[11:], f.name, loc=c.loc))
            return
        if fn == "copy" and len(c.args) == 2:
            dst, src = self._frag_of(c.args[0], "the destination"), self._frag_of(c.args[1], "the source")
            if dst.shape != src.shape:
                raise err(f"copy of a {fmt_shape(src.shape)} fragment into a {fmt_shape(dst.shape)} one", c)
            self.emit(ir.FragCopy(dst.name, src.name, loc=c.loc))
            return
        if fn in ("__bar_sync", "__bar_arrive"):
            self.named_barrier(c, fn[6:])
            return
        if fn == "assert":
            self.assert_stmt(c)
            return
        raise Unsupported(f"the builtin '{fn}' as a statement", c.loc)

    def named_barrier(self, c: A.CallExpr, op: str) -> None:
        """`__bar_sync(id, count)` / `__bar_arrive(id, count)` in a role's device code."""
        fn = f"__bar_{op}"
        if len(c.args) != 2:
            raise err(f"'{fn}(barrier_id, thread_count)' takes 2 arguments", c)
        par = self.in_parallel
        per_thread = self.role is None and par is not None and par.level == "thread" \
            and par.threads == 1 and not self.group_lanes
        if not per_thread and (self.role is None or par is None or not self.role.is_async):
            # Valid Choreo; the IR models named barriers between the roles of a block and
            # between the threads of a `: thread` region (each thread arrives).
            raise Unsupported(f"'{fn}' outside an 'inthreads.async' role or a ': thread' "
                              "region", c.loc)
        bid = self.scalar(c.args[0])
        if bid.dtype not in ir.INT_TYPES:
            raise err(f"the barrier id of '{fn}' must be an integer, not {bid.dtype}", c.args[0])
        n = B.as_int(bid)
        if n is not None and not 0 <= n <= 15:
            raise err(f"barrier id {n}: the hardware has named barriers 0..15", c.args[0])
        count = self.const_int(c.args[1], "the thread count")
        group, block = par.threads or 1, par.extent * (par.threads or 1)
        if per_thread:  # the hardware counts threads in whole warps
            group = 32
        elif group % 32:
            raise err(f"'{fn}' counts whole warps; the thread groups of this parallel level have "
                      f"{group} threads", c)
        if count <= 0 or count % 32 or count % group:
            raise err(f"thread count {count}: a named barrier counts whole thread groups of this "
                      f"parallel level ({group} threads each, and a multiple of 32)", c.args[1])
        if count > block:
            raise err(f"thread count {count} exceeds the {block} threads of the block", c.args[1])
        self.emit(ir.NamedBarrier(op, bid, count, loc=c.loc))
