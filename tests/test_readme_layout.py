"""The layout table (docs/architecture.md, "Where each stage lives") matches the tree: every path it names exists, and every module
and folder of the package is named in it (by its file name, or a `prefix_*.py` pattern)."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _table() -> list[tuple[str, list[str]]]:
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    table = text[text.index("| stage | where |"):]
    table = table[:table.index("\n\n")]
    rows = []
    for line in table.splitlines()[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows.append((cells[0], re.findall(r"`([^`]+)`", cells[1])))
    return rows


def _resolve(name: str, folder: Path) -> list[Path]:
    """The files a table entry names: relative to ROOT, else to the row's last folder."""
    for base in (ROOT, folder):
        hits = sorted(base.glob(name.rstrip("/")))
        if hits:
            return hits
    return []


def test_every_named_path_exists():
    missing = []
    for stage, names in _table():
        folder = ROOT
        for name in names:
            if "(" in name or " " in name or name.startswith("choreo_py."):
                continue  # prose and module names, not paths
            hits = _resolve(name, folder)
            if not hits:
                missing.append(f"{stage}: {name}")
            elif "/" in name:
                folder = hits[0] if hits[0].is_dir() else hits[0].parent
    assert not missing, "\n".join(missing)


def test_every_module_is_named():
    named: set[Path] = set()
    for _, names in _table():
        folder = ROOT
        for name in names:
            for hit in _resolve(name, folder):
                named.add(hit)
                if "/" in name:
                    folder = hit if hit.is_dir() else hit.parent
    package = ROOT / "choreo_py"
    wanted = [p for p in package.iterdir() if p.suffix == ".py" and p.stem not in ("__init__", "__main__")]
    wanted += [p for p in package.iterdir() if p.is_dir() and (p / "__init__.py").exists()]
    # a package counts as named when the folder or one of its files is
    unnamed = [p.name for p in wanted
               if p not in named and not any(p in n.parents for n in named)]
    assert not unnamed, f"modules the layout table of docs/architecture.md does not name: {unnamed}"
