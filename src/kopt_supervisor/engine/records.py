"""The run's typed records (pure): what an iteration is, the states it passes through, the
record that memory/vN.json projects, an agent's run and what a run's agent runs cost, and the
rules by which a stored record is read back (the engine's `known_fields`; a client's
`from_mapping`, at the end). What a history of them says (BEST_COMMIT, the counters, the pending
reviews) is derived in engine/projections.py.

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

`known_fields`: records go to run.db and JSON files as dicts (`dataclasses.asdict`). Read back,
a dict may hold keys a newer or older kopt wrote that the dataclass no longer (or not yet) has:
they are dropped, one rule for every record that loads this way.

A client's reading: the rules, and `from_mapping`, the one reader that applies them to a typed
view's fields. A run's meta and its iteration records are JSON written by whichever kopt ran the
run: an older one may lack a key, hold None, or a string where a number is now. Every typed
view of them (api.run_meta, api.iteration_record) reads values through these few rules, so a
value of the wrong type reads as None, "" or empty, never as an error:

- `number`: a finite real number as a float (bools are not numbers), else None;
- `integer`: an int (not a bool), else None;
- `text`: a string as it is, else "";
- `flag`: a value's truth (true, 1, "yes"; None, false, 0, "" are false);
- `texts`: the strings of a list or tuple, in order (anything else in it is left out);
- `mapping`: a mapping as it is, else an empty one;
- `mappings`: the mappings of a list or tuple, in order.

`from_mapping(cls, value)` fills the frozen dataclass `cls` from a mapping, each field by its
annotation under those rules, so a view declares its fields and nothing else:

- `float`, `int`, `str`: `number`, `integer`, a string; `bool`: `flag` (None: not set);
  `Any`: the value as it is;
- `X | None`: X's rule; a nested dataclass only from a non-empty mapping (an empty one: none
  recorded);
- `tuple[X, ...]`: the items of a list or tuple that read as X, in order (a dataclass's from
  the mappings among them);
- a dataclass: `from_mapping` of a mapping; `dict[str, X]` / `Mapping[str, X]`: the str keys
  whose values read as X;
- a key missing, or a value (None included) its rule cannot read: the field's default, else
  its type's empty value (None, "", 0, nan, False, (), {}, or the nested dataclass read from
  nothing).

A field reads its own name, unless its metadata says otherwise (`source`): another key, a
path of keys into nested mappings (() for the record itself), or its own conversion of the
raw value (None when missing), which replaces the type's rule. A value that is not a mapping
reads as an empty one; an annotation no rule covers is a TypeError (a view's mistake, found
on its first reading, not a record's).
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from enum import StrEnum
from typing import Any, TypedDict, TypeVar

from kopt_supervisor.engine import fmt


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
    keep decided again in fresh, separate, confined processes of the process-level bench."""


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
    carried: list[dict[str, Any]]
    """With lanes: each time a keep decided against a BEST another lane moved was put on the new
    one, where only its claim was confirmed (decided_on, onto, t; loop/keep.py Keeper.carry)."""
    stale: bool
    """It ended because its change no longer applied on a moved BEST (after its hand-backs)."""
    forced_paths: list[str]
    """Ignored files [target].allow_untracked lets the candidate hold: staged, shown, committed."""
    plan: dict[str, Any]
    """The plan as read against the context pack: citations of evidence, flags (uncited)."""


class StatusRules:
    """The rules on an iteration's status that its full record (`Iteration`) and its row
    (`IterationRow`) share: kept, final, awaiting review."""

    status: Status
    commit: str | None
    masked: bool

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


@dataclass
class Iteration(StatusRules):
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
    def order(self) -> int:
        """The place in the order iterations ended (several lanes end in any order)."""
        seq = self.record.get("ended_seq")
        return int(seq) if seq is not None else self.version


@dataclass(frozen=True)
class IterationRow(StatusRules):
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


# --- a client's reading: every value by its type, a wrong one as empty ---

EMPTY: Mapping[str, Any] = {}


def number(v: object) -> float | None:
    return float(v) if fmt.is_num(v) else None


def integer(v: object) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def text(v: object) -> str:
    return v if isinstance(v, str) else ""


def flag(v: object) -> bool:
    return bool(v)


def texts(v: object) -> tuple[str, ...]:
    return tuple(x for x in v if isinstance(x, str)) if isinstance(v, list | tuple) else ()


def mapping(v: object) -> Mapping[str, Any]:
    return v if isinstance(v, Mapping) else EMPTY


def mappings(v: object) -> tuple[Mapping[str, Any], ...]:
    return tuple(x for x in v if isinstance(x, Mapping)) if isinstance(v, list | tuple) else ()


T = TypeVar("T")

_KEY = "from_mapping.key"
_READ = "from_mapping.read"
_UNREAD: Any = object()
"""A key the record lacks, or what a rule returns for a value it cannot read: the field's
default takes its place."""

_Rule = Callable[[object], Any]


def source(
    key: str | tuple[str, ...] | None = None, read: Callable[[Any], object] | None = None
) -> Mapping[str, object]:
    """A field's metadata (`dataclasses.field(metadata=source(...))`): the record's key for it
    when it is not the field's name (a tuple: a path into nested mappings; (): the record
    itself), and `read`, the conversion of that raw value where the type's rule is not it."""
    return {_KEY: key, _READ: read}


def from_mapping(cls: type[T], value: object) -> T:
    """`cls` (a dataclass) read from `value` by its fields' annotations; never raises on data."""
    m = mapping(value)
    return cls(**{name: read(m) for name, read in _readers(cls)})


_FieldReader = Callable[[Mapping[str, Any]], object]
_READERS: dict[type, tuple[tuple[str, _FieldReader], ...]] = {}
"""Per dataclass, its fields' readers, built on its first reading."""


def _readers(cls: type) -> tuple[tuple[str, _FieldReader], ...]:
    if (readers := _READERS.get(cls)) is None:
        if not dataclasses.is_dataclass(cls):
            raise TypeError(f"from_mapping reads dataclasses, not {cls!r}")
        hints = typing.get_type_hints(cls)
        readers = tuple((f.name, _field_reader(f, hints[f.name])) for f in dataclasses.fields(cls) if f.init)
        _READERS[cls] = readers
    return readers


def _field_reader(f: dataclasses.Field[Any], tp: object) -> _FieldReader:
    key = f.metadata.get(_KEY)
    path: tuple[str, ...] = (f.name,) if key is None else (key,) if isinstance(key, str) else tuple(key)
    convert: Callable[[Any], object] | None = f.metadata.get(_READ)

    def raw(m: Mapping[str, Any]) -> Any:
        v: Any = m
        for k in path:
            v = mapping(v).get(k, _UNREAD)
        return v

    if convert is not None:
        conv = convert
        return lambda m: conv(None if (v := raw(m)) is _UNREAD else v)
    rule = _rule(tp)
    default = _default(f, tp)
    scalar = _SCALARS.get(_optional(tp) or tp)
    if scalar is not None and len(path) == 1:  # most fields: one key, a scalar (the quick way)
        key1, fixed = path[0], default()  # a scalar's default is immutable: read once

        def read_scalar(m: Mapping[str, Any]) -> object:
            v = m.get(key1)
            return fixed if v is None or (v := scalar(v)) is None else v

        return read_scalar
    get = raw if len(path) != 1 else lambda m, k=path[0]: m.get(k, _UNREAD)

    def read(m: Mapping[str, Any]) -> object:
        v = get(m)
        if v is not _UNREAD:
            v = rule(v)
        return default() if v is _UNREAD else v

    return read


def _default(f: dataclasses.Field[Any], tp: object) -> Callable[[], object]:
    if f.default is not dataclasses.MISSING:
        value = f.default
        return lambda: value
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory
    return _empty(tp)


def _optional(tp: object) -> object | None:
    """X of `X | None` (None when `tp` is not an optional of one type)."""
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return None


def _empty(tp: object) -> Callable[[], object]:
    """What a field without a default holds when its key is missing or damaged."""
    if _optional(tp) is not None or tp is Any:
        return lambda: None
    origin = typing.get_origin(tp) or tp
    empties: dict[object, Callable[[], object]] = {
        str: str,
        int: int,
        float: lambda: math.nan,
        bool: bool,
        tuple: tuple,
        dict: dict,
        Mapping: dict,
    }
    if origin in empties:
        return empties[origin]
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        nested = tp
        return lambda: from_mapping(nested, EMPTY)
    raise TypeError(f"from_mapping has no rule for {tp!r}")


def _rule(tp: object) -> _Rule:
    """The reading of one value of type `tp`: the value, or _UNREAD."""
    inner = _optional(tp)
    if inner is not None:
        if isinstance(inner, type) and dataclasses.is_dataclass(inner):
            nested = inner
            return lambda v: from_mapping(nested, v) if isinstance(v, Mapping) and v else _UNREAD
        return _rule(inner)
    if tp is Any:
        return lambda v: v
    if tp in _SCALARS:
        scalar = _SCALARS[tp]
        return lambda v: _UNREAD if (x := scalar(v)) is None else x
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        nested = tp
        return lambda v: from_mapping(nested, v) if isinstance(v, Mapping) else _UNREAD
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        item = _rule(args[0])
        return lambda v: tuple(x for x in map(item, v) if x is not _UNREAD) if isinstance(v, list | tuple) else _UNREAD
    if origin in (dict, Mapping) and len(args) == 2 and args[0] is str:
        item = _rule(args[1])
        return lambda v: (
            {k: x for k, x in ((k, item(y)) for k, y in v.items() if isinstance(k, str)) if x is not _UNREAD}
            if isinstance(v, Mapping)
            else _UNREAD
        )
    raise TypeError(f"from_mapping has no rule for {tp!r}")


_SCALARS: dict[object, Callable[[object], object]] = {
    float: number,
    int: integer,
    str: lambda v: v if isinstance(v, str) else None,
    bool: lambda v: None if v is None else flag(v),
}
