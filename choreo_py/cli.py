"""The `choreo` command.

Exit status: 0 success, 1 errors in the program, 2 usage errors,
3 internal errors (a bug in choreo-py, reported with the location being
processed; never a bare Python traceback).
"""
from __future__ import annotations

import argparse
import atexit
import gc
import os
import sys

from . import limits, targets
from .diagnostics import ChoreoError, InternalError, take_causes, take_warnings

EXIT_OK, EXIT_PROGRAM, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3


def _says_nothing(default) -> bool:
    """A default not worth showing: unset, a switch that is off, an empty list (0 is shown)."""
    return default is None or default is False or default == [] or default == argparse.SUPPRESS


class _Formatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows every option's default, except where it is off/empty and says nothing, or where
    the help already tells it in its own words (it would be shown twice)."""

    def _get_help_string(self, action):
        if _says_nothing(action.default) or "default" in (action.help or "").lower():
            return action.help
        return super()._get_help_string(action)


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:  # usage errors exit 2, as argparse does, but uniformly
        self.print_usage(sys.stderr)
        print(f"choreo: error: {message}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)


def _version_line(version: str) -> str:
    """`choreo --version`: this package and what decides its output (pyptx, ptxas)."""
    from importlib import metadata

    try:
        pyptx = metadata.version("pyptx")
    except metadata.PackageNotFoundError:
        pyptx = "not installed"
    return f"choreo-py {version} (pyptx {pyptx}, Python {sys.version.split()[0]})"


class _VersionAction(argparse.Action):
    """`--version`, with the tools' versions looked up only when asked for: reading package
    metadata costs every other command about 13 ms of start-up."""

    def __init__(self, option_strings, version: str, dest=argparse.SUPPRESS,
                 default=argparse.SUPPRESS, help=None) -> None:
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)
        self.version = version

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        print(_version_line(self.version))
        parser.exit()


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", help="a .co source file")
    p.add_argument("-I", dest="include", action="append", default=[], metavar="DIR",
                   help="add DIR to the #include search path")
    p.add_argument("-D", dest="define", action="append", default=[], metavar="NAME[=VALUE]",
                   help="define a preprocessor macro")


def build_parser() -> argparse.ArgumentParser:
    from . import __version__

    ap = _Parser(prog="choreo", description="Compiler for Choreo tile kernels. "
                 "The guide: docs/ (build it with `mkdocs build`).")
    ap.add_argument("--version", action=_VersionAction, version=__version__,
                    help="print the version of choreo-py and of the tools it uses, and exit")
    sub = ap.add_subparsers(dest="cmd", required=True, parser_class=_Parser)

    p = sub.add_parser("preprocess", help="print the preprocessed source")
    _common(p)

    p = sub.add_parser("parse", help="parse a file; optionally print its AST")
    _common(p)
    p.add_argument("--dump-ast", action="store_true", help="print the syntax tree")

    p = sub.add_parser("check", help="parse and run the semantic checks",
                       description="Check a file against the rules of the whole language, "
                                   "host code and every parallel level, whether or not it "
                                   "compiles (errors: exit status 1). Some rules are "
                                   "warnings unless --strict: use before declaration, "
                                   "re-assigning an immutable, a missing or extra 'return', "
                                   "'call' outside 'parallel', an async future never "
                                   "waited, and a few more ('compile' treats them as "
                                   "errors).")
    _common(p)
    p.add_argument("--strict", action="store_true",
                   help="report what 'compile --target' reports, as errors: every rule, "
                        "sema's errors and the passes' findings (a pipeline that hangs) "
                        "for the target; no code is built")
    p.add_argument("--lowerable", action="store_true",
                   help="also list, as notes with locations, each construct that would not "
                        "compile for --target (the program stays valid: exit status 0)")
    p.add_argument("--target", default=targets.COMPILE_DEFAULT, choices=targets.NAMES,
                   help="the target whose passes --strict runs, and --lowerable reports for "
                        "(default: sm_100a, as compile's)")

    p.add_argument("-q", "--quiet", action="store_true",
                   help="print nothing on success (else one line on stderr)")

    p = sub.add_parser("compile", help="compile a file (default: sm_100a, pyptx module)")
    _common(p)
    p.add_argument("--target", default=targets.COMPILE_DEFAULT, choices=targets.NAMES,
                   help="the GPU to compile for: sm_100a (Blackwell: tcgen05, tensor memory) "
                        "or sm_90a (Hopper: wgmma)")
    p.add_argument("--emit", default="pyptx", choices=("ast", "ir", "pyptx", "ptx", "cubin"),
                   help="the stage whose output to write: ast (syntax tree), ir (tile IR), "
                        "pyptx (the generated Python module), ptx, cubin (assembled by ptxas)")
    p.add_argument("--print-ir-after", metavar="PASS",
                   help="print the tile IR after the pass PASS and stop (the passes, in order: "
                        "copy-swizzle, fragment-layout, ..., pipeline-check; see "
                        "choreo_py/passes/pipeline.py)")
    p.add_argument("-o", dest="output", metavar="FILE",
                   help="write here ('-' for stdout); without -o, ast and ir go to stdout and "
                        "pyptx/ptx/cubin beside the source, e.g. flash_atten.sm100a.py")
    p.add_argument("-q", "--quiet", action="store_true",
                   help="do not report what was written (on stderr)")

    p = sub.add_parser("run", help="interpret a file on random inputs and check the result")
    _common(p)
    p.add_argument("--shape", action="append", default=[], metavar="NAME=N,...",
                   help="sizes of the symbolic dimensions, e.g. B=1,H=2,Q_SEQ=256,KV_SEQ=256")
    p.add_argument("--arg", action="append", default=[], metavar="NAME=VALUE,...",
                   help="values of the function's scalar arguments, e.g. is_causal=true,W=5")
    p.add_argument("--seed", type=int, default=0, help="seeds the inputs and the random schedule")
    p.add_argument("--schedule", default="round_robin", choices=("round_robin", "random"),
                   help="the order in which roles and threads take turns: round_robin, or "
                        "random (seeded by --seed) to shake out races and missing waits")
    p.add_argument("--check", default="auto",
                   choices=("auto", "none", "sdpa", "sdpa-causal", "matmul", "softmax"),
                   help="the reference to compare with (auto: guessed from the parameters "
                        "and the names, only when they leave no doubt, else none; "
                        "sdpa-causal: torch's is_causal mask, aligned top-left when Q_SEQ != "
                        "KV_SEQ, query i seeing keys 0..i)")
    p.add_argument("--ref", metavar="MODULE:FUNCTION",
                   help="a Python reference instead of --check: FUNCTION(**inputs) returns the "
                        "expected output tensor (or a dict name -> tensor); MODULE is a module "
                        "name or a .py file")
    p.add_argument("--progress", choices=("auto", "always", "never"), default="auto",
                   help="a progress bar on stderr (auto: only when stderr is a terminal)")
    p.add_argument("--rtol", type=float, default=1e-2,
                   help="largest relative error ||out - ref|| / ||ref|| accepted")
    p.add_argument("--owners", type=int, choices=(1, 2, 4, 8),
                   help="threads sharing an accumulator row (default: the target's, as its "
                        "lowering loads accumulators: 4 for sm_90a; for sm_100a 2 per 64-row, "
                        "1 per 128-row accumulator)")
    p.add_argument("--target", default=None, choices=targets.NAMES,
                   help="default: the GPU present, else sm_100a")
    p.add_argument("--function", metavar="NAME",
                   help="the __co__ function to run (default: the first; every function "
                        "in turn when none takes arguments)")
    p.add_argument("--step-limit", type=int, default=2_000_000, metavar="N",
                   help="statements one block may execute")

    from .emu.cli_args import add_parser as _add_emulate
    _add_emulate(sub, _common)
    from .tune_command import add_parser as _add_tune
    _add_tune(sub, _common)
    return ap


def _same_file(output: str | None, source: str) -> bool:
    if not output or output == "-":
        return False
    if os.path.exists(output):
        return os.path.samefile(output, source)
    return os.path.realpath(output) == os.path.realpath(source)


def _run(args: argparse.Namespace) -> int:
    from . import frontend

    include, defines = args.include, frontend.parse_defines(args.define)
    if os.path.isdir(args.file):
        print(f"choreo: error: cannot read '{args.file}': it is a directory, not a .co file",
              file=sys.stderr)
        return EXIT_USAGE
    if not os.path.isfile(args.file):
        # /dev/null, a pipe, a socket: a source is read whole, and its lines quoted later
        why = "not a regular file" if os.path.exists(args.file) else "no such file"
        print(f"choreo: error: cannot read '{args.file}': {why}", file=sys.stderr)
        return EXIT_USAGE
    if _same_file(getattr(args, "output", None), args.file):
        print(f"choreo: error: -o {args.output} is the input file; writing it would overwrite "
              "the source", file=sys.stderr)
        return EXIT_USAGE
    if args.cmd == "preprocess":
        unit = frontend.preprocess(args.file, include, defines)
        sys.stdout.write(unit.text)
        return EXIT_OK
    if args.cmd == "parse":
        program = frontend.parse_file(args.file, include, defines)
        if args.dump_ast:
            sys.stdout.write(frontend.dump_ast(program))
        return EXIT_OK
    if args.cmd == "check":
        return _check(args, include, defines)
    if args.cmd == "compile":
        from .compile_command import compile_command

        return compile_command(args, include, defines)
    if args.cmd == "run":
        from .interp.command import run_command

        return run_command(args)
    if args.cmd == "emulate":
        from .emu.command import emulate_command

        return emulate_command(args)
    if args.cmd == "tune":
        from .tune_command import tune_command

        return tune_command(args)
    raise InternalError(f"unknown command {args.cmd}")


def _check(args: argparse.Namespace, include, defines) -> int:
    from . import driver, frontend

    program = frontend.parse_file(args.file, include, defines)
    if args.strict:
        driver.check_strict(program, args.target)
    else:
        frontend.check_program(program)
    if not program.functions:
        print(f"{args.file}: note: no __co__ function in the file: nothing to check",
              file=sys.stderr)
    found = take_warnings()
    for w in found:  # before the summary, which counts them
        print(w.render(), file=sys.stderr)
    if not args.quiet:
        n = sum(1 for item in program.items if type(item).__name__ == "FunctionDef")
        warned = f", {len(found)} warning{'s' * (len(found) != 1)}" if found else ""
        print(f"choreo: {args.file}: ok ({n} __co__ function{'s' * (n != 1)}{warned})",
              file=sys.stderr)
    if args.lowerable:
        from . import limits, targets
        from .check import lowerable
        from .passes import pipeline

        def build(one):
            from .runtime import build as backend

            module = pipeline.build_module(one, targets.get(args.target), strict=True)
            backend.refuse_host_code(module, args.target)  # (its kernels: the lowering's own)
            return module

        print(lowerable.render(lowerable.report(program, args.target, build), args.target))
    return EXIT_OK


def _freeze_at_exit() -> None:
    # The interpreter's last garbage collections, at exit, would scan every
    # object the command made (the parser's tables, the AST, the IR): ~30 ms
    # of a `choreo check`.  Nothing needs them collected then, so they are
    # moved out of the collector's sight as the process ends.  (At exit only:
    # a process calling main() many times, like the tests, is unaffected.)
    global _FREEZE_REGISTERED
    if not _FREEZE_REGISTERED:
        _FREEZE_REGISTERED = True
        atexit.register(gc.freeze)


_FREEZE_REGISTERED = False


def main(argv: list[str] | None = None) -> int:
    _freeze_at_exit()
    take_causes()  # from an earlier call in this process
    parser = build_parser()
    if not (sys.argv[1:] if argv is None else argv):
        # `choreo` alone: the help (on stdout, as --help prints it), not argparse's
        # "arguments are required"; exit status 2, a usage error, as git's is non-zero
        parser.print_help()
        return EXIT_USAGE
    args = parser.parse_args(argv)
    take_warnings()  # this command reports its own warnings only (not an earlier call's)
    try:
        with limits.deep_recursion():  # for every stage (frontend/limits.py)
            return _run(args)
    except ChoreoError as err:
        for cause in take_causes():  # a missing include, before what it probably caused
            print(cause.render(), file=sys.stderr)
        # An error about the whole file (no kernel, no function) is located at the file.
        text = err.render()
        print(text if err.loc is not None else f"{args.file}: {text}", file=sys.stderr)
        return EXIT_PROGRAM
    except OSError as err:
        print(f"choreo: error: {err.filename or args.file}: {err.strerror}", file=sys.stderr)
        return EXIT_USAGE
    except RecursionError:
        print(f"{args.file}: internal error: nesting too deep to process", file=sys.stderr)
        return EXIT_INTERNAL
    except InternalError as err:
        where = f"{err.where}: " if err.where else f"{args.file}: "
        print(f"{where}internal error: {err}", file=sys.stderr)
        return EXIT_INTERNAL
    except KeyboardInterrupt:
        return 130
    except Exception as err:  # noqa: BLE001 - the last line of defence against tracebacks
        import traceback

        frame = traceback.extract_tb(err.__traceback__)[-1]
        print(f"{args.file}: internal error: {type(err).__name__}: {err} "
              f"(in {frame.name}, {frame.filename.rsplit('/', 1)[-1]}:{frame.lineno})",
              file=sys.stderr)
        return EXIT_INTERNAL
    finally:
        for w in take_warnings():
            print(w.render(), file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
