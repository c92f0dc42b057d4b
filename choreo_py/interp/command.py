"""`choreo run FILE --shape B=1,H=2,...`: interpret a program on random inputs.

The inputs (parameters the kernels read) get seeded random data (randn,
rounded to the parameter's dtype); outputs start as NaN, so that an element
the program never writes fails the check. The result is compared with a
reference (checks.py) and the command fails when the relative error
exceeds the tolerance. Exit status: 0 ok, 1 a fault of the program (a
deadlock, a race, a wrong result), 2 usage errors (missing or unknown
dimensions, a check that does not fit the parameters).
"""
from __future__ import annotations

import re
from typing import Optional
import sys
import time

from . import checks
from .. import ir, targets
from ..frontend import parse_defines
from .api import (UsageError, check_dims, function_dims, load_module, param_shape,
                  param_usage, pick_function)
from ..progress import Progress
from .fragments import RowOwners
from .runner import RunStats, interpret_module

EXIT_OK, EXIT_PROGRAM, EXIT_USAGE = 0, 1, 2
#: The kernels' sizes are 32-bit signed integers (`.param .u32 dim_M`, s32 index math).
MAX_SIZE = 2**31 - 1
#: What `run` allocates for its tensors at most: the interpreter is for checking programs
#: on small shapes, and the allocation of a larger run would fail inside torch.
MAX_RUN_BYTES = 8 << 30
_ENTRY = re.compile(r"\s*([A-Za-z_]\w*)\s*=\s*([0-9]+)\s*")


def parse_shape(items: list[str]) -> dict[str, int]:
    """`["B=1,H=2", "S=128"]` -> {"B": 1, "H": 2, "S": 128}; bad entries are usage errors."""
    dims: dict[str, int] = {}
    for item in items:
        for entry in item.split(","):
            if not entry.strip():
                continue
            m = _ENTRY.fullmatch(entry)
            if m is None:
                raise UsageError(f"--shape: '{entry.strip()}' is not NAME=SIZE "
                                 "(e.g. --shape B=1,H=2,Q_SEQ=256,KV_SEQ=256)")
            name, size = m.group(1), int(m.group(2))
            if size < 1:
                raise UsageError(f"--shape: {name} must be at least 1, not {size}")
            if size > MAX_SIZE:
                shown = m.group(2) if len(m.group(2)) <= 24 else m.group(2)[:21] + "..."
                raise UsageError(f"--shape: {name}={shown} is larger than {MAX_SIZE}, the "
                                 "largest size (the kernels' sizes are 32-bit signed integers)")
            if name in dims and dims[name] != size:
                raise UsageError(f"--shape: {name} is given twice ({dims[name]} and {size})")
            dims[name] = size
    return dims


def parse_values(items: list[str]) -> dict:
    """`["is_causal=true,W=5"]` -> {"is_causal": True, "W": 5}: integers, floats, true/false."""
    out: dict = {}
    for item in items:
        for entry in item.split(","):
            if not entry.strip():
                continue
            name, eq, text = (x.strip() for x in entry.partition("="))
            if not eq or not re.fullmatch(r"[A-Za-z_]\w*", name):
                raise UsageError(f"--arg: '{entry.strip()}' is not NAME=VALUE (e.g. --arg W=5)")
            out[name] = _value(name, text)
    return out


def _value(name: str, text: str):
    if text in ("true", "false"):
        return text == "true"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    raise UsageError(f"--arg: {name}={text} is not a number, true or false")


def _bind_dims(fn, dims: dict, values: Optional[dict] = None) -> None:
    """Checks --shape against the function's dimensions and --arg against its scalar
    arguments, then adds the scalars' values to `dims` (the run's environment)."""
    fdims = function_dims(fn)
    tensors = {p.name for p in fn.params}
    scalars = [n for n in fn.arg_names if n not in tensors and n not in fdims]
    values = values or {}
    extra = [n for n in values if n not in scalars]
    if extra:
        raise UsageError(f"--arg: {fn.name} has no scalar argument {', '.join(map(repr, extra))} "
                         f"(its scalar arguments: {', '.join(scalars) or 'none'})")
    missing = [n for n in scalars if n not in values]
    if missing:
        given = ",".join(f"{n}=..." for n in missing)
        raise UsageError(f"{fn.name} takes the scalar argument{'s' if len(missing) > 1 else ''} "
                         f"{', '.join(missing)}: give {'their values' if len(missing) > 1 else 'its value'} "
                         f"with --arg {given}")
    check_dims(fn, dims)
    missing = [d for d in fdims if d not in dims]
    if missing:
        given = ",".join(f"{d}=..." for d in fdims)
        raise UsageError(f"missing --shape entr{'y' if len(missing) == 1 else 'ies'} for "
                         f"{', '.join(missing)} ({fn.name} needs --shape {given})")
    dims.update(values)


def _check_memory(fn, dims: dict[str, int]) -> None:
    """Refuses shapes whose tensors the interpreter cannot hold, naming the limit."""
    from ..ir import dtype_bytes

    total = 0
    for p in fn.params:
        n = 1
        for d in param_shape(p, dims):
            n *= d
        total += n * dtype_bytes(p.dtype)
    if total > MAX_RUN_BYTES:
        raise UsageError(f"--shape: the tensors would take {total / 2**30:.1f} GiB, more than "
                         f"the {MAX_RUN_BYTES >> 30} GiB that 'choreo run' allocates at most; "
                         "interpret smaller sizes")


def run_command(args) -> int:
    try:
        return _run(args)
    except UsageError as e:
        print(f"choreo: error: {e}", file=sys.stderr)
        return EXIT_USAGE


def _pick_reference(args, fn) -> tuple[str, str]:
    """(check, why) from --check / --ref."""
    if args.ref is not None:
        if args.check not in ("auto", "none"):
            raise UsageError(f"--ref and --check {args.check} both name a reference: give one")
        return "ref", f"--ref {args.ref}"
    if args.check == "auto":
        check, why = checks.auto_check(fn, args.file)
        return check, f"auto: {why}"
    problem = checks.applicable(args.check, fn)
    if problem:
        raise UsageError(problem)
    return args.check, "--check"


def _expected(check, args, fn, tensors, reads, writes) -> dict:
    """{output: expected float32 tensor}; computed before the run (it writes the outputs)."""
    if check == "none":
        return {}
    if check == "ref":
        from .python_ref import python_reference

        return python_reference(args.ref, tensors, reads, writes)
    name, expected = checks.reference(check, fn, tensors)
    return {name: expected}


def _interpret(args, module, fn, tensors, dims, owners) -> RunStats:
    bar = Progress(f"interpreting {fn.name}", enabled={"always": True, "never": False}.get(
        getattr(args, "progress", "auto")))
    try:
        return interpret_module(module, tensors, function=fn.name, schedule=args.schedule,
                                seed=args.seed, step_limit=args.step_limit, owners=owners,
                                progress=bar, **dims)
    finally:
        bar.close()


def _run(args) -> int:
    dims = parse_shape(args.shape)
    target = targets.resolve(args.target)
    module, found = load_module(args.file, args.include, parse_defines(args.define), target.name)
    for w in found:  # the static check's findings come before what the run shows
        print(w.render(), file=sys.stderr)
    status = EXIT_OK
    for fn in _functions_to_run(module, args.function):
        status = max(status, _run_one(args, module, fn, dict(dims), target))
    return status


def _functions_to_run(module, name: Optional[str]) -> list:
    """The named function; without a name, every function in order when none of them takes
    arguments (as the reference's CPU model, co-mock, runs a file) but those the others
    call (co-mock runs those too, on no arguments; here they run where they are called),
    else the first."""
    called = {s.func for f in module.functions for s in ir.walk(f.body)
              if isinstance(s, ir.HostCall)}
    plain = [f for f in module.functions if not f.params and not f.arg_names]
    if name is None and len(module.functions) > 1 and plain and \
            all(f in plain or f.name in called for f in module.functions):
        return plain
    return [pick_function(module, name)]


def _run_one(args, module, fn, dims: dict, target) -> int:
    """Runs one function on inputs made for it and compares its outputs."""
    _bind_dims(fn, dims, parse_values(args.arg))
    check, why = _pick_reference(args, fn)
    reads, writes = param_usage(module, fn)
    _check_memory(fn, dims)
    tensors = checks.make_inputs(fn, dims, reads, args.seed, param_shape)
    expected = _expected(check, args, fn, tensors, reads, writes)
    owners = RowOwners.of(args.owners if args.owners is not None else target)
    start = time.perf_counter()
    stats = _interpret(args, module, fn, tensors, dims, owners)
    elapsed = time.perf_counter() - start
    shape = " ".join(f"{d}={dims[d]}" for d in function_dims(fn))
    print(f"ran {fn.name} [{shape}] schedule={args.schedule} seed={args.seed} owners={owners}: "
          f"{stats.blocks} blocks, {stats.statements} statements, {elapsed:.2f} s")
    return compare_outputs(args, fn, check, why, expected, tensors, writes)


def compare_outputs(args, fn, check, why, expected: dict, tensors: dict, writes) -> int:
    """The check lines of `run` and `emulate`: each output against its reference, or, when
    there is none, a line saying so (and, when `auto` found none, a note on stderr saying
    that nothing was compared and how to give a reference: exit status 0 is no verdict)."""
    if not expected:
        outs = ", ".join(sorted(writes)) or "none"
        print(f"check none ({why}): outputs ({outs}) not compared")
        note = checks.nothing_compared_note(args.file, why)
        if note:
            print(note, file=sys.stderr)
        return EXIT_OK
    note = checks.causal_alignment_note(check, fn, tensors, args.file)
    if note:
        print(note, file=sys.stderr)
    failed = 0
    for name, ref in expected.items():
        failed += _report(args, check, why, name, tensors[name], ref)
    return EXIT_PROGRAM if failed else EXIT_OK


def _report(args, check, why, name, out, ref) -> int:
    """Prints one output's comparison; 1 if it failed."""
    cmp = checks.compare(name, out, ref)
    verdict = "ok" if cmp.ok(args.rtol) else "FAILED"
    print(f"check {check} ({why}): {name} max abs error {cmp.max_abs:.3e}, relative error "
          f"{cmp.rel:.3e} (tolerance {args.rtol:g}): {verdict}")
    if cmp.ok(args.rtol):
        return 0
    what = f"the {check} reference" if check != "ref" else f"the reference {args.ref}"
    print(f"{args.file}: error: {name} differs from {what}: relative error "
          f"{cmp.rel:.3e} exceeds the tolerance {args.rtol:g} (max abs error "
          f"{cmp.max_abs:.3e})", file=sys.stderr)
    return 1
