"""Baseline: RMSNorm over the last dimension with a weight, in PyTorch, as diffusers' RMSNorm
applies it for QK-norm in DiT-style attention (per head over head_dim: FLUX.1, SD3.5,
HunyuanVideo): the mean square in fp32, x * rsqrt(ms + eps) cast back to x's dtype, times
the weight (x's dtype). x [..., head_dim] (e.g. q [B, N, H, head_dim]); weight [head_dim].
`out=` (optional) receives the result and is returned.
"""

from __future__ import annotations

import torch


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6, out: torch.Tensor | None = None) -> torch.Tensor:
    variance = x.to(torch.float32).pow(2).mean(-1, keepdim=True)
    y = (x * torch.rsqrt(variance + eps)).to(x.dtype)
    return torch.mul(y, weight, out=out)
