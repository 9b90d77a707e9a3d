"""Baseline: adaLN modulation in PyTorch, as DiT-style models write it.

y = LayerNorm(x) * (1 + scale[:, None]) + shift[:, None], LayerNorm without affine weights
(FLUX.1, SD3/SD3.5, PixArt-alpha, Wan2.1 all use elementwise_affine=False, eps=1e-6 here).
x [B, N, D]; scale, shift [B, D]; the result has x's shape and dtype. `out=` (optional)
receives the result, as in torch's own out= arguments; it is returned.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def adaln_modulate(
    x: torch.Tensor, scale: torch.Tensor, shift: torch.Tensor, eps: float = 1e-6, out: torch.Tensor | None = None
) -> torch.Tensor:
    y = F.layer_norm(x, (x.shape[-1],), eps=eps) * (1 + scale[:, None, :])
    return torch.add(y, shift[:, None, :], out=out)
