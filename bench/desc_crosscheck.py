"""The tcgen05 descriptors the compiler emits, against CUTLASS's CuTe encoder.

    python bench/desc_crosscheck.py            # examples/ and tests/co/
    python bench/desc_crosscheck.py --corpus   # and ../shared/corpus where it compiles

Our encoders (lowering/sm100/descriptors.py) and the emulator's decoders
(choreo_py/emu/sm100_desc.py) were both written from the PTX ISA; a misreading
shared by the two would pass every test that checks one against the other. CuTe
(`cute/arch/mma_sm100_desc.hpp`, `cute/atom/mma_traits_sm100.hpp`, host-side
constexpr code in the `nvidia-cutlass` wheel) is an encoder written
independently, and the one CUTLASS's Blackwell kernels run with.

1. Every sm_100a program is compiled with the descriptor builders wrapped:
   each MMA statement records its instruction descriptor and the arguments
   (M, N, dtypes, major-ness), and, per shared-memory operand, the buffer's
   layout (rows, columns, swizzle), the operand's origin, the address-free
   descriptor bits and the byte advance of each k-step.
2. For each distinct case a C++ program builds the same operand in CuTe: the
   buffer as `tile_to_shape(UMMA::Layout_{K,MN}_SW{128,64,32}_Atom<T>, ...)`
   (stripes of the whole buffer's rows/K extent, as the compiler stores it),
   the slice of one MMA and one k-block with `local_tile`, its descriptor with
   `make_umma_desc<Major>`, and the address CuTe's layout gives each element of
   the slice. Shapes are template arguments (make_umma_desc reads the strides as
   constants), so the program is generated for the recorded cases; the cases'
   run-time values (base address, origin, k-block) come on stdin.
3. Compared: every instruction-descriptor field; the shared-memory descriptor's
   start (so the k-step advance), LBO, SBO, version, base offset, LBO mode,
   swizzle and the fixed/reserved bits; and the element addresses the emulator
   derives from CuTe's descriptor (decode + operand_addresses) against CuTe's.

On the host, CuTe's `cast_smem_ptr_to_uint` has no shared window (it prints an
error and returns 0), so the start address field is filled in the program from
the same pointer make_umma_desc converts on the device (the unswizzled address
of the slice's first 16-byte unit); the shared window's base is taken as 0 and
the buffer's offset in the dynamic shared memory as its address.
"""
from __future__ import annotations

import argparse
import glob
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from cute_host import INSTALL, Missing, build  # noqa: E402,F401  (the tests use all three)

ESIZE = {"bf16": 2, "f16": 2, "f32": 4}
CXX_TYPES = {"bf16": "cute::bfloat16_t", "f16": "cute::half_t", "f32": "float"}
MAJOR_CXX = {"K": "cute::UMMA::Major::K", "MN": "cute::UMMA::Major::MN"}
IDESC_FIELDS = ("sparse_selector", "sparse", "saturate", "d_format", "a_format", "b_format",
                "negate_a", "negate_b", "a_major", "b_major", "n_shr3", "m_shr4", "max_shift",
                "reserved")
SMEM_FIELDS = ("start", "lbo", "sbo", "version", "base_offset", "lbo_mode", "swizzle",
               "fixed_53_60", "reserved_14_15", "reserved_30_31", "bit_48")


# ------------------------------------------------------------------ recording
@dataclass(frozen=True)
class InstrCase:
    m: int
    n: int
    ab_dtype: str
    d_dtype: str
    a_major: str
    b_major: str
    a_in_tmem: bool
    ours: int


@dataclass(frozen=True)
class SmemCase:
    """One shared-memory operand of one MMA statement, in CuTe's (MN, K) coordinates."""
    role: str           # "A" or "B"
    dtype: str
    major: str          # "K" or "MN"
    swizzle: int        # bytes
    buf_mn: int         # the buffer's extent along M/N and along K
    buf_k: int
    mma_mn: int         # one MMA's operand slice: M (A) or N (B) by K = 16
    mma_k: int
    base: int           # the buffer's (slot's) byte address
    mn0: int            # the operand's origin inside the buffer (0 where only known at run time)
    k0: int
    origin: int         # the compiler's byte address of the origin
    bits: int           # the compiler's address-free descriptor bits
    steps: tuple        # ((k-block, byte advance), ...) in issue order
    runtime_origin: bool


@dataclass
class Recording:
    instr: dict = field(default_factory=dict)    # InstrCase -> [program, ...]
    smem: dict = field(default_factory=dict)     # SmemCase -> [program, ...]
    programs: list = field(default_factory=list)  # the programs that issued an MMA
    failed: list = field(default_factory=list)    # (program, first line of its error)


def _const(e):
    from choreo_py import ir
    return e.value if isinstance(e, ir.Const) else None


def record(paths) -> Recording:
    """Compile each program for sm_100a with the descriptor builders wrapped."""
    from choreo_py import driver
    from choreo_py.lowering.core import memory as mem
    from choreo_py.lowering.sm100 import lower_mma as lm, target as tg

    out = Recording()
    cur: dict = {}
    orig = (lm._desc, lm.desc_add, lm.d.instr_desc_f16, lm.d.smem_desc_bits,
            mem.Memory.origin_terms, tg.issue_mma)

    def issue(t, lw, s, zero_first):
        cur.clear()
        cur.update(ops=[], adds=[], idesc=None, origin=None, bits=None)
        orig[5](t, lw, s, zero_first)
        _collect(out, cur, lw, s, k_steps=lm.k_steps, mma_k=lm.MMA_K)

    def desc(lw, view, loc, *, mn_major):
        r = orig[0](lw, view, loc, mn_major=mn_major)
        cur["ops"].append((view, lw.memory.layout(view.base, loc), mn_major, cur["origin"],
                           cur["bits"]))
        return r

    def origin_terms(self, view, loc, **kw):
        r = orig[4](self, view, loc, **kw)
        cur["origin"] = r
        return r

    def smem_desc_bits(*a, **kw):
        cur["bits"] = orig[3](*a, **kw)
        return cur["bits"]

    def instr(m, n, **kw):
        cur["idesc"] = (m, n, kw, orig[2](m, n, **kw))
        return cur["idesc"][3]

    def add(lw, d, off):
        cur["adds"].append(off)
        return orig[1](lw, d, off)

    lm._desc, lm.desc_add, lm.d.instr_desc_f16, lm.d.smem_desc_bits = desc, add, instr, \
        smem_desc_bits
    mem.Memory.origin_terms, tg.issue_mma = origin_terms, issue
    try:
        for p in paths:
            before = sum(map(len, out.instr.values()))
            cur["program"] = p
            try:
                driver.compile_file(str(p), "pyptx", "sm_100a")
            except Exception as e:  # a program the sm_100a backend refuses: listed, not compared
                out.failed.append((str(p), (str(e).splitlines() or [type(e).__name__])[0]))
            if sum(map(len, out.instr.values())) > before:
                out.programs.append(str(p))
    finally:
        lm._desc, lm.desc_add, lm.d.instr_desc_f16, lm.d.smem_desc_bits = orig[:4]
        mem.Memory.origin_terms, tg.issue_mma = orig[4], orig[5]
    return out


def _collect(out: Recording, cur: dict, lw, s, *, k_steps, mma_k: int) -> None:
    m, n, kw, value = cur["idesc"]
    prog = cur.get("program", "?")
    ic = InstrCase(m, n, kw.get("ab_dtype", "bf16"), kw.get("d_dtype", "f32"),
                   kw.get("a_major", "K"), kw.get("b_major", "K"),
                   bool(kw.get("a_in_tmem", False)), value)
    out.instr.setdefault(ic, []).append(prog)
    k = mma_k * (len(cur["adds"]) // max(1, len(cur["ops"])))
    kks = k_steps(lw, s, k, mma_k)
    # issue order per k-step: B's advance, then A's (when A is a shared tile); _desc: B then A
    nops = len(cur["ops"])
    for i, (view, lay, mn_major, origin, bits) in enumerate(cur["ops"]):
        steps = tuple(zip(kks, cur["adds"][i::nops]))
        case = _smem_case("BA"[i], view, lay, mn_major, origin, bits, (n, m)[i], mma_k, steps)
        out.smem.setdefault(case, []).append(prog)


def _smem_case(role, view, lay, mn_major, origin, bits, rows, mma_k, steps) -> SmemCase:
    _, const, terms, col0 = origin
    runtime = any(_const(e) is None for e, _ in terms)
    addr = const + sum((_const(e) or 0) * scale for e, scale in terms)
    slot = _const(view.slot) if view.slot is not None else 0
    r0 = _const(view.offsets[0]) if len(view.offsets) == 2 else 0
    runtime = runtime or slot is None or r0 is None
    base = lay.offset + (slot or 0) * lay.slot_bytes
    if mn_major:  # B of row.col: the buffer's rows are K, its columns N
        return SmemCase(role, lay.dtype, "MN", lay.swizzle, lay.cols, lay.rows, rows, mma_k,
                        base, col0, r0 or 0, addr, bits, steps, runtime)
    return SmemCase(role, lay.dtype, "K", lay.swizzle, lay.rows, lay.cols, rows, mma_k, base,
                    r0 or 0, col0, addr, bits, steps, runtime)


# ------------------------------------------------------------------ the C++ program
_PRELUDE = r"""
#include <cstdio>
#include <cstdint>
#include <cute/tensor.hpp>
#include <cute/atom/mma_traits_sm100.hpp>
#include <cute/arch/mma_sm100_desc.hpp>
using namespace cute;

// One MMA's operand slice (k-block kb) of a (BMN, BK) buffer of the canonical layout `Atom`
// tiled over it (K-major: M/N first, the compiler's stripes of all rows; MN-major: K first).
template <class T, UMMA::Major MJ, class Atom, int BMN, int BK, int MMN, int MK>
void smem_case(int id, uintptr_t base, int mn0, int k0, int kb) {
  auto shape = make_shape(Int<BMN>{}, Int<BK>{});
  auto lay = [&] { if constexpr (MJ == UMMA::Major::K) return tile_to_shape(Atom{}, shape);
                   else return tile_to_shape(Atom{}, shape, Step<_2,_1>{}); }();
  Tensor full = make_tensor(make_smem_ptr(reinterpret_cast<T*>(base)), lay);
  Tensor sub = local_tile(full, make_shape(Int<MMN>{}, Int<MK>{}),
                          make_coord(mn0 / MMN, k0 / MK + kb));
  UMMA::SmemDescriptor desc = UMMA::make_umma_desc<MJ>(sub);
  // the device converts this pointer with cast_smem_ptr_to_uint (0 on the host)
  uint32_t start = uint32_t(reinterpret_cast<uintptr_t>(
      raw_pointer_cast(recast<uint128_t const>(sub).data())));
  desc.start_address_ = uint16_t(start >> 4);
  printf("D %d %d %016llx\n", id, kb, (unsigned long long)uint64_t(desc));
  printf("E %d %d", id, kb);
  for (int i = 0; i < MMN; ++i)
    for (int j = 0; j < MK; ++j)
      printf(" %u", unsigned(reinterpret_cast<uintptr_t>(&sub(i, j))));
  printf("\n");
}

template <class A, class B, class C, int M, int N, UMMA::Major AM, UMMA::Major BM>
void instr_case(int id) {
  UMMA::InstrDescriptor d = UMMA::make_instr_desc<A, B, C, M, N, AM, BM>();
  uint64_t runtime = UMMA::make_runtime_instr_desc<A, B, C, M, N, AM, BM>();
  printf("I %d %08x %08x\n", id, uint32_t(d), uint32_t(runtime >> 32));
}
"""


def _atom(c: SmemCase) -> str:
    return f"UMMA::Layout_{c.major}_SW{c.swizzle}_Atom<{CXX_TYPES[c.dtype]}>"


def cpp_source(instr: list, smem: list) -> str:
    """The program for these cases: `smem <id> <base> <mn0> <k0> <kb>` and `instr <id>` on
    stdin, one line each."""
    lines = [_PRELUDE, "int main() {", "  char what[8]; int id;",
             "  while (scanf(\"%7s %d\", what, &id) == 2) {",
             "    if (what[0] == 'i') switch (id) {"]
    for i, c in enumerate(instr):
        t = CXX_TYPES[c.ab_dtype]
        lines.append(f"      case {i}: instr_case<{t}, {t}, {CXX_TYPES[c.d_dtype]}, {c.m}, {c.n}, "
                     f"{MAJOR_CXX[c.a_major]}, {MAJOR_CXX[c.b_major]}>({i}); break;")
    lines += ["    } else {", "      unsigned long base; int mn0, k0, kb;",
              "      if (scanf(\"%lu %d %d %d\", &base, &mn0, &k0, &kb) != 4) return 2;",
              "      switch (id) {"]
    for i, c in enumerate(smem):
        lines.append(f"        case {i}: smem_case<{CXX_TYPES[c.dtype]}, {MAJOR_CXX[c.major]}, "
                     f"{_atom(c)}, {c.buf_mn}, {c.buf_k}, {c.mma_mn}, {c.mma_k}>"
                     f"({i}, base, mn0, k0, kb); break;")
    lines += ["      }", "    }", "  }", "  return 0;", "}", ""]
    return "\n".join(lines)


def run_cute(exe: Path, instr: list, smem: list) -> tuple[dict, dict, dict]:
    """({instr id: (make_instr_desc, make_runtime_instr_desc >> 32)},
    {(smem id, kb): descriptor}, {(smem id, kb): [element address, ...]})."""
    lines = [f"instr {i}" for i in range(len(instr))]
    for i, c in enumerate(smem):
        lines += [f"smem {i} {c.base} {c.mn0} {c.k0} {kb}" for kb, _ in c.steps]
    r = subprocess.run([str(exe)], input="\n".join(lines) + "\n", capture_output=True,
                       text=True, check=True)
    idesc, sdesc, elems = {}, {}, {}
    for line in r.stdout.splitlines():
        f = line.split()
        if f[0] == "I":
            idesc[int(f[1])] = (int(f[2], 16), int(f[3], 16))
        elif f[0] == "D":
            sdesc[int(f[1]), int(f[2])] = int(f[3], 16)
        elif f[0] == "E":
            elems[int(f[1]), int(f[2])] = [int(x) for x in f[3:]]
        # other lines: CuTe's host-side cast_smem_ptr_to_uint complaint (see the docstring)
    return idesc, sdesc, elems


# ------------------------------------------------------------------ comparing
def idesc_fields(v: int) -> dict:
    from choreo_py.lowering.sm100 import descriptors as d
    f = d.decode_instr_desc(v)
    f["reserved"] = (v >> 6 & 1) | (v >> 23 & 1) << 1 | (v >> 29 & 1) << 2
    return f


def smem_fields(v: int) -> dict:
    from choreo_py.lowering.sm100 import descriptors as d
    f = d.decode_smem_desc(v)
    f["bit_48"] = (v >> 48) & 1
    return f


def _diff(what: str, ours: dict, cute: dict, unread=()) -> tuple[list, list]:
    """(differences, differences in fields the MMA does not read for this operand)."""
    bad = [k for k in ours if ours[k] != cute[k]]
    return ([f"{what}: {k} ours={ours[k]} cute={cute[k]}" for k in bad if k not in unread],
            [f"{what}: {k} ours={ours[k]} cute={cute[k]}" for k in bad if k in unread])


def unread_fields(c: "SmemCase") -> tuple:
    """Fields the MMA does not read for this operand slice, where the two encoders may
    write different values and both be right.

    MN-major, swizzled: LBO is the distance between two swizzle atoms along M/N
    ((T,W,m),(8,k)):((1,T,LBO),(WT,SBO)); a slice one atom wide (m = 1: N = 64 bf16 for
    128B) never steps it. CuTe writes the stride of that size-1 mode, 0; we write the
    buffer's stripe distance."""
    if c.major == "MN" and c.mma_mn * ESIZE[c.dtype] <= c.swizzle:
        return ("lbo",)
    return ()


@dataclass
class Result:
    instr: int = 0
    instr_fields: int = 0
    smem: int = 0
    ksteps: int = 0
    smem_fields: int = 0
    elements: int = 0
    emu_fields: int = 0
    diffs: list = field(default_factory=list)
    unread: list = field(default_factory=list)  # differences in fields not read (unread_fields)
    rows: list = field(default_factory=list)


def compare(rec: Recording, exe: Path | None = None) -> Result:
    from choreo_py.emu import sm100_desc as emu
    from choreo_py.lowering.sm100 import descriptors as d

    instr, smem = sorted(rec.instr, key=repr), sorted(rec.smem, key=repr)
    for c in smem:
        if c.mn0 % c.mma_mn or c.k0 % c.mma_k:
            raise RuntimeError(f"{c}: origin not on an MMA tile (local_tile cannot slice it)")
    exe = exe or build(cpp_source(instr, smem))
    cidesc, csdesc, celems = run_cute(exe, instr, smem)
    res = Result()
    for i, c in enumerate(instr):
        cute, runtime = cidesc[i]
        res.diffs += _diff(f"idesc {_name(c)}", idesc_fields(c.ours), idesc_fields(cute))[0]
        if runtime != cute:
            res.diffs.append(f"idesc {_name(c)}: make_runtime_instr_desc {runtime:#x} != "
                             f"make_instr_desc {cute:#x}")
        ed_o, ed_c = emu.decode_instr_desc(c.ours, "f16"), emu.decode_instr_desc(cute, "f16")
        for k in ("m", "n", "a_dtype", "b_dtype", "d_dtype", "a_major", "b_major"):
            res.emu_fields += 1
            if getattr(ed_o, k) != getattr(ed_c, k):
                res.diffs.append(f"emulator's decode of idesc {_name(c)}: {k}")
        res.instr += 1
        res.instr_fields += len(IDESC_FIELDS)
        res.rows.append(("idesc", _name(c), f"{c.ours:#010x}", f"{cute:#010x}",
                         "equal" if c.ours == cute else "DIFFERENT", len(rec.instr[c])))
    for i, c in enumerate(smem):
        bad = 0
        for kb, adv in c.steps:
            ours = d.desc_advance(d.desc_encode(c.origin) | c.bits, adv)
            cute = csdesc[i, kb]
            dd, unread = _diff(f"smem {_sname(c)} k-block {kb}", smem_fields(ours),
                               smem_fields(cute), unread_fields(c))
            res.diffs += dd
            res.unread += unread
            bad += bool(dd)
            res.smem_fields += len(SMEM_FIELDS)
            res.ksteps += 1
            want = celems[i, kb]
            for who, v in (("CuTe's", cute), ("our", ours)):
                got = emu.operand_addresses(emu.decode_smem_desc(v), c.major, c.mma_mn,
                                            c.mma_k, ESIZE[c.dtype]).ravel().tolist()
                miss = [j for j, (a, b) in enumerate(zip(got, want)) if a != b]
                if miss or len(got) != len(want):
                    j = miss[0] if miss else 0
                    res.diffs.append(f"emulator addresses from {who} descriptor, smem "
                                     f"{_sname(c)} k-block {kb}: {len(miss)} differ, first "
                                     f"element ({j // c.mma_k}, {j % c.mma_k}) "
                                     f"emu={got[j]} cute={want[j]}")
            res.elements += len(want)
        res.smem += 1
        res.rows.append(("smem", _sname(c), f"{c.bits:#018x}",
                         f"{len(c.steps)} k-blocks",
                         "DIFFERENT" if bad else "unread" if unread_fields(c) else "equal",
                         len(rec.smem[c])))
    return res


def _name(c: InstrCase) -> str:
    return (f"M{c.m} N{c.n} {c.ab_dtype}->{c.d_dtype} A:{c.a_major}{'(tmem)' * c.a_in_tmem} "
            f"B:{c.b_major}")


def _sname(c: SmemCase) -> str:
    where = "run-time origin" if c.runtime_origin else f"origin ({c.mn0},{c.k0})"
    return (f"{c.role} {c.dtype} {c.major}-major SW{c.swizzle} buffer {c.buf_mn}x{c.buf_k} "
            f"slice {c.mma_mn}x{c.mma_k} {where} @{c.base}")


# ------------------------------------------------------------------ tensor-memory load shapes
#: tcgen05.ld shape -> (CuTe atom name pattern, the .num values CuTe defines)
TMEM_ATOMS = {"32x32b": ("32dp32b{}x", (1, 2, 4, 8, 16, 32, 64, 128)),
              "16x32bx2": ("16dp32b{}x", (1, 2, 4, 8, 16, 32, 64, 128)),
              "16x256b": ("16dp256b{}x", (1, 2, 4, 8, 16, 32))}
#: the accumulator M each shape reads in the compiler (descriptors.LD_SHAPE)
TMEM_M = {"32x32b": 128, "16x32bx2": 64}

_TMEM_PRELUDE = r"""
#include <cstdio>
#include <cstdint>
#include <cute/tensor.hpp>
#include <cute/atom/copy_traits_sm100.hpp>
using namespace cute;

// (lane, 32-bit column) of register r of thread t: the DstLayout gives the logical bit of
// (t, 32 r), the ValID its TMEM bit address (lane * DP_b + bit in the lane's row).
template <class Op>
void atom(const char* shape, int num) {
  using T = Copy_Traits<Op>;
  constexpr int nregs = size<1>(typename T::DstLayout{}) / 32;
  for (int t = 0; t < 32; ++t)
    for (int r = 0; r < nregs; ++r) {
      int64_t a = typename T::ValID{}(typename T::DstLayout{}(t, 32 * r));
      printf("T %s %d %d %d %lld %lld\n", shape, num, t, r, (long long)(a / TMEM::DP_b{}),
             (long long)((a % TMEM::DP_b{}) / 32));
    }
}
int main() {
"""


def tmem_source() -> str:
    body = [f'  atom<SM100_TMEM_LOAD_{pat.format(n)}>("{shape}", {n});'
            for shape, (pat, nums) in TMEM_ATOMS.items() for n in nums]
    return _TMEM_PRELUDE + "\n".join(body) + "\n  return 0;\n}\n"


def run_tmem(exe: Path) -> dict:
    """{(shape, num): {(thread, register): (lane, column)}} from CuTe's atoms."""
    r = subprocess.run([str(exe)], capture_output=True, text=True, check=True)
    out: dict = {}
    for line in r.stdout.splitlines():
        f = line.split()
        if f[0] == "T":
            n, t, reg, lane, col = map(int, f[2:])
            out.setdefault((f[1], n), {})[t, reg] = (lane, col)
    return out


@dataclass
class TmemResult:
    atoms: int = 0
    emu_regs: int = 0          # (thread, register) pairs of the emulator's fragment_map
    ours_regs: int = 0         # ... of descriptors.thread_fragment
    diffs: list = field(default_factory=list)


def compare_tmem(cute: dict) -> TmemResult:
    """The emulator's tcgen05.ld/st model (emu/tmem.fragment_map, .16x32bx2 with CuTe's
    immHalfSplitoff = num) and the lowering's thread_fragment against CuTe's atoms."""
    from choreo_py import targets
    from choreo_py.emu import tmem
    from choreo_py.lowering.sm100 import descriptors as d

    rows = targets.get("sm_100a").acc_rows
    res = TmemResult()
    for (shape, num), cells in sorted(cute.items()):
        res.atoms += 1
        fm = tmem.fragment_map(shape, num, half_split=num if shape == "16x32bx2" else None)
        for (t, r), want in sorted(cells.items()):
            got = (int(fm.lane[t, r]), int(fm.col_lo[t, r]))
            res.emu_regs += 1
            if got != want:
                res.diffs.append(f"emulator .{shape}.x{num} thread {t} register {r}: "
                                 f"(lane, column) {got}, CuTe {want}")
        m = TMEM_M.get(shape)
        if m is None:
            continue
        n = num if m == 128 else 2 * num  # the accumulator's columns one load covers
        for w in range(4):
            for t in range(32):
                frag = d.thread_fragment(m, n, w, t, acc_rows=rows)
                lane = d.acc_lane(m, frag.row) - d.warp_lane_base(w)
                if frag.ncols != num:
                    res.diffs.append(f"thread_fragment M={m} N={n} warp {w} thread {t}: "
                                     f"{frag.ncols} registers, CuTe {num}")
                for r in range(min(frag.ncols, num)):
                    res.ours_regs += 1
                    got = (lane, frag.col_start + r)
                    if got != cells[t, r]:
                        res.diffs.append(f"thread_fragment M={m} N={n} warp {w} thread {t} "
                                         f"register {r}: (lane, column) {got}, CuTe "
                                         f"{cells[t, r]}")
    return res


def synthetic() -> Recording:
    """Cases no program emits yet, from the same builders the lowering calls: every swizzle
    (32B, 64B, 128B) in both majors with the lowering's k-step rule, and instruction
    descriptors over M, N (8, 16, 64, 136, 256), both 16-bit types, both D formats and
    all four major pairs (check_mma_shape's valid shapes only)."""
    from choreo_py.lowering.core.memory import BufLayout
    from choreo_py.lowering.sm100 import descriptors as d, lower_mma as lm

    out = Recording()
    for m in (64, 128):
        for n in (8, 16, 64, 136, 256):
            for ab in ("f16", "bf16"):
                for dd in ("f32", "f16"):
                    for am in ("K", "MN"):
                        for bm in ("K", "MN"):
                            try:
                                v = d.instr_desc_f16(m, n, ab_dtype=ab, d_dtype=dd, a_major=am,
                                                     b_major=bm)
                            except ValueError:
                                continue
                            out.instr[InstrCase(m, n, ab, dd, am, bm, False, v)] = ["synthetic"]
    for swz in (32, 64, 128):
        for mn_major in (False, True):
            for role, rows in (("A", 128), ("B", 64)):
                lay = BufLayout("t", "bf16", 64 if mn_major else rows, rows if mn_major else 64,
                                1, 8192, swz)
                bits = d.smem_desc_bits(swz, mn_major=mn_major, stripe_bytes=lay.stripe_bytes,
                                        row_bytes=lay.row_bytes)
                steps = tuple((kk, kk * lm.MMA_K * lay.row_bytes if mn_major
                               else lm._kmajor_step(lay, 0, kk)) for kk in range(4))
                c = SmemCase(role, "bf16", "MN" if mn_major else "K", swz, rows, 64, rows,
                             lm.MMA_K, lay.offset, 0, 0, lay.offset, bits, steps, False)
                out.smem[c] = ["synthetic"]
    return out


def default_programs(corpus: bool = False) -> list:
    files = sorted(glob.glob(str(ROOT / "examples" / "*.co"))
                   + glob.glob(str(ROOT / "tests" / "co" / "**" / "*.co"), recursive=True))
    if corpus:
        shared = Path(os.environ.get("CHOREO_SHARED", ROOT.parent.parent / "shared"))
        files += sorted(glob.glob(str(shared / "corpus" / "**" / "*.co"), recursive=True))
    return files


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", action="store_true", help="also ../shared/corpus")
    ap.add_argument("--synthetic", action="store_true",
                    help="the builders' cases no program emits instead (synthetic())")
    ap.add_argument("programs", nargs="*", help="programs (default: examples/, tests/co/)")
    a = ap.parse_args(argv)
    rec = synthetic() if a.synthetic else record(a.programs or default_programs(a.corpus))
    try:
        res = compare(rec)
    except Missing as e:
        print(f"skipped: {e}")
        return 0
    print("synthetic cases (synthetic())" if a.synthetic else
          f"{len(rec.programs)} programs issue tcgen05.mma ({len(rec.failed)} others refused "
          f"for sm_100a)")
    print(f"{'what':6} {'case':78} {'ours':>18} {'cute / k-blocks':>18} {'result':9} programs")
    for kind, name, ours, cute, verdict, nprog in res.rows:
        print(f"{kind:6} {name:78} {ours:>18} {cute:>18} {verdict:9} {nprog}")
    print(f"\ninstruction descriptors: {res.instr} cases x {len(IDESC_FIELDS)} fields "
          f"({', '.join(IDESC_FIELDS)}); the emulator's decode: {res.emu_fields} field values")
    print(f"shared-memory descriptors: {res.smem} operand cases, {res.ksteps} k-blocks x "
          f"{len(SMEM_FIELDS)} fields ({', '.join(SMEM_FIELDS)})")
    print(f"element addresses: {res.elements} (every element of each k-block's operand slice), "
          f"the emulator's from CuTe's descriptor and from ours, each against CuTe's layout")
    if res.unread:
        print(f"{len(res.unread)} differences in fields the MMA does not read "
              "(the LBO of an MN-major slice one swizzle atom wide: unread_fields):")
        for line in res.unread:
            print("  " + line)
    print("all equal" if not res.diffs else f"{len(res.diffs)} differences:")
    for line in res.diffs:
        print("  " + line)
    tm = compare_tmem(run_tmem(build(tmem_source())))
    print(f"\ntcgen05.ld shapes: {tm.atoms} CuTe atoms ({', '.join(TMEM_ATOMS)}, every .num "
          f"CuTe defines); (lane, column) of {tm.emu_regs} thread registers against the "
          f"emulator's fragment_map, {tm.ours_regs} against descriptors.thread_fragment "
          f"(warps 0-3)")
    print("all equal" if not tm.diffs else f"{len(tm.diffs)} differences:")
    for line in tm.diffs[:40]:
        print("  " + line)
    return 1 if res.diffs or tm.diffs else 0


if __name__ == "__main__":
    sys.exit(main())
