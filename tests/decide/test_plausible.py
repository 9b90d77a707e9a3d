"""Plausibility per config (issue 17, DESIGN §12 layer 3): hostile pair data for every check."""

from __future__ import annotations

import math
import random
from dataclasses import replace

import pytest

from kopt_supervisor.engine.decide.estimate import Pair, Policy, Verdict
from kopt_supervisor.engine.decide.plausible import (
    BenchRun,
    below_floor,
    check,
    config_speedups,
    mean_not_faster,
    repeated_values,
    too_fast,
    wall_time_unexplained,
)
from kopt_supervisor.engine.decide.review import note, send_to_review
from kopt_supervisor.engine.decide.verdict import evaluate
from tests.decide.helpers import rounds, wiggle

ORDER = ("AB", "BA")


def grid(
    cand: dict[str, list[float]],
    best: dict[str, list[float]] | None = None,
    cls: str = "wide",
    flagged: frozenset[int] = frozenset(),
) -> list[Pair]:
    """Pairs per config and round: cand[config][r] against best[config][r] (default 100 + r/7)."""
    out = []
    for config, values in cand.items():
        for r, c in enumerate(values):
            b = best[config][r] if best else 100.0 + r / 7
            out.append(Pair(config, cls, b, c, r, ORDER[r % 2], flagged=r in flagged))
    return out


# --- one config much faster, hidden in its class ----------------------------------------------------


def test_one_config_ten_times_faster_hides_in_its_class_but_not_from_the_check() -> None:
    honest = {f"D={d}": [v * (1 + 0.001 * r) for r in range(3)] for d, v in ((2, 99.0), (3, 98.5), (4, 100.5))}
    pairs = grid({"D=1": [10.0, 10.02, 9.99], **honest})
    v = evaluate(pairs, Policy())
    (c,) = v.classes
    assert 1.0 / c.ratio < 3.0  # the class average alone would pass (about 1.8x)
    # the speed escalates, never decides: a keep that is final only once the stronger checks agree
    assert v.kind == "keep" and v.flags == ("suspicious_speedup", "needs_stronger_checks") and v.focus == "wide"
    assert v.needs_stronger_checks and not v.settled_keep
    assert v.escalation.startswith(
        "config D=1 is 10.0x faster, more than the suspicious_speedup of 3x (its class wide 1.8x)"
    )
    assert "needs the stronger checks: config D=1 is 10.0x faster" in v.reason
    assert config_speedups(pairs, Policy())["D=1"] == pytest.approx(10.0, rel=0.01)


def test_every_fast_config_is_named_up_to_a_cap() -> None:
    pairs = grid({f"D={d}": [100.0 / (4 + d)] * 3 for d in range(6)})
    f = too_fast([], pairs, Policy())
    assert f is not None and f.configs == ("D=5", "D=4", "D=3", "D=2", "D=1", "D=0")
    assert "config D=5 is 9.0x faster" in f.reason and "also D=4 8.0x, D=3 7.0x, D=2 6.0x (+2 more)" in f.reason


def test_a_throughput_config_is_fast_upwards_and_flagged_rounds_do_not_make_it_fast() -> None:
    up = grid({"a": [400.0, 401.0, 399.0]})
    assert too_fast([], up, Policy(direction="max")) is not None
    assert too_fast([], up, Policy(direction="min")) is None
    # one disturbed round where best ran 20x slow: the config's speedup comes from the others
    spiky = grid({"a": [99.0, 98.0, 99.5]}, {"a": [2000.0, 100.0, 100.0]}, flagged=frozenset({0}))
    assert too_fast([], spiky, Policy()) is None
    # a class 4x faster (configs 5x and 3.2x): a limit between them names the faster config only
    two = grid({"a": [20.0, 20.1, 19.9], "b": [31.0, 31.2, 30.9]})
    unflagged = evaluate(two, Policy(suspicious_speedup=6.0))
    assert unflagged.settled_keep and "needs_stronger_checks" not in unflagged.flags and not unflagged.escalation
    between = evaluate(two, Policy(suspicious_speedup=4.5))
    assert between.kind == "keep" and between.needs_stronger_checks
    assert between.escalation.startswith("config a is 5.0x faster")
    assert "also" not in between.escalation and "(its class wide 4.0x)" in between.escalation


# --- the roofline floor -----------------------------------------------------------------------------


def test_every_config_beating_its_floor_is_named_by_its_median() -> None:
    pairs = grid({"a": [40.0, 41.0, 60.0, 39.0], "b": [50.0, 51.0, 49.0, 52.0], "c": [70.0, 71.0, 72.0, 70.5]})
    f = below_floor(pairs, Policy(), {"a": 45.0, "b": 50.0, "c": 10.0})
    assert f is not None and f.configs == ("a",) and "a measures 40.5 against a roofline floor of 45" in f.reason
    # the median of 49, 50, 51, 52 is 50.5: not below 50 (the old upper median said 51, the
    # lower one 50: one rule now, stats.median)
    assert below_floor(grid({"b": [50.0, 51.0, 49.0, 52.0]}), Policy(), {"b": 50.4}) is None
    two = below_floor(pairs, Policy(), {"a": 45.0, "b": 55.0})
    assert two is not None and two.configs == ("a", "b")


# --- values repeated to the last digit ---------------------------------------------------------------


def test_a_forged_csv_repeats_while_best_varies() -> None:
    pairs = grid(
        {"D=1": [81.234567] * 3, "D=2": [90.5, 90.61, 90.43]},
        {"D=1": [100.102, 99.871, 100.254], "D=2": [100.0, 100.2, 99.9]},
    )
    f = repeated_values(pairs)
    assert f is not None and f.configs == ("D=1",) and f.action == "review"
    assert "D=1 (81.2346 in all 3 rounds)" in f.reason
    v = evaluate(pairs, Policy())
    assert v.kind == "borderline" and "repeated_values" in v.flags
    # a forged value with few digits is caught too: best's own values show the timer's resolution
    assert repeated_values(grid({"x": [80.0] * 4}, {"x": [100.102, 99.871, 100.254, 100.011]})) is not None


def test_a_coarse_timer_repeats_honestly() -> None:
    # a µs CPU timer on a 5 µs kernel: integer readings, both sides
    assert repeated_values(grid({"k": [4.0, 4.0, 4.0, 4.0]}, {"k": [5.0, 6.0, 5.0, 5.0]})) is None
    # a median of an even count of such readings: half steps
    assert repeated_values(grid({"k": [4.5, 4.5, 4.5]}, {"k": [5.0, 5.5, 6.0]})) is None
    # a bench printing two decimals on a noisy kernel
    assert repeated_values(grid({"k": [3.21] * 3}, {"k": [4.02, 4.11, 3.97]})) is None


def test_a_quantised_median_repeats_honestly_while_its_mean_varies() -> None:
    # the H200's num_warps 1->2 candidate (2026-12-02): a median of 9 block means on the event
    # clock's grid read 2.71563 in three looks; the mean over the same calls did not repeat
    best = [2.70288, 2.71175, 2.70062]
    honest = [
        replace(p, best_mean=b + 0.001, cand_mean=m)
        for p, b, m in zip(
            grid({"one-row": [2.71563] * 3}, {"one-row": best}), best, [2.71611, 2.71504, 2.71661], strict=True
        )
    ]
    assert repeated_values(honest) is None
    # a replayed row repeats its mean too: still a forgery
    replayed = [replace(p, cand_mean=2.71611) for p in honest]
    f = repeated_values(replayed)
    assert f is not None and f.configs == ("one-row",)
    # a mean reported in some looks only is no evidence either way: the median's repeat decides
    partial = [replace(p, cand_mean=math.nan) if p.round == 0 else p for p in honest]
    assert repeated_values(partial) is not None


def test_no_repeat_is_claimed_without_three_rounds_or_against_a_frozen_best() -> None:
    assert repeated_values(grid({"k": [81.234567] * 2}, {"k": [100.102, 99.871]})) is None
    assert repeated_values(grid({"k": [81.234567] * 3}, {"k": [100.0] * 3})) is None  # both frozen: a simulator
    # disturbed rounds do not count toward the three
    flagged = grid({"k": [81.234567, 81.234567, 81.234567]}, {"k": [100.102, 99.871, 100.254]}, flagged=frozenset({1}))
    assert repeated_values(flagged) is None
    # a forger adding noise passes this check (a documented limit); the other layers remain
    assert repeated_values(grid({"k": [81.23, 81.31, 81.19]}, {"k": [100.102, 99.871, 100.254]})) is None


def test_many_repeated_configs_are_counted() -> None:
    configs = {f"c{i}": [50.123456 + i] * 3 for i in range(7)}
    best = {f"c{i}": [100.11 + i, 99.93 + i, 100.37 + i] for i in range(7)}
    f = repeated_values(grid(configs, best))
    assert f is not None and len(f.configs) == 7 and "(+3 more)" in f.reason


# --- process wall time against the reported metric ------------------------------------------------------


def runs(
    best_wall: list[float],
    cand_wall: list[float],
    best_timed: list[float] | None = None,
    cand_timed: list[float] | None = None,
) -> list[BenchRun]:
    out = []
    for r, (bw, cw) in enumerate(zip(best_wall, cand_wall, strict=True)):
        out.append(BenchRun("best", r, bw, best_timed[r] if best_timed else None))
        out.append(BenchRun("cand", r, cw, cand_timed[r] if cand_timed else None))
    return out


HALF = grid(
    {"a": [50.0, 50.2, 49.9, 50.1], "b": [25.0, 25.1, 24.9, 25.05]},
    {"a": [100.0, 100.3, 99.8, 100.1], "b": [50.0, 50.1, 49.9, 50.2]},
)
"""The candidate reports half the time on every config."""


def test_timed_seconds_that_vanish_from_the_claim_but_not_from_the_wall_go_to_review() -> None:
    # best: 4 s of timed calls in a 10 s process; the candidate claims 2 s, its process still takes 10 s
    lazy = runs([10.0, 10.1, 9.9, 10.05], [10.02, 10.08, 9.95, 10.1], [4.0] * 4, [2.0, 2.01, 1.99, 2.0])
    f = wall_time_unexplained(lazy, HALF, Policy())
    assert f is not None and f.action == "review" and f.flag == "wall_time_unexplained"
    assert "took 2 s less per run (20% of best's 10 s process)" in f.reason
    # the honest candidate: the wall time fell as much as the claim
    honest = runs([10.0, 10.1, 9.9, 10.05], [8.0, 8.1, 7.95, 8.02], [4.0] * 4, [2.0] * 4)
    assert wall_time_unexplained(honest, HALF, Policy()) is None
    # a claim too small against the process to judge (0.1 s of 10 s)
    small = runs([10.0, 10.1, 9.9, 10.05], [10.0, 10.1, 9.9, 10.05], [0.2] * 4, [0.1] * 4)
    assert wall_time_unexplained(small, HALF, Policy()) is None
    # a noisy wall time proves nothing
    noisy = runs([10.0, 14.0, 7.0, 12.0], [9.0, 6.0, 13.0, 8.0], [4.0] * 4, [2.0] * 4)
    assert wall_time_unexplained(noisy, HALF, Policy()) is None


def test_without_timed_seconds_the_verdict_only_notes_a_wall_time_that_did_not_move() -> None:
    flat = runs([10.0, 10.1, 9.9, 10.05], [10.02, 10.12, 9.93, 10.08])
    f = wall_time_unexplained(flat, HALF, Policy())
    assert f is not None and f.action == "note" and "reported time fell 50%" in f.reason
    fell = runs([10.0, 10.1, 9.9, 10.05], [9.0, 9.1, 8.9, 9.05])
    assert wall_time_unexplained(fell, HALF, Policy()) is None
    assert wall_time_unexplained(flat, HALF, Policy(direction="max")) is None  # a throughput is no time
    assert wall_time_unexplained(flat[:4], HALF, Policy()) is None  # two rounds
    small_gain = grid({"a": [95.0, 95.2, 94.9, 95.1]}, {"a": [100.0, 100.3, 99.8, 100.1]})
    assert wall_time_unexplained(flat, small_gain, Policy()) is None


def test_evaluate_sends_a_keep_with_unexplained_timed_seconds_to_review() -> None:
    pairs = rounds({"all": wiggle(0.9, 4)})
    lazy = runs([10.0, 10.1, 9.9, 10.05], [10.02, 10.08, 9.95, 10.1], [4.0] * 4, [2.0, 2.01, 1.99, 2.0])
    plain = evaluate(pairs, Policy())
    assert plain.kind == "keep"
    v = evaluate(pairs, Policy(), runs=lazy)
    assert v.kind == "borderline" and "wall_time_unexplained" in v.flags
    assert "(bench: all −10.0% faster" in v.reason
    noted = evaluate(pairs, Policy(), runs=runs([10.0, 10.1, 9.9, 10.05], [10.02, 10.12, 9.93, 10.08]))
    assert noted.kind == "keep"  # a 10% gain is under the 20% a note needs
    half = evaluate(
        rounds({"all": wiggle(0.5, 4)}), Policy(), runs=runs([10.0, 10.1, 9.9, 10.05], [10.02, 10.12, 9.93, 10.08])
    )
    assert half.kind == "keep" and "wall_time_unexplained" in half.flags and "did not fall" in half.reason


def test_send_to_review_and_note() -> None:
    keep = Verdict("keep", "x −5.0% faster", flags=("outliers_dropped",))
    r = send_to_review(keep, "diff_constructs", "kernel.py:3 os._exit(0)")
    assert r.kind == "borderline" and r.flags == ("outliers_dropped", "diff_constructs")
    assert r.reason == "kernel.py:3 os._exit(0) (bench: x −5.0% faster)"
    again = send_to_review(r, "diff_constructs", "more")
    assert again.kind == "borderline" and again.flags.count("diff_constructs") == 1 and again.reason.endswith("; more")
    reg = send_to_review(Verdict("regression", "x +4.0% slower"), "diff_constructs", "y")
    assert reg.kind == "regression" and reg.reason == "x +4.0% slower; y" and "diff_constructs" in reg.flags
    assert note(keep, "f", "z").kind == "keep"


def test_check_lists_review_findings_first() -> None:
    pairs = grid({"D=1": [81.234567] * 4}, {"D=1": [100.102, 99.871, 100.254, 100.011]})
    found = check(
        [], pairs, Policy(), floors={"D=1": 90.0}, runs=runs([10.0, 10.1, 9.9, 10.05], [10.02, 10.12, 9.93, 10.08])
    )
    assert [(f.flag, f.action) for f in found] == [("repeated_values", "review"), ("faster_than_floor", "escalate")]
    half = check([], HALF, Policy(), runs=runs([10.0, 10.1, 9.9, 10.05], [10.02, 10.12, 9.93, 10.08]))
    assert [(f.flag, f.action) for f in half] == [("wall_time_unexplained", "note")]


def test_one_slow_process_does_not_hide_a_claim_no_round_of_the_wall_time_shows() -> None:
    """Three rounds, the candidate's first process slow (a cold cache): the mean's 99% bound
    proves nothing, but in no round did the wall time fall by half the claim. An honest
    candidate with the same slow first process saves its claim in the other rounds."""
    best_wall = [10.0, 10.02, 9.98]
    lazy = runs(best_wall, [11.6, 10.0, 9.99], [4.0] * 3, [2.0] * 3)
    f = wall_time_unexplained(lazy, HALF, Policy())
    assert f is not None and f.action == "review" and "by less than half of it in each of its 3 runs" in f.reason
    honest = runs(best_wall, [11.6, 8.0, 7.99], [4.0] * 3, [2.0] * 3)
    assert wall_time_unexplained(honest, HALF, Policy()) is None


# --- a median a few expensive calls bend: the mean does not follow --------------------------------


def with_figure(
    median: list[float], ratio: list[float], figure: str, base: float, cls: str = "wide", configs: int = 2
) -> list[Pair]:
    """Looks: per config the candidate's metric (a median) at median[r] x best's, and the bench's
    other `figure` of the same calls ("mean" or "last": Pair.best_<figure>, cand_<figure>) at
    ratio[r] x best's (best: metric 100, the figure `base`, drifting a little)."""
    out = []
    for r, (m, fr) in enumerate(zip(median, ratio, strict=True)):
        for i in range(configs):
            b, bf = 100.0 * (i + 1) + r / 7, base * (i + 1) + r / 5
            out.append(
                Pair(f"D={i}", cls, b, b * m, r, ORDER[r % 2], **{f"best_{figure}": bf, f"cand_{figure}": bf * fr})
            )
    return out


def with_means(median: list[float], mean_ratio: list[float], cls: str = "wide", configs: int = 2) -> list[Pair]:
    """Process-level looks: the candidate's mean at mean_ratio[r] x best's (best's mean 102)."""
    return with_figure(median, mean_ratio, "mean", 102.0, cls, configs)


def test_a_median_that_falls_while_the_mean_stays_is_named_and_the_keep_needs_the_checks() -> None:
    bent = with_means([0.27, 0.271, 0.269, 0.27], [1.01, 0.99, 1.0, 1.02])
    v = evaluate(bent, Policy(suspicious_speedup=10.0))
    (c,) = v.classes
    f = mean_not_faster(v.classes, bent, Policy())
    assert f is not None and f.action == "escalate" and f.cls == "wide"
    assert f.reason.startswith(
        "wide -73.0% by its metric but at best -1.0% by the mean over the same calls (over 4 looks)"
    )
    assert c.verdict == "improved" and v.kind == "keep" and v.needs_stronger_checks
    assert "mean_not_faster" in v.flags and "suspicious_speedup" not in v.flags and "wide -73.0%" in v.escalation
    # the same gain in the mean: nothing to say
    honest = with_means([0.27, 0.271, 0.269, 0.27], [0.28, 0.27, 0.26, 0.275])
    assert mean_not_faster(evaluate(honest, Policy()).classes, honest, Policy()) is None
    assert evaluate(honest, Policy(suspicious_speedup=10.0)).settled_keep
    # half the gain (log terms) in one look is enough: 0.27 claimed, sqrt(0.27) = 0.52 shown once
    once = with_means([0.27, 0.271, 0.269, 0.27], [1.0, 0.5, 1.0, 1.0])
    assert mean_not_faster(evaluate(once, Policy()).classes, once, Policy()) is None


def test_no_mean_no_blocks_no_latency_or_no_gain_means_nothing_to_compare() -> None:
    plain = grid({"a": [27.0, 27.1, 26.9, 27.0]})
    assert mean_not_faster(evaluate(plain, Policy()).classes, plain, Policy()) is None
    bent = with_means([0.27, 0.271, 0.269, 0.27], [1.01, 0.99, 1.0, 1.02])
    assert mean_not_faster(evaluate(bent, Policy()).classes, bent, Policy(direction="max")) is None
    two = bent[:4]  # two looks are enough...
    assert mean_not_faster(evaluate(bent, Policy()).classes, two, Policy()) is not None
    one = bent[:2]  # ...one is not
    assert mean_not_faster(evaluate(bent, Policy()).classes, one, Policy()) is None
    slower = with_means([1.2, 1.21, 1.19, 1.2], [1.2] * 4)
    assert mean_not_faster(evaluate(slower, Policy()).classes, slower, Policy()) is None


def test_a_candidate_whose_rows_drop_the_mean_shows_no_gain_in_it() -> None:
    dropped = [replace(p, cand_mean=float("nan")) for p in with_means([0.5] * 4, [0.5] * 4)]
    f = mean_not_faster(evaluate(dropped, Policy()).classes, dropped, Policy())
    assert f is not None and "at best none (no mean in the candidate's rows)" in f.reason


def test_blocks_whose_total_does_not_fall_are_named_on_the_ab_path() -> None:
    """An ab_command look: 10 blocks per config, the candidate's mostly 2x cheaper and two of
    them 5x dearer. The estimate (the mean of the blocks' logs, outlier blocks left out)
    says faster; the total over each look's blocks says 40% slower."""

    def look(r: int, cand: list[float]) -> list[Pair]:
        return [
            Pair("D=1", "wide", 100.0 + b / 10, c * (1.0 + 0.001 * ((b + r) % 3)), r, ORDER[(r + b) % 2], block=b)
            for b, c in enumerate(cand)
        ]

    bent = [p for r in range(4) for p in look(r, [50.0] * 8 + [500.0] * 2)]
    v = evaluate(bent, Policy(suspicious_speedup=10.0))
    assert v.by_class()["wide"].verdict == "improved" and v.kind == "keep"
    assert v.needs_stronger_checks and "mean_not_faster" in v.flags and "+39." in v.escalation
    honest = [p for r in range(4) for p in look(r, [50.0] * 10)]
    assert evaluate(honest, Policy(suspicious_speedup=10.0)).settled_keep


def test_honest_gains_with_noisy_means_rarely_escalate_and_bent_medians_always_do() -> None:
    """Simulated: a true 3% gain, the metric with 0.5% noise per look, the mean with 3% (a
    noisy mean: a GC pause, a stray process in one look), 3 looks (a decision that stops at
    min_rounds). Every look must fall short for a flag: measured here, a few percent of honest
    decisions escalate (and are kept once the stronger checks agree); every bent one does."""
    rng = random.Random(17)
    honest_flags = bent_flags = 0
    trials = 400
    for _ in range(trials):
        med = [0.97 * math.exp(rng.gauss(0.0, 0.005)) for _ in range(3)]
        honest = with_means(med, [0.97 * math.exp(rng.gauss(0.0, 0.03)) for _ in range(3)])
        claimed = [replace(r, verdict="improved") for r in evaluate(honest, Policy()).classes]
        honest_flags += mean_not_faster(claimed, honest, Policy()) is not None
        bent = with_means([0.5 * m for m in med], [math.exp(rng.gauss(0.0, 0.03)) for _ in range(3)])
        bent_flags += mean_not_faster(evaluate(bent, Policy()).classes, bent, Policy()) is not None
    assert bent_flags == trials
    assert honest_flags / trials < 0.06, honest_flags
