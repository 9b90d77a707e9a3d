"""A kopt.toml proposal as it is drafted, and what one decision with it will cost. Pure.

The draft: the `Proposal` the steps fill in (keys, the reason for each, what to check, open
`Question`s and their `Choice`s) and the commented kopt.toml it renders to, checked to load
before it is returned.

The cost (`estimate_decision_s`, also called by the loop after the baseline): wall seconds
from the baseline's runs, their noise and the decision policy (docs/design.md §5;
docs/decision.md). Process-level (the bench run as it is): a round is two runs, best and
candidate (ABBA across rounds), each as long as a baseline run. The policy looks after every
round from `min_rounds` on and stops when the interval of the mean log ratio settles the
class; at a per-run noise σ (the baseline's spread between runs) a round's paired sample
varies by about √2·σ, so look k settles a no-change candidate (tie) once t(α_k, k−1)·√2σ/√k <
log(1 + min_effect) and a true change of twice min_effect once it is below log(1 +
2·min_effect). `ab` (one process per look, both trees in it) and `served` (one process
start, then looks) cost a start plus `look_s` per look. The estimate ignores the gate's waits
and the proposer; it is what the bench itself costs. Above `SLOW_S` it says so, and points
to the harness (docs/byo-kernel.md): on the H100 the served bench decided an A/A in 5-9
looks of 0.35 s where process-level rounds took 17 s each.
"""

from __future__ import annotations

import json
import math
import statistics
import time
from dataclasses import dataclass, field
from typing import Any

from kopt_supervisor.engine.config.toml_io import loads as loads_config
from kopt_supervisor.engine.decide import t_quantile
from kopt_supervisor.engine.decide.estimate import Policy, alpha_at_look
from kopt_supervisor.engine.errors import BadInput
from kopt_supervisor.engine.onboard.detect import BenchRun, Candidate

ANSWER_KEYS = "table=KEY, metric=COLUMN, direction=min|max"
"""Every key `kopt init --bench --answer` takes, as the messages that need one list them."""


@dataclass(frozen=True)
class Choice:
    value: str
    label: str


@dataclass(frozen=True)
class Question:
    """Something the output does not settle: the CLI asks it (or fails naming the choices)."""

    key: str
    """The answer's key: "table", "metric" or "direction"."""
    prompt: str
    choices: tuple[Choice, ...]
    why: str
    default: str | None = None

    def line(self) -> str:
        """One line for a terminal-less `kopt init`: the question, the candidates, the way to answer."""
        values = ", ".join(c.value for c in self.choices)
        return (
            f"{self.prompt} ({self.why}); candidates: {values}; answer with --answer {self.key}=VALUE "
            f"(--answer may be repeated: {ANSWER_KEYS})"
        )


@dataclass
class Proposal:
    run: BenchRun
    target: dict[str, Any] = field(default_factory=dict)
    adapter: dict[str, Any] = field(default_factory=dict)
    sections: dict[str, dict[str, Any]] = field(default_factory=dict)
    comments: dict[str, str] = field(default_factory=dict)
    """[section].key -> why (written above the key)."""
    checks: list[str] = field(default_factory=list)
    """What the engineer should check before running (the file's header)."""
    questions: list[Question] = field(default_factory=list)
    candidate: Candidate | None = None
    cost: DecisionCost | None = None
    served: bool = False
    """Looks are served (one process per tree answers them), not whole runs of the bench."""
    serving: str = ""
    """How looks are taken and why; for a process-level proposal, why it is not served and
    what would be (also among `checks`)."""

    @property
    def complete(self) -> bool:
        return not self.questions

    def error_line(self) -> str:
        """The one-line error of a terminal-less `kopt init --bench` with open questions."""
        if not self.questions:
            return ""
        more = f" (and {len(self.questions) - 1} more question(s))" if len(self.questions) > 1 else ""
        return f"kopt init --bench: {self.questions[0].line()}{more}"

    def text(self) -> str:
        """The commented kopt.toml (only once every question is answered)."""
        if self.questions:
            raise BadInput(self.error_line())
        return render(self)


def _toml(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, int | float):
        return repr(v)
    if isinstance(v, list | tuple):
        return "[" + ", ".join(_toml(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{json.dumps(str(k))} = {_toml(x)}" for k, x in v.items()) + " }"
    raise TypeError(f"cannot write {v!r}")


def _comment(text: str) -> list[str]:
    out = []
    for para in text.split("\n"):
        line = "#"
        for word in para.split(" "):
            if len(line) + len(word) > 96 and line != "#":
                out.append(line)
                line = "#  "
            line += " " + word
        out.append(line)
    return out


def render(p: Proposal) -> str:
    run = p.run
    head = [
        "# kopt.toml proposed by `kopt init --bench` from one run of the bench:",
        f"#   {run.bench}",
        f"# ({time.strftime('%Y-%m-%d')}, {run.seconds:.1f} s, exit {run.returncode}). Each choice says why.",
    ]
    if p.checks:
        head.append("#")
        head.append("# Check before `kopt run`:")
        for c in p.checks:
            head += ["#  - " + ln[2:] if i == 0 else "#    " + ln[4:] for i, ln in enumerate(_comment(c))]
    if p.served and p.serving:
        head.append("#")
        head += _comment(f"Looks: {p.serving}")
    if p.cost is not None:
        head.append("#")
        head += _comment(f"Decision cost: {p.cost.text()}")
    lines = head + ["", "[target]"]
    for key, value in p.target.items():
        why = p.comments.get(f"target.{key}")
        if why:
            lines += _comment(why)
        lines.append(f"{key} = {_toml(value)}")
    if p.adapter:
        lines += ["", "[target.adapter]"]
        for key, value in p.adapter.items():
            why = p.comments.get(f"target.adapter.{key}")
            if why:
                lines += _comment(why)
            lines.append(f"{key} = {_toml(value)}")
    for section, keys in p.sections.items():
        lines += ["", f"[{section}]"]
        for key, value in keys.items():
            why = p.comments.get(f"{section}.{key}")
            if why:
                lines += _comment(why)
            lines.append(f"{key} = {_toml(value)}")
    text = "\n".join(lines) + "\n"
    loads_config(text, source="proposed kopt.toml")  # a proposal always loads
    return text


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
