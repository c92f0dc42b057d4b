"""A reader role's register copy of a block accumulator (lowering/sm100/lower_flow.py,
reader_loads): FA4's softmax reads S from tensor memory once a step, for the row max and
the exponentials. The copy is reused across statements that release nothing to the other
roles (applies, reductions, waits) and dropped at a trigger, a barrier, a loop head or a
branch, after a write of the tile or of an operand over its columns (P over S), and after a
voted apply (a warp that skips it loaded nothing)."""
from __future__ import annotations

import pytest

from choreo_py import ir
from choreo_py.lowering.sm100.lower_flow import reader_loads

I, J = ir.Sym("i"), ir.Sym("j")
ACCS = frozenset({"s", "o"})
HOSTS = {"p": "s"}


def _max():
    return ir.Reduce("max", "m", "s", 1)


def _apply(store: str, read: str = "s", vote: bool = False):
    """`apply {i, j} in s.span { store.at(i, j) = read.at(i, j) * m.at(i) }`."""
    value = ir.Bin("*", ir.Elem(read, (I, J), "f32"), ir.Elem("m", (I,), "f32"), "f32")
    body = [ir.ElemStore(store, (I, J), value)]
    if vote:
        body = [ir.If(ir.Bin("!=", ir.Elem("m", (I,), "f32"), ir.Const(1.0, "f32"), "bool"),
                      body, [])]
    return ir.Apply(("i", "j"), (128, 128), "s", body, warp_vote=vote)


def _wait():
    return ir.Wait([ir.EventRef("e")])


def _trigger():
    return ir.Trigger(ir.EventRef("e"))


def _loads(body: list) -> list:
    got = reader_loads(body, ACCS, HOSTS)
    return [got.get((id(s), "s")) for s in body]


def test_the_row_max_and_the_exponentials_read_s_once():
    """reduce_max(m, s), a wait, then P = f(s, m): S is loaded by the max alone."""
    assert _loads([_max(), _wait(), _apply("p")]) == [True, None, False]


@pytest.mark.parametrize("between", [_trigger, lambda: ir.RoleSync(), lambda: ir.SyncShared()],
                         ids=["trigger", "role-sync", "sync-shared"])
def test_a_release_drops_the_copy(between):
    """After this role releases, another role may write the tile before the next read."""
    assert _loads([_max(), between(), _apply("p")]) == [True, None, True]


def test_a_branch_or_a_loop_drops_the_copy():
    body = [_max(), ir.If(ir.Const(True, "bool"), [_wait()], []), _apply("p")]
    assert _loads(body) == [True, None, True]
    loop = ir.For("k", ir.Const(0, "s32"), ir.Const(2, "s32"), [_max(), _apply("p")])
    got = reader_loads([loop], ACCS, HOSTS)
    assert [got[(id(s), "s")] for s in loop.body] == [True, False]  # the head: no copy


def test_writes_drop_the_copy():
    """A write of the tile goes back piece by piece (it may use the copy it finds, not
    leave one); P's write goes over S's columns."""
    assert _loads([_max(), _apply("s"), _apply("p")]) == [True, False, True]
    assert _loads([_max(), _apply("p"), _apply("p")]) == [True, False, True]


def test_a_voted_apply_leaves_no_copy():
    body = [_apply("o", read="o", vote=True), _apply("o", read="o")]
    got = reader_loads(body, ACCS, HOSTS)
    assert [got[(id(s), "o")] for s in body] == [True, True]


def test_kernels_whose_readers_move_64_registers_keep_no_copy():
    """reader_copies asks reader_loads only where the tile moves 16 registers at a time:
    flash_atten_blackwell_persistent.co (168 registers a thread, x64 moves) spilled with a
    copy kept; it reloads S at each statement (the two-tile example, with setmaxnreg, reads
    S once a step: test_flash_atten_blackwell.py)."""
    from choreo_py.lowering.sm100.lower_flow import reader_copies
    role = ir.Role("r == 2", ir.Const(True, "bool"), (2,), [_max(), _wait(), _apply("p")])
    k = ir.Kernel.__new__(ir.Kernel)
    k.body, k.frags = [role], [ir.Frag("p", "bf16", (128, 64), "operand", host="s")]
    assert reader_copies(k, None, ACCS, small_moves=False) == {}
    got = reader_copies(k, None, ACCS, small_moves=True)
    assert [got.get((id(s), "s")) for s in role.body] == [True, None, False]
