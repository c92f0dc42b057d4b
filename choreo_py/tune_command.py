"""`choreo tune FILE --shape M=4096,... --param BN=64,128 --param STAGES=2,3`: what
`load(path, autotune=...)` does on its first call, from the command line.

The tensors are seeded random data at `--shape` on the GPU (randn for floating point,
0/1 for integers); the table of configurations (time in ms or the reason each was
skipped), the checks made and the winner go to stdout, and the winner is cached as
load()'s is, so that a program loading the file with the same space, defines and
shape key on the same GPU starts with it. `--timer MODULE:FUNCTION` replaces the CUDA
events (FUNCTION(run, config) -> milliseconds): with it the command also runs without
a GPU, its launches in the interpreter, which is how the tests drive it.
Exit status: 0 a winner, 1 no configuration ran (or an error in the program),
2 usage errors.
"""
from __future__ import annotations

import re
import sys

from . import targets
from .diagnostics import UsageError
from .frontend import parse_defines

EXIT_OK, EXIT_PROGRAM, EXIT_USAGE = 0, 1, 2
_PARAM = re.compile(r"([A-Za-z_]\w*)=(.+)")


def add_parser(sub, common) -> None:
    p = sub.add_parser("tune", help="time a program's configurations (-D values) on the GPU; "
                                    "print the table and the fastest")
    common(p)
    p.add_argument("--param", action="append", default=[], metavar="NAME=V1,V2,...",
                   help="a define to tune and its values (repeat for more: every "
                        "combination is tried), e.g. --param BN=64,128")
    p.add_argument("--shape", action="append", default=[], metavar="NAME=N,...",
                   help="sizes of the symbolic dimensions, e.g. M=4096,N=4096,K=4096")
    p.add_argument("--key", metavar="NAME,...",
                   help="what identifies a shape in the cache (dimensions, parameters or "
                        "defines; default: every dimension)")
    p.add_argument("--target", default=None, choices=targets.NAMES,
                   help="default: the GPU present, else sm_100a")
    p.add_argument("--warmup", type=int, default=10, help="untimed calls per configuration")
    p.add_argument("--reps", type=int, default=50,
                   help="timed calls per configuration (the median is kept)")
    p.add_argument("--timer", metavar="MODULE:FUNCTION",
                   help="time with FUNCTION(run, config) -> ms instead of CUDA events "
                        "(then the tensors may be on the CPU, run by the interpreter)")


def parse_params(items: list[str]) -> dict:
    """`["BN=64,128", "STAGES=2"]` -> {"BN": ["64", "128"], "STAGES": ["2"]}."""
    space: dict = {}
    for item in items:
        m = _PARAM.fullmatch(item.strip())
        values = [v.strip() for v in m.group(2).split(",") if v.strip()] if m else []
        if m is None or not values:
            raise UsageError(f"--param: '{item}' is not NAME=VALUE,... (e.g. --param BN=64,128)")
        if m.group(1) in space:
            raise UsageError(f"--param: {m.group(1)} is given twice")
        space[m.group(1)] = values
    if not space:
        raise UsageError("tune: nothing to tune: give --param NAME=V1,V2,...")
    return space


def tune_command(args) -> int:
    try:
        return _tune(args)
    except UsageError as e:
        print(f"choreo: error: {e}", file=sys.stderr)
        return EXIT_USAGE


def _tune(args) -> int:
    from .interp.command import parse_shape
    from .runtime.autotune import Autotuned, NoConfiguration, event_timer
    from .runtime.launch import ChoreoRuntimeError

    space, dims = parse_params(args.param), parse_shape(args.shape)
    if args.reps < 1 or args.warmup < 0:
        raise UsageError(f"--reps must be at least 1 and --warmup at least 0 (got "
                         f"{args.reps}, {args.warmup})")
    timer = _timer(args) if args.timer else event_timer(args.warmup, args.reps)
    key = [k.strip() for k in args.key.split(",") if k.strip()] if args.key else None
    try:
        tuner = Autotuned(args.file, space, key, target=args.target, include_dirs=args.include,
                          defines=parse_defines(args.define), timer=timer, verbose=False)
    except ValueError as e:
        raise UsageError(str(e)) from None
    tensors = _tensors(tuner, dims, on_cpu=bool(args.timer))
    try:
        tuner.best(tensors)
    except NoConfiguration as e:
        print(str(e).split("\n", 1)[1], end="")
        return EXIT_PROGRAM
    except ChoreoRuntimeError as e:
        raise UsageError(str(e)) from None
    print(tuner.report.table(), end="")
    return EXIT_OK


def _timer(args):
    from .interp.python_ref import load_reference

    return load_reference(args.timer, "--timer")


def _tensors(tuner, dims: dict, on_cpu: bool) -> list:
    """Seeded random tensors at `dims`: on the GPU, or on the CPU when there is none and a
    timer other than CUDA events was given."""
    import torch

    from .runtime.autotune import small_inputs

    sig = tuner.signature
    need = list(dict.fromkeys(d for _, _, s in sig.meta.TENSORS for d in s if isinstance(d, str)))
    missing, extra = [d for d in need if d not in dims], [d for d in dims if d not in need]
    if missing or extra:
        what = f"needs {', '.join(missing)}" if missing else f"has no {', '.join(extra)}"
        raise UsageError(f"--shape: {sig.name} {what} (its dimensions: {', '.join(need)})")
    if not torch.cuda.is_available() and not on_cpu:
        raise UsageError("tune: timing needs a CUDA GPU (or --timer MODULE:FUNCTION)")
    device = "cuda" if torch.cuda.is_available() else "cpu"
    return [t.to(device) for t in small_inputs(sig, dims).values()]
