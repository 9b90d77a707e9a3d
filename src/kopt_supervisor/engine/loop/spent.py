"""Where an iteration's seconds go: one bucket per second (record["timings"]["spent"]).

The loop (the package's `__init__`, keep.py) counts each step's seconds into one of SPENT with
`spend`; engine/api/run_summary.py sums them per lane."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator

from kopt_supervisor.engine.records import Iteration

SPENT = ("wait", "propose", "measure", "confirm", "review", "stale")
"""Where a lane's time goes, one bucket per second of an iteration (record["timings"]["spent"];
engine/api/run_summary.py sums them per lane):

- wait: for an idle GPU at the iteration's start, for the BEST lock at a keep, and (tune) for
  another lane to free the parameters and classes every point left would step;
- propose: the proposer and the police, repairs and hand-backs included;
- measure: the decisions of the candidate against BEST (eval);
- confirm: the evidence of a keep (profiler, fresh servers or processes) and the keep itself
  (format, the re-decision of the formatted tree, commit);
- review: waiting for the engineer;
- stale: measure and confirm seconds of a decision thrown away because another lane's keep
  moved BEST meanwhile (the candidate was rebased and decided again, or handed back)."""

_NESTED = threading.local()


def add_spent(it: Iteration, bucket: str, seconds: float) -> None:
    """Add `seconds` to the iteration's `bucket` (one of SPENT)."""
    assert bucket in SPENT, bucket
    spent = it.record.setdefault("timings", {}).setdefault("spent", {})
    spent[bucket] = round(float(spent.get(bucket, 0.0)) + max(0.0, seconds), 4)


@contextlib.contextmanager
def spend(it: Iteration, bucket: str) -> Iterator[None]:
    """Count the seconds spent inside in `bucket`; seconds a nested spend() counts (on this
    thread: each lane runs its iteration on one) count only there, so the buckets never
    overlap."""
    stack: list[list[float]] = _NESTED.__dict__.setdefault("frames", [])
    frame = [0.0]
    stack.append(frame)
    t0 = time.monotonic()
    try:
        yield
    finally:
        total = time.monotonic() - t0
        stack.pop()
        if stack:
            stack[-1][0] += total
        add_spent(it, bucket, total - frame[0])


def move_spent(it: Iteration, since: dict[str, float], buckets: tuple[str, ...], to: str) -> float:
    """Move what `buckets` gained since the snapshot `since` (a copy of the record's
    spent) into `to`; returns the seconds moved (a stale decision's measure and confirm)."""
    spent = it.record.setdefault("timings", {}).setdefault("spent", {})
    moved = 0.0
    for b in buckets:
        gained = float(spent.get(b, 0.0)) - float(since.get(b, 0.0))
        if gained > 0:
            spent[b] = round(float(spent.get(b, 0.0)) - gained, 4)
            moved += gained
    add_spent(it, to, moved)
    return moved


def spent_now(it: Iteration) -> dict[str, float]:
    """A snapshot of the iteration's buckets (for move_spent)."""
    return {k: float(v) for k, v in it.record.get("timings", {}).get("spent", {}).items()}
