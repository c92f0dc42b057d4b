"""Grammar-aware fuzzing of the whole compiler: generated programs and structural mutations.

    nice python3 bench/fuzz_grammar.py -n 3000 --jobs 1 --out /tmp/gfuzz   # a campaign
    python3 bench/fuzz_grammar.py -n 40 --seed 7                          # a quick look

bench/fuzz.py edits the text of existing programs (tokens, lines, numbers). This one
builds programs from the language's grammar instead, as trees, and mutates the trees:

  generate      a thread kernel from the grammar: typed parameters and buffers, nested
                statements (scalar declarations, assignments, if, foreach, println,
                assert, asm), expressions of every literal kind, casts and element reads
  retype        the element type of a declaration (parameter, buffer, scalar) swapped
  literal       a literal of another kind or size (0, -1, 2^31, 2^64, 1e-46f, 1e39, true)
  rename        one declared name (function, parameter, size, loop variable, scalar)
                renamed everywhere to a reserved or odd name (Python and PTX keywords,
                pyptx names, Choreo keywords, long names, `_x`, `x_`)
  dims          a dimension made an expression, 0, negative or huge
  statements    a statement duplicated or deleted
  parallel      a parallel level's count or level changed
  insert        asm / println / assert inserted into a body
  example       the same edits applied to a repository example (MMA kernels): a consistent
                rename, a scalar's type (event orders), a parallel count, a #define value

Each program runs `check`; where that passes, `compile --emit ptx` for both targets, and
ptxas on the PTX. Findings (0 is the goal for each):
  traceback   an exception escaped the command line
  exit3       an internal error (exit status 3)
  unlocated   an error without `file:line:col:` (or `file:` for the whole file)
  ptxas       PTX we produced that ptxas rejects (or crashes on)
  slow        a program whose check + compiles took more than --cpu seconds of CPU
(`asm` counts ptxas rejecting the program's own __asm__ text, which is passed through.)
Program i of a seed is always the same text (`--only i` reproduces it).
"""
from __future__ import annotations

import argparse
import json
import keyword
import os
import random
import re
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import fuzz as textfuzz  # noqa: E402  (the command-line runner and ptxas lookup)

KINDS = ("traceback", "exit3", "unlocated", "ptxas", "slow")
#: Not a finding of the compiler: ptxas rejecting the program's own `__asm__` text
#: (`nop;` is no PTX instruction), which the compiler passes through as written.
OTHER = ("asm",)
TARGETS = ("sm_90a", "sm_100a")

ELEM_TYPES = ["s32", "u32", "s64", "u64", "f32", "f16", "bf16", "s8", "u8", "s16", "u16",
              "f64", "bool", "bin1", "int", "float", "half"]
SCALAR_TYPES = ["s32", "u32", "s64", "u64", "f32", "f16", "bf16", "int", "float", "bool",
                "s16", "u8", "f64", "bin1"]
LITERALS = ["0", "1", "-1", "7", "255", "65535", "2147483647", "2147483648", "4294967296",
            "18446744073709551615", "0x7f", "0.0", "1.5", "0.5f", "1e-46f", "1e39", "1e39f",
            "-0.0f", "3.0f", "true", "false", "inf", "-inf"]
ODD_NAMES = (sorted(keyword.kwlist) + ["match", "case", "type", "print", "len", "int", "max",
             "range", "list", "dims"]
             + ["reg", "ptx", "kernel", "grid", "smem", "KERNEL", "KERNELS", "ENTRY", "ARCH",
                "THREADS", "PARAMS", "pred", "b32", "u64", "tf32", "e4m3", "vprintf", "WARP_SZ",
                "tid", "ctaid", "laneid", "clock", "r1", "rd2", "p3", "f4", "ret", "bra",
                "mov", "ld", "st", "entry", "func", "param", "shared", "local_", "_split",
                "_Module", "_grid_k", "k_fmt0", "x_", "_x", "a__b", "I", "O0"]
             + ["global", "with", "in", "block", "thread", "s32", "half", "mma", "copy"]
             + ["n" * 70, "q" * 300])
LEVELS = ["block", "group", "group-4", "thread", "device", "cluster", "warp"]


# ---------------------------------------------------------------- the program tree

@dataclass
class Node:
    """A statement: `kind` and its fields; `body` for the nested ones."""
    kind: str
    f: dict = field(default_factory=dict)
    body: list = field(default_factory=list)


@dataclass
class Program:
    fn: str
    params: list            # [(elem, dims, name)]
    dims: list              # the symbolic sizes
    out: tuple              # (elem, name)
    outer: tuple            # (var, count, level)
    inner: tuple
    body: list              # statements of the inner parallel body
    index: str              # the element index expression
    store: str              # the stored expression
    returns: bool = True


class Gen:
    """Grammar-driven choices of one program (an `rng` of its own)."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.scalars: list[tuple[str, str, bool]] = []  # (name, type, mutable)
        self.n = 0

    def name(self, stem: str) -> str:
        self.n += 1
        return f"{stem}{self.n}"

    def lit(self) -> str:
        return self.rng.choice(LITERALS)

    def expr(self, prog: Program, depth: int = 0) -> str:
        r = self.rng
        leaves = [lambda: self.lit(), lambda: prog.inner[0], lambda: prog.outer[0]]
        leaves += [lambda p=p: f"{p[2]}.at({prog.index})" for p in prog.params]
        if self.scalars:
            leaves.append(lambda: r.choice(self.scalars)[0])
        if depth > 2 or r.random() < 0.35:
            return r.choice(leaves)()
        kind = r.randrange(6)
        a, b = self.expr(prog, depth + 1), self.expr(prog, depth + 1)
        if kind == 0:
            return f"__to<{r.choice(SCALAR_TYPES)}>({a})"
        if kind == 1:
            return f"({self.cond(prog, depth + 1)} ? {a} : {b})"
        if kind == 2:
            return f"{r.choice(['__max', '__min'])}({a}, {b})"
        if kind == 3:
            return f"{r.choice(['-', '!', '~'])}{a}"
        return f"({a} {r.choice(['+', '-', '*', '/', '%', '&', '|', '^', '<<', '>>'])} {b})"

    def cond(self, prog: Program, depth: int = 0) -> str:
        op = self.rng.choice(["<", ">", "==", "!=", "<=", ">=", "&&", "||"])
        return f"{self.expr(prog, depth + 1)} {op} {self.expr(prog, depth + 1)}"

    def stmt(self, prog: Program, depth: int = 0) -> Node:
        r = self.rng
        kind = r.choice(["decl", "decl", "mut", "assign", "if", "foreach", "println", "assert",
                         "asm", "store"])
        if kind in ("decl", "mut"):
            name, ty = self.name("v"), r.choice(SCALAR_TYPES)
            node = Node(kind, {"type": ty, "name": name, "value": self.expr(prog)})
            self.scalars.append((name, ty, kind == "mut"))
            return node
        if kind == "assign":
            muts = [s for s in self.scalars if s[2]]
            if not muts:
                return self.stmt(prog, depth)
            return Node("assign", {"name": r.choice(muts)[0], "value": self.expr(prog)})
        if kind in ("if", "foreach") and depth < 3:
            saved = list(self.scalars)
            f = ({"cond": self.cond(prog)} if kind == "if"
                 else {"var": self.name("i"), "count": r.choice(["2", "4", "1", "N / 64", "0"])})
            node = Node(kind, f, [self.stmt(prog, depth + 1) for _ in range(r.randrange(1, 3))])
            self.scalars = saved
            return node
        if kind == "println":
            return Node("println", {"text": r.choice(["x=", "", "%d", "a\\n"]),
                                    "value": self.expr(prog)})
        if kind == "assert":
            return Node("assert", {"cond": self.cond(prog), "msg": "m"})
        if kind == "asm":
            return Node("asm", {"text": r.choice(["nop;", "membar.cta;", "bar.sync 0;"])})
        return Node("store", {"value": self.expr(prog)})

    def program(self) -> Program:
        r = self.rng
        th = r.choice([32, 64, 128, 256])
        dims = ["N"]
        params = [(r.choice(ELEM_TYPES), ["N"], "a"), (r.choice(ELEM_TYPES), ["N"], "b")]
        prog = Program(fn="k", params=params, dims=dims, out=(r.choice(ELEM_TYPES), "out"),
                       outer=("blk", f"N / {th}", "block"), inner=("t", str(th), "thread"),
                       body=[], index=f"blk * {th} + t", store="")
        prog.body = [self.stmt(prog) for _ in range(r.randrange(0, 5))]
        prog.store = self.expr(prog)
        return prog


# ---------------------------------------------------------------- rendering

def render(p: Program) -> str:
    params = ", ".join(f"{e} [{', '.join(d)}] {n}" for e, d, n in p.params)
    ret = f"{p.out[0]} [{p.params[0][1][0]}]" if p.returns else "void"
    lines = [f"__co__ {ret} {p.fn}({params}) {{", f"  {p.out[0]} [{p.params[0][2]}.span] {p.out[1]};",
             f"  parallel {p.outer[0]} by {p.outer[1]} : {p.outer[2]}",
             f"    parallel {p.inner[0]} by {p.inner[1]} : {p.inner[2]} {{"]
    for s in p.body:
        lines += _stmt_text(s, p, "      ")
    lines.append(f"      {p.out[1]}.at({p.index}) = {p.store};")
    lines.append("    }")
    if p.returns:
        lines.append(f"  return {p.out[1]};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _stmt_text(s: Node, p: Program, ind: str) -> list[str]:
    f = s.f
    simple = {
        "decl": lambda: f"{f['type']} {f['name']} = {f['value']};",
        "mut": lambda: f"mutable {f['type']} {f['name']} = {f['value']};",
        "assign": lambda: f"{f['name']} = {f['value']};",
        "println": lambda: f"println(\"{f['text']}\", {f['value']});",
        "assert": lambda: f"assert({f['cond']}, \"{f['msg']}\");",
        "asm": lambda: f"__asm__(\"{f['text']}\");",
        "store": lambda: f"{p.out[1]}.at({p.index}) = {f['value']};",
    }
    if s.kind in simple:
        return [ind + simple[s.kind]()]
    head = (f"if ({f['cond']}) {{" if s.kind == "if"
            else f"foreach {{{f['var']}}} in [{f['count']}] {{")
    out = [ind + head]
    for x in s.body:
        out += _stmt_text(x, p, ind + "  ")
    return out + [ind + "}"]


# ---------------------------------------------------------------- tree mutations

def _all_stmts(body: list) -> list[tuple[list, int]]:
    out = []
    for i, s in enumerate(body):
        out.append((body, i))
        out += _all_stmts(s.body)
    return out


def m_retype(p: Program, rng: random.Random) -> None:
    decls = [s for b, i in _all_stmts(p.body) for s in [b[i]] if s.kind in ("decl", "mut")]
    pick = rng.randrange(3)
    if pick == 0 or not decls:
        j = rng.randrange(len(p.params))
        e, d, n = p.params[j]
        p.params[j] = (rng.choice(ELEM_TYPES), d, n)
    elif pick == 1:
        p.out = (rng.choice(ELEM_TYPES), p.out[1])
    else:
        rng.choice(decls).f["type"] = rng.choice(SCALAR_TYPES)


_LIT = re.compile(r"(?<![\w.])(?:\d[\w.]*|true|false|inf)")


def m_literal(p: Program, rng: random.Random) -> None:
    fields = [(s.f, k) for b, i in _all_stmts(p.body) for s in [b[i]]
              for k in ("value", "cond") if k in s.f]
    if not fields or rng.random() < 0.3:
        p.store = _swap_lit(p.store, rng)
        return
    f, k = rng.choice(fields)
    f[k] = _swap_lit(f[k], rng)


def _swap_lit(text: str, rng: random.Random) -> str:
    spots = list(_LIT.finditer(text))
    if not spots:
        return f"({text} + {rng.choice(LITERALS)})"
    m = rng.choice(spots)
    return text[:m.start()] + rng.choice(LITERALS) + text[m.end():]


def m_rename(p: Program, rng: random.Random) -> None:
    """One declared name renamed everywhere (the rendered text, whole words)."""
    old = rng.choice([p.fn, "N", "a", "b", "out", "t", "blk"] +
                     [b[i].f["name"] for b, i in _all_stmts(p.body) if "name" in b[i].f
                      and b[i].kind != "assign"])
    new = rng.choice(ODD_NAMES)
    p.__dict__["_rename"] = (old, new)


def m_dims(p: Program, rng: random.Random) -> None:
    dim = rng.choice(["0", "-1", "-64", "4294967296", "N * 2", "N + 1", "(N / 2) * 2",
                      "N - N", "2147483648", "1", "256", "N, N"])
    j = rng.randrange(len(p.params))
    e, d, n = p.params[j]
    p.params[j] = (e, [dim], n)


def m_statements(p: Program, rng: random.Random) -> None:
    spots = _all_stmts(p.body)
    if not spots:
        return m_insert(p, rng)
    body, i = rng.choice(spots)
    if rng.random() < 0.5:
        del body[i]
    else:
        body.insert(i, body[i])


def m_parallel(p: Program, rng: random.Random) -> None:
    which = rng.choice(["outer", "inner"])
    var, count, level = getattr(p, which)
    if rng.random() < 0.5:
        count = rng.choice(["0", "1", "3", "7", "33", "1024", "1025", "65536", "N", "N / 7",
                            "-1", "2147483648"])
    else:
        level = rng.choice(LEVELS)
    setattr(p, which, (var, count, level))


def m_insert(p: Program, rng: random.Random) -> None:
    g = Gen(rng)
    kind = rng.choice(["println", "assert", "asm"])
    while True:
        s = g.stmt(p)
        if s.kind == kind or rng.random() < 0.2:
            break
    bodies = [p.body] + [b[i].body for b, i in _all_stmts(p.body) if b[i].body]
    body = rng.choice(bodies)
    body.insert(rng.randrange(len(body) + 1), s)


MUTATIONS = [m_retype, m_literal, m_rename, m_dims, m_statements, m_parallel, m_insert]


def _apply_rename(text: str, p: Program) -> str:
    old, new = p.__dict__.get("_rename", (None, None))
    if old is None:
        return text
    return re.sub(rf"(?<![\w.]){re.escape(old)}(?!\w)", new, text)


# ---------------------------------------------------------------- example mutations

_EXAMPLES = ["gemm.co", "gemm_block_p.co", "gemm_block_acc.co", "gemm_bias_relu.co",
             "softmax.co", "rmsnorm.co", "transpose.co", "vector_add.co",
             "gemm_block_acc_cond_rescale.co", "flash_atten.co"]
_DECLARED = re.compile(r"\b(?:mutable\s+)?(?:u32|s32|int|f32|bool|s64|u64)\s+([A-Za-z_]\w*)\s*=")
_PAR = re.compile(r"(parallel\s+(?:\{[^}]*\}|\w+)\s+by\s+)(\[[^\]]*\]|[\w*/+ ()-]+?)(\s*:\s*)"
                  r"([\w-]+)")
_DEFINE = re.compile(r"^(#define\s+\w+\s+)(\S+)", re.M)
_SCALAR_TYPE = re.compile(r"\b(mutable\s+)(u32|s32|int|f32)\b")


def mutate_example(text: str, rng: random.Random) -> str:
    kind = rng.randrange(5)
    if kind == 0:  # a consistent rename of a declared name
        names = sorted(set(re.findall(r"\b[A-Za-z_]\w*(?=\s*(?:[,)=;]|\[|\.at))", text)))
        names = [n for n in names if n not in ELEM_TYPES and len(n) > 1] or ["x"]
        old, new = rng.choice(names), rng.choice(ODD_NAMES)
        return re.sub(rf"(?<![\w.]){re.escape(old)}(?!\w)", new, text)
    if kind == 1:  # a scalar's type
        spots = list(_SCALAR_TYPE.finditer(text))
        if spots:
            m = rng.choice(spots)
            return text[:m.start(2)] + rng.choice(SCALAR_TYPES) + text[m.end(2):]
    if kind == 2:  # a parallel count or level
        spots = list(_PAR.finditer(text))
        if spots:
            m = rng.choice(spots)
            if rng.random() < 0.6:
                new = rng.choice(["1", "2", "3", "4", "7", "8", "0", "33"])
                return text[:m.start(2)] + new + text[m.end(2):]
            return text[:m.start(4)] + rng.choice(LEVELS) + text[m.end(4):]
    if kind == 3:  # a #define value
        spots = list(_DEFINE.finditer(text))
        if spots:
            m = rng.choice(spots)
            return text[:m.start(2)] + rng.choice(["0", "1", "3", "32", "48", "96", "100",
                                                   "512", "-64"]) + text[m.end(2):]
    decls = list(_DECLARED.finditer(text))  # a declared scalar's initial value
    if decls:
        m = rng.choice(decls)
        end = text.index(";", m.end())
        return text[:m.end()] + " " + rng.choice(LITERALS) + text[end:]
    return text


# ---------------------------------------------------------------- one program

def program(seed: int, index: int) -> tuple[str, str]:
    """(origin, text) of program `index` of `seed`. Deterministic."""
    rng = random.Random(f"choreo-gfuzz:{seed}:{index}")
    if rng.random() < 0.25:
        name = rng.choice(_EXAMPLES)
        text = (ROOT / "examples" / name).read_text()
        for _ in range(rng.choice((1, 1, 2))):
            text = mutate_example(text, rng)
        return f"examples/{name}", text
    g = Gen(rng)
    p = g.program()
    ops = []
    for _ in range(rng.choice((0, 1, 1, 2, 3))):
        op = rng.choice(MUTATIONS)
        op(p, rng)
        ops.append(op.__name__[2:])
    return "generate" + (":" + ",".join(ops) if ops else ""), _apply_rename(render(p), p)


def run_program(path: Path, timeout: float) -> dict:
    """check, then compile for both targets and ptxas; the first finding, the CPU time."""
    cpu0 = time.process_time()
    found = {"kind": None, "stage": None, "message": "", "compiled": 0, "assembled": 0,
             "target": None}
    for target in TARGETS:
        r = textfuzz.run_one(path, ROOT / "examples", target, timeout)
        found["stage"] = r["stage"]
        found["compiled"] += r["compiled"]
        found["assembled"] += r["assembled"]
        if r["kind"] and not found["kind"]:
            kind = "slow" if r["kind"] == "timeout" else r["kind"]
            found.update(kind=kind, message=r["message"], target=target)
        if r["stage"] == "check":
            break  # check does not depend on the target
    found["cpu"] = round(time.process_time() - cpu0, 3)
    return found


# ---------------------------------------------------------------- the campaign

def campaign(n: int, seed: int = 0, cpu: float = 10.0, only: list[int] | None = None,
             progress: int = 0, start: int = 0) -> dict:
    indices = only if only is not None else list(range(start, start + n))
    counts = {k: 0 for k in KINDS + OTHER}
    counts.update(programs=0, checked_ok=0, compiled=0, assembled=0)
    findings = []
    with tempfile.TemporaryDirectory(prefix="choreo_gfuzz_") as workdir:
        for index in indices:
            origin, text = program(seed, index)
            path = Path(workdir) / f"g{index}.co"
            path.write_text(text, encoding="utf-8")
            r = run_program(path, timeout=max(cpu * 3, 30.0))
            if r["cpu"] > cpu and not r["kind"]:
                r.update(kind="slow", message=f"{r['cpu']} s of CPU (budget {cpu} s)")
            if r["kind"] == "ptxas" and _own_asm(r["message"], text):
                r["kind"] = "asm"  # the program's own __asm__ text is not PTX: its error
            path.unlink(missing_ok=True)
            counts["programs"] += 1
            counts["checked_ok"] += r["stage"] == "compile"
            counts["compiled"] += r["compiled"]
            counts["assembled"] += r["assembled"]
            if r["kind"]:
                counts[r["kind"]] += 1
                r.update(index=index, origin=origin, text=text)
                findings.append(r)
                if progress:
                    first = (r["message"].strip().splitlines() or [""])[0][:150]
                    print(f"found {r['kind']} #{index} {origin} {r['target']}: {first}",
                          flush=True)
            if progress and counts["programs"] % progress == 0:
                print(json.dumps(counts), flush=True)
    return {"counts": counts, "findings": findings}


def _own_asm(message: str, text: str) -> bool:
    """Whether ptxas's complaint is about an instruction the program wrote in `__asm__`."""
    m = re.search(r"Not a name of any known instruction: '(\w+)'", message)
    return bool(m) and f'__asm__("{m.group(1)}' in text


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=2000, help="programs to run (default 2000)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--start", type=int, default=0, help="the first program's index")
    ap.add_argument("--cpu", type=float, default=10.0, help="CPU seconds per program")
    ap.add_argument("--only", type=int, nargs="*", help="run these program indices")
    ap.add_argument("--show", type=int, help="print program N's text and stop")
    ap.add_argument("--out", help="folder for the report and the findings' inputs")
    args = ap.parse_args()
    if args.show is not None:
        print(program(args.seed, args.show)[1], end="")
        return
    os.environ.setdefault("CHOREO_PY_NO_CACHE", "1")
    t0 = time.perf_counter()
    res = campaign(args.n, args.seed, args.cpu, args.only, progress=100, start=args.start)
    counts = res["counts"]
    counts["seconds"] = round(time.perf_counter() - t0, 1)
    print(json.dumps(counts))
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "report.json").write_text(json.dumps(res, indent=1))
        for f in res["findings"][:300]:
            (out / f"{f['kind']}-{f['index']}.co").write_text(f["text"])
            (out / f"{f['kind']}-{f['index']}.txt").write_text(
                f"origin {f['origin']} target {f['target']} stage {f['stage']}\n{f['message']}")
    sys.exit(1 if any(counts[k] for k in KINDS) else 0)


if __name__ == "__main__":
    main()
