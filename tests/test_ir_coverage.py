"""Every IR statement kind has a handler in every stage, or a refusal that names it.

A new node kind added to choreo_py/ir.py without a printer, a parser rule, a
verifier check, an interpreter handler and a lowering (or a named refusal) in
each backend would otherwise be missed silently: each stage dispatches by a
table keyed by node type, and this test reads the tables.
"""
from __future__ import annotations

import pytest

from choreo_py import ir, ir_parse, ir_printer, ir_verify, targets
from choreo_py.interp import executor
from choreo_py.lowering.core import kernel as core
from choreo_py.lowering.sm90.wgmma import Sm90Target
from choreo_py.lowering.sm100.lower import Sm100Lowering

STATEMENT_KINDS = sorted((c for c in vars(ir).values()
                          if isinstance(c, type) and issubclass(c, ir.Stmt) and c is not ir.Stmt),
                         key=lambda c: c.__name__)
BACKENDS = {"sm_90a": Sm90Target, "sm_100a": Sm100Lowering}


def test_there_are_statement_kinds():
    assert {ir.Let, ir.Mma, ir.Launch, ir.NamedBarrier} <= set(STATEMENT_KINDS)


# One printed line (or region) of each kind, inside the kernel below.
SAMPLES = {
    ir.Let: "let x = t + 1", ir.Var: "var v: u32 = 0:u32", ir.Assign: "v := v + 1",
    ir.ViewDef: "view A_t = A<t * 64+:64, 0+:64>", ir.Break: "break", ir.Continue: "continue",
    ir.SyncShared: "sync.shared", ir.RoleSync: "role.sync", ir.NamedBarrier: "bar.sync 1, 256",
    ir.Launch: "launch k", ir.Assert: "assert M == 64, 'one tile of rows'", ir.For: "for i in 0..4 {\n}", ir.While: "while v < 4 {\n}",
    ir.If: "if t == 0 {\n}", ir.Parallel: "parallel p < 2 : group-4 (128 threads each) {\n}",
    ir.Role: "role (p == 0) = {0} maxregs=40 {\n}", ir.SetMaxRegs: "setmaxnreg.dec 40",
    ir.TmaLoad: "f = tma.load.async.swizzle128 A<0+:64, 0+:64> => buf<0+:64, 0+:64>",
    ir.TmaStore: "tma.store [leader] buf<0+:64, 0+:64> => A<0+:64, 0+:64>",
    ir.DmaCopy: "dma.copy A<0+:64, 0+:64> => buf<0+:64, 0+:64>", ir.Wait: "wait e, future f",
    ir.Trigger: "trigger e after f", ir.FragDecl: "frag acc: f32[64, 64] layout=acc",
    ir.MmaFill: "mma.fill acc, 0.0:f32",
    ir.Mma: "m = mma.row.row.async acc += buf<0+:64, 0+:64> * buf<0+:64, 0+:64>",
    ir.MmaStore: "mma.store acc => buf<0+:64, 0+:64>", ir.MmaLoad: "mma.load buf<0+:64, 0+:64> => a",
    ir.Apply: "apply (i, j) in acc[64, 64] {\n}", ir.ElemStore: "acc[0, 0] = 1.0:f32",
    ir.BufStore: "buf<0+:64, 0+:64>[0, 0] = 0:bf16", ir.Reduce: "r = reduce_max(acc, dim=1)",
    ir.AllReduce: "all_reduce_sum(r)", ir.FragCopy: "r = copy(acc)",
    ir.Print: "print 't=', t, ', x, y: ', t + 1, t * 2, '\\n'",
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
