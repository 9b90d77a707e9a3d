"""What a run's meta holds, read once into typed records for the clients (the TUI, `kopt
status`): the live step of the run and of each lane, the heartbeat, the last GPU gate, the
live per-class numbers, why the run stopped or crashed, and the caveats it carries. Pure and
tolerant: meta is written by whichever kopt ran the run last, so a missing key or a value of
the wrong type reads as None or a default, never as an error (the rules: engine.api.parse).

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
from dataclasses import dataclass
from typing import Any

from kopt_supervisor.engine.api.iteration_record import (
    GpuRef,
    RecordedClass,
    gpu_ref,
    recorded_classes,
)
from kopt_supervisor.engine.api.parse import integer, mapping, mappings, number, text, texts
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
    m = mapping(value)
    if not m:
        return None
    return LiveStep(
        integer(m.get("version")),
        text(m.get("phase")),
        text(m.get("step")),
        integer(m.get("done")),
        integer(m.get("total")),
        number(m.get("eta_s")),
        number(m.get("t")),
        number(m.get("phase_started_at")),
    )


@dataclass(frozen=True)
class GpuProcess:
    pid: int | None
    name: str


@dataclass(frozen=True)
class GpuAssessment:
    """One GPU as the gate judged it (engine/gpu/assess.py Assessment.to_dict())."""

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
    g = mapping(a.get("gpu"))
    uuid = g.get("uuid")
    procs = tuple(GpuProcess(integer(p.get("pid")), text(p.get("name"))) for p in mappings(g.get("processes")))
    return GpuAssessment(
        integer(g.get("index")) or 0,
        text(g.get("name")),
        uuid if isinstance(uuid, str) else None,
        number(g.get("util_pct")),
        number(g.get("mem_used_mib")),
        number(g.get("mem_total_mib")),
        procs,
        bool(a.get("idle")),
        texts(a.get("reasons")),
    )


@dataclass(frozen=True)
class GateRecord:
    """The last GPU gate (meta `gpu`, engine/loop/lane.py): the GPU it chose and what it saw."""

    chosen: GpuRef | None = None
    """None: no gate chose a GPU yet (or the machine has none)."""
    assessments: tuple[GpuAssessment, ...] = ()
    t: float | None = None
    lane: int | None = None
    """The lane whose gate it was."""


def gate_record(value: Any) -> GateRecord:
    g = mapping(value)
    chosen = mapping(g.get("chosen"))
    return GateRecord(
        gpu_ref(chosen) if chosen else None,
        tuple(gpu_assessment(a) for a in mappings(g.get("assessments"))),
        number(g.get("t")),
        integer(g.get("lane")),
    )


@dataclass(frozen=True)
class LiveClasses:
    """The running decision's classes after its last look (meta `live_classes`)."""

    version: int | None
    stage: str
    """eval, verify or reverify."""
    classes: tuple[RecordedClass, ...]


def live_classes(value: Any) -> LiveClasses | None:
    """None when `value` is not a mapping (no decision ran yet)."""
    if not isinstance(value, Mapping):
        return None
    return LiveClasses(
        integer(value.get("version")), text(value.get("stage")), recorded_classes(mapping(value.get("verdict")))
    )


@dataclass(frozen=True)
class RunMeta:
    """One reading of a run's meta, typed."""

    baseline_commit: str | None = None
    heartbeat_t: float | None = None
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
    cpu_demo: bool = False
    """The demo ran without a GPU (meta `demo`'s `gpu` is false)."""
    gate: GateRecord = GateRecord()
    live_classes: LiveClasses | None = None
    live_log: str = ""
    """The live benchmark output's path ("" when none)."""


def run_meta(meta: Mapping[str, Any]) -> RunMeta:
    baseline = meta.get("baseline_commit")
    return RunMeta(
        baseline_commit=baseline if isinstance(baseline, str) and baseline else None,
        heartbeat_t=number(mapping(meta.get("heartbeat")).get("t")),
        progress=live_step(meta.get("progress")),
        paused=bool(meta.get("paused")),
        active_s=number(meta.get("active_s")) or 0.0,
        engine_started_at=number(meta.get("engine_started_at")),
        stop_reason=text(meta.get("stop_reason")),
        last_error=text(meta.get("last_error")),
        notice=text(meta.get("notice")),
        cpu_demo=mapping(meta.get("demo")).get("gpu") is False,
        gate=gate_record(meta.get("gpu")),
        live_classes=live_classes(meta.get("live_classes")),
        live_log=text(meta.get("live_log")),
    )


@dataclass(frozen=True)
class LaneReview:
    """A lane's iteration awaiting the engineer: its place in the review queue."""

    place: int | None
    """1: the oldest review; None when the entry does not say."""
    of: int | None
    answer: str = ""
    """The answer already sent for it (accept, reject, more_rounds), "" when none."""
    more_rounds: bool = False


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
    interval: Interval | None = None
    """The interval its decision stands at (None before min_rounds looks are in)."""
    review: LaneReview | None = None


def lane_state(entry: Any) -> LaneState:
    e = mapping(entry)
    review = mapping(e.get("review"))
    place = integer(review.get("place"))
    return LaneState(
        lane=integer(e.get("lane")) or 0,
        version=integer(e.get("version")),
        phase=text(e.get("phase")),
        step=text(e.get("step")),
        done=integer(e.get("done")),
        total=integer(e.get("total")),
        gpu=gpu_ref(e.get("gpu")),
        host=text(e.get("host")),
        hypothesis=text(e.get("hypothesis")),
        interval=interval(e.get("interval")),
        review=LaneReview(
            place if place is not None and place > 0 else None,
            integer(review.get("of")),
            text(mapping(review.get("answer")).get("kind")),
            bool(review.get("more_rounds")),
        )
        if review
        else None,
    )


def interval(value: Any) -> Interval | None:
    """An Interval.to_dict() read back; None without a finite ratio."""
    i = mapping(value)
    ratio = number(i.get("ratio"))
    if ratio is None:
        return None
    return Interval(
        text(i.get("cls")),
        ratio,
        number(i.get("lo")),
        number(i.get("hi")),
        integer(i.get("rounds")),
        text(i.get("verdict")),
    )


@dataclass(frozen=True)
class DecisionEstimate:
    """What one decision costs with the run's bench (engine/onboard/cost.py
    DecisionCost.to_dict() as recorded: its figures and its line as written then)."""

    mode: str
    """process, ab or served ("" when not recorded)."""
    seconds_change: float | None
    seconds_tie: float | None
    slow: bool
    text: str


def decision_estimate(value: Any) -> DecisionEstimate | None:
    """None when `value` is not a mapping or an empty one (no estimate recorded)."""
    c = mapping(value)
    if not c:
        return None
    return DecisionEstimate(
        text(c.get("mode")),
        number(c.get("seconds_change")),
        number(c.get("seconds_tie")),
        bool(c.get("slow")),
        text(c.get("text")),
    )
