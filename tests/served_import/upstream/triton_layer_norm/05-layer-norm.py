"""
Layer Normalization
===================
A stand-in for Triton's tutorial python/tutorials/05-layer-norm.py (MIT licence: LICENSE
beside this file), written for kopt's tests: the same bench as upstream runs it (SOURCE.md says
what is reproduced, what differs, and the CPU patch, each line of it marked "CPU patch").
No upstream code is copied.
"""

import time

import torch
import triton
import triton.language as tl

try:
    DEVICE = triton.runtime.driver.active.get_active_torch_device()
except RuntimeError:  # CPU patch: Triton's interpreter (TRITON_INTERPRET=1) has no active driver
    DEVICE = torch.device("cpu")
CPU = DEVICE.type == "cpu"  # CPU patch


@triton.jit
def _ln_forward(X, Y, W, B, Mean, Rstd, row_stride, N, eps, BLOCK: tl.constexpr):
    # one program per row: mean, 1/std, then the affine map of the normalised row
    r = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    keep = offs < N
    x = tl.load(X + r * row_stride + offs, mask=keep, other=0.0).to(tl.float32)
    mu = tl.sum(x, axis=0) / N
    centred = tl.where(keep, x - mu, 0.0)
    inv = 1.0 / tl.sqrt(tl.sum(centred * centred, axis=0) / N + eps)
    tl.store(Mean + r, mu)
    tl.store(Rstd + r, inv)
    w = tl.load(W + offs, mask=keep, other=0.0).to(tl.float32)
    b = tl.load(B + offs, mask=keep, other=0.0).to(tl.float32)
    tl.store(Y + r * row_stride + offs, (centred * inv * w + b).to(Y.dtype.element_ty), mask=keep)


@triton.jit
def _ln_backward_dx(DX, DY, X, W, Mean, Rstd, PartW, PartB, row_stride, N, BLOCK: tl.constexpr):
    # one program per row: dx, and the row's share of dw and db (summed over rows afterwards)
    r = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    keep = offs < N
    x = tl.load(X + r * row_stride + offs, mask=keep, other=0.0).to(tl.float32)
    dy = tl.load(DY + r * row_stride + offs, mask=keep, other=0.0).to(tl.float32)
    w = tl.load(W + offs, mask=keep, other=0.0).to(tl.float32)
    inv = tl.load(Rstd + r)
    xhat = tl.where(keep, (x - tl.load(Mean + r)) * inv, 0.0)
    g = tl.where(keep, w * dy, 0.0)
    dx = (g - xhat * (tl.sum(xhat * g, axis=0) / N) - tl.sum(g, axis=0) / N) * inv
    tl.store(DX + r * row_stride + offs, dx.to(DX.dtype.element_ty), mask=keep)
    tl.store(PartW + r * N + offs, dy * xhat, mask=keep)
    tl.store(PartB + r * N + offs, dy, mask=keep)


@triton.jit
def _column_sums(Part, Out, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    # Out[c] = sum over the M rows of Part[:, c]
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros((BLOCK_N, ), dtype=tl.float32)
    for start in range(0, M, BLOCK_M):
        rows = start + tl.arange(0, BLOCK_M)
        inside = (rows[:, None] < M) & (cols[None, :] < N)
        acc += tl.sum(tl.load(Part + rows[:, None] * N + cols[None, :], mask=inside, other=0.0), axis=0)
    tl.store(Out + cols, acc.to(Out.dtype.element_ty), mask=cols < N)


class LayerNorm(torch.autograd.Function):

    @staticmethod
    def forward(ctx, x, normalized_shape, weight, bias, eps):
        rows = x.reshape(-1, x.shape[-1])
        M, N = rows.shape
        BLOCK = triton.next_power_of_2(N)
        if BLOCK * x.element_size() > 65536:
            raise RuntimeError("This layer norm doesn't support feature dim >= 64KB.")
        y = torch.empty_like(x)
        mean = torch.empty((M, ), dtype=torch.float32, device=x.device)
        rstd = torch.empty((M, ), dtype=torch.float32, device=x.device)
        warps = min(max(BLOCK // 256, 1), 8)
        _ln_forward[(M, )](rows, y, weight, bias, mean, rstd, rows.stride(0), N, eps, BLOCK=BLOCK, num_warps=warps)
        ctx.save_for_backward(x, weight, mean, rstd)
        ctx.block, ctx.warps = BLOCK, warps
        return y

    @staticmethod
    def backward(ctx, dy):
        x, weight, mean, rstd = ctx.saved_tensors
        rows = x.reshape(-1, x.shape[-1])
        M, N = rows.shape
        dy = dy.contiguous()
        dx = torch.empty_like(dy)
        part_w = torch.empty((M, N), dtype=torch.float32, device=x.device)
        part_b = torch.empty((M, N), dtype=torch.float32, device=x.device)
        _ln_backward_dx[(M, )](dx, dy, rows, weight, mean, rstd, part_w, part_b, rows.stride(0), N, BLOCK=ctx.block,
                               num_warps=ctx.warps)
        dw = torch.empty_like(weight)
        db = torch.empty_like(weight)
        grid = (triton.cdiv(N, 128), )
        _column_sums[grid](part_w, dw, M, N, BLOCK_M=32, BLOCK_N=128)
        _column_sums[grid](part_b, db, M, N, BLOCK_M=32, BLOCK_N=128)
        return dx, None, dw, db, None


layer_norm = LayerNorm.apply


def test_layer_norm(M, N, dtype, eps=1e-5, device=DEVICE):
    # the bench's own check: forward and all three gradients against torch
    w_shape = (N, )
    weight = torch.rand(w_shape, dtype=dtype, device=device, requires_grad=True)
    bias = torch.rand(w_shape, dtype=dtype, device=device, requires_grad=True)
    x = -2.3 + 0.5 * torch.randn((M, N), dtype=dtype, device=device)
    dy = .1 * torch.randn_like(x)
    x.requires_grad_(True)
    y_tri = layer_norm(x, w_shape, weight, bias, eps)
    y_ref = torch.nn.functional.layer_norm(x, w_shape, weight, bias, eps).to(dtype)
    y_tri.backward(dy, retain_graph=True)
    dx_tri, dw_tri, db_tri = [t.grad.clone() for t in (x, weight, bias)]
    x.grad, weight.grad, bias.grad = None, None, None
    y_ref.backward(dy, retain_graph=True)
    dx_ref, dw_ref, db_ref = [t.grad.clone() for t in (x, weight, bias)]
    for got, want in ((y_tri, y_ref), (dx_tri, dx_ref), (db_tri, db_ref), (dw_tri, dw_ref)):
        assert torch.allclose(got, want, atol=1e-2, rtol=0)


if CPU:  # CPU patch: triton.testing.do_bench needs a GPU driver; the same time budget, by the wall clock

    def _do_bench_cpu(fn, warmup=25, rep=100, grad_to_none=None, quantiles=None, return_mode="mean"):
        fn()
        t0 = time.perf_counter()
        fn()
        estimate_ms = max((time.perf_counter() - t0) * 1e3, 1e-3)
        for _ in range(max(1, int(warmup / estimate_ms))):
            fn()
        times = []
        for _ in range(max(1, int(rep / estimate_ms))):
            if grad_to_none is not None:
                for t in grad_to_none:
                    t.grad = None
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e3)
        if quantiles is not None:
            return torch.quantile(torch.tensor(times), torch.tensor(quantiles, dtype=torch.float32)).tolist()
        return {"mean": sum(times) / len(times), "median": sorted(times)[len(times) // 2], "min": min(times),
                "max": max(times), "all": times}[return_mode]

    triton.testing.do_bench = _do_bench_cpu


@triton.testing.perf_report(
    triton.testing.Benchmark(
        x_names=['N'],
        x_vals=[512 * i for i in range(2, 32)] if not CPU else [64, 96, 160],  # CPU patch: sizes
        line_arg='provider',
        line_vals=['triton', 'torch'],
        line_names=['Triton', 'Torch'],
        styles=[('blue', '-'), ('green', '-')],
        ylabel='GB/s',
        plot_name='layer-norm-backward',
        args={'M': 4096 if not CPU else 8, 'dtype': torch.float16, 'mode': 'backward'},  # CPU patch: M
    ))
def bench_layer_norm(M, N, dtype, provider, mode='backward', eps=1e-5, device=DEVICE):
    w_shape = (N, )
    weight = torch.rand(w_shape, dtype=dtype, device=device, requires_grad=True)
    bias = torch.rand(w_shape, dtype=dtype, device=device, requires_grad=True)
    x = -2.3 + 0.5 * torch.randn((M, N), dtype=dtype, device=device)
    dy = .1 * torch.randn_like(x)
    x.requires_grad_(True)
    quantiles = [0.5, 0.2, 0.8]

    def y_fwd():
        if provider == "triton":
            return layer_norm(x, w_shape, weight, bias, eps)
        if provider == "torch":
            return torch.nn.functional.layer_norm(x, w_shape, weight, bias, eps)

    if mode == 'forward':
        gbps = lambda ms: 2 * x.numel() * x.element_size() * 1e-9 / (ms * 1e-3)  # noqa: E731
        ms, min_ms, max_ms = triton.testing.do_bench(y_fwd, quantiles=quantiles, rep=500)
    if mode == 'backward':
        y = y_fwd()
        gbps = lambda ms: 3 * x.numel() * x.element_size() * 1e-9 / (ms * 1e-3)  # noqa: E731
        ms, min_ms, max_ms = triton.testing.do_bench(lambda: y.backward(dy, retain_graph=True), quantiles=quantiles,
                                                     grad_to_none=[x], rep=500)
    return gbps(ms), gbps(max_ms), gbps(min_ms)


test_layer_norm(*((1151, 8192) if not CPU else (7, 96)), torch.float16)  # CPU patch: shape
bench_layer_norm.run(save_path='.', print_data=True)
