"""DMA and TMA statements and their modifiers."""
import pytest

from choreo_py.frontend import ast

from parser_util import error, one


def test_copy_to_storage():
    op = one("f = dma.copy.async input.chunkat(p, i) => local;")
    assert isinstance(op, ast.DmaOp) and op.engine == "dma" and op.operation == "copy"
    assert op.future == "f" and op.is_async
    assert isinstance(op.dst, ast.StorageTarget) and op.dst.storage == "local"


def test_copy_without_future_and_after():
    op = one("dma.copy.async src => select(q % 2, a, b) after g;")
    assert op.future is None and op.after[0].id == "g"
    assert isinstance(op.dst, ast.CallExpr) and op.dst.func == "select"


def test_seed_tma_load_with_bare_swizzle():
    op = one("q = tma.load.async.evict_first.swiz\n  Q.subspan(128, 64).at(bm, 0) => q_shared;")
    assert op.engine == "tma" and op.operation == "load"
    assert op.swizzle == "auto" and op.evict == "evict_first" and op.is_async


def test_explicit_swizzle_and_multicast():
    op = one("tma.copy.multicast.swiz<128> rhs.chunkat(n, k) => rhs_s;")
    assert op.swizzle == 128 and op.multicast and op.future is None


def test_pad_and_transpose_configs():
    op = one("f = dma.pad<{1, 1}, {0, 0}, {1, 0}, 1>.async x.chunkat(p) => local;")
    assert op.operation == "pad" and op.is_async
    assert [e.value for e in op.pad.low] == [1, 1] and op.pad.value.value == 1
    op = one("f = dma.transp<1, 2, 0> x => local;")
    assert op.transpose == [1, 2, 0]


def test_placeholder_future():
    op = one("f0 = dma.any;")
    assert op.operation == "any" and op.src is None and op.future == "f0"


def test_sparse_copy():
    op = one("f = dma.copy.sp<2:4> input.chunkat(x, y) => local;")
    assert op.sparse == (2, 4)


@pytest.mark.parametrize("stmt, message, col", [
    ("dma.load input => tile;", "'.load' is a TMA-only operation.", 6),
    ("l = tma.copy.async.evict_last input => tile;",
     "TMA L2 eviction modifiers are only valid on 'tma.load'.", 10),
    ("l = tma.load.async.swiz<128>.evict_last input => tile;",
     "TMA eviction modifier must precede '.swiz'.", 31),
    ("f = dma.copy.sp<1:4> input => local;",
     "Only 2:4 structured sparsity is supported; got 1:4.", 3),
    ("tma.store tile => output;", None, 6),
    ("tma.copy.async<full> input => tile;", "'.async' takes no '<...>' arguments", 11),
])
def test_rejected_modifiers(stmt, message, col):
    d = error(f"__co__ void f(global f16[64] input) {{\n  {stmt}\n}}\n")
    if message is not None:
        assert d.message == message
    assert (d.loc.line, d.loc.col) == (2, col)


def test_swizzle_value_checked():
    d = error("__co__ void f() {\n  tma.copy.swiz<48> a => b;\n}\n")
    assert d.message == "swizzle value must be 128, 64, or 32"
