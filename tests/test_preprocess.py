"""Tests of the `.co` preprocessor: expansion, conditionals, includes, the
source map and error reporting."""
import glob

import pytest
from conftest import need_shared

from choreo_py.diagnostics import ChoreoError
from choreo_py.frontend.preprocessor import preprocess_file, preprocess_text
from choreo_py.source import SOURCES, Loc


def pp(text, **kw):
    return preprocess_text(text, name="t.co", **kw)


def out(text, **kw):
    """Expanded text with blank lines dropped and lines stripped."""
    return [ln.strip() for ln in pp(text, **kw).text.splitlines() if ln.strip()]


def where(unit, needle, nth=0):
    """(line, col) that the nth occurrence of `needle` in the output maps to."""
    i = -1
    for _ in range(nth + 1):
        i = unit.text.index(needle, i + 1)
    loc = unit.loc(i)
    return loc.line, loc.col


def error_of(text, **kw):
    with pytest.raises(ChoreoError) as info:
        pp(text, **kw)
    return info.value


# ----------------------------------------------------------------- macros --
def test_object_macros_and_redefinition():
    assert out("#define M 128\n#define N M * 2\nf32 [M, N] a;\n#define M 64\nM N\n") == [
        "f32 [128, 128 * 2] a;", "64 64 * 2"]


def test_undef():
    assert out("#define A 1\nA\n#undef A\nA\n") == ["1", "A"]


def test_function_macros_nested():
    src = ("#define ADD(a, b) (a + b)\n#define NESTED_ADD(a, b) ADD(ADD(a, b), b)\n"
           "x = NESTED_ADD(a.at(i), 1.0f);\n")
    assert out(src) == ["x = ((a.at(i) + 1.0f) + 1.0f);"]


def test_function_macro_name_without_parens_is_not_expanded():
    assert out("#define F(x) [x]\nint F; F (1)\n") == ["int F; [1]"]


def test_macro_arguments_span_lines():
    assert out("#define F(a, b) a+b\nF(1,\n  2) tail\n") == ["1+2 tail"]


def test_stringify_and_paste():
    src = ('#define S(x) #x\n#define CAT(a, b) a##b\n#define T(type) t_##type = #type\n'
           'S(a  "q\\n"  b) CAT(x, 1) CAT(, y) T(f32)\n')
    assert out(src) == ['"a \\"q\\\\n\\" b" x1 y t_f32 = "f32"']


def test_variadic():
    src = ("#define P(fmt, ...) pr(fmt, __VA_ARGS__)\n#define Q(fmt, ...) pr(fmt, ## __VA_ARGS__)\n"
           "#define N(args...) g(args)\n#define S(...) #__VA_ARGS__\n"
           'P("a", 1, 2) Q("b") Q("c", 3) N(1, 2) S(x, y)\n')
    assert out(src) == ['pr("a", 1, 2) pr("b") pr("c", 3) g(1, 2) "x, y"']


def test_self_reference_is_not_reexpanded():
    src = ("#define foo foo + 1\n#define A B\n#define B A\n#define f(x) x g\n#define g f\n"
           "foo A B f(1)(2)\n")
    assert out(src) == ["foo + 1 A B 1 f(2)"]


def test_expansion_does_not_paste_onto_neighbours():
    assert out("#define NEG -1\n#define E\n-NEG -E-\n") == ["- -1 - -"]


def test_macros_expand_in_host_code_not_in_literals_or_comments():
    src = '#define K 14\nint main() { printf("K %d", K); } // K\nR"(K)" K \'K\'\n'
    assert out(src) == ['int main() { printf("K %d", 14); }', 'R"(K)" 14 \'K\'']


def test_choreo_hash_operator_is_not_a_directive():
    src = "#define LEN 8\n#define F(i) [LEN/#p + #i]\nlocal f32 [LEN/#p,\n  #q] x; F(j)\n"
    assert out(src) == ["local f32 [8/#p,", '#q] x; [8/#p + "j"]']


def test_command_line_defines():
    unit = pp("#ifdef FLAG\nA B\n#endif\n", defines={"FLAG": "1", "A": "2", "B": ""})
    assert unit.text.split() == ["2"]
    assert unit.defines["A"].body == "2" and unit.defines["A"].params is None


def test_defines_table_and_builtins():
    unit = pp('#define F(x, y) x + y\nint l = __LINE__; const char *f = __FILE__;\n')
    m = unit.defines["F"]
    assert (m.params, m.body, m.loc) == (["x", "y"], "x + y", Loc("t.co", 1, 9))
    assert 'int l = 2; const char *f = "t.co";' in unit.text


def test_push_and_pop_macro():
    src = ('#define M 1\n#pragma push_macro("M")\n#undef M\n#define M 2\nM\n'
           '#pragma pop_macro("M")\nM\n#pragma croq intrinsic prefix f_\n')
    assert out(src) == ["2", "1", "#pragma croq intrinsic prefix f_"]


# ----------------------------------------------------------- conditionals --
def test_if_elif_else_chain():
    src = ("#define TILE 128\n"
           "#if TILE == 64\na\n#elif TILE > 100 && defined(TILE)\nb\n#elif 1\nc\n#else\nd\n#endif\n"
           "#if !defined TILE\ne\n#else\nf\n#endif\n")
    assert out(src) == ["b", "f"]


def test_ifdef_ifndef_nested():
    src = ("#define A\n#ifdef A\n#ifndef B\nx\n#else\ny\n#endif\n#ifdef B\nz\n#endif\n#else\nw\n#endif\n")
    assert out(src) == ["x"]


def test_if_expressions():
    src = ("#if (-7 / 2 == -3) && (-7 % 2 == -1) && (1 ? 2 : 3) == 2 && 0x10 == 16 && 010 == 8\n"
           "#if 'a' == 97 && (1 << 3) == 8 && UNKNOWN == 0 && ~0 == -1 && (2, 3) == 3 && 10ULL == 10\n"
           "ok\n#endif\n#endif\n")
    assert out(src) == ["ok"]


def test_unevaluated_operands_do_not_fail():
    src = "#if 0 && 1 / 0\na\n#elif 1 || 1 / 0\nb\n#elif 1 / 0\nc\n#endif\n#if 0\n#if garbage (\n#endif\n#endif\n"
    assert out(src) == ["b"]


def test_skipped_block_keeps_line_structure():
    unit = pp("#if 0\nskipped 'text\n#define X 1\n#endif\nafter\n")
    assert unit.text == "\n\n\n\nafter\n"
    assert where(unit, "after") == (5, 1)


# --------------------------------------------------------------- includes --
def test_include_relative_and_include_dir(tmp_path):
    (tmp_path / "inc").mkdir()
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "a.h").write_text('#define FROM_A 1\n#include "b.h"\n')
    (tmp_path / "inc" / "b.h").write_text("int b = FROM_A;\n")
    main = tmp_path / "main.co"
    main.write_text('#include "sub/a.h"\nint m = FROM_A;\n')
    unit = preprocess_file(main, include_dirs=[tmp_path / "inc"])
    assert [ln for ln in unit.text.splitlines() if ln.strip()] == ["int b = 1;", "int m = 1;"]
    loc = unit.loc(unit.text.index("int b"))
    assert (loc.file, loc.line, loc.col) == (str(tmp_path / "inc" / "b.h"), 1, 1)
    assert SOURCES.line(loc) == "int b = FROM_A;"
    assert unit.loc(unit.text.index("1;")) == Loc(str(tmp_path / "inc" / "b.h"), 1, 9)
    assert unit.loc(unit.text.index("int m")) == Loc(str(main), 2, 1)


def test_missing_and_system_includes_are_kept_verbatim():
    src = '#include <cuda.h>\n  #include "../fa_helper.hpp"  // helper\nint main() {}\n'
    unit = pp(src)
    assert unit.text.splitlines()[:2] == ["#include <cuda.h>", '  #include "../fa_helper.hpp"           ']
    assert where(unit, "#include \"../") == (2, 3)


def test_pragma_once_and_guards(tmp_path):
    (tmp_path / "once.h").write_text("#pragma once\nonce;\n")
    (tmp_path / "guard.h").write_text("#ifndef G\n#define G\nguard;\n#endif\n")
    main = tmp_path / "m.co"
    main.write_text('#include "once.h"\n#include "once.h"\n#include "guard.h"\n#include "guard.h"\n')
    assert preprocess_file(main).text.split() == ["once;", "guard;"]


def test_computed_include(tmp_path):
    (tmp_path / "c.h").write_text("computed\n")
    main = tmp_path / "m.co"
    main.write_text('#define HDR "c.h"\n#include HDR\n')
    assert preprocess_file(main).text.split() == ["computed"]


def test_recursive_include_is_an_error(tmp_path):
    (tmp_path / "self.h").write_text('#include "self.h"\n')
    main = tmp_path / "m.co"
    main.write_text('\n#include "self.h"\n')
    with pytest.raises(ChoreoError) as info:
        preprocess_file(main)
    assert "nested" in info.value.message
    assert info.value.loc.file.endswith("self.h") and info.value.loc.line == 1


def test_unterminated_if_in_include_points_into_it(tmp_path):
    (tmp_path / "bad.h").write_text("x\n  #ifdef Y\n")
    main = tmp_path / "m.co"
    main.write_text('#include "bad.h"\n#endif\n')
    with pytest.raises(ChoreoError) as info:
        preprocess_file(main)
    assert info.value.message == "unterminated #ifdef"
    assert info.value.loc == Loc(str(tmp_path / "bad.h"), 2, 3)


# ------------------------------------------------------------- source map --
def test_copied_text_maps_to_itself():
    src = "a b\n  #define X 1\n\tfoo(X) bar\n"
    unit = pp(src)
    assert where(unit, "foo") == (3, 2)
    assert where(unit, "bar") == (3, 9)
    assert unit.loc(len(unit.text)) == Loc("t.co", 4, 1)


def test_expansion_maps_to_invocation():
    unit = pp("#define ADD(a, b) (a + b)\n#define TWO 2\nx = ADD(y,\n   TWO) + z;\n")
    assert unit.text.splitlines()[2] == "x = (y + 2) + z;"
    assert where(unit, "(y") == (3, 5)
    assert where(unit, "2)") == (3, 5)       # every character of the expansion
    assert where(unit, "+ z") == (4, 9)      # source text after the invocation


def test_map_after_multiline_comment_and_continuation():
    src = "/* one\n   two */ int a;\nint \\\n  b; int c;\nint d;\n"
    unit = pp(src)
    assert unit.text.splitlines() == ["      ", "          int a;", "int   b; int c;", "", "int d;"]
    assert where(unit, "int a") == (2, 11)
    assert where(unit, "b;") == (4, 3)
    assert where(unit, "int c") == (4, 6)
    assert where(unit, "int d") == (5, 1)


def test_comment_spanning_lines_inside_a_directive():
    unit = pp("#define F(a) ( /* x\n */ a )\nF(1) end\n")
    assert unit.text.split() == ["(", "1", ")", "end"]
    assert where(unit, "end") == (3, 6)


def test_line_directive_renames_lines():
    unit = pp('a\n#line 100 "gen.co"\nb\nc\n')
    assert unit.loc(unit.text.index("b")) == Loc("gen.co", 100, 1)
    assert unit.loc(unit.text.index("c")) == Loc("gen.co", 101, 1)
    assert unit.loc(unit.text.index("a")) == Loc("t.co", 1, 1)


def test_every_corpus_character_maps_back():
    corpus = need_shared("corpus", "tests")
    files = sorted(glob.glob(f"{corpus}/**/*.co", recursive=True))[:60]
    for path in files:
        unit = preprocess_file(path)
        for i, ch in enumerate(unit.text):
            loc = unit.loc(i)
            line = SOURCES.line(loc) or ""
            src = line[loc.col - 1] if loc.col <= len(line) else "\n"
            assert ch in (src, " ", "\n") or src.isalpha() or src == "_", (path, i, loc)


# ----------------------------------------------------------------- errors --
@pytest.mark.parametrize("src, message, line, col", [
    ("a\n#if 1\nb\n", "unterminated #if", 2, 1),
    ("  #else\n", "#else without #if", 1, 3),
    ("#endif\n", "#endif without #if", 1, 1),
    ("#if 1\n#else\n#else\n#endif\n", "#else after #else", 3, 1),
    ("#if 1\n#else\n#elif 1\n#endif\n", "#elif after #else", 3, 1),
    ("#define\n", "#define expects a macro name", 1, 1),
    ("#define 3 x\n", "#define expects a macro name", 1, 9),
    ("#define F(a, a) a\n", "duplicate macro parameter 'a'", 1, 14),
    ("#define F(a b) a\n", "expected ',' or ')' in macro parameter list", 1, 13),
    ("#define F(a, ) a\n", "invalid macro parameter ')'", 1, 14),
    ("#define F(a\n", "missing ')' in macro parameter list", 1, 11),
    ("#define F(a) ## a\n", "'##' cannot appear at either end of a macro expansion", 1, 14),
    ("#if 1 +\n#endif\n", "missing value in #if expression", 1, 1),
    ("\n# if 2 3\n#endif\n", "missing binary operator before '3' in #if expression", 2, 8),
    ("#if 1 / 0\n#endif\n", "division by zero in #if expression", 1, 7),
    ("#if (1\n#endif\n", "expected ')' in #if expression", 1, 1),
    ("#if 1.5\n#endif\n", "invalid token '1.5' in #if expression", 1, 5),
    ("#if\n#endif\n", "#if with no expression", 1, 1),
    ("#if defined(\n#endif\n", "operator 'defined' requires an identifier", 1, 12),
    ("ok\n  #error stop here\n", "#error stop here", 2, 3),
    ("int a; /* open\n", "unterminated comment", 1, 8),
    ('x = "abc;\n', 'missing terminating " character', 1, 5),
    ("#define F(x) x\nF(1,\n", "unterminated argument list invoking macro 'F'", 2, 1),
    ("#define F(x) x\n  F(1, 2)\n", "macro 'F' takes 1 argument, but 2 given", 2, 3),
    ("#define C(a, b) a ## b\nC(+, /)\n", 'pasting "+" and "/" does not give a valid preprocessing token', 2, 1),
    ("#include nothing\n", '#include expects "FILENAME" or <FILENAME>', 1, 1),
])
def test_errors(src, message, line, col):
    err = error_of(src)
    assert err.message == message
    assert (err.loc.file, err.loc.line, err.loc.col) == ("t.co", line, col)
    assert err.render()  # renders with the quoted line, never raises


def test_warning_is_collected():
    unit = pp("#warning careful now\nx\n")
    assert [(w.message, w.loc) for w in unit.warnings] == [("#warning careful now", Loc("t.co", 1, 1))]


def test_deep_nesting_is_an_error_not_a_crash():
    err = error_of("#define F(x) x\n" + "F(" * 5000 + "1" + ")" * 5000 + "\n")
    assert "nested too deeply" in err.message


def test_deterministic():
    src = "#define F(x) #x x##1\nF(a) F(b)\n"
    assert pp(src).text == pp(src).text


def test_corpus_and_seed_preprocess_without_error():
    files = glob.glob(f"{need_shared('corpus', 'tests')}/**/*.co", recursive=True)
    seed = str(need_shared("seeds", "flash_atten_causal.co"))
    for path in files + [seed]:
        preprocess_file(path)
    text = preprocess_file(seed).text
    assert '#include "../fa_helper.hpp"' in text and "#define" not in text
    assert "parallel" in text and "BLOCK_M" not in text
