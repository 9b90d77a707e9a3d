"""adaLN modulation: the correctness contract, the shapes, and how inputs are made.

Contract (checked by harness/check.py for every shape and dtype the bench runs):
- against an fp64 reference of LayerNorm(x) * (1 + scale) + shift computed from the same
  (rounded) inputs: max |y - ref| / (atol + rtol * |ref|) <= 1 with TOLERANCE[dtype]
  (the baseline's own bf16/fp16 arithmetic fits inside it: it rounds after the norm, after
  the multiply and after the add, and the add of shift can cancel);
- no NaN/Inf anywhere in the output; outputs poisoned with NaN before each run (an unwritten
  element fails); inputs unchanged; result shape/dtype/device as x's; fresh random inputs
  each run (rows with their own offset and spread, never zeros).

Shapes (x [B, N, D], scale/shift [B, D]): tokens for 1024x1024 images are (1024/8/2)^2 =
4096 latent patches (VAE /8, patch 2); video tokens are frames' x (H/8/2) x (W/8/2) with
(F - 1)/4 + 1 latent frames (VAE /4 in time, patch 1). B = 2 where classifier-free guidance
batches the conditional and unconditional pass; FLUX.1-dev is guidance-distilled (B = 1).
"""

from __future__ import annotations

from typing import Any

from kopt_supervisor.kernels.harness.shapes import REGRESSION, SMALL, Shape

NAME = "adaln"
FUNC = "adaln_modulate"
DTYPES = ("bfloat16", "float16")
CONFIG = ["shape", "B", "N", "D", "dtype", "esize", "dclass"]
CLASS_BY = ["dclass"]
TOLERANCE = {"bfloat16": (3e-2, 2e-2), "float16": (4e-3, 3e-3)}
"""dtype -> (atol, rtol)."""
EPS = 1e-6

SHAPES = [
    Shape(
        "pixart-alpha-1024", "PixArt-alpha 1024px (hidden 1152 = 16 x 72), CFG batch", {"B": 2, "N": 4096, "D": 1152}
    ),
    Shape(
        "sd35-medium-1024",
        "SD3 / SD3.5 Medium 1024px image stream (hidden 1536 = 24 x 64), CFG",
        {"B": 2, "N": 4096, "D": 1536},
    ),
    Shape(
        "sd35-large-1024",
        "SD3.5 Large 1024px image stream (hidden 2432 = 38 x 64), CFG",
        {"B": 2, "N": 4096, "D": 2432},
    ),
    Shape(
        "flux1-dev-img-1024",
        "FLUX.1-dev 1024px double-stream image tokens (hidden 3072)",
        {"B": 1, "N": 4096, "D": 3072},
    ),
    Shape(
        "flux1-dev-joint-1024",
        "FLUX.1-dev 1024px single-stream, 4096 image + 512 text tokens",
        {"B": 1, "N": 4608, "D": 3072},
    ),
    Shape(
        "wan21-14b-720p",
        "Wan2.1 14B 1280x720, 81 frames: 21 x 45 x 80 tokens (hidden 5120)",
        {"B": 1, "N": 75600, "D": 5120},
    ),
    Shape("one-row", "regression: a single row", {"B": 1, "N": 1, "D": 3072}, REGRESSION),
    Shape("odd-1000", "regression: non-power-of-two D, 3 batches", {"B": 3, "N": 77, "D": 1000}, REGRESSION),
    Shape(
        "prime-2053", "regression: prime D just above the narrow/wide edge", {"B": 1, "N": 1031, "D": 2053}, REGRESSION
    ),
    Shape("tiny-40", "regression: a very short row", {"B": 2, "N": 333, "D": 40}, REGRESSION),
    Shape(
        "long-65536",
        "regression: very long rows (chunked even at BLOCK_D = 0)",
        {"B": 2, "N": 8, "D": 65536},
        REGRESSION,
    ),
    Shape("cpu-96", "CPU interpreter: narrow, 2 batches", {"B": 2, "N": 1, "D": 96}, SMALL),
    Shape("cpu-600", "CPU interpreter: narrow, non-power-of-two", {"B": 1, "N": 2, "D": 600}, SMALL),
    Shape("cpu-2100", "CPU interpreter: wide", {"B": 1, "N": 1, "D": 2100}, SMALL),
]


def dclass(dims: dict[str, Any]) -> str:
    return "narrow" if dims["D"] <= 2048 else "wide"


def columns(shape: Shape, dtype: str, esize: int) -> dict[str, Any]:
    """The CSV's config columns for one shape and dtype."""
    return {"shape": shape.name, **shape.dims, "dtype": dtype, "esize": esize, "dclass": dclass(shape.dims)}


def class_args(dims: dict[str, Any]) -> tuple:
    """The arguments of the solution's class_key() for these dims."""
    return (dims["D"],)


def make_inputs(torch: Any, dims: dict[str, Any], dtype: Any, device: str, gen: Any) -> tuple[tuple, dict]:
    """Fresh random x, scale, shift: each row of x has its own offset and spread."""
    B, N, D = dims["B"], dims["N"], dims["D"]

    def randn(*shape: int) -> Any:
        return torch.randn(*shape, generator=gen, device=device, dtype=torch.float32)

    x = randn(B, N, D) * (0.5 + randn(B, N, 1).abs()) + randn(B, N, 1)
    scale = 0.5 * randn(B, D)
    shift = 0.5 * randn(B, D)
    return (x.to(dtype), scale.to(dtype), shift.to(dtype)), {"eps": EPS}


def reference(torch: Any, args: tuple, kwargs: dict[str, Any]) -> Any:
    x, scale, shift = (a.to(torch.float64) for a in args)
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + kwargs["eps"]) * (1 + scale[:, None, :]) + shift[:, None, :]
