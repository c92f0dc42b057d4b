"""Decode attention over a paged KV cache on an H100/H200: examples/flash_atten_decode.co
(split-KV, the LSE combine) beside FlashAttention-4's paged interface (`--fa4`, where
flash_attn.cute imports: `flash_attn_varlen_func(..., seqused_k=, page_table=)`, its own
split heuristic) and torch (the pages gathered through the block table, then SDPA with a
length mask, GQA).

    python3 bench/attention_decode.py [--fa4] [--only 'B=1,page 16'] [--out FILE]

The rows are bench/attention_family.py's DECODE_ROWS. Every implementation's output is
checked first against tests/attn_decode_ref.py (a relative error over 2e-2 leaves it
untimed, logged). Timing as bench/attention_family.py's: "graph" (CUDA-graph replay,
median) and "events" (per-call CUDA events, median); ours is both launches (split and
combine) into partials allocated once. GB/s counts the K and V bytes the step must read
(every sequence's keys, H_KV heads, K and V) plus Q and O, over the time.
"""
from __future__ import annotations

import argparse
import datetime
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))
sys.path.insert(0, os.path.join(ROOT, "examples"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from attention_family import DECODE_ROWS, DecodeRow  # noqa: E402

CHECK_TOL = 2e-2
LABELS = ["choreo-py decode", "flash-attn-4", "torch (gather + SDPA)"]


def log(msg: str = "") -> None:
    print(msg, flush=True)


def lens(r: DecodeRow) -> list[int]:
    """Each sequence's keys: all `kv`, or (mixed) kv - i * kv // (2 b), minus 7 so that the
    last page is partial."""
    if not r.mixed:
        return [r.kv - 7] * r.b
    return [r.kv - i * r.kv // (2 * r.b) - 7 for i in range(r.b)]


def bytes_moved(r: DecodeRow) -> int:
    kv = sum(lens(r)) * r.hkv * r.d * 2 * 2
    return kv + 2 * r.b * r.qlen * r.h * r.d * 2


def tensors(r: DecodeRow, device="cuda"):
    from attn_decode_ref import paged_inputs

    return paged_inputs(lens(r), r.page, r.h, r.hkv, r.d, r.qlen, spare_pages=1,
                        poison=False, device=device)


def ours(r: DecodeRow, q, k, v, table, seqlens):
    """Both kernels of the program, into partials allocated here once."""
    import torch
    import flash_atten_decode as fad

    lib = fad.programs(tuple(sorted(fad.defines(q, k, False).items())), q.device.type,
                       "sm_90a" if q.is_cuda else None)
    splits = fad.num_splits(r.b, r.hkv, table.shape[1] * r.page, r.page)
    o_part, l_part = fad.partials(splits, r.b, r.qlen, r.h, r.hkv, r.d, q.device)
    out = torch.empty(r.b, r.qlen, r.h, r.d, dtype=torch.bfloat16, device=q.device)

    def fn():
        lib.decode_split(q, k, v, table, seqlens, o_part, l_part)
        lib.decode_combine(o_part, l_part, out)
        return out
    log(f"  choreo-py decode: {splits} split(s), {o_part.shape[0]} partials")
    return [("choreo-py decode", fn)]


def fa4(r: DecodeRow, q, k, v, table, seqlens):
    """FlashAttention-4's paged KV: its varlen entry with seqused_k and page_table."""
    import inspect

    from flash_attn.cute import flash_attn_varlen_func

    if "page_table" not in inspect.signature(flash_attn_varlen_func).parameters:
        raise RuntimeError("this flash_attn.cute has no page_table argument")
    import torch

    # 0: its own split heuristic; its sm_90 path asserts "SplitKV not supported on SM 9.0"
    # whenever that heuristic splits (4.0.0b36), so on Hopper it runs unsplit.
    splits = 1 if torch.cuda.get_device_capability(q.device)[0] == 9 else 0

    def fn():
        got = flash_attn_varlen_func(q, k, v, seqused_k=seqlens, page_table=table,
                                     causal=r.qlen > 1, num_splits=splits)
        return got[0] if isinstance(got, tuple) else got
    return [("flash-attn-4", fn)]


def torch_gather(r: DecodeRow, q, k, v, table, seqlens):
    """What torch alone does: gather every sequence's pages (the table's width), mask the
    keys past its length (and a token's later ones), SDPA with GQA."""
    import torch
    import torch.nn.functional as F

    keys = table.shape[1] * r.page
    pos = (seqlens[:, None] - r.qlen + torch.arange(r.qlen, device=q.device))  # [B, Q]
    mask = torch.arange(keys, device=q.device)[None, None, :] <= pos[:, :, None]
    mask = mask[:, None]  # [B, 1, Q, keys]

    def fn():
        kk = k[table.long()].reshape(r.b, keys, r.hkv, r.d).transpose(1, 2)
        vv = v[table.long()].reshape(r.b, keys, r.hkv, r.d).transpose(1, 2)
        o = F.scaled_dot_product_attention(q.transpose(1, 2), kk, vv, attn_mask=mask,
                                           enable_gqa=True)
        return o.transpose(1, 2)
    return [("torch (gather + SDPA)", fn)]


def check(ref_o, out) -> float:
    return float((out.float() - ref_o).norm() / ref_o.norm())


def time_row(r: DecodeRow, use_fa4: bool) -> dict:
    import torch
    from attn_decode_ref import paged_attention
    from timing import event_times, graph_times

    q, k, v, table, seqlens = tensors(r)
    ref_o, _ = paged_attention(q, k, v, table, seqlens)
    impls = ours(r, q, k, v, table, seqlens) + torch_gather(r, q, k, v, table, seqlens)
    if use_fa4:
        try:
            impls += fa4(r, q, k, v, table, seqlens)
        except Exception as err:  # noqa: BLE001 - report and carry on
            log(f"  flash-attn-4: not available: {err!r}"[:300])
    row: dict = {}
    nbytes = bytes_moved(r)
    for label, fn in impls:
        try:
            got = fn()
            torch.cuda.synchronize()
            err = check(ref_o, got)
            log(f"  {label:22s} rel. error {err:.2e}")
            if not err < CHECK_TOL:
                row[label] = {"error": err}
                continue
            g, e = graph_times(fn, 20)[5], event_times(fn, 10, 50)[25]
            row[label] = {"error": err, "us": g * 1e3, "graph": nbytes / g / 1e6,
                          "events": nbytes / e / 1e6}
            log(f"  {label:22s} {g * 1e3:.1f} us; graph {row[label]['graph']:.0f} / events "
                f"{row[label]['events']:.0f} GB/s")
        except Exception as err:  # noqa: BLE001 - report and carry on
            row[label] = {"failed": f"{err!r}"[:200]}
            log(f"  {label:22s} ERROR {err!r}"[:300])
    del q, k, v, table, seqlens, ref_o
    torch.cuda.empty_cache()
    return row


def cell(c) -> str:
    if not c:
        return "n/a"
    if "failed" in c:
        return "failed"
    if "graph" not in c:
        return f"wrong ({c['error']:.1e})"
    return f"{c['us']:.1f} us, {c['graph']:.0f} / {c['events']:.0f}"


def table(results: list, header: list[str]) -> list[str]:
    lines = ["| row | " + " | ".join(LABELS) + " |", "|---|" + "---|" * len(LABELS)]
    for r, row in results:
        lines.append(f"| {r.label} | " + " | ".join(cell(row.get(x)) for x in LABELS) + " |")
    return header + [""] + lines + [""]


def write(path: str, results: list, command: str, gpu: str) -> None:
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    header = ["# Decode over a paged KV cache: examples/flash_atten_decode.co", "",
              f"- GPU: {gpu}; {date}", f"- command: `{command}`",
              "- time a step (graph), GB/s of K, V, Q and O (graph / events); "
              "bench/attention_decode.py"]
    lines = table(results, header)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("\n".join(lines))
    log("\n".join(lines))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fa4", action="store_true", help="also time flash_attn.cute's paged KV")
    ap.add_argument("--only", default="", help="comma-separated parts of row labels")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "RESULTS_decode.md"))
    args = ap.parse_args(argv)
    import torch

    results = []
    for r in DECODE_ROWS:
        if args.only and not any(x in r.label for x in args.only.split(",")):
            continue
        log(f"[decode] {r.label}")
        results.append((r, time_row(r, args.fa4)))
    command = "python3 bench/attention_decode.py " + " ".join(sys.argv[1:] if argv is None
                                                              else argv)
    write(args.out, results, command.strip(), torch.cuda.get_device_name())


if __name__ == "__main__":
    main()
