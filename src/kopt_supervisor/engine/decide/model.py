"""The decision's data: paired samples in, per-class results and a run verdict out.

Everything here is plain data. A `Pair` is one paired observation of one config: the
best tree's and the candidate's metric taken in the same round (process-level ABBA) or the
same block (an `ab_command` run). Ratios are always oriented so that below 1 means the
candidate is better, whatever the metric's direction.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from kopt_supervisor.engine.config.sections import DecideConfig
from kopt_supervisor.engine.config.toml_io import decide_problems
from kopt_supervisor.engine.dataclass_io import known_fields
from kopt_supervisor.engine.decide.stats import geomean
from kopt_supervisor.engine.errors import BadInput

__all__ = ["ClassResult", "Pair", "Policy", "Verdict", "geomean"]
"""geomean is stats.geomean, the one of the project, re-exported for engine/loop/machine.py."""

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
    """The look this pair belongs to: a process-level round, or one ab_command run."""
    order: str = "AB"
    """"AB" (best ran first) or "BA"; blocks of an ab_command run alternate too."""
    block: int = 0
    """Index of the block within an ab_command run (0 for process-level rounds)."""
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
    restating), plus the metric's direction and the ab_command path's `pool_blocks`.
    `verify_after_format` and `production_verdicts` ride along; the loop reads them."""

    direction: str = "min"
    """"min" (latency) or "max" (throughput), from [target].direction."""
    pool_blocks: bool = False
    """ab_command path: treat every block as a sample (df = blocks - 1) instead of one mean
    per run (df = runs - 1). Only valid when the runs cannot differ from one another (one
    process, the same buffers); a per-process offset makes pooled intervals far too narrow."""

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
    block when Policy.pool_blocks) or "look" (one mean per ab_command run)."""
    plausible_lo: float = math.nan
    plausible_hi: float = math.nan
    """On the final look only: the ratio's interval at policy.futility_confidence, which
    resolves a class still undecided (see Policy.futility_confidence)."""

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
    "budget_spent",
    "outliers_dropped",
    "disturbed_rounds",
    "futility",
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
        keep stands only when they agree (`verdict.checks_agree`); when they disagree or
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
