"""What a call of a function that ends without `return` gives back.

A `__co__` function declared to return a value (`__co__ int f(...)`) whose
body has no `return` compiles with a warning (check/context.py), as a C
compiler's would: running it is fine, only using its value is wrong. Its
host callable (interpreter and GPU runtime alike, host/execute.py
function_result) returns a `MissingResult`, which stands for that missing
value: kept, dropped, compared by identity or shown with repr() it is
harmless, but any use of it as a value (a number, a truth value, a tensor,
arithmetic, comparison, indexing, an attribute, printing) raises
`MissingResultError` naming the function and where it is declared, instead of
handing on something made up.
"""
from __future__ import annotations

from ..diagnostics import ChoreoError
from ..source import Loc


class MissingResultError(ChoreoError, TypeError):
    """The value of a call of a function that returns nothing was used."""


class MissingResult:
    __slots__ = ("function", "declared", "loc")

    def __init__(self, function: str, declared: str, loc: Loc | None) -> None:
        object.__setattr__(self, "function", function)
        object.__setattr__(self, "declared", declared)
        object.__setattr__(self, "loc", loc)

    def __repr__(self) -> str:
        return f"<no result: '{self.function}' ends without 'return'>"

    def _refuse(self, *_args, **_kwargs):
        raise MissingResultError(
            f"the result of '{self.function}' is used, but '{self.function}' (declared to "
            f"return '{self.declared}') ends without a 'return' statement: the call has no "
            "value", self.loc)

    def __getattr__(self, name: str):
        if name.startswith("__"):  # a protocol probe (copy, numpy, torch): not a use
            raise AttributeError(name)
        self._refuse()

    def __setattr__(self, name: str, value) -> None:
        self._refuse()

    __hash__ = object.__hash__


_USES = ("bool int float complex index len iter getitem setitem contains str format "
         "eq ne lt le gt ge neg pos abs invert round trunc floor ceil call "
         "add sub mul matmul truediv floordiv mod divmod pow lshift rshift and or xor "
         "radd rsub rmul rmatmul rtruediv rfloordiv rmod rdivmod rpow rlshift rrshift rand "
         "ror rxor").split()
for _use in _USES:
    setattr(MissingResult, f"__{_use}__", MissingResult._refuse)
