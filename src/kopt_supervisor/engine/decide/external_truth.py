"""What confirmed a keep beyond the bench's own timer (pure; docs/design.md §12, "Revised
(wave 3)"): what each side's process spent on a look (`SideCost`), the OS's word on a claimed
saving (`weigh` -> `OsTruth`), and the external truth and what a keep becomes (`ExternalTruth`,
`settle`).

`SideCost` is what one side's served process spent on one look, as the OS accounts for it,
beside what its bench claims (the served looks of engine/loop/served_trees.py `ServedTrees`
fill it). Pure data.

## The OS's word on a claimed saving

Where no profiler is the final word (a target without a GPU), what the OS accounts for each
side's process in each look (CPU seconds of its whole process tree, wall seconds) is weighed
against the seconds its bench claims the timed calls took.

Per look, the claim is best's claimed seconds minus the candidate's (`SideCost.claimed_s`:
the metric x `[target].calls` of every config), and each of the OS's clocks (CPU, wall)
saved best's seconds minus the candidate's. A candidate faster in truth spends less of the
OS's time by about what it claims; a timer patch, a result computed outside the timed calls
(inputs prepared in the contract check, work deferred past the reply until the audit), or a
forged CSV claim seconds that no clock shows.

Looks in which a side's process was started (`SideCost.started`: its CPU time holds the
imports and first-call compilation of a start) are left out while at least MIN_LOOKS others
remain; otherwise every look counts, starts included (a server that leaves after every look
to hide its steady looks pays for its starts: they only lower its savings).

`weigh(looks)` -> `OsTruth` with outcome (one of OS_OUTCOMES):

- "shown": on at least one clock at least SHOWN_SHARE of the mean claim is proven saved (its
  one-sided CONFIDENCE lower bound above that share), the bounds from the spread of each
  look's saving net of SHOWN_SHARE of that look's own claim (a look in which the machine ran
  best's timed calls slower claims more and saves more: pairing takes that common part out).
  A saving merely proven above 0 is not enough: each side's look on this project's 2-core VM
  moves by ~15% of its CPU seconds, and a timer patch that saved nothing was "shown" so in
  2.9% of confirmations and kept in suite run GW (docs/decision.md, "Noise that showed a timer
  patch", 2026-12-03). Either clock may show it (a kernel spread over threads saves wall time
  while its CPU time grows); against the other's refutation, or the wall clock where the CPU
  clock cannot tell, only in every look from EVERY_LOOK_MIN looks on
  (`_against_a_refutation`). CPU burnt or time slept only lowers a candidate's savings, and
  the means place the bounds: nothing it does makes a clock show what it did not save.
- "refuted": no clock shows it, and on one of them the claim is not there: the saving's
  upper bound stays below SHOWN_SHARE of the mean claim, or (from EVERY_LOOK_MIN looks on)
  every look on its own shows less than that share of its claim, which a candidate that
  widens the spread cannot escape. An honest candidate falls short in every look only when
  the clock's noise exceeds half its claim every time: 4 looks on the CPU clock (and a
  shortfall beyond its tick), 7 on the wall clock, which load moves more (0.5^7 < 1%). One
  clock suffices: a noisy wall clock must not let through what the CPU clock refutes.
- "inconclusive": the clocks' noise is too large for the claim either way (a small claim on
  a loaded machine): the OS cannot tell.
- "not_applicable": fewer than MIN_LOOKS looks with every figure, or no claimed saving to
  weigh (no `[target].calls`, or the claims show no saving).

What the OS cannot tell: a claim smaller than its clocks' noise (shown as inconclusive), and
work done in a process outside the side's process tree (the sandbox's PID namespace keeps
every process a bench starts inside it).

## The external truth

The bench's numbers are the word of code that ran in the candidate's process. The truth
from outside it: on a GPU, the profiler's kernel time per class (`Evidence.confirm`); on a
target without a GPU, the OS's accounting of each side's processes weighed against the
seconds the bench claims (`weigh` above). A keep that had neither says so: "confirmed by the
bench's timer only", in its record (record["external_truth"]), in `kopt status --json` and
in results.md.

- `ExternalTruth`: the record (kind "profiler" | "os_time" | "none", outcome, reason,
  figures); `of_profiler`, `profiler_unshown`, `of_os_time`, `timer_only` build one. A
  profiler that compared the trees and could not show a claimed class's gain (after a second
  profile of more calls per config, `Evidence.confirm`) is inconclusive, never "timer only":
  "the bench's timer only" is for a GPU with no profiler, or a profile that failed to compare.
- `by_profiler(profile, claim, policy)`: on a GPU, the keep's profile pair as its
  confirmation in fresh processes (Confirmation.path "profiler") when it shows every claimed
  class and no other class slower beyond its margin; otherwise None and the fresh servers'
  looks run. The pair is the stronger clock on the same question, so the looks it spares
  added ~10 s to a keep and nothing a candidate could not also show them.
- `settle(verdict, confirmation, truth)`: the keep after its confirmation in fresh
  processes and its external truth:

  * the OS refutes the claim: not a keep (kind "rejected", flag external_truth_refutes);
  * the OS weighed the claim and cannot tell (its clocks' noise, or a claim under the CPU
    clock's ticks, after the confirmation's extra looks), or the profiler could not show a
    claimed gain: review, with its figures (flag
    external_truth_inconclusive). A keep is earned on a clock outside the candidate's
    process; a loaded machine, whose noise swallows the OS's word, would otherwise keep a
    patched timer on the bench's word alone;
  * the confirmation did not confirm: review, with both numbers (confirmation_disagrees for
    fresh servers, reverify_disagrees for the process-level re-decision);
  * a keep that needs the stronger checks (a speed too good to take on the bench's word,
    `Verdict.needs_stronger_checks`): they are the external truth and an output audit on
    fresh inputs (the served confirmation's looks); both there and agreeing, the keep stands
    (`checks_agree`, saying what confirmed it); one missing, review (flag
    stronger_checks_unavailable) with what ran;
  * otherwise a keep, its reason saying what confirmed it.
- `truth_line(record, status)`: one line for a kept iteration's external truth, for
  results.md and `kopt status --json`.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from kopt_supervisor.engine import fmt
from kopt_supervisor.engine.decide import mean, stdev, t_quantile
from kopt_supervisor.engine.decide.confirmation import ClassCheck, Confirmation, claimed_gains, margin_of, shows_half
from kopt_supervisor.engine.decide.estimate import Policy, Verdict
from kopt_supervisor.engine.decide.review import checks_agree, send_to_review
from kopt_supervisor.engine.records import Stage, known_fields


@dataclass(frozen=True)
class SideCost:
    side: str
    """"best" or "cand"."""
    round: int
    """The look (the decision's round) it belongs to."""
    cpu_s: float
    """User + system CPU seconds of the side's whole process tree (psutil over /proc: the
    live processes and the children they reaped), read just before the look's request and
    again after the reply to that look's audit: work a process defers past its `done` until
    the audit (a lazy result computed only when it is read) counts."""
    wall_s: float
    """Seconds from the look's request to its reply."""
    claimed_s: float | None
    """What the bench says its timed calls took in this look: the sum over configs of the
    metric x calls, in seconds ([roofline].unit_scale); None without [target].calls."""
    started: bool = False
    """The side's process was started for this look: its CPU time holds what a start costs
    (imports, compilation at the first call), not only the look's work."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SideCost:
        return cls(**known_fields(cls, d))


CONFIDENCE = 0.99
"""One-sided confidence of the savings' bounds."""
SHOWN_SHARE = 0.5
"""The share of the claimed saving a clock must show."""
MIN_LOOKS = 3
EVERY_LOOK_MIN = {"cpu": 4, "wall": 7}
"""Looks before "every look short of the share" refutes on its own, per clock."""
RESOLUTION_S = {"cpu": 0.01, "wall": 0.0}
"""What a clock cannot resolve: Linux accounts a process's CPU time in clock ticks of 1/100 s
(/proc/<pid>/stat, what psutil reads), so a look's CPU seconds are a difference of two
readings each up to a tick short. The allowance on a clock's mean saving is never below its
resolution, a look counts as short of its claim only by more than it, and a clock whose
resolution reaches SHOWN_SHARE of the claim takes no part ("blind"): a claim under a couple
of ticks per look is weighed by the wall clock alone."""
OS_OUTCOMES = ("shown", "refuted", "inconclusive", "not_applicable")


@dataclass(frozen=True)
class LookCost:
    """One look's two sides, as the OS and the bench account for them."""

    best: SideCost
    cand: SideCost

    @property
    def claim_s(self) -> float:
        return _f(self.best.claimed_s) - _f(self.cand.claimed_s)

    @property
    def started(self) -> bool:
        """A side's process was started for this look."""
        return self.best.started or self.cand.started


@dataclass(frozen=True)
class ClockCheck:
    """One of the OS's clocks against the claim (seconds per look)."""

    clock: str
    """"cpu" or "wall"."""
    saved_s: float
    """Mean saving per look (best's seconds minus the candidate's)."""
    lower_s: float
    upper_s: float
    """One-sided CONFIDENCE bounds of the mean saving."""
    short_looks: int
    """Looks in which this clock showed less than SHOWN_SHARE of the look's claim."""
    outcome: str
    """"shown" | "refuted" | "inconclusive" | "blind" (its resolution is at least the share of
    the claim it would have to show: it takes no part)."""

    def to_dict(self) -> dict[str, Any]:
        return {k: (round(v, 6) if isinstance(v, float) else v) for k, v in asdict(self).items()}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ClockCheck:
        return cls(**known_fields(cls, d))


@dataclass(frozen=True)
class OsTruth:
    """The OS's accounting weighed against the bench's claim (one of OS_OUTCOMES)."""

    outcome: str
    reason: str
    looks: int = 0
    """Looks weighed."""
    claimed_s: float = 0.0
    """Mean claimed saving per look."""
    clocks: tuple[ClockCheck, ...] = ()
    starts_left_out: int = 0
    """Looks left out because a side's process started in them."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "outcome": self.outcome,
            "reason": self.reason,
            "looks": self.looks,
            "claimed_s": round(self.claimed_s, 6),
            "clocks": [c.to_dict() for c in self.clocks],
            "starts_left_out": self.starts_left_out,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> OsTruth:
        values = known_fields(cls, d)
        values["clocks"] = tuple(ClockCheck.from_dict(c) for c in d.get("clocks") or ())
        return cls(**values)


def looks_of(costs: Iterable[SideCost]) -> list[LookCost]:
    """The looks with both sides, by round (a side measured twice in a round: its last)."""
    by_round: dict[int, dict[str, SideCost]] = defaultdict(dict)
    for c in costs:
        by_round[c.round][c.side] = c
    return [
        LookCost(sides["best"], sides["cand"])
        for _, sides in sorted(by_round.items())
        if "best" in sides and "cand" in sides
    ]


def weigh(looks: Sequence[LookCost]) -> OsTruth:
    """The OS's word on the looks' claimed saving (see the module's rule)."""
    usable = [lk for lk in looks if all(_ok(x) for x in (lk.best.claimed_s, lk.cand.claimed_s))]
    steady = [lk for lk in usable if not lk.started]
    left_out = len(usable) - len(steady) if len(steady) >= MIN_LOOKS else 0
    usable = steady if left_out else usable
    if len(usable) < MIN_LOOKS:
        why = (
            "the bench reports no timed seconds ([target].calls)"
            if not usable
            else f"{len(usable)} look(s) with the bench's timed seconds, fewer than {MIN_LOOKS}"
        )
        return OsTruth("not_applicable", why, len(usable))
    claim = mean([lk.claim_s for lk in usable])
    if not claim > 0:
        return OsTruth(
            "not_applicable", f"the bench claims no saved seconds ({claim:+.3g} s per look)", len(usable), claim
        )
    clocks = tuple(c for c in (_clock("cpu", usable, claim), _clock("wall", usable, claim)) if c is not None)
    if not clocks:
        return OsTruth("not_applicable", "no look has the OS's CPU or wall seconds of both sides", len(usable), claim)
    clocks, undecided = _against_a_refutation(clocks, len(usable))
    outcomes = {c.outcome for c in clocks}
    outcome = "shown" if "shown" in outcomes else "refuted" if "refuted" in outcomes else "inconclusive"
    outcome = "inconclusive" if undecided else outcome
    clocks = tuple(c for c in clocks if c.outcome != "blind") or clocks
    return OsTruth(outcome, _reason(outcome, clocks, claim, len(usable)), len(usable), claim, clocks, left_out)


def _against_a_refutation(clocks: tuple[ClockCheck, ...], n: int) -> tuple[tuple[ClockCheck, ...], bool]:
    """A clock that shows the saving while the other refutes it (or is blind: a claim under its
    tick) shows it only in every look, from EVERY_LOOK_MIN of its looks on; so does the wall
    clock where the CPU clock cannot tell. Short of that the outcome is inconclusive (True):
    more looks up to the confirmation's cap, then review; neither a refutation, which would
    discard an honest threaded gain for one look a burst of load lengthened, nor a
    confirmation. Each case once let a patched timer through on the wall clock alone, under
    load on the 2-core machine (2026-11-30: tests/engine/test_keep_confirmation.py,
    tests/decide/test_os_time.py). A CPU clock that shows needs no such support: "shown"
    already bounds its saving above half the claim (`_clock`)."""
    undecided = False
    out = []
    for c in clocks:
        if c.outcome == "shown" and _stands_alone(c, clocks) and (n < EVERY_LOOK_MIN[c.clock] or c.short_looks):
            c, undecided = replace(c, outcome="inconclusive"), True
        out.append(c)
    return tuple(out), undecided


def _stands_alone(c: ClockCheck, clocks: tuple[ClockCheck, ...]) -> bool:
    """Whether the clock `c`, which shows the saving, shows it against the other clock: that
    one refutes it or is blind, or `c` is the wall clock and the CPU clock cannot tell."""
    return any(
        o.outcome in ("refuted", "blind") or (c.clock == "wall" and o.outcome == "inconclusive")
        for o in clocks
        if o is not c
    )


def _clock(name: str, looks: list[LookCost], claim: float) -> ClockCheck | None:
    values = [(getattr(lk.best, f"{name}_s"), getattr(lk.cand, f"{name}_s"), lk.claim_s) for lk in looks]
    values = [(b, c, cl) for b, c, cl in values if _ok(b) and _ok(c)]
    n = len(values)
    if n < MIN_LOOKS:
        return None
    saved = [b - c for b, c, _ in values]
    m = mean(saved)
    share = SHOWN_SHARE * mean([cl for _, _, cl in values])
    tick = RESOLUTION_S[name]
    # the spread of each look's saving net of the share of its own look's claim: a look whose
    # machine ran slower claims more and saves more together (module docstring)
    net = [s - SHOWN_SHARE * cl for s, (_, _, cl) in zip(saved, values, strict=True)]
    half = max(t_quantile(CONFIDENCE, n - 1) * stdev(net) / math.sqrt(n), tick)
    short = sum(1 for x in net if x + tick < 0)
    if tick >= SHOWN_SHARE * claim:
        outcome = "blind"  # it cannot resolve the share of the claim it is asked about
    elif m + half < share or (n >= EVERY_LOOK_MIN[name] and short == n):
        outcome = "refuted"
    elif m - half > share:
        outcome = "shown"
    else:
        outcome = "inconclusive"
    return ClockCheck(name, m, m - half, m + half, short, outcome)


def _reason(outcome: str, clocks: tuple[ClockCheck, ...], claim: float, n: int) -> str:
    def figures(c: ClockCheck) -> str:
        return (
            f"{c.saved_s:.3g} s of {'CPU' if c.clock == 'cpu' else 'wall'} time saved per look "
            f"({c.lower_s:.3g}..{c.upper_s:.3g} s at {CONFIDENCE:.0%})"
        )

    said = f"the bench claims {_s(claim)} per look over {n} looks"
    if outcome == "shown":
        c = next(c for c in clocks if c.outcome == "shown")
        return f"the OS's accounting shows {figures(c)} of the {_s(claim)} the bench claims"
    if outcome == "refuted":
        every = [c.clock.replace("cpu", "CPU") for c in clocks if c.outcome == "refuted" and c.short_looks == n]
        tail = f"; {' and '.join(every)} time: less than half the claim in each of the {n} looks" if every else ""
        return (
            f"the OS's accounting shows {' and '.join(figures(c) for c in clocks)} of the {_s(claim)} "
            f"the bench claims{tail}: the claim is not a measurement of faster code"
        )
    return f"{said}; the OS's accounting cannot tell: {'; '.join(figures(c) for c in clocks)}"


def _s(x: float) -> str:
    return f"{x:.3g} s"


def _ok(x: float | None) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


def _f(x: float | None) -> float:
    return math.nan if x is None else float(x)


TIMER_ONLY = "confirmed by the bench's timer only"
KINDS = ("profiler", "os_time", "none")
TRUTH_OUTCOMES = ("confirmed", "refuted", "inconclusive", "unconfirmed")


@dataclass(frozen=True)
class ExternalTruth:
    """record["external_truth"]: what, outside the candidate's process, confirmed a keep."""

    kind: str
    """"profiler" (the GPU's kernel time per class), "os_time" (the OS's CPU and wall
    accounting of a target without a GPU), or "none" (the bench's timer only)."""
    outcome: str
    """"confirmed" | "refuted" (not a keep) | "inconclusive" (kind "os_time": weighed, its
    clocks cannot tell; review) | "unconfirmed" (kind "none")."""
    reason: str
    """One line with the figures; for kind "none" it starts with TIMER_ONLY."""
    figures: dict[str, Any] = field(default_factory=dict)
    """The profiler's agreement, or the OS accounting (`OsTruth.to_dict`)."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ExternalTruth:
        return cls(**known_fields(cls, d))


def of_profiler(summary: str, agreement: dict[str, Any]) -> ExternalTruth:
    """The profiler agreed with the keep, class by class (`Evidence.confirm` sends any
    disagreement or failure to review before the keep gets here)."""
    return ExternalTruth(
        "profiler", "confirmed", f"the profiler's kernel time per class agrees: {summary}", {"agreement": agreement}
    )


def profiler_shows(status: str, claimed: float | None, ratio: float | None) -> bool:
    """Whether the profiler shows a claimed class's gain (`claimed`: the bench's cost ratio): it
    agrees with the bench (profile.agrees: its interval below 1, not above the bench's) and its
    estimate keeps half the claimed gain (`shows_half`). A run's drift that put a null change
    just below 1 showed a timer patch claiming -3% (tests/security/test_profiler_shows_hostile.py).
    Not the bound (the OS's form): on the H200 it refused a real -3.5% step (docs/decision.md)."""
    return status == "agrees" and fmt.is_num(claimed) and fmt.is_num(ratio) and shows_half(claimed, ratio)


def profiler_unshown(
    classes: Sequence[str], summary: str, agreement: dict[str, Any], calls: int | None
) -> ExternalTruth:
    """The profiler compared the trees but did not show the gain the keep claims on `classes`
    (`profiler_shows`), after a second profile of `calls` calls per config when one was taken:
    inconclusive, as the OS's clocks are when they cannot tell (H200, 2026-11-29: a timer patch
    read -9.8% by the bench, -0.1% by a coarse profile, was kept on the bench's timer only)."""
    closer = f" even at up to {calls} calls per config" if calls else ""
    bounds = "; ".join(
        _unshown_line(c) for c in agreement.get("classes") or () if isinstance(c, dict) and c.get("cls") in classes
    )
    return ExternalTruth(
        "profiler",
        "inconclusive",
        f"the profiler could not show half the claimed gain for {', '.join(classes)}{closer}"
        f" ({'; '.join(x for x in (bounds, summary) if x)})",
        {"agreement": agreement, "calls": calls},
    )


def _unshown_line(c: Mapping[str, Any]) -> str:  # wide: profiler -1.0% [-2.0, -0.1] for the claimed ...
    claimed = c.get("bench_ratio")
    seen = f"profiler {fmt.ratio_pct(c.get('profiler_ratio'), 1)} {fmt.interval(c.get('profiler_lo'), c.get('profiler_hi'))}"
    if c.get("status") != "agrees" or not fmt.is_num(claimed):
        return f"{c.get('cls')}: {seen}, {str(c.get('status')).replace('_', ' ')}"
    half = 1.0 - (1.0 - float(claimed)) / 2.0
    return f"{c.get('cls')}: {seen} for the claimed {fmt.ratio_pct(claimed, 1)}, short of half of it ({fmt.ratio_pct(half, 1)})"


def by_profiler(profile: Mapping[str, Any], claim: Verdict, policy: Policy) -> Confirmation | None:
    """On a GPU, the keep's profile pair (`profile`: its record["profile"], `Evidence.confirm`)
    as its confirmation in fresh processes, or None when it cannot stand in for the fresh
    servers' looks (which then run, as before).

    The pair is two fresh processes, one per tree, on inputs from a seed drawn after the
    decision, whose outputs kopt compared with the baseline's, timed by the device's own clock
    per class: what the served confirmation asks of its fresh servers, answered by the
    stronger clock. It stands in when the profile compared per class and checked outputs, the
    keep is not one that needs the stronger checks (a speed beyond suspicious_speedup: the
    looks' audits on fresh inputs are part of those), every claimed class agrees with the
    bench and its estimate keeps at least half the claimed gain (`profiler_shows`, the
    external truth's own rule), and no other profiled class disagrees or is estimated slower
    beyond its margin. Anything else goes to the looks: this never refutes, it only spares the
    looks a keep the profiler shows.

    Nor does it stand in when best's side was profiled in best/ from a tree a proposer wrote: a
    kept tree can be slow there only, told by its folder, and lend the candidate a gain the
    looks in copies that say neither side do not show (look_files.BlindTrees; docs/security.md,
    "A kept tree slow as BEST"). Best's side stands when it is the baseline's tree, or best's
    profile was taken when that tree was a candidate (`taken.best_from`: reused)."""
    taken = profile.get("taken") or {}
    if not isinstance(taken, dict) or (taken.get("best_from") is None and not taken.get("best_is_baseline")):
        return None
    agreement = profile.get("agreement")
    checked = isinstance(profile.get("outputs"), dict) and int(profile["outputs"].get("checked") or 0) > 0
    if claim.needs_stronger_checks or not isinstance(agreement, dict) or not agreement.get("per_class"):
        return None
    classes = [c for c in agreement.get("classes") or () if isinstance(c, dict)]
    claims = claimed_gains(claim)
    if not checked or not claims or not set(claims) <= {c.get("cls") for c in classes}:
        return None
    checks = []
    for c in classes:
        cls = str(c.get("cls"))
        raw = (c.get("profiler_ratio"), c.get("profiler_lo"), c.get("profiler_hi"))
        figures = [float(x) for x in raw if isinstance(x, int | float) and math.isfinite(x)]
        if len(figures) != 3:
            if cls in claims:
                return None
            continue
        ratio, lo, hi = figures
        claimed = claims.get(cls)
        if claimed is not None:
            if not profiler_shows(str(c.get("status")), claimed, ratio):
                return None
            checks.append(ClassCheck(cls, claimed, ratio, lo, hi, "shown"))
            continue
        margin = margin_of(cls, policy)
        if ratio > 1.0 + margin / 100.0 or c.get("status") == "disagrees":
            return None
        checks.append(ClassCheck(cls, None, ratio, lo, hi, "within", margin))
    shown = "; ".join(check.line() for check in checks)
    reason = f"the profiler's kernel time: {shown}"
    return Confirmation("confirmed", reason, 0, tuple(checks), path=PROFILER_PATH)


PROFILER_PATH = "profiler"
"""Confirmation.path of a keep the profile pair confirmed (`by_profiler`)."""


def of_os_time(truth: OsTruth) -> ExternalTruth:
    """The OS's accounting: shown confirms, refuted refutes, a claim its clocks cannot tell
    is inconclusive; with nothing to weigh (no `[target].calls`), the bench's timer alone."""
    figures = truth.to_dict()
    if truth.outcome == "shown":
        return ExternalTruth("os_time", "confirmed", truth.reason, figures)
    if truth.outcome == "refuted":
        return ExternalTruth("os_time", "refuted", truth.reason, figures)
    if truth.outcome == "inconclusive":
        return ExternalTruth("os_time", "inconclusive", truth.reason, figures)
    return ExternalTruth("none", "unconfirmed", f"{TIMER_ONLY}: {truth.reason}", figures)


def timer_only(why: str) -> ExternalTruth:
    return ExternalTruth("none", "unconfirmed", f"{TIMER_ONLY}: {why}")


def settle(verdict: Verdict, confirmation: Confirmation, truth: ExternalTruth) -> Verdict:
    """The keep `verdict` after its confirmation and its external truth (the module's rule)."""
    if verdict.kind != "keep":
        return verdict
    served = confirmation.path == "served"
    where = "fresh servers" if served else "fresh processes"
    if truth.outcome == "refuted":
        return replace(
            verdict,
            kind="rejected",
            reason=f"{truth.reason} (bench: {verdict.reason})",
            flags=(*verdict.flags, "external_truth_refutes"),
        )
    if confirmation.outcome != "confirmed":
        if served:
            return replace(
                verdict,
                kind="borderline",
                flags=(*verdict.flags, "confirmation_disagrees"),
                reason=f"the keep's confirmation in fresh servers is {confirmation.outcome}: "
                f"{confirmation.reason} (first: {verdict.reason})",
            )
        return replace(
            verdict,
            kind="borderline",
            flags=(*verdict.flags, "reverify_disagrees"),
            reason=f"the decision taken again in fresh processes disagrees: first {verdict.reason}; "
            f"fresh processes {confirmation.reason}",
        )
    seen = f"{where} {confirmation.reason}" if served else f"fresh processes ({confirmation.reason})"
    if verdict.needs_stronger_checks:
        missing = [truth.reason] if truth.kind == "none" or truth.outcome == "inconclusive" else []
        if not served:
            missing.append("no output audit on fresh inputs: the bench has no served mode ([target].serve)")
        if missing:
            why = verdict.escalation or "a speed too good to take on the bench's word"
            return send_to_review(
                verdict,
                "stronger_checks_unavailable",
                f"{why}: the stronger checks could not run ({'; '.join(missing)}); {seen}",
            )
        return checks_agree(verdict, f"{truth.reason}; audited outputs on fresh inputs in {seen}")
    if truth.outcome == "inconclusive":
        hint = (
            " (a look of more timed calls, or a quieter machine, lets the OS tell)" if truth.kind == "os_time" else ""
        )
        return send_to_review(
            verdict,
            "external_truth_inconclusive",
            f"{truth.reason}: no clock outside the candidate's process confirms the claim{hint}; {seen}",
        )
    told = "" if truth.kind == "profiler" else f"; {truth.reason}"  # Evidence.confirm already quotes the profiler
    return replace(verdict, reason=f"{verdict.reason}; confirmed in {seen}{told}")


def truth_line(record: dict[str, Any], status: str) -> str:
    """A kept iteration's external truth in one line: its record's, or for a keep that has
    none (accepted in review, or kept by an older kopt) or one the OS could not tell (accepted
    in review), the bench's timer only."""
    got = record.get("external_truth")
    if isinstance(got, dict) and got.get("reason"):
        if got.get("outcome") == "inconclusive":  # kept only by the engineer's word
            return f"{TIMER_ONLY} (accepted in review; {got['reason']})"
        return str(got["reason"])
    if status == "baseline":
        return "the baseline (nothing to confirm)"
    how = "accepted in review" if status == "accepted" else "no external truth recorded"
    return f"{TIMER_ONLY} ({how})"


def os_truth(record: Mapping[str, Any]) -> OsTruth:
    """The OS's accounting over every look of an iteration's decision and of its confirmation so far."""
    return weigh([look for stage in (Stage.EVAL, Stage.REVERIFY) for look in looks_of(side_costs(record, stage))])


def side_costs(record: Mapping[str, Any], stage: str) -> list[SideCost]:
    """Each side's cost per look of a stage: the served looks' (record["side_costs"]), or for
    process-level looks each process's wall time beside its bench's timed seconds
    (record["bench_runs"]; no CPU time: NaN, the OS's wall clock alone weighs them)."""
    served = (record.get("side_costs") or {}).get(stage) or []
    if served:
        return [SideCost.from_dict(c) for c in served]
    return [
        SideCost(str(r["side"]), int(r["round"]), math.nan, float(r["wall_s"]), r.get("timed_s"))
        for r in (record.get("bench_runs") or {}).get(stage) or []
        if r.get("side") in ("best", "cand")
    ]
