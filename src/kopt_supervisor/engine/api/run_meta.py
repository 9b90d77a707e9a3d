"""What a run's meta holds, and what `kopt status --json` / `kopt ls --json` say of a run,
read once into typed records for the clients (the TUI, `kopt status`): the live step of the
run and of each lane, the heartbeat, the last GPU gate, the live per-class numbers, why the
run stopped or crashed, and the caveats it carries. Pure and tolerant: meta is written by
whichever kopt ran the run last, so a missing key or a value of the wrong type reads as None
or a default, never as an error (the rules and the reader: engine.api.parse; a field's
`source` says where its key or its reading differs).

- `run_meta(meta)` -> `RunMeta`: everything below, one reading;
- `live_step(value)` -> `LiveStep`: meta `progress`, or a lane's `lane:<i>`;
- `gate_record(value)` -> `GateRecord`: meta `gpu`, the last gate's choice and assessments;
- `gpu_assessment(value)` -> `GpuAssessment`: one GPU judged idle or busy (an entry of the
  gate's `assessments`, or of `GpuSampler.read`);
- `live_classes(value)` -> `LiveClasses`: meta `live_classes`, the running decision's classes;
- `lane_state(entry)` -> `LaneState`: one entry of run_summary.lane_states (`kopt status
  --json`'s `lanes`);
- `decision_estimate(value)` -> `DecisionEstimate`: run_summary.decision_cost's record;
- `status_report(st)` -> `StatusReport`: `kopt status --json` (run_io.status) or an entry of
  `kopt ls --json` (run_io.list_runs) read back, for the lines the command line prints (the
  JSON stays the stable interface; an entry for a run that could not be read holds only its
  tag, state and error), with `QueuedReview` (an entry of `reviews`), `PhaseTimings`
  (`timings`) and `AgentSpending` (run_summary.spending).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kopt_supervisor.engine.api.iteration_record import GpuRef, IterationTimings, RecordedClass, recorded_classes
from kopt_supervisor.engine.api.parse import flag, from_mapping, integer, mapping, mappings, number, source, text
from kopt_supervisor.engine.api.reviews import Interval
from kopt_supervisor.engine.api.run_summary import AgentSpending, sandbox_line, spending

__all__ = [
    "DecisionEstimate",
    "GateRecord",
    "GpuAssessment",
    "GpuProcess",
    "LaneReview",
    "LaneState",
    "LiveClasses",
    "LiveStep",
    "RunMeta",
    "decision_estimate",
    "gpu_assessment",
    "lane_state",
    "live_step",
    "run_meta",
    "PhaseTimings",
    "QueuedReview",
    "StatusReport",
    "status_report",
]  # what engine.api exports from here


@dataclass(frozen=True)
class LiveStep:
    """The step in flight (engine/loop/context.py `progress`): "v12 eval, round 3 of up to 8"."""

    version: int | None
    phase: str = ""
    step: str = ""
    done: int | None = None
    total: int | None = None
    eta_s: float | None = None
    """Seconds left as estimated at `t`."""
    t: float | None = None
    phase_started_at: float | None = None


def live_step(value: Any) -> LiveStep | None:
    """A live step; None when `value` is not a mapping or an empty one (no step yet)."""
    return from_mapping(LiveStep, value) if mapping(value) else None


@dataclass(frozen=True)
class GpuProcess:
    pid: int | None
    name: str


@dataclass(frozen=True)
class GpuAssessment:
    """One GPU as the gate judged it (engine/gpu/__init__.py Assessment.to_dict()): the GPU's
    own fields are read from its `gpu`."""

    index: int
    """0 when the record names none."""
    name: str
    uuid: str | None
    util_pct: float | None
    mem_used_mib: float | None
    mem_total_mib: float | None
    processes: tuple[GpuProcess, ...]
    idle: bool
    reasons: tuple[str, ...]
    """Why it is not idle."""


def gpu_assessment(value: Any) -> GpuAssessment:
    a = mapping(value)
    return from_mapping(GpuAssessment, {**mapping(a.get("gpu")), "idle": a.get("idle"), "reasons": a.get("reasons")})


@dataclass(frozen=True)
class GateRecord:
    """The last GPU gate (meta `gpu`, engine/loop/context.py): the GPU it chose and what it saw."""

    chosen: GpuRef | None = None
    """None: no gate chose a GPU yet (or the machine has none)."""
    assessments: tuple[GpuAssessment, ...] = field(
        default=(), metadata=source(read=lambda v: tuple(map(gpu_assessment, mappings(v))))
    )
    t: float | None = None
    lane: int | None = None
    """The lane whose gate it was."""


def gate_record(value: Any) -> GateRecord:
    return from_mapping(GateRecord, value)


@dataclass(frozen=True)
class LiveClasses:
    """The running decision's classes after its last look (meta `live_classes`)."""

    version: int | None
    stage: str
    """eval, verify or reverify."""
    classes: tuple[RecordedClass, ...] = field(metadata=source("verdict", read=lambda v: recorded_classes(mapping(v))))


def live_classes(value: Any) -> LiveClasses | None:
    """None when `value` is not a mapping or an empty one (no decision ran yet)."""
    return from_mapping(LiveClasses, value) if mapping(value) else None


@dataclass(frozen=True)
class RunMeta:
    """One reading of a run's meta, typed."""

    baseline_commit: str | None = field(default=None, metadata=source(read=lambda v: text(v) or None))
    heartbeat_t: float | None = field(default=None, metadata=source(("heartbeat", "t")))
    """When the engine last beat (meta `heartbeat`'s `t`)."""
    progress: LiveStep | None = None
    paused: bool = False
    active_s: float = 0.0
    """Seconds the engines ran, up to the current one's start."""
    engine_started_at: float | None = None
    stop_reason: str = ""
    last_error: str = ""
    notice: str = ""
    """A standing caveat about the whole run (e.g. the CPU demo's)."""
    cpu_demo: bool = field(default=False, metadata=source(("demo", "gpu"), read=lambda v: v is False))
    """The demo ran without a GPU (meta `demo`'s `gpu` is false)."""
    gate: GateRecord = field(default=GateRecord(), metadata=source("gpu"))
    live_classes: LiveClasses | None = None
    live_log: str = ""
    """The live benchmark output's path ("" when none)."""


def run_meta(meta: Mapping[str, Any]) -> RunMeta:
    return from_mapping(RunMeta, meta)


@dataclass(frozen=True)
class LaneReview:
    """A lane's iteration awaiting the engineer: its place in the review queue."""

    place: int | None = field(metadata=source(read=lambda v: p if (p := integer(v)) and p > 0 else None))
    """1: the oldest review; None when the entry does not say."""
    of: int | None
    answer: str = field(default="", metadata=source(("answer", "kind")))
    """The answer already sent for it (accept, reject, more_rounds), "" when none."""
    more_rounds: bool = False


def interval(value: Any) -> Interval | None:
    """An Interval.to_dict() read back; None without a finite ratio."""
    return from_mapping(Interval, value) if number(mapping(value).get("ratio")) is not None else None


@dataclass(frozen=True)
class LaneState:
    """What a lane is doing (run_summary.lane_states)."""

    lane: int
    version: int | None
    """Its iteration in flight, None when it is idle."""
    phase: str = ""
    step: str = ""
    done: int | None = None
    total: int | None = None
    gpu: GpuRef | None = None
    host: str = ""
    hypothesis: str = ""
    interval: Interval | None = field(default=None, metadata=source(read=interval))
    """The interval its decision stands at (None before min_rounds looks are in)."""
    review: LaneReview | None = None


def lane_state(entry: Any) -> LaneState:
    return from_mapping(LaneState, entry)


@dataclass(frozen=True)
class DecisionEstimate:
    """What one decision costs with the run's bench (engine/onboard/draft.py
    DecisionCost.to_dict() as recorded: its figures and its line as written then)."""

    mode: str
    """process, ab or served ("" when not recorded)."""
    seconds_change: float | None
    seconds_tie: float | None
    slow: bool
    text: str


def decision_estimate(value: Any) -> DecisionEstimate | None:
    """None when `value` is not a mapping or an empty one (no estimate recorded)."""
    return from_mapping(DecisionEstimate, value) if mapping(value) else None


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
