"""On a GPU, a keep's profile pair stands in for its fresh servers' looks only when it shows
what the looks would have to (decide/external_truth.py `by_profiler`): every claimed class
agreeing with the bench and keeping at least half its claim, no other class slower beyond its
margin, outputs compared, per class, and no escalation. Each case below breaks one of those
and must leave the looks to run (None); none of them is ever a refutation."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from kopt_supervisor.engine.config import DecideConfig
from kopt_supervisor.engine.decide.confirmation import Confirmation
from kopt_supervisor.engine.decide.estimate import NEEDS_STRONGER_CHECKS, ClassResult, Policy, Verdict
from kopt_supervisor.engine.decide.external_truth import PROFILER_PATH, by_profiler, settle, timer_only
from kopt_supervisor.engine.decide.verdict import GUARD_CLASS

POLICY = Policy.from_config(DecideConfig())


def bench(name: str, ratio: float, verdict: str) -> ClassResult:
    hi = min(ratio * 1.02, 0.995) if verdict == "improved" else ratio * 1.02
    return ClassResult(name, 3, 3, 100.0, 100.0 * ratio, ratio, ratio * 0.98, hi, verdict)


KEEP = Verdict(
    "keep",
    "narrow -49% faster",
    (bench("narrow", 0.51, "improved"), bench("wide", 0.52, "improved"), bench(GUARD_CLASS, 0.9, "improved")),
)


def agreed(cls: str, ratio: float, status: str = "agrees", verdict: str = "improved") -> dict[str, Any]:
    return {
        "cls": cls,
        "status": status,
        "bench_verdict": verdict,
        "profiler_ratio": ratio,
        "profiler_lo": ratio * 0.99,
        "profiler_hi": ratio * 1.01,
    }


def profile(
    *classes: dict[str, Any], per_class: bool = True, checked: int = 9, best_from: int | None = 3, base: bool = False
) -> dict[str, Any]:
    """A keep's profile record; by default best's side reused from v3's (taken as a candidate)."""
    return {
        "agreement": {"classes": list(classes), "per_class": per_class},
        "outputs": {"checked": checked},
        "taken": {"best_from": best_from, "best_is_baseline": base},
    }


GOOD = (agreed("narrow", 0.509), agreed("wide", 0.515), agreed(GUARD_CLASS, 0.92))


def test_a_profile_that_shows_every_claim_confirms_the_keep_without_looks():
    conf = by_profiler(profile(*GOOD), KEEP, POLICY)
    assert isinstance(conf, Confirmation) and conf.outcome == "confirmed" and conf.path == PROFILER_PATH
    assert conf.looks == 0 and {c.cls: c.state for c in conf.classes} == {
        "narrow": "shown",
        "wide": "shown",
        GUARD_CLASS: "within",  # the guard class is never claimed, only held to its margin
    }
    kept = settle(KEEP, conf, timer_only("x"))
    assert kept.kind == "keep" and "the profiler's kernel time: narrow −49.1%" in kept.reason


@pytest.mark.parametrize(
    "case",
    [
        "cannot_tell",
        "less_than_half",
        "unclaimed_slower",
        "unclaimed_disagrees",
        "claimed_missing",
        "claimed_unprofiled",
        "whole_run",
        "outputs_unchecked",
        "no_outputs_record",
        "escalated",
        "best_profiled_as_best",
    ],
)
def test_anything_the_profile_does_not_show_leaves_the_looks_to_run(case: str):
    classes, kw, claim = list(GOOD), {}, KEEP
    if case == "cannot_tell":
        classes[1] = agreed("wide", 0.98, status="cannot_tell")
    elif case == "less_than_half":  # agrees (below no change) but keeps under half of -48%
        classes[1] = agreed("wide", 0.80)
    elif case == "unclaimed_slower":  # the guard class 3x past its margin
        classes[2] = agreed(GUARD_CLASS, 1.0 + 3 * POLICY.guard_max_regression_pct / 100.0, status="not_judged")
    elif case == "unclaimed_disagrees":
        classes[2] = agreed(GUARD_CLASS, 1.0, status="disagrees")
    elif case == "claimed_missing":
        classes = classes[:1] + classes[2:]
    elif case == "claimed_unprofiled":
        classes[0] = {**agreed("narrow", 0.5), "profiler_ratio": None}
    elif case == "whole_run":
        kw = {"per_class": False}
    elif case == "outputs_unchecked":  # the reference wrote none: nothing compared
        kw = {"checked": 0}
    elif case == "best_profiled_as_best":  # best/ profiled afresh, a tree a proposer wrote
        kw = {"best_from": None}
    elif case == "escalated":
        claim = replace(KEEP, flags=(NEEDS_STRONGER_CHECKS,), escalation="a speedup beyond suspicious_speedup")
    record = profile(*classes, **kw)
    if case == "no_outputs_record":
        del record["outputs"]
    assert claim.needs_stronger_checks is (case == "escalated")
    assert by_profiler(record, claim, POLICY) is None
    assert by_profiler({}, KEEP, POLICY) is None  # no profile at all


def test_bests_side_stands_only_where_its_role_could_not_bend_it():
    """A kept tree can be slow only where it runs as BEST (docs/security.md, "A kept tree slow
    as BEST"): best's side of the pair stands in for the looks when it was taken while that
    tree was a candidate (reused), or when best is the baseline's tree, which no proposer wrote."""
    assert by_profiler(profile(*GOOD, best_from=3), KEEP, POLICY) is not None
    assert by_profiler(profile(*GOOD, best_from=None, base=True), KEEP, POLICY) is not None
    assert by_profiler(profile(*GOOD, best_from=None, base=False), KEEP, POLICY) is None
    old = profile(*GOOD)  # a record written before best_is_baseline was: best's side not reused
    old["taken"] = {"best_from": None}
    assert by_profiler(old, KEEP, POLICY) is None
