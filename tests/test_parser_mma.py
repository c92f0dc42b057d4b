"""MMA statements: fill, load, the four layouts, store, scale, schedules."""
import pytest

from choreo_py.frontend import ast

from parser_util import body, error, one


def test_fill_forms():
    a, b, c = body("acc = mma.fill.f32 0.0f;\nmc = mma.fill 0;\nmma.fill mc, 1;")
    assert isinstance(a, ast.MmaFill) and a.declares and a.target.id == "acc"
    assert a.elem.name == "f32" and a.value.suffix == "f"
    assert b.elem is None
    assert not c.declares and c.target.id == "mc" and c.value.value == 1


def test_load_forms():
    a, b, c = body("ma = mma.load lhs.chunkat(p, k);\nmb = mma.load.frag rhs;\n"
                   "mc = mma.load.swiz<32> s.chunkat(_, w);")
    assert isinstance(a, ast.MmaLoad) and a.target.id == "ma" and a.declares
    assert b.source.id == "rhs"
    assert c.swizzle == 32


@pytest.mark.parametrize("layout", ["row.row", "row.col", "col.row", "col.col"])
def test_layouts(layout):
    op = one(f"mma.{layout} mc, ma, mb;")
    assert isinstance(op, ast.MmaOp) and op.layout == layout
    assert (op.acc.id, op.a.id, op.b.id) == ("mc", "ma", "mb") and op.future is None


def test_async_mma_future():
    op = one("qk = mma.row.row.async acc_s,\n  q_shared.subspan(64, 128).at(cid, 0), k_buf[slot];")
    assert op.is_async and op.future == "qk"
    assert isinstance(op.b, ast.Index)


def test_sparse_with_metadata():
    op = one("mma.row.col.sp mc, ma, mb, meta;")
    assert op.sparse and op.metadata.id == "meta"


def test_schedule_attribute():
    op = one("[[schedule(k_tiles(3, 2, 1, 0))]]\nmma.row.col acc, lhs, rhs;")
    assert op.issue_order == [3, 2, 1, 0]


def test_store_forms():
    a, b, c = body("mma.store acc_o, o_buf.subspan(64, 128).at(cid, 0);\n"
                   "mma.store.transp acc, out;\nmma.store.mask acc, out, rows, cols;")
    assert isinstance(a, ast.MmaStore) and a.source.id == "acc_o"
    assert b.transposed
    assert [m.id for m in c.mask] == ["rows", "cols"]


def test_scale():
    op = one("mma.scale mc, scales.at(0), 1.0f;")
    assert isinstance(op, ast.MmaScale) and op.acc.id == "mc"


@pytest.mark.parametrize("stmt, fragment", [
    ("mma.wait<0>;", "unknown MMA operation 'mma.wait'"),
    ("mma.row.row.order<0, 1> acc, a, b;", "'.order' takes no"),
    ("mma.row acc, a, b;", "layouts of both operands"),
    ("mma.row.col acc, a;", "takes 3 operands, got 2"),
    ("x = mma.row.col acc, a, b;", "only an asynchronous MMA"),
])
def test_rejected(stmt, fragment):
    d = error(f"__co__ void f() {{\n  {stmt}\n}}\n")
    assert fragment in d.message and d.loc.line == 2


def test_schedule_needs_an_mma():
    d = error("__co__ void f() {\n  [[schedule(k_tiles(1))]]\n  x = 1;\n}\n")
    assert "only applies to an MMA execution statement" in d.message
