"""The audit of a served look: which timed output kopt checks, and its summary.

kopt compares the candidate's outputs with best's itself, outside both processes (docs/byo-kernel.md
§3, the `audit N SEED PATH` request). After both sides answered a look, kopt draws an audit
seed and each side summarises, per config, the output of one of its timed buffer sets. Both
sides and kopt make the same choice by one rule, which kopt reimplements and checks:

    rng = random.Random(f"{seed}/{config_key}")
    i = rng.randrange(S)                                   # the buffer set, of S
    for each output tensor j of that set, in order:        # n_j elements
        K = min(64, n_j)
        positions_j = sorted(rng.randrange(n_j) for _ in range(K))

`seed` is written as a decimal integer; `config_key` is `col=value,...` over the config
columns in the CSV's order, values as kopt's metrics.format_value writes them
(params.config_key). `random.Random` seeded with a str hashes it with SHA-512: the same in
every process and Python 3 version, independent of PYTHONHASHSEED.

The summary of one output tensor (`summarise`): numel, NaN and Inf counts, the sum and the sum
of absolute values of its finite elements accumulated in float64, and the values at the
chosen flat positions (as float64; NaN/Inf written as JSON's NaN/Infinity, which Python's
json reads).

The commitment (`commitment`): with each look, before kopt draws the audit seed, every timed
set's output summaries without samples, written as `PATH.sets.json` beside the look's CSV:
`{"version": 1, "configs": [{"config": {...}, "sets": [[summary per output] per set]}]}`. kopt
compares them with best's set by set and the audited set's summary with its side's promise.
Equal-sized outputs are summed as a batch (`summarise_sets`); the sums then round
differently from `summarise`'s, by far less than kopt's SAME_SUM_RTOL (1e-9).

`input_seed` derives the seeds of a look's inputs from the look's seed: the contract check's
inputs and each timed set's are drawn from generators of their own, so the same look seed
gives bit-identical inputs in every process on the same device and software, whatever the
tree, and no two of them coincide.

Pure but for `summarise` (torch passed in); imports nothing from kopt's engine.
"""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

SAMPLES = 64
"""Sampled values per output tensor (fewer when it has fewer elements)."""
VERSION = 1
"""The audit JSON's version."""


def audit_set(seed: int, config_key: str, sets: int) -> tuple[random.Random, int]:
    """(the rule's generator, the index of the audited set among `sets`): the rule's first draw."""
    if sets < 1:
        raise ValueError(f"audit: a config needs at least one timed buffer set, not {sets}")
    rng = random.Random(f"{int(seed)}/{config_key}")
    return rng, rng.randrange(sets)


def audit_positions(rng: random.Random, numel: int) -> list[int]:
    """The next output's sampled flat positions: min(SAMPLES, numel) draws, sorted."""
    return sorted(rng.randrange(numel) for _ in range(min(SAMPLES, numel)))


def audit_choice(seed: int, config_key: str, sets: int, numels: Sequence[int]) -> tuple[int, list[list[int]]]:
    """The whole rule at once: (set index, the sampled positions of each output, in order),
    for outputs of `numels` elements. What kopt recomputes to check a side's audit."""
    rng, i = audit_set(seed, config_key, sets)
    return i, [audit_positions(rng, n) for n in numels]


def input_seed(seed: int, config_key: str, purpose: str) -> int:
    """A 63-bit generator seed for one config's inputs of one purpose ("check", "set3/prime",
    "set3") in the look of `seed`."""
    digest = hashlib.sha256(f"{int(seed)}/{config_key}/{purpose}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


SUMMARY_CHUNK = 1 << 24
"""Elements summed in float64 at a time: a whole output in float64 (and its finite and
absolute copies) took 3 x 2.7 GiB for the largest RMSNorm shape and ran a served process
out of memory on the H100; in chunks the audit needs 3 x 128 MiB at most. The chunking is
the same in every process, so equal outputs still give bit-equal sums."""


def summarise(torch: Any, tensor: Any, positions: Sequence[int]) -> dict[str, Any]:
    """One output tensor's audit summary (see the module docstring)."""
    flat = tensor.detach().reshape(-1)
    acc = torch.zeros(4, dtype=torch.float64, device=flat.device)  # NaN, Inf, sum, sum of |x|: one transfer
    for start in range(0, int(flat.numel()), SUMMARY_CHUNK):
        acc += _chunk_sums(torch, flat[start : start + SUMMARY_CHUNK])
    nan_f, inf_f, total, abs_total = acc.tolist()
    return _summary(torch, flat, int(nan_f), int(inf_f), total, abs_total, positions)


def _chunk_sums(torch: Any, part: Any) -> Any:
    """One chunk's NaN count, Inf count, sum and sum of |x| of its finite elements (float64)."""
    if not part.is_floating_point():  # integers, booleans: as before, in float64
        part = part.to(torch.float64)
    # NaN and Inf zeroed in the output's own dtype (exact), then summed into float64: no
    # float64 copy of the chunk (a 50 M-element bf16 output on 2 CPU threads: 0.8 s, where
    # converting each chunk to float64 first took 3.1 s)
    kept = torch.nan_to_num(part, nan=0.0, posinf=0.0, neginf=0.0)
    return torch.stack(
        [
            torch.isnan(part).sum().to(torch.float64),
            torch.isinf(part).sum().to(torch.float64),
            kept.sum(dtype=torch.float64),
            kept.abs().sum(dtype=torch.float64),
        ]
    )


def _summary(
    torch: Any, flat: Any, nan: int, inf: int, total: float, abs_total: float, positions: Sequence[int]
) -> dict[str, Any]:
    if positions:
        index = torch.tensor(list(positions), dtype=torch.long, device=flat.device)
        values = flat[index].to(torch.float64).tolist()
    else:
        values = []
    return {
        "numel": int(flat.numel()),
        "nan": nan,
        "inf": inf,
        "sum": total,
        "abs_sum": abs_total,
        "samples": [[int(p), float(v)] for p, v in zip(positions, values, strict=True)],
    }


HOST_FAST = ("torch.float16", "torch.bfloat16", "torch.float32")
"""The dtypes `summarise_host` sums in float32 (each converts to it exactly)."""


def summarise_host(torch: Any, tensor: Any, positions: Sequence[int]) -> dict[str, Any]:
    """`summarise` of a tensor on the host, about five times faster for 16- and 32-bit floats:
    each chunk converted to float32 (exact) and summed there by torch's cascade sum, the
    chunks' sums added in float64; NaN and Inf are counted only in a chunk whose sums are not
    finite (a chunk holding one sums to NaN or Inf; one whose finite values overflow float32
    takes the same exact path, `_chunk_sums`). The sums then differ from `summarise`'s by
    float32's rounding, ~1e-7 of the sum of |x|: far within a config's tolerance, which is
    what a profiled call's outputs are compared at (decide/audit.compare); never used for a
    look's commitment, which its audit must match to 1e-9. On the 2-core dev machine a
    16 M-element bf16 chunk took 60 ms against `summarise`'s 290."""
    flat = tensor.detach().reshape(-1)
    if str(flat.dtype) not in HOST_FAST or flat.device.type != "cpu":
        return summarise(torch, tensor, positions)
    nan = inf = 0
    total = abs_total = 0.0
    for start in range(0, int(flat.numel()), SUMMARY_CHUNK):
        part = flat[start : start + SUMMARY_CHUNK]
        wide = part.to(torch.float32)
        s, a = float(wide.sum()), float(wide.abs().sum())
        if not (math.isfinite(s) and math.isfinite(a)):
            nan_f, inf_f, s, a = _chunk_sums(torch, part).tolist()
            nan, inf = nan + int(nan_f), inf + int(inf_f)
        total, abs_total = total + s, abs_total + a
    return _summary(torch, flat, nan, inf, total, abs_total, positions)


PENDING_BYTES = 2 << 30
"""HostSummaries: the most bytes of host copies waiting for their summary (the oldest is waited for)."""


class HostSummaries:
    """Profiled calls' outputs, each copied to the host at once and summarised there
    (`summarise_host`, positions drawn from the config's rng in call order) on a thread of its
    own while the next calls run. Under a profiler every kernel launched is profiled, a
    summary's too: on the H200 (2026-11-30) summarising the 730 MB output of the largest RMSNorm
    shape on the GPU launched some 200 kernels and took ncu 80 s of a 83 s profile; a copy
    launches none. On the host that output still took 1.5 s of a keep's 13 s profile
    (2026-12-01); on the thread it overlaps the small configs' calls."""

    def __init__(self, torch: Any, max_pending_bytes: int = PENDING_BYTES) -> None:
        self.torch = torch
        self.max_pending_bytes = max_pending_bytes
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="kopt-summaries")
        self._pending: list[tuple[Future[dict[str, Any]], int]] = []

    def add(self, tensors: Sequence[Any], rng: random.Random) -> list[Future[dict[str, Any]]]:
        """One call's outputs: their host copies now, their summaries later."""
        futures = []
        for t in tensors:
            host = t.detach().cpu()
            positions = audit_positions(rng, int(host.numel()))
            future = self._pool.submit(summarise_host, self.torch, host, positions)
            futures.append(future)
            self._pending.append((future, int(host.numel()) * int(host.element_size())))
            while sum(n for _, n in self._pending) > self.max_pending_bytes and len(self._pending) > 1:
                self._pending.pop(0)[0].result()
            self._pending = [(f, n) for f, n in self._pending if not f.done()]
        return futures

    def close(self) -> None:
        self._pool.shutdown(wait=True)


def summarise_sets(torch: Any, sets: Sequence[Sequence[Any]]) -> list[list[dict[str, Any]]]:
    """Per set, its output tensors' summaries without samples (a look's commitment), every sum
    brought back in one transfer: outputs of one size, dtype and device are summed as a batch of
    up to SUMMARY_CHUNK elements (`_batch_sums`), a larger one chunk by chunk (`_chunk_sums`).
    Summarised one by one, with a transfer each, the H200's RMSNorm commitment was 634 outputs
    and 0.15-0.25 s of each side's look, ~0.4 s of a 2.2 s look for both sides
    (experiments/look_cost.py, 2026-12-01)."""
    flat = [t.detach().reshape(-1) for outs in sets for t in outs]
    parts = []
    i = 0
    while i < len(flat):
        t, n = flat[i], int(flat[i].numel())
        if n > SUMMARY_CHUNK:
            acc = torch.zeros(4, dtype=torch.float64, device=t.device)
            for start in range(0, n, SUMMARY_CHUNK):
                acc += _chunk_sums(torch, t[start : start + SUMMARY_CHUNK])
            parts.append(acc.reshape(1, 4))
            i += 1
            continue
        j, most = i + 1, max(1, SUMMARY_CHUNK // max(n, 1))
        while j < len(flat) and j - i < most and _alike(flat[j], t):
            j += 1
        parts.append(_batch_sums(torch, flat[i:j]))
        i = j
    if not parts:
        return [[] for _ in sets]
    if len({p.device for p in parts}) > 1:
        parts = [p.cpu() for p in parts]
    stats = iter(torch.cat(parts).tolist())
    out = []
    for outs in sets:
        row = []
        for t in outs:
            nan, inf, total, abs_total = next(stats)
            n = int(t.numel())
            row.append(
                {"numel": n, "nan": int(nan), "inf": int(inf), "sum": total, "abs_sum": abs_total, "samples": []}
            )
        out.append(row)
    return out


def _alike(a: Any, b: Any) -> bool:
    """Two flat outputs that stack into one batch."""
    return a.numel() == b.numel() and a.dtype == b.dtype and a.device == b.device


def _batch_sums(torch: Any, flats: Sequence[Any]) -> Any:
    """Per flat output of one size (SUMMARY_CHUNK elements in all at most): its NaN count, Inf
    count, sum and sum of |x| of its finite elements, in float64, one row each (on its device)."""
    batch = torch.stack(list(flats)).to(torch.float64)
    finite = torch.isfinite(batch)
    kept = torch.where(finite, batch, torch.zeros_like(batch))
    return torch.stack(
        [
            torch.isnan(batch).sum(1).to(torch.float64),
            torch.isinf(batch).sum(1).to(torch.float64),
            kept.sum(1),
            kept.abs().sum(1),
        ],
        dim=1,
    )


def output_tensors(result: Any) -> list[Any]:
    """The tensors a call's result holds, in order: a tensor, or a tuple/list of them (other
    items dropped); anything else (a lazy object, None) holds none, so its audit lists no
    output and cannot match best's."""
    if hasattr(result, "detach") and hasattr(result, "numel"):
        return [result]
    if isinstance(result, tuple | list):
        return [t for item in result for t in output_tensors(item)]
    return []
