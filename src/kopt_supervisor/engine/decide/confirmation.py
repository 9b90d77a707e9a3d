"""A keep's confirmation (pure): a few looks of best and the candidate in freshly started
processes that decide only what the keep claims (docs/design.md §12, "Revised (wave 3)").

The decision already proved a gain at the policy's confidence, in processes the candidate
shared its measurement with for a while (its server, its caches). The confirmation asks
fresh processes one narrower question: does each class the keep claims improved show its
gain, and is no class slower beyond the margin? Classes the keep does not claim (the guard
class, a class the decision left undecided) never make it look again; they only stop it
when they are slower beyond their margin.

- `claimed_gains(verdict)`: class -> the cost ratio the keep claims for it.
- `shows_half(claimed, seen)`: the one rule for "the gain is there": at least half the
  claimed gain (the fresh-process re-decision's `consistent_gain` reads it too).
- `judge(pairs, claim, policy, ...)`: after each look, `Confirmation` with outcome
  "looking" (look again), "confirmed", "refuted" or "undecided":

  * confirmed, as soon as (from MIN_LOOKS on) every claimed class is shown (its interval lies
    below no-change and its estimate shows at least half the claimed gain) or consistent (a
    clear gain, below), and no other class's estimate is slower beyond its margin
    ([decide].max_other_regression_pct; guard_max_regression_pct for the guard class);
  * at MAX_LOOKS, confirmed when every claimed class's estimate shows at least half the
    claimed gain and lies beyond the looks' noise (`beyond_noise`: its interval over the looks,
    taken as one planned look, at `noise_alpha` lies below no-change), and no class's
    estimate is slower beyond its margin (noise that left the spent interval open does not
    send a real gain to review; noise that makes half a small claim does not confirm it);
  * refuted, as soon as a claimed class's interval rules out half its claimed gain, or
    another class's interval lies wholly above its margin (proven slower);
  * the extension (2026-11-29): when MAX_LOOKS leaves it undecided only because claimed
    classes six looks cannot tell (`half_in_noise`: half the claim within the looks' noise;
    `not_shown`: less than half, but not ruled out, as when one look of six was disturbed;
    every other claimed class enough there, no class estimated slower beyond its margin), the
    same fresh servers take more looks, up to EXTENDED_MAX_LOOKS. After each, such a class is shown when
    its interval over every look at `noise_alpha` lies below no-change (its estimate keeping
    half the claim), refuted when that interval rules out half the claim; the classes six
    looks settled stay settled; another class refutes when that interval lies wholly beyond
    its margin. Confirmed once every claimed class is there ("after N looks (N-6 past 6 ...)"),
    undecided at EXTENDED_MAX_LOOKS otherwise;
  * undecided at MAX_LOOKS otherwise (the engineer decides, with both numbers).

  The half-claim test is one alpha (1 - [decide].confidence) spent over looks
  MAX_LOOKS..EXTENDED_MAX_LOOKS: MAX_LOOKS_ALPHA_SHARE (half) at MAX_LOOKS, the rest over looks
  7..12 in proportion to the look's index (`noise_alpha`). By the union bound a claim that is
  not there passes one of those tests in at most alpha/2 = 0.5% of confirmations, the bound
  MAX_LOOKS alone had with all of alpha: the whole confirmation's A/A error stays at most
  0.35% (looks 2-5) + 0.5% (looks 6-12), whichever state at MAX_LOOKS started the extension.
  Re-testing at the full alpha at every extra look would not (A/A 2-3% claims in 7% noise:
  5 and 11 of 400 draws confirmed, 2 and 2 with the split; tests/decide/test_confirmation_looks.py).
  Looks 2..5 and the `consistent` path are unchanged; a class refuted (its interval rules out
  half the claim), proven slower or likely slower at MAX_LOOKS ends there as before.
  On a GPU a look costs ~1.2 s. experiments/confirmation_looks.py --extend, docs/decision.md
  ("More looks for half a claim in noise").

  The estimate alone is not enough at MAX_LOOKS: for a small claim, half of it (1% of a 2%
  claim) is well within six looks' noise. On the estimate alone, a -2% claim that was not
  there was confirmed in 12 of the H200's 96 A/A windows and 8-43% of simulated A/A
  confirmations (one look moved by -30% makes it even in 0.3% noise: six looks are too few
  for the outlier test). `beyond_noise` asks the six looks themselves, at the decision's own
  confidence for one look (alpha = 1 - confidence, not spent over the looks): a claim that is
  not there passes it in at most (1 - confidence)/2 = 0.5% of confirmations, whatever the
  fresh processes' noise (simulated: at most 0.49% at MAX_LOOKS). The decision's look-to-look
  sd (`decided_sd`, as `consistent` asks) was weighed in its place and not taken: it knows
  nothing of a look the fresh processes disturbed nor of fresh looks noisier than the
  decision's (A/A 2-3% claims still confirmed in 3.9-5.9% of draws in 0.3% noise). The cost:
  a real gain six looks cannot tell from no change goes to review (a true -3% in the tuned
  RMSNorm's 2.4-4.2% per-look noise: confirmed in 14% of draws, 84% before; in 1% noise
  76-86%, 94-95% before). experiments/confirmation_looks.py --max-looks, docs/decision.md
  ("Half a claim at MAX_LOOKS", 2026-11-29).

  A class the keep does not claim holds the confirmation while its estimate lies beyond its
  margin (looks_slower), but at MAX_LOOKS it blocks only when it is likely slower: its
  interval at [decide].futility_confidence (the decision's own futility rule) lies wholly
  beyond the margin. The decision already bounded that class over all its looks; six looks
  of an untouched class in noise say little: on the H200 an unchanged narrow class read
  +1.5% [-2.3, +5.6] against a +1% margin and sent a real -2.9% keep to review
  (docs/h100-wave3/part3-one-pass-profile-h200.md). No candidate gains by looking slower in
  fresh processes, so this loosens nothing a hostile one could use. A keep decided against an
  older BEST and carried to this one (`judge(..., bounded=False)`, loop/keep.py) had no
  decision bound its unclaimed classes here: at the last look an estimate beyond the margin
  holds it (the engineer decides), as a decision's "regressed beyond tolerance" would.

  Intervals are the decision's own (`estimate.estimate_class`: order-balanced mean of the
  log ratios, outliers and disturbed looks left out, alpha spent over the looks
  MIN_LOOKS..MAX_LOOKS at [decide].confidence).

- `consistent(...)`: a clear gain needs no third look. After two looks the interval has one
  degree of freedom (alpha_2 = 0.001: t = 637), and the class's configs cannot stand in for
  looks: noise every config of a look shares (a side's clocks, a load spike: within-class
  correlation 0.42-0.55 in the H200's A/A looks) moves them together, so a rule taking them
  as replicates confirmed 0.5-45% of simulated A/A confirmations of a 2% claim
  (experiments/confirmation_looks.py).
  What the two looks cannot say about that shared noise, the decision's own looks say: a
  claimed class is consistent when, in every look (both orders), every config keeps at least
  half the claimed gain, that half is at least CONSISTENT_MIN_HALF_GAIN, and it is at least
  CONSISTENT_NOISE_MULTIPLE times the look-to-look sd the decision's interval allows
  (`decided_sd`, an upper bound). A claim that is not there then needs noise several times
  the decision's, minutes earlier on the same machine, in both looks and every config at
  once; refutation, MAX_LOOKS and the classes the keep does not claim are unchanged.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from kopt_supervisor.engine.decide import t_quantile
from kopt_supervisor.engine.decide.estimate import (
    ClassResult,
    Pair,
    Policy,
    Verdict,
    alpha_at_look,
    class_samples,
    estimate_class,
)
from kopt_supervisor.engine.decide.verdict import GUARD_CLASS, voting_classes
from kopt_supervisor.engine.records import known_fields

MIN_LOOKS = 2
MAX_LOOKS = 6
EXTENDED_MAX_LOOKS = 12
"""A claimed class six looks cannot tell at MAX_LOOKS (`EXTENDS`) takes more looks in the same fresh servers, up to here (`judge`'s extension;
on a GPU ~1.2 s a look)."""
EXTENDS = ("half_in_noise", "not_shown")
"""The states at MAX_LOOKS of a claimed class that looks on (the extension): half its claim
within the looks' noise, or less than half but not ruled out (a disturbed look among six)."""
MAX_LOOKS_ALPHA_SHARE = 0.5
"""With the extension, the share of alpha (1 - [decide].confidence) the half-claim test spends
at MAX_LOOKS (`beyond_noise`); the rest is spent over looks MAX_LOOKS+1..EXTENDED_MAX_LOOKS in
proportion to the look's index (`noise_alpha`). Their sum is the alpha MAX_LOOKS alone spent
before the extension: the union bound on the whole half-claim path is unchanged."""
OS_MAX_LOOKS = 12
"""Without a GPU, a claim this rule confirms but the OS's accounting cannot tell yet (its CPU
clock counts 10 ms ticks) takes looks up to here: a look there costs a fraction of a second.
On this project's 2-core machine at a load of 6, a patched timer claiming ~0.035 s a look
left the OS's 99% interval at -0.025..0.033 s after 6 looks of a confirmation, the claim just
inside it (kept on the bench's timer), and outside it in runs on a quieter machine."""
CONSISTENT_MIN_HALF_GAIN = 0.13
"""`consistent` takes claims whose half is at least this gain (claims of at least 26%): twice
the largest per-look sd measured on the H200 (7%, sd35-large on the tuned RMSNorm), so that
even noise the decision did not see must move both looks by two sds to fake half a claim."""
CONSISTENT_NOISE_MULTIPLE = 3.0
"""`consistent` takes claims whose half (in log) is at least this many times `decided_sd`."""
OUTCOMES = ("looking", "confirmed", "refuted", "undecided")
STATES = (
    "shown",
    "consistent",
    "half_shown",
    "half_in_noise",
    "open",
    "not_shown",
    "refuted",
    "within",
    "looks_slower",
    "slower",
    "no_samples",
)
"""A class's state in a confirmation. Claimed classes: shown (interval below no-change and
at least half the claim), consistent (every config of every look keeps at least half a
clear claim, `consistent`), half_shown (at least half the claim, interval still open; at
MAX_LOOKS beyond the looks' noise, `beyond_noise`: enough there), half_in_noise (at MAX_LOOKS,
at least half the claim but within the looks' noise: undecided), open, not_shown (less than
half the claim at MAX_LOOKS), refuted (the interval rules out half the claim). Other classes: within (estimate within its margin),
looks_slower (estimate beyond it, not proven), slower (interval wholly beyond it).
no_samples: the class has no comparable sample in the looks."""
CONFIRMING = ("shown", "consistent")


@dataclass(frozen=True)
class ClassCheck:
    """One class in a confirmation: what the keep claimed and what the fresh looks show."""

    cls: str
    claimed: float | None
    """The cost ratio the keep claims (below 1: a gain); None for a class it does not claim."""
    ratio: float
    lo: float
    hi: float
    """The fresh looks' estimate of the cost ratio and its interval."""
    state: str
    """One of STATES."""
    margin_pct: float = 0.0
    """Unclaimed classes: how much slower the class may be (its regression margin)."""

    def to_dict(self) -> dict[str, Any]:
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in asdict(self).items()}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ClassCheck:
        values: dict[str, Any] = {
            k: (math.nan if v is None and k in ("ratio", "lo", "hi") else v) for k, v in known_fields(cls, d).items()
        }
        return cls(**values)

    def line(self) -> str:
        """ "D=4096 −40.2% [−41.0, −39.5] (claimed −40.5%)"."""
        if math.isnan(self.ratio):
            return f"{self.cls}: no samples"
        if self.state == "consistent":  # the interval over so few looks says nothing: not shown
            half = "every config of every look keeps at least half of it"
            return f"{self.cls} {_pct(self.ratio)} (claimed {_pct(self.claimed)}; {half})"
        text = f"{self.cls} {_pct(self.ratio)} [{_pct(self.lo, sign=False)}, {_pct(self.hi, sign=False)}]"
        return text + (f" (claimed {_pct(self.claimed)})" if self.claimed is not None else "")


@dataclass(frozen=True)
class Confirmation:
    """record["confirmation"]: how a keep was confirmed in fresh processes."""

    outcome: str
    """One of OUTCOMES ("looking": the rule asks for another look)."""
    reason: str
    looks: int
    classes: tuple[ClassCheck, ...] = ()
    seconds: float = 0.0
    """Wall seconds the confirmation took (servers started, looks, audits)."""
    path: str = "served"
    """"served": fresh per-tree servers; "process": the process-level bench decided again;
    "profiler": the keep's profile pair (external_truth.by_profiler)."""

    @property
    def final(self) -> bool:
        return self.outcome != "looking"

    def to_dict(self) -> dict[str, Any]:
        return {
            "outcome": self.outcome,
            "reason": self.reason,
            "looks": self.looks,
            "seconds": self.seconds,
            "path": self.path,
            "classes": {c.cls: c.to_dict() for c in self.classes},
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Confirmation:
        values = known_fields(cls, d)
        values["classes"] = tuple(ClassCheck.from_dict(c) for c in (d.get("classes") or {}).values())
        return cls(**values)


def is_claimed(cls: str, verdict: str) -> bool:
    """Whether a class's decision is part of what a keep claims (and what its confirmation and
    external truth must show): improved, and not the guard class, which only guards."""
    return verdict == "improved" and cls != GUARD_CLASS


def claimed_gains(verdict: Verdict) -> dict[str, float]:
    """class -> the cost ratio a keep claims: its improved classes (`is_claimed`); a keep with
    none (the two_in_a_row policy's sub-threshold gains) claims the classes whose interval lies
    below 1. The guard class is never claimed."""
    improved = {c.cls: c.ratio for c in verdict.classes if is_claimed(c.cls, c.verdict)}
    return improved or {
        c.cls: c.ratio for c in verdict.classes if c.cls != GUARD_CLASS and math.isfinite(c.hi) and c.hi < 1.0
    }


def shows_half(claimed: float, seen: float) -> bool:
    """The one rule for "the claimed gain is there": the seen cost ratio keeps at least half
    of the claimed gain (claimed 0.60, a 40% gain: seen must be at most 0.80)."""
    return seen <= 1.0 - (1.0 - claimed) / 2.0


def decided_sd(decided: ClassResult, policy: Policy, *, final: bool) -> float:
    """An upper bound on the look-to-look sd of the class's log cost ratio in the decision's
    looks, from the interval the keep claims (inf without one, or with fewer than 3 samples).
    That interval is `estimate_class`'s at `policy`: a half-width of t * sd * sqrt(inv), t the
    (1 - alpha_k/2) quantile at df n - 1 or n - 2, alpha_k spent at the decision's look
    (`final`: its last look was the policy's last), inv = (1/n_AB + 1/n_BA)/4 >= 1/n. The
    claim does not say the df nor the order counts, so the bound takes df = n - 1 and inv = 1/n
    (each can only make it larger); a decision given extra rounds spent less alpha at each
    look (a larger t) than `policy` says, which only makes it larger too."""
    if decided.n < 3 or not 0.0 < decided.lo <= decided.hi < math.inf:
        return math.inf
    half_width = (math.log(decided.hi) - math.log(decided.lo)) / 2.0
    alpha = alpha_at_look(decided.rounds, policy, final=final)
    return half_width * math.sqrt(decided.n) / t_quantile(1.0 - alpha / 2.0, decided.n - 1)


def consistent(
    claimed: float, decided: ClassResult | None, pairs: Sequence[Pair], policy: Policy, *, final: bool
) -> bool:
    """A clear gain shown by every config in every look (module docstring): looks of both
    orders (the position effect seen both ways), each undisturbed pair's cost ratio keeping at
    least half the claimed gain (`shows_half`), and that half at least CONSISTENT_MIN_HALF_GAIN
    and CONSISTENT_NOISE_MULTIPLE times the decision's look-to-look sd (`decided_sd`; `final`:
    the decision ended at the policy's last look or budget)."""
    half = 1.0 - (1.0 - claimed) / 2.0
    used = [p for p in pairs if not p.flagged]
    if decided is None or half > 1.0 - CONSISTENT_MIN_HALF_GAIN or {p.order for p in used} != {"AB", "BA"}:
        return False
    if not all(shows_half(claimed, policy.cost_ratio(p.best, p.cand)) for p in used):
        return False
    return -math.log(half) >= CONSISTENT_NOISE_MULTIPLE * decided_sd(decided, policy, final=final)


def consistent_gain(first: Verdict, fresh: Verdict) -> bool:
    """A fresh-process decision (the process-level path) left undecided by its noise
    (borderline at max rounds) still confirms the keep when it sees, in every class the
    first decision found improved, at least half that gain (`shows_half`), and no class
    slower. Candidate code that bent the first decision's numbers shows no gain in fresh
    processes (its estimate sits at 1, far from half a claimed gain)."""
    if fresh.kind != "borderline" or any(c.verdict == "regressed" for c in fresh.classes):
        return False
    seen = fresh.by_class()
    improved = [c for c in first.classes if c.verdict == "improved"]
    return bool(improved) and all(c.cls in seen and shows_half(c.ratio, seen[c.cls].ratio) for c in improved)


def noise_alpha(
    looks: int, policy: Policy, *, max_looks: int = MAX_LOOKS, extend_to: int = EXTENDED_MAX_LOOKS
) -> float:
    """The two-sided alpha the half-claim test (`beyond_noise`) spends at look `looks` (from
    `max_looks` on). Without an extension (`extend_to` <= `max_looks`): alpha = 1 -
    [decide].confidence at `max_looks`, all of it. With one: MAX_LOOKS_ALPHA_SHARE of it at
    `max_looks`, the rest spent over looks max_looks+1..extend_to in proportion to the look's
    index (`estimate.alpha_at_look`'s spending; the last look spends what is left), so the
    alphas of looks max_looks..extend_to sum to alpha: a claim that is not there passes one
    of them in at most alpha/2 of confirmations (the union bound), as at MAX_LOOKS alone."""
    alpha = 1.0 - policy.confidence
    if extend_to <= max_looks:
        return alpha
    if looks <= max_looks:
        return alpha * MAX_LOOKS_ALPHA_SHARE
    rest = replace(
        policy, confidence=1.0 - alpha * (1.0 - MAX_LOOKS_ALPHA_SHARE), min_rounds=max_looks + 1, max_rounds=extend_to
    )
    return alpha_at_look(looks, rest, final=looks >= extend_to)


def _at_alpha(cls: str, pairs: Sequence[Pair], policy: Policy, alpha: float) -> ClassResult:
    """The class's result (`estimate_class`, the decision's estimator) over every look in
    `pairs`, its interval at `alpha` (one planned look: `alpha_at_look` spends all of it)."""
    one_look = replace(policy, confidence=1.0 - alpha, min_rounds=2, max_rounds=2)
    ps = list(pairs)
    return estimate_class(cls, ps, class_samples(ps, one_look).get(cls, []), one_look, final=True)


def beyond_noise(cls: str, pairs: Sequence[Pair], policy: Policy, *, alpha: float | None = None) -> bool:
    """Whether the class's gain lies beyond its looks' noise: its interval (`estimate_class`,
    the decision's estimator) over the looks, taken as one planned look at `alpha` (default 1 -
    [decide].confidence; `judge` passes `noise_alpha`), lies below no-change. A claim that is
    not there passes it in at most alpha/2 of confirmations (module docstring)."""
    return _at_alpha(cls, pairs, policy, 1.0 - policy.confidence if alpha is None else alpha).hi < 1.0


def judge(
    pairs: Sequence[Pair],
    claim: Verdict,
    policy: Policy,
    *,
    guard_configs: frozenset[str] = frozenset(),
    min_looks: int = MIN_LOOKS,
    max_looks: int = MAX_LOOKS,
    extend_to: int = EXTENDED_MAX_LOOKS,
    looks: int | None = None,
    bounded: bool = True,
) -> Confirmation:
    """The confirmation after the looks in `pairs` (see the module's rule); `looks`: how many
    were taken (default: the rounds the pairs hold; a look may have left no pair; a pair's
    round is its look's index from 0). `extend_to`: the extension's cap (<= `max_looks`: none,
    the rule before 2026-11-29's extension). `bounded`: the decision bounded the classes the
    keep does not claim against this same BEST; False for a keep decided against an older BEST
    and carried here (loop/keep.py `Keeper.carry`), whose unclaimed classes this confirmation
    alone measures here: one whose estimate lies beyond its margin at the last look then holds
    it (undecided: the engineer decides), as a decision's "regressed beyond tolerance" would."""
    looks = max(looks or 0, len({p.round for p in pairs}))
    if looks > max_looks and extend_to > max_looks:
        six = [p for p in pairs if p.round < max_looks]
        at_max = _judge(six, claim, policy, guard_configs, min_looks, max_looks, extend_to, max_looks, bounded)
        if at_max.outcome == "looking":  # extended at max_looks: only its EXTENDS classes look on
            return _extension(at_max, pairs, claim, policy, guard_configs, max_looks, extend_to, looks, bounded)
    return _judge(pairs, claim, policy, guard_configs, min_looks, max_looks, extend_to, looks, bounded)


def _by_class(pairs: Sequence[Pair], guard_configs: frozenset[str]) -> dict[str, list[Pair]]:
    votes = voting_classes({p.config: p.cls for p in pairs}, guard_configs)
    by_class: dict[str, list[Pair]] = defaultdict(list)
    for p in pairs:
        cls = votes[p.config]
        # a frozen pair already in its voting class is kept as it is: a copy per pair per look
        # was a third of a simulated confirmation's time (tests/decide/test_confirmation_looks.py)
        by_class[cls].append(p if p.cls == cls else replace(p, cls=cls))
    return by_class


def _judge(
    pairs: Sequence[Pair],
    claim: Verdict,
    policy: Policy,
    guard_configs: frozenset[str],
    min_looks: int,
    max_looks: int,
    extend_to: int,
    looks: int,
    bounded: bool = True,
) -> Confirmation:
    """The rule up to MAX_LOOKS (and, without an extension, after it: the OS's extra looks)."""
    by_class = _by_class(pairs, guard_configs)
    final = looks >= max_looks
    rule = replace(policy, min_rounds=min_looks, max_rounds=max(max_looks, min_looks))
    claims = claimed_gains(claim)
    decided = claim.by_class()
    decided_final = claim.rounds >= policy.max_rounds or claim.gpu_seconds >= policy.budget_gpu_s  # verdict.evaluate's
    alpha = noise_alpha(min(looks, max_looks), policy, max_looks=max_looks, extend_to=extend_to)
    checks: list[ClassCheck] = []
    for cls in sorted(set(by_class) | set(claims)):
        ps = by_class.get(cls, [])
        r = estimate_class(cls, ps, class_samples(ps, rule).get(cls, []), rule, final=final) if ps else None
        clear = cls in claims and consistent(claims[cls], decided.get(cls), ps, policy, final=decided_final)
        check = _check(cls, r, claims.get(cls), margin_of(cls, policy), final=final, clear=clear, bounded=bounded)
        if final and check.state == "half_shown" and not beyond_noise(cls, ps, policy, alpha=alpha):
            check = replace(check, state="half_in_noise")
        checks.append(check)
    out = _outcome(tuple(checks), looks, claims, min_looks=min_looks, final=final)
    if looks == max_looks < extend_to and _extends(out):
        return replace(
            out,
            outcome="looking",
            reason=f"{looks} looks cannot tell the claimed gain from their noise: looking on, up to "
            f"{extend_to} looks: " + "; ".join(c.line() for c in out.classes if c.state in EXTENDS),
        )
    return out


def _extends(out: Confirmation) -> bool:
    """Whether MAX_LOOKS's outcome extends: undecided only because claimed classes six looks
    cannot tell (EXTENDS; every other claimed class enough there, no class estimated slower
    beyond its margin)."""
    claimed = [c for c in out.classes if c.claimed is not None]
    others = [c for c in out.classes if c.claimed is None]
    return (
        out.outcome == "undecided"
        and any(c.state in EXTENDS for c in claimed)
        and all(c.state in (*CONFIRMING, "half_shown", *EXTENDS) for c in claimed)
        and all(c.state == "within" for c in others)
    )


def _extension(
    at_max: Confirmation,
    pairs: Sequence[Pair],
    claim: Verdict,
    policy: Policy,
    guard_configs: frozenset[str],
    max_looks: int,
    extend_to: int,
    looks: int,
    bounded: bool = True,
) -> Confirmation:
    """Looks max_looks+1..extend_to (module docstring): a class `half_in_noise` at max_looks is
    shown when its interval over every look at `noise_alpha` lies below no-change and its
    estimate keeps half the claim, refuted when that interval rules out half the claim; the
    classes the six looks settled stay settled; a class the keep does not claim refutes when
    that interval lies wholly beyond its margin and holds the confirmation while it is likely
    beyond it (as at MAX_LOOKS)."""
    by_class = _by_class(pairs, guard_configs)
    alpha = noise_alpha(looks, policy, max_looks=max_looks, extend_to=extend_to)
    final = looks >= extend_to
    checks: list[ClassCheck] = []
    for settled in at_max.classes:
        ps = by_class.get(settled.cls, [])
        if settled.claimed is not None and settled.state not in EXTENDS:
            checks.append(settled)
            continue
        r = _at_alpha(settled.cls, ps, policy, alpha) if ps else None
        check = _check(settled.cls, r, settled.claimed, settled.margin_pct, final=True, bounded=bounded)
        if settled.claimed is not None and check.state == "half_shown":
            check = replace(check, state="half_in_noise")
        elif check.state == "not_shown" and not final:
            check = replace(check, state="open")
        checks.append(check)
    claimed = [c for c in checks if c.claimed is not None]
    others = [c for c in checks if c.claimed is None]
    more = f"after {looks} looks ({looks - max_looks} past {max_looks}: {max_looks} looks could not tell)"

    def out(outcome: str, reason: str) -> Confirmation:
        return Confirmation(outcome, reason, looks, tuple(checks))

    refuted = [c for c in claimed if c.state == "refuted"]
    if refuted:
        return out("refuted", f"less than half the claimed gain {more}: " + "; ".join(c.line() for c in refuted))
    slower = [c for c in others if c.state == "slower"]
    if slower:
        return out("refuted", f"slower beyond the margin {more}: " + _slower(slower))
    shown = "; ".join(c.line() for c in claimed)
    looks_slower = [c for c in others if c.state == "looks_slower"]
    if all(c.state in (*CONFIRMING, "half_shown") for c in claimed) and not looks_slower:
        return out("confirmed", f"{more}: {shown}")
    if not final:
        return out("looking", f"{more}: {shown}")
    if looks_slower:
        return out("undecided", f"{shown}, but estimated slower beyond the margin {more}: " + _slower(looks_slower))
    return out(
        "undecided",
        f"not shown beyond the looks' noise {more} (their interval at the decision's confidence, spent over "
        f"looks {max_looks}..{extend_to}, holds no change or the estimate keeps less than half the claim): "
        + "; ".join(c.line() for c in claimed if c.state not in (*CONFIRMING, "half_shown")),
    )


def margin_of(cls: str, policy: Policy) -> float:
    """How much slower an unclaimed class may be: the guard's margin or any other class's."""
    return policy.guard_max_regression_pct if cls == GUARD_CLASS else policy.max_other_regression_pct


def _check(
    cls: str,
    r: ClassResult | None,
    claimed: float | None,
    margin: float,
    *,
    final: bool,
    clear: bool = False,
    bounded: bool = True,
) -> ClassCheck:
    if r is None or math.isnan(r.ratio):
        return ClassCheck(cls, claimed, math.nan, math.nan, math.nan, "no_samples", margin)
    if claimed is not None:
        if not shows_half(claimed, r.lo):
            state = "refuted"  # even the interval's best end keeps less than half the gain
        elif r.hi < 1.0 and shows_half(claimed, r.ratio):
            state = "shown"
        elif clear:
            state = "consistent"
        elif shows_half(claimed, r.ratio):
            state = "half_shown"
        else:
            state = "not_shown" if final else "open"
        return ClassCheck(cls, claimed, r.ratio, r.lo, r.hi, state, 0.0)
    limit = 1.0 + margin / 100.0
    if r.lo > limit:
        state = "slower"
    elif final and bounded:  # likely slower, or left to the decision's bound (module docstring)
        likely_lo = r.plausible_lo if math.isfinite(r.plausible_lo) else r.lo
        state = "looks_slower" if likely_lo > limit else "within"
    else:
        state = "looks_slower" if r.ratio > limit else "within"
    return ClassCheck(cls, None, r.ratio, r.lo, r.hi, state, margin)


def _outcome(
    checks: tuple[ClassCheck, ...], looks: int, claims: dict[str, float], *, min_looks: int, final: bool
) -> Confirmation:
    def out(outcome: str, reason: str) -> Confirmation:
        return Confirmation(outcome, reason, looks, checks)

    claimed = [c for c in checks if c.claimed is not None]
    others = [c for c in checks if c.claimed is None]
    shown = "; ".join(c.line() for c in claimed)
    if not claims:
        return out("undecided", "the keep claims no class improved: nothing to confirm")
    if looks < min_looks:
        return out("looking", f"{looks} of at least {min_looks} looks")
    refuted = [c for c in claimed if c.state == "refuted"]
    if refuted:
        return out(
            "refuted", f"less than half the claimed gain after {looks} looks: " + "; ".join(c.line() for c in refuted)
        )
    slower = [c for c in others if c.state == "slower"]
    if slower:
        return out("refuted", f"slower beyond the margin after {looks} looks: " + _slower(slower))
    looks_slower = [c for c in others if c.state == "looks_slower"]
    if all(c.state in CONFIRMING for c in claimed) and not looks_slower:
        return out("confirmed", f"after {looks} looks: {shown}")
    if not final:
        return out("looking", f"after {looks} looks: {shown}")
    missing = [c for c in claimed if c.state in ("not_shown", "no_samples")]
    if missing:
        return out(
            "undecided", f"less than half the claimed gain after {looks} looks: " + "; ".join(c.line() for c in missing)
        )
    in_noise = [c for c in claimed if c.state == "half_in_noise"]
    if in_noise:
        return out(
            "undecided",
            f"at least half the claimed gain after {looks} looks, but within their noise (their interval "
            "at the decision's confidence holds no change): " + "; ".join(c.line() for c in in_noise),
        )
    if looks_slower:
        return out(
            "undecided",
            f"{shown}, but estimated slower beyond the margin after {looks} looks: " + _slower(looks_slower),
        )
    return out("confirmed", f"at least half the claimed gain after {looks} looks: {shown}")


def _slower(checks: list[ClassCheck]) -> str:
    return "; ".join(f"{c.line()} (margin +{c.margin_pct:g}%)" for c in checks)


def _pct(ratio: float | None, *, sign: bool = True) -> str:
    if ratio is None or not math.isfinite(ratio):
        return "?"
    text = f"{(ratio - 1.0) * 100.0:+.1f}".replace("-", "−")
    return text + ("%" if sign else "")
