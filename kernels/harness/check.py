"""The correctness contract's checks, shared by every bundled kernel.

A kernel's contract (its contract.py) says what to compare; these functions do it:
- outputs are poisoned with NaN before each run (an `out=` buffer filled with NaN, and on a
  GPU the caching allocator's next block of that size too), so an element the kernel never
  writes fails instead of keeping a correct value from an earlier run;
- explicit NaN/Inf count in the output;
- the error is max |got - ref| / (atol + rtol * |ref|) against an fp64 reference: a run
  passes when it is <= 1 (the `err` column; inf when any element is NaN/Inf);
- inputs must be left unchanged, the result must have the reference's shape and the input's
  dtype and device, and with `out=` the result must be that buffer.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class CheckResult:
    err: float
    """max |got - ref| / (atol + rtol |ref|); inf when an element is NaN/Inf or unwritten."""
    nonfinite: int
    reason: str = ""

    @property
    def ok(self) -> bool:
        return self.err <= 1.0 and not self.reason


def error_ratio(torch: Any, got: Any, ref: Any, atol: float, rtol: float) -> tuple[float, int]:
    """(normalised max error, number of NaN/Inf elements) of `got` against fp64 `ref`."""
    g = got.to(torch.float64)
    nonfinite = int((~torch.isfinite(g)).sum().item())
    if nonfinite:
        return math.inf, nonfinite
    ratio = (g - ref).abs() / (atol + rtol * ref.abs())
    return float(ratio.max().item()) if ratio.numel() else 0.0, 0


def poison_allocator(torch: Any, like: Any) -> None:
    """On a GPU, fill a freed block of the output's size with NaN so that the caching
    allocator hands NaNs to the kernel's own output allocation."""
    if like.device.type == "cuda":
        t = torch.empty_like(like)
        t.fill_(math.nan)
        del t


def check_call(torch: Any, fn: Callable[..., Any], args: tuple, kwargs: dict[str, Any], ref: Any,
               atol: float, rtol: float, *, poison: bool = True) -> CheckResult:
    """Run fn twice (into a NaN-filled `out=` buffer, then allocating its own output after
    the allocator was poisoned) and compare both results with `ref`."""
    dtype = args[0].dtype
    before = [a.clone() for a in args if hasattr(a, "clone")]
    out = torch.empty(ref.shape, dtype=dtype, device=args[0].device)
    if poison:
        out.fill_(math.nan)
    got = fn(*args, **kwargs, out=out)
    if got is None or got.data_ptr() != out.data_ptr():
        return CheckResult(math.inf, 0, "with out=, the result is not the out buffer")
    err, bad = error_ratio(torch, got, ref, atol, rtol)
    if poison:
        poison_allocator(torch, out)
    del out, got
    got2 = fn(*args, **kwargs)
    if tuple(got2.shape) != tuple(ref.shape) or got2.dtype != dtype or got2.device != args[0].device:
        return CheckResult(math.inf, bad, f"result {tuple(got2.shape)} {got2.dtype} on {got2.device}, "
                                          f"expected {tuple(ref.shape)} {dtype} on {args[0].device}")
    err2, bad2 = error_ratio(torch, got2, ref, atol, rtol)
    after = [a for a in args if hasattr(a, "clone")]
    if any(not torch.equal(a, b) for a, b in zip(after, before, strict=True)):
        return CheckResult(math.inf, bad + bad2, "the kernel modified an input")
    return CheckResult(max(err, err2), bad + bad2)
