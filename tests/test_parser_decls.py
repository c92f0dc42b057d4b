"""Buffers, fragments, events and scalars."""
from choreo_py.frontend import ast

from parser_util import body, error


def test_shared_buffer_array():
    (d,) = body("shared bf16[BLOCK_N, 128] k_buf[K_STAGES];")
    assert isinstance(d, ast.BufferDecl) and d.storage == "shared" and d.name == "k_buf"
    assert d.type.elem.name == "bf16" and d.type.rank == 2
    assert [a.id for a in d.array_dims] == ["K_STAGES"]


def test_several_buffers_in_one_declaration():
    decls = body("local f32 [i_shared.span / t] a, b[2], c {0};")
    assert [d.name for d in decls] == ["a", "b", "c"]
    assert all(d.type is decls[0].type for d in decls)
    assert decls[1].array_dims[0].value == 2 and decls[2].init.value == 0
    assert decls[0].type.rank is None      # one entry: may be a whole shape


def test_buffer_without_storage():
    (d,) = body("s32 [0x10, 0x100] g;")
    assert d.storage is None and [x.value for x in d.type.dims] == [16, 256]


def test_typed_fragments_with_initialisers():
    a, b = body("frag f32[WG_M] scores_max {-inf};\nfrag bf16[64, 128] cast;")
    assert isinstance(a, ast.FragDecl) and a.type.elem.name == "f32"
    assert a.init.op == "-"
    assert b.init is None and b.type.rank == 2


def test_accumulator_fragments():
    a, b = body("frag acc {0};\nfrag.f32 acc2[2] {0.0f};")
    assert a.type is None and a.elem is None and a.init.value == 0
    assert b.elem.name == "f32" and b.array_dims[0].value == 2


def test_events():
    decls = body("shared event qf;\nshared event kf[2], vf[2];\n"
                 "shared event ke[2] = ready, ve[2] = ready;\nevent a;")
    assert [(d.name, d.storage, d.ready) for d in decls] == [
        ("qf", "shared", False), ("kf", "shared", False), ("vf", "shared", False),
        ("ke", "shared", True), ("ve", "shared", True), ("a", None, False)]


def test_event_initializer_must_be_ready():
    d = error("__co__ void f() {\n  shared event e = done;\n}\n")
    assert d.message == "event initializer must be 'ready'" and d.loc.col == 20


def test_scalars():
    a, b, c, d = body("int c = 1;\nmutable u32 k = 0;\nmutable n = 3;\nf32 v {2.0f};")
    assert isinstance(a, ast.ScalarDecl) and a.type.name == "s32" and not a.mutable
    assert b.mutable and b.type.name == "u32" and b.init.value == 0
    assert c.type is None and c.mutable
    assert d.init.value == 2.0


def test_scalar_decl_expands_to_one_node_per_name():
    decls = body("mutable u32 k = 0, j;")
    assert [d.name for d in decls] == ["k", "j"] and decls[1].init is None


def test_mutable_buffer_is_rejected():
    d = error("__co__ void f() {\n  mutable f32 [1, 2] c;\n}\n")
    assert d.loc.line == 2 and "got '['" in d.message


def test_compound_assignments():
    ops = [s.op for s in body("a += 3; a -= 4; a *= 5; a /= 6; a %= 7;")]
    assert ops == ["+=", "-=", "*=", "/=", "%="]
