"""The decision's data and the per-class estimate: paired samples in, per-class results out.

The data are plain: a `Pair` is one paired observation of one config, the best tree's and the
candidate's metric taken in the same look (a process-level ABBA round, or a served look);
`Policy` holds the knobs, `ClassResult` one class's result, `Verdict` the
run's (with `FLAGS`, every flag it can carry). Ratios are always oriented so that below 1
means the candidate is better, whatever the metric's direction.

The estimate (pure functions; each step explained in docs/decision.md) turns the pairs into a
drift-cancelling, outlier-robust estimate of the mean log cost ratio and an interval that
stays valid however many times it is looked at:

1. One sample per (look, block): the mean over the class's configs of log(cost ratio);
   rounds the GPU gate flagged as disturbed are left out.
2. Outliers (a throttling spike, a stray process) are found by the generalized ESD test
   (at most one sample in five) and left out.
3. The estimate is the order-balanced mean (mean of the AB samples and of the BA samples,
   averaged), so a linear drift, which adds +d to every AB sample and -d to every BA one,
   cancels exactly whatever the count of each.
4. The interval is Student's t at level alpha_k for look k, where alpha is spent over the
   looks min_rounds..max_rounds in proportion to the look index (alpha_k = alpha * k /
   sum of the planned look indices). The union bound makes the intervals hold jointly over
   every look with probability >= confidence, so stopping at the first decisive look, or
   never, keeps the error rate.
5. A look may carry several blocks (`Pair.block`; the simulations of docs/decision.md do,
   and the one-process ab_command did until 2026-12-01). Blocks of one process share whatever
   that process drew (buffer addresses, the clock it settled at), so they are not independent
   samples of the candidate/best ratio: the look is the unit, one order-balanced mean of its
   blocks per look (and outliers are looked for again among the look means).
   Policy.pool_blocks treats every block as a sample instead, for callers that know the looks
   share all that (one process, the same buffers).
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import asdict, dataclass, field, fields
from typing import Any, NamedTuple

from kopt_supervisor.engine import BadInput
from kopt_supervisor.engine.config import DecideConfig
from kopt_supervisor.engine.config.toml_io import decide_problems
from kopt_supervisor.engine.decide import esd_outliers, f_quantile, geomean, mean, t_quantile
from kopt_supervisor.engine.records import known_fields

CLASS_VERDICTS = ("improved", "regressed", "tied", "undecided")
RUN_VERDICTS = ("keep", "regression", "likely_regression", "tie", "split", "borderline", "undecided")
"""likely_regression: at the final look a class's estimate is a loss beyond min_effect_pct
(beyond the tolerance for a non-target class) that the policy's confidence could not
prove; discarded, and counted as a regression (it must not reset the consecutive-regression
counter as a tie does)."""


@dataclass(frozen=True)
class Pair:
    """One paired observation of one config (metric values in the bench's unit)."""

    config: str
    cls: str
    best: float
    cand: float
    round: int
    """The look this pair belongs to: a process-level round, or a served look."""
    order: str = "AB"
    """"AB" (best ran first) or "BA"; blocks of a look alternate too."""
    block: int = 0
    """Index of the block within a look (0: a look of one block, as kopt's measurers take)."""
    flagged: bool = False
    """The gate saw throttling or a foreign process during this round."""
    best_mean: float = math.nan
    cand_mean: float = math.nan
    """The bench's own mean over the timed calls behind `best` / `cand` (a column
    `<metric>_mean` beside a metric that is a median, `metrics.ConfigResult.mean`); NaN when
    the bench reports none. `plausible.mean_not_faster` compares the two."""
    best_last: float = math.nan
    cand_last: float = math.nan
    """The metric of the look's last timed block alone (a column `<metric>_last`, the
    harness's `us_last` in a served look: the block whose outputs kopt audits,
    `metrics.ConfigResult.last`); NaN when the bench reports none.
    `plausible.last_block_not_faster` compares the two."""


@dataclass(frozen=True)
class Policy(DecideConfig):
    """The decision's knobs: every key of [decide] in kopt.toml (`DecideConfig`, where each
    is documented: Policy derives from it, so a new key reaches the decision with no
    restating), plus the metric's direction and `pool_blocks`.
    `verify_after_format` and `production_verdicts` ride along; the loop reads them."""

    direction: str = "min"
    """"min" (latency) or "max" (throughput), from [target].direction."""
    pool_blocks: bool = False
    """Looks of several blocks: treat every block as a sample (df = blocks - 1) instead of one
    mean per look (df = looks - 1). Only valid when the looks cannot differ from one another
    (one process, the same buffers); a per-process offset makes pooled intervals far too narrow."""

    def __post_init__(self) -> None:
        problems = decide_problems(self)
        if self.direction not in ("min", "max"):
            problems.append(("direction", f'(from [target].direction) must be "min" or "max", not {self.direction!r}'))
        if problems:
            key, why = problems[0]
            raise BadInput(f"[decide].{key} {why}")

    @classmethod
    def from_config(cls, cfg: DecideConfig, direction: str = "min", **extra: Any) -> Policy:
        """The policy of a kopt.toml's [decide] section: every one of its keys, as it is."""
        values = {f.name: getattr(cfg, f.name) for f in fields(DecideConfig)}
        return cls(**values, direction=direction, **extra)

    def cost_ratio(self, best: float, cand: float) -> float:
        """cand/best for latency, best/cand for throughput: below 1 is always a gain."""
        return cand / best if self.direction == "min" else best / cand


@dataclass(frozen=True)
class ClassResult:
    cls: str
    rounds: int
    """Looks that contributed to this class."""
    n: int
    """Paired samples behind the interval."""
    best: float
    """Geometric mean of the best tree's metric over the class's configs and samples."""
    cand: float
    ratio: float
    """Estimated cost ratio candidate/best (below 1: the candidate is better)."""
    lo: float
    hi: float
    """The ratio's interval at the policy's confidence, valid under repeated looks."""
    verdict: str
    """improved | regressed | tied | undecided"""
    outliers: int = 0
    """Samples left out as outliers (a throttling spike, a stray process) by the ESD test."""
    disturbed: int = 0
    """Samples left out because the GPU gate flagged their round (Pair.flagged)."""
    unit: str = "sample"
    """What the interval was computed over: "sample" (each process-level round, or each
    block when Policy.pool_blocks) or "look" (one mean per look of several blocks)."""
    plausible_lo: float = math.nan
    plausible_hi: float = math.nan
    """For a class still undecided: the ratio's interval at policy.futility_confidence. At
    the final look it resolves the class (see Policy.futility_confidence); before, a lower
    end that rules out a gain of min_effect_pct lets the run verdict end early when no other
    outcome could change it and it is no keep (verdict.gain_ruled_out)."""
    pooled_df: int = 0
    """0: the interval's width is from this decision's own looks; else from the run's earlier
    decisions' spread ([decide].pooled_noise), with these degrees of freedom."""

    @property
    def delta_pct(self) -> float:
        return (self.ratio - 1.0) * 100.0

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON: non-finite numbers (no interval yet, no plausible interval) are None."""
        d = {k: _finite_or_none(v) for k, v in asdict(self).items()}
        d["delta_pct"] = _finite_or_none(self.delta_pct)
        d["interval"] = [d["lo"], d["hi"]]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ClassResult:
        values: dict[str, Any] = {k: (math.nan if v is None else v) for k, v in known_fields(cls, d).items()}
        return cls(**values)


def _finite_or_none(v: Any) -> Any:
    return None if isinstance(v, float) and not math.isfinite(v) else v


FLAGS = (
    "undecided_at_max_rounds",
    "suspicious_speedup",
    "faster_than_floor",
    "subthreshold_gain",
    "partial_gain",
    "profiler_disagrees",
    "profiler_bytes_short",
    "best_slowed",
    "profile_outputs_unconfirmed",
    "budget_spent",
    "outliers_dropped",
    "disturbed_rounds",
    "futility",
    "gain_ruled_out",
    "regression_ruled_out",
    "two_in_a_row",
    "no_samples",
    "no_target",
    "profiler_failed",
    "likely_regression",
    "repeated_values",
    "wall_time_unexplained",
    "diff_constructs",
    "reverify_disagrees",
    "mean_not_faster",
    "last_block_not_faster",
    "needs_stronger_checks",
    "confirmation_disagrees",
    "external_truth_refutes",
    "stronger_checks_unavailable",
    "external_truth_inconclusive",
)
"""Every flag a verdict can carry (Verdict.flags); the TUI explains each. Records written
by other versions may carry others: readers show them as they are."""

NEEDS_STRONGER_CHECKS = "needs_stronger_checks"
"""The flag of a keep whose numbers are too good to take on the bench's word alone
(`Verdict.needs_stronger_checks`)."""


@dataclass(frozen=True)
class Verdict:
    kind: str
    """keep | regression | likely_regression | tie | split | borderline | undecided (sample
    another round); see RUN_VERDICTS."""
    reason: str
    classes: tuple[ClassResult, ...] = ()
    rounds: int = 0
    gpu_seconds: float = 0.0
    flags: tuple[str, ...] = field(default=())
    """Machine-readable reasons, each one of FLAGS. The loop passes `previous_subthreshold_gain=("subthreshold_gain" in flags)` of the
    previous iteration's verdict to the next `evaluate`."""
    focus: str = ""
    """The class the reason is about (the one `summary` shows)."""
    escalation: str = ""
    """Why this keep needs the stronger checks (flag needs_stronger_checks): the findings
    of `plausible` that escalate (a speedup beyond suspicious_speedup, a config beating its
    roofline floor, a median the mean does not follow), one line; "" when none."""

    @property
    def final(self) -> bool:
        """The looks are over (the statistics decided); a keep may still wait for the
        stronger checks (`needs_stronger_checks`)."""
        return self.kind != "undecided"

    @property
    def needs_stronger_checks(self) -> bool:
        """A keep that is not final on the bench's word: the loop's evidence step runs the
        stronger checks (the profiler, an output audit on fresh inputs and shapes) and the
        keep stands only when they agree (`review.checks_agree`); when they disagree or
        cannot run, `send_to_review`. The reason is `escalation`."""
        return self.kind == "keep" and NEEDS_STRONGER_CHECKS in self.flags

    @property
    def settled_keep(self) -> bool:
        """A keep the loop may commit as it is: no stronger check pending."""
        return self.kind == "keep" and not self.needs_stronger_checks

    def by_class(self) -> dict[str, ClassResult]:
        return {c.cls: c for c in self.classes}

    def to_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.kind,
            "reason": self.reason,
            "rounds": self.rounds,
            "gpu_seconds": self.gpu_seconds,
            "flags": list(self.flags),
            "focus": self.focus,
            "escalation": self.escalation,
            "classes": {c.cls: c.to_dict() for c in self.classes},
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Verdict:
        return cls(
            kind=d["verdict"],
            reason=d["reason"],
            classes=tuple(ClassResult.from_dict(c) for c in d.get("classes", {}).values()),
            rounds=d.get("rounds", 0),
            gpu_seconds=d.get("gpu_seconds", 0.0),
            flags=tuple(d.get("flags", ())),
            focus=d.get("focus", ""),
            escalation=d.get("escalation", ""),
        )


OUTLIER_ALPHA = 0.01
"""Chance that the ESD test calls a value of a clean normal sample an outlier."""
OUTLIER_MIN_N = 8
"""No outlier test below this many samples. In a handful of values the test can single
out a legitimate one merely because the others happen to agree, and the interval of what
remains is then too narrow; below 8 an outlier only widens the interval (the decision
waits), it cannot make one."""


class Sample(NamedTuple):
    """One class's log cost ratio for one (look, block): the mean over its configs."""

    look: int
    block: int
    order: str
    value: float
    flagged: bool


class Interval(NamedTuple):
    mean: float
    lo: float
    hi: float
    n: int
    unit: str
    pooled: bool = False
    """The spread behind it is the run's (a `Spread`), not the decision's own."""


SPREAD_F_ALPHA = 0.01
"""A decision whose own spread is larger than the run's pooled one by an F test at this level
keeps its own (a candidate, or a pair of processes, noisier than the run so far)."""
SPREAD_MIN_OWN_DF = 2
"""The run's spread is used only once the decision's own has this many degrees of freedom (its
looks minus the orders present): an F test on fewer cannot tell a noisy candidate."""


@dataclass(frozen=True)
class Spread:
    """A class's spread per look pooled over a run's earlier decisions ([decide].pooled_noise):
    the variance of its looks' log ratios around each decision's order means, and the
    degrees of freedom behind it (verdict.pooled_spreads)."""

    var: float
    df: int


def residual_ss(samples: list[Sample]) -> tuple[float, int]:
    """The sum of squares of `samples` around their order means and its degrees of freedom
    (n minus the orders present): what a decision adds to a run's `Spread`."""
    by_order: dict[str, list[float]] = defaultdict(list)
    for s in samples:
        by_order[s.order].append(s.value)
    ss = sum((v - mean(g)) ** 2 for g in by_order.values() for v in g)
    return ss, len(samples) - len(by_order)


def class_samples(pairs: list[Pair], policy: Policy) -> dict[str, list[Sample]]:
    """Per class, one sample per (look, block), in look then block order."""
    sign = 1.0 if policy.direction == "min" else -1.0
    cells: dict[str, dict[tuple[int, int], list[Pair]]] = defaultdict(lambda: defaultdict(list))
    for p in pairs:
        cells[p.cls][(p.round, p.block)].append(p)
    out: dict[str, list[Sample]] = {}
    for cls, by_cell in cells.items():
        out[cls] = [
            Sample(
                look,
                block,
                ps[0].order,
                sign * sum(math.log(p.cand / p.best) for p in ps) / len(ps),
                any(p.flagged for p in ps),
            )
            for (look, block), ps in sorted(by_cell.items())
        ]
    return out


def alpha_at_look(k: int, policy: Policy, *, final: bool = False) -> float:
    """The two-sided error rate spent at look k (looks counted from 1).

    alpha = 1 - confidence is spent over the planned looks min_rounds..max_rounds in
    proportion to the look index: early looks, with few samples and few degrees of
    freedom, rarely decide anyway, so they get less. On the final look (max_rounds, or the
    GPU-second budget spent) whatever was not spent before is spent there.
    """
    alpha = 1.0 - policy.confidence
    lo, hi = policy.min_rounds, policy.max_rounds
    k = min(max(k, lo), hi)
    total = (lo + hi) * (hi - lo + 1) / 2.0
    if final:
        spent_before = (lo + k - 1) * (k - lo) / 2.0
        return alpha * (1.0 - spent_before / total)
    return alpha * k / total


def _balanced_mean_se(samples: list[Sample]) -> tuple[float, float, int]:
    """Order-balanced mean, its standard error and the degrees of freedom.

    With both orders present the mean is (mean_AB + mean_BA) / 2, which a constant order
    effect (linear drift, a warm second run) cannot bias. Its variance is estimated from
    the spread around the two order means (df = n - 2) once each order has 3 samples;
    before that, from the spread around the overall mean (df = n - 1), which an order
    effect can only widen, never narrow.
    """
    n = len(samples)
    by_order: dict[str, list[float]] = defaultdict(list)
    for s in samples:
        by_order[s.order].append(s.value)
    if len(by_order) < 2:
        values = [s.value for s in samples]
        m = mean(values)
        ss = sum((v - m) ** 2 for v in values)
        return m, math.sqrt(ss / (n - 1) / n) if n > 1 else math.inf, n - 1
    groups = list(by_order.values())
    means = [mean(g) for g in groups]
    m = mean(means)
    inv = _balance_weight([len(g) for g in groups])
    if min(len(g) for g in groups) >= 3:
        ss = sum((v - gm) ** 2 for g, gm in zip(groups, means, strict=True) for v in g)
        df = n - len(groups)
    else:
        overall = mean([s.value for s in samples])
        ss = sum((s.value - overall) ** 2 for s in samples)
        df = n - 1
    return m, math.sqrt(ss / df * inv) if df > 0 else math.inf, df


def _balance_weight(order_counts: list[int]) -> float:
    """Var(order-balanced mean) / var(one sample): the mean of the orders' means, each over
    its own count."""
    return sum(1.0 / k for k in order_counts) / len(order_counts) ** 2


def look_means(samples: list[Sample]) -> list[Sample]:
    """One sample per look: the order-balanced mean of its blocks."""
    by_look: dict[int, list[Sample]] = defaultdict(list)
    for s in samples:
        by_look[s.look].append(s)
    return [Sample(look, 0, "AB", _balanced_mean_se(group)[0], False) for look, group in sorted(by_look.items())]


def interval(samples: list[Sample], alpha: float, unit: str = "sample", spread: Spread | None = None) -> Interval:
    """Estimate and two-sided (1 - alpha) interval of the mean log cost ratio. With `spread`
    (the run's, one sample per look), the interval's width is the pooled spread's, with its
    degrees of freedom, when it has more of them than the samples' own and unless the samples'
    own spread is larger by an F test (SPREAD_F_ALPHA); the mean is the samples' order-balanced
    one either way. (A run's first decision pooled on 1 df made the next one's t quantile 60
    times its own: a −6.9% class stayed undecided to max_rounds.)"""
    n = len(samples)
    if n == 0:
        return Interval(math.nan, -math.inf, math.inf, 0, unit)
    m, se, df = _balanced_mean_se(samples)
    if spread is not None and n >= 2 and spread.df > df and math.isfinite(spread.var):
        ss, own_df = residual_ss(samples)
        if own_df >= SPREAD_MIN_OWN_DF and ss / own_df <= spread.var * f_quantile(
            1.0 - SPREAD_F_ALPHA, own_df, spread.df
        ):
            counts: dict[str, int] = defaultdict(int)
            for s in samples:
                counts[s.order] += 1
            half = t_quantile(1.0 - alpha / 2.0, spread.df) * math.sqrt(
                spread.var * _balance_weight(list(counts.values()))
            )
            return Interval(m, m - half, m + half, n, unit, pooled=True)
    if n < 2 or df < 1:
        return Interval(m, -math.inf, math.inf, n, unit)
    half = t_quantile(1.0 - alpha / 2.0, df) * se if se > 0 else 0.0
    return Interval(m, m - half, m + half, n, unit)


def drop_outliers(samples: list[Sample]) -> tuple[list[Sample], int]:
    """The samples without the ESD test's outliers (at most one in five), and their count.

    The test runs on the values as they are, not centred by order: spikes that happen to
    fall mostly in one order would otherwise become that order's centre. An order effect
    only widens the spread the test measures against, so it makes the test more cautious.
    """
    n = len(samples)
    if n < OUTLIER_MIN_N:
        return samples, 0
    out = set(esd_outliers([s.value for s in samples], max(1, n // 5), OUTLIER_ALPHA))
    return [s for i, s in enumerate(samples) if i not in out], len(out)


def class_verdict(iv: Interval, rounds: int, policy: Policy) -> str:
    """improved | regressed | tied | undecided, from the interval of the mean log ratio."""
    if rounds < policy.min_rounds or math.isnan(iv.mean):
        return "undecided"
    eff = math.log1p(policy.min_effect_pct / 100.0)
    if iv.hi < 0 and -iv.mean >= eff:
        return "improved"
    if iv.lo > 0 and iv.mean >= eff:
        return "regressed"
    if iv.lo > -eff and iv.hi < eff:
        return "tied"
    return "undecided"


def _shown_values(pairs: list[Pair], kept: list[Sample], unit: str) -> tuple[float, float]:
    """The class's best and cand values shown beside its ratio: geometric means over the pairs
    of the looks (or blocks) the interval kept, each look weighing the same as in the ratio,
    so cand/best sits on the same side of 1 as the ratio (an outlier look left in, or a look
    with more blocks than the others, could put it on the other side)."""
    cell = (lambda p: p.round) if unit == "look" else (lambda p: (p.round, p.block))
    keep = {s.look for s in kept} if unit == "look" else {(s.look, s.block) for s in kept}
    used = [p for p in pairs if not p.flagged and cell(p) in keep] or [p for p in pairs if not p.flagged] or pairs
    size: dict[object, int] = defaultdict(int)
    for p in used:
        size[cell(p)] += 1
    weights = [1.0 / size[cell(p)] for p in used]
    best = geomean([p.best for p in used], weights)
    cand = geomean([p.cand for p in used], weights)
    return (math.nan if best is None else best), (math.nan if cand is None else cand)


def exp_ratio(log_ratio: float) -> float:
    """A log-ratio bound as a ratio. Two looks far apart give a t-interval so wide that its
    bound overflows math.exp: such a bound is infinite (or zero), never an error."""
    try:
        return math.exp(log_ratio)
    except OverflowError:
        return math.inf


def estimate_class(
    cls: str, pairs: list[Pair], samples: list[Sample], policy: Policy, *, final: bool, spread: Spread | None = None
) -> ClassResult:
    """The class's result after the looks in `samples` (final: no look will follow); `spread`:
    the run's pooled one for this class ([decide].pooled_noise), used where a look is one
    sample."""
    clean = [s for s in samples if not s.flagged]
    disturbed = len(samples) - len(clean)
    kept, outliers = drop_outliers(clean)
    rounds = len({s.look for s in clean})
    unit = "sample"
    if len(kept) > rounds and not policy.pool_blocks:
        unit = "look"
        kept, more = drop_outliers(look_means(kept))
        outliers += more
    if unit != "sample":
        spread = None  # looks of several blocks: a run's spread is one of looks of one block
    iv = interval(kept, alpha_at_look(rounds, policy, final=final), unit, spread)
    verdict = class_verdict(iv, rounds, policy)
    plausible_lo = plausible_hi = math.nan
    if verdict == "undecided" and policy.futility_confidence > 0:
        piv = interval(kept, 1.0 - policy.futility_confidence, unit, spread)
        plausible_lo, plausible_hi = exp_ratio(piv.lo), exp_ratio(piv.hi)
    best, cand = _shown_values(pairs, kept, unit)
    return ClassResult(
        cls=cls,
        rounds=rounds,
        n=iv.n,
        best=best,
        cand=cand,
        ratio=math.exp(iv.mean) if not math.isnan(iv.mean) else math.nan,
        lo=exp_ratio(iv.lo),
        hi=exp_ratio(iv.hi),
        verdict=verdict,
        outliers=outliers,
        disturbed=disturbed,
        unit=iv.unit,
        plausible_lo=plausible_lo,
        plausible_hi=plausible_hi,
        pooled_df=spread.df if iv.pooled and spread is not None else 0,
    )
