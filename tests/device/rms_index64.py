"""On a GPU: the bundled RMSNorm on calls whose offsets pass 2^31 (the masked kernel, 64-bit
index math) and just below (the whole-tile kernel, 32-bit), checked against the reference in chunks at the last rows, where an overflow
would land. python3 tests/device/rms_index64.py (needs ~18 GB of GPU memory)."""

from __future__ import annotations

import torch

from kopt_supervisor.kernels import catalog
from kopt_supervisor.kernels.harness.loader import load_module

sol = load_module(catalog.KERNELS["rmsnorm"].folder / "solution" / "rmsnorm.py", "i64_solution")


def check(rows: int, hd: int) -> None:
    x = torch.randn(rows, hd, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(hd, device="cuda", dtype=torch.bfloat16)
    y = torch.full_like(x, float("nan"))
    sol.rms_norm(x, w, out=y)
    torch.cuda.synchronize()
    meta = sol.launch_meta(sol.PARAMS, sol.class_key(hd), hd, sol.MAX_BLOCK_D, rows=rows)
    whole = sol.whole_tiles(meta, rows, hd)
    worst = 0.0
    for lo in (0, rows // 2, rows - 65536):
        xs = x[lo : lo + 65536].float()
        ref = xs * torch.rsqrt(xs.pow(2).mean(-1, keepdim=True) + 1e-6) * w.float()
        err = ((y[lo : lo + 65536].float() - ref).abs() / (1e-2 + 1.6e-2 * ref.abs())).max().item()
        worst = max(worst, err)
    nan = torch.isnan(y).sum().item()
    print(
        f"rows {rows} hd {hd}: {rows * hd / 2**31:.4f} x 2^31 values, "
        f"{'whole tiles, 32-bit offsets' if whole else 'masked, 64-bit offsets'}, "
        f"worst error {worst:.3f} of tolerance, {nan} NaN"
    )
    assert worst <= 1.0 and nan == 0
    del x, y
    torch.cuda.empty_cache()


if __name__ == "__main__":
    check(2**25 + 64, 64)  # past 2^31 values: the masked kernel, 64-bit offsets
    check(2**25 - 64, 64)  # just under: whole tiles, 32-bit offsets
    check(2**24 + 3, 128)  # past 2^31 with a partial last tile (masked)
    print("ok")
