"""bench/model_measure.py without a GPU: its shapes are accepted by the compiled
kernels, and its whole measuring flow runs on the CPU with stand-ins for the
kernels (torch's own results), the timers and the clock sampler."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
torch = pytest.importorskip("torch")
import model_measure as mm  # noqa: E402


def test_dry_run_accepts_every_shape(capsys):
    assert mm.dry_run() == 0
    out = capsys.readouterr().out
    assert out.count("accepted") == len([c for c in mm.cases() if c["kernel"] in mm.KERNELS])
    assert "REFUSED" not in out


def test_a_shape_the_seed_refuses_is_reported():
    fn = mm.kernel("seed")
    with pytest.raises(Exception, match="Q_SEQ must equal KV_SEQ"):
        fn.check_assertions({"B": 1, "H": 1, "Q_SEQ": 128, "KV_SEQ": 256})


def _fake_kernel(name):
    """torch's result in place of the compiled kernel (correct, or off by 10% when asked)."""
    def attn(q, k, v, o):
        causal = name != "noncausal"
        o.copy_(mm.attention_ref_heads(q, k, v, causal, list(range(q.shape[2]))))
        if name == "persistent":
            o.mul_(1.1)  # a wrong kernel: must fail its check and not be timed

    def gemm(a, bt, c):
        c.copy_(a.float() @ bt.float().T)
    return gemm if name == "gemm" else attn


class _Sampler:
    def window(self, t0, t1):
        return {"sm_mhz": 1500.0}

    def stop(self):
        pass


def test_measure_flow_on_the_cpu(monkeypatch, tmp_path):
    monkeypatch.setattr(mm, "DEVICE", "cpu")
    monkeypatch.setattr(mm, "ATTN_ROWS", [(1, 2, 128, True)])
    monkeypatch.setattr(mm, "DIAG_ROWS", [])
    monkeypatch.setattr(mm, "NONCAUSAL_ROWS", [(1, 2, 256, False)])
    monkeypatch.setattr(mm, "GEMM_SHAPES", [(128, 256, 64)])
    monkeypatch.setattr(mm, "kernel", _fake_kernel)
    monkeypatch.setattr(mm, "ClockSampler", _Sampler)
    monkeypatch.setattr(mm, "warm_up", lambda: None)
    def fake_time(method, fn, case, row):
        if method == "burst" and case["kernel"] == "cublas":
            raise RuntimeError("a timing that fails")
        return [1.0, 2.0, 3.0]
    monkeypatch.setattr(mm, "time_method", fake_time)
    monkeypatch.setattr(mm, "smi", lambda q: "")

    class Props:
        multi_processor_count = 132
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: Props())
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "cpu stand-in")
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)
    out = tmp_path / "m.json"
    monkeypatch.setattr(sys, "argv", ["model_measure.py", "--out", str(out)])
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    rc = mm.main()
    rows = {r["label"]: r for r in json.loads(out.read_text())["rows"]}
    assert rc == 1  # the wrong stand-in fails its check
    assert not rows["persistent B=1 H=2 S=128 causal"]["check"]["ok"]
    assert rows["persistent B=1 H=2 S=128 causal"]["times"] == {}
    for label in ("seed B=1 H=2 S=128 causal", "noncausal B=1 H=2 S=256 non-causal",
                  "gemm M=128 N=256 K=64", "cublas M=128 N=256 K=64"):
        r = rows[label]
        assert r["check"]["ok"] and r["check"]["rel_err"] < 1e-2, label
        assert set(r["times"]) == set(mm.METHODS)
        assert r["ms"] == 2.0 and r["times"]["sustained"]["clocks"]["sm_mhz"] == 1500.0
        assert r["tflops"] == pytest.approx(r["flops"] / 2.0 / 1e9)
    assert "a timing that fails" in rows["cublas M=128 N=256 K=64"]["times"]["burst"]["error"]
    assert rows["gemm M=128 N=256 K=64"]["times"]["burst"]["ms"] == 2.0


def test_clock_samples_are_parsed_and_windowed():
    import io

    s = mm.ClockSampler.__new__(mm.ClockSampler)
    s.samples, s.fields = [], mm.ClockSampler.FIELDS

    class Proc:
        stdout = io.StringIO("1410, 2619, 688.10, 61, 0x0000000000000004\n"
                             "1395, 2619, [N/A], 62, 0x0000000000000004\nnot, a, line\n")
    s.proc = Proc()
    s._read()
    assert [x[1] for x in s.samples] == [1410.0, 1395.0] and s.samples[1][3] is None
    w = s.window(0, 1e12)
    assert w["n"] == 2 and w["sm_mhz_min"] == 1395.0 and w["power_w"] == 688.1
    assert w["throttle"] == ["0x0000000000000004"]
