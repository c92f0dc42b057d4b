"""The IR verifier on hand-made IR: each rule, with the location it reports."""
from __future__ import annotations

import pytest

from choreo_py import ir
from choreo_py.ir import build as B
from choreo_py.diagnostics import ChoreoError
from choreo_py.ir.verify import verify_kernel
from choreo_py.sema import views as V
from choreo_py.source import Loc

L = Loc("t.co", 7, 3)
S = ir.Sym


def kernel(body: list[ir.Stmt]) -> ir.Kernel:
    k = ir.Kernel("k", [ir.Param("A", "bf16", (S("M"), B.const(64)))],
                  [ir.GridDim("t", B.cdiv(S("M"), B.const(64)))])
    k.buffers = [ir.Buffer("buf", "shared", "bf16", (64, 64)),
                 ir.Buffer("ring", "shared", "bf16", (64, 64), count=2)]
    k.events = [ir.Event("e", 2, ready=True)]
    k.frags = [ir.Frag("acc", "f32", (64, 64), "acc")]
    k.body = body
    return k


def tile() -> ir.View:
    return V.at(V.subspan(V.whole("A", (S("M"), B.const(64))), [B.const(64), B.const(64)]),
                [S("t"), B.const(0)])


def load(fut: str | None = "f") -> ir.TmaLoad:
    return ir.TmaLoad(tile(), V.whole("buf", (B.const(64), B.const(64))), fut, loc=L)


def mma(fut: str | None = "m") -> ir.Mma:
    sh = V.whole("buf", (B.const(64), B.const(64)))
    return ir.Mma("acc", sh, sh, "row.row", fut, loc=L)


def error(body) -> ChoreoError:
    with pytest.raises(ChoreoError) as info:
        verify_kernel(kernel(body))
    assert info.value.loc == L
    return info.value


def test_valid_kernel_passes() -> None:
    body = [load(), ir.Trigger(ir.EventRef("e", order=B.const(0)), ["f"], loc=L),
            ir.MmaFill("acc", ir.Const(0.0, "f32"), loc=L), mma(),
            ir.Wait([ir.FutureRef("m")], loc=L)]
    verify_kernel(kernel(body))  # raises on a finding
    # ... and with the wait moved before the MMA it is one
    assert "waited before any operation defines it" in error(body[:3] + [body[4], body[3]]).message


@pytest.mark.parametrize("body,message", [
    ([ir.Let("x", S("y"), loc=L)], "'y' is used before it is defined"),
    ([ir.Let("x", B.const(1), loc=L), ir.Assign("x", B.const(2), loc=L)], "'x' is not mutable"),
    ([ir.Wait([ir.FutureRef("f")], loc=L)], "'f' is waited before any operation defines it"),
    ([load(), ir.Wait([ir.FutureRef("f")], loc=L), ir.Wait([ir.FutureRef("f")], loc=L)],
     "future 'f' was already waited"),
    ([load(), mma(), ir.Trigger(ir.EventRef("e"), ["f", "m"], loc=L)],
     "'trigger ... after' with both TMA loads and MMA futures"),
    ([load(), ir.Wait([ir.FutureRef("f")], loc=L), ir.Trigger(ir.EventRef("e"), ["f"], loc=L)],
     "the future was already consumed by a wait"),
    ([ir.TmaLoad(tile(), V.whole("ring", (B.const(64), B.const(64))), None, loc=L)],
     "'ring' is an array of 2 buffers; select one with [slot]"),
    ([ir.TmaLoad(V.whole("buf", (B.const(64), B.const(64))), tile(), None, loc=L)],
     "'buf' is shared memory; global memory is needed here"),
    ([ir.Wait([ir.EventRef("nope")], loc=L)], "'nope' is not an event"),
    ([ir.SetMaxRegs(100, True, loc=L)], "register count 100 must be a multiple of 8"),
    ([ir.ElemStore("nofrag", (B.const(0),), B.const(1.0), loc=L)], "'nofrag' is not a fragment"),
])
def test_verifier_rule(body, message) -> None:
    assert message in error(body).message


def test_future_in_a_loop_is_a_new_instance_each_iteration() -> None:
    body = [ir.For("i", B.const(0), B.const(4), [load(), ir.Wait([ir.FutureRef("f")], loc=L)], loc=L)]
    verify_kernel(kernel(body))  # raises on a finding
    # outside the loop the second wait of the same instance is one
    twice = [load(), ir.Wait([ir.FutureRef("f")], loc=L), ir.Wait([ir.FutureRef("f")], loc=L)]
    assert "already waited" in error(twice).message


def test_loop_index_is_read_only() -> None:
    body = [ir.For("i", B.const(0), B.const(4), [ir.Let("i", B.const(1), loc=L)], loc=L)]
    assert "index variable" in error(body).message
