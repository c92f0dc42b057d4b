"""`trigger e after f` with f an MMA future (docs/reference/events.md, "Publishing an MMA").

examples/gemm_block_commit.co: an MMA role that never waits an MMA. On sm_100a each such
trigger is a tcgen05.commit of the issuing thread to the event slot's mbarrier (one
arrival), and an MMA future no `wait` names has no mbarrier of its own. The interpreter
and the strict emulator (four schedules, two shapes) match torch; ptxas accepts the PTX
with no spills; the emulator reports the race when the commit is a plain arrive or sits
before the MMA it publishes. A warpgroup MMA role (tests/co-free ring below) commits from
its elected thread. tests/co/flash_atten_blackwell_commit.co is the Blackwell attention
with its MMA role written this way: P over S is still proven (tmem_host_loop.py) and it
matches SDPA in the emulator. sm_90a refuses the form by name; a mixed `after` list is a
located error."""
from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
import torch

import choreo_py
from choreo_py import cli
from choreo_py.driver import compile_file
from block_helpers import assert_no_spills, emulate_strict
from test_block_fresh_s import _close, _inputs, _reference

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "gemm_block_commit.co"
FA = ROOT / "tests" / "co" / "flash_atten_blackwell_commit.co"
SHAPES = [(128, 128, 256), (256, 100, 200)]  # one M tile; two, with partial N and K tiles
COMMIT = "tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64"

RING = """\
#define STAGES 2
__co__ void gemm(global bf16[M, K] A, global bf16[N, K] B, global bf16[M, N] C) {
  parallel {tn, tm} by [cdiv(N, 128), cdiv(M, 128)] : block {
    shared bf16[128, 64] a_buf[STAGES];
    shared bf16[128, 64] b_buf[STAGES];
    shared bf16[128, 128] c_buf;
    shared event full[STAGES], empty[STAGES] = ready;
    parallel p by 2 : group-4 {
      inthreads.async (p == 0) {
        mutable u32 order = 0;
        foreach {kt} in [cdiv(K, 64)] {
          slot = order % STAGES;
          wait empty.at(order);
          a_load = tma.load.async.swiz A.subspan(128, 64).at(tm, kt) => a_buf[slot];
          b_load = tma.load.async.swiz B.subspan(128, 64).at(tn, kt) => b_buf[slot];
          trigger full.at(order++) after a_load, b_load;
        }
      }
      inthreads.async (p == 1) {
        mutable u32 order = 0;
        acc = mma.fill.f32 0.0f;
        foreach {kt} in [cdiv(K, 64)] {
          slot = order % STAGES;
          wait full.at(order);
          step = mma.row.row.async acc, a_buf[slot], b_buf[slot];
          trigger empty.at(order++) after step;
          wait step;
        }
        mma.store acc, c_buf;
        tma.copy c_buf => C.subspan(128, 128).at(tm, tn);
      }
    }
  }
}
"""


@pytest.fixture(scope="module")
def ptx() -> str:
    return compile_file(str(EXAMPLE), emit="ptx", target="sm_100a")


def _offsets(ir_text: str) -> dict:
    return {m[0]: int(m[1]) for m in re.findall(r"event ([\w.]+)\[?\d*\]? \w+ arrivals=1 "
                                                r"offset=(\d+)", ir_text)}


def test_the_ir_shows_one_arrival_and_no_mma_barriers():
    text = compile_file(str(EXAMPLE), emit="ir", target="sm_100a")
    for line in ("trigger s_full.at(order) after qk", "trigger empty.at(order) after pv",
                 "trigger o_step.at(order) after pv"):
        assert line in text
    assert set(_offsets(text)) == {"full", "empty", "s_full", "p_full", "o_step"}  # no mma.*
    assert "commit=" not in text


def test_the_mma_role_commits_to_the_events_and_never_waits(ptx):
    offs = _offsets(compile_file(str(EXAMPLE), emit="ir", target="sm_100a"))
    start = ptx.index("setp.eq.u32 %in_role_2")
    role = ptx[start:ptx.index("L_skip_role_1:", start)]
    commits = re.findall(re.escape(COMMIT) + r" \[%(\w+)\+(\d+)\];", role)
    assert [int(o) for _, o in commits] == [offs["s_full"], offs["empty"], offs["o_step"]]
    waited = {int(o) for o in re.findall(r"mbarrier\.try_wait\.parity\.shared\.b64 %\w+, "
                                         r"\[%\w+\+(\d+)\]", role)}
    assert waited == {offs["full"], offs["p_full"]}  # never an MMA's
    assert "is_inst_leader" not in role  # one thread: the issuer commits without election
    reader = ptx[ptx.index("setp.eq.u32 %in_role_3"):]
    wait_s = re.search(r"try_wait\.parity\.shared\.b64 %\w+, \[%smem_base\+" + str(offs["s_full"])
                       + r"\][^\n]*\n[^\n]*\n\s*tcgen05\.fence::after_thread_sync;", reader)
    assert wait_s, "the reader fences after the wait on s_full before its tcgen05.ld"


@pytest.mark.ptxas
def test_ptxas_accepts_it_without_spills(ptx):
    assert_no_spills(ptx)


@pytest.mark.parametrize("shape", SHAPES)
def test_interpreter_matches_torch(shape):
    a, b, c = _inputs(*shape)
    choreo_py.interpret(str(EXAMPLE), dict(A=a, B=b, C=c), target="sm_100a")
    assert _close(c, _reference(a, b))


def test_a_plain_trigger_instead_is_a_race_in_the_interpreter(tmp_path):
    src = EXAMPLE.read_text()
    old = "trigger s_full.at(order) after qk;"
    assert old in src
    path = tmp_path / "v.co"
    path.write_text(src.replace(old, "trigger s_full.at(order);"))
    a, b, c = _inputs(128, 128, 256)
    with pytest.raises(choreo_py.interp.RaceError, match="'s'"):
        choreo_py.interpret(str(path), dict(A=a, B=b, C=c), target="sm_100a")


def test_the_pipeline_check_refuses_a_skipped_generation_of_a_committed_ring(tmp_path, capsys):
    """Waiting only the last o_step: its arrivals are commits, which land when the MMAs
    complete; the parity wait for generation k could pass on generation k - 2 (the
    emulator reported the race before the check knew this)."""
    src = EXAMPLE.read_text()
    old = "          wait o_step.at(order);          // PV(kt - 1) has read P: it may be overwritten\n"
    assert old in src
    path = tmp_path / "v.co"
    path.write_text(src.replace(old, ""))
    assert cli.main(["compile", str(path), "--target", "sm_100a", "-o", str(tmp_path / "x")]) == 1
    assert "v.co:65:9: error: pipeline check: role (r == 2) [r=2] waits o_step[0] generation 2 " \
        "without waiting generation 1 of that slot first" in capsys.readouterr().err


@pytest.mark.emu
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("schedule", ["round_robin", "reverse", "random", "greedy"])
def test_emulator_matches_torch_strict(shape, schedule):
    a, b, c = _inputs(*shape)
    assert emulate_strict(EXAMPLE, dict(A=a, B=b, C=c), schedule) == []
    assert _close(c, _reference(a, b))


def _emulate_edited(edit):
    from choreo_py.emu.api import run_spec
    from choreo_py.emu.launch import from_co
    spec = from_co(str(EXAMPLE), "sm_100a")
    a, b, c = _inputs(128, 128, 256)
    run_spec(dataclasses.replace(spec, ptx=edit(spec.ptx)), dict(A=a, B=b, C=c),
             schedule="round_robin", seed=1, strict=True)


def _s_full_commit(ptx: str) -> str:
    off = _offsets(compile_file(str(EXAMPLE), emit="ir", target="sm_100a"))["s_full"]
    line = f"\t{COMMIT} [%smem_base+{off}];\n"
    assert ptx.count(line) == 1
    return line


@pytest.mark.emu
def test_the_emulator_sees_the_race_of_a_plain_arrive():
    from choreo_py.emu.report import RaceError

    def edit(ptx):
        line = _s_full_commit(ptx)
        arrive = line.replace(COMMIT, "mbarrier.arrive.shared.b64 %rd_x,")
        return ptx.replace(line, arrive).replace("\t.reg .b64 %rd0;\n",
                                                 "\t.reg .b64 %rd0;\n\t.reg .b64 %rd_x;\n", 1)
    with pytest.raises(RaceError, match="tcgen05.ld .* while the tcgen05.mma .* has not "
                                        "completed"):
        _emulate_edited(edit)


@pytest.mark.emu
def test_the_emulator_sees_the_race_of_a_commit_before_its_mma():
    from choreo_py.emu.report import RaceError

    def edit(ptx):
        line = _s_full_commit(ptx)
        first = ptx.index("tcgen05.mma.cta_group::1.kind::f16 [%s_tmem]")
        at = ptx.rindex("\n", 0, first) + 1
        ptx = ptx.replace(line, "")
        return ptx[:at] + line + ptx[at:]
    with pytest.raises(RaceError, match="has not completed"):
        _emulate_edited(edit)


def test_sm90a_refuses_it_by_name(tmp_path, capsys):
    path = tmp_path / "ring.co"
    path.write_text(RING)
    assert cli.main(["compile", str(path), "--target", "sm_90a", "-o", str(tmp_path / "x")]) == 1
    assert "ring.co:26:11: error: 'trigger empty after step' (an MMA future completing an " \
        "event) is not lowered for sm_90a yet; write 'wait step;' and a plain trigger" \
        in capsys.readouterr().err


def test_a_warpgroup_role_commits_from_its_elected_thread(tmp_path):
    path = tmp_path / "ring.co"
    path.write_text(RING)
    ptx = compile_file(str(path), emit="ptx", target="sm_100a")
    elected = re.search(r"@!%is_inst_leader bra (L_committed_\d+);\n\s*" + re.escape(COMMIT)
                        + r" \[%empty_bar_\d+\+\d+\];\n(L_committed_\d+):\n\s*bar\.warp\.sync -1;",
                        ptx)
    assert elected and elected[1] == elected[2], "one elected commit, then the warp reconverges"


def test_a_warpgroup_role_fences_its_shared_writes_before_a_commit(tmp_path):
    """Shared memory the role's threads write after an MMA's issue is fenced into the async
    proxy and the threads meet before the elected thread commits: the event's waiters may
    read the buffer or hand it to the TMA engine."""
    path = tmp_path / "ring.co"
    path.write_text(RING.replace(
        "          step = mma.row.row.async acc, a_buf[slot], b_buf[slot];\n",
        "          two = mma.row.row.async acc2, a_buf[slot], b_buf[slot];\n"
        "          wait two;\n"
        "          step = mma.row.row.async acc, a_buf[slot], b_buf[slot];\n"
        "          mma.store acc2, c_buf;\n").replace(
        "acc = mma.fill.f32 0.0f;", "acc = mma.fill.f32 0.0f;\n        acc2 = mma.fill.f32 0.0f;"))
    ptx = compile_file(str(path), emit="ptx", target="sm_100a")
    commit = ptx.index(COMMIT + " [%empty_bar")
    before_commit = ptx[ptx.rindex("tcgen05.mma", 0, commit):commit]  # after the MMA's issue
    assert "st.shared" in before_commit
    assert "fence.proxy.async.shared::cta;" in before_commit
    assert re.search(r"bar\.sync %inst_bar_\d+, 128;", before_commit)


@pytest.mark.emu
@pytest.mark.parametrize("schedule", ["reverse", "random"])
def test_a_warpgroup_role_matches_torch_in_the_emulator(tmp_path, schedule):
    path = tmp_path / "ring.co"
    path.write_text(RING)
    g = torch.Generator().manual_seed(3)
    a = torch.randn(256, 320, generator=g).to(torch.bfloat16)
    b = torch.randn(128, 320, generator=g).to(torch.bfloat16)
    c = torch.full((256, 128), float("nan")).to(torch.bfloat16)
    assert emulate_strict(path, dict(A=a, B=b, C=c), schedule) == []
    ref = a.float() @ b.float().T
    assert ((c.float() - ref).norm() / ref.norm()).item() < 5e-3


@pytest.mark.parametrize("after", ["a_load, step", "step, a_load"])
def test_a_mixed_after_is_a_located_error(tmp_path, capsys, after):
    src = RING.replace("          wait step;\n", "").replace(
        "trigger empty.at(order++) after step;",
        f"a_load = tma.load.async A.subspan(128, 64).at(tm, kt) => a_buf[slot];\n"
        f"          trigger empty.at(order++) after {after};")
    path = tmp_path / "mixed.co"
    path.write_text(src)
    assert cli.main(["compile", str(path), "-o", str(tmp_path / "x")]) == 1
    err = capsys.readouterr().err
    assert "mixed.co:27:43: error: 'trigger ... after' with both TMA loads and MMA " \
        "futures; write one trigger per kind" in err, err


# -- the Blackwell attention with an MMA role that never waits (tests/co)

def test_the_attention_keeps_p_over_s():
    text = compile_file(str(FA), emit="ir", target="sm_100a")
    assert "tmem p[0]: operand layout=D lanes=0+:128 cols=0+:64 in=s" in text
    assert "trigger s_full.at(order) after qk" in text and "commit=" not in text


@pytest.mark.ptxas
def test_the_attention_assembles_without_spills():
    assert_no_spills(compile_file(str(FA), emit="ptx", target="sm_100a"))


@pytest.mark.emu
def test_the_attention_matches_sdpa_in_the_emulator():
    from fa_helpers import rel
    from test_flash_atten_blackwell import _inputs as fa_inputs, _sdpa
    q, k, v, o = fa_inputs(200, 330)
    assert emulate_strict(FA, dict(Q=q, K=k, V=v, O=o), "random") == []
    assert rel(o, _sdpa(q, k, v)) < 5e-3


# -- the straight-line order proof (tmem_host_order.py): S's last MMA published by a commit

P_OVER_S = ROOT / "examples" / "gemm_block_p_over_s.co"
LOOP = """\
        foreach {kt} in [k_tiles] {
          slot = order % STAGES;
          wait full.at(order);
          qk = mma.row.row.async s, a_buf[slot], b_buf[slot];
          wait qk;
          if (kt + 1 < k_tiles)
            trigger empty.at(order);   // the last B tile stays for P @ B^T
          order++;
        }
        trigger s_full;
"""
LAST_COMMITTED = """\
        foreach {kt} in [k_tiles - 1] {
          slot = order % STAGES;
          wait full.at(order);
          qk = mma.row.row.async s, a_buf[slot], b_buf[slot];
          wait qk;
          trigger empty.at(order++);
        }
        wait full.at(order);
        last = mma.row.row.async s, a_buf[order % STAGES], b_buf[order % STAGES];
        order++;
        trigger s_full after last;
"""


def _p_over_s(tmp_path, publish: str) -> Path:
    src = P_OVER_S.read_text()
    assert LOOP in src
    path = tmp_path / "v.co"
    path.write_text(src.replace(LOOP, LAST_COMMITTED.replace("trigger s_full after last;\n",
                                                             publish)))
    return path


@pytest.mark.emu
def test_p_over_s_after_a_committed_mma_matches_torch(tmp_path):
    from test_tmem_host import _close as p_over_s_close, _inputs as p_over_s_inputs
    path = _p_over_s(tmp_path, "trigger s_full after last;\n")
    assert "tmem p[0]: operand layout=D lanes=0+:128 cols=0+:64 in=s" in \
        compile_file(str(path), emit="ir", target="sm_100a")
    for run in ("interpreter", "emulator"):
        a, b, c = p_over_s_inputs(256, 96, 384)
        if run == "interpreter":
            choreo_py.interpret(str(path), dict(A=a, B=b, C=c), target="sm_100a")
        else:
            assert emulate_strict(path, dict(A=a, B=b, C=c), "random") == []
        assert p_over_s_close(c, a, b), run


def test_p_over_s_after_a_plain_trigger_before_the_wait_is_refused(tmp_path, capsys):
    path = _p_over_s(tmp_path, "trigger s_full;\n        wait last;\n")
    assert cli.main(["compile", str(path), "--target", "sm_100a", "-o", str(tmp_path / "x")]) == 1
    assert "v.co:25:23: error: 'p' cannot lie in the columns of 's': line 49 touches 's' and " \
        "is not provably ordered before 'p' is written at line 61" in capsys.readouterr().err
