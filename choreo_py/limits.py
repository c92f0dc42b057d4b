"""The sizes of a program's structure that every stage can afford, in one table.

Each later stage walks the syntax tree and the IR made from it, many of them recursively
(a tree walk per construct is the clearest form of most rules and lowerings). So the
front end bounds what those walks see, once, with an error at the construct past a bound,
and the stages run under a recursion limit sized for these bounds (`RECURSION_LIMIT`).
The bounds are far beyond any kernel written by hand, and beyond C's minimum limits
(C17 5.2.4.1: 127 nested blocks, 63 nested parenthesised expressions, 63 nested
conditional inclusions), as a C compiler's own are.
"""
from __future__ import annotations

import sys
from contextlib import contextmanager

#: statements nested in one another (`if`, `foreach`, `parallel`, `{ }`, ...)
MAX_BLOCK_DEPTH = 256
#: levels of one expression (`a + b + ...` of 1,000 terms is 1,000 deep; `f(x)`, `x.at(i)`
#: are a level each)
MAX_EXPR_DEPTH = 1000
#: dimensions of an mdspan (`mdspan<N>`, `[a, b, ...]`): numpy, which the interpreter runs
#: tensors with, has at most 32 (64 since numpy 2), and a TMA descriptor 5
MAX_RANK = 32
#: what the stages may recurse with these bounds: a few frames per level of the deepest
#: walk (the lowering of an expression: 3 or 4), times the deepest level, and a margin
RECURSION_LIMIT = 20000


@contextmanager
def deep_recursion():
    """Run a stage (or a whole command) with RECURSION_LIMIT; CPython 3.11 runs Python calls
    without growing the C stack, so the limit is safe. Restored after: the caller's own."""
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, RECURSION_LIMIT))
    try:
        yield
    finally:
        sys.setrecursionlimit(old)
