"""A shared f32 vector of the block's rows inside `apply`: `buf.at(i)` with i the apply's
row index (fragments.ApplyLowering's buffer elements).

A role hands per-row values to another through such a vector (flash_atten_blackwell.co's
softmax roles give the correction role each row's rescale factor): an apply over a row
vector stores each row's one value (`buf.at(i) = m.at(i)`), and any apply reads it. A thread
touches only the rows it owns, so the element's address is the thread's row base plus the
register's row offset; a read is loaded once per row for the whole apply (again after the
apply stores into the vector). The stores and loads mark the role's shared memory written
or read, so the role's threads meet before one of them triggers the event that publishes
(or frees) the vector. Refused: another index, another buffer kind, a store from a 2-D apply
(each row's element would be written by every column), a conditional store, and a row value
split among the threads of the row (`row_partial` where rows span several threads).
"""
from __future__ import annotations

from typing import Optional

from choreo_py import ir

from .writer import V


class RowBuffers:
    """Mixed into fragments.ApplyLowering (lw, w, a, dom, k, memo, version, offsets, value)."""

    def row_buffer(self, view: ir.View, index, loc) -> tuple[V, int]:
        """(address register, byte offset) of `buf.at(i)` for element k: a shared f32 vector
        of the domain's rows indexed by the apply's row index (one element per row, so a
        thread touches only the rows it owns)."""
        lw = self.lw
        b = lw.k.buffer(lw.k.root(view.base))
        names = [x.name if isinstance(x, ir.Sym) else None for x in index]
        kept = [n for n, k in zip(view.extents, view.keep) if k]
        ok = (b is not None and b.storage == "shared" and b.dtype == "f32" and b.count is None
              and lw.k.alias(view.base) is None and names == [self.a.indices[0]]
              and len(b.shape) == 1 and len(kept) == 1
              and isinstance(kept[0], ir.Const) and kept[0].value == self.dom.frag.shape[0]
              and all(isinstance(o, ir.Const) for o in view.offsets))
        if not ok:
            raise lw.refuse(f"'{view.base}' inside apply other than as a shared f32 vector of "
                            f"the {self.dom.frag.shape[0]} rows indexed by the apply's row "
                            f"index '{self.a.indices[0]}'", loc)
        rb, _ = lw.target.thread_bases(lw)
        start = b.offset + 4 * view.offsets[0].value

        def make() -> V:
            out = self.w.reg("u32", f"{b.name}_row")
            self.w.op("mad.lo.u32", out, rb, 4, lw.smem_base)
            return out
        _, off = self.offsets()[self.a.indices[0]]
        return lw.once(("row_buffer", b.name), make), start + 4 * off

    def row_buffer_load(self, e: ir.BufElem) -> V:
        """Loaded once per row of the thread for the whole apply (again after a store)."""
        key = self.key(e)
        if key not in self.memo:  # (or loaded where a guard around this one held)
            got = next((self.memo[k] for k in self.outer_keys(e) if k in self.memo), None)
            if got is not None:
                return got
            addr, off = self.row_buffer(e.view, e.index, self.loc)
            out = self.w.reg("f32", f"{self.lw.k.root(e.view.base)}_at")
            self.lw.element_load("ld.shared.f32", out, f"ptx.addr({addr.text}, {off})")
            self.memo[key] = out
            self.lw.smem_read = True  # an event the role triggers next may free the vector
        return self.memo[key]

    def row_buffer_store(self, s: ir.BufStore, cond: Optional[dict], ks: list) -> None:
        if self.dom.kind != "row":  # each row's element would be stored by every column
            raise self.lw.refuse(f"a store into '{s.view.base}' inside an apply over the 2-D "
                                 f"'{self.a.domain}'", s.loc)
        if self.dom.layout.row_lanes and _reads_partial(self, s.value):
            raise self.lw.refuse(f"a store into '{s.view.base}' of a row value split among "
                                 "the threads of the row", s.loc)
        if cond is not None:
            raise self.lw.refuse(f"a conditional store into '{s.view.base}' inside apply", s.loc)
        for k in ks:
            self.k = k
            addr, off = self.row_buffer(s.view, s.index, s.loc)
            v = self.value(s.value, "v")
            if v.is_const:
                v = self.w.reg("f32", "c", init=V.imm(v.const, "f32"))
            self.w.op("st.shared.f32", f"ptx.addr({addr.text}, {off})", v)
        self.version["buf " + self.lw.k.root(s.view.base)] += 1
        self.lw.smem_dirty = True  # the role's threads meet before one of them publishes it


def _reads_partial(al: "RowBuffers", e: ir.Expr) -> bool:
    """Whether `e` reads a row vector each thread holds only a part of (`row_partial`)."""
    return any(isinstance(x, ir.Elem) and _layout(al, x) == "row_partial"
               for x in ir.expr_walk(e))


def _layout(al, x: ir.Elem) -> Optional[str]:
    """The layout of the fragment `x` reads (None: undeclared, which the apply's own
    element lookup refuses by name)."""
    fi = al.lw.frags.get(x.frag)
    return fi.frag.layout if fi is not None else None
