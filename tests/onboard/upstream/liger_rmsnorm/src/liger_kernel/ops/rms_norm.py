"""RMSNorm, the kernel under optimisation (a CPU stand-in: pure Python rows)."""


def jit(fn):
    """Marks the kernel (kopt's import scan reads `@jit` as kernel code: left editable)."""
    return fn


@jit
def rms_norm(rows, weight, eps=1e-6):
    out = []
    for row in rows:
        ms = sum(v * v for v in row) / len(row)
        inv = 1.0 / (ms + eps) ** 0.5
        out.append([v * inv * w for v, w in zip(row, weight)])
    return out
