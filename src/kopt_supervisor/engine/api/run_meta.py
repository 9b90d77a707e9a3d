"""What a run's meta holds, read once into typed records for the clients (the TUI, `kopt
status`): the live step of the run and of each lane, the heartbeat, the last GPU gate, the
live per-class numbers, why the run stopped or crashed, and the caveats it carries. Pure and
tolerant: meta is written by whichever kopt ran the run last, so a missing key or a value of
the wrong type reads as None or a default, never as an error (the rules: engine.api.parse;
each record is read by its fields' types with engine.api.from_mapping, and a field's
`source` says where its key or its reading differs).

- `run_meta(meta)` -> `RunMeta`: everything below, one reading;
- `live_step(value)` -> `LiveStep`: meta `progress`, or a lane's `lane:<i>`;
- `gate_record(value)` -> `GateRecord`: meta `gpu`, the last gate's choice and assessments;
- `gpu_assessment(value)` -> `GpuAssessment`: one GPU judged idle or busy (an entry of the
  gate's `assessments`, or of `GpuSampler.read`);
- `live_classes(value)` -> `LiveClasses`: meta `live_classes`, the running decision's classes;
- `lane_state(entry)` -> `LaneState`: one entry of run_summary.lane_states (`kopt status
  --json`'s `lanes`);
- `decision_estimate(value)` -> `DecisionEstimate`: run_summary.decision_cost's record.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kopt_supervisor.engine.api.from_mapping import from_mapping, source
from kopt_supervisor.engine.api.iteration_record import GpuRef, RecordedClass, recorded_classes
from kopt_supervisor.engine.api.parse import integer, mapping, mappings, number, text
from kopt_supervisor.engine.api.reviews import Interval


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
    """One GPU as the gate judged it (engine/gpu/state.py Assessment.to_dict()): the GPU's
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
    """The last GPU gate (meta `gpu`, engine/loop/lane.py): the GPU it chose and what it saw."""

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
