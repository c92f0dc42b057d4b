"""The import graph of the package: one name per module, no cycles, no upward imports.

The package is choreo_py/ plus the top-level folders grammar/ and lowering/,
installed as choreo_py.grammar and choreo_py.lowering (pyproject.toml). Every
import is read from the source (top-level and function-level imports alike;
only `if TYPE_CHECKING:` blocks are left out, as they never run).

Layers, lowest first; a module may import its own layer and those below:

    base      source, diagnostics, targets,           facts every stage reads; the words
              construct_names, progress, pygments_lexer for constructs, progress, highlighting,
              limits, version                         the bounds of a program's structure,
                                                      the package version
    ir        ir/ (the nodes, build, printer, parse,   the contract between stages
              verify, eval, c_scalars)
    frontend  frontend/, grammar/                      .co text -> AST
    sema      check/, sema/                            AST -> rules checked, AST -> IR (no target)
    passes    passes/                                  IR -> IR facts
    lowering  lowering/   interp/   host/              IR -> pyptx | IR run on the CPU |
                                                       a function as a Python callable
    runtime   runtime/                                 pyptx -> PTX, cubin, launch
    driver    driver                                   the pipeline's order
    emulator  emu/                                     the emitted PTX run on the CPU
    command   cli, compile_command, tune_command,     the user's entry points
              __init__, __main__, interp.command,
              emu.command

A stage's modules live in its folder: a module at the top of choreo_py/ that is not
named here (a flat `ir_x.py` or `parse_x.py`) has no layer and fails the first test.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE_DIRS = {"choreo_py": ROOT / "choreo_py", "choreo_py.grammar": ROOT / "grammar",
                "choreo_py.lowering": ROOT / "lowering"}
LAYERS = ["base", "ir", "frontend", "sema", "passes", "lowering", "runtime", "driver", "emulator",
          "command"]
MAX_LINES = 600


#: the modules at the top of choreo_py/, by layer; every other module is in a folder
TOP_LEVEL = {"base": ("source", "diagnostics", "targets", "construct_names", "progress",
                      "pygments_lexer", "limits", "version"),
             "driver": ("driver",),
             "command": ("cli", "compile_command", "tune_command", "__init__", "__main__")}
#: folders of choreo_py (and the installed grammar/, lowering/), by layer
FOLDERS = {"ir": ("ir",), "frontend": ("frontend", "grammar"), "sema": ("check", "sema"),
           "passes": ("passes",), "lowering": ("lowering", "interp", "host"),
           "runtime": ("runtime",), "emulator": ("emu",)}


def layer_of(module: str) -> str:
    parts = module.split(".")
    top = parts[1] if len(parts) > 1 else "__init__"
    if module in ("choreo_py.interp.command", "choreo_py.emu.command"):  # `run`, `emulate`
        return "command"
    is_folder = len(parts) > 2 or (ROOT / "choreo_py" / top / "__init__.py").exists() \
        or top in ("grammar", "lowering")
    table = FOLDERS if is_folder else TOP_LEVEL
    for layer, names in table.items():
        if top in names:
            return layer
    raise AssertionError(f"{module}: no layer (add it to TOP_LEVEL or FOLDERS and to the "
                         "docstring)")


def modules() -> dict[str, Path]:
    """Module name -> file, for every .py file of the package."""
    out = {}
    for pkg, folder in PACKAGE_DIRS.items():
        for path in sorted(folder.rglob("*.py")):
            rel = path.relative_to(folder).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            if pkg == "choreo_py" and parts and parts[0] in ("lowering", "grammar"):
                continue
            name = ".".join([pkg, *parts])
            out[name] = path
    return out


def _type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or \
        (isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST):
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and _type_checking(node):
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        yield from _imports(node)


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """The package modules `name` imports (a `from X import Y` of a submodule Y counts
    as an import of X.Y)."""
    is_pkg = path.name == "__init__.py"
    package = name if is_pkg else name.rsplit(".", 1)[0]
    out = set()
    for node in _imports(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
            subs = []
        else:
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            targets = [mod]
            subs = [f"{mod}.{a.name}" for a in node.names]
        for t in targets + subs:
            while t and t not in known:
                t = t.rpartition(".")[0]
            if t and t != name and t.startswith("choreo_py"):
                out.add(t)
    return out


def graph() -> dict[str, set[str]]:
    mods = modules()
    known = set(mods)
    return {name: imports_of(name, path, known) for name, path in mods.items()}


def _parents(name: str) -> set[str]:
    """Importing a.b.c runs a/__init__ and a/b/__init__ first: not an edge we check."""
    parts = name.split(".")
    return {".".join(parts[:i]) for i in range(1, len(parts))}


def test_every_module_has_a_layer():
    for name in modules():
        assert layer_of(name) in LAYERS


def test_no_upward_imports():
    bad = []
    for name, deps in graph().items():
        mine = LAYERS.index(layer_of(name))
        for dep in sorted(deps - _parents(name)):
            if dep in ("choreo_py", "choreo_py.lowering", "choreo_py.grammar"):
                continue  # package namespaces, not modules with code of their own
            if LAYERS.index(layer_of(dep)) > mine:
                bad.append(f"{name} ({layer_of(name)}) imports {dep} ({layer_of(dep)})")
    assert not bad, "\n".join(bad)


def test_no_cycles():
    g = graph()
    state: dict[str, int] = {}
    stack: list[str] = []
    cycles = []

    def visit(n: str) -> None:
        state[n] = 1
        stack.append(n)
        for d in sorted(g[n] - _parents(n)):
            if state.get(d) == 1:
                cycles.append(stack[stack.index(d):] + [d])
            elif d not in state:
                visit(d)
        stack.pop()
        state[n] = 2

    for n in sorted(g):
        if n not in state:
            visit(n)
    assert not cycles, "\n".join(" -> ".join(c) for c in cycles)


def test_the_lowering_imports_no_pass():
    """What a backend needs of a pass is in the IR (a fact the pass stored) or in a module
    below both (choreo_py/ir/, targets.py): a lowering module that imports a pass could
    recompute its decision instead of reading it, or run it on IR that skipped it."""
    g = graph()
    bad = [f"{name} imports {dep}" for name, deps in sorted(g.items())
           if name.startswith("choreo_py.lowering.") for dep in sorted(deps)
           if dep == "choreo_py.passes" or dep.startswith("choreo_py.passes.")]
    assert not bad, "\n".join(bad)


def test_ir_to_backend_is_a_plain_import():
    """The runtime reaches each backend of the target table by a static import."""
    from choreo_py import targets

    deps = graph()["choreo_py.runtime.build"]
    for t in targets.TARGETS.values():
        assert f"choreo_py.lowering.{t.backend}" in deps, t.name


@pytest.mark.parametrize("folder", ["choreo_py", "lowering", "grammar", "bench", "tests"])
def test_nothing_imports_a_second_name(folder):
    """grammar/ and lowering/ are parts of choreo_py; imported as `lowering.x` from a
    checkout, one file would load as two modules with two sets of globals."""
    bad = []
    for path in sorted((ROOT / folder).rglob("*.py")):
        if path == Path(__file__).resolve():
            continue
        for node in _imports(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) \
                else [node.module or ""] if not node.level else []
            bad += [f"{path.relative_to(ROOT)}:{node.lineno}: {n}" for n in names
                    if n.split(".")[0] in ("lowering", "grammar")]
        text = path.read_text(encoding="utf-8")
        if "import_module(" in text and ("lowering" in text or "grammar" in text):
            bad.append(f"{path.relative_to(ROOT)}: imports by a computed name")
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("folder", ["choreo_py", "lowering", "grammar", "bench", "tests"])
def test_long_modules_say_why(folder):
    """No module over 600 lines without a reason written at its top (its docstring says
    'Long because: ...'): the package, and the benchmarks, references and tests beside it."""
    bad = []
    for path in sorted((ROOT / folder).rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if text.count("\n") > MAX_LINES:
            doc = ast.get_docstring(ast.parse(text)) or ""
            if "Long because:" not in doc:
                bad.append(f"{path.relative_to(ROOT)}: {text.count(chr(10))} lines")
    assert not bad, "\n".join(bad)
