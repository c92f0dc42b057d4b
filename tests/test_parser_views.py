"""View and access chains: subspan, step, at, sqz, chunkat, span_as, view/from."""
from choreo_py.frontend import ast

from parser_util import expr, one


def _chain(e):
    out = []
    while isinstance(e, (ast.MethodCall, ast.Member)):
        out.append(e.method if isinstance(e, ast.MethodCall) else "." + e.name)
        e = e.base
    return list(reversed(out)), e


def test_seed_style_chain():
    e = expr("Q.subspan(1, Q_SEQ, 1, DIM)\n  .at(batch, 0, head, 0).sqz()")
    names, base = _chain(e)
    assert names == ["subspan", "at", "sqz"] and base.id == "Q"
    assert len(e.base.base.args) == 4 and e.args == []


def test_step_and_strides():
    e = expr("a.subspan(3, 4).step(1, 3).at(p, q)")
    assert _chain(e)[0] == ["subspan", "step", "at"]
    e = expr("inp.view(3 : 2).from(x)")
    view = e.base
    assert view.method == "view" and view.args[0].value == 3 and view.strides[0].value == 2


def test_chunkat_with_placeholders():
    e = expr("i.chunkat(t0, _, _)")
    assert [a.id for a in e.args] == ["t0", "_", "_"]
    e = expr("data.chunk(3, 2).at(x, y)")
    assert _chain(e)[0] == ["chunk", "at"]


def test_span_as_and_data():
    e = expr("f.data.span_as([4, 9, 9])")
    assert e.method == "span_as" and isinstance(e.args[0], ast.MdSpanLit)
    assert isinstance(e.base, ast.Member) and e.base.name == "data"


def test_array_of_buffers():
    e = expr("k_buf[slot].subspan(16, 8).at(0, 0)")
    names, base = _chain(e)
    assert names == ["subspan", "at"]
    assert isinstance(base, ast.Index) and base.base.id == "k_buf"


def test_element_access_targets():
    stmt = one("acc_s.at(i, j) = -inf;")
    assert isinstance(stmt.target, ast.MethodCall) and stmt.target.method == "at"
    assert stmt.value.op == "-" and stmt.value.operand.value == float("inf")
    stmt = one("l.data.at(idx) += 0x100;")
    assert stmt.op == "+=" and stmt.value.value == 256


def test_address_of_element():
    e = expr("&a.at(i)")
    assert isinstance(e, ast.Unary) and e.op == "&" and e.operand.method == "at"
