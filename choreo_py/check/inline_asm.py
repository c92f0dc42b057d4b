"""Inline asm: the template is PTX statements (choreo_py/ir/ptx_words.py says which words
those start with), so that text ptxas would reject (`__asm__("nop;")`) is refused at the
asm statement, by name, before any code is built."""
from __future__ import annotations

from ..frontend import ast as A
from ..ir import ptx_words


def ptx_statements(ck, s: A.AsmStmt) -> None:
    why = ptx_words.problem(s.template)
    if why is not None:
        # the words of the backend's own refusal (lowering/core/asm.py), the reason after them
        ck.error(f"the __asm__ template is not PTX statements (each PTX instruction ends "
                 f"with ';'): {why}", s.loc)


RULES = {A.AsmStmt: [ptx_statements]}
