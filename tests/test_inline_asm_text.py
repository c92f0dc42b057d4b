"""An `__asm__` template that is not PTX is refused by `check` at the asm statement, by
name: `__asm__("nop;")` reached ptxas, which rejected the module (PTX has no `nop`), with
no location in the .co file. Templates that are PTX (labels, guards, braces, directives of
a function body, comments) pass and are pasted; ptxas assembles them.
"""
from __future__ import annotations

import pytest

from choreo_py import cli
from choreo_py.ir import ptx_words
from choreo_py.runtime.build import find_ptxas

KERNEL = """\
__co__ s32 [32] k(s32 [32] a, s32 v) {{
  s32 [32] out;
  parallel p by 1 : block
    parallel q by 32 : thread {{
      mutable s32 x = a.at(q);
      __asm__({template} : "+r"(x) : "r"(v));
      out.at(q) = x;
    }}
  return out;
}}
"""

REFUSED = {
    '"nop;"': "'nop' is not a PTX instruction (in 'nop')",
    '"add.s32 %0, %0, %1; nop;"': "'nop' is not a PTX instruction (in 'nop')",
    '"x = x + 1;"': "'x' is not a PTX instruction (in 'x = x + 1')",
    '"addd.s32 %0, %0, %1;"': "'addd' is not a PTX instruction",
    '"1234;"': "'1234' is not a PTX statement (an instruction or a directive)",
    '".version 8.5; add.s32 %0, %0, %1;"': "'.version' is not a directive of a function body",
    '"add.s32 %0, %0, %1"': "'add.s32 %0, %0, %1' does not end with ';'",
}

ACCEPTED = [
    '"add.s32 %0, %0, %1;"',
    '"{ .reg .pred %%p; setp.lt.s32 %%p, %0, 0; @%%p neg.s32 %0, %0; }"',
    '"{ .reg .u32 %%t; mov.u32 %%t, %%laneid; add.u32 %0, %0, %%t; }"',
    '"// a comment\\n\\tadd.s32 %0, %0, %1; /* another */"',
    '"{ .reg .pred %%p; setp.eq.s32 %%p, %1, 0; @!%%p bra DONE; add.s32 %0, %0, 1; DONE: }"',
]


def _write(tmp_path, template: str):
    path = tmp_path / "asm.co"
    path.write_text(KERNEL.format(template=template))
    return path


@pytest.mark.parametrize("template", list(REFUSED), ids=list(REFUSED))
@pytest.mark.parametrize("argv", [["check"], ["compile", "--target", "sm_90a", "-o", "-"],
                                  ["compile", "--target", "sm_100a", "-o", "-"]])
def test_text_that_is_not_ptx_is_refused_at_the_statement(tmp_path, capsys, template, argv):
    path = _write(tmp_path, template)
    assert cli.main([argv[0], str(path), *argv[1:]]) == 1
    err = capsys.readouterr().err
    head = (f"asm.co:6:7: error: the __asm__ template is not PTX statements (each PTX "
            f"instruction ends with ';'): {REFUSED[template]}")
    assert head in err, err
    assert "__asm__(" in err and "      ^" in err and "ptxas" not in err and "Traceback" not in err
    assert err.count("error:") == 1, err


@pytest.mark.parametrize("template", ACCEPTED)
def test_ptx_statements_pass_and_assemble(tmp_path, capsys, template):
    assert ptx_words.problem(eval(template)) is None
    path = _write(tmp_path, template)
    assert cli.main(["check", str(path)]) == 0, capsys.readouterr().err
    if find_ptxas() is None:
        pytest.skip("ptxas (CUDA 12.8+) is not on PATH")
    for target in ("sm_90a", "sm_100a"):
        out = tmp_path / f"{target}.cubin"
        rc = cli.main(["compile", str(path), "--target", target, "--emit", "cubin",
                       "-o", str(out)])
        assert rc == 0, capsys.readouterr().err


def test_every_opcode_the_backends_emit_is_a_ptx_instruction(tmp_path):
    """The table is not narrower than PTX as this compiler writes it: each instruction of
    a kernel it compiles (math sequences, barriers, conversions) starts with a word of it."""
    import re

    from choreo_py.driver import compile_file

    src = tmp_path / "m.co"
    src.write_text("__co__ f32 [64] k(f32 [64] a) {\n  f32 [64] o;\n  parallel p by 1 : block\n"
                   "    parallel q by 64 : thread {\n      x = a.at(q);\n"
                   "      o.at(q) = __gelu(x) + __atan2(x, 2.0f) + __pow(x, 3.0f) + __round(x);\n"
                   "    }\n  return o;\n}\n")
    for target in ("sm_90a", "sm_100a"):
        ptx = compile_file(str(src), "ptx", target)
        body = ptx[ptx.index("{"):]
        words = set(re.findall(r"^\s*(?:@!?%\w+\s+)?([a-z][a-z0-9_]*)[.\s;]", body, re.M))
        assert words and words <= ptx_words.OPCODES, words - ptx_words.OPCODES
