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

from .diagnostics import ChoreoError, InternalError, take_causes, take_warnings

EXIT_OK, EXIT_PROGRAM, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # usage errors exit 2, as argparse does, but uniformly
        self.print_usage(sys.stderr)
        print(f"choreo: error: {message}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)


def _defines(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        name, _, value = item.partition("=")
        out[name] = value if "=" in item else "1"
    return out


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", help="a .co source file")
    p.add_argument("-I", dest="include", action="append", default=[], metavar="DIR",
                   help="add DIR to the #include search path")
    p.add_argument("-D", dest="define", action="append", default=[], metavar="NAME[=VALUE]",
                   help="define a preprocessor macro")


def build_parser() -> argparse.ArgumentParser:
    ap = _Parser(prog="choreo", description="Compiler for Choreo tile kernels.")
    sub = ap.add_subparsers(dest="cmd", required=True, parser_class=_Parser)

    p = sub.add_parser("preprocess", help="print the preprocessed source")
    _common(p)

    p = sub.add_parser("parse", help="parse a file; optionally print its AST")
    _common(p)
    p.add_argument("--dump-ast", action="store_true", help="print the syntax tree")

    p = sub.add_parser("check", help="parse and run the semantic checks")
    _common(p)

    p = sub.add_parser("compile", help="compile a file (default: sm_100a, pyptx module)")
    _common(p)
    p.add_argument("--target", default="sm_100a", choices=("sm_100a", "sm_90a"))
    p.add_argument("--emit", default="pyptx", choices=("ast", "ir", "pyptx", "ptx", "cubin"),
                   help="the stage whose output to write")
    p.add_argument("-o", dest="output", metavar="FILE",
                   help="write here ('-' for stdout); pyptx/ptx/cubin default to FILE's folder, "
                        "e.g. flash_atten.sm100a.py")

    p = sub.add_parser("run", help="interpret a file on random inputs and check the result")
    _common(p)
    p.add_argument("--shape", action="append", default=[], metavar="NAME=N,...",
                   help="sizes of the symbolic dimensions, e.g. B=1,H=2,Q_SEQ=256,KV_SEQ=256")
    p.add_argument("--seed", type=int, default=0, help="seeds the inputs and the random schedule")
    p.add_argument("--schedule", default="round_robin", choices=("round_robin", "random"))
    p.add_argument("--check", default="auto",
                   choices=("auto", "none", "sdpa", "sdpa-causal", "matmul", "softmax"),
                   help="the reference to compare with (auto: picked from the parameters "
                        "and names when unambiguous, else none)")
    p.add_argument("--rtol", type=float, default=1e-2,
                   help="largest relative error ||out - ref|| / ||ref|| accepted")
    p.add_argument("--owners", type=int, choices=(1, 2, 4, 8),
                   help="threads sharing an accumulator row (default: 4 for sm_90a, 1 for sm_100a)")
    p.add_argument("--target", default="sm_90a", choices=("sm_100a", "sm_90a"))
    p.add_argument("--function", metavar="NAME", help="the __co__ function to run")
    p.add_argument("--step-limit", type=int, default=2_000_000, metavar="N",
                   help="statements one block may execute")
    return ap


def _same_file(output: str | None, source: str) -> bool:
    if not output or output == "-":
        return False
    if os.path.exists(output):
        return os.path.samefile(output, source)
    return os.path.realpath(output) == os.path.realpath(source)


def _run(args: argparse.Namespace) -> int:
    from . import frontend

    include, defines = args.include, _defines(args.define)
    if os.path.isdir(args.file):
        print(f"choreo: error: cannot read '{args.file}': it is a directory, not a .co file",
              file=sys.stderr)
        return EXIT_USAGE
    if not os.path.isfile(args.file):
        print(f"choreo: error: cannot read '{args.file}': no such file", file=sys.stderr)
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
        program = frontend.check_file(args.file, include, defines)
        if not program.functions:
            print(f"{args.file}: note: no __co__ function in the file: nothing to check",
                  file=sys.stderr)
        return EXIT_OK
    if args.cmd == "compile":
        from . import driver

        text = driver.compile_file(args.file, args.emit, args.target, include, defines)
        if args.output is None and args.emit in driver.OUTPUT_SUFFIX:
            args.output = driver.default_output(args.file, args.emit, args.target)
        if isinstance(text, bytes):  # --emit cubin
            if args.output and args.output != "-":
                with open(args.output, "wb") as fh:
                    fh.write(text)
            else:
                sys.stdout.buffer.write(text)
            return EXIT_OK
        if args.output in (None, "-") and args.emit in ("ast", "ir"):
            sys.stdout.write(text)
        elif args.output and args.output != "-":
            with open(args.output, "w", encoding="utf-8") as fh:
                fh.write(text)
        else:
            sys.stdout.write(text)
        return EXIT_OK
    if args.cmd == "run":
        from .interp.command import run_command

        return run_command(args)
    raise InternalError(f"unknown command {args.cmd}")


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
    args = build_parser().parse_args(argv)
    try:
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
