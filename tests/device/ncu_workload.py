"""A tiny, known GPU workload for the ncu capture (tests/device/capture_ncu.sh).

Per "call": one kopt_capture_add_kernel launch and two kopt_capture_scale_kernel launches
on 1 Mi float32 elements. `--calls 7` therefore launches the add kernel 7 times and the
scale kernel 14 times; the capture's expectation file states exactly that.
"""

from __future__ import annotations

import argparse

import torch
import triton
import triton.language as tl


@triton.jit
def kopt_capture_add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(
        out_ptr + offs,
        tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask),
        mask=mask,
    )


@triton.jit
def kopt_capture_scale_kernel(x_ptr, out_ptr, n, alpha, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * alpha, mask=mask)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=7)
    ap.add_argument("--n", type=int, default=1 << 20)
    args = ap.parse_args()
    n, block = args.n, 1024
    x = torch.arange(n, device="cuda", dtype=torch.float32)
    y = torch.full_like(x, 2.0)
    out = torch.empty_like(x)
    grid = (triton.cdiv(n, block),)
    for _ in range(args.calls):
        kopt_capture_add_kernel[grid](x, y, out, n, BLOCK=block)
        kopt_capture_scale_kernel[grid](out, y, n, 0.5, BLOCK=block)
        kopt_capture_scale_kernel[grid](y, out, n, 2.0, BLOCK=block)
    torch.cuda.synchronize()
    print(f"ncu_workload: {args.calls} calls done, out[1] = {out[1].item()}")


if __name__ == "__main__":
    main()
