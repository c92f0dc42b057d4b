"""The options of `choreo emulate` (no heavy imports: the parser of every command builds them)."""
from __future__ import annotations


def add_parser(sub, common) -> None:
    p = sub.add_parser("emulate", help="run the compiled PTX on the CPU emulator and check the result")
    common(p)
    p.add_argument("--shape", action="append", default=[], metavar="NAME=N,...",
                   help="sizes of the symbolic dimensions, e.g. B=1,H=2,Q_SEQ=256,KV_SEQ=256")
    p.add_argument("--arg", action="append", default=[], metavar="NAME=VALUE,...",
                   help="values of the function's scalar arguments, e.g. is_causal=true,W=5")
    p.add_argument("--target", default=None, choices=("sm_100a", "sm_90a"),
                   help="the target whose PTX to run (default: the GPU present, else sm_100a)")
    p.add_argument("--seed", type=int, default=0, help="seeds the inputs and the random schedule")
    p.add_argument("--schedule", default="round_robin",
                   choices=("round_robin", "reverse", "greedy", "random"),
                   help="the order warps take turns in (random: seeded by --seed)")
    p.add_argument("--check", default="auto",
                   choices=("auto", "none", "sdpa", "sdpa-causal", "matmul", "softmax"),
                   help="the reference to compare with (auto: guessed from the parameters and "
                        "names when they leave no doubt, else none; per-thread kernels and host "
                        "programs: the interpreter's run; sdpa-causal: torch's is_causal mask, "
                        "aligned top-left when Q_SEQ != KV_SEQ, query i seeing keys 0..i)")
    p.add_argument("--ref", metavar="MODULE:FUNCTION",
                   help="a Python reference: FUNCTION(**inputs) returns the expected outputs")
    p.add_argument("--rtol", type=float, default=1e-2,
                   help="largest relative error ||out - ref|| / ||ref|| accepted")
    p.add_argument("--relaxed", action="store_true",
                   help="let pass what hardware is known to tolerate (docs/emulator.md)")
    p.add_argument("--function", metavar="NAME",
                   help="the __co__ function to run (default: the first)")
    p.add_argument("--launch", metavar="JSON",
                   help="launch description of a raw .ptx FILE (grid, block, shared bytes, "
                        "parameters)")
    p.add_argument("--step-limit", type=int, default=20_000_000, metavar="N",
                   help="warp instructions one CTA may execute")
