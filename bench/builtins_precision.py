"""The math builtins' precision, measured, and the reference page generated from it.

For each math builtin of the compiler's table (choreo_py/frontend/builtins.py: MATH) a
thread kernel applies it to a sample of its domain; the PTX each target's backend emits is
run by the emulator (choreo_py/emu) and the interpreter runs the same program; both are
compared with the builtin's value in float64 (numpy, or choreo_py/ir/math_defs.py for the
builtins without a C library function). A target whose backend refuses the builtin is
recorded with its refusal.

    python bench/builtins_precision.py --measure    # writes bench/data/builtins_precision.json
    python bench/builtins_precision.py --markdown   # prints docs/reference/builtins.md

The emulator's approximate instructions (`ex2.approx`, `lg2.approx`, `sin.approx`,
`rsqrt.approx`, ...) return one of the two f32 values around the exact result (faithful
rounding, docs/emulator.md); the hardware's are bounded by the PTX ISA's figures, which
can be a few ulps more. The measured numbers are the sequences' error given faithful
instructions. tests/test_builtins_precision.py re-measures and compares with the file.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile

import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from choreo_py.frontend import builtins  # noqa: E402
from choreo_py.ir import math_defs  # noqa: E402

DATA = os.path.join(ROOT, "bench", "data", "builtins_precision.json")
GPU_DATA = os.path.join(ROOT, "bench", "data", "builtins_precision_gpu.json")
PAGE = os.path.join(ROOT, "docs", "reference", "builtins.md")
TARGETS = ("sm_90a", "sm_100a")
N = 1024        # sample points per builtin (4 blocks of 256 threads)

#: IR builtin -> the range of each argument that is measured
DOMAINS = {
    "exp": [(-20, 20)], "exp2": [(-30, 30)], "expm1": [(-10, 10)], "log": [(1e-3, 1e3)],
    "log1p": [(-0.9, 100)], "pow": [(0.1, 10), (-4, 4)], "sin": [(-8, 8)], "cos": [(-8, 8)],
    "tan": [(-1.5, 1.5)], "asin": [(-1, 1)], "acos": [(-1, 1)], "atan": [(-20, 20)],
    "atan2": [(-4, 4), (-4, 4)], "sinh": [(-10, 10)], "cosh": [(-10, 10)], "tanh": [(-10, 10)],
    "sqrt": [(1e-3, 1e3)], "rsqrt": [(1e-3, 1e3)], "rcp": [(0.01, 100)],
    "fma": [(-10, 10), (-10, 10), (-10, 10)], "abs": [(-10, 10)], "max": [(-10, 10), (-10, 10)],
    "min": [(-10, 10), (-10, 10)], "ceil": [(-10, 10)], "floor": [(-10, 10)],
    "round": [(-10, 10)], "sign": [(-10, 10)], "isfinite": [(-10, 10)], "gelu": [(-8, 8)],
    "sigmoid": [(-20, 20)], "softplus": [(-20, 20)],
}
#: arguments outside the domain each builtin must also get right (compared exactly, NaN
#: where float64 gives NaN): zeros, infinities, NaN, halves for the roundings
SPECIALS = [0.0, -0.0, math.inf, -math.inf, math.nan, 0.5, -0.5, 2.5, -2.5, 1e30, -1e30]

_NUMPY = {
    "exp": np.exp, "exp2": np.exp2, "expm1": np.expm1, "log": np.log, "log1p": np.log1p,
    "pow": np.power, "sin": np.sin, "cos": np.cos, "tan": np.tan, "asin": np.arcsin,
    "acos": np.arccos, "atan": np.arctan, "atan2": np.arctan2, "sinh": np.sinh,
    "cosh": np.cosh, "tanh": np.tanh, "sqrt": np.sqrt, "rsqrt": lambda x: 1 / np.sqrt(x),
    "rcp": lambda x: 1 / x, "fma": lambda x, y, z: x * y + z, "abs": np.abs,
    "max": np.fmax, "min": np.fmin,
}


def exact(fn: str, args: list[np.ndarray]) -> np.ndarray:
    """The builtin's value in float64 at the (f32) arguments."""
    xs = [a.astype(np.float64) for a in args]
    with np.errstate(all="ignore"):
        if fn in _NUMPY:
            return _NUMPY[fn](*xs)
    f = math_defs.FUNCTIONS[fn]
    return np.array([f(float(v)) for v in xs[0]])


def sample(fn: str, n: int = N) -> list[np.ndarray]:
    """n points per argument over its domain (a second argument runs over its range in a
    different order, so that pairs cover the square), as f32."""
    out = []
    for k, (lo, hi) in enumerate(DOMAINS[fn]):
        v = np.linspace(lo, hi, n)
        if k:
            v = v[(np.arange(n) * (2 * k + 31)) % n]
        out.append(v.astype(np.float32))
    return out


KERNEL = """\
__co__ f32 [{n}] k({params}) {{
  f32 [{n}] o;
  parallel p by {blocks} : block
    parallel q by 256 : thread {{
      i = p * 256 + q;
      o.at(i) = {call};
    }}
  return o;
}}
"""


def source(m: builtins.MathBuiltin, n: int) -> str:
    names = "abc"[:len(m.params)]
    params = ", ".join(f"f32 [{n}] {a}" for a in names)
    call = f"{m.name}({', '.join(f'{a}.at(i)' for a in names)})"
    return KERNEL.format(n=n, params=params, blocks=n // 256, call=call)


def _ulps(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """|got - want| in units of the f32 spacing at the exact value (2^-126's below it)."""
    spacing = np.spacing(np.maximum(np.abs(want), 2.0 ** -126).astype(np.float32))
    return np.abs(got - want) / spacing.astype(np.float64)


def errors(got: np.ndarray, want: np.ndarray) -> dict:
    """The largest error in ulps, relative to the exact value and absolute, over finite
    results (near a zero of sin or cos the absolute error is the meaningful one)."""
    got = got.astype(np.float64)
    ok = np.isfinite(want) & np.isfinite(got)
    if not ok.any():
        return {"ulp": 0.0, "rel": 0.0, "abs": 0.0, "points": 0}
    g, w = got[ok], want[ok]
    with np.errstate(all="ignore"):
        rel = np.where(w == 0, np.abs(g), np.abs(g - w) / np.abs(w))
    return {"ulp": float(_ulps(g, w).max()), "rel": float(rel.max()),
            "abs": float(np.abs(g - w).max()), "points": int(ok.sum())}


def specials_agree(got: np.ndarray, want: np.ndarray) -> list[str]:
    """The special arguments whose result differs in kind (NaN, an infinity, its sign)."""
    bad = []
    for x, g, w in zip(SPECIALS, got.astype(np.float64), want):
        if math.isnan(w) != math.isnan(g) or (math.isinf(w) and g != w):
            bad.append(f"{x!r}: {g!r} (float64 {w!r})")
    return bad


def _run(path: str, fn_args: list[torch.Tensor], side: str):
    import choreo_py

    if side == "gpu":  # the GPU present, with the target it is
        out = choreo_py.load(path).k(*[a.cuda() for a in fn_args])
        torch.cuda.synchronize()
        return out.cpu().numpy()
    if side == "interp":
        lib = choreo_py.interpret(path, target="sm_90a")
    else:
        lib = choreo_py.emulate_program(path, target=side)
    return lib.k(*fn_args).numpy()


def measure_one(m: builtins.MathBuiltin, side: str, n: int = N) -> dict:
    """The errors of `side` (a target, run by the emulator, or "interp") on m's sample, and
    which special arguments it gets wrong; a refusal's message for a target that refuses."""
    from choreo_py.diagnostics import ChoreoError

    args = sample(m.ir, n)
    want = exact(m.ir, args)
    pad = -(-len(SPECIALS) // 256) * 256
    special = [np.array(SPECIALS + [1.0] * (pad - len(SPECIALS)), np.float32)] * len(args)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "k.co")
        try:
            with open(path, "w") as f:
                f.write(source(m, n))
            got = _run(path, [torch.from_numpy(a) for a in args], side)
            with open(path, "w") as f:
                f.write(source(m, pad))
            got_s = _run(path, [torch.from_numpy(a) for a in special], side)
        except ChoreoError as e:
            return {"refused": str(e).splitlines()[0]}
    out = errors(got, want)
    at = [special[0][:len(SPECIALS)]] * len(args)
    out["specials"] = specials_agree(got_s[:len(SPECIALS)], exact(m.ir, at))
    return out


def measure(names=None, n: int = N, sides=("interp", *TARGETS)) -> dict:
    res = {}
    for m in builtins.MATH:
        if names and m.name not in names:
            continue
        res[m.name] = {side: measure_one(m, side, n) for side in sides}
        print(m.name, json.dumps(res[m.name]), file=sys.stderr)
    return {"points": n, "domains": {m.name: DOMAINS[m.ir] for m in builtins.MATH}, "results": res}


def measure_gpu() -> dict:
    """The same sample on the GPU present (its hardware's approximate instructions)."""
    data = measure(sides=("gpu",))
    data["device"] = torch.cuda.get_device_name()
    return data


def _fmt_ulp(r: dict) -> str:
    if "refused" in r:
        return "refused"
    u = r["ulp"]
    return "exact" if u == 0 else f"{u:.3g} ulp"


def _fmt(r: dict, key: str) -> str:
    return "" if "refused" in r or r[key] == 0 else f"{r[key]:.2g}"


def _domain(d) -> str:
    return " × ".join(f"[{lo:g}, {hi:g}]" for lo, hi in d)


def stored() -> tuple[dict, dict | None]:
    """The emulator's and interpreter's measurements, and the GPU's where it was measured."""
    with open(DATA) as f:
        data = json.load(f)
    if not os.path.exists(GPU_DATA):
        return data, None
    with open(GPU_DATA) as f:
        return data, json.load(f)


def markdown(data: dict, gpu: dict | None = None) -> str:
    """docs/reference/builtins.md from the table and the measurements."""
    lines = [
        "# Math builtins",
        "",
        "<!-- generated by `python bench/builtins_precision.py --markdown` from the compiler's",
        "     table (choreo_py/frontend/builtins.py) and bench/data/builtins_precision.json;",
        "     tests/test_builtins_precision.py checks this page equals what it generates -->",
        "",
        "The scalar math builtins of the language, as the reference's scanner spells them",
        "(one spelling each: a C spelling such as `__expf` or `__rsqrtf` is not a builtin,",
        "and `check` names the builtin it means). An argument is a float (`f16`, `bf16`,",
        "`f32`; an integer converts to `f32`) and the result has its type (`__fabs`,",
        "`__max`, `__min` also take integers, and keep their type); the backends compute",
        "in `f32` registers and refuse an `f64` scalar by name. `__alignup(x, a)` and",
        "`__aligndown(x, a)` are integer builtins computed at compile time or in integer",
        "registers.",
        "",
        f"Precision: the largest error over {data['points']} points of the domain, against the",
        "builtin's value in float64, in units in the last place of `f32` at the exact value",
        "(ulp) and relative to it. The targets' numbers are the emitted PTX run by the",
        "emulator, whose approximate instructions (`ex2.approx`, `lg2.approx`, `sin.approx`,",
        "`rsqrt.approx`, ...) are faithfully rounded; on the GPU those carry the PTX ISA's",
        "bounds (a few ulps, or an absolute 2^-20.9 for `sin.approx`/`cos.approx`), which add",
        "to the figures here. The interpreter computes in double precision and rounds once,",
        "except `__exp`, `__exp2f`, `__log`, `__sqrt` and `__rsqrt` of a block's threads at",
        "once, which torch computes in `f32`.",
        "Each builtin also gets zeros, infinities, NaN and halves right (the same kind of",
        "result as float64), unless a note says otherwise.",
    ]
    if gpu is not None:
        lines += [
            "",
            f"The last columns are the sm_90a PTX on a GPU ({gpu['device']}), the same sample:",
            "the hardware's approximate instructions inside.",
        ]
    head = ["builtin", "computes", "domain", "interpreter", "sm_90a", "sm_100a",
            "sm_100a relative", "sm_100a absolute"]
    if gpu is not None:
        head += ["GPU", "GPU relative"]
    lines += ["", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    notes = []
    for m in builtins.MATH:
        r = dict(data["results"][m.name])
        if gpu is not None:
            r["gpu"] = gpu["results"][m.name]["gpu"]
        row = [f"`{m.signature()}`", m.what, _domain(data["domains"][m.name]),
               _fmt_ulp(r["interp"]), _fmt_ulp(r["sm_90a"]), _fmt_ulp(r["sm_100a"]),
               _fmt(r["sm_100a"], "rel"), _fmt(r["sm_100a"], "abs")]
        if gpu is not None:
            row += [_fmt_ulp(r["gpu"]), _fmt(r["gpu"], "rel")]
        lines.append("| " + " | ".join(row) + " |")
        for side, got in r.items():
            if got.get("refused"):
                notes.append(f"- `{m.name}`, {side}: {got['refused']}")
            for sp in got.get("specials", []):
                notes.append(f"- `{m.name}`, {side}, special argument {sp}")
    lines += ["", "Spellings that are not the language's, and the builtin `check` suggests:", ""]
    lines.append(", ".join(f"`{c}` → `{b}`" for c, b in sorted(builtins.C_SPELLINGS.items())))
    if notes:
        lines += ["", "## Notes", "", *notes]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--measure", action="store_true", help=f"measure, write {DATA}")
    ap.add_argument("--gpu", action="store_true", help=f"measure on the GPU, write {GPU_DATA}")
    ap.add_argument("--markdown", action="store_true", help="print the reference page")
    ap.add_argument("--write", action="store_true", help=f"with --markdown: write {PAGE}")
    ap.add_argument("names", nargs="*", help="only these builtins (with --measure: printed)")
    a = ap.parse_args(argv)
    if a.measure:
        data = measure(a.names)
        if a.names:
            print(json.dumps(data, indent=1))
        else:
            with open(DATA, "w") as f:
                json.dump(data, f, indent=1, sort_keys=True)
                f.write("\n")
    if a.gpu:
        with open(GPU_DATA, "w") as f:
            json.dump(measure_gpu(), f, indent=1, sort_keys=True)
            f.write("\n")
    if a.markdown:
        text = markdown(*stored())
        if a.write:
            with open(PAGE, "w") as f:
                f.write(text)
        else:
            sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
