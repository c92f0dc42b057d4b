"""The AST dump of the seed kernel, compared with a golden file.

Regenerate after an intended change with `pytest --update-goldens`.
"""
from pathlib import Path

from choreo_py import frontend

ROOT = Path(__file__).resolve().parent.parent
SEED = ROOT / "examples" / "flash_atten_causal.co"
GOLDEN = Path(__file__).resolve().parent / "golden" / "flash_atten_causal.ast.txt"


def _dump() -> str:
    program = frontend.parse_file(str(SEED))
    # only Program shows a file name: keep it independent of the checkout's place
    program.file = "examples/flash_atten_causal.co"
    return frontend.dump_ast(program)


def test_seed_ast_golden(golden):
    golden(GOLDEN, _dump())


def test_dump_is_deterministic():
    assert _dump() == _dump()


def test_seed_passes_the_parse_checks():
    program = frontend.check_file(str(SEED))
    (fn,) = program.functions
    assert fn.name == "flash_atten"
