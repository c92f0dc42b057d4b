"""What an inline asm template may hold: PTX statements, each an instruction of the PTX ISA
or a directive a function body may hold, optionally labelled and guarded (`@%p`, `@!%p`).

`choreo check` reads each statement of a template against these words (the rule in
choreo_py/check/inline_asm.py), so that text that is not PTX (`__asm__("nop;")`: PTX has no
`nop`; a C statement; a typo'd opcode) is refused at the asm statement, by name, instead of
reaching ptxas, which rejected the whole module without a location in the .co file. The
operands and modifiers are left to ptxas, which names them in its own words.
"""
from __future__ import annotations

import re

#: The instructions of the PTX ISA (8.x), by their first word (`ld` of `ld.global.f32`),
#: in the ISA's chapters: integer, extended-precision, floating point, comparison and
#: selection, logic and shift, data movement and conversion, texture and surface, control
#: flow, parallel synchronisation, matrix multiply, video and miscellaneous.
OPCODES = frozenset("""
add sub mul mad mul24 mad24 sad div rem abs neg min max popc clz bfind fns brev bfe bfi
szext bmsk dp4a dp2a
addc subc madc
testp copysign fma rcp sqrt rsqrt sin cos lg2 ex2 tanh
set setp selp slct
and or xor not cnot lop3 shf shl shr
mov shfl prmt ld ldu st multimem prefetch prefetchu applypriority discard createpolicy
isspacep cvta cvt mapa getctarank cp tensormap ldmatrix stmatrix movmatrix
stacksave stackrestore alloca
tex tld4 txq istypep suld sust sured suq
bra brx call ret exit
bar barrier membar fence atom red vote match activemask redux griddepcontrol elect
mbarrier nanosleep setmaxnreg clusterlaunchcontrol
mma wmma wgmma tcgen05
vadd vsub vabsdiff vmin vmax vshl vshr vmad vset
vadd2 vsub2 vavrg2 vabsdiff2 vmin2 vmax2 vset2
vadd4 vsub4 vavrg4 vabsdiff4 vmin4 vmax4 vset4
trap brkpt pmevent
""".split())

#: Directives a function body may hold (its own registers and variables, a pragma, a
#: source location).
DIRECTIVES = frozenset({"reg", "local", "shared", "param", "pragma", "loc"})

_COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_LABEL = re.compile(r"^[$A-Za-z_][\w$]*\s*:(?!:)\s*")
_GUARD = re.compile(r"^@!?%*[\w$\[\]]+\s+")
_WORD = re.compile(r"^\.?[A-Za-z_$][\w$]*")


def statements(template: str) -> list[tuple[str, bool]]:
    """The template's statements, comments dropped: (text, whether a `;` ends it)."""
    out: list[tuple[str, bool]] = []
    cur = ""
    for piece in re.split(r"([{};])", _COMMENTS.sub(" ", template)):
        if piece == ";":
            out.append((cur.strip(), True))
            cur = ""
        elif piece in ("{", "}"):
            if cur.strip():
                out.append((cur.strip(), False))
            cur = ""
        else:
            cur += piece
    if cur.strip():
        out.append((cur.strip(), False))
    return out


def problem(template: str) -> str | None:
    """Why the template is not PTX statements (its first such statement), or None."""
    for text, ended in statements(template):
        body = text
        while _LABEL.match(body):
            body = _LABEL.sub("", body, count=1)
        if not body:
            continue              # a label alone
        body = _GUARD.sub("", body, count=1)
        word = _WORD.match(body)
        if word is None:
            return f"{text!r} is not a PTX statement (an instruction or a directive)"
        name = word.group(0)
        if name.startswith("."):
            if name[1:] not in DIRECTIVES:
                return (f"'{name}' is not a directive of a function body (one of "
                        f"{', '.join('.' + d for d in sorted(DIRECTIVES))})")
        elif name not in OPCODES:
            return f"'{name}' is not a PTX instruction (in {text!r})"
        if not ended:
            return f"{text!r} does not end with ';' (each PTX statement does)"
    return None
