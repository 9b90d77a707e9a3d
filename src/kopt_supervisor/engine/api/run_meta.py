"""What a run's meta holds, read once into typed records for the clients (the TUI, `kopt
status`), and the review queue it feeds: the live step of the run and of each lane, the
heartbeat, the last GPU gate, the live per-class numbers, why the run stopped or crashed, and
the caveats it carries; then every candidate awaiting the engineer (at the end, below). Pure
and tolerant: meta is written by whichever kopt ran the run last, so a missing key or a value
of the wrong type reads as None or a default, never as an error (the rules and the reader:
engine.records; a field's `source` says where its key or its reading differs).

- `run_meta(meta)` -> `RunMeta`: everything below, one reading;
- `live_step(value)` -> `LiveStep`: meta `progress`, or a lane's `lane:<i>`;
- `gpu_assessment(value)` -> `GpuAssessment`: one GPU judged idle or busy (an entry of the
  gate's `assessments`, or of `GpuSampler.read`);
- `live_classes(value)` -> `LiveClasses`: meta `live_classes`, the running decision's classes;
- `lane_state(entry)` -> `LaneState`: one entry of run_summary.lane_states (`kopt status
  --json`'s `lanes`);
- `decision_estimate(value)` -> `DecisionEstimate`: run_summary.decision_cost's record;
- `QueuedReview` (an entry of `kopt status --json`'s `reviews`), `PhaseTimings` (its
  `timings`): the parts of run_summary.status_report.

The review queue: every candidate awaiting the engineer, whatever its lane, oldest review
first, each with the evidence it is judged on and whether an answer is already on its way.

With `[parallel].lanes = K` several lanes can wait for the engineer at once (each lane's
review protocol waits for `kopt accept|reject|more vN` of its own iteration; the others go
on). A client shows them as one queue (the TUI's review dialog, `kopt status`), and answers
them one at a time, each by its version. Pure: iterations, meta and command rows in.

- `review_queue(iterations, meta, answers)`: one `PendingReview` per unmasked borderline
  iteration (projections.awaiting_review), in the order its review opened (record["review"]
  ["opened_at"]; a review re-opened after more rounds goes to the back), its `place` in the
  queue, its lane, the decision's reason, flags, per-class intervals and GPU, the deadline,
  the `answer` already sent for it (a pending sealed accept/reject/more_rounds row: the engine
  takes the first one and refuses any later one), and `more_rounds` (the engine measures it
  again now: no answer is taken until it waits again).
- `sealed_answers(key, commands)`: the pending answer rows that the run's secret vouches for
  (a row inserted by anything but the user's kopt is refused by the engine, so it answers
  nothing and must not hide a review from the queue).
- `headline_interval(record, target_class)`: the interval a decision hinges on (its focus
  class, the target class, or the class that moved most): the lanes' live interval.
- `lane_of(iteration)`, `gpu_of(record["gpu"])`: an iteration's lane and GPU as the records
  hold them (run_summary.lane_states reads them the same way).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kopt_supervisor.engine import fmt
from kopt_supervisor.engine.api.iteration_record import (
    GpuRef,
    IterationTimings,
    RecordedClass,
    recorded_classes,
    recorded_decision,
    recorded_review,
)
from kopt_supervisor.engine.records import Iteration, from_mapping, integer, mapping, mappings, number, source, text
from kopt_supervisor.engine.store import Command
from kopt_supervisor.engine.workspace import command_seal, same

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
    "Answer",
    "Interval",
    "PendingReview",
    "answer_version",
    "headline_interval",
    "review_queue",
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
    """An entry of the status JSON's `reviews` (PendingReview.to_dict(), below): what the
    one-line queue says of it."""

    version: int | None
    lane: int | None
    answer: str = field(default="", metadata=source(("answer", "kind")))
    """The answer already sent (accept, reject, more_rounds), "" when none."""
    more_rounds: bool = False


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


# The review queue.
ANSWERS = ("accept", "reject", "more_rounds")
"""The commands that answer a review (each names the iteration: args["version"])."""

MEASURING = ("eval", "verify", "reverify")
"""Live phases in which a borderline iteration is being measured again (more rounds)."""


@dataclass(frozen=True)
class Interval:
    """One class's change in a decision: the cost ratio candidate/best and its interval."""

    cls: str
    ratio: float
    lo: float | None
    hi: float | None
    rounds: int | None
    verdict: str

    @property
    def delta_pct(self) -> float:
        return (self.ratio - 1.0) * 100.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "cls": self.cls,
            "ratio": self.ratio,
            "lo": self.lo,
            "hi": self.hi,
            "delta_pct": self.delta_pct,
            "rounds": self.rounds,
            "verdict": self.verdict,
        }


@dataclass(frozen=True)
class Answer:
    """An answer sent and not yet taken by the engine."""

    kind: str
    source: str
    t: float
    command_id: int

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "source": self.source, "t": self.t, "command_id": self.command_id}


@dataclass(frozen=True)
class PendingReview:
    version: int
    lane: int | None
    """record["lane"] (none: lane 0, a run of one lane); None when the record holds no lane number."""
    place: int
    """1-based place in the queue (oldest review first)."""
    of: int
    """How many reviews are pending in all."""
    opened_at: float | None
    deadline: float | None
    """When the review policy decides ([decide].review_timeout_s after the review opened)."""
    reason: str
    hypothesis: str
    target_class: str | None
    flags: tuple[str, ...]
    rounds: int | None
    gpu_seconds: float | None
    classes: tuple[Interval, ...]
    focus: Interval | None
    """The interval the decision hinges on (headline_interval)."""
    gpu: dict[str, Any] | None
    """{"index", "uuid", "name", "host"} of the GPU the candidate was measured on."""
    answer: Answer | None
    more_rounds: bool

    @property
    def open(self) -> bool:
        """Waiting for an answer: none sent yet, and not being measured again."""
        return self.answer is None and not self.more_rounds

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "lane": self.lane,
            "place": self.place,
            "of": self.of,
            "opened_at": self.opened_at,
            "deadline": self.deadline,
            "reason": self.reason,
            "hypothesis": self.hypothesis,
            "target_class": self.target_class,
            "flags": list(self.flags),
            "rounds": self.rounds,
            "gpu_seconds": self.gpu_seconds,
            "classes": [c.to_dict() for c in self.classes],
            "focus": self.focus.to_dict() if self.focus else None,
            "gpu": self.gpu,
            "answer": self.answer.to_dict() if self.answer else None,
            "more_rounds": self.more_rounds,
        }


def review_queue(
    iterations: Iterable[Iteration],
    meta: Mapping[str, Any] | None = None,
    answers: Iterable[Command] = (),
    *,
    alive: bool = True,
) -> list[PendingReview]:
    """Every review pending, oldest first (see the module's docstring). `answers`: the
    pending answer rows to show (pass `sealed_answers`: forged rows answer nothing). `alive`:
    an engine runs (without one, meta's live steps are what it did last: a review is never
    said to be measured again, and an answer queued now applies when it resumes)."""
    waiting = [it for it in iterations if it.awaiting_review]
    waiting.sort(
        key=lambda it: (_opened_at(it) if _opened_at(it) is not None else float(it.started_at or 0.0), it.version)
    )
    first_answer: dict[int, Command] = {}
    for c in sorted(answers, key=lambda c: c.id):
        v = answer_version(c)
        if v is not None and c.kind in ANSWERS:
            first_answer.setdefault(v, c)
    measured = _measured_now(meta or {}) if alive else set()
    out = []
    for place, it in enumerate(waiting, 1):
        review = recorded_review(it.record)
        decision = recorded_decision(it.record)
        cmd = first_answer.get(it.version)
        out.append(
            PendingReview(
                version=it.version,
                lane=lane_of(it),
                place=place,
                of=len(waiting),
                opened_at=review.opened_at,
                deadline=review.deadline,
                reason=fmt.one_line(review.reason or decision.reason, 400),
                hypothesis=fmt.one_line(it.hypothesis, 400),
                target_class=it.target_class,
                flags=decision.flags,
                rounds=decision.rounds,
                gpu_seconds=decision.gpu_seconds,
                classes=class_intervals(it.record),
                focus=headline_interval(it.record, it.target_class),
                gpu=gpu_of(_mapping(it.record.get("gpu"))),
                answer=Answer(cmd.kind, cmd.source, cmd.t, cmd.id) if cmd is not None else None,
                more_rounds=it.version in measured,
            )
        )
    return out


def sealed_answers(key: bytes | None, commands: Iterable[Command]) -> list[Command]:
    """The pending review answers among `commands` sealed with the run's secret `key` (None:
    the run has no secret, so no row can be the user's)."""
    if key is None:
        return []
    return [c for c in commands if c.kind in ANSWERS and same(c.seal, command_seal(key, c.kind, c.args, c.t))]


def answer_version(c: Command) -> int | None:
    """The iteration an answer names (None when its args name none a client can read)."""
    v = c.args.get("version") if isinstance(c.args, Mapping) else None
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, str) and v.strip().lstrip("v").isdigit():
        return int(v.strip().lstrip("v"))
    return None


def class_intervals(record: Mapping[str, Any]) -> tuple[Interval, ...]:
    """record["classes"] as intervals, by class name (a class with no finite ratio is left out)."""
    return tuple(
        Interval(c.cls, c.ratio, c.lo, c.hi, c.rounds, c.verdict)
        for c in recorded_classes(record)
        if c.ratio is not None
    )


def headline_interval(record: Mapping[str, Any], target_class: str | None = None) -> Interval | None:
    """The interval a decision hinges on: record["decision"]["focus"]'s class, else the target
    class, else the class that moved most (engine.decide.verdict.summary picks the same)."""
    classes = {c.cls: c for c in class_intervals(record)}
    if not classes:
        return None
    for name in (recorded_decision(record).focus, target_class):
        if name and name in classes:
            return classes[name]
    return max(classes.values(), key=lambda c: abs(c.delta_pct))


def gpu_of(g: Mapping[str, Any], host: Any = None) -> dict[str, Any] | None:
    """{"index", "uuid", "name", "host"} of a GPU record (an iteration's or a gate lease), None
    when it names no GPU."""
    if not any(g.get(k) is not None for k in GPU_KEYS):
        return None
    return {**{k: g.get(k) for k in GPU_KEYS}, "host": _text(g.get("host")) or _text(host)}


GPU_KEYS = ("index", "uuid", "name")


def live_steps(meta: Mapping[str, Any]) -> Sequence[Mapping[str, Any]]:
    """Every live step meta holds: the run's (`progress`) and each lane's (`lane:<i>`)."""
    return [m for key, m in meta.items() if (key == "progress" or key.startswith("lane:")) and isinstance(m, Mapping)]


def _measured_now(meta: Mapping[str, Any]) -> set[int]:
    return {
        int(m["version"])
        for m in live_steps(meta)
        if isinstance(m.get("version"), int) and not isinstance(m.get("version"), bool) and m.get("phase") in MEASURING
    }


def _opened_at(it: Iteration) -> float | None:
    return recorded_review(it.record).opened_at


def lane_of(it: Iteration) -> int | None:
    """An iteration's lane: record["lane"] (none: lane 0, the baseline's and a run of one
    lane's); None when the record holds something else."""
    lane = it.record.get("lane", 0)
    return lane if isinstance(lane, int) and not isinstance(lane, bool) and lane >= 0 else None


def _text(v: Any) -> str | None:
    return v if isinstance(v, str) and v else None


def _mapping(v: Any) -> Mapping[str, Any]:
    return v if isinstance(v, Mapping) else {}
