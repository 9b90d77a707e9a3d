"""The timed calls' buffer sets of one config in one look (the one-tree path: plain runs and
served looks).

A config's timed calls rotate over `count` buffer sets (inputs and, with an `out=` keyword,
an output buffer each). They are drawn from the look's seed (audit.input_seed) but are never
the contract check's inputs, and no reference is ever computed for them: a candidate that
returns a reference it found in the process (through gc, a frame) or a result it cached for
inputs it saw before has nothing right to return for them, and kopt's audit (audit.py)
compares what they hold with best's.

Each set is drawn twice: a priming draw, which the calibration, the CUDA graph's capture and
every timed block but the last compute on; then, just before the last timed block, `refresh`
copies a second draw into the same buffers (a graph replays on the same pointers) and fills
every output with NaN. So what a set holds after the look is what the last block's calls
computed from inputs no earlier call had seen: a result cached by input pointer during the
calibration is stale, and an output the last block did not write is NaN.

Drawing costs the spec's make_inputs (a dozen launches for the bundled kernels): the sets
of a config take DISTINCT draws at most, set i a copy of draw i mod DISTINCT. Measured on
the H100 (RMSNorm, 2026-11-27): a draw per set (up to 256 sets for the regression grid's
small configs) took 0.38-0.50 s of a 0.7-0.8 s look. A candidate that computes one set and
copies its output to the others is still wrong on all but one set in DISTINCT.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

from .audit import input_seed, output_tensors

DISTINCT = 8
"""The most distinct draws of a config's sets (per priming and per refresh)."""


class TimedSets:
    """`count` buffer sets of one case (bench.Case) for the look of `look_seed`."""

    def __init__(self, case: Any, look_seed: int, count: int) -> None:
        if count < 1:
            raise ValueError(f"TimedSets: count must be >= 1, not {count}")
        self.torch, self.count = case.torch, count
        self.key = case.key
        self._draw = case.draw
        draws = min(count, DISTINCT)
        self._seeds = [input_seed(look_seed, self.key, f"set{j}") for j in range(draws)]
        prime = [case.draw(input_seed(look_seed, self.key, f"set{j}/prime")) for j in range(draws)]
        self.args: list[tuple] = [
            prime[i][0] if i < draws else tuple(_clone(a) for a in prime[i % draws][0]) for i in range(count)
        ]
        self.kwargs: list[dict[str, Any]] = [
            prime[i][1] if i < draws else {k: _clone(v) for k, v in prime[i % draws][1].items()} for i in range(count)
        ]
        self.out = case.spec.out
        self.dsts: list[Any] = (
            [self.torch.full(case.out_shape, math.nan, dtype=case.out_dtype, device=case.device) for _ in range(count)]
            if self.out is not None
            else [None] * count
        )
        self.kept: list[Any] = [None] * count
        """Without an out= keyword: each set's last result (freed just before the set's next call)."""

    def calls(self, fn: Callable[..., Any]) -> list[Callable[[], Any]]:
        """One call of fn per set: into the set's out= buffer, or keeping its own result."""
        return [functools.partial(self._call, fn, i) for i in range(self.count)]

    def _call(self, fn: Callable[..., Any], i: int) -> Any:
        if self.out is not None:
            return fn(*self.args[i], **self.kwargs[i], **{self.out: self.dsts[i]})
        return keep_result(self.kept, i, fn, self.args[i], self.kwargs[i])

    def reseed(self, look_seed: int) -> None:
        """The sets of a later look of the same process (a served tree keeps its sets and the
        CUDA graph captured on them: a graph replays on the same pointers): the priming draws
        of `look_seed` copied into the buffers, every output NaN, and the second draws that
        `refresh` will copy are `look_seed`'s. What the audit reads after the look is again
        what the last block computed from inputs no call of this look had seen before it."""
        draws = len(self._seeds)
        self._seeds = [input_seed(look_seed, self.key, f"set{j}") for j in range(draws)]
        self._fill([self._draw(input_seed(look_seed, self.key, f"set{j}/prime")) for j in range(draws)])

    def refresh(self) -> None:
        """Before the last timed block: the second draws copied into the sets' input tensors
        (set i: draw i mod DISTINCT; other arguments keep the priming draw's values), every
        output filled with NaN."""
        self._fill([self._draw(seed) for seed in self._seeds])

    def _fill(self, fresh: list[tuple[tuple, dict[str, Any]]]) -> None:
        for i in range(self.count):
            args, kwargs = fresh[i % len(fresh)]
            for old, new in zip(self.args[i], args, strict=True):
                _copy_into(old, new)
            for name, new in kwargs.items():
                if name in self.kwargs[i]:
                    _copy_into(self.kwargs[i][name], new)
        for t in self._output_tensors():
            if t.is_floating_point() or t.is_complex():
                t.fill_(math.nan)

    def outputs(self, i: int) -> list[Any]:
        """Set i's output tensor(s): its out= buffer, or what its last call returned."""
        return [self.dsts[i]] if self.out is not None else output_tensors(self.kept[i])

    def _output_tensors(self) -> list[Any]:
        return [t for i in range(self.count) for t in self.outputs(i)]


def keep_result(kept: list[Any], i: int, fn: Callable[..., Any], args: tuple, kwargs: dict[str, Any]) -> Any:
    """Call fn and keep its result in kept[i] until set i comes round again, freeing the
    previous one just before the call (so the allocator hands the same block back): as many
    distinct outputs as input sets, like `out=` rotation (bench.kept_outputs says why)."""
    kept[i] = None
    kept[i] = fn(*args, **kwargs)
    return kept[i]


def _clone(v: Any) -> Any:
    return v.clone() if hasattr(v, "clone") else v


def _copy_into(old: Any, new: Any) -> None:
    if hasattr(old, "copy_") and hasattr(new, "shape") and tuple(old.shape) == tuple(new.shape):
        old.copy_(new)
