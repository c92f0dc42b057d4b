"""Literals, operators, builtin calls, casts, device calls, events, asm."""
import pytest

from choreo_py.frontend import ast

from parser_util import body, checked, error, expr, one


@pytest.mark.parametrize("text, value, suffix", [
    ("0", 0, ""), ("42u", 42, "u"), ("7ll", 7, "ll"), ("0x1ffULL", 0x1FF, "ull"),
    ("18446744073709551615ULL", (1 << 64) - 1, "ull"), ("12345678910", 12345678910, ""),
])
def test_integer_literals(text, value, suffix):
    e = expr(text)
    assert isinstance(e, ast.IntLit) and (e.value, e.suffix, e.text) == (value, suffix, text)


@pytest.mark.parametrize("text, value, suffix", [
    ("0.0f", 0.0, "f"), ("75.0", 75.0, ""), ("1e-3", 1e-3, ""), ("2.5e2f", 250.0, "f"),
    ("0.12751743f", 0.12751743, "f"),
])
def test_float_literals(text, value, suffix):
    e = expr(text)
    assert isinstance(e, ast.FloatLit) and e.value == pytest.approx(value) and e.suffix == suffix


def test_other_literals():
    assert expr("true").value is True and expr("false").value is False
    assert expr("-inf").operand.value == float("inf")
    assert expr('"a" "b\\n"').value == "ab\n"


def test_precedence_follows_the_reference():
    e = expr("a + b * c - d")
    assert e.op == "-" and e.lhs.op == "+" and e.lhs.rhs.op == "*"
    e = expr("a || b && c == d < e")
    assert e.op == "||" and e.rhs.op == "&&" and e.rhs.rhs.op == "==" and e.rhs.rhs.rhs.op == "<"
    e = expr("(c < d) ? c : d")
    assert isinstance(e, ast.Ternary) and e.cond.parenthesized
    e = expr("N % #p")
    assert isinstance(e.rhs, ast.UBound) and e.rhs.name == "p"


def test_increment_forms():
    e = expr("k++")
    assert e.op == "post++"
    stmt = one("trigger kf.at(k_pipe_order++) after k_load;")
    assert stmt.targets[0].args[0].op == "post++" and stmt.after[0].id == "k_load"


def test_builtin_calls():
    e = expr("__exp2f(a * 0.5f - b)")
    assert isinstance(e, ast.CallExpr) and e.func == "__exp2f"
    assert expr("cdiv(Q_SEQ, 128)").func == "cdiv"
    a, b, c, d = body("reduce_max(m, acc, 1);\nall_reduce_sum(s);\ncopy(a, b);\n"
                      "__atomic_add(s.at(p), 1);")
    assert [s.expr.func for s in (a, b, c, d)] == ["reduce_max", "all_reduce_sum", "copy",
                                                   "__atomic_add"]


def test_casts():
    e = expr("__to<f16>(acc.at(i, j))")
    assert isinstance(e, ast.Cast) and e.target.name == "f16" and e.foreign is None
    e = expr("__to(acc.at(i, j))")
    assert e.target is None and e.foreign is None       # the destination's type
    e = expr('__to<"float4">(x)')
    assert e.foreign == "float4"


def test_device_calls():
    stmt = one("call croq::cuda::setreg_dec(40);")
    call = stmt.expr
    assert isinstance(call, ast.Call) and call.func == "croq::cuda::setreg_dec"
    stmt = one("mutable float b = call wow<3, 1 + 7>(a, b);")
    assert isinstance(stmt.init, ast.Call) and len(stmt.init.template_args) == 2
    stmt = one("call hello<#p, f32>(nullptr);")
    assert isinstance(stmt.expr.template_args[1], ast.TypeRef)
    assert isinstance(stmt.expr.args[0], ast.NullPtr)


def test_wait_trigger_swap_sync():
    w, t, c, s1, s2, y = body("wait ke.at(k), vf;\ntrigger e;\ntrigger.cluster e[0];\n"
                              "swap(f0, f1);\nrotate a, b, c;\nsync.shared;")
    assert isinstance(w, ast.Wait) and len(w.targets) == 2
    assert t.scope is None and c.scope == "cluster"
    assert s1.names == ["f0", "f1"] and s2.rotate
    assert isinstance(y, ast.Sync) and y.kind == "shared"
    (b,) = body("sync.barrier : block;")
    assert b.kind == "barrier" and b.level == "block"


def test_asm_statement():
    stmt = one('asm volatile("mov %0, %1;" : "=r"(x) : "r"(y) : "memory");')
    assert isinstance(stmt, ast.AsmStmt) and stmt.volatile
    assert stmt.outputs[0].constraint == "=r" and stmt.inputs[0].expr.id == "y"
    assert stmt.clobbers == ["memory"]
    stmt = one('__asm__("bar.sync %0;" :: "r"(id));')
    assert stmt.outputs == [] and stmt.inputs[0].constraint == "r"


def test_intrinsics_by_pragma():
    prog = checked("__co__ void f() {\n#pragma croq intrinsic prefix my_\n"
                   "  my_fence(0);\n  x = my_load(3);\n}\n")
    d, s1, s2 = prog.functions[0].body.stmts
    assert isinstance(d, ast.IntrinsicDirective) and d.value == "my_"
    assert isinstance(s1.expr, ast.CallExpr) and s1.expr.func == "my_fence"
    assert isinstance(s2.value, ast.CallExpr)


def test_intrinsic_scope_ends_with_its_block():
    d = error("__co__ void f() {\n  parallel by 1 {\n#pragma croq intrinsic prefix in_\n"
              "    in_a(0);\n  }\n  in_b(0);\n}\n")
    assert d.loc.line == 6 and "'in_b' is neither a builtin" in d.message


def test_file_scope_intrinsic_namespace():
    prog = checked("#pragma croq intrinsic namespace lib\n"
                   "__co__ void f() { lib::init(); }\n")
    assert prog.functions[0].body.stmts[0].expr.func == "lib::init"


def test_removed_stage_syntax():
    d = error("__co__ void f() {\n  order = 0;\n  slot = stage<2>(order);\n}\n")
    assert d.loc.line == 3 and "stage<N>(x)" in d.message


def test_buffer_map_and_remap():
    a, b = body("m0 = src.map<local>(0, 32);\nm1 = src.remap<local>(32, |src.span|);")
    assert isinstance(a, ast.BufferMap) and a.target == "m0" and a.storage == "local"
    assert not a.remap and b.remap and isinstance(b.size, ast.SizeOf)


def test_intrinsic_with_template_arguments():
    prog = checked("#pragma croq intrinsic namespace my_lib\n__co__ void f(f16 [8] x) {\n"
                   "  my_lib::matmul<16, my_lib::MK_NK>(x.data, 1);\n}\n")
    call = prog.functions[0].body.stmts[0].expr
    assert call.func == "my_lib::matmul" and len(call.template_args) == 2
    assert (call.loc.line, call.loc.col) == (3, 3)


def test_increment_statements():
    a, b = body("++k;\nk--;")
    assert a.expr.op == "++" and b.expr.op == "post--"
