"""A PTX emulator: executes the PTX choreo-py emits, on the CPU, for small launches.

Independent of the backend: it parses PTX text (ptx_parse.py), decodes every
instruction, descriptor and tensor map itself from the PTX ISA and CUTLASS's
definitions, and never imports lowering/. Entry points: `emulate(path,
tensors, target=...)`, `emulate_ptx(ptx, launch, tensors)`, `emulate_program(path)`
(a host program's functions, every launch emulated: program.py), and the
`choreo emulate` command (command.py). docs/emulator.md says what is
modelled and what is not.

Layout: ptx_parse (PTX -> Kernel of Inst), isa_table (opcode tables and their
decorators), isa (decoding; imports the families), lanes (lane count, PTX
types, sentinels), operands (operand readers and writers), isa_alu / isa_mem /
isa_sync / isa_tma / isa_wgmma (sm_90a forms), rounding (f32 in the four rounding
directions), isa_f32x2 (sm_100's packed f32 pairs, decoded through isa_alu),
tcgen05 / tmem / sm100_desc (sm_100a forms), swizzle (shared by TMA and both MMA descriptor decoders), warp
(registers, divergence, the execution loop), barriers (mbarriers, named
barriers), machine (CTA, async completion queue, reports), races (strict-mode
shared-memory rules), scheduler (warp orders), memory (global, params, tensor
maps), launch (module/JSON -> launch), api, program (host programs), command, report.

Handler interface (stable; changes are announced in commits starting
"emu-interface:")
-----------------------------------------------------------------------
Register an instruction family with

    from choreo_py.emu.isa import handler, HANDLERS

    @handler("tcgen05.mma", prepare=None)
    def tcgen05_mma(warp, inst): ...

HANDLERS maps a dotted opcode prefix to the function; the longest
registered prefix of an instruction's opcode wins ("tcgen05.mma" serves
"tcgen05.mma.cta_group::1.kind::f16"). `prepare(inst)`, if given, runs
once at load and its result is `inst.data`. An opcode without an entry is
refused at load, by name, with its PTX line. Modules named in
isa._loaded() are imported when the first kernel is decoded (tcgen05_handlers.py
is imported if present, so its @handler registrations take effect). A family
imports the tables from isa_table, never from isa: isa imports the families.

A handler runs once per execution by a warp, for the warp's active lanes
(the lanes of the converged group whose guard predicate is true). It
returns None to continue with the next instruction, or
`warp.block(ready, what, retry=True)`'s value to wait (see below).

    inst.opcode, inst.parts     "tcgen05.ld.sync.aligned.16x32bx2.x64.b32", split at dots
    inst.operands               Operand(kind=reg|imm|sreg|sym|addr|vec|tmap|sink, text,
                                reg, value, base, offset, items)
    inst.line, inst.text        PTX line number and statement; inst.co: "file.co:N" or None
    inst.data                   prepare()'s result

    warp.read(op, "u32")        32 lanes (numpy) of an operand as a PTX type
    warp.write(op, "b32", v)    writes a register under the active mask
    warp.write_reg(r, v)        the same by register number (v: 32 lanes)
    warp.R[r]                   register r's 32 lanes (never modify in place); a handler
                                reading or writing it directly calls, as read/write do,
                                warp.check_read(r) (if r in warp.unset) and
                                warp.mark_written(r, lanes=None): the unwritten-register
                                rule (a lane reading a register it never wrote)
    warp.addr(op)               per-lane uint64 addresses of an [addr] operand
    warp.mask                   active lanes (bool[32]); warp.full: all 32 active
    warp.warp_id, warp.lane, warp.tid   warp index in the CTA; lane ids; thread ids (x)
    warp.inst                   the executing instruction
    warp.inflight_regs          {register: (inst, "acc"|"a"|...)}: registers an async op
                                owns; touching one is reported as a race (extend
                                isa_wgmma.check_async_registers' kinds as needed)
    warp.async_state            dict for per-warp family state (e.g. "tcgen05.ld")
    warp.block(ready, what, retry=True)
                                parks the lanes until ready() is true; retry: re-execute
                                the instruction then, else continue after it
    warp.cta.smem               shared memory, np.uint8, indexed by shared address
                                (the dynamic window starts at cta.smem_base)
    warp.cta.tmem               tensor memory slot (None until the sm_100 family sets it)
    warp.cta.state              dict for per-CTA family state
    warp.cta.mbarrier(addr)     MBarrier: arrive(n), expect_tx(bytes), complete_tx(bytes),
                                phase (completed phases), count, pending, tx, describe()
    warp.cta.schedule(fn, what, inst, delay=None)
                                runs fn() when an async operation completes (later, in
                                the schedule's order; before any deadlock is declared)
    warp.cta.races              SmemTracker: async_read(inst, lo, hi, what, key),
                                release(key), async_write_begin/end (strict race rules)
    warp.cta.notify()           something waiters may wait for changed
    warp.machine.race(msg, inst, other=None, relaxable=False)
                                a race report (raised in strict mode; relaxable ones
                                are noted and let pass with --relaxed)
    warp.machine.misuse(msg, inst) -> exception to raise (ill-formed use)
    warp.machine.misuse_or_note(msg, inst, key)
                                a misuse the hardware executes anyway: raised in strict
                                mode, noted once per instruction and key with --relaxed
    warp.machine.where(inst)    "file.ptx:123 (file.co:45)"
    warp.machine.strict / .relaxed
"""
from __future__ import annotations

from .isa import HANDLERS, handler
from .report import DeadlockError, EmuError, RaceError

__all__ = ["emulate", "emulate_ptx", "emulate_program", "EmuStats", "HANDLERS", "handler",
           "EmuError", "RaceError", "DeadlockError"]


def __getattr__(name: str):
    # The API needs numpy (and torch for tensors): imported on first use, so that the
    # command line parser can name `choreo emulate`'s options without them.
    if name in ("emulate", "emulate_ptx", "EmuStats"):
        from . import api

        return getattr(api, name)
    if name == "emulate_program":
        from .program import emulate_program

        return emulate_program
    raise AttributeError(f"module 'choreo_py.emu' has no attribute '{name}'")
