"""A keep's confirmation (engine/decide/confirmation.py): only what the keep claims is
decided, in a few looks; classes it does not claim never make it look again."""

from __future__ import annotations

import random

from kopt_supervisor.engine.config import DecideConfig
from kopt_supervisor.engine.decide.confirmation import (
    EXTENDED_MAX_LOOKS,
    MAX_LOOKS,
    MIN_LOOKS,
    Confirmation,
    claimed_gains,
    consistent_gain,
    judge,
    shows_half,
)
from kopt_supervisor.engine.decide.estimate import ClassResult, Pair, Policy, Verdict
from kopt_supervisor.engine.decide.verdict import GUARD_CLASS

POLICY = Policy.from_config(DecideConfig())
SPREAD = (-1.0, 0.67, 1.0, -0.67, 0.0, 0.0)
"""Per look, noise that neither order's mean nor the order-balanced mean sees (each order sums to 0)."""


def spread(config: str, cls_: str, ratio: float, noise: float) -> list[Pair]:
    return [
        Pair(config, cls_, 100.0, 100.0 * ratio * (1 + noise * SPREAD[r]), r, "AB" if r % 2 == 0 else "BA")
        for r in range(MAX_LOOKS)
    ]


def cls(name: str, ratio: float, verdict: str) -> ClassResult:
    return ClassResult(
        cls=name,
        rounds=6,
        n=6,
        best=100.0,
        cand=100.0 * ratio,
        ratio=ratio,
        lo=ratio * 0.98,
        hi=ratio * 1.02 if verdict != "improved" else min(ratio * 1.02, 0.995),
        verdict=verdict,
    )


def claim(**ratios: float) -> Verdict:
    return Verdict("keep", "faster", tuple(cls(c, r, "improved" if r < 0.99 else "tied") for c, r in ratios.items()))


def fresh(
    ratios: dict[str, float], n: int, *, noise: float = 0.01, seed: int = 0, configs: dict[str, list[str]] | None = None
) -> list[Pair]:
    """n looks: per class (one config, or `configs[cls]`), the candidate at `ratio` of best,
    with multiplicative noise; orders alternate."""
    rngs = {c: random.Random(f"{seed}/{c}") for c in ratios}  # a class's noise does not depend on the others
    pairs = []
    for r in range(n):
        for c, ratio in ratios.items():
            rng = rngs[c]
            for config in (configs or {}).get(c, [f"{c}/cfg"]):
                pairs.append(
                    Pair(config, c, 100.0, 100.0 * ratio * (1 + rng.gauss(0, noise)), r, "AB" if r % 2 == 0 else "BA")
                )
    return pairs


def run(
    ratios: dict[str, float],
    keep: Verdict,
    *,
    noise: float = 0.01,
    seed: int = 0,
    policy: Policy = POLICY,
    guard: frozenset[str] = frozenset(),
    configs: dict[str, list[str]] | None = None,
) -> Confirmation:
    """Looks one at a time until the rule stops, as the loop takes them."""
    pairs = fresh(ratios, MAX_LOOKS, noise=noise, seed=seed, configs=configs)
    for n in range(1, MAX_LOOKS + 1):
        out = judge([p for p in pairs if p.round < n], keep, policy, guard_configs=guard)
        if out.final:
            return out
    raise AssertionError("the rule must end by MAX_LOOKS")


def test_a_real_gain_is_confirmed_in_a_few_looks():
    for seed in range(20):
        out = run({"narrow": 0.6, "wide": 0.7}, claim(narrow=0.6, wide=0.7), seed=seed)
        assert out.outcome == "confirmed" and out.looks <= 3, (seed, out.reason)
    assert "narrow −40" in out.reason and "claimed −40.0%" in out.reason


def test_a_gain_bent_in_the_first_decision_is_refuted_without_waiting_for_max_looks():
    for seed in range(20):
        out = run({"narrow": 1.0, "wide": 1.0}, claim(narrow=0.6, wide=0.7), seed=seed)
        assert out.outcome == "refuted" and out.looks < MAX_LOOKS, (seed, out.reason)
    assert "less than half the claimed gain" in out.reason


def test_a_noisy_guard_class_never_forces_looks():
    """The non-production guard class is noisy and undecided: the keep is confirmed as soon as
    the class it claims shows its gain."""
    configs = {"prod": ["prod/a"], "odd": ["odd/1", "odd/2"]}
    keep = Verdict("keep", "prod faster", (cls("prod", 0.7, "improved"), cls(GUARD_CLASS, 1.0, "undecided")))
    policy = Policy.from_config(DecideConfig(production_verdicts=True))
    for seed in range(20):
        out = run(
            {"prod": 0.7, "odd": 1.0},
            keep,
            noise=0.03,
            seed=seed,
            configs=configs,
            guard=frozenset({"odd/1", "odd/2"}),
            policy=policy,
        )
        alone = run({"prod": 0.7}, keep, noise=0.03, seed=seed, configs=configs, policy=policy)
        assert out.outcome == "confirmed" and out.looks == alone.looks < MAX_LOOKS, (seed, out.reason)
        assert {c.cls: c.state for c in out.classes}[GUARD_CLASS] == "within"


def test_an_unclaimed_class_the_decision_left_undecided_never_forces_looks():
    keep = Verdict("keep", "narrow faster", (cls("narrow", 0.6, "improved"), cls("wide", 1.0, "undecided")))
    out = run({"narrow": 0.6, "wide": 1.0}, keep, noise=0.004)
    assert out.outcome == "confirmed" and out.looks <= 3, out.reason
    assert [c.cls for c in out.classes if c.claimed is not None] == ["narrow"]


def test_a_class_proven_slower_beyond_its_margin_refutes():
    keep = Verdict("keep", "narrow faster", (cls("narrow", 0.6, "improved"), cls("wide", 1.0, "tied")))
    out = run({"narrow": 0.6, "wide": 1.3}, keep, noise=0.005)
    assert out.outcome == "refuted" and "slower beyond the margin" in out.reason and "wide" in out.reason


def test_a_class_estimated_slower_in_noise_holds_the_confirmation_but_does_not_block_it():
    """wide looks 4% slower in noise far too large to tell (its likely interval holds no
    change): the keep is not confirmed early, and at MAX_LOOKS the decision's bound on wide
    stands: confirmed, wide's numbers on record."""
    keep = Verdict("keep", "narrow faster", (cls("narrow", 0.6, "improved"), cls("wide", 1.0, "tied")))
    pairs = spread("narrow/cfg", "narrow", 0.6, 0.002) + spread("wide/cfg", "wide", 1.04, 0.2)
    assert judge([p for p in pairs if p.round < 3], keep, POLICY).outcome == "looking"
    out = judge(pairs, keep, POLICY)
    assert out.outcome == "confirmed" and out.looks == MAX_LOOKS
    wide = next(c for c in out.classes if c.cls == "wide")
    assert wide.state == "within" and wide.ratio > 1.01


def test_a_class_likely_slower_but_not_proven_ends_undecided():
    """wide 5% slower in 3% noise: not proven at the policy's confidence, but likely (its
    interval at the futility confidence lies beyond the +1% margin): the engineer decides."""
    keep = Verdict("keep", "narrow faster", (cls("narrow", 0.6, "improved"), cls("wide", 1.0, "tied")))
    pairs = spread("narrow/cfg", "narrow", 0.6, 0.002) + spread("wide/cfg", "wide", 1.05, 0.03)
    out = judge(pairs, keep, POLICY)
    assert out.outcome == "undecided" and out.looks == MAX_LOOKS and "estimated slower" in out.reason
    wide = next(c for c in out.classes if c.cls == "wide")
    assert wide.state == "looks_slower" and wide.lo <= 1.01


def test_at_max_looks_half_the_claimed_gain_confirms_a_real_gain_noise_left_open():
    """A real 3% gain in 1.5% per-look noise: the interval at the alpha spent at look 6 holds
    no change (-6.2% .. +0.3%), the six looks' interval at the decision's confidence does not,
    and the estimate keeps at least half the claim."""
    keep = claim(small=0.97)
    pairs = spread("small/cfg", "small", 0.97, 0.015)
    assert judge(pairs[:5], keep, POLICY).outcome == "looking"
    out = judge(pairs, keep, POLICY)
    assert out.outcome == "confirmed" and "at least half the claimed gain" in out.reason
    assert {c.cls: c.state for c in out.classes} == {"small": "half_shown"} and out.classes[0].hi > 1.0


AA_DISTURBED = [1.002, 0.998, 0.93, 1.001, 1.0, 0.999]
"""A/A looks of a -2% claim: 0.2% noise, the third look moved by -7% (a disturbance the gate did
not flag; six looks are too few for the outlier test): the estimate shows -1.2%, half the claim."""


def aa_disturbed(n: int) -> list[Pair]:
    ratios = AA_DISTURBED + [1.0 + 0.002 * (-1) ** k for k in range(n - len(AA_DISTURBED))]
    return [
        Pair(f"small/{c}", "small", 100.0, 100.0 * r * (1 + 0.001 * c), k, "AB" if k % 2 == 0 else "BA")
        for k, r in enumerate(ratios[:n])
        for c in range(2)
    ]


def test_at_max_looks_half_a_small_claim_within_the_looks_noise_is_undecided():
    """Before 2026-11-29, MAX_LOOKS confirmed the A/A -2% claim on the estimate alone (12 of
    the H200's 96 A/A windows); within the looks' noise it is not confirmed: without the
    extension (extend_to=MAX_LOOKS, 97b6dec's rule) it goes to review, with it the class
    looks on (`test_an_a_a_claim_half_shown_in_noise_stays_undecided_at_the_extensions_cap`)."""
    keep = claim(small=0.98)
    pairs = aa_disturbed(MAX_LOOKS)
    assert judge(pairs[:10], keep, POLICY).outcome == "looking"
    out = judge(pairs, keep, POLICY, extend_to=MAX_LOOKS)
    small = out.classes[0]
    assert shows_half(0.98, small.ratio) and small.ratio > 0.98 and small.hi > 1.0
    assert out.outcome == "undecided" and small.state == "half_in_noise", out.reason
    assert "within their noise" in out.reason and "claimed −2.0%" in out.reason
    on = judge(pairs, keep, POLICY)
    assert on.outcome == "looking" and on.classes[0].state == "half_in_noise", on.reason
    assert "looking on, up to 12 looks" in on.reason
    # a real -3% in 4% per-look noise: half the claim, but six looks cannot tell it from no change
    wide = judge(spread("small/cfg", "small", 0.97, 0.04), claim(small=0.97), POLICY, extend_to=MAX_LOOKS)
    assert wide.outcome == "undecided" and wide.classes[0].state == "half_in_noise", wide.reason


def test_an_a_a_claim_half_shown_in_noise_stays_undecided_at_the_extensions_cap():
    """A/A, a -2% claim, 1.5% per-look noise (seeded): six looks show -1.4%, half the claim,
    within their noise; six more looks never confirm it, nor rule out half of it, and at
    EXTENDED_MAX_LOOKS it goes to review saying how many looks it took. (The disturbed A/A
    looks above are refuted at look 8 instead: from 8 looks the outlier test sets the -7% look
    aside and the quiet rest rules out half the claim.)"""
    keep = claim(small=0.98)
    pairs = fresh({"small": 1.0}, EXTENDED_MAX_LOOKS, noise=0.015, seed=55)
    for n in range(MIN_LOOKS, EXTENDED_MAX_LOOKS):
        out = judge([p for p in pairs if p.round < n], keep, POLICY)
        assert out.outcome == "looking", (n, out.reason)
    out = judge(pairs, keep, POLICY)
    assert out.outcome == "undecided" and out.looks == EXTENDED_MAX_LOOKS, out.reason
    assert "after 12 looks (6 past 6" in out.reason and "claimed −2.0%" in out.reason
    assert out.classes[0].hi > 1.0


def test_the_extension_confirms_a_real_small_gain_six_looks_left_within_their_noise():
    """A real -3% in 1% per-look noise (seeded): after six looks its interval at the decision's
    confidence holds no change (97b6dec's rule: undecided, the engineer's review); the same
    fresh servers look on and the ninth look shows it, at the alpha the extension spends
    there; the reason says how many looks it took."""
    keep = claim(small=0.97)
    pairs = fresh({"small": 0.97}, EXTENDED_MAX_LOOKS, noise=0.01, seed=12)
    six = [p for p in pairs if p.round < MAX_LOOKS]
    assert judge(six, keep, POLICY, extend_to=MAX_LOOKS).outcome == "undecided"
    assert judge(six, keep, POLICY).outcome == "looking"
    outs = [judge([p for p in pairs if p.round < n], keep, POLICY) for n in range(MAX_LOOKS, EXTENDED_MAX_LOOKS + 1)]
    first = next(o for o in outs if o.final)
    assert first.outcome == "confirmed" and 8 <= first.looks <= EXTENDED_MAX_LOOKS, first.reason
    assert f"after {first.looks} looks ({first.looks - MAX_LOOKS} past 6" in first.reason
    assert first.classes[0].state == "shown" and first.classes[0].hi < 1.0


def _looks(ratio: float, noise: float, n: int) -> list[Pair]:
    """`n` looks of one config of class "small", the SPREAD pattern repeated."""
    return [
        Pair(
            "small/cfg",
            "small",
            100.0,
            100.0 * ratio * (1 + noise * SPREAD[r % MAX_LOOKS]),
            r,
            "AB" if r % 2 == 0 else "BA",
        )
        for r in range(n)
    ]


def test_only_a_class_six_looks_cannot_tell_extends():
    """A claimed class refuted, or another class proven slower, ends at MAX_LOOKS as before;
    a class with less than half its claim but not ruled out looks on, and is not confirmed
    while what it shows stays under half the claim."""
    refuted = judge(spread("small/cfg", "small", 1.0, 0.002), claim(small=0.9), POLICY)
    assert refuted.outcome == "refuted", refuted.reason
    disturbed = aa_disturbed(EXTENDED_MAX_LOOKS)  # the outlier test sets the -7% look aside at 8 looks
    assert judge(disturbed[:16], claim(small=0.98), POLICY).outcome == "refuted"
    short = judge(spread("small/cfg", "small", 0.97, 0.04), claim(small=0.90), POLICY)
    assert short.outcome == "looking" and short.looks == MAX_LOOKS, short.reason
    assert {c.cls: c.state for c in short.classes} == {"small": "not_shown"}
    for n in range(MAX_LOOKS + 1, EXTENDED_MAX_LOOKS + 1):
        later = judge(_looks(0.97, 0.04, n), claim(small=0.90), POLICY)
        assert later.outcome != "confirmed", later.reason
        if later.final:
            break
    assert later.final and later.outcome in ("refuted", "undecided"), later.reason
    keep = Verdict("keep", "faster", (cls("small", 0.98, "improved"), cls("wide", 1.0, "tied")))
    slower = aa_disturbed(MAX_LOOKS) + spread("wide/cfg", "wide", 1.05, 0.03)
    out = judge(slower, keep, POLICY)  # the class half in noise would extend; one likely slower ends it
    assert out.outcome == "undecided" and out.looks == MAX_LOOKS, out.reason
    assert {c.cls: c.state for c in out.classes} == {"small": "half_in_noise", "wide": "looks_slower"}


def test_less_than_half_the_claim_at_max_looks_looks_on_and_a_disturbed_look_does_not_send_a_real_gain_to_review():
    """Less than half the claim at MAX_LOOKS, not ruled out, without an extension: undecided as
    before. With one: more looks, and a real -10% whose estimate one disturbed look of six
    pulled under half the claim is confirmed once the looks that follow show it."""
    keep = claim(small=0.90)
    alone = judge(spread("small/cfg", "small", 0.97, 0.04), keep, POLICY, extend_to=MAX_LOOKS)
    assert alone.outcome == "undecided" and "less than half the claimed gain" in alone.reason
    real = [p if p.round != 2 else Pair(p.config, p.cls, 100.0, 130.0, 2, p.order) for p in _looks(0.90, 0.01, 12)]
    six = judge(real[:MAX_LOOKS], keep, POLICY)
    assert six.outcome == "looking" and [c.state for c in six.classes] == ["not_shown"], six.reason
    done = next(o for n in range(MAX_LOOKS + 1, 13) if (o := judge(real[:n], keep, POLICY)).final)
    assert done.outcome == "confirmed" and done.looks > MAX_LOOKS, done.reason


def test_flagged_looks_do_not_count_and_a_class_without_samples_is_not_confirmed():
    keep = claim(narrow=0.6)
    pairs = [
        Pair("narrow/cfg", "narrow", 100.0, 60.0, r, "AB" if r % 2 == 0 else "BA", flagged=True)
        for r in range(MAX_LOOKS)
    ]
    out = judge(pairs, keep, POLICY)
    assert out.outcome == "undecided" and {c.state for c in out.classes} == {"no_samples"}


def test_the_claim_is_the_improved_classes_or_a_sub_threshold_keeps_gains():
    keep = Verdict("keep", "k", (cls("a", 0.7, "improved"), cls("b", 1.0, "tied"), cls(GUARD_CLASS, 0.5, "improved")))
    assert claimed_gains(keep) == {"a": 0.7}
    two = Verdict(
        "keep",
        "k",
        (
            ClassResult("a", 6, 6, 100.0, 99.5, 0.995, 0.99, 0.999, "tied"),
            ClassResult("b", 6, 6, 100.0, 100.0, 1.0, 0.99, 1.01, "tied"),
        ),
    )
    assert claimed_gains(two) == {"a": 0.995}
    assert judge(fresh({"a": 1.0}, 3), Verdict("keep", "k", (cls("a", 1.0, "tied"),)), POLICY).outcome == "undecided"


def test_half_the_gain_is_one_rule_for_both_paths():
    assert shows_half(0.6, 0.8) and not shows_half(0.6, 0.81)
    first = Verdict("keep", "k", (cls("narrow", 0.35, "improved"), cls("wide", 0.57, "improved")))
    seen = Verdict("borderline", "u", (cls("narrow", 0.67, "undecided"), cls("wide", 0.62, "undecided")))
    assert consistent_gain(first, seen)
    assert not consistent_gain(
        first, Verdict("borderline", "u", (cls("narrow", 0.68, "undecided"), cls("wide", 0.62, "undecided")))
    )


def test_the_record_reads_back():
    out = run({"narrow": 0.6}, claim(narrow=0.6))
    back = Confirmation.from_dict({**out.to_dict(), "newer_key": True})
    assert back.to_dict() == out.to_dict() and back.classes[0].claimed == 0.6
