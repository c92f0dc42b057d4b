"""The seed's hand-written Blackwell FlashAttention kernel (pyptx), restored from the seed.

`../shared/seeds/pyptx_flash_attention_blackwell.txt` is a copy, taken from a
web page, of pyptx's `examples/blackwell/flash_attention_blackwell.py`
(github.com/patrick-toulme/pyptx; pyptx is licensed under the Apache License,
Version 2.0: http://www.apache.org/licenses/LICENSE-2.0). The copy lost its
indentation, its blank lines and runs of spaces. This module holds none of
that code: it holds the indentation of each line of the seed's source part
(INDENT) and rebuilds the source from the seed when asked. The indentation was
worked out by comparing the seed, line by line, with the public file at
commit 7ed70d8cf31341a14ba80e77046fff43c0fb3cbb; the seed is a later version
of it (it adds the `dbg_scoreboard_ld` option: the softmax stream reads its
tcgen05.ld registers without tcgen05.wait::ld, on by default), whose 13 new
lines were indented by hand to the blocks they belong to. Runs of spaces
inside lines (comment alignment) are not restored.

Only the 1-CTA builder, `build_flash_attention_blackwell` (seed lines 22-1082:
the module's constants and helpers and that function), is restored. The
seed's 2-CTA and occupancy-2 variants and its GPU test follow it; they need
clusters and cta_group::2, which the emulator refuses.

pyptx 0.1.1 (the release on PyPI) lacks `pyptx.debugkit`, which the builder
imports for its optional wait map; `load()` puts a stub in its place (the
names exist; constructing a WaitMap, i.e. `waitmap=True`, raises).

    python bench/reference/pyptx_fa_blackwell.py -o fa_blackwell.py   # write the source
"""
from __future__ import annotations

import argparse
import hashlib
import os
import sys
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SEED_NAME = "seeds/pyptx_flash_attention_blackwell.txt"
SEED_SHA256 = "58352c762acde67ddb386a07c21bb5f6d38bc27e40d37d69993c2092ca325585"
FIRST, LAST = 22, 1082  # the seed's lines of the 1-CTA builder (1-based, inclusive)

# One token per run of lines: "[+]N[*K]" = K lines (default 1) indented by N spaces,
# "+" = a blank line before the first of them.
INDENT = (
    '0 +0*3 +0*2 2 0 2*6 0 2 0*2 2*5 0 +0 +4*4 +0*4 +0 +0*3 +0 +0*5 +0*4 +0*31 +0*4 +0*2 +0*3 '
    '+0 4 +0*6 +0 4 +4*11 +0*2 +0 4 +4*4 +0 4*25 0 4*5 8 4*4 +4*8 +4*2 +4 8 12*3 8*7 4*3 8 12 '
    '4 8 +4 8*4 12*4 +8*8 +8*3 12*4 8*4 +8*6 12*2 16 8 12*2 8 +8 12 16 12*3 +8*3 12*3 16*6 20 '
    '16*2 12 +8*2 12 16*3 20 16*3 20 12 16*2 12*4 16 12 16*2 12 8 12 8*2 +8*9 +8*6 12 +8 12 '
    '16 20 24*4 20 +12*4 16 12*3 +12 16*5 +12*5 16*5 +16*12 +16*3 20*4 24 28 24 28 24*2 +16*3 '
    '+8*4 +8 12 16 20 16*2 20 16 12 16 20*2 24 20 16*2 20*2 24 20 16 12*3 16*4 +12*3 16*2 12 '
    '+12 16 20 16*3 +12*2 16*2 12*2 16*2 12*2 16*2 12 +12 16*2 20 24*2 20 16 +12*2 16 12*2 16 '
    '12 +12 16*2 +12 16*2 20 24*2 20*3 24 28*2 24*2 20*2 24*2 28*3 24 16*3 +12*7 16 12 16 '
    '20*2 16*10 +16*9 +16*3 20*4 24*10 28*2 24*6 28*2 24*4 +16*4 +16*3 20 16*2 +16*3 +12*5 16 '
    '20 +8*10 12*2 +12*3 +12*10 16*13 +12*7 +12*8 16*3 12*2 16*3 12*2 16*4 12*3 16*7 +12*2 '
    '+12 16*11 12 16*2 12*2 +12 16*25 +12 16 20*2 24*2 20*4 +12 16*2 20*6 24 20 24 20*3 24 20 '
    '24 20 24 +12 16*3 +16*4 20*2 35*2 16 20 +16 20*7 24*4 20*2 +20*11 24 20 24 20*5 +16 20 '
    '+16 20*6 24*2 28*3 43*2 24*2 28*2 24*4 39 24*5 28*3 24*2 28*3 32 28 32 28 32 28*3 32 28 '
    '32 28 32 +20*17 24 20*4 +16*2 20 24*4 28*3 43 20 24*2 28*3 43 20*3 24 20*12 +16*6 +12 16 '
    '+12*6 16 12 16 20*2 16*7 20*6 +16*9 +16*3 +8*4 12*7 16*6 +12*4 16*2 12 16 +12*5 +12*5 '
    '14*11 16*5 20*15 24*2 28*5 32 28 24*4 28 24*2 16*2 +14*4 18*2 +14*5 +14*4 +14*3 +14 16*7 '
    '+16*6 20*2 +16 20*5 24*8 28 24 28 20 24 20 24 28 32*4 24 28 32 36*2 32 24 28 32*2 28 16 '
    '20*2 +14*2 +8*2 12*4 8 12*2 8 +4 8*2 12 4 8*2 12 +4*2 '
)


class SeedError(Exception):
    """The seed is missing or is not the file INDENT was made for."""


def seed_path() -> Path:
    return Path(os.environ.get("CHOREO_SHARED") or ROOT.parent / "shared") / SEED_NAME


def _layout() -> list:
    out = []
    for tok in INDENT.split():
        blank = tok.startswith("+")
        n, _, k = tok.lstrip("+").partition("*")
        for i in range(int(k or 1)):
            out.append((int(n), blank and i == 0))
    return out


def restore(path: Path | None = None) -> str:
    """The restored source of the 1-CTA builder (raises SeedError)."""
    path = Path(path) if path is not None else seed_path()
    if not path.is_file():
        raise SeedError(f"{path}: not found (set CHOREO_SHARED to the shared folder)")
    data = path.read_bytes()
    if hashlib.sha256(data).hexdigest() != SEED_SHA256:
        raise SeedError(f"{path}: not the seed this restoration was made for (sha256 differs)")
    lines = data.decode("utf-8").split("\n")[FIRST - 1:LAST]
    layout = _layout()
    assert len(layout) == len(lines), (len(layout), len(lines))
    out = []
    for line, (indent, blank) in zip(lines, layout):
        if blank:
            out.append("")
        out.append(" " * indent + line.strip())
    return "\n".join(out) + "\n"


def _debugkit_stub() -> None:
    """pyptx.debugkit, as far as the builder needs it when waitmap=False."""
    try:
        import pyptx.debugkit  # noqa: F401
        return
    except ImportError:
        pass
    stub = types.ModuleType("pyptx.debugkit")
    stub.WAITMAP_MAX_SITES = 0

    class WaitMap:
        def __init__(self, *a, **k):
            raise NotImplementedError("pyptx.debugkit is not in pyptx 0.1.1 (stub): waitmap=True "
                                      "is not available")
    stub.WaitMap = WaitMap
    sys.modules["pyptx.debugkit"] = stub


def load(path: Path | None = None) -> types.ModuleType:
    """The restored kernel as a module (`.build_flash_attention_blackwell`)."""
    source = restore(path)
    _debugkit_stub()
    mod = types.ModuleType("pyptx_fa_blackwell_restored")
    mod.__file__ = "pyptx_fa_blackwell_restored.py"
    exec(compile(source, mod.__file__, "exec"), mod.__dict__)  # noqa: S102 - the seed
    return mod


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-o", "--output", help="write the restored source here (default: stdout)")
    ap.add_argument("--seed", help=f"the seed file (default: $CHOREO_SHARED/{SEED_NAME})")
    args = ap.parse_args(argv)
    try:
        source = restore(Path(args.seed) if args.seed else None)
    except SeedError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    if args.output:
        Path(args.output).write_text(source, encoding="utf-8")
    else:
        sys.stdout.write(source)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
