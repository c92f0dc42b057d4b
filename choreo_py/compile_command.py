"""`choreo compile FILE`: run the pipeline up to `--emit`, write the result, say where.

One line on stderr tells what was written (the file, the stage, the target,
the size); for `--emit cubin` it adds ptxas's resource line (registers,
spills, shared memory), the numbers a kernel author checks first.
`-o -` writes to stdout; without -o, `ast` and `ir` go to stdout and the
backend stages beside the source (`flash_atten.co` -> `flash_atten.sm100a.py`).
"""
from __future__ import annotations

import sys

from . import driver

EXIT_OK = 0


def _cubin(args, include, defines) -> tuple[bytes, str]:
    """(the cubin, its resource line): ptxas -v over the traced PTX (its warnings and
    spills are reported as located warnings by the runtime)."""
    from .runtime.resources import parse_ptxas_log

    binary = driver.compile_file(args.file, "cubin", args.target, include, defines)
    # a module of thread kernels has several entries and no dynamic shared memory;
    # the line reports the first entry's resources (ptxas -v lists each)
    log = getattr(binary, "ptxas_log", "")
    smem = getattr(binary, "dynamic_smem", 0)
    return bytes(binary), ("ptxas: " + parse_ptxas_log(log, smem).line()) if log else ""


def _destination(args) -> str:
    if args.output is not None:
        return args.output
    if args.emit in driver.OUTPUT_SUFFIX:
        return driver.default_output(args.file, args.emit, args.target)
    return "-"


def _write(dest: str, data) -> None:
    binary = isinstance(data, bytes)
    if dest == "-":
        if binary:
            sys.stdout.buffer.write(data)
        else:
            sys.stdout.write(data)
        sys.stdout.flush()
        return
    with open(dest, "wb" if binary else "w", **({} if binary else {"encoding": "utf-8"})) as fh:
        fh.write(data)


def compile_command(args, include, defines) -> int:
    extra = ""
    after = getattr(args, "print_ir_after", None)
    if after is not None:  # the IR after one pass, printed in place of the output asked for
        args.emit = "ir"
    if args.emit == "cubin":
        data, extra = _cubin(args, include, defines)
    else:
        data = driver.compile_file(args.file, args.emit, args.target, include, defines,
                                   print_ir_after=after)
    dest = _destination(args)
    _write(dest, data)
    if not args.quiet:
        size = len(data) if isinstance(data, bytes) else len(data.encode("utf-8"))
        where = "stdout" if dest == "-" else dest
        what = "AST" if args.emit == "ast" else args.emit
        stage = what if args.emit == "ast" else f"{what} for {args.target}"
        print(f"choreo: wrote {stage} to {where} ({size} bytes)" + (f"; {extra}" if extra else ""),
              file=sys.stderr)
    return EXIT_OK
