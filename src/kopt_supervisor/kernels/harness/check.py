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


def poison_allocator(torch: Any, shape: Any, dtype: Any, device: Any) -> None:
    """On a GPU, fill a freed block of the output's size with NaN so that the caching
    allocator hands NaNs to the kernel's own output allocation."""
    if getattr(device, "type", str(device)) == "cuda":
        t = torch.empty(shape, dtype=dtype, device=device)
        t.fill_(math.nan)
        del t


def check_call(
    torch: Any,
    fn: Callable[..., Any],
    args: tuple,
    kwargs: dict[str, Any],
    ref: Any,
    atol: float,
    rtol: float,
    *,
    poison: bool = True,
    out: str | None = "out",
    same_dtype: bool = True,
) -> CheckResult:
    """Run fn twice (into a NaN-filled buffer passed as keyword `out`, then allocating its own
    output after the allocator was poisoned) and compare both results with `ref`. With
    out=None the function has no output keyword: it runs once, allocating its own output
    after the allocator was poisoned. The result must have the reference's shape, the first
    tensor input's dtype (unless same_dtype is False) and its device."""
    first = next((a for a in args if hasattr(a, "dtype") and hasattr(a, "device")), None)
    dtype = first.dtype if first is not None else ref.dtype
    device = first.device if first is not None else ref.device
    before = [a.clone() for a in args if hasattr(a, "clone")]
    err, bad = 0.0, 0
    if out is not None:
        buf = torch.empty(ref.shape, dtype=dtype, device=device)
        if poison:
            buf.fill_(math.nan)
        got = fn(*args, **kwargs, **{out: buf})
        if got is None or got.data_ptr() != buf.data_ptr():
            return CheckResult(math.inf, 0, f"with {out}=, the result is not the {out} buffer")
        err, bad = error_ratio(torch, got, ref, atol, rtol)
        del got
        if poison:  # the block the allocator may hand back next holds NaN, not this run's result
            buf.fill_(math.nan)
        del buf
    if poison:
        poison_allocator(torch, ref.shape, dtype, device)
    got2 = fn(*args, **kwargs)
    if not hasattr(got2, "shape") or not hasattr(got2, "dtype"):
        return CheckResult(math.inf, bad, f"the result is {type(got2).__name__}, not a tensor")
    if tuple(got2.shape) != tuple(ref.shape) or (same_dtype and got2.dtype != dtype) or got2.device != device:
        return CheckResult(
            math.inf,
            bad,
            f"result {tuple(got2.shape)} {got2.dtype} on {got2.device}, "
            f"expected {tuple(ref.shape)} {dtype if same_dtype else ''} on {device}",
        )
    err2, bad2 = error_ratio(torch, got2, ref, atol, rtol)
    after = [a for a in args if hasattr(a, "clone")]
    if any(not torch.equal(a, b) for a, b in zip(after, before, strict=True)):
        return CheckResult(math.inf, bad + bad2, "the kernel modified an input")
    return CheckResult(max(err, err2), bad + bad2)
