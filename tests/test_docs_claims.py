"""Claims the guide makes in prose, checked against the compiler: what a page says is
refused must be refused, what it says compiles must compile, its signatures must be the
functions', its magic numbers explained where they first appear. Each test pairs the text
with the behaviour, so that a page goes stale loudly (tests/test_docs.py checks the code
blocks themselves)."""
from __future__ import annotations

import ast
import inspect
import math
import re
from pathlib import Path

import pytest

from test_docs import BLOCKS, DOCS, ROOT, TARGETS, choreo, workdir  # noqa: F401 - a fixture

FENCED = re.compile(r"^```.*?^```[ \t]*$", re.S | re.M)


def prose(page: Path) -> str:
    """The page without its code blocks, paragraphs joined into lines."""
    text = FENCED.sub("\n\n", page.read_text())
    return "\n\n".join(" ".join(p.split()) for p in text.split("\n\n"))


def nav_pages() -> list[Path]:
    """The pages in the order of mkdocs.yml's nav."""
    names = re.findall(r":\s*([\w/.-]+\.md)\s*$", (ROOT / "mkdocs.yml").read_text(), re.M)
    return [DOCS / n for n in names]


def _compiled_targets(block) -> tuple:
    mode = block.attrs.get("compile", "")
    return {"both": TARGETS, "refused": ()}.get(mode, tuple(mode.split()))


def test_no_page_says_a_program_it_compiles_is_refused():
    """vector-add.md said `choreo compile vadd.co` refuses it, beside a block the test
    compiles for both targets: a paragraph that calls one of the page's programs refused
    (or interpreter-only) must name a target the block is refused for."""
    words = re.compile(r"refuse|not lowered|interpreter only", re.I)
    found = []
    for page in sorted(DOCS.rglob("*.md")):
        programs = {b.attrs["name"]: b for b in BLOCKS
                    if b.page == page and b.lang == "choreo" and "name" in b.attrs}
        for para in prose(page).split("\n\n"):
            if not words.search(para):
                continue
            for name, block in programs.items():
                compiles = _compiled_targets(block)
                if f"{name}`" in para and compiles and not (set(TARGETS) - set(compiles)):
                    found.append(f"{page.relative_to(DOCS)}: {name} compiles for "
                                 f"{', '.join(compiles)} but the page says: {para[:160]}")
    assert not found, "\n".join(found)


def test_per_thread_code_compiles_as_the_tutorial_and_the_hardware_page_say(workdir):
    vadd = next(b for b in BLOCKS if b.attrs.get("name") == "vadd.co")
    Path("vadd.co").write_text(vadd.text)
    for target in TARGETS:
        rc, _, err = choreo("compile", "vadd.co", "--target", target, "--emit", "ptx",
                            "-o", f"vadd.{target}.ptx")
        assert rc == 0, err
        assert "st.global.f32" in Path(f"vadd.{target}.ptx").read_text()
    tutorial = prose(DOCS / "tutorial" / "vector-add.md")
    assert "Both backends compile it" in tutorial and "Interpreter only" not in tutorial
    hardware = prose(DOCS / "hardware.md")
    assert "interpreter only" not in hardware.lower()
    assert "per-thread element code" in hardware


_IMPLEMENTATIONS = {  # the callables behind choreo_py's lazily imported entry points
    "interpret": "choreo_py.interp.api:interpret",
    "emulate": "choreo_py.emu.api:emulate",
    "emulate_program": "choreo_py.emu.program:emulate_program",
    "load": "choreo_py.runtime:load",
}


def _defaults(qualname: str) -> dict:
    import importlib

    import choreo_py

    name = qualname.split(".")[-1]
    out = {}
    mod, attr = _IMPLEMENTATIONS[name].split(":")
    for fn in (getattr(importlib.import_module(mod), attr), getattr(choreo_py, name)):
        for p in inspect.signature(fn).parameters.values():
            if p.default is not inspect.Parameter.empty:
                out[p.name] = p.default  # the entry point's own default wins
    return out


def test_the_python_api_table_gives_the_real_defaults():
    """python-api.md showed load(path, target="sm_90a", ...), whose default is None (the
    GPU present, else sm_100a): each `name=value` of the table is the function's default."""
    import choreo_py

    page = (DOCS / "python-api.md").read_text()
    rows = re.findall(r"^\| `choreo_py\.(\w+)\((.*?)\)` \|", page, re.M)
    assert {n for n, _ in rows} >= set(_IMPLEMENTATIONS)
    for name, args in rows:
        call = ast.parse(f"f({args.replace(', ...', '')})", mode="eval").body
        want = _defaults(name)
        for kw in call.keywords:
            assert kw.arg in want, f"{name}: no parameter {kw.arg} with a default"
            assert ast.literal_eval(kw.value) == want[kw.arg], \
                f"python-api.md: {name}({kw.arg}={ast.unparse(kw.value)}), the default is " \
                f"{want[kw.arg]!r}"
    for name in choreo_py.__all__:
        assert f"`choreo_py.{name}" in page, f"python-api.md never mentions choreo_py.{name}"


def test_every_command_is_on_the_command_line_page():
    """cli.md never mentioned `emulate`."""
    import argparse

    from choreo_py import cli

    page = (DOCS / "cli.md").read_text()
    sub = next(a for a in cli.build_parser()._actions
               if isinstance(a, argparse._SubParsersAction))
    for name in sub.choices:
        assert f"| `choreo {name} " in page, f"cli.md's table lacks choreo {name}"
        if name in ("compile", "run", "emulate"):
            assert f"## {name}" in page, f"cli.md has no section on choreo {name}"


def test_the_command_line_page_tells_sdpa_causals_alignment():
    text = prose(DOCS / "cli.md")
    para = next(p for p in text.split("\n\n") if "`sdpa-causal` is torch's" in p)
    assert "top-left" in para and "bottom-right" in para and "--ref" in para


def test_an_mma_future_published_on_an_event_compiles_as_mma_md_says(workdir):
    """mma.md said an MMA future cannot be bound to an event; events.md's ring_commit.co
    does it (`trigger empty.at(...) after step`), compiled for sm_100a, refused by name
    for sm_90a, which is what mma.md's rule now says."""
    rule = next(p for p in prose(DOCS / "reference" / "mma.md").split("\n\n")
                if "An MMA future is completed" in p)
    assert "trigger ev after f" in rule and "events.md#publishing-an-mma" in \
        (DOCS / "reference" / "mma.md").read_text()
    assert "sm_100a" in rule and "sm_90a refuses it" in rule
    ring = next(b for b in BLOCKS if b.attrs.get("name") == "ring_commit.co")
    assert re.search(r"trigger \w+\.at\([^)]*\) after step", ring.text)
    Path("ring_commit.co").write_text(ring.text)
    rc, _, err = choreo("compile", "ring_commit.co", "--target", "sm_100a", "--emit", "ptx",
                        "-o", "ring.ptx")
    assert rc == 0, err
    rc, _, err = choreo("compile", "ring_commit.co", "--target", "sm_90a")
    assert rc == 1 and "is not lowered for sm_90a yet" in err


def test_statements_after_a_parallel_compile_as_parallel_md_says(workdir):
    """parallel.md said statements after a `parallel` in a block are not lowered;
    storage.md's run_sized.co and parallel.md's after_parallel.co have them."""
    rules = prose(DOCS / "reference" / "parallel.md")
    assert not re.search(r"statements after it[^.]*not lowered", rules)
    for name in ("after_parallel.co", "run_sized.co"):
        block = next(b for b in BLOCKS if b.attrs.get("name") == name)
        body = block.text[block.text.index(": block"):]
        assert body.count("parallel ") >= 1
        Path(name).write_text(block.text)
        for target in TARGETS:
            rc, _, err = choreo("compile", name, "--target", target, "--emit", "ptx",
                                "-o", f"{name}.{target}.ptx")
            assert rc == 0, f"{name} for {target}: {err}"


#: Literal constants of the guide's programs and what they are; the first page (in the nav's
#: order) whose programs use one says so in its prose.
CONSTANTS = {
    "0.12751743f": (math.log2(math.e) / math.sqrt(128), "log2(e)/√128"),
    "1.44269504f": (math.log2(math.e), "log2(e)"),
    "0.088388348f": (1 / math.sqrt(128), "1/√128"),
    "0.08838835f": (1 / math.sqrt(128), "1/√128"),
    "11.3137085f": (math.sqrt(128), "√128"),
    "0.18033688f": (math.log2(math.e) / math.sqrt(64), "log2(e)/√64"),
    "0.69314718f": (math.log(2), "ln 2"),
}


def test_every_long_constant_is_explained_where_it_first_appears():
    """0.12751743f, the FlashAttention examples' log2(e)/sqrt(128), was never explained."""
    literal = re.compile(r"\b\d+\.\d{6,}f\b")
    used = {c for b in BLOCKS if b.lang == "choreo" for c in literal.findall(b.text)}
    unexplained = used - set(CONSTANTS)
    assert not unexplained, f"constants no page explains: {sorted(unexplained)}"
    pages = nav_pages()
    for const, (value, words) in CONSTANTS.items():
        assert float(const[:-1]) == pytest.approx(value, rel=1e-7), const
        first = next(p for p in pages if any(
            b.page == p and const in b.text for b in BLOCKS if b.lang == "choreo"))
        text = prose(first)
        assert words in text, f"{first.relative_to(DOCS)} uses {const} and never says {words}"


def test_the_reference_pages_link_the_builtins_table():
    """docs/reference/builtins.md is generated elsewhere: the pages that list functions
    point to it, and it is in the nav once it exists."""
    for page in ("statements.md", "expressions.md"):
        assert "(../builtins/)" in (DOCS / "reference" / page).read_text(), page
    if (DOCS / "reference" / "builtins.md").exists():
        assert "reference/builtins.md" in (ROOT / "mkdocs.yml").read_text()


def test_an_mma_outside_roles_compiles_as_the_rules_say(workdir):
    """mma.md said MMAs are issued inside an `inthreads` role, roles.md that they run
    inside roles; storage.md's schedule.co multiplies in a warpgroup region without one."""
    for page in ("mma.md", "roles.md"):
        text = prose(DOCS / "reference" / page)
        assert "MMAs are issued inside an `inthreads` role." not in text
        assert "schedule.co" in text, f"{page} does not point to the MMA without roles"
    block = next(b for b in BLOCKS if b.attrs.get("name") == "schedule.co")
    assert "inthreads" not in block.text and "mma.row.row" in block.text
    Path("schedule.co").write_text(block.text)
    for target in TARGETS:
        rc, _, err = choreo("compile", "schedule.co", "--target", target, "--emit", "ptx",
                            "-o", f"schedule.{target}.ptx")
        assert rc == 0, f"{target}: {err}"
