"""A C-like preprocessor for `.co` files, with a source map back to the files read.

Each file is spliced (backslash-newlines removed) and its comments blanked
(same length, so offsets survive); then its lines are walked: directives are
executed, other active lines macro-expanded. The output is assembled from
pieces; a piece maps either a run of characters to consecutive original
characters (copied text) or all its characters to one point: a macro expansion
maps to the first character of its outermost invocation (clang's "expansion
location").

Choices that differ from, or add to, a plain C preprocessor:
* `#include <...>`, and `#include "..."` of a file that cannot be found, are
  kept verbatim: they belong to host code that a C++ compiler sees later.
  A missing quoted include that may hold Choreo code (not a host header:
  "choreo.h", CUDA's, or a name not ending in .h/.co/.coh such as .hpp or
  .inc) is also noted as a possible cause (diagnostics.possible_cause): when
  the program has errors, the command line reports it first, at its line,
  as the likely cause of an "'BN' is not declared" further down.
* `#pragma` lines are kept verbatim (the parser reads `#pragma croq ...`),
  except `once`, `push_macro("X")` and `pop_macro("X")`, which act here
  (tests/gpu/end2end/ampere_mma.co relies on push/pop).
* A line whose `#` is followed by an unknown word is ordinary text: Choreo uses
  `#p` as an operator, and such a line may continue an expression. Likewise a
  `#` in a function-like macro body that precedes no parameter stays as is.
* Line structure is kept: a consumed directive or skipped line leaves its line
  breaks, and a spliced line is followed by the line breaks it used up.
* Predefined macros: only `__FILE__` and `__LINE__`. Choreo's CUDA target
  defines no macros at this stage (nvcc and the code generator add theirs
  later), and the corpus relies on none.
* `#if` arithmetic is signed 64-bit, without unsigned promotion.
"""
from __future__ import annotations

import os
import re
from bisect import bisect_right
from dataclasses import dataclass, field

from choreo_py.diagnostics import ChoreoError, Diagnostic, possible_cause, warn
from .literals import int_value, shown
from .pp_ifexpr import _IfExpr
from .pp_source import (_BUILTINS, _IDENT, _LEX, _PLACEMARKER, _Cursor, _File, _FileMap, _Tok,
                        _directive_at, _pastes, _render, _stringize, read_source)
from choreo_py.source import SOURCES, Loc, UnreadableSource, normalize_source

MAX_INCLUDE_DEPTH = 64
#: C's largest `#line` number (2^31 - 1)
MAX_LINE_NUMBER = 2147483647
#: One macro invocation (with everything it expands to) may produce this many tokens and
#: take this many expansion steps; past them it is an error at the invocation, as a C
#: preprocessor's resource limits are: `#define M1 M0 M0`, ... `M40` is 2^40 tokens.
MAX_EXPANSION_TOKENS = 100_000
MAX_EXPANSION_STEPS = 200_000
#: Quoted includes that name host-side headers (kept verbatim when absent).
HOST_HEADERS = frozenset({"choreo.h", "choreo_cc.h", "choreo_cute.h", "choreo_types.h",
                          "choreo_types_cute.h", "choreo_device_api.h", "testing.h"})
HOST_HEADER_PREFIXES = ("cuda", "cublas", "cudnn", "curand", "cufft", "cusparse", "nvtx",
                        "cutlass/", "cute/", "thrust/", "cub/", "torch/", "ATen/", "c10/")


#: Extensions of headers that may hold Choreo code; others (.hpp, .cuh, .inc, ...) are
#: included by host code, which a C++ compiler reads later.
CHOREO_HEADER_EXTENSIONS = (".h", ".co", ".coh")


def is_host_header(name: str) -> bool:
    base = name.replace("\\", "/")
    return (os.path.basename(base) in HOST_HEADERS or base.startswith(HOST_HEADER_PREFIXES)
            or os.path.splitext(base)[1] not in CHOREO_HEADER_EXTENSIONS)

# ----------------------------------------------------------------- output --
@dataclass
class Macro:
    name: str
    params: list | None        # None for an object-like macro
    variadic: bool
    body: str                  # the replacement list as text
    loc: Loc | None = None     # where it was defined
    tokens: list = field(default_factory=list, repr=False)


@dataclass
class PreprocessedUnit:
    text: str
    main_file: str
    defines: dict = field(default_factory=dict)    # name -> Macro, at the end
    warnings: list = field(default_factory=list)   # Diagnostics from #warning
    _starts: list = field(default_factory=list, repr=False)
    _pieces: list = field(default_factory=list, repr=False)  # (_FileMap, offset, is_copy)

    def loc(self, offset: int) -> Loc:
        """Original location of output character `offset` (len(text): the end)."""
        if not self._starts:
            return Loc(self.main_file, 1, 1)
        offset = min(max(offset, 0), len(self.text))
        i = bisect_right(self._starts, offset) - 1
        fmap, orig, copy = self._pieces[i]
        return fmap.loc(orig + (offset - self._starts[i] if copy else 0))


class _Out:
    def __init__(self) -> None:
        self.chunks, self.n, self.starts, self.pieces = [], 0, [], []

    def add(self, text: str, fmap: _FileMap, orig: int, copy: bool) -> None:
        if not text:
            return
        # A new piece unless this continues the last one.
        run = self.n - self.starts[-1] if self.starts else 0
        if not (self.pieces and self.pieces[-1] == (fmap, orig - run * copy, copy)):
            self.starts.append(self.n)
            self.pieces.append((fmap, orig, copy))
        self.chunks.append(text)
        self.n += len(text)

    def tail(self) -> str:
        return self.chunks[-1][-1] if self.chunks else ''


@dataclass
class _Cond:
    kind: str
    loc: Loc
    active: bool
    done: bool                 # a group of this chain was taken, or none may be
    seen_else: bool = False


# ----------------------------------------------------------- preprocessor --
class _Preprocessor:
    def __init__(self, include_dirs, defines) -> None:
        self.include_dirs = [str(d) for d in include_dirs]
        self.macros: dict[str, Macro] = {}
        self.cmdline: dict[str, Macro] = {}   # -D names (set below)
        self.pushed: dict[str, list] = {}
        self.once: set[str] = set()
        self.warnings: list[Diagnostic] = []
        self.out, self.depth = _Out(), 0
        self.inv: Loc | None = None    # the invocation or directive being expanded
        self.expanding, self.expansion_steps = 0, 0  # nesting of _expand; its work
        if defines:  # -D options act as #define lines of a file of their own
            text = ''.join(f"#define {k} {'1' if v is None else v}".replace('\n', ' ') + '\n'
                           for k, v in defines.items())
            SOURCES.add('<command line>', text)
            self._run_file(_File('<command line>', text))
            self.out = _Out()
        # -D names, so that a file's own #define of one draws a warning: the file
        # wins (as in C), and a `-D STAGES=2` that silently does nothing misleads.
        self.cmdline = dict(self.macros)

    def _copy(self, f: _File, a: int, b: int) -> None:
        """Emit cleaned text f.c[a:b], mapped to where it came from."""
        i = max(bisect_right(f.starts, a) - 1, 0)
        while a < b:
            end = min(b, f.starts[i + 1]) if i + 1 < len(f.starts) else b
            self.out.add(f.c[a:end], f.fmap, f.orig(a), f.copies[i])
            a, i = end, i + 1

    def _newlines(self, f: _File, a: int, eol: int) -> None:
        """Emit only the line breaks of f.c[a:eol + 1]."""
        while (a := f.c.find('\n', a, eol + 1)) >= 0:
            self._copy(f, a, a + 1)
            a += 1

    def _run_file(self, f: _File) -> None:
        lx, pos, conds = f.lx, 0, []
        while pos < len(lx):
            eol = lx.find('\n', pos)
            eol = len(lx) if eol < 0 else eol
            d = _directive_at(lx, pos)
            active = not conds or conds[-1].active
            if d is not None:
                self._directive(f, d, pos, eol, conds, active)
            elif active:
                pos = self._expand_line(f, pos, eol)
                continue
            else:
                self._newlines(f, pos, eol)
            pos = eol + 1
        if conds:
            raise ChoreoError(f'unterminated #{conds[-1].kind}', conds[-1].loc)

    def _line_tokens(self, f: _File, start: int) -> list[_Tok]:
        cur, toks = _Cursor(f, start), []
        while (t := cur.next()).kind not in ('nl', 'eof'):
            toks.append(t)
        return toks

    def _directive(self, f, d, pos, eol, conds, active) -> None:
        name, hash_pos, start = d
        dloc, how = f.loc(hash_pos), None
        if name in ('if', 'ifdef', 'ifndef', 'elif', 'elifdef', 'elifndef', 'else', 'endif'):
            self._conditional(f, name, start, dloc, conds, active)
        elif active and name:
            how = getattr(self, '_d_' + name)(f, start, eol, dloc)
        if how == 'verbatim':
            self._copy(f, pos, eol + 1)
        elif how is None:
            self._newlines(f, pos, eol)

    def _conditional(self, f, name, start, dloc, conds, active) -> None:
        if name in ('if', 'ifdef', 'ifndef'):
            ok = active and self._test(f, name, start, dloc)
            conds.append(_Cond(name, dloc, ok, ok or not active))
            return
        if not conds:
            raise ChoreoError(f'#{name} without #if', dloc)
        cond = conds[-1]
        if name == 'endif':
            conds.pop()
        elif cond.seen_else:
            raise ChoreoError(f'#{name} after #else', dloc)
        elif name == 'else':
            cond.seen_else, cond.active, cond.done = True, not cond.done, True
        else:  # elif, elifdef, elifndef: not even evaluated once a group was taken
            cond.active = not cond.done and self._test(f, name[2:], start, dloc)
            cond.done = cond.done or cond.active

    def _test(self, f, kind, start, dloc) -> bool:
        toks = self._line_tokens(f, start)
        if kind == 'if':
            return self._eval_if(f, toks, dloc) != 0
        return self._is_defined(self._name(f, toks, dloc, kind)) == (kind == 'ifdef')

    def _name(self, f, toks, dloc, what) -> str:
        if not toks or toks[0].kind != 'id':
            raise ChoreoError(f'#{what} expects a macro name', f.loc(toks[0].pos) if toks else dloc)
        return toks[0].text

    def _is_defined(self, name: str) -> bool:
        return name in self.macros or name in _BUILTINS

    # --------------------------------------------------------- directives --
    def _d_define(self, f, start, eol, dloc):
        toks = self._line_tokens(f, start)
        name = self._name(f, toks, dloc, 'define')
        if name == 'defined':
            raise ChoreoError("'defined' cannot be used as a macro name", f.loc(toks[0].pos))
        params, variadic, i = None, False, 1
        if len(toks) > 1 and toks[1].text == '(' and not toks[1].ws:
            params, variadic, i = self._params(f, toks)
        body = toks[i:]
        if body:
            body[0] = body[0].but(ws=False)
            for b in (body[0], body[-1]):
                if b.text == '##':
                    raise ChoreoError("'##' cannot appear at either end of a macro expansion",
                                      f.loc(b.pos))
        self.macros[name] = Macro(name, params, variadic, _render(body), f.loc(toks[0].pos), body)
        given = self.cmdline.get(name)
        if given is not None and f.name != '<command line>':
            self.warnings.append(Diagnostic(
                'warning', f"'{name}' redefined: this #define overrides -D {name}={given.body} "
                f"from the command line (guard it with #ifndef {name} to let -D set it)",
                f.loc(toks[0].pos)))

    def _params(self, f, toks):
        def at(j):
            if j >= len(toks):
                raise ChoreoError("missing ')' in macro parameter list", f.loc(toks[-1].pos))
            return toks[j]
        params, variadic, i = [], False, 2
        if at(i).text == ')':
            return params, variadic, i + 1
        while True:
            t = at(i)
            if t.kind == 'id' and t.text not in params and t.text != '__VA_ARGS__':
                params.append(t.text)
                if at(i + 1).text == '...':  # GNU named variadic parameter: `args...`
                    variadic, i = True, i + 1
            elif t.text == '...':
                params.append('__VA_ARGS__')
                variadic = True
            else:
                what = 'duplicate' if t.text in params else 'invalid'
                raise ChoreoError(f"{what} macro parameter '{t.text}'", f.loc(t.pos))
            if at(i + 1).text == ')':
                return params, variadic, i + 2
            if toks[i + 1].text != ',' or variadic:
                raise ChoreoError("expected ',' or ')' in macro parameter list",
                                  f.loc(toks[i + 1].pos))
            i += 2

    def _d_undef(self, f, start, eol, dloc):
        self.macros.pop(self._name(f, self._line_tokens(f, start), dloc, 'undef'), None)

    def _d_include(self, f, start, eol, dloc):
        raw = f.lx[start:eol].strip()
        if not raw.startswith(('"', '<')):  # a computed include: `#include NAME`
            self.inv = dloc
            raw = ''.join(t.text for t in self._expand(self._line_tokens(f, start)))
        m = re.match(r'"([^"\n]*)"|<([^>\n]*)>', raw)
        if m is None:
            raise ChoreoError('#include expects "FILENAME" or <FILENAME>', dloc)
        path = None if m.group(2) is not None else self._find(f.name, m.group(1))
        if path is None and m.group(1) is not None and not is_host_header(m.group(1)):
            searched = [os.path.dirname(f.name) or "."] + self.include_dirs
            possible_cause(f'#include "{m.group(1)}": no such file (searched '
                           f'{", ".join(searched)}; add a directory with -I)', dloc)
        if path is None:
            return 'verbatim'  # a system or host header: for the host compiler
        if os.path.realpath(path) in self.once:
            return None
        if self.depth >= MAX_INCLUDE_DEPTH:
            raise ChoreoError(f'#include nested more than {MAX_INCLUDE_DEPTH} levels deep', dloc)
        text = read_source(path, dloc)
        self.depth += 1
        self._run_file(_File(path, text))
        self.depth -= 1
        if self.out.tail() not in ('\n', ''):
            self._copy(f, eol, eol + 1)
        return 'done'

    def _find(self, including: str, name: str) -> str | None:
        dirs = [''] if os.path.isabs(name) else [os.path.dirname(including)] + self.include_dirs
        for d in dirs if name else ():
            path = os.path.normpath(os.path.join(d, name))
            try:
                if os.path.isfile(path):
                    return path
            except (OSError, ValueError):  # e.g. a NUL in the name
                continue
        return None

    def _d_pragma(self, f, start, eol, dloc):
        raw = f.lx[start:eol].strip()
        m = re.fullmatch(r'(push|pop)_macro\s*\(\s*"([^\W\d]\w*)"\s*\)', raw)
        if raw == 'once':
            self.once.add(os.path.realpath(f.name))
        elif m is None:
            return 'verbatim'
        elif m.group(1) == 'push':
            self.pushed.setdefault(m.group(2), []).append(self.macros.get(m.group(2)))
        elif self.pushed.get(m.group(2)):
            saved = self.pushed[m.group(2)].pop()
            self.macros.pop(m.group(2), None)
            if saved is not None:
                self.macros[m.group(2)] = saved
        return None

    def _d_line(self, f, start, eol, dloc):
        self.inv = dloc
        toks = self._expand(self._line_tokens(f, start))
        if not toks or not toks[0].text.isdigit():
            raise ChoreoError('#line directive requires a positive integer line number', dloc)
        if int_value(toks[0].text, 10) is None or int(toks[0].text) > MAX_LINE_NUMBER:
            raise ChoreoError(f"#line number '{shown(toks[0].text)}' out of range (at most "
                              f"{MAX_LINE_NUMBER}, as in C)", dloc)
        fmap = f.fmap
        name = fmap.remaps[-1][1] if fmap.remaps else fmap.name
        if len(toks) > 1:
            if not toks[1].text.startswith('"'):
                raise ChoreoError('invalid filename in #line directive', dloc)
            name = toks[1].text[1:-1]
        nxt = fmap.phys_line(f.orig(eol)) + 1  # the physical line the number applies to
        fmap.remap_lines.append(nxt)
        fmap.remaps.append((int(toks[0].text) - nxt, name))

    def _d_error(self, f, start, eol, dloc):
        raise ChoreoError(f'#error {f.lx[start:eol].strip()}'.rstrip(), dloc)

    def _d_warning(self, f, start, eol, dloc):
        message = f'#warning {f.lx[start:eol].strip()}'.rstrip()
        self.warnings.append(Diagnostic('warning', message, dloc))

    # ---------------------------------------------------------- expansion --
    def _expand_line(self, f: _File, pos: int, eol: int) -> int:
        """Expand one logical line (more if an invocation spans lines); return
        the offset of the next line."""
        line = f.lx[pos:eol]
        if '"' not in line and "'" not in line and not any(
                w in self.macros or w in _BUILTINS for w in _IDENT.findall(line)):
            self._copy(f, pos, eol + 1)  # the common case: nothing to expand or check
            return eol + 1
        cur, copied = _Cursor(f, pos), pos
        while (t := cur.next()).kind not in ('nl', 'eof'):
            m = self._macro_for(t)
            if m is None or (m.params is not None and not cur.peek_paren()):
                continue
            self._copy(f, copied, t.pos)
            self.inv = f.loc(t.pos)
            self._emit_region(f, t.pos, self._expand([t], cur), cur.pos)
            copied = cur.pos
        self._copy(f, copied, cur.pos)
        return cur.pos

    def _emit_region(self, f: _File, start: int, toks, end: int) -> None:
        """Emit an expansion in place of f.c[start:end], spaced so that it does
        not paste onto its neighbours (`-NEG` with NEG = -1 gives `- -1`)."""
        left = f.lx[start - 1] if start else ''
        right = f.lx[end] if end < len(f.lx) else ''
        if not toks:
            text = ' ' if left and right and _pastes(left, right) else ''
        else:
            text = _render(toks)
            text = (' ' if left and _pastes(left, toks[0].text) else '') + text
            text += ' ' if right and _pastes(toks[-1].text, right) else ''
        self.out.add(text, f.fmap, f.orig(start), False)

    def _macro_for(self, t: _Tok) -> Macro | None:
        if t.kind != 'id' or t.text in t.hide:
            return None
        m = self.macros.get(t.text)
        if m is None and t.text in _BUILTINS:
            loc = self.inv or Loc('<unknown>', 0, 0)
            tok = (_Tok('num', str(loc.line)) if t.text == '__LINE__' else
                   _Tok('str', '"' + loc.file.replace('\\', '\\\\').replace('"', '\\"') + '"'))
            m = Macro(t.text, None, False, tok.text, None, [tok])
        return m

    def _expand(self, toks, cur: _Cursor | None = None) -> list[_Tok]:
        """Macro-expand `toks` by Prosser's hide-set algorithm; a function-like
        macro at the end may take its arguments from `cur`. Bounded: see
        MAX_EXPANSION_TOKENS (argument pre-expansions count towards their caller's)."""
        outermost = not self.expanding
        if outermost:
            self.expansion_steps = 0
        self.expanding += 1
        try:
            return self._expand_bounded(toks, cur)
        finally:
            self.expanding -= 1

    def _expand_bounded(self, toks, cur) -> list[_Tok]:
        stack, out = toks[::-1], []
        while stack:
            self.expansion_steps += 1
            if self.expansion_steps > MAX_EXPANSION_STEPS or \
                    len(stack) + len(out) > MAX_EXPANSION_TOKENS:
                raise ChoreoError(f"macro expansion too large: more than "
                                  f"{MAX_EXPANSION_TOKENS} tokens or {MAX_EXPANSION_STEPS} steps "
                                  "from this line (a runaway or exponential expansion)",
                                  self.inv)
            t = stack.pop()
            m = self._macro_for(t)
            if m is not None and m.params is None:
                new = self._subst(m, [], t.hide | {m.name})
            elif m is not None and (got := self._collect_args(m, stack, cur)) is not None:
                args, rparen = got
                new = self._subst(m, args, (t.hide & rparen.hide) | {m.name})
            else:
                out.append(t)
                continue
            if new:
                new[0] = new[0].but(ws=t.ws)
            stack.extend(reversed(new))
        return out

    def _collect_args(self, m: Macro, stack, cur):
        if stack:
            if stack[-1].text != '(' or stack[-1].kind != 'punct':
                return None
        elif cur is None or not cur.peek_paren():
            return None

        def take():
            return stack.pop() if stack else cur.next(cross=True) if cur else _Tok('eof', '')
        take()
        args, depth, n = [[]], 0, len(m.params)
        while (a := take()).kind != 'punct' or a.text != ')' or depth:
            if a.kind == 'eof':
                raise ChoreoError(f"unterminated argument list invoking macro '{m.name}'", self.inv)
            if a.kind == 'punct' and a.text == ',' and not depth:
                if not (m.variadic and len(args) == n):  # the variadic one keeps its commas
                    args.append([])
                    continue
            elif a.kind == 'punct':
                depth += (a.text == '(') - (a.text == ')')
            args[-1].append(a)
        if n == 0 and args == [[]]:
            args = []
        if m.variadic and len(args) == n - 1:
            args.append([])
        if len(args) != n:
            raise ChoreoError(f"macro '{m.name}' takes {n} argument{'s' * (n != 1)}, "
                              f"but {len(args)} given", self.inv)
        return args, a

    def _subst(self, m: Macro, args, hs) -> list[_Tok]:
        """The replacement list of `m` with arguments, `#` and `##` applied."""
        params = {p: i for i, p in enumerate(m.params or ())}
        body, res, paste, expanded, i = m.tokens, [], False, {}, 0
        while i < len(body):
            b = body[i]
            glued = paste or (i + 1 < len(body) and body[i + 1].text == '##')
            stringify = b.text == '#' and b.kind == 'punct'
            if stringify and i + 1 < len(body) and body[i + 1].text in params:
                i += 1
                new = [_stringize(args[params[body[i].text]], b.ws)]
            elif b.text == '##' and b.kind == 'punct':
                paste, i = True, i + 1
                continue
            elif b.kind == 'id' and b.text in params:
                k = params[b.text]
                if paste and res[-1].text == ',' and m.variadic and k == len(params) - 1:
                    if not args[k]:  # GNU `, ## __VA_ARGS__`: the comma goes with no arguments
                        res.pop()
                    res += args[k]
                    paste, i = False, i + 1
                    continue
                if not glued and k not in expanded:
                    expanded[k] = self._expand(args[k])
                new = (list(args[k]) or [_PLACEMARKER]) if glued else list(expanded[k])
                if new:
                    new[0] = new[0].but(ws=b.ws)
            else:
                new = [b]
            if paste:
                res[-1] = self._paste(res[-1], new[0])
                new = new[1:]
            res += new
            paste, i = False, i + 1
        return [t.but(hide=t.hide | hs) for t in res if t.kind != 'pm']

    def _paste(self, a: _Tok, b: _Tok) -> _Tok:
        if a.kind == 'pm' or b.kind == 'pm':
            return b if a.kind == 'pm' else a
        m = _LEX.match(a.text + b.text)
        if m.end() != len(a.text + b.text) or m.lastgroup in ('ws', 'nl', 'bad'):
            raise ChoreoError(f'pasting "{a.text}" and "{b.text}" does not give a valid '
                              'preprocessing token', self.inv)
        return _Tok(m.lastgroup, m.group(), a.pos, a.ws, a.hide)

    # ----------------------------------------------------------------- #if --
    def _eval_if(self, f: _File, toks, dloc: Loc) -> int:
        self.inv = dloc
        toks = self._expand(self._resolve_defined(f, toks))
        if not toks:
            raise ChoreoError('#if with no expression', dloc)

        def where(t):  # only tokens written on the directive line have a place of their own
            return f.loc(t.pos) if t is not None and not t.hide and t.pos >= 0 else dloc
        return _IfExpr(toks, where).run()

    def _resolve_defined(self, f: _File, toks) -> list[_Tok]:
        """Replace `defined X` and `defined(X)` by 1 or 0, before expansion."""
        out, i = [], 0
        while i < len(toks):
            t, i = toks[i], i + 1
            if t.kind != 'id' or t.text != 'defined':
                out.append(t)
                continue
            paren = i < len(toks) and toks[i].text == '('
            i += paren
            if i >= len(toks) or toks[i].kind != 'id':
                raise ChoreoError("operator 'defined' requires an identifier",
                                  f.loc(toks[min(i, len(toks) - 1)].pos))
            if paren and (i + 1 >= len(toks) or toks[i + 1].text != ')'):
                raise ChoreoError("missing ')' after 'defined'", f.loc(toks[i].pos))
            out.append(_Tok('num', str(int(self._is_defined(toks[i].text))), t.pos, t.ws))
            i += 1 + paren
        return out


# ------------------------------------------------------------------- API --
def preprocess_text(text: str, name: str = "<input>", include_dirs=(),
                    defines=None) -> PreprocessedUnit:
    """Preprocess `text` as if read from file `name`; `defines` maps -D names
    to values (None or "1" for a bare `-D NAME`)."""
    try:
        text = normalize_source(name, text)
    except UnreadableSource as e:
        SOURCES.add(name, e.shown)
        raise ChoreoError(e.message, e.loc) from None
    SOURCES.add(name, text)
    return _preprocess(text, name, include_dirs, defines)


def _preprocess(text: str, name: str, include_dirs, defines) -> PreprocessedUnit:
    pp = _Preprocessor(include_dirs, defines)
    try:
        pp._run_file(_File(name, text))
    except RecursionError:  # e.g. thousands of nested macro calls or parentheses
        raise ChoreoError('input nested too deeply for the preprocessor', pp.inv) from None
    out = pp.out
    for w in pp.warnings:  # #warning lines and overridden -D names, printed by the CLI
        warn(w.message, w.loc)
    return PreprocessedUnit(''.join(out.chunks), name, dict(pp.macros), pp.warnings,
                            out.starts, out.pieces)


def preprocess_file(path, include_dirs=(), defines=None) -> PreprocessedUnit:
    name = str(path)
    return _preprocess(read_source(name), name, include_dirs, defines)

