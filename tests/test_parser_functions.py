"""Function headers: return types, parameters, element and shaped types."""
from choreo_py.frontend import ast

from parser_util import case, function, program


def test_signatures_case_parses():
    fns = {f.name: f for f in program(case("signatures.co")).functions}
    assert list(fns) == ["plain", "scalar_ret", "shaped_ret", "ranked", "open_dims",
                         "symbolic", "aliases"]


def test_void_and_auto_returns():
    fns = program(case("signatures.co")).functions
    assert fns[0].return_type.name == "void"
    assert fns[4].return_type.name == "auto"


def test_scalar_params_use_canonical_names():
    fn = function("__co__ int f(int a, bool b) { return a; }")
    assert [(p.name, p.type.name, p.type.spelling) for p in fn.params] == [
        ("a", "s32", "int"), ("b", "bool", "bool")]
    assert fn.return_type.name == "s32"


def test_type_aliases():
    fn = program(case("signatures.co")).functions[-1]
    assert [p.type.name for p in fn.params] == ["f16", "bf16", "f32", "f64", "f8_e4m3"]


def test_shaped_param_with_symbolic_dims():
    fn = function("__co__ void f(global bf16[B, Q_SEQ, H, 128] q) {}")
    (p,) = fn.params
    assert p.storage == "global" and p.name == "q"
    assert isinstance(p.type, ast.MdSpanType)
    assert p.type.elem.name == "bf16" and p.type.rank == 4
    dims = p.type.dims
    assert [d.id for d in dims[:3]] == ["B", "Q_SEQ", "H"]
    assert isinstance(dims[3], ast.IntLit) and dims[3].value == 128


def test_ranked_mdspan_types():
    fn = function("__co__ bf16 mdspan<2> f(f32 mdspan<3> d, f32 mdspan[11, 1025] e) {}")
    assert fn.return_type.rank == 2 and fn.return_type.dims is None
    assert fn.params[0].type.rank == 3
    assert fn.params[1].type.rank == 2 and len(fn.params[1].type.dims) == 2


def test_open_dimensions():
    fn = function("__co__ void f(f32 [?, 4] a, s32 [??] b) {}")
    assert isinstance(fn.params[0].type.dims[0], ast.DimWildcard)
    assert fn.params[0].type.dims[0].kind == "?"
    assert fn.params[1].type.dims[0].kind == "??"


def test_unnamed_stream_and_reference_params():
    fn = function("__co__ void f(stream s, f32 [M] & out, int) {}")
    s, out, anon = fn.params
    assert s.type.name == "stream"
    assert out.by_ref and out.name == "out"
    assert anon.name is None


def test_function_location_points_at_marker():
    fn = function("\n\n  __co__ void f() {}\n")
    assert (fn.loc.line, fn.loc.col) == (3, 3)
    assert fn.name == "f"


def test_several_functions_in_order():
    prog = program("__co__ void a() {}\n__co__ void b() {}\nint main() {}\n")
    assert [f.name for f in prog.functions] == ["a", "b"]
    assert isinstance(prog.items[-1], ast.HostCode)
