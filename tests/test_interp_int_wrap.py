"""Integer lanes wrap to their type's width (found by bench/difftest.py, seeds 13270 and
21619: the interpreter alone differed from both targets' PTX and the generator's
reference). The interpreter holds an integer of a thread's lanes as an int64 tensor; `~`,
unary `-` and the binary operators on such tensors were left unwrapped where the scalar
rule wraps (c_scalars), so `~4000000000u` was -4000000001 instead of 294967295u, and a
u32 chain `v2 -= (v2 | 7u)` went negative. The expected values are C's, worked out in
the comments."""
from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

NOT_OF_SELECT = """__co__ void k(global f32[N] XF, global f32[N] YF) {
  parallel {b} by [cdiv(N, 32)] : block {
    parallel t by 32 : thread {
      n = b * 32 + t;
      mutable f32 v1 = 0.0f;
      if ((n < N)) {
        mutable v2 = (65536u << 4u);
        v1 += __to<f32>((~((XF.at(n) >= v1) ? v2 : 4000000000u)));
        YF.at(n) = v1;
      }
    }
  }
}
"""

SEED_13270 = """__co__ void k(global s32[N] XI, global f32[N] XF, global s32[N] YI, global f32[N] YF, global f16[N] YH) {
  parallel {b} by [cdiv(N, 256)] : block {
    shared f32[256] shf;
    parallel g by 2 : group-4 {
      parallel t by 128 : thread {
        tid = ((g * 128) + t);
        n = b * 256 + tid;
        if ((2u <= __max(3u, 255u))) {
          mutable f16 v1 = __to<f16>((-2.5f));
        }
        mutable u32 v2 = (((t < n) ? 0u : 1u) | __min(__max(0u, 255u), (3u & 2u)));
        foreach {i3} in [2] {
          v2 %= ((~1000u) | 1u);
          mutable v4 = (__max(0.3f, (0.001f * 7.25f)) + __to<f32>(i3));
          v2 -= __min(v2, v2);
          v2 -= (v2 | 7u);
        }
        if ((n < N)) {
          YF.at(n) = __log((__fabs(((0.25f - XF.at(n)) * (-1.0f))) + 1.0f));
          v2 %= ((v2 * v2) | 1u);
        }
        f32 v5 = __to<f32>((((t & 1023) << 1) & (~b)));
        shf.at(tid) = v5;
        sync.shared;
        f32 v6 = ((v5 * v5) * (__fabs(XF.at((n % N))) * v5));
        if ((n < N)) {
          foreach {i7} in [1] {
            f16 v8 = __to<f16>(__to<f32>((__to<f16>(XF.at(((n + 13) % N))) - __to<f16>(v6))));
            s32 v9 = ((i7 >> 0) >> 3);
          }
          YI.at(n) = (XI.at(n) - t);
          mutable s32 w10 = 0;
          while (w10 < ((n % 2) + 0)) {
            w10 = w10 + 1;
            v11 = (v6 + (__to<f32>(v2) - XF.at(((n + 1) % N))));
            foreach {i12} in [5] {
              mutable bf16 v13 = __to<bf16>(__to<f32>(((-__to<bf16>(v6)) + __to<bf16>(v6))));
            }
            if ((n < N)) {
              v2 %= (__max((v2 + v2), v2) | 1u);
              mutable s32 v14 = (-(((w10 & 1023) << 0) % (((__to<f16>(1.0f) < __to<f16>((-1.0f))) ? b : w10) | 1)));
              f16 v15 = __to<f16>(__to<f32>((__to<f16>(shf.at(((tid + 255) % 256))) * __to<f16>(0.75f))));
            }
            v2 = (__max(((3u != v2) ? v2 : v2), v2) + (v2 >> 0u));
          }
        }
        if ((n < N)) {
          YI.at(n) = (((n | t) ^ b) ^ 0);
          YF.at(n) = __sqrt((__fabs(__to<f32>(v2)) + 1.0f));
          YH.at(n) = __to<f16>(__to<f32>(__to<bf16>(__to<f32>((__to<bf16>(XF.at(n)) - __to<bf16>(100.0f))))));
        }
      }
    }
  }
}
"""


def _run(tmp_path, src, *args):
    from choreo_py.interp.api import program

    path = tmp_path / "k.co"
    path.write_text(src)
    program(str(path), function="k")(*args)


def test_not_of_an_unsigned_select_wraps(tmp_path):
    # XF >= 0: ~(65536u << 4u) = ~1048576u = 4294967295 - 1048576 = 4293918719 -> f32
    # 4293918720; XF < 0: ~4000000000u = 294967295 -> f32 294967296
    xf, yf = torch.tensor([1.0, -1.0] * 16), torch.zeros(32)
    _run(tmp_path, NOT_OF_SELECT, xf, yf)
    want = torch.tensor([4293918720.0, 294967296.0] * 16)
    assert torch.equal(yf, want), yf[:4]


def test_an_unsigned_chain_in_loops_wraps(tmp_path):
    # v2 starts at 2 or 3; in the foreach: v2 -= v2 (0), v2 -= (0 | 7) = 2^32 - 7, then
    # % 0xFFFFFC17 = 994, -= 994, -= 7: 2^32 - 7 again; after it v2 %= (v2 * v2 | 1) =
    # (49 | 1) = 49: 4294967289 % 49 = 32. A query with n odd runs the while once:
    # v2 %= (max(64, 32) | 1) = 32, then v2 = 32 + 32 = 64. YF = sqrt(v2 + 1).
    n = 512
    xi = torch.zeros(n, dtype=torch.int32)
    xf = torch.linspace(-2, 2, n)
    yi, yf, yh = torch.zeros(n, dtype=torch.int32), torch.zeros(n), torch.zeros(n).half()
    _run(tmp_path, SEED_13270, xi, xf, yi, yf, yh)
    want = torch.tensor([math.sqrt(33.0), math.sqrt(65.0)] * (n // 2), dtype=torch.float32)
    assert torch.equal(yf, want), yf[:4]
