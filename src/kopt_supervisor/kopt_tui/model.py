"""What the TUI shows, derived from one look at a run (pure: no Textual, no I/O).

`RunData` is one consistent reading of a run (made by `kopt_tui.watch` in its thread). The
functions below turn it into small frozen view records, one per panel. Widgets hold these
records in reactive attributes, so a panel re-renders only when what it shows changed:
a heartbeat that moved re-renders the state line and nothing else.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from kopt_supervisor.engine import api
from kopt_supervisor.engine.api import Command, Config, Counters, Event, Iteration, fmt

# ---------------------------------------------------------------------------------------
# One reading of a run


@dataclass(frozen=True, eq=False)
class RunData:
    tag: str
    meta: dict[str, Any]
    iterations: tuple[Iteration, ...]
    alive: bool
    pid: int | None
    pending_commands: tuple[Command, ...] = ()
    review_answers: tuple[Command, ...] = ()
    """The pending commands that answer a review and that the run's secret vouches for
    (engine.api.run_io.review_answers): a review with one is answered, the engine applies it."""
    last_event: Event | None = None
    config: Config | None = None
    workspace: str = ""
    generation: int = 0
    """Moves whenever an iteration row changed: views derived from the history only are
    recomputed when it moved (a heartbeat alone leaves it as it was)."""
    carried_spending: dict[str, Any] | None = None
    """The previous reading's `agent_spending` when the history did not move since (a
    heartbeat must not re-add a thousand records)."""

    @cached_property
    def run_meta(self) -> api.RunMeta:
        """`meta` read once into typed values (engine.api.run_meta)."""
        return api.run_meta(self.meta)

    @cached_property
    def state(self) -> str:
        """engine.api.effective_state (with several lanes: what the lanes do together)."""
        return api.effective_state(self.meta, self.alive, self.lanes)

    @cached_property
    def by_version(self) -> dict[int, Iteration]:
        return {it.version: it for it in self.iterations}

    @cached_property
    def counters(self) -> Counters:
        return api.counters(list(self.iterations))

    @cached_property
    def reviews(self) -> tuple[api.PendingReview, ...]:
        """The review queue: every lane's candidates awaiting the engineer, oldest review
        first, each with the answer already sent for it (engine.api.review_queue)."""
        return tuple(api.review_queue(self.iterations, self.meta, self.review_answers, alive=self.alive))

    @property
    def pending_reviews(self) -> tuple[int, ...]:
        """The versions awaiting review, oldest review first (answered or not)."""
        return tuple(r.version for r in self.reviews)

    @property
    def open_reviews(self) -> tuple[api.PendingReview, ...]:
        """The reviews waiting for an answer: none sent yet, and not measured again now."""
        return tuple(r for r in self.reviews if r.open)

    @property
    def direction(self) -> str:
        return self.config.target.direction if self.config else "min"

    @cached_property
    def best_commit(self) -> str | None:
        return api.best_commit(list(self.iterations)) or self.run_meta.baseline_commit

    @cached_property
    def best_speedup(self) -> float | None:
        return api.best_speedup(list(self.iterations), self.direction)

    @property
    def heartbeat_t(self) -> float | None:
        return self.run_meta.heartbeat_t

    @property
    def last(self) -> Iteration | None:
        return self.iterations[-1] if self.iterations else None

    @cached_property
    def agent_spending(self) -> dict[str, Any]:
        """What the agent cost over the run (engine.api.agent_spending), with the budget."""
        if self.carried_spending is not None:
            return self.carried_spending
        p = self.config.propose if self.config else None
        return api.agent_spending(self.iterations, p.budget_usd if p else 0.0, p.budget_tokens if p else 0)

    @cached_property
    def spending(self) -> api.AgentSpending:
        """`agent_spending`, typed (engine.api.spending)."""
        return api.spending(self.agent_spending)

    @cached_property
    def decision_cost(self) -> api.DecisionEstimate | None:
        """What one decision costs with this bench (engine.api.decision_cost), None before the baseline."""
        return api.decision_estimate(api.decision_cost(self.meta, self.iterations[:1]))

    @cached_property
    def lanes(self) -> tuple[dict[str, Any], ...]:
        """engine.api.lane_states when the run has several lanes ([parallel].lanes); () with one."""
        n = self.config.parallel.lanes if self.config else 1
        return tuple(api.lane_states(self.meta, self.iterations, n, self.reviews)) if n > 1 else ()

    @cached_property
    def lane_states(self) -> tuple[api.LaneState, ...]:
        """`lanes`, typed (engine.api.lane_state)."""
        return tuple(api.lane_state(e) for e in self.lanes)

    def computed(self, name: str) -> Any:
        """A cached property's value if this reading computed it already, else None."""
        return self.__dict__.get(name)

    @property
    def engine_gone(self) -> bool:
        """No engine runs and the run did not end for a stated reason."""
        return not self.alive and self.state == "crashed"


# ---------------------------------------------------------------------------------------
# State line


@dataclass(frozen=True)
class StateView:
    tag: str
    state: str
    version: int | None
    step: str
    best_commit: str
    elapsed: str
    heartbeat: str
    reviews: tuple[int, ...]
    """The versions awaiting review, oldest review first."""
    pid: int | None
    paused: bool
    reason: str
    """Why the run stopped, or the engine's last error when it crashed."""
    queued: tuple[str, ...]
    """Commands waiting for an engine (e.g. an accept sent while none runs)."""
    last_event: str
    notice: str = ""
    """A standing caveat about the whole run (e.g. the CPU demo: timings are CPU timings)."""
    cpu_demo: bool = False
    """The demo ran without a GPU (Triton's interpreter): flagged on the top line too."""
    unsandboxed: bool = False
    """Some session ran with --no-sandbox: flagged on the top line, always."""
    cautions: tuple[str, ...] = ()
    """Standing caveats about the run's results, most serious first: the sandbox when it was
    off, a decision that costs minutes (its estimate), the notice."""
    agent_cost: str = ""
    """What the agent cost so far ($, or tokens when no CLI reported dollars), for the top line."""
    review_text: str = ""
    """"v7 (lane 1), v8 (lane 0) await your review; v6: accept sent" ("" with none pending)."""
    open_reviews: int = 0
    """How many reviews wait for an answer (none sent yet)."""


def review_line(d: RunData) -> str:
    """The pending reviews in a line, oldest first: those waiting for the engineer (with
    their lane when the run has several), then those whose answer is on its way."""
    lanes = d.config.parallel.lanes if d.config else 1

    def label(r: api.PendingReview) -> str:
        return f"v{r.version}" + (f" (lane {r.lane})" if lanes > 1 and r.lane is not None else "")

    waiting = [r for r in d.reviews if r.open]
    parts = (
        [f"{', '.join(label(r) for r in waiting)} {'awaits' if len(waiting) == 1 else 'await'} your review"]
        if waiting
        else []
    )
    parts += [f"{label(r)}: {r.answer.kind.replace('_', ' ')} sent" for r in d.reviews if r.answer is not None]
    parts += [f"{label(r)}: more rounds" for r in d.reviews if r.more_rounds and r.answer is None]
    return "; ".join(parts)


def state_view(d: RunData, now: float) -> StateView:
    m = d.run_meta
    step = ""
    if not d.alive and d.last is not None:  # while an engine runs, the progress line says more
        step = f"{d.last.status}" + (f" ({d.last.phase})" if d.last.status == "running" and d.last.phase else "")
    active = m.active_s
    started = m.engine_started_at
    if d.alive and started is not None:
        active += max(0.0, now - started)
    hb = d.heartbeat_t
    reason = ""
    if d.state == "crashed":
        err = m.last_error
        reason = fmt.one_line(err.splitlines()[0] if err else "the engine stopped without recording why (killed?)")
    elif d.state in ("stopped", "finished"):
        reason = fmt.one_line(m.stop_reason)
    ev = d.last_event
    return StateView(
        tag=d.tag,
        state=d.state,
        version=d.last.version if d.last else None,
        step=fmt.one_line(step, 120),
        best_commit=fmt.sha(d.best_commit),
        elapsed=fmt.clock(active) if active else fmt.DASH,
        heartbeat=fmt.age(None if hb is None else now - hb),
        reviews=d.pending_reviews,
        pid=d.pid if d.alive else None,
        paused=m.paused,
        reason=reason,
        queued=tuple(_command_label(c) for c in d.pending_commands if c.kind != "submit") if not d.alive else (),
        last_event=fmt.one_line(ev.message, 200) if ev else "",
        notice=fmt.one_line(m.notice, 200),
        cpu_demo=m.cpu_demo,
        unsandboxed=api.ran_unsandboxed(d.meta),
        cautions=cautions(d),
        agent_cost=agent_cost(d.spending),
        review_text=review_line(d),
        open_reviews=len(d.open_reviews),
    )


def cautions(d: RunData) -> tuple[str, ...]:
    out = []
    if api.ran_unsandboxed(d.meta):
        out.append(api.sandbox_line(d.meta))
    cost = d.decision_cost
    if cost and cost.slow:
        out.append(fmt.one_line(cost.text or "one decision takes minutes", 400))
    notice = fmt.one_line(d.run_meta.notice, 200)
    if notice:
        out.append(notice)
    return tuple(out)


def agent_cost(spending: api.AgentSpending) -> str:
    """The run's agent cost in a few characters: "$0.42", or "12.3k tok" when no run reported
    dollars; "" when no agent ran or none reported anything."""
    runs = spending.runs
    if runs and spending.runs_without_cost < runs:
        return fmt.usd(spending.cost_usd)
    if runs and spending.runs_without_tokens < runs:
        return f"{fmt.count(spending.tokens)} tok"
    return ""


def _command_label(c: Command) -> str:
    v = api.answer_version(c)
    return c.kind.replace("_", " ") + (f" v{v}" if v is not None else "")


# ---------------------------------------------------------------------------------------
# Progress of the step in flight


@dataclass(frozen=True)
class ProgressView:
    active: bool
    label: str
    done: int | None = None
    total: int | None = None
    elapsed: str = ""
    left: str = ""


def progress_view(d: RunData, now: float) -> ProgressView:
    if not d.alive:
        if d.state in ("stopped", "finished"):
            return ProgressView(False, f"the run is over: browse it, or continue it with E (or `kopt run {d.tag}`)")
        was = d.run_meta.progress
        last = (
            " ".join(x for x in (f"v{was.version}" if was.version is not None else "", was.phase, was.step) if x)
            if was
            else ""
        )
        return ProgressView(False, "no engine is running" + (f"; its last step: {last}" if last else ""))
    p = d.run_meta.progress
    if p is None:
        return ProgressView(True, "starting")
    version, phase, started = p.version, p.phase, p.phase_started_at
    elapsed = fmt.clock(now - started) if started is not None else ""
    left = ""
    if phase == "review" and version is not None:
        it = d.by_version.get(version)
        deadline = api.recorded_review(it.record).deadline if it else None
        if deadline is not None:
            left = fmt.clock(deadline - now)
    elif phase == "waiting_gpu" and d.config is not None and started is not None:
        left = fmt.clock(d.config.gpu.wait_max_s - (now - started))
    elif p.eta_s is not None and p.t is not None:
        left = fmt.clock(p.eta_s - (now - p.t))
    what, step = step_words(phase, p.step, p.done, p.total)
    label = " · ".join(x for x in (f"v{version}" if version is not None else "", what, step) if x)
    return ProgressView(True, label, p.done, p.total, elapsed, left)


STEP_WORDS = {
    "eval": "deciding",
    "verify": "re-checking after format",
    "reverify": "confirming the keep in fresh processes",
    "baseline": "measuring the baseline",
    "propose": "proposing",
    "review": "awaiting your review",
    "paused": "paused",
    "waiting_gpu": "waiting for an idle GPU",
}
"""A live step's phase (meta `progress`, a lane's step) as people read it."""


def step_words(phase: str, step: str, done: int | None, total: int | None) -> tuple[str, str]:
    """(what, step) of a live step: "deciding", "round 4 of up to 8"."""
    what = STEP_WORDS.get(phase, phase)
    text = step
    if done is not None and total:
        text = (
            f"round {done + 1} of up to {total}"
            if phase in ("eval", "verify", "reverify")
            else f"{done + 1} of {total}"
        )
    elif phase == "review":
        text = ""
    return what, text


# ---------------------------------------------------------------------------------------
# Lanes: several candidates at once ([parallel].lanes)


LANE_WORDS = {
    **STEP_WORDS,
    "idle": "idle",
    "gate": "taking its GPU",
    "police": "checking the candidate",
    "measure": "measuring",
    "evidence": "gathering evidence",
    "keep": "keeping",
    "commit": "committing",
    "advance": "committing",
    "discard": "discarding",
}
"""A lane's phase as people read it: its live step's, or its iteration row's before the step
has one (engine.api.lane_states)."""


SHORT_LANE_WORDS = {
    "waiting for an idle GPU": "waiting for GPU",
    "checking the candidate": "checking",
    "gathering evidence": "evidence",
    "confirming the keep in fresh processes": "confirming",
    "re-checking after format": "re-checking",
    "measuring the baseline": "baseline",
}
"""A lane's words where a narrow terminal has little room."""


@dataclass(frozen=True)
class LaneRow:
    lane: int
    version: int | None
    """The iteration in flight in this lane, None when it is idle."""
    what: str
    step: str
    done: int | None
    total: int | None
    gpu: str
    """"GPU 1", the GPU's name when it has no index (a CPU-only target), "" when none is known."""
    host: str
    short: str = ""
    """What it does in a few characters (a narrow terminal): "deciding 2/4", "review 1 of 2"."""
    candidate: str = ""
    """The hypothesis in flight ("" while it is proposed, or when idle)."""
    interval: str = ""
    """The change its decision stands at and its interval: "-0.5% [-0.6, -0.4]" ("" before
    min_rounds looks are in)."""
    interval_cls: str = ""
    """The class that interval is of (the decision's focus)."""
    verdict: str = ""
    """That class's verdict so far (improved, regressed, tied, undecided)."""
    review: int | None = None
    """Its place in the review queue (1: the oldest review; 0: a place the record does not
    say), None when it awaits no review."""
    answered: bool = False
    """Its review has an answer on the way to the engine, or is being measured again."""

    @property
    def reviewing(self) -> bool:
        """Its candidate awaits review (answered or not)."""
        return self.review is not None

    @property
    def needs_you(self) -> bool:
        """Its review waits for the engineer's answer."""
        return self.review is not None and not self.answered


@dataclass(frozen=True)
class LanesView:
    rows: tuple[LaneRow, ...]
    live: bool
    """An engine runs and is not paused: the rows are what the lanes do now, not the steps
    they did last (a pause preempts them; they are taken again on resume)."""

    @property
    def busy(self) -> int:
        return sum(r.version is not None for r in self.rows)

    @property
    def needing_you(self) -> int:
        """Lanes whose review waits for the engineer's answer."""
        return sum(r.needs_you for r in self.rows)


def lane_row(entry: api.LaneState | Mapping[str, Any]) -> LaneRow:
    """One lane (engine.api.lane_state: an entry of `kopt status --json`'s `lanes`) as a lane's line."""
    e = entry if isinstance(entry, api.LaneState) else api.lane_state(entry)
    done, total, review = e.done, e.total, e.review
    what, step = step_words(e.phase, e.step, done, total)
    what = LANE_WORDS.get(e.phase, what)
    if e.phase == "waiting_gpu":
        step = ""  # "lane 1: no idle GPU ...": the words say it
    short = SHORT_LANE_WORDS.get(what, what)
    if done is not None and total:
        short = f"{short} {done + 1}/{total}"
    if review and review.answer:
        what = short = f"{review.answer.replace('_', ' ')} sent"
        step = "the engine applies it"
    elif review and review.more_rounds:
        what = "more rounds"
        short = f"more rounds {done + 1}/{total}" if done is not None and total else what
    elif review:
        what, short = "awaiting your review", "review"
        if review.place is not None and review.of is not None and review.of > 1:
            step = f"{review.place} of {review.of}"
            short = f"review {review.place} of {review.of}"
    span = e.interval
    return LaneRow(
        lane=e.lane,
        version=e.version,
        what=what,
        step=fmt.one_line(step, 120),
        done=done,
        total=total,
        gpu=fmt.one_line(gpu_label(e.gpu), 40),
        host=fmt.one_line(e.host, 40),
        short=fmt.one_line(short, 40),
        candidate=fmt.one_line(e.hypothesis, 200),
        interval=f"{fmt.change(span.delta_pct, 1)} {fmt.interval(span.lo, span.hi)}" if span else "",
        interval_cls=fmt.one_line(span.cls, 40) if span else "",
        verdict=span.verdict if span else "",
        review=(review.place or 0) if review else None,
        answered=review is not None and (bool(review.answer) or review.more_rounds),
    )


def gpu_label(gpu: api.GpuRef | None) -> str:
    """ "GPU 1", or the GPU's name when it has no index (a CPU-only target); "" when none is known."""
    if gpu is None:
        return ""
    return f"GPU {gpu.index}" if gpu.index is not None else gpu.name


def lanes_view(d: RunData) -> LanesView | None:
    """One row per lane; None with one lane (the progress line says it all)."""
    if not d.lane_states:
        return None
    return LanesView(
        tuple(lane_row(e) for e in d.lane_states), d.alive and d.state != "paused" and not d.run_meta.paused
    )


# ---------------------------------------------------------------------------------------
# History


@dataclass(frozen=True)
class HistoryRow:
    version: int
    started: str
    hypothesis: str
    cls: str
    status: str
    delta: float | None
    """Percent change of the headline class (negative: faster), None when not measured."""
    commit: str
    masked: bool


def headline_delta(it: Iteration) -> float | None:
    """The target class's change, or the geometric mean over classes for a global change."""
    classes = {c.cls: c for c in api.recorded_classes(it.record)}
    if it.status == "baseline" or not classes:
        return None
    if it.target_class and it.target_class in classes:
        r = classes[it.target_class].ratio
        return (r - 1.0) * 100.0 if r is not None else None
    mean = api.geomean(api.positive_finite(c.ratio for c in classes.values()))
    return None if mean is None else (mean - 1.0) * 100.0


def history_row(it: Iteration, ref_t: float | None = None) -> HistoryRow:
    return HistoryRow(
        version=it.version,
        started=fmt.when(it.started_at, ref_t),
        hypothesis=fmt.one_line(it.hypothesis or ("(proposing…)" if it.status == "running" else ""), 200),
        cls=it.target_class or ("all" if it.status != "baseline" else ""),
        status=it.status,
        delta=headline_delta(it),
        commit=fmt.sha(it.commit, 8) if it.commit else "",
        masked=it.masked,
    )


def history_rows(d: RunData) -> list[HistoryRow]:
    ref = d.last.started_at if d.last else None
    return [history_row(it, ref) for it in d.iterations]


# ---------------------------------------------------------------------------------------
# Counters


@dataclass(frozen=True)
class RecentRegression:
    version: int
    cls: str
    delta: float | None
    hypothesis: str


@dataclass(frozen=True)
class CountersView:
    consecutive: int
    limit: int
    keeps: int
    candidates: int
    failures_in_row: int
    recent: tuple[RecentRegression, ...] = ()
    agent: str = ""
    """What the agent cost over the run (engine.api.agent_line), "" when no agent ran."""
    decision: str = ""
    """What one decision costs with this bench (after the baseline), "" before."""
    decision_slow: bool = False


def counters_view(d: RunData) -> CountersView:
    c = d.counters
    limit = d.config.stop.consecutive_regressions if d.config else 5
    regressions = (api.regression_summary(r) for r in c.recent_regressions)
    recent = tuple(
        RecentRegression(r.version, r.cls or "all", r.delta_pct, fmt.one_line(r.hypothesis, 120)) for r in regressions
    )
    cost = d.decision_cost
    return CountersView(
        c.consecutive_regressions,
        limit,
        c.keeps,
        c.candidates,
        c.consecutive_failures,
        recent,
        agent=api.agent_line(d.spending),
        decision=decision_line(cost),
        decision_slow=bool(cost and cost.slow),
    )


MODE_WORDS = {"process": "process-level", "served": "served"}
"""How a bench is measured (DecisionEstimate.mode) as people read it."""


def decision_line(cost: api.DecisionEstimate | None) -> str:
    """One decision's estimated wall time: "≈ 8.2 s for a change, 14 s for none
    (process-level)"; "" without an estimate (`kopt status` has the whole estimate)."""
    if not cost:
        return ""
    mode = MODE_WORDS.get(cost.mode, cost.mode or "bench")
    return f"≈ {duration(cost.seconds_change)} for a change, {duration(cost.seconds_tie)} for none ({mode})"


def duration(x: float | None) -> str:
    """A duration people estimate with: 0.4 s, 8.2 s, 42 s, 3:05, 1:02:03."""
    if x is None:
        return fmt.DASH
    if x < 10:
        return f"{x:.1f} s"
    return f"{x:.0f} s" if x < 60 else fmt.clock(x)


# ---------------------------------------------------------------------------------------
# Per-class deltas


@dataclass(frozen=True)
class ClassRow:
    cls: str
    best: float | None
    cand: float | None
    ratio: float | None
    lo: float | None
    hi: float | None
    rounds: int | None
    verdict: str
    roof_pct: float | None
    target: bool


@dataclass(frozen=True)
class ClassesView:
    version: int | None
    title: str
    rows: tuple[ClassRow, ...] = ()


def class_rows(it: Iteration, live: api.LiveClasses | None = None) -> tuple[ClassRow, ...]:
    """The iteration's classes; while it runs, its decision's classes after the last look
    (`live`: meta `live_classes`) when they are of this iteration."""
    classes = api.recorded_classes(it.record)
    if it.status == "running" and live is not None and live.version == it.version:
        classes = live.classes or classes
    roof = api.roofline_pct(it.record)
    baseline = it.status == "baseline"
    return tuple(
        ClassRow(
            cls=c.cls,
            best=c.best,
            cand=None if baseline else c.cand,
            ratio=None if baseline else c.ratio,
            lo=c.lo,
            hi=c.hi,
            rounds=c.rounds,
            verdict=c.verdict or ("baseline" if baseline else ""),
            roof_pct=c.pct_of_peak if c.pct_of_peak is not None else roof.get(c.cls),
            target=bool(it.target_class) and c.cls == it.target_class,
        )
        for c in classes
    )


def classes_view(d: RunData, version: int | None) -> ClassesView:
    it = d.by_version.get(version) if version is not None else None
    if it is None:
        return ClassesView(None, "per-class deltas")
    live = d.run_meta.live_classes
    rows = class_rows(it, live)
    if it.status == "running":
        stage = live.stage if live is not None and live.version == it.version else ""
        title = f"v{it.version} live" + (f" ({stage})" if stage else "")
    else:
        title = f"v{it.version} {it.status}"
    return ClassesView(it.version, title, rows)


# ---------------------------------------------------------------------------------------
# Best latency per class over iterations


@dataclass(frozen=True)
class SeriesView:
    cls: str
    values: tuple[float, ...]
    """The best value after each iteration (a step series over versions)."""
    first: float | None
    last: float | None


def best_series(d: RunData) -> tuple[SeriesView, ...]:
    best: dict[str, float] = {}
    points: dict[str, list[float]] = {}
    for it in d.iterations:
        if not it.masked and it.kept:
            for c in api.recorded_classes(it.record):
                value = c.best if it.status == "baseline" else c.cand
                if value is not None:
                    best[c.cls] = value
        for cls, v in best.items():
            points.setdefault(cls, []).append(v)
    return tuple(SeriesView(cls, tuple(vals), vals[0], vals[-1]) for cls, vals in sorted(points.items()))


# ---------------------------------------------------------------------------------------
# GPUs


@dataclass(frozen=True)
class GpuRow:
    index: int
    name: str
    util: float | None
    mem_used: float | None
    mem_total: float | None
    processes: tuple[str, ...]
    idle: bool
    reasons: tuple[str, ...]
    chosen: bool
    lanes: tuple[int, ...] = ()
    """With several lanes: the lanes whose iteration in flight runs on this GPU (then `chosen`,
    the last gate's choice of any lane, is not marked)."""


@dataclass(frozen=True)
class GpusView:
    rows: tuple[GpuRow, ...] = ()
    source: str = ""
    """"live" (the TUI's own sampling) or "gate" (the engine's last gate record)."""
    note: str = ""


def gpu_rows(
    assessments: Sequence[api.GpuAssessment], chosen_uuid: str | None = None, lanes: Sequence[api.LaneState] = ()
) -> tuple[GpuRow, ...]:
    """`lanes` (RunData.lane_states, several lanes): each GPU marked with the busy lanes on
    it, by UUID on this host, instead of the last gate's choice."""
    on: dict[str, list[int]] = {}
    for e in lanes:
        if e.version is not None and e.gpu is not None and e.gpu.uuid is not None and e.gpu.host in ("", "local"):
            on.setdefault(e.gpu.uuid, []).append(e.lane)
    return tuple(
        GpuRow(
            index=a.index,
            name=a.name or "GPU",
            util=a.util_pct,
            mem_used=a.mem_used_mib,
            mem_total=a.mem_total_mib,
            processes=tuple(f"{p.pid} {p.name or '?'}" for p in a.processes),
            idle=a.idle,
            reasons=a.reasons,
            chosen=not lanes and chosen_uuid is not None and a.uuid == chosen_uuid,
            lanes=tuple(on.get(a.uuid, ())) if a.uuid is not None else (),
        )
        for a in assessments
    )


def gpus_view(d: RunData, live: Sequence[api.GpuAssessment] | None, now: float) -> GpusView:
    gate, progress = d.run_meta.gate, d.run_meta.progress
    chosen = gate.chosen.uuid if gate.chosen else None
    if live:
        rows, source = gpu_rows(live, chosen, d.lane_states), "live"
    else:
        rows, source = gpu_rows(gate.assessments, chosen, d.lane_states), "gate"
    if not rows:
        vendor = d.config.gpu.vendor if d.config else "auto"
        note = (
            "no GPU seen: a CPU-only target (its timings are CPU timings)"
            if vendor in ("none", "auto")
            else f"no {vendor} GPU readable from this machine"
        )
        return GpusView((), source, note)
    note = ""
    if d.alive and progress is not None and progress.phase == "waiting_gpu":
        started = progress.phase_started_at
        waited = now - started if started is not None else None
        limit = d.config.gpu.wait_max_s if d.config else None
        note = f"gate: no idle GPU, waiting {fmt.clock(waited)}" + (
            f"; gives up in {fmt.clock(limit - waited)}" if limit and waited is not None else ""
        )
    elif gate.chosen:
        lane = gate.lane if d.lane_states else None
        note = (
            f"gate chose GPU {gate.chosen.index}"
            + (f" for lane {lane}" if lane is not None else "")
            + (f" at {fmt.when(gate.t)}" if gate.t is not None else "")
        )
    return GpusView(rows, source, note)


# ---------------------------------------------------------------------------------------
# Review and restart


@dataclass(frozen=True)
class ReviewView:
    version: int
    hypothesis: str
    target: str
    reason: str
    flags: tuple[str, ...]
    rounds: int | None
    gpu_seconds: float | None
    deadline_left: str
    policy: str
    rows: tuple[ClassRow, ...] = field(default=())
    lane: int | None = None
    """The lane it was measured in (engine.api.PendingReview.lane)."""
    gpu: str = ""
    """"GPU 1 (local)": the GPU it was measured on, "" when the record names none."""


def review_view(d: RunData, version: int, now: float) -> ReviewView | None:
    it = d.by_version.get(version)
    if it is None:
        return None
    dec = api.recorded_decision(it.record)
    review = api.recorded_review(it.record)
    deadline = review.deadline
    policy = d.config.decide.review_default if d.config else "reject"
    pending = next((r for r in d.reviews if r.version == version), None)
    gpu = api.gpu_ref(pending.gpu if pending else None)
    where = gpu_label(gpu)
    if where and gpu is not None and gpu.host:
        where += f" ({gpu.host})"
    return ReviewView(
        version=it.version,
        hypothesis=fmt.one_line(it.hypothesis, 300),
        target=it.target_class or "all classes (global)",
        reason=fmt.one_line(review.reason or dec.reason, 300),
        flags=dec.flags,
        rounds=dec.rounds,
        gpu_seconds=dec.gpu_seconds,
        deadline_left=fmt.clock(deadline - now) if deadline is not None and d.alive else "",
        policy=policy,
        rows=class_rows(it),
        lane=pending.lane if pending else None,
        gpu=fmt.one_line(where, 60),
    )


def restart_points(iterations: tuple[Iteration, ...] | list[Iteration]) -> list[Iteration]:
    """Where a masked partial restart may start: the baseline and kept iterations, unmasked."""
    return [it for it in iterations if api.restart_point_problem(it, it.version) is None]


def restart_masks(iterations: tuple[Iteration, ...] | list[Iteration], version: int) -> list[Iteration]:
    """The iterations a restart from `version` masks: every later unmasked one."""
    return [it for it in iterations if it.version > version and not it.masked]


def nearest_restart_point(iterations: tuple[Iteration, ...] | list[Iteration], version: int | None) -> int | None:
    points = [it.version for it in restart_points(iterations)]
    if not points:
        return None
    if version is None:
        return points[-1]
    earlier = [v for v in points if v <= version]
    return earlier[-1] if earlier else points[0]


# ---------------------------------------------------------------------------------------
# Runs (home)


@dataclass(frozen=True)
class RunSummary:
    tag: str
    state: str
    iteration: int | None
    status: str
    speedup: float | None
    reviews: tuple[int, ...]
    heartbeat: str
    note: str
    unsandboxed: bool = False
    """Some session ran with --no-sandbox: its speedup is the word of unconfined code."""


def run_summary(d: RunData, now: float) -> RunSummary:
    hb, m = d.heartbeat_t, d.run_meta
    note = ""
    if d.state in ("crashed", "unreadable"):
        note = fmt.one_line(m.last_error.splitlines()[0] if m.last_error else "engine gone", 120)
    elif d.state in ("stopped", "finished"):
        note = fmt.one_line(m.stop_reason, 120)
    elif d.alive and m.progress is not None:
        note = fmt.one_line(f"{m.progress.phase} {m.progress.step}", 120)
    return RunSummary(
        tag=d.tag,
        state=d.state,
        iteration=d.last.version if d.last else None,
        status=d.last.status if d.last else "",
        speedup=d.best_speedup,
        reviews=d.pending_reviews,
        heartbeat=fmt.age(None if hb is None else now - hb) if (d.alive or d.state == "crashed") else fmt.DASH,
        note=note,
        unsandboxed=api.ran_unsandboxed(d.meta),
    )
