"""`kopt status --json` (reading.status) and `kopt ls --json` (reading.list_runs) read back into
a typed record, for the lines the command line prints (pure). The JSON stays the stable
interface; this is its reading, tolerant as every typed view of the run (engine.api.parse):
an entry of `kopt ls` for a run that could not be read holds only its tag, state and error.

- `status_report(st)` -> `StatusReport`, its parts read by the same rules as the run's meta
  (`LiveStep`, `LaneState`, `DecisionEstimate`: engine.api.run_meta) and its records
  (`IterationTimings`: engine.api.iteration_record), `AgentSpending` (engine.api.run_summary),
  `QueuedReview` (an entry of `reviews`) and `PhaseTimings` (`timings`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kopt_supervisor.engine.api.iteration_record import IterationTimings, iteration_timings
from kopt_supervisor.engine.api.parse import integer, integers, mapping, mappings, number, text
from kopt_supervisor.engine.api.run_meta import (
    DecisionEstimate,
    LaneState,
    LiveStep,
    decision_estimate,
    lane_state,
    live_step,
)
from kopt_supervisor.engine.api.run_summary import AgentSpending, sandbox_line, spending


@dataclass(frozen=True)
class QueuedReview:
    """An entry of the status JSON's `reviews` (reviews.PendingReview.to_dict()): what the
    one-line queue says of it."""

    version: int | None
    lane: int | None
    answer: str = ""
    """The answer already sent (accept, reject, more_rounds), "" when none."""
    more_rounds: bool = False


def queued_review(value: Any) -> QueuedReview:
    r = mapping(value)
    return QueuedReview(
        integer(r.get("version")),
        integer(r.get("lane")),
        text(mapping(r.get("answer")).get("kind")),
        bool(r.get("more_rounds")),
    )


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
    t = mapping(value)
    last = t.get("last")
    return PhaseTimings(
        integer(t.get("last_version")),
        iteration_timings(last) if isinstance(last, Mapping) else None,
        number(t.get("engine_s_median")),
        number(t.get("engine_s_max")),
        integer(t.get("iterations")) or 0,
    )


@dataclass(frozen=True)
class StatusReport:
    tag: str
    state: str
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
    sandbox: str = ""
    """run_summary.sandbox_line of the run's sandbox record; "" when none was recorded."""
    unsandboxed: bool = False
    decision_cost: DecisionEstimate | None = None
    agent: AgentSpending = AgentSpending()
    timings: PhaseTimings = PhaseTimings()
    lanes: tuple[LaneState, ...] = ()


def status_report(st: Mapping[str, Any]) -> StatusReport:
    unsandboxed = bool(st.get("unsandboxed"))
    box = st.get("sandbox")
    return StatusReport(
        tag=text(st.get("tag")),
        state=text(st.get("state")) or "?",
        error=text(st.get("error")),
        iteration=integer(st.get("iteration")),
        iteration_status=_text_or_none(st.get("iteration_status")),
        best_commit=_text_or_none(st.get("best_commit")),
        baseline_commit=_text_or_none(st.get("baseline_commit")),
        best_speedup=number(st.get("best_speedup")),
        keeps=integer(st.get("keeps")) or 0,
        candidates=integer(st.get("candidates")) or 0,
        consecutive_regressions=integer(st.get("consecutive_regressions")) or 0,
        pending_reviews=integers(st.get("pending_reviews")),
        reviews=tuple(queued_review(r) for r in mappings(st.get("reviews"))),
        stop_reason=text(st.get("stop_reason")),
        engine_pid=integer(st.get("engine_pid")),
        heartbeat_age_s=number(st.get("heartbeat_age_s")),
        progress=live_step(st.get("progress")),
        last_error=text(st.get("last_error")),
        sandbox=sandbox_line({"sandbox": box}) if box is not None or unsandboxed else "",
        unsandboxed=unsandboxed,
        decision_cost=decision_estimate(st.get("decision_cost")),
        agent=spending(st.get("agent")),
        timings=phase_timings(st.get("timings")),
        lanes=tuple(lane_state(e) for e in mappings(st.get("lanes"))),
    )


def _text_or_none(v: Any) -> str | None:
    return v if isinstance(v, str) else None
