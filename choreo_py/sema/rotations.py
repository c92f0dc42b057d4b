"""Placeholder futures (`f = tma.any;`) and futures exchanged by `swap` / `rotate`.

`next = dma.any;` names a data future before any copy is assigned to it: it
has no data until a copy is, and waiting on it waits for nothing. A later
`next = dma.copy.async ... => shared;` in an inner scope (a role, a loop)
assigns that same variable, so the name keeps the copy after the scope.

`swap a, b;` exchanges what the names refer to, usually in a loop
(double buffering: load into `b`, compute on `a`, swap). The exchange is
decided at run time, so the futures of one `swap`/`rotate` group share one
array of buffers and a rotation counter `__rot_<a>`: member i names slot
`(__rot + i) % n`, and `swap` advances the counter. The copies into such a
future complete before the next statement (as a copy issued once for
several thread groups does, `ops._emit_collective`): the order is stronger
than the program asks for, and what a name is waited on is always complete,
whichever copy it names after the exchanges.
"""
from __future__ import annotations

from ..frontend import ast as A
from .. import ir
from ..ir import build as B
from .exprs import err
from .values import FutureValue, Unsupported, ViewValue
from .views import static_shape


class RotationBuilder:
    """Mixin of KernelBuilder (with OpBuilder)."""

    def rotation_groups(self) -> dict[str, tuple[str, ...]]:
        """name -> the names of the `swap`/`rotate` statement(s) it takes part in."""
        found = getattr(self, "_rotation_groups", None)
        if found is None:
            found = {}
            for node in A.walk(self.func.body):
                if isinstance(node, A.Swap) and len(node.names) >= 2:
                    group = tuple(node.names)
                    for n in group:
                        old = found.get(n)
                        if old is not None and old != group:
                            raise Unsupported(f"the future '{n}' exchanged in two different "
                                              "'swap'/'rotate' groups", node.loc)
                        found[n] = group
            self._rotation_groups = found
        return found

    def placeholder(self, s: A.DmaOp) -> None:
        """`f = tma.any;`: a data future with no copy yet."""
        if s.future is None:
            raise err(f"'{s.engine}.any' makes a placeholder future: write 'f = {s.engine}.any;'", s)
        self.scope.bind(s.future, FutureValue(s.future, s.engine, None, done=True, loc=s.loc))

    def bind_future(self, fut: FutureValue) -> None:
        """A copy assigned to a name: a placeholder or rotated future of an enclosing scope is
        that variable, assigned here; any other name is declared in this scope."""
        sc = self.scope
        while sc is not None:
            old = sc.names.get(fut.name)
            if isinstance(old, FutureValue) and (old.dst is None or getattr(old, "rotated", False)):
                sc.names[fut.name] = fut
                return
            if old is not None:
                break
            sc = sc.parent
        self.scope.bind(fut.name, fut)

    def rotated_dst(self, s: A.DmaOp, src: ViewValue, shape) -> ViewValue | None:
        """The slot of its group's buffer array that a rotated future's implicit copy fills."""
        group = self.rotation_groups().get(s.future) if s.future else None
        if group is None or not isinstance(s.dst, A.StorageTarget):
            return None
        if s.dst.storage != "shared":
            raise Unsupported(f"'{s.future}' exchanged by 'swap' with a copy into '{s.dst.storage}'",
                              s.loc)
        shape = shape if shape is not None else static_shape(src.view)
        if shape is None:
            raise Unsupported(f"an implicit {s.dst.storage} buffer whose shape is only known at run time",
                              s.dst.loc)
        state = self._rotation_state(group, src.dtype, tuple(shape), s)
        buf, counter = state
        i = group.index(s.future)
        slot = ir.Bin("%", ir.Bin("+", ir.Sym(counter, "s32"), B.const(i), "s32"),
                      B.const(len(group)), "s32")
        view = ir.View(buf.name, tuple(B.const(0) for _ in shape),
                       tuple(B.const(d) for d in shape), tuple(True for _ in shape), slot)
        return ViewValue(view, buf.dtype, loc=s.dst.loc)

    def _rotation_state(self, group, dtype: str, shape: tuple, s: A.DmaOp):
        states = self.__dict__.setdefault("_rotation_states", {})
        key = (id(self.kernel), group)
        if key not in states:
            name = self._fresh_buffer_name(f"{group[0]}__shared")
            buf = ir.Buffer(name, "shared", dtype, shape, len(group), loc=s.dst.loc)
            self.kernel.buffers.append(buf)
            counter = f"__rot_{group[0]}"
            # Declared where the group's first copy is: `check` has the group's futures
            # declared in one scope, which holds the exchanges too.
            self.emit(ir.Var(counter, "s32", B.const(0), loc=s.loc))
            states[key] = (buf, counter)
        buf, counter = states[key]
        if buf.dtype != dtype or tuple(buf.shape) != shape:
            raise err(f"'{s.future}' is exchanged with futures of {buf.dtype} "
                      f"{list(buf.shape)} tiles; this copy's tile is {dtype} {list(shape)}", s)
        return buf, counter

    def _fresh_buffer_name(self, stem: str) -> str:
        name, n = stem, 1
        while self.kernel.buffer(name) or self.kernel.event(name) or self.kernel.frag(name):
            n += 1
            name = f"{stem}{n}"
        return name

    def s_Swap(self, s: A.Swap) -> None:
        if self.kernel is None:
            raise Unsupported("a 'swap' outside a parallel block", s.loc)
        group = tuple(s.names)
        states = getattr(self, "_rotation_states", {})
        state = states.get((id(self.kernel), group))
        if state is None:
            word = "rotate" if s.rotate else "swap"
            raise Unsupported(f"'{word}' of futures no copy into shared memory was assigned "
                              "to yet", s.loc)
        _, counter = state
        n = len(group)
        nxt = ir.Bin("%", ir.Bin("+", ir.Sym(counter, "s32"), B.const(1), "s32"), B.const(n),
                     "s32")
        self.emit(ir.Assign(counter, nxt, loc=s.loc))
