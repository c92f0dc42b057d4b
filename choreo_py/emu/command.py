"""`choreo emulate FILE --shape ...`: run the compiled PTX in the emulator and check it.

Same inputs, references and report as `choreo run` (interp/command.py),
but the program runs as the PTX the compiler emits for --target. A raw
`.ptx` file is run with `--launch launch.json` (launch.py describes the
format; its tensors are made from the description, seeded by --seed). A
pyptx module (`.py`) with the launch facts `choreo compile --emit pyptx`
writes (ARCH, ENTRY, THREADS, SMEM_BYTES, PARAMS, TENSORS, grid()) runs on
seeded random tensors of the --shape given; attention (Q, K, V, O) and
matmul (A, B, C) parameters are checked against torch.
Exit status: 0 ok, 1 a fault of the program (race, deadlock, wrong
result, a form the emulator does not model), 2 usage errors.
"""
from __future__ import annotations

import os
import sys
import warnings

from ..interp import checks
from ..interp.api import ChoreoWarning, UsageError, function_dims, load_module, param_shape, param_usage, pick_function
from ..interp.command import EXIT_OK, EXIT_PROGRAM, EXIT_USAGE, _bind_dims, parse_shape, parse_values
from .api import EmuStats, emulate, emulate_ptx
from .report import EmuError, HostProgramModule
from ..runtime.kernel import AssertionFailed


def emulate_command(args) -> int:
    with warnings.catch_warnings():
        warnings.simplefilter("always", ChoreoWarning)
        warnings.showwarning = _show_once(warnings.showwarning)
        return _dispatch(args)


def _show_once(show):
    """The compiler's warnings as the compiler writes them, each once: the file is analysed
    by more than one path (the kernel's build, the host program's, the interpreter's run)."""
    seen = set()

    def shown(message, category, filename, lineno, file=None, line=None):
        if not issubclass(category, ChoreoWarning):
            return show(message, category, filename, lineno, file, line)
        if str(message) not in seen:
            seen.add(str(message))
            print(message, file=sys.stderr, flush=True)
    return shown


def _dispatch(args) -> int:
    try:
        if args.file.endswith(".ptx"):
            return _raw(args)
        if args.file.endswith(".py"):
            return _module(args)
        return _co(args)
    except UsageError as e:
        print(f"choreo: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except EmuError as e:
        print(e.render(), file=sys.stderr)
        return EXIT_PROGRAM
    except AssertionFailed as e:  # the sizes an entry assert forbids, as `run` reports them
        print(e.render(args.file), file=sys.stderr)
        return EXIT_PROGRAM


def _mode(args) -> str:
    return "relaxed" if args.relaxed else "strict"


def _co(args) -> int:
    from .. import targets
    from ..frontend import parse_defines
    from ..interp.command import _expected, _pick_reference, compare_outputs

    args.target = targets.resolve(args.target).name
    dims = parse_shape(args.shape)
    defines = parse_defines(args.define)
    module, found = load_module(args.file, args.include, defines, args.target)
    for w in found:
        warnings.warn(w.render(), ChoreoWarning)
    fn = pick_function(module, args.function)
    _bind_dims(fn, dims, parse_values(args.arg))
    if is_host_program(fn, dims):
        return _host_program(args, fn, dims, defines, param_usage(module, fn)[1],
                             _inputs(module, fn, dims, args.seed))
    check, why = _pick_reference(args, fn)
    reads, writes = param_usage(module, fn)
    tensors = checks.make_inputs(fn, dims, reads, args.seed, param_shape)
    expected = _expected(check, args, fn, tensors, reads, writes)
    stats = EmuStats()
    try:
        emulate(args.file, tensors, target=args.target, schedule=args.schedule, seed=args.seed,
                strict=not args.relaxed, include_dirs=args.include, defines=defines,
                step_limit=args.step_limit, stats=stats)
    except HostProgramModule:  # one kernel in the module format of several (thread kernels)
        return _launched_kernel(args, fn, dims, defines, (check, why, expected), writes,
                                _inputs(module, fn, dims, args.seed))
    shape = " ".join(f"{d}={dims[d]}" for d in function_dims(fn))
    _summary(args, f"{fn.name} [{shape}]", stats)
    return compare_outputs(args, fn, check, why, expected, tensors, writes)


def is_host_program(fn, dims: dict) -> bool:
    """A function is a host program when it is more than one kernel's launch: it returns a
    result, takes scalar arguments (given as --arg), or its body has host code around its
    parallel regions (buffers, loops, several launches). A `void` function whose body is one
    parallel region (and entry asserts) is a kernel, whatever module its lowering makes."""
    from .. import ir

    if fn.result is not None or set(dims) - set(function_dims(fn)):
        return True
    launches = [s for s in fn.body if isinstance(s, ir.Launch)]
    return len(launches) != 1 or any(not isinstance(s, (ir.Launch, ir.Assert)) for s in fn.body)


def _inputs(module, fn, dims: dict, seed: int) -> dict:
    reads = param_usage(module, fn)[0]
    return checks.make_inputs(fn, dims, reads, seed, param_shape)


def _emulated_call(args, fn, dims: dict, defines, inputs: dict):
    """(the emulated call's result, its arguments, stats): the function called through
    emulate_program on the GPU's dtypes (the interpreter widens unsigned types)."""
    from choreo_py.emu.program import emulate_program
    from choreo_py.runtime.host_program import torch_dtypes

    exact = torch_dtypes()
    mine = {p.name: inputs[p.name].to(exact[p.dtype]) for p in fn.params}
    stats = EmuStats()
    lib = _deep(emulate_program)(args.file, target=args.target, schedule=args.schedule,
                                    seed=args.seed, strict=not args.relaxed,
                                    include_dirs=args.include, defines=defines,
                                    step_limit=args.step_limit, stats=stats)
    return lib[fn.name](**mine, **dims), mine, stats


def _launched_kernel(args, fn, dims: dict, defines, reference, writes: set, inputs: dict) -> int:
    """A kernel whose module is a launcher's (per-thread code: `KERNELS`, no grid of its
    own), run through emulate_program: compared with the reference picked (--ref, --check,
    auto's guess) as any kernel is, else with the interpreter's run of the same inputs."""
    from ..interp.command import compare_outputs

    check, why, expected = reference
    theirs = {k: v.clone() for k, v in inputs.items()}
    _, mine, stats = _emulated_call(args, fn, dims, defines, inputs)
    shape = " ".join(f"{d}={v}" for d, v in dims.items())
    _summary(args, f"{fn.name} [{shape}]", stats)
    if expected or args.check == "none":
        got = {k: v.float() for k, v in mine.items()}
        return compare_outputs(args, fn, check, why, expected, got, writes)
    return _against_interpreter(args, fn, dims, defines, sorted(writes & set(mine)),
                                mine, theirs, None)


def _host_program(args, fn, dims: dict, defines, writes: set, inputs: dict) -> int:
    """A host program: the function called with the inputs `choreo run` makes, every launch
    emulated (emulate_program); its result and the arguments it writes compared with the
    interpreter's run of the same inputs (--check auto), or not at all (--check none)."""
    from choreo_py.host.missing_result import MissingResult

    if args.check not in ("auto", "none") or args.ref is not None:
        raise UsageError(f"{fn.name} is a host program (a result, scalar arguments or host "
                         "code around its kernels): it is checked against the interpreter "
                         "(--check auto) or not at all (--check none)")
    # the interpreter's copy is taken first: the emulated call may write its arguments
    theirs = {k: v.clone() for k, v in inputs.items()}
    out, mine, stats = _emulated_call(args, fn, dims, defines, inputs)
    shape = " ".join(f"{d}={v}" for d, v in dims.items())
    _summary(args, f"{fn.name} [{shape}] (host program)", stats)
    returns = out is not None and not isinstance(out, MissingResult)  # (no `return`)
    compared = sorted(writes & set(mine)) + (["result"] if returns else [])
    if args.check == "none" or not compared:
        why = "--check none" if args.check == "none" else "it returns and writes nothing"
        print(f"check none ({why}): outputs ({', '.join(compared) or 'none'}) not compared")
        return EXIT_OK
    return _against_interpreter(args, fn, dims, defines, compared, {**mine, "result": out},
                                theirs, "result")


def _against_interpreter(args, fn, dims, defines, compared, got, theirs, result) -> int:
    """Compares the emulated call's outputs with the interpreter's call on the same inputs
    (`result`: the name under which the function's result is compared, if it has one)."""
    from choreo_py.interp.api import interpret

    ref = _deep(interpret)(args.file, function=fn.name, target=args.target,
                              include_dirs=args.include, defines=defines)(**theirs, **dims)
    want = {**theirs, **({result: ref} if result else {})}
    failed = 0
    for name in compared:
        failed += _compare_with_interpreter(args, name, got[name], want[name])
    return EXIT_PROGRAM if failed else EXIT_OK


def _compare_with_interpreter(args, name: str, out, ref) -> int:
    cmp = checks.compare(name, out.float(), ref.float())
    verdict = "ok" if cmp.ok(args.rtol) else "FAILED"
    print(f"check interpreter: {name} max abs error {cmp.max_abs:.3e}, relative error "
          f"{cmp.rel:.3e} (tolerance {args.rtol:g}): {verdict}")
    if cmp.ok(args.rtol):
        return 0
    print(mismatch_message(args, name, cmp), file=sys.stderr)
    return 1


def mismatch_message(args, name: str, cmp) -> str:
    """Emulated PTX and interpreted source disagree. Both run the same program, so a
    difference is a compiler bug only if the program is deterministic: a race (a missing
    wait, barrier or fence) lets the two schedules see different values. Says so, and
    what runs tell the two apart."""
    return (f"{args.file}: error: {name} from the emulated PTX does not match the interpreter's "
            f"run of the same inputs: relative error {cmp.rel:.3e} exceeds the tolerance "
            f"{args.rtol:g} (max abs error {cmp.max_abs:.3e}). The kernel may have a race (a "
            "missing wait, barrier or fence) that the two runs resolve differently: run "
            f"`choreo run {args.file} --schedule random --seed N` for a few seeds and `choreo "
            f"check {args.file} --strict`; if they pass, compare with a reference (`--ref "
            "MODULE:FUNCTION`) to see which of the two is wrong")


def _summary(args, what: str, stats: EmuStats, target: str = "") -> None:
    print(f"emulated {what} target={target or args.target} schedule={args.schedule} "
          f"seed={args.seed} {_mode(args)}: {stats.ctas} CTAs, {stats.instructions} warp "
          f"instructions, {stats.seconds:.2f} s ({stats.rate:,.0f} instructions/s)")
    for note in stats.notes:
        print(f"relaxed: {note}", file=sys.stderr)


_MODULE_CHECKS = {  # parameter names of a pyptx module -> the reference that fits them
    ("Q", "K", "V", "O"): lambda t, causal: torch_sdpa(t, causal),
    ("A", "B", "C"): lambda t, causal: ("C", t["A"].float() @ t["B"].float().T),
}


def torch_sdpa(t: dict, causal: bool):
    import torch

    q, k, v = (t[c].float().transpose(1, 2) for c in "QKV")
    ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return "O", ref.transpose(1, 2)


def _module(args) -> int:
    """A pyptx module with the launch facts of `choreo compile --emit pyptx` (ARCH, ENTRY,
    THREADS, SMEM_BYTES, PARAMS, TENSORS, grid()), generated or written by hand."""
    import torch

    from .api import run_spec
    from .launch import TORCH_DTYPES, from_pyptx_module

    with open(args.file, encoding="utf-8") as fh:
        spec = from_pyptx_module(fh.read(), os.path.abspath(args.file))
    dims = parse_shape(args.shape)
    need = sorted({d for _, _, shape in spec.tensors for d in shape if isinstance(d, str)})
    missing = [d for d in need if d not in dims]
    if missing:
        raise UsageError(f"missing --shape entries for {', '.join(missing)} (the module needs "
                         f"--shape {','.join(f'{d}=...' for d in need)})")
    g = torch.Generator().manual_seed(args.seed)
    tensors = {}
    for name, dtype, shape in spec.tensors:
        size = tuple(dims[d] if isinstance(d, str) else int(d) for d in shape)
        tensors[name] = torch.randn(size, generator=g).to(getattr(torch, TORCH_DTYPES[dtype]))
    names = tuple(n for n, _, _ in spec.tensors)
    check = _MODULE_CHECKS.get(names) if args.check != "none" else None
    expected = (check({k: v.clone() for k, v in tensors.items()},
                      "causal" in os.path.basename(args.file) or args.check == "sdpa-causal")
                if check else None)
    if expected is not None:
        tensors[expected[0]].fill_(float("nan"))
    stats = EmuStats()
    run_spec(spec, tensors, schedule=args.schedule, seed=args.seed, strict=not args.relaxed,
             step_limit=args.step_limit, stats=stats)
    _summary(args, f"{spec.entry} ({os.path.basename(args.file)})", stats, spec.arch)
    if expected is None:
        print(f"check none: no reference fits the parameters {', '.join(names)}")
        return EXIT_OK
    out, ref = expected
    cmp = checks.compare(out, tensors[out], ref)
    verdict = "ok" if cmp.ok(args.rtol) else "FAILED"
    print(f"check: {out} max abs error {cmp.max_abs:.3e}, relative error {cmp.rel:.3e} "
          f"(tolerance {args.rtol:g}): {verdict}")
    return EXIT_OK if cmp.ok(args.rtol) else EXIT_PROGRAM


def _raw(args) -> int:
    import torch

    from .launch import load_json, make_tensors

    if not args.launch:
        raise UsageError("a .ptx file needs --launch LAUNCH.json (grid, block, shared bytes, "
                         "parameters, tensors)")
    if not os.path.isfile(args.launch):
        raise UsageError(f"cannot read '{args.launch}'")
    desc = load_json(args.launch)
    with open(args.file, encoding="utf-8") as fh:
        ptx = fh.read()
    tensors = make_tensors(desc, args.seed)
    stats = EmuStats()
    emulate_ptx(ptx, desc, tensors, schedule=args.schedule, seed=args.seed,
                strict=not args.relaxed, step_limit=args.step_limit, stats=stats,
                ptx_name=os.path.basename(args.file))
    _summary(args, os.path.basename(args.file), stats, "(the PTX's .target)")
    ref = desc.get("reference")
    if not ref:
        return EXIT_OK
    # {"reference": {"output": "C", "expr": "A @ B.T"}}: a torch expression of the inputs
    inputs = make_tensors(desc, args.seed)
    env = {n: t.float() for n, t in inputs.items()}
    expected = eval(ref["expr"], {"torch": torch}, env)  # noqa: S307 - the user's own description
    cmp = checks.compare(ref["output"], tensors[ref["output"]], expected)
    verdict = "ok" if cmp.ok(args.rtol) else "FAILED"
    print(f"check {ref['expr']}: {ref['output']} max abs error {cmp.max_abs:.3e}, relative error "
          f"{cmp.rel:.3e} (tolerance {args.rtol:g}): {verdict}")
    return EXIT_OK if cmp.ok(args.rtol) else EXIT_PROGRAM


def _deep(fn):
    """`fn` run with the stages' recursion (choreo_py/limits.py), as the package's own
    `choreo_py.interpret` / `emulate_program` run it."""
    from choreo_py import limits

    def call(*args, **kwargs):
        with limits.deep_recursion():
            return fn(*args, **kwargs)
    return call
