"""Calibration of the PTX emulator against the H200: same PTX, same inputs, both outputs.

    python bench/emu_calibrate.py --gpu tests/data/emu_h200     # on the H200: run and save
    python bench/emu_calibrate.py [--data tests/data/emu_h200]  # anywhere: emulate and compare

Each sm_90a example (causal seed, persistent, non-causal, GEMM) runs on
fixed inputs made on the CPU with a seeded torch generator. The GPU step
runs the compiled kernel through `choreo_py.load` and saves, per case,
one .pt file with the inputs and the GPU's output (small shapes: the
files stay well under 2 MB in all, so they can be committed and checked
in CI). The CPU step runs the same PTX in the emulator on the saved
inputs and reports, per case: elements bit-identical to the GPU's, the
largest difference (absolute, and in bf16 ulps of the element), the
relative error ||emu - gpu|| / ||gpu||, and how far each is from a
float64 reference (which of the two is closer shows whether a difference
is the emulator's model of ex2.approx/rcp.approx and of the tensor core's
accumulation, or something else). Exit 1 if any case differs by more than
TOLERANCE (relative) - a modelling error rather than rounding.
"""
from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

TOLERANCE = 4e-3
CASES = {  # name: (file, defines, shapes)
    "causal": ("examples/flash_atten_causal.co", None, dict(B=1, H=2, S=192)),
    "persistent": ("examples/flash_atten_persistent.co", {"NUM_SMS": "2"}, dict(B=1, H=2, S=192)),
    "noncausal": ("examples/flash_atten.co", None, dict(B=1, H=1, S=256)),
    "gemm": ("examples/gemm.co", None, dict(M=192, N=256, K=128)),
}


def inputs(name: str) -> dict:
    """The case's inputs (CPU, seeded); outputs start as NaN."""
    g = torch.Generator().manual_seed(20260 + sorted(CASES).index(name))
    _, _, d = CASES[name]
    if name == "gemm":
        a = torch.randn(d["M"], d["K"], generator=g).bfloat16()
        b = torch.randn(d["N"], d["K"], generator=g).bfloat16()
        return dict(A=a, B=b, C=torch.full((d["M"], d["N"]), float("nan")).bfloat16())
    q, k, v = (torch.randn(d["B"], d["S"], d["H"], 128, generator=g).bfloat16() for _ in range(3))
    return dict(Q=q, K=k, V=v, O=torch.full_like(q, float("nan")))


def output_name(name: str) -> str:
    return "C" if name == "gemm" else "O"


def reference(name: str, t: dict) -> torch.Tensor:
    if name == "gemm":
        return t["A"].double() @ t["B"].double().T
    q, k, v = (t[x].double().transpose(1, 2) for x in "QKV")
    causal = name != "noncausal"
    o = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return o.transpose(1, 2)


def gpu(outdir: str) -> int:
    import choreo_py

    os.makedirs(outdir, exist_ok=True)
    total = 0
    for name, (path, defines, _) in CASES.items():
        fn = choreo_py.load(str(ROOT / path), target="sm_90a", defines=defines)
        t = inputs(name)
        dev = {k: v.cuda() for k, v in t.items()}
        fn(*dev.values())
        torch.cuda.synchronize()
        saved = {k: v for k, v in t.items() if k != output_name(name)}
        saved["gpu_" + output_name(name)] = dev[output_name(name)].cpu()
        saved["device"] = torch.cuda.get_device_name()
        file = os.path.join(outdir, f"{name}.pt")
        torch.save(saved, file)
        total += os.path.getsize(file)
        print(f"{name}: saved {file} ({os.path.getsize(file)} bytes)")
    print(f"total {total} bytes")
    return 0


def ulps(diff: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
    """|diff| in units of the bf16 spacing at |ref|."""
    mag = ref.abs().clamp_min(2.0 ** -126)
    spacing = torch.exp2(torch.floor(torch.log2(mag)) - 7)
    return diff.abs() / spacing


def compare(name: str, data: dict, schedule: str = "round_robin") -> dict:
    from choreo_py.emu.api import emulate

    path, defines, _ = CASES[name]
    out = output_name(name)
    t = {k: v for k, v in data.items() if not k.startswith("gpu_") and k != "device"}
    t[out] = torch.full_like(data["gpu_" + out], float("nan"))
    emulate(str(ROOT / path), t, target="sm_90a", defines=defines, schedule=schedule)
    emu, hw = t[out].double(), data["gpu_" + out].double()
    ref = reference(name, t)
    diff = emu - hw
    same = int((t[out].view(torch.int16) == data["gpu_" + out].view(torch.int16)).sum())
    return {"case": name, "device": data.get("device", "?"), "elements": emu.numel(),
            "identical": same, "max_abs": diff.abs().max().item(),
            "max_ulps": ulps(diff, hw).max().item(),
            "rel": (diff.norm() / hw.norm()).item(),
            "emu_vs_ref": ((emu - ref).norm() / ref.norm()).item(),
            "gpu_vs_ref": ((hw - ref).norm() / ref.norm()).item()}


def cpu(datadir: str) -> int:
    rows = []
    for name in CASES:
        file = os.path.join(datadir, f"{name}.pt")
        if not os.path.isfile(file):
            print(f"{name}: no GPU data ({file}); run `python bench/emu_calibrate.py --gpu "
                  f"{datadir}` on the H200 first")
            continue
        rows.append(compare(name, torch.load(file)))
    if not rows:
        return 1
    print(f"| case | device | bit-identical | max abs diff | max diff (bf16 ulps) | rel. diff "
          f"| emu vs fp64 | GPU vs fp64 |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['case']} | {r['device']} | {r['identical']}/{r['elements']} "
              f"({100 * r['identical'] / r['elements']:.2f}%) | {r['max_abs']:.3e} | "
              f"{r['max_ulps']:.0f} | {r['rel']:.2e} | {r['emu_vs_ref']:.2e} | "
              f"{r['gpu_vs_ref']:.2e} |")
    bad = [r["case"] for r in rows if not math.isfinite(r["rel"]) or r["rel"] > TOLERANCE]
    if bad:
        print(f"differs by more than {TOLERANCE} (relative): {', '.join(bad)}")
        return 1
    return 0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpu", metavar="OUTDIR", help="run on the GPU and save inputs + outputs")
    ap.add_argument("--data", default=str(ROOT / "tests/data/emu_h200"),
                    help="where the GPU step saved its files (CPU mode)")
    args = ap.parse_args()
    return gpu(args.gpu) if args.gpu else cpu(args.data)


if __name__ == "__main__":
    sys.exit(main())
