"""The run's typed records (pure): what an iteration is, the states it passes through, and the
record that memory/vN.json projects.

- `Status`: where an iteration ended (or that it is running / awaiting review).
- `Phase`: the step of the loop an iteration is in (written before the step runs, so a crash
  is recovered from the phase it left behind; docs/design.md §7, §11).
- `Stage`: which measurement a sample belongs to (the baseline, the evaluation, the
  re-evaluation after formatting).
- `IterationRecord`: the JSON record of an iteration, key by key.
- `Iteration`: one row of run.db's `iterations` table with its record.

The rules that read a history and are written once here: `awaiting_review` (the pending
review rule) and `restart_point_problem` (where a masked restart may start).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol, TypedDict, TypeVar


class _Ended(Protocol):
    @property
    def version(self) -> int: ...
    @property
    def order(self) -> int: ...


T = TypeVar("T", bound=_Ended)


class Status(StrEnum):
    RUNNING = "running"
    BORDERLINE = "borderline"
    """Awaiting the engineer (or the review policy at review_timeout_s)."""
    BASELINE = "baseline"
    KEEP = "keep"
    REGRESSION = "regression"
    LIKELY_REGRESSION = "likely_regression"
    """Still undecided at the last look, its estimate a loss beyond min_effect_pct: counted
    as a regression (it never resets the consecutive-regression counter as a tie does)."""
    TIE = "tie"
    SPLIT = "split"
    ACCEPTED = "accepted"
    REJECTED = "rejected"
    FAIL_BENCH = "fail_bench"
    FAIL_CORRECTNESS = "fail_correctness"
    FAIL_PROTECTED = "fail_protected"
    FAIL_PROPOSE = "fail_propose"
    INTERRUPTED = "interrupted"


KEPT = frozenset({Status.BASELINE, Status.KEEP, Status.ACCEPTED})
"""Statuses whose commit is (or was) BEST_COMMIT."""
FINAL = frozenset(Status) - {Status.RUNNING, Status.BORDERLINE}
FAILURES = frozenset({Status.FAIL_BENCH, Status.FAIL_CORRECTNESS, Status.FAIL_PROTECTED, Status.FAIL_PROPOSE})


class Phase(StrEnum):
    """The loop's steps, in the order an iteration passes them (docs/design.md §11)."""

    BASELINE = "baseline"
    GATE = "gate"
    PROPOSE = "propose"
    POLICE = "police"
    MEASURE = "measure"
    EVIDENCE = "evidence"
    REVIEW = "review"
    KEEP = "keep"
    """Formatting and the re-measurement of the formatted tree."""
    COMMIT = "commit"
    """The keep's commit is being made (recovery adopts a commit made before a crash)."""
    ADVANCE = "advance"
    """The commit exists; best/ is being moved to it."""
    DISCARD = "discard"
    DONE = "done"


class Stage(StrEnum):
    """Which measurement a sample (run.db `samples`) belongs to."""

    BASELINE = "baseline"
    EVAL = "eval"
    VERIFY = "verify"
    """The formatted tree, measured again before the keep's commit."""
    REVERIFY = "reverify"
    """A keep's confirmation: the looks of freshly started servers (`[target].serve`), or the
    keep decided again in fresh, separate, confined processes of the process-level bench
    (never the ab_command, which loads both trees into one process)."""


class IterationRecord(TypedDict, total=False):
    """memory/vN.json's content beyond the indexed columns (docs/files.md)."""

    classes: dict[str, dict[str, Any]]
    """Per class: best, cand, ratio, lo, hi, rounds, verdict, ... (decide.estimate.ClassResult)."""
    configs: dict[str, dict[str, Any]]
    """Baseline only: per config its class, production flag and CSV row."""
    config_columns: list[str]
    decision: dict[str, Any]
    """verdict, reason, by (engine or human), rounds, gpu_seconds, flags, focus."""
    roofline: dict[str, Any]
    profile: dict[str, Any]
    """best / cand profile summaries and their comparison (or an error)."""
    gpu: dict[str, Any]
    """The GPU gate's evidence: index, name, uuid, state before/after, flagged rounds."""
    gpu_seconds: dict[str, float]
    """Timed bench seconds per stage."""
    bench_runs: dict[str, list[dict[str, Any]]]
    """Per stage, each process-level bench run: side, round, wall seconds (plausibility)."""
    side_costs: dict[str, list[dict[str, Any]]]
    """Per stage, each side's cost of each served look (decide.external_truth.SideCost): the
    OS's CPU and wall seconds beside the seconds its bench claims."""
    changed_files: list[str]
    proposal: dict[str, Any]
    """What the proposer reported (its command, exit, seconds, the tune point)."""
    repairs: list[dict[str, Any]]
    failing_rows: list[dict[str, Any]]
    evaluated_tree: str
    """The git tree the evaluation measured (a keep commits exactly this, formatted)."""
    commit_tree: str
    """The tree the keep's commit was about to get (recovery recognises the commit by it)."""
    keep_status: str
    tampered: str
    review: dict[str, Any]
    """opened_at, deadline, reason of a review."""
    verify: dict[str, Any]
    reverify: dict[str, Any]
    """The process-level path: the keep's decision taken again in fresh processes, its
    verdict and agreement."""
    confirmation: dict[str, Any]
    """How the keep was confirmed in fresh processes (decide.confirmation.Confirmation):
    outcome, looks, seconds, path (served | process), per class the claimed and seen ratio."""
    external_truth: dict[str, Any]
    """What confirmed the keep outside the candidate's process
    (decide.external_truth.ExternalTruth): kind profiler | os_time | none, outcome, reason
    ("confirmed by the bench's timer only" for none), figures."""
    timings: dict[str, Any]
    """Seconds per phase: gate_wait_s, proposer_s, police_s, reload_s, looks_s (a list),
    profiler_s, format_s, commit_s, total_s, engine_s (what kopt itself spent)."""
    pitfalls_and_fixes: list[str]
    lane: int
    """The lane the iteration was measured in (0 with one lane)."""
    ended_seq: int
    """Its place in the order iterations ended (lanes end in any order; counters and the
    chain of keeps follow this order)."""
    seal: str
    diff_scan: dict[str, Any]
    """The diff scan's findings (rule, path, line, text) and the review reason quoting them."""
    decision_cost: dict[str, Any]
    """Baseline only: what one decision costs with this bench (engine/onboard/cost.py)."""
    """A kept iteration's link in the chain of keeps (engine/integrity.py)."""
    rebased: list[dict[str, Any]]
    """With lanes: each time BEST moved while it was decided and its change was put on the new one."""
    handed_back: list[dict[str, Any]]
    """With lanes: each time its change no longer applied on a BEST another lane kept and went
    back to its proposer (from, onto, t, hypothesis, why)."""
    stale: bool
    """It ended because its change no longer applied on a moved BEST (after its hand-backs)."""
    forced_paths: list[str]
    """Ignored files [target].allow_untracked lets the candidate hold: staged, shown, committed."""
    plan: dict[str, Any]
    """The plan as read against the context pack: citations of evidence, flags (uncited)."""


@dataclass
class Iteration:
    version: int
    status: Status
    phase: str = ""
    """A `Phase` value (records of older kopt versions may hold other text)."""
    masked: bool = False
    parent: int | None = None
    hypothesis: str = ""
    target_class: str | None = None
    scope: str = "global"
    commit: str | None = None
    best_commit_before: str | None = None
    repair_attempts: int = 0
    started_at: float = 0.0
    finished_at: float | None = None
    record: IterationRecord = field(default_factory=lambda: IterationRecord())

    @property
    def kept(self) -> bool:
        return self.status in KEPT and bool(self.commit)

    @property
    def final(self) -> bool:
        return self.status in FINAL

    @property
    def awaiting_review(self) -> bool:
        """The pending-review rule: a borderline iteration that was not masked."""
        return self.status == Status.BORDERLINE and not self.masked

    @property
    def order(self) -> int:
        """The place in the order iterations ended (several lanes end in any order)."""
        seq = self.record.get("ended_seq")
        return int(seq) if seq is not None else self.version


@dataclass(frozen=True)
class IterationRow:
    """An iteration without its record: what the bookkeeping reads of a long history (a
    record is kilobytes of JSON; a row is a few columns)."""

    version: int
    status: Status
    phase: str
    masked: bool
    target_class: str | None
    commit: str | None
    best_commit_before: str | None
    finished_at: float | None
    ended: int | None = None
    """Where it stands in the order iterations ended (record["ended_seq"]); None: not ended
    by this kopt (then its version is its place)."""

    @property
    def order(self) -> int:
        """The place in the order iterations ended (several lanes end in any order)."""
        return self.ended if self.ended is not None else self.version

    @property
    def kept(self) -> bool:
        return self.status in KEPT and bool(self.commit)

    @property
    def final(self) -> bool:
        return self.status in FINAL

    @property
    def awaiting_review(self) -> bool:
        return self.status == Status.BORDERLINE and not self.masked


def in_end_order(iterations: Iterable[T]) -> list[T]:
    """Iterations in the order they ended (with one lane: their version order)."""
    return sorted(iterations, key=lambda it: (it.order, it.version))


def awaiting_review(iterations: Iterable[Iteration | IterationRow]) -> list[int]:
    """The versions awaiting the engineer, oldest first."""
    return [it.version for it in iterations if it.awaiting_review]


def restart_point_problem(it: Iteration | IterationRow | None, version: int) -> str | None:
    """Why vN cannot be a masked restart's starting point (None: it can): it must exist and be
    an unmasked baseline or keep, i.e. a committed best point."""
    if it is None:
        return f"v{version} does not exist"
    if it.masked or not it.kept:
        return (
            f"v{version} is not an unmasked baseline or kept iteration (status {it.status}"
            f"{', masked' if it.masked else ''}); restart needs a committed best point"
        )
    return None
