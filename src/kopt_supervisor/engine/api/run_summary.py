"""What a run spent and how it ran, summed up for its clients (`kopt status --json`, the TUI,
results.md): the agent's cost against the budget, the phases' timings, the run-wide caveats
the engine records in meta, what each lane is doing, and progress per GPU-hour. Pure:
iterations and meta in, plain JSON-able values or typed records out.

- `agent_spending(iterations, budget_usd, budget_tokens)`: engine.records.spent over
  every iteration (masked ones too: their money is spent) with the budget and the agent CLIs
  that reported no cost;
- `phase_timings(iterations)`: the newest finished iteration's record["timings"] and the
  median of what kopt itself spent per candidate iteration (`engine_s`);
- `sandbox_state(meta)`, `decision_cost(meta, iterations)`: meta's records, or None;
  `ran_unsandboxed(meta)` and `sandbox_line(meta)` (engine.projections: performance.md says
  the same);
- `profiler_evidence(record["profile"])` (api.iteration_record: results.md reads it the same):
  per class the profiler's change per call beside the bench's verdict;
- `external_truth(iterations)`: what confirmed BEST's keep outside the candidate's process
  (engine.decide.external_truth: the profiler, the OS's accounting, or the bench's timer
  only), and which of the run's keeps had only the bench's timer;
- `lane_states(meta, iterations, lanes, reviews)`: what each lane ([parallel].lanes) is doing
  now: its running iteration, its live step (meta `lane:<i>`, or meta `progress` with one
  lane), its GPU and host, its candidate, the interval its decision stands at, and its place
  in the review queue (engine.api.run_meta);
- `progress(iterations, direction)` -> `Progress`, progress per GPU-hour (docs/lanes.md; `kopt
  status --json` `gpu_time`, results.md's "Progress and where the time went", the TUI's lanes
  panel). The curve: one `SpeedupPoint` per keep, in the order iterations ended, with the wall
  seconds since the first candidate started and the lane-seconds spent by then (the sum of
  every candidate iteration's time that had ended; each lane holds one GPU while its
  iteration runs, so lane-seconds are GPU-seconds), and the best speedup after that keep
  (`projections.best_speedup`'s rule: the geometric mean over classes of baseline / best).
  Per lane (`LaneTime`): the seconds of each bucket of engine/loop/spent.py SPENT (wait,
  propose, measure, confirm, review, stale), what else the iterations spent (kopt's own
  bookkeeping, discards: `other_s`), and how many iterations were rebased, handed back or
  ended stale, and how many keeps were carried to a moved BEST. An iteration that ended because its change no longer applied on a moved BEST
  (record `stale`) counts whole as stale. Records written before the buckets existed count
  their whole time as `other_s`.
- `status_report(st)` -> `StatusReport`: `kopt status --json` (run_io.status) or an entry of
  `kopt ls --json` (run_io.list_runs) read back, for the lines the command line prints (the
  JSON stays the stable interface; an entry for a run that could not be read holds only its
  tag, state and error), with `QueuedReview` (an entry of `reviews`), `PhaseTimings`
  (`timings`), `LiveStep`, `LaneState`, `DecisionEstimate` (engine.api.run_meta) and
  `AgentSpending` (`spending`, above).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from kopt_supervisor.engine import fmt, projections
from kopt_supervisor.engine.api.iteration_record import (
    TIMED_PHASES,
    ProfiledClass,
    ProfilerEvidence,
    profiler_evidence,
    timing_rows,
)
from kopt_supervisor.engine.api.run_meta import (
    DecisionEstimate,
    LaneState,
    LiveStep,
    PendingReview,
    PhaseTimings,
    QueuedReview,
    gpu_of,
    headline_interval,
    lane_of,
)
from kopt_supervisor.engine.projections import best_speedup, ran_unsandboxed, sandbox_line
from kopt_supervisor.engine.records import Iteration, Status, flag, from_mapping, mapping, number, source, text, texts

__all__ = [  # what engine.api exports from here
    "TIMED_PHASES",
    "AgentSpending",
    "ProfiledClass",
    "ProfilerEvidence",
    "agent_line",
    "agent_spending",
    "decision_cost",
    "spending",
    "lane_states",
    "phase_timings",
    "profiler_evidence",
    "ran_unsandboxed",
    "sandbox_line",
    "sandbox_state",
    "timing_rows",
    "LaneTime",
    "Progress",
    "SpeedupPoint",
    "progress",
    "StatusReport",
    "status_report",
]


def agent_spending(iterations: Iterable[Iteration], budget_usd: float = 0.0, budget_tokens: int = 0) -> dict[str, Any]:
    """engine.records.spent(...).to_dict() over every iteration, with `budget_usd` and
    `budget_tokens` ([propose]; 0: none) and `no_cost_agents`: the agent CLIs (AgentRun.agent)
    of runs that reported no cost, sorted."""
    from kopt_supervisor.engine.records import agent_runs, spent

    its = list(iterations)
    out = spent((it.version, it.record) for it in its).to_dict()
    silent = {run.agent or "command" for it in its for run in agent_runs(it.record) if run.cost_usd is None}
    out.update({"budget_usd": float(budget_usd), "budget_tokens": int(budget_tokens), "no_cost_agents": sorted(silent)})
    return out


@dataclass(frozen=True)
class AgentSpending:
    """`agent_spending`'s totals, typed: what the agent cost over the run, with the budget."""

    runs: int = 0
    cost_usd: float = 0.0
    runs_without_cost: int = 0
    tokens: int = 0
    runs_without_tokens: int = 0
    wall_s: float = 0.0
    budget_usd: float = 0.0
    budget_tokens: int = 0
    no_cost_agents: tuple[str, ...] = ()


def spending(value: Any) -> AgentSpending:
    """`agent_spending`'s dict (or `kopt status --json`'s `agent`) read back; a missing or
    odd total is 0."""
    s = mapping(value)

    def count(key: str) -> int:
        v = number(s.get(key))
        return 0 if v is None else int(v)

    return AgentSpending(
        count("runs"),
        number(s.get("cost_usd")) or 0.0,
        count("runs_without_cost"),
        count("tokens"),
        count("runs_without_tokens"),
        number(s.get("wall_s")) or 0.0,
        number(s.get("budget_usd")) or 0.0,
        count("budget_tokens"),
        texts(s.get("no_cost_agents")),
    )


def agent_line(spent: Mapping[str, Any] | AgentSpending) -> str:
    """One line of what the agent cost, most telling first: "$0.42 of $5.00 · 45.2k tok ·
    8 runs in 2:13 · 2 without cost (gemini)"; "" when no agent ran."""
    s = spent if isinstance(spent, AgentSpending) else spending(spent)
    if not s.runs:
        return ""
    no_cost = s.runs_without_cost
    parts = []
    if no_cost < s.runs:
        parts.append(fmt.usd(s.cost_usd) + (f" of {fmt.usd(s.budget_usd)}" if s.budget_usd else ""))
    if s.runs_without_tokens < s.runs:
        parts.append(
            f"{fmt.count(s.tokens)}" + (f" of {fmt.count(s.budget_tokens)}" if s.budget_tokens else "") + " tok"
        )
    parts.append(f"{s.runs} run{'s' if s.runs != 1 else ''} in {fmt.clock(s.wall_s)}")
    if no_cost:
        agents = ", ".join(s.no_cost_agents)
        parts.append(
            ("no cost reported" if no_cost == s.runs else f"{no_cost} without cost")
            + (f" ({agents})" if agents else "")
            + (f", budget {fmt.usd(s.budget_usd)}" if s.budget_usd and no_cost == s.runs else "")
        )
    return " · ".join(parts)


def phase_timings(iterations: Sequence[Iteration]) -> dict[str, Any]:
    """{"last_version", "last": the newest finished iteration's record["timings"] (None when
    none finished), "engine_s_median", "engine_s_max": over the finished candidate
    iterations (the baseline's measurement is not kopt's overhead), "iterations": how many
    of those have an engine_s}."""
    last = next(
        (it for it in reversed(iterations) if it.final and number(_timings(it).get("total_s")) is not None), None
    )
    engine = [
        v
        for it in iterations
        if it.final and it.status != Status.BASELINE and (v := number(_timings(it).get("engine_s"))) is not None
    ]
    return {
        "last_version": last.version if last else None,
        "last": dict(_timings(last)) if last else None,
        "engine_s_median": statistics.median(engine) if engine else None,
        "engine_s_max": max(engine) if engine else None,
        "iterations": len(engine),
    }


def sandbox_state(meta: Mapping[str, Any]) -> dict[str, Any] | None:
    """meta `sandbox` ({confined, summary, support, ever_unconfined}), None before any engine
    recorded it."""
    value = meta.get("sandbox")
    return dict(value) if isinstance(value, Mapping) else None


def decision_cost(meta: Mapping[str, Any], iterations: Iterable[Iteration] = ()) -> dict[str, Any] | None:
    """engine/onboard/draft.py DecisionCost.to_dict() as recorded after the baseline (meta
    `decision_cost`, else the baseline record's), None when none was recorded."""
    value = meta.get("decision_cost")
    if isinstance(value, Mapping):
        return dict(value)
    for it in iterations:
        if it.status == Status.BASELINE and isinstance(it.record.get("decision_cost"), Mapping):
            return dict(it.record["decision_cost"])
    return None


def _timings(it: Iteration | None) -> Mapping[str, Any]:
    t = it.record.get("timings") if it is not None else None
    return t if isinstance(t, Mapping) else {}


LANE_STEP_KEYS = ("phase", "step", "done", "total", "eta_s")
"""What a lane's entry takes from its live step (meta `lane:<i>`, the dict meta `progress` holds)."""


def lane_states(
    meta: Mapping[str, Any], iterations: Sequence[Iteration], lanes: int, reviews: Sequence[PendingReview] = ()
) -> list[dict[str, Any]]:
    """One entry per lane of the run (`lanes`: [parallel].lanes; at least one), in lane order:
    {"lane", "version", "phase", "step", "done", "total", "eta_s", "gpu", "host", "hypothesis",
    "interval", "review"}.

    - `version`: the lane's iteration in flight (running, or borderline awaiting the engineer),
      None when the lane is idle. An iteration's lane is record["lane"] (none: lane 0, the
      baseline's); a record naming a lane the run does not have counts for none.
    - `phase` … `eta_s`: the live step of that iteration (meta `lane:<i>`, or meta `progress`
      when it names the iteration: one lane, the baseline), else the iteration row's phase and
      nulls (the row is written before its step runs). An idle lane is "idle", or
      "waiting_gpu" while its gate waits for a GPU (only while the run has a live step: the
      engine clears meta `progress` when the run ends, not `lane:<i>`).
    - `gpu`: {"index", "uuid", "name", "host"} of the running iteration (or, when idle, of the
      lane's last iteration): the record's GPU evidence, else the lane's last gate lease
      (meta `lane:<i>`'s `gpu` and `host`); None when neither names a GPU. With the Ray
      backend `host` is the worker host whose gate chose the GPU.
    - `host`: the GPU's host, else where the lane last ran (meta `lane:<i>` `host`: "local",
      "ray" until a Ray worker took the lane, then that worker), None when unknown.
    - `hypothesis`: the candidate in flight (None while it is proposed, or when idle).
    - `interval`: the interval its decision hinges on so far (run_meta.headline_interval:
      {"cls", "ratio", "lo", "hi", "delta_pct", "rounds", "verdict"}; updated after every look
      once min_rounds are in), None before.
    - `review`: None, or when its iteration awaits the engineer its place in the review queue
      (`reviews`: run_meta.review_queue): {"place", "of", "deadline", "answer", "more_rounds"}.
    """
    count = max(1, int(lanes))
    newest: dict[int, Iteration] = {}
    for it in iterations:
        i = lane_of(it)
        if i is not None and i < count and (i not in newest or it.version > newest[i].version):
            newest[i] = it
    progress = _mapping(meta.get("progress"))
    pending = {r.version: r for r in reviews}
    out = []
    for i in range(count):
        seen = _mapping(meta.get(f"lane:{i}"))
        last = newest.get(i)
        running = last if last is not None and not last.final else None
        gpu = gpu_of(_mapping(last.record.get("gpu")) if last is not None else {}, None) or gpu_of(
            _mapping(seen.get("gpu")), seen.get("host")
        )
        interval = headline_interval(running.record, running.target_class) if running is not None else None
        review = pending.get(running.version) if running is not None else None
        out.append(
            {
                "lane": i,
                "version": running.version if running else None,
                **_lane_step(running, seen, progress, idle_step=progress if count == 1 else seen),
                "gpu": gpu,
                "host": (gpu or {}).get("host") or _text(seen.get("host")),
                "hypothesis": (running.hypothesis or None) if running is not None else None,
                "interval": interval.to_dict() if interval is not None else None,
                "review": None
                if review is None
                else {
                    "place": review.place,
                    "of": review.of,
                    "deadline": review.deadline,
                    "answer": review.answer.to_dict() if review.answer else None,
                    "more_rounds": review.more_rounds,
                },
            }
        )
    return out


def _lane_step(
    running: Iteration | None, seen: Mapping[str, Any], progress: Mapping[str, Any], *, idle_step: Mapping[str, Any]
) -> dict[str, Any]:
    """A lane's LANE_STEP_KEYS: its iteration's live step (the lane's own record, or the run's
    when it names that iteration), its row's phase, waiting for a GPU, or idle."""
    nothing = dict.fromkeys(LANE_STEP_KEYS)
    if running is not None:
        live = next((m for m in (seen, progress) if m.get("version") == running.version), None)
        if live is not None:
            return {k: live.get(k) for k in LANE_STEP_KEYS}
        return {**nothing, "phase": running.phase or str(running.status)}
    if progress and idle_step.get("phase") == "waiting_gpu":  # no progress: the run ended, its lanes idle
        return {**nothing, "phase": "waiting_gpu", "step": idle_step.get("step")}
    return {**nothing, "phase": "idle"}


def _text(v: Any) -> str | None:
    return v if isinstance(v, str) and v else None


def _mapping(v: Any) -> Mapping[str, Any]:
    return v if isinstance(v, Mapping) else {}


def external_truth(iterations: Sequence[Iteration]) -> dict[str, Any]:
    """`kopt status --json`'s `external_truth`: what confirmed BEST's keep, {version, kind
    ("profiler" | "os_time" | "none"), outcome, reason} (a keep without a record of it: kind
    "none", "confirmed by the bench's timer only (...)"; every value None while BEST is the
    baseline), and `timer_only`: the versions of the run's unmasked keeps that had no
    external truth (none, or the OS's that could not tell: such a keep was accepted in review)."""
    from kopt_supervisor.engine.decide.external_truth import truth_line

    def kind(it: Iteration) -> tuple[str, str]:
        got = it.record.get("external_truth")
        if isinstance(got, dict) and got.get("kind"):
            return str(got["kind"]), str(got.get("outcome") or "")
        return "none", "unconfirmed"

    keeps = [it for it in iterations if it.kept and not it.masked and it.status != Status.BASELINE]
    best = projections.best_iteration(iterations)
    if best is None or best.status == Status.BASELINE:
        head: dict[str, Any] = {"version": None, "kind": None, "outcome": None, "reason": None}
    else:
        k, outcome = kind(best)
        head = {
            "version": best.version,
            "kind": k,
            "outcome": outcome,
            "reason": truth_line(dict(best.record), str(best.status)),
        }
    return {
        **head,
        "timer_only": [it.version for it in keeps if kind(it)[0] == "none" or kind(it)[1] == "inconclusive"],
    }


BUCKETS = ("wait", "propose", "measure", "confirm", "review", "stale")
"""engine/loop/spent.py SPENT, in the order an iteration passes them (the engine's own list;
kept here so that reading a run loads no part of the loop)."""


@dataclass(frozen=True)
class SpeedupPoint:
    version: int
    """The keep that moved BEST."""
    t_s: float
    """Wall seconds from the first candidate's start to this keep's end."""
    gpu_s: float
    """Lane-seconds (GPU-seconds) of every candidate iteration ended by then, this one included."""
    speedup: float
    """The best speedup over the baseline after this keep (geometric mean over classes)."""


@dataclass(frozen=True)
class LaneTime:
    lane: int
    iterations: int
    busy_s: float
    """Seconds its iterations ran (their total_s)."""
    wait_s: float
    propose_s: float
    measure_s: float
    confirm_s: float
    review_s: float
    stale_s: float
    other_s: float
    """busy_s less the buckets: kopt's own bookkeeping, discards, records without buckets."""
    rebased: int
    """Times BEST moved under one of its candidates and the change was put on the new BEST."""
    handed_back: int
    """Times a change that no longer applied went back to its proposer."""
    stale_iterations: int
    """Iterations that ended because their change no longer applied on a moved BEST."""
    carried: int = 0
    """Times a keep decided against a BEST another lane moved was put on the new one and only
    its claim confirmed there (loop/keep.py Keeper.carry)."""


@dataclass(frozen=True)
class Progress:
    curve: tuple[SpeedupPoint, ...]
    lanes: tuple[LaneTime, ...]
    elapsed_s: float
    """Wall seconds from the first candidate's start to the last one's end (0: none ended)."""
    gpu_s: float
    """Lane-seconds of every ended candidate iteration (the sum of the lanes' busy_s)."""
    best_speedup: float | None
    stale_s: float

    @property
    def stale_share(self) -> float | None:
        """The share of GPU time thrown away on stale candidates (None before any)."""
        return self.stale_s / self.gpu_s if self.gpu_s > 0 else None

    @property
    def gpu_hours(self) -> float:
        return self.gpu_s / 3600

    def time_to(self, speedup: float) -> SpeedupPoint | None:
        """The first keep that reached `speedup` (None: not reached)."""
        return next((p for p in self.curve if p.speedup >= speedup), None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "curve": [asdict(p) for p in self.curve],
            "lanes": [asdict(x) for x in self.lanes],
            "elapsed_s": self.elapsed_s,
            "gpu_s": self.gpu_s,
            "gpu_hours": self.gpu_hours,
            "best_speedup": self.best_speedup,
            "stale_s": self.stale_s,
            "stale_share": self.stale_share,
        }

    def line(self) -> str:
        """One line: "2.73× in 7:02 (0.35 GPU-h) · stale 3%" ("" before any candidate ended)."""
        if not self.gpu_s:
            return ""
        parts = [
            f"{fmt.speedup(self.best_speedup)} in {fmt.clock(self.elapsed_s)} ({self.gpu_hours:.2f} GPU-h)"
            if self.best_speedup
            else f"{fmt.clock(self.elapsed_s)} ({self.gpu_hours:.2f} GPU-h)"
        ]
        if self.stale_share is not None:
            parts.append(f"stale {fmt.share(100 * self.stale_share)}")
        return " · ".join(parts)


def _seconds(v: Any) -> float:
    return float(v) if fmt.is_num(v) else 0.0


def _spent(it: Iteration) -> dict[str, float]:
    timings = it.record.get("timings")
    spent = timings.get("spent") if isinstance(timings, dict) else None
    return {b: _seconds(spent.get(b)) for b in BUCKETS} if isinstance(spent, dict) else dict.fromkeys(BUCKETS, 0.0)


def _total(it: Iteration) -> float:
    timings = it.record.get("timings")
    total = _seconds(timings.get("total_s")) if isinstance(timings, dict) else 0.0
    if not total and it.finished_at and it.started_at:
        total = max(0.0, it.finished_at - it.started_at)
    return total


def _lane(it: Iteration) -> int:
    lane = it.record.get("lane", 0)
    return lane if isinstance(lane, int) and not isinstance(lane, bool) and lane >= 0 else 0


def progress(iterations: Sequence[Iteration], direction: str = "min") -> Progress:
    """The run's Progress from its iterations (the trusted history: a forged keep counts for
    nothing; masked iterations spent their time but moved nothing)."""
    base = [it for it in iterations if it.status == Status.BASELINE and not it.masked]
    ended = sorted(
        (it for it in iterations if it.final and it.status != Status.BASELINE), key=lambda it: (it.order, it.version)
    )
    t0 = min((it.started_at for it in ended if it.started_at), default=0.0)
    curve: list[SpeedupPoint] = []
    lanes: dict[int, dict[str, float]] = {}
    gpu_s = stale_s = last_end = 0.0
    seen: list[Iteration] = list(base)
    for it in ended:
        total = _total(it)
        gpu_s += total
        last_end = max(last_end, it.finished_at or 0.0)
        spent = _spent(it)
        if it.record.get("stale"):
            spent = {**dict.fromkeys(BUCKETS, 0.0), "stale": total}
        lane = lanes.setdefault(
            _lane(it),
            {
                "iterations": 0.0,
                "busy_s": 0.0,
                "rebased": 0.0,
                "handed_back": 0.0,
                "stale_iterations": 0.0,
                "carried": 0.0,
                **{b: 0.0 for b in BUCKETS},
            },
        )
        lane["iterations"] += 1
        lane["busy_s"] += total
        lane["rebased"] += len(it.record.get("rebased") or [])
        lane["handed_back"] += len(it.record.get("handed_back") or [])
        lane["stale_iterations"] += bool(it.record.get("stale"))
        lane["carried"] += len(it.record.get("carried") or [])
        for b in BUCKETS:
            lane[b] += spent[b]
        stale_s += spent["stale"]
        seen.append(it)
        if it.kept and not it.masked:
            s = best_speedup(seen, direction)
            if s is not None:
                curve.append(
                    SpeedupPoint(it.version, round(max(0.0, (it.finished_at or t0) - t0), 3), round(gpu_s, 3), s)
                )
    out = tuple(
        LaneTime(
            lane=i,
            iterations=int(v["iterations"]),
            busy_s=round(v["busy_s"], 3),
            wait_s=round(v["wait"], 3),
            propose_s=round(v["propose"], 3),
            measure_s=round(v["measure"], 3),
            confirm_s=round(v["confirm"], 3),
            review_s=round(v["review"], 3),
            stale_s=round(v["stale"], 3),
            other_s=round(max(0.0, v["busy_s"] - sum(v[b] for b in BUCKETS)), 3),
            rebased=int(v["rebased"]),
            handed_back=int(v["handed_back"]),
            stale_iterations=int(v["stale_iterations"]),
            carried=int(v["carried"]),
        )
        for i, v in sorted(lanes.items())
    )
    return Progress(
        tuple(curve),
        out,
        round(max(0.0, last_end - t0), 3) if ended else 0.0,
        round(gpu_s, 3),
        best_speedup(list(iterations), direction) if base else None,
        round(stale_s, 3),
    )


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
