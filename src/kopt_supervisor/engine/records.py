"""The run's typed records (pure): what an iteration is, the states it passes through, the
record that memory/vN.json projects, the bookkeeping derived from a history of them, an agent's
run and what a run's agent runs cost, and the one rule for reading a stored record back into its
dataclass.

- `Status`: where an iteration ended (or that it is running / awaiting review).
- `Phase`: the step of the loop an iteration is in (written before the step runs, so a crash
  is recovered from the phase it left behind; docs/design.md §7, §11).
- `Stage`: which measurement a sample belongs to (the baseline, the evaluation, the
  re-evaluation after formatting).
- `IterationRecord`: the JSON record of an iteration, key by key.
- `Iteration`: one row of run.db's `iterations` table with its record.
- `AgentRun`: one run of an agent CLI, what it cost and where its transcript is (a record keeps
  it under `proposal.agent` and `repairs[].agent`; engine.propose's parsers fill it); `spent`,
  the totals over a run's records (`Spent`).

The rules that read a history and are written once here: `awaiting_review` (the pending
review rule) and `restart_point_problem` (where a masked restart may start).

Bookkeeping: BEST_COMMIT, CONSECUTIVE_REGRESSIONS and RECENT_REGRESSIONS are not stored as
counters that a crash could leave half-updated: they are recomputed from the unmasked
iterations every time, so they are right after any crash, mask or restart by construction.
Which keeps the run's seals vouch for is decided outside (engine.history.chain) and passed in
as `trusted`: BEST is never a keep the engine did not seal. Rules (kernel-opt program): a
measured regression adds one and is remembered (last five); a keep or a tie resets both; a
benchmark failure, a correctness give-up, a protected-file violation and a failed proposal
reset them too (no comparable regression was formed). A borderline awaiting review and an
interrupted iteration change nothing. The functions read rows (`IterationRow`: no record) or
full `Iteration`s alike; the few records a summary needs (the last five regressions) are asked
for through `records`, so a history of thousands of iterations costs one light query.

`known_fields`: records go to run.db and JSON files as dicts (`dataclasses.asdict`). Read back,
a dict may hold keys a newer or older kopt wrote that the dataclass no longer (or not yet) has:
they are dropped, one rule for every record that loads this way.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
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
    """A kept iteration's link in the chain of keeps (engine/workspace.py)."""
    diff_scan: dict[str, Any]
    """The diff scan's findings (rule, path, line, text) and the review reason quoting them."""
    decision_cost: dict[str, Any]
    """Baseline only: what one decision costs with this bench (engine/onboard/draft.py)."""
    baseline_flaky: list[str]
    """Baseline only: each run that failed and was run again (loop/start.py BASELINE_TRIES)."""
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


# --- bookkeeping: the counters and BEST, derived from the history ---

RESETS = frozenset({Status.KEEP, Status.ACCEPTED, Status.TIE, Status.SPLIT, Status.REJECTED, *FAILURES})
REGRESSIONS = frozenset({Status.REGRESSION, Status.LIKELY_REGRESSION})
"""Measured regressions: +1 to CONSECUTIVE_REGRESSIONS, remembered in RECENT_REGRESSIONS."""
NOT_COUNTED = frozenset({Status.BASELINE, Status.RUNNING, Status.INTERRUPTED, Status.BORDERLINE})

Row = Iteration | IterationRow
R = TypeVar("R", Iteration, IterationRow)


@dataclass(frozen=True)
class Counters:
    consecutive_regressions: int = 0
    recent_regressions: list[dict[str, Any]] = field(default_factory=list)
    consecutive_failures: int = 0
    candidates: int = 0
    """Candidate iterations that ended (baseline and interrupted ones excluded)."""
    keeps: int = 0


def best_row(rows: Sequence[Row], trusted: Collection[int] | None = None) -> Row | None:
    """BEST: the keep that ended last (keeps are committed one at a time, each on the one
    before). `trusted`: the kept versions whose seal verifies (engine.history.chain); a keep
    outside it is never BEST. None: every keep counts (a caller without the run's secret)."""
    kept = in_end_order([it for it in rows if not it.masked and it.kept and (trusted is None or it.version in trusted)])
    return kept[-1] if kept else None


def best_iteration(iterations: Sequence[Iteration], trusted: Collection[int] | None = None) -> Iteration | None:
    kept = in_end_order(
        [it for it in iterations if not it.masked and it.kept and (trusted is None or it.version in trusted)]
    )
    return kept[-1] if kept else None


def best_commit(rows: Sequence[Row], trusted: Collection[int] | None = None) -> str | None:
    it = best_row(rows, trusted)
    return it.commit if it else None


def trusted_rows(rows: Sequence[R], trusted: Collection[int] | None) -> list[R]:
    """The history a reader derives from: every row but the keeps the run's seals do not
    vouch for (a forged keep counts for nothing: not BEST, not a keep, not a baseline)."""
    return [it for it in rows if trusted is None or not it.kept or it.version in trusted]


def baseline(iterations: Sequence[Iteration]) -> Iteration | None:
    for it in iterations:
        if it.status == Status.BASELINE and not it.masked:
            return it
    return None


def baseline_version(rows: Sequence[Row]) -> int | None:
    for it in rows:
        if it.status == Status.BASELINE and not it.masked:
            return it.version
    return None


def counters(rows: Sequence[Row], records: Callable[[list[int]], dict[int, Iteration]] | None = None) -> Counters:
    """The counters over `rows`. RECENT_REGRESSIONS needs the records of up to five
    regressions: taken from the rows when they are full Iterations, else from `records`
    (versions -> iterations; without it the summaries carry only what a row has)."""
    regs = 0
    recent: list[Row] = []
    fails = 0
    candidates = keeps = 0
    for it in in_end_order(list(rows)):  # in the order they ended: with lanes, not their version order
        if it.masked or it.status in NOT_COUNTED:
            continue
        candidates += 1
        if it.status in REGRESSIONS:
            regs += 1
            recent = (recent + [it])[-5:]
        elif it.status in RESETS:
            regs = 0
            recent = []
        fails = fails + 1 if it.status in FAILURES else 0
        if it.status in (Status.KEEP, Status.ACCEPTED):
            keeps += 1
    full = [it for it in recent if isinstance(it, Iteration)]
    if len(full) < len(recent) and records is not None:
        loaded = records([it.version for it in recent])
        full = [loaded[it.version] for it in recent if it.version in loaded]
    summaries = (
        [regression_summary(it) for it in full]
        if len(full) == len(recent)
        else [
            regression_summary(
                Iteration(
                    it.version,
                    it.status,
                    target_class=it.target_class,
                    best_commit_before=it.best_commit_before,
                    finished_at=it.finished_at,
                )
            )
            for it in recent
        ]
    )
    return Counters(regs, summaries, fails, candidates, keeps)


def regression_summary(it: Iteration) -> dict[str, Any]:
    """One RECENT_REGRESSIONS entry, with the fields the reference program lists."""
    rec: IterationRecord = it.record
    classes = rec.get("classes", {})
    target = it.target_class or (max(classes, key=lambda c: classes[c].get("ratio", 1.0)) if classes else None)
    c = classes.get(target, {}) if target else {}
    prof = rec.get("profile", {}) or {}
    return {
        "version": it.version,
        "time": it.finished_at,
        "best_commit": it.best_commit_before,
        "candidate": f"v{it.version} (uncommitted tree)",
        "hypothesis": it.hypothesis,
        "files": rec.get("changed_files", []),
        "class": target,
        "metric_best": c.get("best"),
        "metric_cand": c.get("cand"),
        "profiler_best_ns": (prof.get("best") or {}).get("target_per_call_ns"),
        "profiler_cand_ns": (prof.get("cand") or {}).get("target_per_call_ns"),
        "delta_pct": c.get("delta_pct"),
        "notes": (rec.get("decision") or {}).get("reason", ""),
    }


# --- an agent's run, and what a run's agent runs cost ---


@dataclass(frozen=True)
class AgentRun:
    """One run of an agent CLI: what it cost and where its transcript is."""

    agent: str = ""
    cost_usd: float | None = None
    input_tokens: int | None = None
    """Every prompt token processed, cached ones included."""
    output_tokens: int | None = None
    """Generated tokens, reasoning/thinking tokens included where the CLI reports them."""
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    reasoning_tokens: int | None = None
    session_id: str | None = None
    session_started: int | None = None
    """The iteration whose run started this session (a resumed session keeps it)."""
    resumed: bool = False
    model: str | None = None
    turns: int | None = None
    is_error: bool | None = None
    wall_s: float | None = None
    exit: int | None = None
    transcript_path: str = ""
    """The agent's output kept in logs/vN/ (size-capped), relative to the workspace."""
    transcript_bytes: int | None = None
    transcript_cut: bool = False
    notes: tuple[str, ...] = ()
    """What the parser could not read (a missing result event, a value it dropped)."""

    @property
    def tokens(self) -> int | None:
        if self.input_tokens is None and self.output_tokens is None:
            return None
        return (self.input_tokens or 0) + (self.output_tokens or 0)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["notes"] = list(self.notes)
        out["tokens"] = self.tokens
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AgentRun:
        kw = known_fields(cls, data)
        kw["notes"] = tuple(kw.get("notes") or ())
        return cls(**kw)


@dataclass(frozen=True)
class Spent:
    runs: int = 0
    cost_usd: float = 0.0
    runs_without_cost: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    runs_without_tokens: int = 0
    wall_s: float = 0.0
    by_version: dict[int, dict[str, Any]] = field(default_factory=dict)
    """Per iteration: runs, cost_usd, tokens, wall_s."""

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["tokens"] = self.tokens
        out["by_version"] = {str(k): v for k, v in self.by_version.items()}
        return out


def agent_runs(record: Mapping[str, Any]) -> list[AgentRun]:
    """The agent runs of one iteration record: its proposal and every repair."""
    runs = []
    for details in [record.get("proposal"), *(record.get("repairs") or [])]:
        if isinstance(details, Mapping) and isinstance(details.get("agent"), Mapping):
            runs.append(AgentRun.from_dict(details["agent"]))
    return runs


def spent(records: Iterable[tuple[int, Mapping[str, Any]]]) -> Spent:
    """Totals over (version, record) pairs. Masked iterations count too: their money is spent."""
    total = Spent()
    by: dict[int, dict[str, Any]] = {}
    acc = asdict(total)
    for version, record in records:
        for run in agent_runs(record):
            acc["runs"] += 1
            v = by.setdefault(version, {"runs": 0, "cost_usd": None, "tokens": None, "wall_s": 0.0})
            v["runs"] += 1
            if run.cost_usd is None:
                acc["runs_without_cost"] += 1
            else:
                acc["cost_usd"] += run.cost_usd
                v["cost_usd"] = (v["cost_usd"] or 0.0) + run.cost_usd
            if run.tokens is None:
                acc["runs_without_tokens"] += 1
            else:
                v["tokens"] = (v["tokens"] or 0) + run.tokens
            for k in ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens"):
                acc[k] += getattr(run, k) or 0
            acc["wall_s"] += run.wall_s or 0.0
            v["wall_s"] += run.wall_s or 0.0
    acc["by_version"] = by
    return replace(total, **acc)


# --- reading a stored record back into its dataclass ---


def known_fields(cls: type, data: Mapping[str, Any]) -> dict[str, Any]:
    """The items of `data` whose keys are fields of the dataclass `cls`."""
    names = {f.name for f in fields(cls)}
    return {k: v for k, v in data.items() if k in names}
