"""A Pygments lexer for Choreo (`.co` files), so that the guide's ```choreo code
blocks, and any tool that uses Pygments, highlight Choreo.

Registered by the `pygments.lexers` entry point in pyproject.toml (name
`choreo`, aliases `co`, file pattern `*.co`). The words are the grammar's
(grammar/choreo.lark): keywords, storage and parallel levels, element
types, the asynchronous engines (`tma.`, `dma.`, `mma.`) with their
modifiers, and the preprocessor lines the front end reads.
"""
from __future__ import annotations

from pygments.lexer import RegexLexer, bygroups, words
from pygments.token import (Comment, Keyword, Name, Number, Operator, Punctuation, String,
                            Text, Whitespace)

KEYWORDS = ("parallel", "by", "inthreads", "foreach", "in", "apply", "if", "else", "while",
            "return", "break", "continue", "wait", "trigger", "after", "with", "where", "call",
            "mutable", "yield", "swap", "rotate", "remap", "map", "sync", "volatile")
STORAGE = ("global", "shared", "local", "event", "frag", "mdspan", "ituple", "stream")
LEVELS = ("block", "group-4", "group", "thread", "device", "cluster")
TYPES = ("f64", "tf32", "f32", "f16", "bf16", "f8", "f8_e4m3", "f8_e5m2", "f8_ue4m3",
         "f8_ue8m0", "f6_e2m3", "f6_e3m2", "f4_e2m1", "bin1", "u1", "u2", "s2", "u4", "s4",
         "u6", "s6", "u8", "s8", "u16", "s16", "u32", "s32", "u64", "s64", "int", "bool",
         "half", "bfp16", "float", "double", "void", "auto")
CONSTANTS = ("true", "false", "inf", "nullptr", "ready")


class ChoreoLexer(RegexLexer):
    name = "Choreo"
    aliases = ["choreo", "co"]
    filenames = ["*.co"]
    mimetypes = ["text/x-choreo"]

    tokens = {
        "root": [
            (r"\s+", Whitespace),
            (r"//.*?$", Comment.Single),
            (r"/\*", Comment.Multiline, "comment"),
            (r"^\s*#\s*(define|undef|include|if|ifdef|ifndef|elif|else|endif|error|warning|"
             r"pragma|line)\b.*?$", Comment.Preproc),
            (r"\[\[.*?\]\]", Name.Decorator),
            (r"(__co__|__device__|__global__|__cpp__|__asm__)\b", Keyword.Reserved),
            (r"(parallel)(\.async)?\b", bygroups(Keyword, Keyword.Pseudo)),
            (r"(inthreads)(\.async)?\b", bygroups(Keyword, Keyword.Pseudo)),
            (r"\b(tma|dma|mma)((?:\.[A-Za-z_][A-Za-z_0-9]*)+)",
             bygroups(Name.Builtin, Name.Builtin.Pseudo)),
            (r"(:)(\s*)(" + "|".join(LEVELS) + r")\b", bygroups(Punctuation, Whitespace,
                                                              Keyword.Type)),
            (words(KEYWORDS, suffix=r"\b"), Keyword),
            (words(STORAGE, suffix=r"\b"), Keyword.Declaration),
            (words(TYPES, suffix=r"\b"), Keyword.Type),
            (words(CONSTANTS, suffix=r"\b"), Keyword.Constant),
            (r"\b(cdiv|__max|__min|__exp2f|__expf|__to|__bar_sync|__bar_arrive|"
             r"reduce_max|reduce_sum|reduce_min|all_reduce_max|all_reduce_sum|"
             r"all_reduce_min)\b", Name.Builtin),
            (r"(croq)(::)([A-Za-z_:]+)", bygroups(Name.Namespace, Operator, Name.Function)),
            (r"\.(at|subspan|chunkat|span|span_as|step|modspan|data)\b", Name.Attribute),
            (r"\d+\.\d*([eE][+-]?\d+)?f?|\.\d+([eE][+-]?\d+)?f?|\d+[eE][+-]?\d+f?", Number.Float),
            (r"0[xX][0-9a-fA-F]+[uUlL]*|\d+[uUlL]*", Number.Integer),
            (r'"(\\\\|\\"|[^"])*"', String),
            (r"=>|\+\+|--|[-+*/%=<>!&|^~?]=?|#", Operator),
            (r"[{}()\[\];,.:]", Punctuation),
            (r"[A-Za-z_][A-Za-z_0-9]*", Name),
            (r".", Text),
        ],
        "comment": [
            (r"[^*/]+", Comment.Multiline),
            (r"\*/", Comment.Multiline, "#pop"),
            (r"[*/]", Comment.Multiline),
        ],
    }
