"""Every code block of the guide (docs/) is a test, and the guide builds without warnings.

A fence names its language and, in braces, what to do with it:

    ```choreo {name=vadd.co run="N=1000" ref=refs.py:vadd compile=refused}
    ```choreo {check=fail error="'buff' is not declared"}
    ```choreo {excerpt-of=gemm.co}        each line is in the page's program gemm.co
    ```text {output-of=previous}          the previous block's diagnostics, exactly
    ```sh                                 each `choreo ...` line runs; other tools' paths exist
    ```python                             executed (cwd: a copy of the repository's examples)
    ```python {test=syntax}               compiled only (it needs a GPU)

Choreo blocks: `check` is `pass` (default: `choreo check` accepts it) or `fail`
(`error` must be in the message; `stage` picks the command that must fail: check,
ir, ptx, run); `file=PATH` says the block is that file of the repository, verbatim;
`run="DIMS"` interprets it (`ref`/`against` give the reference, else the check must
not fail); `compile=both` compiles it to a cubin (PTX without ptxas) for sm_90a and
sm_100a (`compile=sm_90a` for one), `compile=refused` expects both targets to refuse
it by name, in the backend or in the tile IR (`refused=sm_100a` one of them).
A block of another language, or without what its language needs, fails the test.
"""
from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from choreo_py import cli
from choreo_py.runtime.build import find_ptxas

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
FENCE = re.compile(r"^```(\w+)?[ \t]*(\{[^}\n]*\})?[ \t]*\n(.*?)^```[ \t]*$", re.S | re.M)
ATTR = re.compile(r"""([\w-]+)=(?:"([^"]*)"|'([^']*)'|(\S+))""")
LANGS = {"choreo", "text", "sh", "python", "diagram"}  # diagram: a drawing, a synopsis or
# a sample report, not code
TARGETS = ("sm_90a", "sm_100a")


@dataclass
class Block:
    page: Path
    line: int
    lang: str
    attrs: dict
    text: str
    previous: "Block | None" = None
    outputs: dict = field(default_factory=dict)

    @property
    def id(self) -> str:
        return f"{self.page.relative_to(DOCS)}:{self.line}"


def _blocks() -> list[Block]:
    out = []
    for page in sorted(DOCS.rglob("*.md")):
        text = page.read_text()
        prev = None
        for m in FENCE.finditer(text):
            attrs = {k: a or b or c for k, a, b, c in ATTR.findall((m.group(2) or "{}")[1:-1])}
            b = Block(page, text.count("\n", 0, m.start()) + 1, m.group(1) or "", attrs,
                      m.group(3), prev if m.group(1) == "text" else None)
            out.append(b)
            if b.lang == "choreo":
                prev = b
    return out


BLOCKS = _blocks()


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    """A copy of examples/ and docs/ (commands write beside their sources), as cwd."""
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    shutil.copytree(DOCS, tmp_path / "docs", ignore=shutil.ignore_patterns("*.md"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CHOREO_PY_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path


def choreo(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = cli.main(list(argv))
        except SystemExit as exc:  # argparse: --help, --version, usage errors
            rc = exc.code
    return rc, out.getvalue(), err.getvalue()


def _excerpt(b: Block) -> None:
    """Each line of an excerpt (without its comment) is in the named program of the page."""
    whole = next((o for o in BLOCKS if o.page == b.page and o.lang == "choreo"
                  and o.attrs.get("name") == b.attrs["excerpt-of"]), None)
    assert whole is not None, f"{b.id}: no program named {b.attrs['excerpt-of']} on the page"
    for line in b.text.splitlines():
        code = line.split("//", 1)[0].strip()
        assert code in whole.text, f"{b.id}: '{code}' is not in {b.attrs['excerpt-of']}"


def _choreo_block(b: Block, workdir: Path) -> None:
    a = b.attrs
    if "excerpt-of" in a:
        return _excerpt(b)
    if "file" in a:
        assert b.text == (ROOT / a["file"]).read_text(), f"{b.id}: differs from {a['file']}"
    path = a.get("name", "block.co")
    Path(path).write_text(b.text)
    defines = [f"-D{d}" for d in a.get("defines", "").split()]
    if a.get("check", "pass") == "fail":
        stage = a.get("stage", "check")
        argv = {"check": ["check", path], "ir": ["compile", path, "--emit", "ir"],
                "ptx": ["compile", path, "--emit", "ptx", "--target", a.get("target", "sm_100a"),
                        "-o", "-"],
                "run": ["run", path, "--shape", a.get("run", "")]
                + (["--ref", a["ref"]] if "ref" in a else [])
                + (["--target", a["target"]] if "target" in a else [])}[stage] + defines
        rc, _, err = choreo(*argv)
        assert rc == 1 and a["error"] in err, f"{b.id}: expected '{a['error']}', got:\n{err}"
        b.outputs["diagnostics"] = err
        return
    rc, _, err = choreo("check", path, *defines)
    assert rc == 0, f"{b.id}: choreo check failed:\n{err}"
    b.outputs["diagnostics"] = err
    if "run" in a:
        ref = (["--ref", a["ref"]] if "ref" in a else
               ["--check", a["against"]] if "against" in a else [])
        rc, out, err = choreo("run", path, "--shape", a["run"], *ref, *defines)
        assert rc == 0, f"{b.id}: choreo run failed:\n{out}{err}"
        if ref:
            assert out.rstrip().endswith(": ok"), f"{b.id}: {out}"
    mode = a.get("compile", "")
    compiles = {"both": TARGETS, "refused": ()}.get(mode, tuple(mode.split()))
    refused = TARGETS if a.get("compile") == "refused" else tuple(a.get("refused", "").split())
    emit = "cubin" if find_ptxas() else "ptx"  # without ptxas: the PTX, not assembled
    for target in compiles:
        rc, _, err = choreo("compile", path, "--target", target, "--emit", emit,
                            "-o", f"out.{target}.{emit}", *defines)
        assert rc == 0, f"{b.id}: compile for {target} failed:\n{err}"
    for target in refused:
        rc, _, err = choreo("compile", path, "--target", target, *defines)
        named = f"is not lowered for {target} yet" in err or "not supported by the tile IR yet" in err
        assert rc == 1 and named, f"{b.id}: {err}"


def _sh_block(b: Block) -> None:
    # The page's named programs are there, as a reader following the page has them.
    for other in BLOCKS:
        if other.page == b.page and other.lang == "choreo" and "name" in other.attrs:
            Path(other.attrs["name"]).write_text(other.text)
    expected_rc = int(b.attrs.get("exit", 0))
    for line in b.text.splitlines():
        line = line.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        words = shlex.split(line)
        if words[0] == "choreo":
            if "cubin" in words and find_ptxas() is None:
                pytest.skip(f"{b.id}: `{line}` needs ptxas (CUDA toolkit) on PATH")
            rc, out, err = choreo(*words[1:])
            assert rc == expected_rc, f"{b.id}: `{line}` exited {rc}:\n{out}{err}"
        elif words[0] in ("pip", "pytest", "mkdocs", "lit", "python", "python3"):
            for w in words[1:]:  # the files and folders a command names exist
                if re.fullmatch(r"[\w./-]+\.(py|co|yml|toml)|(tests|docs|bench|examples)/[\w./-]*", w):
                    assert (ROOT / w).exists(), f"{b.id}: `{line}` names a missing {w}"
        else:
            pytest.fail(f"{b.id}: a shell line the guide's test cannot check: {line}")


def _python_block(b: Block) -> None:
    code = compile(b.text, b.id, "exec")
    if b.attrs.get("test") == "syntax":
        return
    exec(code, {"__name__": "docs_block"})  # noqa: S102 - the guide's own examples


@pytest.mark.parametrize("block", BLOCKS, ids=[b.id for b in BLOCKS])
def test_code_block(block: Block, workdir: Path) -> None:
    assert block.lang in LANGS, f"{block.id}: a ```{block.lang} block is not tested: use one of {LANGS}"
    if block.lang == "choreo":
        _choreo_block(block, workdir)
    elif block.lang == "diagram":
        assert block.text.strip(), f"{block.id}: an empty drawing"
    elif block.lang == "text":
        prev = block.previous
        assert block.attrs.get("output-of") == "previous" and prev is not None, \
            f"{block.id}: a text block shows the diagnostics of the choreo block before it"
        _choreo_block(prev, workdir)
        assert block.text.rstrip("\n") == prev.outputs["diagnostics"].rstrip("\n"), \
            f"{block.id}: the shown output differs from what choreo prints:\n" \
            f"{prev.outputs['diagnostics']}"
    elif block.lang == "sh":
        _sh_block(block)
    else:
        _python_block(block)


def test_the_guide_has_the_pages_the_issue_asks_for():
    names = {p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")}
    for page in ["index.md", "tutorial/vector-add.md", "tutorial/tiled-gemm.md",
                 "tutorial/flash-attention.md", "errors.md", "hardware.md", "python-api.md",
                 "cli.md"] + [f"reference/{p}.md" for p in (
                     "shapes-and-views", "storage", "parallel", "roles", "events", "futures",
                     "tma", "mma", "mma-load", "fragments", "named-barriers", "host-code",
                     "statements", "types", "expressions", "masks", "tile-sizes")]:
        assert page in names, f"docs/{page} is missing"
    assert len([b for b in BLOCKS if b.lang == "choreo"]) >= 30


def test_the_choreo_lexer_is_registered():
    from pygments.lexers import get_lexer_by_name
    from pygments.token import Error, Keyword

    lexer = get_lexer_by_name("choreo")
    tokens = list(lexer.get_tokens((ROOT / "examples" / "flash_atten_causal.co").read_text()))
    assert not [v for t, v in tokens if t in Error]
    assert ("parallel" in {v for t, v in tokens if t in Keyword})


def _has_mkdocs_material() -> bool:
    import importlib.util
    return all(importlib.util.find_spec(m) is not None for m in ("mkdocs", "material"))


# Run as `python -m mkdocs` of this interpreter: a virtual environment that sees the
# packages through --system-site-packages has no `mkdocs` script of its own.
@pytest.mark.skipif(not _has_mkdocs_material(),
                    reason="needs mkdocs-material (pip install -e '.[docs]')")
def test_the_guide_builds_without_warnings(tmp_path):
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")   # the theme's end-of-life banner
    res = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir",
                          str(tmp_path / "site")],
                         cwd=ROOT, capture_output=True, text=True, env=env, timeout=300)
    log = res.stdout + res.stderr
    assert res.returncode == 0, log
    assert "WARNING" not in log, log
    html = (tmp_path / "site" / "tutorial" / "vector-add" / "index.html").read_text()
    assert 'class="kr">__co__' in html  # the Choreo lexer highlighted the fences
