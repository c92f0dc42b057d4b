"""`__atomic_add(T.at(...), v)` inside an `apply` over a 2-D fragment (fragments.ApplyLowering's
atomic statements): each element the thread holds adds its value to a global f32 element
with one `red.global.add.f32` at the element's address (global_reads.py's pointer, the
address computed as a thread kernel's), predicated by the conditions around it. Many blocks
accumulate one tensor this way (FA3's dQ); the update is relaxed, which a later kernel
launch reading the sums needs no more than. Refused: a row vector's apply (every owner of a
row would add it) and a tensor other than a global f32 one.
"""
from __future__ import annotations

from typing import Optional

from choreo_py import ir

from . import global_reads
from .threads import Places
from .writer import V


class ApplyAtomics:
    """Mixed into fragments.ApplyLowering (lw, w, dom, k, value, guarded)."""

    def atomic_add(self, s: ir.BufStore, cond: Optional[dict], ks: list) -> None:
        """`__atomic_add(T.at(...), v)` on a global f32 tensor in an apply over a 2-D
        fragment: per element one `red.global.add.f32` at its address, predicated by the
        conditions around it (FA3's dQ accumulated by many blocks)."""
        lw = self.lw
        root = lw.k.root(s.view.base)
        p = lw.k.param(root)
        if self.dom.kind == "row" or p is None or p.dtype != "f32":
            raise lw.refuse(f"'__atomic_add' inside apply other than on a global f32 tensor "
                            f"in an apply over a 2-D fragment", s.loc)
        places = Places.of_mma_kernel(lw)
        places.pointers.setdefault(root, global_reads.pointer(lw, root))
        for k in ks:
            self.k = k
            v = self.value(s.value, "v") if cond is None else \
                self.guarded(s.value, cond[k], hint="v")
            if v.is_const:
                v = self.w.reg("f32", "c", init=V.imm(v.const, "f32"))
            _, addr = places.address(s.view, s.index, s.loc, expr=self)
            self.w.op("red.global.add.f32", f"ptx.addr({addr.text})", v,
                      pred=None if cond is None else cond[k], at=s.loc)
