"""Every IR node kind (statements and expressions) has a handler in every stage, or a
refusal that names it.

A new node kind added to choreo_py/ir/__init__.py without a printer, a parser rule, a
verifier check, an evaluator (ir.eval) rule, an interpreter handler and a lowering (or a
named refusal) in each backend would otherwise be missed silently: each stage dispatches
by a table keyed by node type, and this test reads the tables; the backends' expression
lowering is checked by lowering a kernel that holds each kind.
"""
from __future__ import annotations

import pytest

from choreo_py import ir, targets
from choreo_py.ir import parse as ir_parse, printer as ir_printer, verify as ir_verify
from choreo_py.construct_names import describe
from choreo_py.diagnostics import ChoreoError
from choreo_py.interp import executor, scalars
from choreo_py.ir import eval as ir_eval
from choreo_py.passes import pipeline
from choreo_py.runtime import build
from choreo_py.lowering.core import kernel as core
from choreo_py.lowering.sm90.wgmma import Sm90Target
from choreo_py.lowering.sm100.lower import Sm100Lowering

STATEMENT_KINDS = sorted((c for c in vars(ir).values()
                          if isinstance(c, type) and issubclass(c, ir.Stmt) and c is not ir.Stmt),
                         key=lambda c: c.__name__)
EXPRESSION_KINDS = sorted((c for c in vars(ir).values()
                           if isinstance(c, type) and issubclass(c, ir.Expr) and c is not ir.Expr),
                          key=lambda c: c.__name__)
BACKENDS = {"sm_90a": Sm90Target, "sm_100a": Sm100Lowering}


def test_there_are_statement_and_expression_kinds():
    assert {ir.Let, ir.Mma, ir.Launch, ir.NamedBarrier} <= set(STATEMENT_KINDS)
    assert {ir.Const, ir.Sym, ir.Bin, ir.Elem, ir.BufElem} <= set(EXPRESSION_KINDS)


# One printed line (or region) of each kind, inside the kernel below.
SAMPLES = {
    ir.Let: "let x = t + 1", ir.Var: "var v: u32 = 0:u32", ir.Assign: "v := v + 1",
    ir.ViewDef: "view A_t = A<t * 64+:64, 0+:64>", ir.Break: "break", ir.Continue: "continue",
    ir.SyncShared: "sync.shared", ir.SyncWarp: "sync.warp", ir.GridSync: "sync.grid",
    ir.Fence: "fence.gpu",
    ir.Yield: "yield",
    ir.RoleSync: "role.sync", ir.NamedBarrier: "bar.sync 1, 256",
    ir.Launch: "launch k", ir.HostCall: "call f(a = &A, n = t + 1) -> r: s32", ir.Assert: "assert M == 64, 'one tile of rows'", ir.For: "for i in 0..4 {\n}", ir.While: "while v < 4 {\n}",
    ir.If: "if t == 0 {\n}", ir.Parallel: "parallel p < 2 : group-4 (128 threads each) {\n}",
    ir.Role: "role (p == 0) = {0} maxregs=40 {\n}", ir.SetMaxRegs: "setmaxnreg.dec 40",
    ir.TmaLoad: "f = tma.load.async.swizzle128 A<0+:64, 0+:64> => buf<0+:64, 0+:64>",
    ir.TmaStore: "tma.store [leader] buf<0+:64, 0+:64> => A<0+:64, 0+:64>",
    ir.DmaCopy: "dma.copy A<0+:64, 0+:64> => buf<0+:64, 0+:64>", ir.Wait: "wait e, future f",
    ir.Trigger: "trigger e after f", ir.FragDecl: "frag acc: f32[64, 64] layout=acc",
    ir.MmaFill: "mma.fill acc, 0.0:f32",
    ir.Mma: "m = mma.row.row.async acc += buf<0+:64, 0+:64> * buf<0+:64, 0+:64>",
    ir.SparseMma: "mma.row.row acc += buf<0+:64, 0+:32> * buf<0+:64, 0+:64> sparse=a",
    ir.WarpMma: "mma.sync.row.col acc += a * a",
    ir.MmaStore: "mma.store acc => buf<0+:64, 0+:64>", ir.MmaLoad: "mma.load buf<0+:64, 0+:64> => a",
    ir.Apply: "apply (i, j) in acc[64, 64] {\n}", ir.ElemStore: "acc[0, 0] = 1.0:f32",
    ir.BufStore: "buf<0+:64, 0+:64>[0, 0] = 0:bf16", ir.Reduce: "r = reduce_max(acc, dim=1)",
    ir.AllReduce: "all_reduce_sum(r)", ir.FragCopy: "r = copy(acc)",
    ir.Print: "print 't=', t, ', x, y: ', t + 1, t * 2, '\\n'",
    ir.Asm: "asm.volatile 'add.s32 %0, %0, %[c];'; out '+r' v; in [c] 'r' t + 1; clobber 'memory'",
}
KERNEL = """kernel k(A: global bf16[M, 64]) {
  grid t < 4
  shared buf: bf16[64, 64]
  event e pending
  frag acc: f32[64, 64] layout=acc
  frag a: bf16[64, 64] layout=operand
  frag r: f32[64] layout=row
%s
}

func k(A: global bf16[M, 64]) {
  launch k
}
"""


@pytest.mark.parametrize("kind", STATEMENT_KINDS, ids=lambda c: c.__name__)
def test_printer_and_parser(kind):
    """The printer has a rule for the kind, and the parser reads what it prints back."""
    assert kind in ir_printer.STATEMENTS
    text = KERNEL % SAMPLES[kind]
    module = ir_parse.parse_module(text)
    body = module.functions[0].kernels[0].body
    assert [type(s) for s in body[-1:]] == [kind]
    printed = [line.strip() for line in ir_printer.print_module(module).splitlines()]
    assert printed == [line.strip() for line in text.splitlines()]


@pytest.mark.parametrize("kind", STATEMENT_KINDS, ids=lambda c: c.__name__)
def test_verifier(kind):
    assert kind in ir_verify.STATEMENTS or kind in ir_verify.REFUSED


@pytest.mark.parametrize("kind", STATEMENT_KINDS, ids=lambda c: c.__name__)
def test_interpreter(kind):
    assert kind in executor.GENERATORS or kind in executor.PLAIN or kind in executor.REFUSED


@pytest.mark.parametrize("target", sorted(BACKENDS))
@pytest.mark.parametrize("kind", STATEMENT_KINDS, ids=lambda c: c.__name__)
def test_backend(kind, target):
    """Lowered by the core or the target's own handler, or refused by name (the target
    record's `refuses`, or the core's names for statements that need an enclosing one)."""
    own = getattr(BACKENDS[target], "handlers", {}) or {}
    refused = targets.get(target).refuses
    assert kind in core._HANDLERS or kind in own or kind.__name__ in refused \
        or kind in core._NAMES, f"{kind.__name__} has no {target} lowering and no refusal"


def test_refusals_name_real_kinds():
    for t in targets.TARGETS.values():
        unknown = [n for n in t.refuses if not isinstance(getattr(ir, n, None), type)]
        assert not unknown, f"{t.name} refuses unknown IR kinds {unknown}"


# ---------------------------------------------------------------- expressions

#: One expression of each kind, as the value of `let y = ...` in KERNEL.
EXPRESSION_SAMPLES = {
    ir.Const: "2.0:f32", ir.Sym: "t", ir.Bin: "t + 1", ir.Un: "-t", ir.Select: "t < 2 ? t : 0",
    ir.Call: "cdiv(t, 2)", ir.Elem: "acc[0, 1]", ir.BufElem: "buf<0+:64, 0+:64>[0, 1]",
}


@pytest.mark.parametrize("kind", EXPRESSION_KINDS, ids=lambda c: c.__name__)
def test_expression_printer_and_parser(kind):
    assert kind in ir_printer.EXPRESSIONS
    text = KERNEL % f"let y = {EXPRESSION_SAMPLES[kind]}"
    module = ir_parse.parse_module(text)
    let = module.functions[0].kernels[0].body[-1]
    assert isinstance(let, ir.Let) and type(let.value) is kind
    printed = [line.strip() for line in ir_printer.print_module(module).splitlines()]
    assert printed == [line.strip() for line in text.splitlines()]


@pytest.mark.parametrize("kind", EXPRESSION_KINDS, ids=lambda c: c.__name__)
def test_expression_verifier_evaluator_interpreter(kind):
    assert kind in ir_verify.EXPRESSIONS
    assert kind in ir_eval.EXPRESSIONS or kind in ir_eval.REFUSED
    assert kind in scalars.EXPRESSIONS


class _Unknown(ir.Expr):
    """A kind no stage has a rule for."""

    dtype = "s32"


def test_an_unknown_expression_kind_is_refused_not_skipped():
    """Each table's fallback names the kind: a new node without a rule is an error in
    every stage, never passed over."""
    e = _Unknown()
    with pytest.raises(TypeError, match="not an IR expression"):
        ir_printer.expr(e)
    with pytest.raises(ir_eval.EvalError, match="cannot evaluate"):
        ir_eval.evaluate(e, {})
    with pytest.raises(Exception, match="cannot evaluate"):
        scalars.Evaluator(None)(e, {})
    module = ir_parse.parse_module(KERNEL % "let y = t")
    kernel = module.functions[0].kernels[0]
    kernel.body[-1].value = e
    with pytest.raises(ChoreoError, match="is not an IR expression"):
        ir_verify.verify_kernel(kernel)


def test_evaluator_refusals_are_named():
    for kind in ir_eval.REFUSED:
        module = ir_parse.parse_module(KERNEL % f"let y = {EXPRESSION_SAMPLES[kind]}")
        with pytest.raises(ir_eval.EvalError, match=describe(kind)):
            ir_eval.evaluate(module.functions[0].kernels[0].body[-1].value, {"t": 0})


#: A per-thread kernel storing `out[...] = <sample>`; `x` is an f32 scalar.
THREAD_KERNEL = """kernel k(a: global f32[N], out: global f32[N]) {
  grid blk < N / 256
  parallel t < 256 : thread (1 threads each) {
    let x = a<0+:N>[blk * 256 + t]
    out<0+:N>[blk * 256 + t] = %s
  }
}

func k(a: global f32[N]) -> out {
  host out: global f32[N]
  launch k
}
"""
BACKEND_SAMPLES = {
    ir.Const: "2.0:f32", ir.Sym: "x", ir.Bin: "x + 1.0:f32", ir.Un: "-x",
    ir.Select: "t < 128 ? x : 0.0:f32", ir.Call: "exp2(x)", ir.BufElem: "a<0+:N>[blk * 256 + t]",
}
#: Fragment elements live in MMA kernels: the causal FA example's IR (apply on s and o).
FRAGMENT_IR = {"sm_90a": "tests/golden/ir/flash_atten_causal.ir.txt",
               "sm_100a": "tests/golden/ir/sm100/flash_atten_causal.ir.txt"}


def _kinds(module: ir.Module) -> set[type]:
    out = set()
    for f in module.functions:
        for k in f.kernels:
            for s in ir.walk(k.body):
                for value in vars(s).values():
                    for e in (value if isinstance(value, (list, tuple)) else [value]):
                        if isinstance(e, ir.Expr):
                            out |= {type(x) for x in ir.expr_walk(e)}
    return out


@pytest.mark.parametrize("target", sorted(BACKENDS))
@pytest.mark.parametrize("kind", EXPRESSION_KINDS, ids=lambda c: c.__name__)
def test_backend_expression(kind, target):
    """Each backend lowers a kernel holding the kind to PTX, or refuses it by name."""
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    if kind in BACKEND_SAMPLES:
        module = ir_parse.parse_module(THREAD_KERNEL % BACKEND_SAMPLES[kind])
        pipeline.run_module(module, targets.get(target))
    else:
        module = ir_parse.parse_module((root / FRAGMENT_IR[target]).read_text())
    assert kind in _kinds(module), f"the sample holds no {kind.__name__}"
    try:
        ptx = build.emit(module, "sample.co", "ptx", target)
    except ChoreoError as e:
        assert describe(kind) in str(e), f"{target} refuses {kind.__name__} without naming it: {e}"
        return
    assert ".entry" in ptx


# ---------------------------------------------------------------- walking

def test_every_expression_or_statement_field_is_walked():
    """The walkers (ir.expr_children, ir.child_blocks) read each kind's field annotations:
    a field holding expressions or statements under another spelling would be missed."""
    from dataclasses import fields

    walked = ir.EXPR_FIELD + ir.EXPRS_FIELD + ir.BLOCK_FIELD
    odd = [f"{kind.__name__}.{f.name}: {f.type}" for kind in STATEMENT_KINDS + EXPRESSION_KINDS
           for f in fields(kind) if ("Expr" in str(f.type) or "Stmt" in str(f.type))
           and f.type not in walked]
    assert not odd, "fields the walkers do not see:\n" + "\n".join(odd)


@pytest.mark.parametrize("kind", EXPRESSION_KINDS, ids=lambda c: c.__name__)
def test_expr_children_are_every_sub_expression(kind):
    module = ir_parse.parse_module(KERNEL % f"let y = {EXPRESSION_SAMPLES[kind]}")
    e = module.functions[0].kernels[0].body[-1].value
    subs = []
    for value in vars(e).values():
        subs += [x for x in (value if isinstance(value, tuple) else (value,)) if isinstance(x, ir.Expr)]
    assert ir.expr_children(e) == subs

