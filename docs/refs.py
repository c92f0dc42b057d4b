"""Python references for the guide's programs (`choreo run ... --ref docs/refs.py:NAME`).

Each function takes the kernel's input parameters as float32 CPU tensors (keyword
arguments) and returns the expected output tensor."""


def vadd(A, B):
    return A + B


def copy(A):
    return A


def double(X):
    return 2 * X


def plus_one(X):
    return X + 1


def gemm_relu(A, B):
    return (A @ B.T).relu()


def scores_minus_row_max(A, B):
    s = A @ B.T
    return s - s.amax(dim=1, keepdim=True)



def row_softmax(A, B):
    return (A @ B.T).softmax(dim=1)


def gemm_block_scaled(A, SA, B, SB, BK=64, BN=128):
    """reference/mma.md's block-scaled GEMM: each BK-wide K block's product scaled by its row
    scale SA[m, kb] and its BN-wide tile's scale SB[n // BN, kb]."""
    out = A.new_zeros(A.shape[0], B.shape[0])
    for kb in range(A.shape[1] // BK):
        part = A[:, kb * BK:(kb + 1) * BK] @ B[:, kb * BK:(kb + 1) * BK].T
        out += part * SA[:, kb:kb + 1] * SB[:, kb].repeat_interleave(BN)[None, :B.shape[0]]
    return out


def gemm_rescaled_rows(A, B, BK=64, BN=128):
    """gemm_block_acc_rescale.co: after each K step's MMA, every row of each BN-wide tile
    is divided by max(its largest element, 1)."""
    out = A.new_zeros(A.shape[0], B.shape[0])
    for k0 in range(0, A.shape[1], BK):
        out += A[:, k0:k0 + BK] @ B[:, k0:k0 + BK].T
        for n0 in range(0, out.shape[1], BN):
            t = out[:, n0:n0 + BN]
            t /= t.amax(dim=1, keepdim=True).clamp(min=1)
    return out


def gemm_cond_rescaled_rows(A, B, BK=64, BN=128, threshold=8.0):
    """gemm_block_acc_cond_rescale.co: after each K step's MMA, the rows of each BN-wide
    tile whose largest element exceeds `threshold` are divided by it; the others stay."""
    out = A.new_zeros(A.shape[0], B.shape[0])
    for k0 in range(0, A.shape[1], BK):
        out += A[:, k0:k0 + BK] @ B[:, k0:k0 + BK].T
        for n0 in range(0, out.shape[1], BN):
            t = out[:, n0:n0 + BN]
            big = t.amax(dim=1, keepdim=True)
            t.copy_(t.where(big <= threshold, t / big))
    return out


def gemm_block_p(A, B, BK=128, BN=128):
    """gemm_block_p.co: per K step S += A_k B_k^T, P = bf16(S / 16), O += P B_k^T (B padded
    to BN rows, each K step to BK columns, as the TMA loads are)."""
    import torch
    m, k = A.shape
    kp = -(-k // BK) * BK
    a = A.new_zeros(m, kp)
    a[:, :k] = A
    b = B.new_zeros(BN, kp)
    b[:B.shape[0], :k] = B
    s = A.new_zeros(m, BN)
    o = A.new_zeros(m, BN)
    for k0 in range(0, kp, BK):
        s += a[:, k0:k0 + BK] @ b[:, k0:k0 + BK].T
        o += (s * 0.0625).to(torch.bfloat16).float() @ b[:, k0:k0 + BK].T
    return o[:, :B.shape[0]]


def gemm_block_p_over_s(A, B, BK=128, BN=128):
    """gemm_block_p_over_s.co: S = A B^T over every K step, P = bf16(S / 16),
    O = P B_last^T with the last K step's B tile (B padded to BN rows, K to BK)."""
    import torch
    m, k = A.shape
    kp = -(-k // BK) * BK
    a = A.new_zeros(m, kp)
    a[:, :k] = A
    b = B.new_zeros(BN, kp)
    b[:B.shape[0], :k] = B
    s = a @ b.T
    o = (s * 0.0625).to(torch.bfloat16).float() @ b[:, kp - BK:].T
    return o[:, :B.shape[0]]


def gemm_block_fresh_s(A, B, BK=128, BN=128):
    """gemm_block_fresh_s.co: per K step S = A_k B_k^T (this step's alone), P = bf16(S / 16),
    O += P B_k^T (B padded to BN rows, each K step to BK columns, as the TMA loads are)."""
    import torch
    m, k = A.shape
    kp = -(-k // BK) * BK
    a = A.new_zeros(m, kp)
    a[:, :k] = A
    b = B.new_zeros(BN, kp)
    b[:B.shape[0], :k] = B
    o = A.new_zeros(m, BN)
    for k0 in range(0, kp, BK):
        s = a[:, k0:k0 + BK] @ b[:, k0:k0 + BK].T
        o += (s * 0.0625).to(torch.bfloat16).float() @ b[:, k0:k0 + BK].T
    return o[:, :B.shape[0]]


def loops(X):
    """reference/statements.md's loops.co: four of the while loop's passes add X, the
    foreach over j = 1, 3, 5, 7 adds 4."""
    return 4 * X + 4


def types(X):
    """reference/types.md's types.co: H = 3 X (in f16), S = 10 X truncated toward zero."""
    return {"H": 3 * X, "S": (X * 10).trunc()}


def precedence(X):
    """reference/expressions.md's precedence.co: `&` binds tighter than `+` and prefix `-`."""
    x = X.long()
    return {"Y": ((x & 3) + 1).float(), "Z": (-(x & 1)).float()}


def operators(X):
    """reference/expressions.md's operators.co, with C's meaning of each operator."""
    import torch
    x = X.long()
    a = (x << 2) | (x & 3)
    b = torch.where(torch.remainder(x, 5) == 0, -x, x ^ 1)
    c = (~x) >> 1
    return (a + b + (c & 255) + (x > 0).long()).float()


def math_fns(X):
    """reference/expressions.md's math.co."""
    import torch
    r = torch.rsqrt(X.abs() + 1)
    return r * X.clamp(min=0) + torch.exp2(-X * X)


def c_division(X):
    """reference/expressions.md's division.co: C's integer division and remainder, which
    truncate toward zero (torch's `%` floors, `fmod` truncates)."""
    import torch
    x = X.long()
    n = torch.arange(X.shape[0])
    q = torch.div(x, 3, rounding_mode="trunc")
    return {"Y": (torch.fmod(x, 3) + q + 16 + 2).float(), "Z": n + 0.5}


def _masked_softmax(A, B, bottom_right=False, window=0):
    """softmax(mask(A @ B^T)) by rows, for reference/masks.md: query q (a row of A) sees
    keys 0..q, shifted right by the key count minus the query count when the mask is
    aligned bottom-right, and only the `window` keys up to its own when window > 0."""
    import torch
    s = A @ B.T
    q = torch.arange(s.shape[0])[:, None] + (s.shape[1] - s.shape[0] if bottom_right else 0)
    k = torch.arange(s.shape[1])[None, :]
    masked = k > q
    if window:
        masked = masked | (k + window <= q)
    return s.masked_fill(masked, float("-inf")).softmax(dim=1)


def causal_top_left(A, B):
    return _masked_softmax(A, B)


def causal_bottom_right(A, B):
    return _masked_softmax(A, B, bottom_right=True)


def window_32_bottom_right(A, B):
    return _masked_softmax(A, B, bottom_right=True, window=32)
