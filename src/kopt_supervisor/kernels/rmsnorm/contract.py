"""RMSNorm for QK-norm: the correctness contract, the shapes, and how inputs are made.

Contract (checked by harness/check.py for every shape and dtype the bench runs):
- against an fp64 reference x * rsqrt(mean(x^2) + eps) * weight from the same (rounded)
  inputs: max |y - ref| / (atol + rtol * |ref|) <= 1 with TOLERANCE[dtype] (the baseline
  rounds twice: after the normalisation and after the weight);
- no NaN/Inf in the output; outputs poisoned with NaN before each run (an unwritten element
  fails); inputs unchanged; result shape/dtype/device as x's; fresh random inputs each run
  (rows with their own spread, a weight around 1, never zeros).

Shapes (q [B, N, H, hd], weight [hd]): 1024x1024 images give 4096 latent patches (VAE /8,
patch 2); video tokens are latent frames x (H/16) x (W/16), latent frames (F - 1)/4 + 1.
B = 2 where classifier-free guidance batches two passes; FLUX.1-dev is guidance-distilled.
Wan2.1 is not here: its QK-norm normalises over the whole hidden size, not per head.
"""

from __future__ import annotations

from typing import Any

from kopt_supervisor.kernels.harness.shapes import REGRESSION, SMALL, Shape

NAME = "rmsnorm"
FUNC = "rms_norm"
DTYPES = ("bfloat16", "float16")
CONFIG = ["shape", "B", "N", "H", "hd", "dtype", "esize", "dclass"]
CLASS_BY = ["dclass"]
TOLERANCE = {"bfloat16": (1e-2, 1.6e-2), "float16": (1e-3, 2e-3)}
"""dtype -> (atol, rtol)."""
EPS = 1e-6

SHAPES = [
    Shape(
        "flux1-dev-joint-1024",
        "FLUX.1-dev 1024px joint attention: 4096 image + 512 text tokens, 24 heads x 128",
        {"B": 1, "N": 4608, "H": 24, "hd": 128},
    ),
    Shape(
        "sd35-large-1024", "SD3.5 Large 1024px image stream, 38 heads x 64, CFG", {"B": 2, "N": 4096, "H": 38, "hd": 64}
    ),
    Shape(
        "sd35-medium-1024",
        "SD3.5 Medium 1024px image stream, 24 heads x 64, CFG",
        {"B": 2, "N": 4096, "H": 24, "hd": 64},
    ),
    Shape(
        "hunyuanvideo-720p",
        "HunyuanVideo 1280x720, 129 frames: 33 x 45 x 80 tokens, 24 heads x 128",
        {"B": 1, "N": 118800, "H": 24, "hd": 128},
    ),
    Shape("one-row", "regression: a single row", {"B": 1, "N": 1, "H": 1, "hd": 128}, REGRESSION),
    Shape(
        "hd-72",
        "regression: non-power-of-two head_dim (PixArt-alpha's 72)",
        {"B": 1, "N": 333, "H": 5, "hd": 72},
        REGRESSION,
    ),
    Shape("hd-100", "regression: odd head_dim, odd token count", {"B": 2, "N": 77, "H": 3, "hd": 100}, REGRESSION),
    Shape("hd-40", "regression: short narrow rows", {"B": 1, "N": 1001, "H": 7, "hd": 40}, REGRESSION),
    Shape(
        "long-20000",
        "regression: very long rows (chunked even at BLOCK_D = 0)",
        {"B": 1, "N": 4, "H": 1, "hd": 20000},
        REGRESSION,
    ),
    Shape("cpu-64", "CPU interpreter: narrow", {"B": 1, "N": 2, "H": 2, "hd": 64}, SMALL),
    Shape("cpu-48", "CPU interpreter: narrow, non-power-of-two", {"B": 1, "N": 3, "H": 1, "hd": 48}, SMALL),
    Shape("cpu-128", "CPU interpreter: wide", {"B": 1, "N": 1, "H": 2, "hd": 128}, SMALL),
]


def dclass(dims: dict[str, Any]) -> str:
    return "narrow" if dims["hd"] <= 64 else "wide"


def columns(shape: Shape, dtype: str, esize: int) -> dict[str, Any]:
    """The CSV's config columns for one shape and dtype."""
    return {"shape": shape.name, **shape.dims, "dtype": dtype, "esize": esize, "dclass": dclass(shape.dims)}


def class_args(dims: dict[str, Any]) -> tuple:
    """The arguments of the solution's class_key() for these dims."""
    return (dims["hd"],)


def make_inputs(torch: Any, dims: dict[str, Any], dtype: Any, device: str, gen: Any) -> tuple[tuple, dict]:
    """Fresh random q (each row its own spread) and a weight around 1."""
    B, N, H, hd = dims["B"], dims["N"], dims["H"], dims["hd"]

    def randn(*shape: int) -> Any:
        return torch.randn(*shape, generator=gen, device=device, dtype=torch.float32)

    x = randn(B, N, H, hd) * (0.25 + 2 * randn(B, N, H, 1).abs())
    weight = 1.0 + 0.2 * randn(hd)
    return (x.to(dtype), weight.to(dtype)), {"eps": EPS}


def reference(torch: Any, args: tuple, kwargs: dict[str, Any]) -> Any:
    x, w = (a.to(torch.float64) for a in args)
    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + kwargs["eps"]) * w
