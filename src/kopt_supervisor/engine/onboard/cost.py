"""What one decision will cost: wall seconds from the baseline's runs, their noise and the
decision policy (docs/design.md §5; docs/decision.md).

Process-level (the bench run as it is): a round is two runs, best and candidate (ABBA across
rounds), each as long as a baseline run. The policy looks after every round from
`min_rounds` on and stops when the interval of the mean log ratio settles the class; at a
per-run noise σ (the baseline's spread between runs) a round's paired sample varies by about
√2·σ, so look k settles a no-change candidate (tie) once t(α_k, k−1)·√2σ/√k < log(1 +
min_effect) and a true change of twice min_effect once it is below log(1 + 2·min_effect).
`ab` (one process per look, both trees in it) and `served` (one process start, then looks)
cost a start plus `look_s` per look.

The estimate ignores the gate's waits and the proposer; it is what the bench itself costs.
Above `SLOW_S` it says so, and points to the harness (docs/byo-kernel.md): on the H100 the
served bench decided an A/A in 5-9 looks of 0.35 s where process-level rounds took 17 s each.

Pure.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from kopt_supervisor.engine.decide.estimate import Policy, alpha_at_look
from kopt_supervisor.engine.decide.stats import t_quantile

MODES = ("process", "ab", "served")
SLOW_S = 180.0
"""A decision longer than this is worth a word on the dashboard and in `kopt status`."""
DEFAULT_NOISE_PCT = 1.0
"""Per-run noise assumed when the baseline cannot tell (one run, or no config in common)."""
HARNESS_HINT = (
    "a bench on kopt's harness serves looks from one process per tree "
    "([target].serve: docs/byo-kernel.md), which decides in seconds"
)


@dataclass(frozen=True)
class DecisionCost:
    mode: str
    round_s: float
    """Seconds one round (process) or one look (ab, served) takes."""
    start_s: float
    """Seconds before the first look (served: the process start; else 0)."""
    noise_pct: float
    """The per-run noise used (the baseline's, or DEFAULT_NOISE_PCT)."""
    rounds_tie: int
    """Rounds (looks) to settle a candidate that changes nothing."""
    rounds_change: int
    """Rounds (looks) to settle a true change of twice min_effect_pct."""
    max_rounds: int
    undecided_tie: bool
    """A no-change candidate is not settled within max_rounds at this noise (it then goes to
    the futility rule or review)."""
    noise_runs: int = 0
    """How many runs the noise was measured over (0: not measured, DEFAULT_NOISE_PCT assumed)."""

    @property
    def seconds_tie(self) -> float:
        return self.start_s + self.rounds_tie * self.round_s

    @property
    def seconds_change(self) -> float:
        return self.start_s + self.rounds_change * self.round_s

    @property
    def seconds_max(self) -> float:
        return self.start_s + self.max_rounds * self.round_s

    @property
    def slow(self) -> bool:
        return self.seconds_tie > SLOW_S

    def text(self) -> str:
        """One line for the log, the dashboard and `kopt status`."""
        unit = "ABBA rounds of 2 runs" if self.mode == "process" else "looks"
        per = (
            f"{_dur(self.round_s / 2)} per run"
            if self.mode == "process"
            else f"{_dur(self.round_s)} per look" + (f" after a {_dur(self.start_s)} start" if self.start_s else "")
        )
        tie = f"{_dur(self.seconds_tie)} ({self.rounds_tie} {unit}" + (
            ", then still undecided: futility rule or review)" if self.undecided_tie else ")"
        )
        noise = (
            f"run-to-run noise {self.noise_pct:.2g}% over {self.noise_runs} runs"
            if self.noise_runs >= 2
            else f"run-to-run noise not measured (one run: {self.noise_pct:.2g}% assumed; the baseline's runs "
            f"measure it)"
        )
        line = (
            f"one decision takes about {_dur(self.seconds_change)} for a clear change "
            f"({self.rounds_change} {unit}) and {tie} for no change; {per}, {noise}"
        )
        if self.slow and self.mode == "process":
            line += f". Slow: {HARNESS_HINT}"
        return line

    def to_dict(self) -> dict[str, object]:
        return {
            "mode": self.mode,
            "round_s": self.round_s,
            "start_s": self.start_s,
            "noise_pct": self.noise_pct,
            "rounds_tie": self.rounds_tie,
            "rounds_change": self.rounds_change,
            "max_rounds": self.max_rounds,
            "seconds_tie": self.seconds_tie,
            "seconds_change": self.seconds_change,
            "seconds_max": self.seconds_max,
            "undecided_tie": self.undecided_tie,
            "slow": self.slow,
            "noise_runs": self.noise_runs,
            "text": self.text(),
        }


def _dur(s: float) -> str:
    if s < 60:
        return f"{s:.1f} s" if s < 10 else f"{s:.0f} s"
    if s < 3600:
        return f"{s / 60:.1f} min"
    return f"{s / 3600:.1f} h"


def run_noise_pct(runs: list[dict[str, float]]) -> float | None:
    """The per-run noise of a bench, in %: per config the standard deviation of log(value)
    across the runs, the median over configs. None with fewer than two runs in common."""
    if len(runs) < 2:
        return None
    common = set(runs[0]).intersection(*runs[1:])
    spreads = []
    for key in common:
        vals = [r[key] for r in runs]
        if all(isinstance(v, int | float) and math.isfinite(v) and v > 0 for v in vals):
            spreads.append(statistics.stdev(math.log(v) for v in vals))
    if not spreads:
        return None
    return 100.0 * statistics.median(spreads)


def rounds_to_settle(effect: float, noise_pct: float, policy: Policy) -> tuple[int, bool]:
    """(looks, settled) for an interval half-width to fall below log(1 + effect) at noise
    √2·noise per look (the policy's alpha spending); (max_rounds, False) when it never does."""
    sigma = math.sqrt(2.0) * max(noise_pct, 1e-6) / 100.0
    target = math.log1p(effect)
    for k in range(max(policy.min_rounds, 2), policy.max_rounds + 1):
        alpha = alpha_at_look(k, policy, final=k == policy.max_rounds)
        half = t_quantile(1.0 - alpha / 2.0, k - 1) * sigma / math.sqrt(k)
        if half < target:
            return k, True
    return policy.max_rounds, False


def estimate_decision_s(
    baseline_run_seconds: list[float],
    policy: Policy,
    mode: str = "process",
    *,
    noise_pct: float | None = None,
    look_s: float | None = None,
) -> DecisionCost:
    """The cost of one decision (see the module docstring). `baseline_run_seconds`: the wall
    time of each baseline run (process-level bench runs); `noise_pct`: their run-to-run noise
    (run_noise_pct), DEFAULT_NOISE_PCT when None; `look_s`: for ab/served, the seconds of one
    look when known (else a run's seconds stand in: an upper bound)."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
    runs = [s for s in baseline_run_seconds if isinstance(s, int | float) and math.isfinite(s) and s >= 0]
    if not runs:
        raise ValueError("estimate_decision_s: no baseline run seconds")
    run_s = statistics.median(runs)
    noise = noise_pct if noise_pct is not None and math.isfinite(noise_pct) else DEFAULT_NOISE_PCT
    eff = policy.min_effect_pct / 100.0
    tie, settled = rounds_to_settle(eff, noise, policy)
    change, _ = rounds_to_settle(2 * eff, noise, policy)
    change = min(change, tie)
    if mode == "process":
        round_s, start_s = 2.0 * run_s, 0.0
    elif mode == "ab":
        round_s, start_s = look_s if look_s is not None else run_s, 0.0
    else:
        round_s, start_s = (look_s if look_s is not None else run_s), run_s
    measured = noise_pct is not None and math.isfinite(noise_pct)
    return DecisionCost(
        mode,
        round_s,
        start_s,
        noise,
        tie,
        change,
        policy.max_rounds,
        not settled,
        noise_runs=max(len(runs), 2) if measured else 0,
    )
