"""Inline asm in a kernel: `__asm__ [volatile] ("ptx" : outputs : inputs : clobbers)`.

The template is PTX, pasted into the thread's code as written; GCC's operand
syntax names the values it reads and the places it writes: `%0`, `%1`, ...
count the outputs, then the inputs; `%[name]` names an operand declared
`[name] "c"(...)`; `%%` is a literal `%`. A constraint gives the register's
kind: `r` a 32-bit integer, `l` 64-bit, `h` 16-bit, `f` an f32, `d` an f64,
`n` an integer constant (inputs only). An output is written (`=`) or read and
written (`+`), and is a buffer element (`out.at(i)`) or a mutable scalar.
"""
from __future__ import annotations

from ..frontend import ast as A
from .. import ir
from ..diagnostics import ChoreoError
from ..ir import asm_letter as letter, asm_references as references
from ..ir.c_scalars import INT_BITS
from .values import Scalar, Unsupported

#: constraint letter -> (register kind, bits); the operand's type must have those bits
CONSTRAINTS = {"r": ("int", 32), "l": ("int", 64), "h": ("int", 16), "f": ("f32", 32),
               "d": ("f64", 64), "n": ("const", 0)}


class AsmBuilder:
    """Mixin of the statement builder (needs value, view_of, element_index, scope, emit)."""

    def s_AsmStmt(self, s: A.AsmStmt) -> None:
        outs = [self._asm_output(o) for o in s.outputs]
        ins = [self._asm_input(o) for o in s.inputs]
        _check_references(s, outs + ins)
        self.emit(ir.Asm(s.template, outs, ins, s.volatile, list(s.clobbers), loc=s.loc))

    def _asm_output(self, o: A.AsmOperand) -> ir.AsmOperand:
        if not (o.constraint.startswith("=") or o.constraint.startswith("+")):
            raise ChoreoError(f"the asm output constraint '{o.constraint}' must start with "
                              "'=' (written) or '+' (read and written)", o.loc)
        t = o.expr
        if isinstance(t, A.MethodCall) and t.method == "at":
            view = self.view_of(t.base)
            index = self.element_index(t.args)
            if len(index) != view.view.rank:
                raise ChoreoError(f"this {view.view.rank}-D data takes {view.view.rank} "
                                  "indices", t.loc)
            place = ir.BufElem(view.view, index, view.dtype)
        elif isinstance(t, A.Name) and isinstance(self.scope.lookup(t.id), Scalar) \
                and self.scope.lookup(t.id).mutable:
            place = self.scope.lookup(t.id).expr
        else:
            raise Unsupported("an asm output that is not a buffer element or a mutable scalar",
                              t.loc)
        _check_kind(o, place.dtype)
        return ir.AsmOperand(o.constraint, place, o.symbolic_name)

    def _asm_input(self, o: A.AsmOperand) -> ir.AsmOperand:
        if o.constraint[:1] in ("=", "+"):
            raise ChoreoError(f"the asm input constraint '{o.constraint}' cannot write "
                              "('=' and '+' are for outputs)", o.loc)
        v = self.value(o.expr)
        if not isinstance(v, Scalar):
            raise ChoreoError("an asm input must be a scalar value", o.expr.loc)
        if letter(o.constraint) == "n" and not isinstance(v.expr, ir.Const):
            raise ChoreoError("the asm constraint 'n' takes a compile-time integer", o.expr.loc)
        _check_kind(o, v.expr.dtype)
        return ir.AsmOperand(o.constraint, v.expr, o.symbolic_name)


def _check_kind(o: A.AsmOperand, dtype: str) -> None:
    kind = CONSTRAINTS.get(letter(o.constraint))
    if kind is None:
        raise Unsupported(f"the asm constraint '{o.constraint}'", o.loc)
    if kind[0] == "const":
        return
    # a float constraint takes that float; an integer one an integer of its width
    if kind[0] != "int" and dtype != kind[0] or kind[0] == "int" and INT_BITS.get(dtype) != kind[1]:
        raise ChoreoError(f"the asm constraint '{o.constraint}' is for {_kind_words(kind)}, "
                          f"not {dtype}", o.loc)


def _kind_words(kind) -> str:
    return {"f32": "an f32", "f64": "an f64"}.get(kind[0], f"a {kind[1]}-bit integer")


def _check_references(s: A.AsmStmt, operands: list[ir.AsmOperand]) -> None:
    names = {o.name for o in operands if o.name}
    for ref, _, _ in references(s.template):
        if ref == "%":
            continue
        if ref.startswith("["):
            if ref[1:-1] not in names:
                raise ChoreoError(f"the asm template names '%{ref}', which no operand "
                                  "declares", s.loc)
        elif int(ref) >= len(operands):
            raise ChoreoError(f"the asm template reads '%{ref}' of {len(operands)} "
                              "operand(s)", s.loc)
