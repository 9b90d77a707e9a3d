"""From per-class results to the run verdict, with its reason and cost (docs/design.md §5).

Pure functions:
- `evaluate(pairs, policy, ...)`: the verdict after the looks so far; kind "undecided"
  asks the loop for another look. The verdict is final as soon as no outcome of the
  classes still undecided could change it, at max_rounds, or when the GPU-second budget is
  spent; a rejection (regression, split, tie) also as soon as no outcome left *plausible*
  could (`gain_ruled_out`).
- what a finding, the stronger checks or the engineer do to a verdict (`escalate`,
  `checks_agree`, `send_to_review`, `note`, `review_outcome`) are review.py's.
- `summary(verdict)`: one line with the GPU-seconds spent, for logs and the TUI.
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace

from kopt_supervisor.engine import BadInput
from kopt_supervisor.engine.decide.estimate import (
    ClassResult,
    Pair,
    Policy,
    Spread,
    Verdict,
    class_samples,
    drop_outliers,
    estimate_class,
    residual_ss,
)
from kopt_supervisor.engine.decide.plausible import (
    REVIEW,
    BenchRun,
    below_floor,
    last_block_not_faster,
    last_block_unsure,
    mean_not_faster,
    repeated_values,
    too_fast,
    wall_time_unexplained,
)
from kopt_supervisor.engine.decide.review import escalate, note, send_to_review

GUARD_CLASS = "guard (non-production)"
"""The class the non-production configs join under `guard_configs`: it can block a keep
(a regression beyond guard_max_regression_pct) but is never a target and never earns one."""


def guard_of(production: Mapping[str, bool], production_verdicts: bool) -> frozenset[str]:
    """The configs that guard instead of voting: the non-production ones, when
    [decide].production_verdicts is on (none otherwise)."""
    return (
        frozenset(k for k, is_production in production.items() if not is_production)
        if production_verdicts
        else frozenset()
    )


def voting_classes(config_classes: dict[str, str], guard_configs: frozenset[str]) -> dict[str, str]:
    """config -> the class it votes in: its own, or GUARD_CLASS for a guard config. The guard
    is ignored when it would take every config (nothing would be left to vote)."""
    if not guard_configs or all(k in guard_configs for k in config_classes):
        return dict(config_classes)
    return {k: GUARD_CLASS if k in guard_configs else cls for k, cls in config_classes.items()}


MAX_ENUMERATED_UNDECIDED = 6
"""Early stopping checks every outcome of the undecided classes (5 each); beyond this many
undecided classes the decision simply waits for them."""


def judged_pairs(pairs: Sequence[Pair], guard_configs: frozenset[str]) -> list[Pair]:
    """The pairs in the classes they vote in (`voting_classes`: a guard config's in GUARD_CLASS)."""
    votes = voting_classes({p.config: p.cls for p in pairs}, guard_configs)
    if not any(c == GUARD_CLASS for c in votes.values()):
        return list(pairs)
    return [replace(p, cls=votes[p.config]) for p in pairs]


def pooled_spreads(
    decisions: Iterable[Sequence[Pair]], policy: Policy, guard_configs: frozenset[str] = frozenset()
) -> dict[str, Spread]:
    """Per class (as `evaluate` forms them: the guard's configs in GUARD_CLASS), the spread of
    the looks of `decisions` (a run's earlier ones) around each decision's order means, pooled
    ([decide].pooled_noise), without the looks each decision left out (flagged by the GPU gate,
    or the ESD test's outliers: on the H200 two spikes in a run's first decision widened the
    pool fourfold, 1.3-1.6% per look instead of 0.2%, and its next five keeps took 6-12 looks
    instead of 4, part 24). A class none of them has looks of is absent."""
    ss: dict[str, float] = defaultdict(float)
    df: dict[str, int] = defaultdict(int)
    for pairs in decisions:
        judged = judged_pairs(pairs, guard_configs)
        if any(p.block for p in judged):
            continue  # looks of several blocks: not one sample per look
        for cls, samples in class_samples(judged, policy).items():
            kept, _ = drop_outliers([x for x in samples if not x.flagged])  # as the decision left them out
            s, d = residual_ss(kept)
            if d > 0:
                ss[cls] += s
                df[cls] += d
    return {cls: Spread(ss[cls] / df[cls], df[cls]) for cls in df}


def evaluate(
    pairs: list[Pair],
    policy: Policy,
    *,
    target_class: str | None = None,
    gpu_seconds: float = 0.0,
    floors: dict[str, float] | None = None,
    previous_subthreshold_gain: bool = False,
    guard_configs: frozenset[str] = frozenset(),
    runs: Sequence[BenchRun] = (),
    spreads: Mapping[str, Spread] | None = None,
) -> Verdict:
    """The verdict after the looks in `pairs`; kind "undecided" asks for another look.

    target_class: the class the hypothesis aims at; None for a global hypothesis (every
    class must improve). gpu_seconds: timed bench seconds spent so far on this decision.
    floors: config -> the metric's roofline floor (a candidate beating it is suspicious).
    previous_subthreshold_gain: the previous iteration ended with a significant gain below
    min_effect_pct (its verdict had the flag "subthreshold_gain"); with the two_in_a_row
    policy a second one in a row keeps.
    guard_configs: configs that only guard ([decide].production_verdicts: the regression
    grid). They leave their classes for GUARD_CLASS, which must not regress beyond
    guard_max_regression_pct and never counts as a target. Ignored when every config is one.
    runs: the process-level bench runs so far (wall time per side and round, `BenchRun`),
    for the wall-time check on the final verdict (`plausible.wall_time_unexplained`).
    spreads: per class, the run's pooled spread ([decide].pooled_noise, `pooled_spreads`).

    Plausibility (`plausible`): candidate values repeated to the last digit across rounds
    (a forged number) make the verdict borderline at once, at any look. A speed that is only
    surprising never decides: the statistics decide, and on the final verdict a class or any
    single config more than suspicious_speedup times faster, a config beating its roofline
    floor, or a class whose median gain its mean does not show (`mean_not_faster`) turn a
    keep into a keep that needs the stronger checks (`escalate`); another verdict notes them.
    A class whose gain the last timed block (the one kopt audits) does not show
    (`last_block_not_faster`), or a saving the wall time does not explain, sends a keep to
    review; a keep whose last blocks lean that way without proving it takes another look
    while looks are left (`last_block_unsure`), unless only GUARD_CLASS leans: its gain is
    never what a keep rests on, and a guard's small gain (a config's last block on a GPU moves
    ~10% look to look) leaned on noise alone (the H200's demo waited three looks on -1.3%).
    """
    _check_pairs(pairs)
    pairs = judged_pairs(pairs, guard_configs)
    guarded = any(p.cls == GUARD_CLASS for p in pairs)
    rounds = len({p.round for p in pairs})
    final = rounds >= policy.max_rounds or gpu_seconds >= policy.budget_gpu_s
    by_class: dict[str, list[Pair]] = defaultdict(list)
    for p in pairs:
        by_class[p.cls].append(p)
    samples = class_samples(pairs, policy)
    results = tuple(
        estimate_class(c, by_class[c], samples[c], policy, final=final, spread=(spreads or {}).get(c))
        for c in sorted(by_class)
    )
    notes = _notes(results)

    def verdict(kind: str, reason: str, flags: tuple[str, ...] = (), focus: str = "") -> Verdict:
        return Verdict(kind, reason, results, rounds, gpu_seconds, tuple(flags) + notes, focus)

    if not results:
        return verdict("borderline", "no comparable samples", ("no_samples",))
    if target_class is not None and target_class not in by_class:
        return verdict("borderline", f"target class {target_class!r} has no samples", ("no_target",))
    targets = {
        r.cls
        for r in results
        if (target_class is None or r.cls == target_class) and not (guarded and r.cls == GUARD_CLASS)
    }

    forged = repeated_values(pairs)
    if forged is not None:
        return verdict("borderline", forged.reason, (forged.flag,), forged.cls)
    if rounds < policy.min_rounds and not final:
        return verdict("undecided", f"{rounds} of at least {policy.min_rounds} rounds")

    states: dict[str, str] = {}
    futile: list[str] = []
    for r in results:
        states[r.cls], by_futility = _state(r, policy, target=r.cls in targets, final=final)
        if by_futility:
            futile.append(r.cls)
    undecided = [c for c, s in states.items() if s == "undecided"]
    early: list[str] = []  # gain_ruled_out: the classes it ended a rejection on
    harmless: frozenset[str] = frozenset()  # harm_ruled_out: the classes it ended a keep on
    if undecided and not final and _determined(states, targets, policy, previous_subthreshold_gain) is None:
        shown = harm_ruled_out(results, states, targets, policy)
        ruled = gain_ruled_out(results, states, policy)
        if shown and _determined(states, targets, policy, previous_subthreshold_gain, harmless=shown) == "keep":
            harmless = shown
        elif ruled and _determined(states, targets, policy, previous_subthreshold_gain, no_gain=ruled) in EARLY_KINDS:
            early = sorted(ruled)
        else:
            return verdict("undecided", f"{_names(undecided)} undecided after {rounds} rounds")
    by_cls = {r.cls: r for r in results}
    for c in harmless:  # any outcome left to it keeps: one of them stands for it
        states[c] = "regressed_ok" if by_cls[c].ratio > 1.0 + policy.min_effect_pct / 100.0 else "tied"
    case = _case(states, targets, policy, previous_subthreshold_gain)
    reason, flags, focus = _explain(case, by_cls, states, targets, policy)
    conf = f"{policy.futility_confidence:.0%}"
    if futile:
        reason += f" ({_names(futile)} resolved at the final look: what would matter is ruled out at {conf})"
        flags += ("futility",)
    if early:
        reason += (
            f" ({_names(early)} undecided, but a gain of {policy.min_effect_pct:g}% is ruled out at {conf}: "
            "no outcome left could change the verdict)"
        )
        flags += ("gain_ruled_out",)
    if harmless:
        reason += (
            f" ({_names(sorted(harmless))} undecided, but a regression beyond its tolerance is ruled out at "
            f"{policy.confidence:.0%})"
        )
        flags += ("regression_ruled_out",)
    if "undecided_at_max_rounds" in flags and gpu_seconds >= policy.budget_gpu_s:
        reason = reason.replace(f"after {rounds} rounds", f"when the {policy.budget_gpu_s:g} GPU-s budget ran out")
        flags = tuple(f if f != "undecided_at_max_rounds" else "budget_spent" for f in flags)
    out = verdict(CASE_KIND[case], reason, flags, focus)
    if not out.final:
        return out
    leaning = last_block_unsure(results, pairs, policy) if out.kind == "keep" and not final else []
    unsure = [c for c in leaning if c != GUARD_CLASS]
    if unsure:
        return verdict(
            "undecided", f"{_names(unsure)}: the last timed blocks do not show half the gain yet after {rounds} rounds"
        )
    out = escalate(
        out,
        [
            f
            for f in (
                too_fast(results, pairs, policy),
                below_floor(pairs, policy, floors or {}),
                mean_not_faster(results, pairs, policy),
            )
            if f is not None
        ],
    )
    for f in (
        last_block_not_faster(results, pairs, policy),
        wall_time_unexplained(runs, pairs, policy) if runs else None,
    ):
        if f is not None:
            out = send_to_review(out, f.flag, f.reason, f.cls) if f.action == REVIEW else note(out, f.flag, f.reason)
    return out


# --- per class state and the run verdict -------------------------------------------------

CASE_KIND = {
    "split": "split",
    "regression": "regression",
    "likely_regression": "likely_regression",
    "likely_split": "borderline",
    "keep": "keep",
    "keep_two_in_a_row": "keep",
    "tie": "tie",
    "others_open": "borderline",
    "subthreshold": "borderline",
    "partial": "borderline",
    "open": "borderline",
}
"""Each case of the run verdict and its kind; "open" is "undecided" before the final look."""
OUTCOMES = ("improved", "sub_gain", "tied", "regressed_ok", "regressed_bad", "likely_regressed")
GUARD_OUTCOMES = ("tied", "regressed_ok", "regressed_bad", "likely_regressed")
"""The guard class's outcomes (`_guard_state`: it never gains), all an undecided guard is tried with."""


def _state(r: ClassResult, policy: Policy, *, target: bool, final: bool) -> tuple[str, bool]:
    """A class's state for the run verdict, and whether futility resolved it as harmless.

    States: improved, sub_gain (a significant gain smaller than min_effect_pct), tied,
    regressed_ok (within max_other_regression_pct), regressed_bad, likely_regressed,
    undecided. On the final look a class still undecided is resolved by its plausible
    interval (at policy.futility_confidence), and futility only ties what is near zero:

    - a target class whose plausible interval rules out a gain of min_effect_pct cannot
      justify a keep: tied when its estimate lies within ±min_effect_pct, likely_regressed
      when the estimate is a loss beyond it (8% slower is never a tie);
    - another class whose plausible interval rules out a regression beyond
      max_other_regression_pct cannot block a keep: tied, or regressed_ok when its
      estimate is a loss beyond min_effect_pct; one whose estimate is a loss beyond both
      min_effect_pct and the tolerance is likely_regressed.

    A class that could still be a worthwhile gain stays undecided (review). The guard
    class has a state of its own (`_guard_state`).
    """
    if r.cls == GUARD_CLASS:
        return _guard_state(r, policy, final=final)
    if r.verdict == "regressed":
        return ("regressed_ok" if r.delta_pct <= policy.max_other_regression_pct else "regressed_bad"), False
    if r.verdict == "tied":
        return ("sub_gain" if r.hi < 1.0 else "tied"), False
    if r.verdict == "undecided" and final and not math.isnan(r.plausible_lo):
        loss = r.ratio > 1.0 + policy.min_effect_pct / 100.0
        if target and r.plausible_lo > 1.0 / (1.0 + policy.min_effect_pct / 100.0):
            return ("likely_regressed", False) if loss else ("tied", True)
        if not target:
            if r.plausible_hi < 1.0 + policy.max_other_regression_pct / 100.0:
                return ("regressed_ok" if loss else "tied"), True
            if loss and r.delta_pct > policy.max_other_regression_pct:
                return "likely_regressed", False
    return r.verdict, False


def _guard_state(r: ClassResult, policy: Policy, *, final: bool) -> tuple[str, bool]:
    """The guard class's state: never a gain (it cannot earn a keep); "tied" (harmless) as
    soon as its interval rules out a regression beyond guard_max_regression_pct (at the
    final look, its plausible interval: regressed_ok when its estimate is a loss beyond
    min_effect_pct); regressed_bad for a significant regression beyond that tolerance,
    regressed_ok within it; at the final look, likely_regressed when its estimate is a loss
    beyond the tolerance."""
    tolerance = 1.0 + policy.guard_max_regression_pct / 100.0
    if r.verdict == "regressed":
        return ("regressed_ok" if r.delta_pct <= policy.guard_max_regression_pct else "regressed_bad"), False
    if r.hi < tolerance:
        return "tied", False
    if final and not math.isnan(r.plausible_hi):
        if r.plausible_hi < tolerance:
            return ("regressed_ok" if r.ratio > 1.0 + policy.min_effect_pct / 100.0 else "tied"), True
        if r.ratio > tolerance:
            return "likely_regressed", False
    return "undecided", False


def _case(states: dict[str, str], targets: set[str], policy: Policy, previous_subthreshold_gain: bool) -> str:
    """Which case of the run verdict the classes' states make (a key of CASE_KIND)."""
    improved = any(s == "improved" for s in states.values())
    bad = any(s == "regressed_bad" or (c in targets and s == "regressed_ok") for c, s in states.items())
    if improved and bad:
        return "split"
    if bad:
        return "regression"
    if any(s == "likely_regressed" for s in states.values()):
        return "likely_split" if improved else "likely_regression"
    ts = {states[c] for c in targets}
    if ts == {"improved"}:
        return "others_open" if any(s == "undecided" for s in states.values()) else "keep"
    gains_elsewhere = any(c not in targets and s in ("improved", "sub_gain") for c, s in states.items())
    if ts == {"tied"} and not gains_elsewhere:
        return "tie"
    if "sub_gain" in ts and ts <= {"sub_gain", "improved", "tied"}:
        return "keep_two_in_a_row" if policy.two_in_a_row and previous_subthreshold_gain else "subthreshold"
    if ts <= {"improved", "tied"}:
        return "partial"
    return "open"


EARLY_KINDS = ("regression", "split", "tie")
"""The run verdicts `gain_ruled_out` may end a decision on before its last look: rejections
only, never a keep nor a review."""


def gain_ruled_out(results: Sequence[ClassResult], states: dict[str, str], policy: Policy) -> frozenset[str]:
    """The classes still undecided whose plausible interval (at futility_confidence) already
    rules out a gain of min_effect_pct: "improved" is no longer a plausible outcome for them.
    Futility before the last look, non-binding: it can only end a decision that every
    remaining outcome rejects (`EARLY_KINDS`), so no keep ever rests on it; what it costs is
    the rare class whose true gain it misses: a split then reads as a regression
    (docs/decision.md step 9)."""
    floor = 1.0 / (1.0 + policy.min_effect_pct / 100.0)
    return frozenset(
        r.cls for r in results if states.get(r.cls) == "undecided" and r.cls != GUARD_CLASS and r.plausible_lo > floor
    )


def harm_ruled_out(
    results: Sequence[ClassResult], states: dict[str, str], targets: set[str], policy: Policy
) -> frozenset[str]:
    """The classes other than the targets, still undecided, whose interval at the policy's
    confidence (the decision's own, valid under repeated looks) already lies below their
    tolerance (max_other_regression_pct): they can no longer block a keep, so they are
    enumerated without "regressed_bad" and "likely_regressed". The guard class has this rule
    in its own state (`_guard_state`). No keep rests on a weaker interval than the one that
    decides the target classes."""
    limit = 1.0 + policy.max_other_regression_pct / 100.0
    return frozenset(
        r.cls
        for r in results
        if states.get(r.cls) == "undecided" and r.cls not in targets and r.cls != GUARD_CLASS and r.hi < limit
    )


HARMFUL = frozenset({"regressed_bad", "likely_regressed"})


def _determined(
    states: dict[str, str],
    targets: set[str],
    policy: Policy,
    previous: bool,
    harmless: frozenset[str] = frozenset(),
    no_gain: frozenset[str] = frozenset(),
) -> str | None:
    """The run verdict's kind when every outcome of the undecided classes gives the same one,
    so that sampling on cannot change it; None otherwise. The classes in `harmless` are
    enumerated without the outcomes that block a keep (`harm_ruled_out`), those in `no_gain`
    without "improved" (`gain_ruled_out`)."""
    undecided = [c for c, s in states.items() if s == "undecided"]
    if len(undecided) > MAX_ENUMERATED_UNDECIDED:
        return None
    kinds = set()
    trial = dict(states)
    choices = [
        [
            o
            for o in (GUARD_OUTCOMES if c == GUARD_CLASS else OUTCOMES)
            if not (c in no_gain and o == "improved") and not (c in harmless and o in HARMFUL)
        ]
        for c in undecided
    ]
    for combo in itertools.product(*choices):
        trial.update(zip(undecided, combo, strict=True))
        kinds.add(CASE_KIND[_case(trial, targets, policy, previous)])
        if len(kinds) > 1:
            return None
    return kinds.pop() if kinds else None


def _explain(
    case: str, results: dict[str, ClassResult], states: dict[str, str], targets: set[str], policy: Policy
) -> tuple[str, tuple[str, ...], str]:
    """(reason, flags, focus class) of a run verdict's case, in plain language."""
    names = sorted(states)
    improved = [c for c in names if states[c] == "improved"]
    regressed = [c for c in names if states[c] in ("regressed_ok", "regressed_bad")]
    bad = [c for c in regressed if c in targets or states[c] == "regressed_bad"]
    best = min(improved, key=lambda c: results[c].ratio) if improved else ""
    eff = f"{policy.min_effect_pct:g}%"
    rounds = max(r.rounds for r in results.values())
    if case == "split":
        return (
            (
                f"{_deltas(results, improved)} faster but {_deltas(results, bad)} slower: "
                "keep only as a specialised kernel behind a dispatch"
            ),
            (),
            best,
        )
    if case == "regression":
        worst = max(bad, key=lambda c: results[c].ratio)
        return f"{_deltas(results, [worst])} slower", (), worst
    likely = [c for c in names if states[c] == "likely_regressed"]
    if case in ("likely_regression", "likely_split"):
        worst = max(likely, key=lambda c: results[c].ratio)
        r = results[worst]
        conf = f"{policy.futility_confidence:.0%}"
        plausible = f"[{_num((r.plausible_lo - 1.0) * 100.0)}, {_num((r.plausible_hi - 1.0) * 100.0)}]"
        why = (
            f"likely slower: at the final look the estimate is a loss beyond {eff} (plausible "
            f"{plausible} at {conf}), not proven at the policy's confidence"
        )
        if case == "likely_split":
            return (
                f"{_deltas(results, improved)} faster but {_deltas(results, likely)} {why}",
                ("likely_regression",),
                best,
            )
        return f"{_deltas(results, likely)} {why}", ("likely_regression",), worst
    if case == "keep":
        scope = "every class" if len(targets) == len(names) else "the target class"
        tolerated = [c for c in regressed if c not in targets]
        extra = f"; {_deltas(results, tolerated)} slower, within tolerance" if tolerated else ""
        return f"{_deltas(results, [best])} faster ({scope} improved{extra})", (), best
    if case == "others_open":
        still = [c for c in names if states[c] == "undecided"]
        return (
            f"{_deltas(results, [best])} faster but {_names(still)} undecided after {rounds} rounds",
            ("undecided_at_max_rounds",),
            best,
        )
    if case == "tie":
        focus = max(sorted(targets), key=lambda c: abs(results[c].delta_pct))
        return f"no difference of {eff}: {_deltas(results, sorted(targets))}", (), focus
    small = [c for c in sorted(targets) if states[c] == "sub_gain"]
    if case == "keep_two_in_a_row":
        return (
            (
                f"{_deltas(results, small)} faster, below {eff} but a same-direction gain twice in a row "
                "(two_in_a_row policy)"
            ),
            ("two_in_a_row", "subthreshold_gain"),
            small[0],
        )
    if case == "subthreshold":
        return (
            f"{_deltas(results, small)} faster: a real gain, but smaller than {eff}",
            ("subthreshold_gain",),
            small[0],
        )
    if case == "partial":
        gained = [c for c in names if states[c] in ("improved", "sub_gain")]
        flat = [c for c in sorted(targets) if states[c] == "tied"]
        return (
            (
                f"{_deltas(results, gained)} faster but {_names(flat)} unchanged: the gain is not "
                + ("everywhere the (global) hypothesis aimed" if len(targets) > 1 else "where the hypothesis aimed")
            ),
            ("partial_gain",),
            gained[0],
        )
    still = [c for c in sorted(targets) if states[c] == "undecided"] or sorted(targets)
    return f"{_deltas(results, still)} undecided after {rounds} rounds", ("undecided_at_max_rounds",), still[0]


# --- helpers the loop needs ---------------------------------------------------------------


def summary(verdict: Verdict) -> str:
    """One line: "keep: D=3072 −4.1% [−4.6, −3.5] after 5 rounds, 12.3 GPU-s"."""
    head = verdict.kind
    focus = verdict.by_class().get(verdict.focus)
    if focus is None and verdict.classes:
        focus = max(verdict.classes, key=lambda r: abs(r.delta_pct) if not math.isnan(r.ratio) else -1)
    if focus is not None and not math.isnan(focus.ratio):
        lo, hi = (focus.lo - 1.0) * 100.0, (focus.hi - 1.0) * 100.0
        head += f": {focus.cls} {_pct(focus.delta_pct)} [{_num(lo)}, {_num(hi)}]"
        if len(verdict.classes) > 1:
            head += f" (+{len(verdict.classes) - 1} more)"
    return f"{head} after {verdict.rounds} rounds, {verdict.gpu_seconds:.1f} GPU-s"


# --- small formatting helpers --------------------------------------------------------------


def _notes(results: tuple[ClassResult, ...]) -> tuple[str, ...]:
    notes = []
    if any(r.outliers for r in results):
        notes.append("outliers_dropped")
    if any(r.disturbed for r in results):
        notes.append("disturbed_rounds")
    return tuple(notes)


def _num(x: float) -> str:
    if math.isinf(x):
        return "−inf" if x < 0 else "+inf"
    return f"{x:+.1f}".replace("-", "−")


def _pct(x: float) -> str:
    return _num(x) + "%"


def _deltas(results: dict[str, ClassResult], classes: list[str]) -> str:
    return ", ".join(f"{c} {_pct(results[c].delta_pct)}" for c in classes)


def _names(classes: list[str]) -> str:
    return ", ".join(classes)


def _check_pairs(pairs: list[Pair]) -> None:
    for p in pairs:
        for side, v in (("best", p.best), ("cand", p.cand)):
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise BadInput(
                    f"decision sample for config {p.config!r} round {p.round}: "
                    f"{side} must be a positive finite number, not {v!r}"
                )
        if p.order not in ("AB", "BA"):
            raise BadInput(
                f'decision sample for config {p.config!r} round {p.round}: order must be "AB" or "BA", not {p.order!r}'
            )
