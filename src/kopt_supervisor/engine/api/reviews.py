"""The review queue: every candidate awaiting the engineer, whatever its lane, oldest review
first, each with the evidence it is judged on and whether an answer is already on its way.

With `[parallel].lanes = K` several lanes can wait for the engineer at once (each lane's
review protocol waits for `kopt accept|reject|more vN` of its own iteration; the others go
on). A client shows them as one queue (the TUI's review dialog, `kopt status`), and answers
them one at a time, each by its version. Pure: iterations, meta and command rows in.

- `review_queue(iterations, meta, answers)`: one `PendingReview` per unmasked borderline
  iteration (records.awaiting_review), in the order its review opened (record["review"]
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
from dataclasses import dataclass
from typing import Any

from kopt_supervisor.engine import fmt
from kopt_supervisor.engine.api.iteration_record import (
    recorded_classes,
    recorded_decision,
    recorded_review,
)
from kopt_supervisor.engine.records import Iteration
from kopt_supervisor.engine.store import Command
from kopt_supervisor.engine.workspace import command_seal, same

__all__ = [
    "Answer",
    "Interval",
    "PendingReview",
    "answer_version",
    "headline_interval",
    "review_queue",
]  # what engine.api exports from here

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
