"""Time `choreo check` on programs built to stress the analyses' bounds.

    python3 bench/bounds.py            # the table below, timed in this process
    python3 bench/bounds.py --write D  # also write the generated programs into D

Programs (from examples/gemm.co):
  straight-N   N lets `tI = k_tiles + I;` in the consumer role (N statements)
  loop-N       the same N lets inside the consumer's K loop
  block-N      the same N lets at block level, before the parallel region
  wide-W       `parallel p by [BM / WG_M + W] : group-4` (W + 2 warpgroups)
  macro-D      `#define M1 M0 M0` ... `M<D>`: 2^D tokens, refused at the cap

Each row: seconds for parse + checks (`frontend.check_file`), and the
warnings/errors it printed (first 90 characters).
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from choreo_py import frontend  # noqa: E402
from choreo_py.diagnostics import ChoreoError, take_warnings  # noqa: E402

GEMM = (ROOT / "examples" / "gemm.co").read_text()


def lets(n: int, indent: str) -> str:
    return "".join(f"{indent}t{i} = k_tiles + {i};\n" for i in range(n))


def straight(n: int) -> str:
    return GEMM.replace("        cid = p - 1;\n", "        cid = p - 1;\n" + lets(n, " " * 8))


def loop(n: int) -> str:
    return GEMM.replace("          wait step;\n", "          wait step;\n" + lets(n, " " * 10))


def block(n: int) -> str:
    return GEMM.replace("    k_tiles = cdiv(K, BK);\n",
                        "    k_tiles = cdiv(K, BK);\n" + lets(n, " " * 4))


def wide(w: int) -> str:
    return GEMM.replace("BM / WG_M + 1]", f"BM / WG_M + {w}]")


def macro(depth: int) -> str:
    defs = ["#define M0 x"] + [f"#define M{i} M{i - 1} M{i - 1}" for i in range(1, depth + 1)]
    return "\n".join(defs) + f"\nint y = M{depth};\n"


CASES = [("straight", straight, (1000, 2000, 4000, 8000, 10000)),
         ("loop", loop, (1000, 10000)), ("block", block, (1000, 10000)),
         ("wide", wide, (10000, 65536)), ("macro", macro, (20, 40))]


def time_check(path: Path) -> tuple[float, str]:
    start = time.perf_counter()
    try:
        frontend.check_file(str(path))
        said = [w.render().splitlines()[0] for w in take_warnings()]
    except ChoreoError as e:
        said = [e.render().splitlines()[0]] + [w.render() for w in take_warnings()]
    return time.perf_counter() - start, "; ".join(s.split(": ", 1)[-1][:90] for s in said)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", metavar="DIR", help="keep the generated programs here")
    args = ap.parse_args()
    folder = Path(args.write or tempfile.mkdtemp(prefix="choreo_bounds_"))
    folder.mkdir(parents=True, exist_ok=True)
    print(f"{'program':<16} {'seconds':>8}  said")
    for name, make, sizes in CASES:
        for n in sizes:
            path = folder / f"{name}-{n}.co"
            path.write_text(make(n))
            secs, said = time_check(path)
            print(f"{name + '-' + str(n):<16} {secs:8.2f}  {said}")


if __name__ == "__main__":
    main()
