"""A CPU stand-in for Liger-Kernel's benchmark/scripts/benchmark_rms_norm.py, written for kopt's
tests: a torch RMSNorm ("huggingface") and a tiny Triton forward kernel ("liger", run by
Triton's interpreter on the CPU; its backward in torch), benchmarked as upstream's `__main__`
block does: one run_benchmarks call for speed, one for memory (other x values: a memory
config served by mistake would show)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl
from utils import (
    SingleBenchmarkRunInput,
    build_memory_bench_fn,
    build_speed_bench_fn,
    parse_benchmark_script_args,
    run_benchmarks,
)

device = "cuda" if torch.cuda.is_available() else "cpu"


@triton.jit
def _rms_norm_fwd(X, W, Y, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(X + row * N + cols, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(W + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / N + eps)
    tl.store(Y + row * N + cols, x * rstd * w, mask=mask)


class _RMSNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w, eps):
        y = torch.empty_like(x)
        M, N = x.shape
        _rms_norm_fwd[(M,)](x, w, y, N, eps, BLOCK=triton.next_power_of_2(N))
        ctx.save_for_backward(x, w)
        ctx.eps = eps
        return y

    @staticmethod
    def backward(ctx, dy):
        x, w = ctx.saved_tensors
        with torch.enable_grad():
            xd = x.detach().requires_grad_(True)
            y = xd * torch.rsqrt(xd.pow(2).mean(-1, keepdim=True) + ctx.eps) * w
            (dx,) = torch.autograd.grad(y, xd, dy)
        return dx, None, None


class LigerRMSNorm(nn.Module):
    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.eps = eps

    def forward(self, x):
        return _RMSNorm.apply(x, self.weight, self.eps)


class LlamaRMSNorm(nn.Module):
    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        return self.weight * (hidden_states * torch.rsqrt(variance + self.variance_epsilon))


def setup_rms_norm(input: SingleBenchmarkRunInput):
    cfg = input.extra_benchmark_config
    x = torch.randn(input.x, cfg["hidden_size"], device=device, dtype=cfg["dtype"], requires_grad=True)
    if input.kernel_provider == "liger":
        layer = LigerRMSNorm(hidden_size=cfg["hidden_size"], eps=cfg["eps"]).to(device)
    elif input.kernel_provider == "huggingface":
        layer = LlamaRMSNorm(hidden_size=cfg["hidden_size"], eps=cfg["eps"]).to(device)
    else:
        raise ValueError(f"Invalid provider: {input.kernel_provider} for RMSNorm")
    return x, layer


if __name__ == "__main__":
    args = parse_benchmark_script_args()
    common_configs = {
        "kernel_name": "rms_norm",
        "x_name": "T",
        "x_label": "tokens",
        "kernel_providers": ["huggingface", "liger"],
        "extra_benchmark_configs": [{"hidden_size": 48, "dtype": torch.float32, "eps": 1e-6}],
        "overwrite": args.overwrite,
    }
    run_benchmarks(
        bench_test_fn=build_speed_bench_fn(setup_rms_norm),
        kernel_operation_modes=["forward", "full"],
        metric_name="speed",
        metric_unit="ms",
        x_values=[4, 8],
        **common_configs,
    )
    run_benchmarks(
        bench_test_fn=build_memory_bench_fn(setup_rms_norm),
        kernel_operation_modes=["full"],
        metric_name="memory",
        metric_unit="MB",
        x_values=[16],
        **common_configs,
    )
