"""A lane: what one candidate is measured with — its candidate worktree, the best tree it is
compared against, its GPU gate (and so its GPU), the host it runs on, and its measurer.

Every step of an iteration takes the lane it works for instead of assuming one `cand/`, so
that several candidates can be measured at once (docs/design.md §13). A run has one lane today,
lane 0: `cand/` against `best/` (the worktree of the run's branch) on the gate's GPU.

A `Measurer` takes a lane's looks (engine/loop/measure.py has them: served trees, a shared
A/B process, a bench process per side); a `Look` is one round of best against candidate.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from kopt_supervisor.engine.decide import Pair
from kopt_supervisor.engine.decide.external_truth import SideCost
from kopt_supervisor.engine.decide.plausible import BenchRun
from kopt_supervisor.engine.gpu.gate import Gate
from kopt_supervisor.engine.metrics import Measurement
from kopt_supervisor.engine.records import Iteration


@dataclass(frozen=True)
class Look:
    pairs: list[Pair]
    best: Measurement
    cand: Measurement
    seconds: float
    """Timed bench seconds (the decision's GPU-second budget counts these)."""
    runs: tuple[BenchRun, ...] = ()
    """Process-level: each side's bench process and its wall time (the plausibility check
    of a reported metric against the time the process took)."""
    gpu: tuple[dict[str, Any] | None, dict[str, Any] | None] | None = None
    """The GPU's state before and after, when the look ran where the lane's own gate cannot
    see (a Ray worker's gate picked the GPU there)."""
    costs: tuple[SideCost, ...] = ()
    """Served per tree (`ServedTrees`): what each side's process spent on the look as the OS
    accounts for it (CPU and wall seconds) beside what its bench claims."""


class Measurer(Protocol):
    def look(self, it: Iteration, stage: str, r: int, env: dict[str, str]) -> Look:
        """Round r of a decision: best and candidate measured together."""
        ...

    def new_decision(self) -> None:
        """A decision starts: the next look measures freshly loaded trees."""
        ...

    def close(self) -> None:
        """Release what is kept between looks (a serving process)."""
        ...


@dataclass
class Lane:
    index: int
    best: Path
    """The best tree this lane's candidate is compared against (lane 0: best/, the branch's worktree)."""
    cand: Path
    """The candidate worktree the proposer edits (lane 0: cand/)."""
    gate: Gate
    """This lane's GPU gate: the GPU it holds is the lane's GPU (best and candidate of a pair
    always run on it)."""
    host: str = "local"
    measurer: Measurer | None = field(default=None, repr=False)
    fresh: Measurer | None = field(default=None, repr=False)
    """What decides a keep again in fresh, separate processes of the process-level bench
    (None: measure.ProcessAbba on this host; a Ray lane's runs on its worker)."""

    @property
    def name(self) -> str:
        return f"lane {self.index}"

    def close(self) -> None:
        for m in (self.measurer, self.fresh):
            if m is not None:
                m.close()
        self.gate.close()


def note_gpu(
    it: Iteration,
    lane: Lane,
    before: dict[str, Any] | None,
    after: dict[str, Any] | None,
    *,
    flags: list[str] | None = None,
    round_index: int | None = None,
) -> None:
    """The GPU evidence of an iteration's record: which GPU (on which host), its state before
    the first timed step and after the last, and the rounds something disturbed."""
    g = it.record.setdefault("gpu", {})
    g.setdefault("before", before)
    g["after"] = after
    g.setdefault("host", lane.host)
    if before:
        g.setdefault("index", before.get("index"))
        g.setdefault("name", before.get("name"))
        g.setdefault("uuid", before.get("uuid"))
    else:
        g.setdefault("name", "no GPU (CPU-only target)")
    if flags:
        g.setdefault("flagged_rounds", []).append({"round": round_index, "flags": flags})


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
