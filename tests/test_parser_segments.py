"""Splitting a file into Choreo functions, device code and host code."""
from choreo_py.frontend import segments

from parser_util import case, error, program


def _split(text):
    return segments.split(text, lambda off: off)


def test_mixed_file_items():
    items = program(case("mixed_segments.co")).items
    kinds = [(type(i).__name__, getattr(i, "kind", "")) for i in items]
    assert kinds == [("HostCode", ""), ("DeviceCode", "cok"), ("DeviceCode", "device"),
                     ("DeviceCode", "device"), ("FunctionDef", ""), ("HostCode", "")]


def test_cok_block_keeps_its_inside_only():
    dev = program(case("mixed_segments.co")).items[1]
    assert dev.text.strip().startswith("template <int N>")
    assert 'printf("}")' in dev.text          # a brace in a string does not close the block
    assert (dev.loc.line, dev.loc.col) == (5, 1)


def test_device_function_and_declaration():
    items = program(case("mixed_segments.co")).items
    assert items[2].text.endswith("return v * 2.0f; }")
    assert items[3].text == "__co_device__ int declared_only(int);"


def test_marker_inside_host_string_is_host_code():
    host = program(case("mixed_segments.co")).items[-1]
    assert "not_a_function" in host.text and "int main()" in host.text


def test_brace_in_string_inside_choreo_function():
    fn = program(case("mixed_segments.co")).functions[0]
    (stmt,) = fn.body.stmts
    assert stmt.expr.args[1].value == "a brace } in a string"


def test_marker_must_be_a_whole_word():
    segs = _split("int my__co__x = 1; __co__ void f() {}")
    assert [s.kind for s in segs] == ["host", "choreo"]
    assert segs[1].text == "__co__ void f() {}"


def test_segment_offsets():
    text = "int a;\n__co__ void f() { x = 1; }\nint b;\n"
    segs = _split(text)
    co = segs[1]
    assert text[co.start:co.start + len(co.text)] == co.text


def test_host_code_is_never_parsed():
    prog = program("template <typename T> struct X { T v[3] = {1, 2, 3}; };\n"
                   "__co__ void f() {}\nint main() { return X<int>{}.v[0] @ 1; }\n")
    assert len(prog.functions) == 1


def test_unclosed_cok_block():
    d = error("__cok__ { void k() {}\n", check=False)
    assert "missing '}'" in d.message


def test_cok_without_block():
    d = error("__cok__ int x;\n", check=False)
    assert d.message == "expected '{' after '__cok__'"


def test_unclosed_device_function():
    d = error("__device__ void f() {\n", check=False)
    assert "missing '}'" in d.message and (d.loc.line, d.loc.col) == (1, 1)
