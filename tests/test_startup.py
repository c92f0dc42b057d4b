"""Start-up shortcuts of the parser and the command line (choreo_py/frontend/parser.py,
cli.py): the pickled parser cache and the contextual lexer that scans with the
root regex must give exactly what Lark's own parser gives.  (Their speed is
measured by bench/frontend.py, not here.)"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from lark import Lark
from lark.exceptions import UnexpectedInput

from conftest import need_shared

from choreo_py import frontend
from choreo_py.frontend import parser, segments
from choreo_py.diagnostics import ChoreoError

ROOT = Path(__file__).resolve().parent.parent


def _sources(corpus: bool) -> list[Path]:
    """The repository's programs, or (corpus=True) the reference compiler's corpus."""
    if corpus:
        return sorted(need_shared("corpus").rglob("*.co"))
    return sorted((ROOT / "examples").rglob("*.co")) + sorted((ROOT / "tests").rglob("*.co"))


def _functions(path: Path) -> list[tuple[str, int, object]]:
    """The __co__ functions of a file, as parse_function receives them."""
    try:
        unit = frontend.preprocess(str(path))
    except ChoreoError:
        return []
    return [(seg.text, seg.start, unit.loc) for seg in segments.split(unit.text, unit.loc)
            if seg.kind not in (segments.HOST, segments.DEVICE)]


def _mutants(text: str, n: int = 2) -> list[str]:
    """Broken variants of a function (cut short, a character dropped), to
    exercise the lexer's and the parser's error paths."""
    if len(text) < 2:
        return []
    cuts = [len(text) * (i + 1) // (n + 1) for i in range(n)]
    return [text[:c] for c in cuts] + [text[:c] + text[c + 1:] for c in cuts]


@pytest.fixture(scope="module")
def plain_lark() -> Lark:
    """Lark's parser with Lark's own contextual lexer, built from the grammar."""
    grammar = parser._grammar_path().read_text(encoding="utf-8")
    return Lark(grammar, transformer=parser._BUILDER, **parser._LARK_OPTIONS)


def _tokens(lark: Lark, text: str, loc_of) -> tuple[list, str]:
    """The token stream the parser consumes, and how it ended."""
    parser._BUILDER.reset(0, loc_of)
    out = []
    try:
        for tok in lark.parse_interactive(text).iter_parse():
            out.append((tok.type, str(tok), tok.start_pos, tok.line, tok.column,
                        tok.end_line, tok.end_column, tok.end_pos))
    except UnexpectedInput as err:
        return out, f"{type(err).__name__} {err.pos_in_stream} {err.line}:{err.column} " \
                    f"{sorted(getattr(err, 'allowed', None) or getattr(err, 'expected', ()))}"
    return out, "ok"


def _result(text: str, base: int, loc_of) -> str:
    try:
        return repr(parser.parse_function(text, base, loc_of))
    except ChoreoError as err:
        return "error: " + err.render()


def test_parser_is_built_with_the_fast_lexer():
    lexer = parser.lark_parser().parser.lexer
    assert isinstance(lexer, parser._ContextualLexer)
    fn = _functions(ROOT / "examples" / "flash_atten_causal.co")
    _result(*fn[0])
    assert isinstance(lexer.lexers, parser._StateLexers)   # its assumptions hold for this grammar


@pytest.mark.slow
@pytest.mark.parametrize("corpus,least", [(False, 20), (True, 100)], ids=["repo", "corpus"])
def test_same_tokens_and_results_as_lark(plain_lark, monkeypatch, corpus, least):
    fast = parser.lark_parser()
    cases = 0
    functions = [(path, fn) for path in _sources(corpus) for fn in _functions(path)]
    for i, (path, (text, base, loc_of)) in enumerate(functions):
        # every function as written; broken variants of one in eight (time)
        for variant in [text] + (_mutants(text) if i % 8 == 0 else []):
                assert _tokens(fast, variant, loc_of) == _tokens(plain_lark, variant, loc_of), \
                    f"{path} (variant of {len(variant)} characters)"
                got = _result(variant, base, loc_of)
                monkeypatch.setattr(parser, "_LARK", plain_lark)
                want = _result(variant, base, loc_of)
                monkeypatch.setattr(parser, "_LARK", fast)
                assert got == want, f"{path} (variant of {len(variant)} characters)"
                cases += 1
    assert cases > least


def _fresh_parser(monkeypatch, cache_home: Path) -> Lark:
    monkeypatch.delenv("CHOREO_PY_NO_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache_home))
    monkeypatch.setattr(parser, "_LARK", None)
    return parser.lark_parser()


def test_cache_written_then_used(tmp_path, monkeypatch):
    built = _fresh_parser(monkeypatch, tmp_path)
    files = list((tmp_path / "choreo-py").glob("parser-*.pickle"))
    assert len(files) == 1 and not list((tmp_path / "choreo-py").glob("*.tmp"))
    def no_build(grammar):
        raise AssertionError("built again: the cached parser was not used")

    monkeypatch.setattr(parser, "_build", no_build)
    loaded = _fresh_parser(monkeypatch, tmp_path)
    assert loaded is not built
    fn = _functions(ROOT / "examples" / "flash_atten_causal.co")
    results = [_result(*f) for f in fn]
    monkeypatch.setattr(parser, "_LARK", built)
    assert [_result(*f) for f in fn] == results


def test_stale_cache_files_are_removed(tmp_path, monkeypatch):
    folder = tmp_path / "choreo-py"
    folder.mkdir()
    old, recent = folder / "parser-old.pickle", folder / "parser-recent.pickle"
    old.write_bytes(b"")
    recent.write_bytes(b"")
    os.utime(old, (0, 0))
    _fresh_parser(monkeypatch, tmp_path)
    assert not old.exists() and recent.exists()
    assert len(list(folder.glob("parser-*.pickle"))) == 2


def test_cache_key_follows_the_grammar(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    grammar = parser._grammar_path().read_text(encoding="utf-8")
    a = parser._cache_file(grammar)
    assert a == parser._cache_file(grammar)
    assert a != parser._cache_file(grammar + "\n// changed\n")
    assert a.parent == tmp_path / "choreo-py"
    monkeypatch.setenv("CHOREO_PY_NO_CACHE", "1")
    assert parser._cache_file(grammar) is None


@pytest.mark.slow
def test_corrupt_cache_is_rebuilt(tmp_path, monkeypatch):
    _fresh_parser(monkeypatch, tmp_path)
    (cached,) = (tmp_path / "choreo-py").glob("parser-*.pickle")
    cached.write_bytes(b"not a pickle")
    lark = _fresh_parser(monkeypatch, tmp_path)
    assert isinstance(lark.parser.lexer, parser._ContextualLexer)
    assert cached.stat().st_size > 1000          # rewritten
    fn = _functions(ROOT / "examples" / "flash_atten_causal.co")
    assert not _result(*fn[0]).startswith("error")


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0,
                    reason="root can write to read-only folders")
def test_read_only_cache_folder(tmp_path, monkeypatch):
    (tmp_path / "choreo-py").mkdir(mode=0o500)
    try:
        lark = _fresh_parser(monkeypatch, tmp_path)
        assert not list((tmp_path / "choreo-py").iterdir())
    finally:
        (tmp_path / "choreo-py").chmod(0o700)
    assert isinstance(lark.parser.lexer, parser._ContextualLexer)


def test_unwritable_cache_location(tmp_path, monkeypatch):
    # works for root too: the cache "folder" is a file, so nothing can be written
    (tmp_path / "choreo-py").write_text("")
    lark = _fresh_parser(monkeypatch, tmp_path)
    fn = _functions(ROOT / "examples" / "flash_atten_causal.co")
    assert isinstance(lark.parser.lexer, parser._ContextualLexer)
    assert not _result(*fn[0]).startswith("error")


def test_check_imports_only_the_front_end(tmp_path):
    """`choreo check` needs neither torch, the lowering, the interpreter nor the runtime
    (the driver, which runs sema and the passes for it, imports the runtime only to emit)."""
    probe = (
        "import sys, runpy\n"
        "sys.argv = ['choreo', 'check', sys.argv[1]]\n"
        "try:\n"
        "    runpy.run_module('choreo_py.cli', run_name='__main__')\n"
        "except SystemExit as e:\n"
        "    assert not e.code, e.code\n"
        "bad = [m for m in sys.modules if m.split('.')[0] == 'torch' or m.startswith(\n"
        "       ('choreo_py.lowering', 'choreo_py.interp', 'choreo_py.runtime'))]\n"
        "print(bad)\n"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
               XDG_CACHE_HOME=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", probe, str(ROOT / "examples" / "flash_atten_causal.co")],
                         capture_output=True, text=True, env=env, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
