"""`kopt status --json` (reading.status) and `kopt ls --json` (reading.list_runs) read back into
a typed record, for the lines the command line prints (pure). The JSON stays the stable
interface; this is its reading, tolerant as every typed view of the run (engine.api.parse,
by engine.api.from_mapping):
an entry of `kopt ls` for a run that could not be read holds only its tag, state and error.

- `status_report(st)` -> `StatusReport`, its parts read by the same rules as the run's meta
  (`LiveStep`, `LaneState`, `DecisionEstimate`: engine.api.run_meta) and its records
  (`IterationTimings`: engine.api.iteration_record), `AgentSpending` (engine.api.run_summary),
  `QueuedReview` (an entry of `reviews`) and `PhaseTimings` (`timings`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kopt_supervisor.engine.api.from_mapping import from_mapping, source
from kopt_supervisor.engine.api.iteration_record import IterationTimings
from kopt_supervisor.engine.api.parse import flag, mapping, text
from kopt_supervisor.engine.api.run_meta import DecisionEstimate, LaneState, LiveStep
from kopt_supervisor.engine.api.run_summary import AgentSpending, sandbox_line, spending


@dataclass(frozen=True)
class QueuedReview:
    """An entry of the status JSON's `reviews` (reviews.PendingReview.to_dict()): what the
    one-line queue says of it."""

    version: int | None
    lane: int | None
    answer: str = field(default="", metadata=source(("answer", "kind")))
    """The answer already sent (accept, reject, more_rounds), "" when none."""
    more_rounds: bool = False


def queued_review(value: Any) -> QueuedReview:
    return from_mapping(QueuedReview, value)


@dataclass(frozen=True)
class PhaseTimings:
    """The status JSON's `timings` (run_summary.phase_timings)."""

    last_version: int | None = None
    last: IterationTimings | None = None
    """The newest finished iteration's record["timings"]."""
    engine_s_median: float | None = None
    engine_s_max: float | None = None
    iterations: int = 0


def phase_timings(value: Any) -> PhaseTimings:
    return from_mapping(PhaseTimings, value)


def _sandbox(st: Mapping[str, Any]) -> str:
    box = st.get("sandbox")
    return sandbox_line({"sandbox": box}) if box is not None or flag(st.get("unsandboxed")) else ""


@dataclass(frozen=True)
class StatusReport:
    tag: str
    state: str = field(metadata=source(read=lambda v: text(v) or "?"))
    """"?" when the entry names none."""
    error: str = ""
    """Why the run could not be read (a `kopt ls` entry of state "unreadable")."""
    iteration: int | None = None
    iteration_status: str | None = None
    best_commit: str | None = None
    baseline_commit: str | None = None
    best_speedup: float | None = None
    keeps: int = 0
    candidates: int = 0
    consecutive_regressions: int = 0
    pending_reviews: tuple[int, ...] = ()
    reviews: tuple[QueuedReview, ...] = ()
    stop_reason: str = ""
    engine_pid: int | None = None
    heartbeat_age_s: float | None = None
    progress: LiveStep | None = None
    last_error: str = ""
    sandbox: str = field(default="", metadata=source((), read=lambda st: _sandbox(mapping(st))))
    """run_summary.sandbox_line of the run's sandbox record; "" when none was recorded."""
    unsandboxed: bool = False
    decision_cost: DecisionEstimate | None = None
    agent: AgentSpending = field(default=AgentSpending(), metadata=source(read=spending))
    timings: PhaseTimings = PhaseTimings()
    lanes: tuple[LaneState, ...] = ()


def status_report(st: Mapping[str, Any]) -> StatusReport:
    return from_mapping(StatusReport, st)
