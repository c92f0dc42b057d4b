"""The block's accumulators: declared outside the thread-group level, one tile for the block.

An accumulator declared `acc = mma.fill.f32 0.0f : block;` in a `parallel
... : block` body, before its `parallel p ... : group-4` level, belongs to the
block: every role of that level sees the same one (tensor memory on
sm_100a). (Without `: block`, an accumulator declared there is one per thread
group that runs the code using it, as registers are.) One role instance issues its MMAs; the whole-language check
(check/block_accumulators.py) holds the rules on the roles' text, this one
the rule that needs the roles' thread groups, which sema evaluates.
"""
from __future__ import annotations

from ..frontend import ast as A
from ..diagnostics import ChoreoError
from .exprs import err


class BlockAccBuilder:
    """Sema of `mma.fill` and MMAs, plus what the block's accumulators need
    (KernelBuilder puts it before OpBuilder, whose methods it extends)."""

    def s_MmaFill(self, s: A.MmaFill) -> None:
        if s.level == "block" and (self.in_parallel is not None or self.kernel is None):
            where = f"inside 'parallel {self.in_parallel.var}'" if self.in_parallel else \
                "outside every parallel region"
            raise err(f"a ': block' accumulator is declared in a 'parallel ... : block' body, "
                      f"before its thread-group level; this one is {where}", s)
        super().s_MmaFill(s)
        if s.level == "block":
            name = s.target.id
            self.kernel.frag(name).block = True
            self.block_accs[name] = None

    def s_FragDecl(self, s: A.FragDecl) -> None:
        """`frag bf16[M, K] p : block;`: the block's operand tile (FA4's P, written by a
        softmax role, read by the MMA role's next MMA)."""
        if s.level is None:
            return super().s_FragDecl(s)
        if s.level != "block":
            raise err(f"a fragment can be declared ': block' (one tile the block's roles "
                      f"share), not ': {s.level}'", s)
        if self.in_parallel is not None or self.kernel is None:
            raise err("a ': block' fragment is declared in a 'parallel ... : block' body, "
                      "before its thread-group level", s)
        super().s_FragDecl(s)
        self.kernel.frag(s.name).block = True
        if s.host is not None:
            self.kernel.frag(s.name).host = self._host_acc(s)

    def _host_acc(self, s: A.FragDecl) -> str:
        """`: block in s`: `s` is a block accumulator declared before the operand (the
        plan checks that the operand fits in its columns)."""
        if s.host not in self.block_accs:
            raise ChoreoError(f"'{s.name}' is declared in the columns of '{s.host}', which is no "
                      "block accumulator declared before it ('s = mma.fill.f32 0.0f : block;')",
                      s.host_loc or s.loc)
        return s.host

    def s_MmaOp(self, s: A.MmaOp) -> None:
        name = s.acc.id if isinstance(s.acc, A.Name) else None
        if name in self.block_accs:
            self._block_acc_issuer(s, name)
        super().s_MmaOp(s)

    def _block_acc_issuer(self, s: A.MmaOp, name: str) -> None:
        role, par = self.role, self.in_parallel
        if par is None or role is None:
            return  # block-level code, or no role: the whole-language check reports it
        if len(role.members) > 1:
            raise err(f"role ({role.name}) selects {len(role.members)} thread groups "
                      f"({par.var}={', '.join(map(str, role.members))}); the MMAs into the "
                      f"block's accumulator '{name}' are issued by one (it is one tile for "
                      "the whole block)", s)
        self.block_accs[name] = role
