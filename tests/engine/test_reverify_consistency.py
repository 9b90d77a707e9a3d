"""When a fresh-process re-decision that its noise left undecided still confirms a keep
(engine/decide/confirmation.py `consistent_gain`)."""

from __future__ import annotations

from kopt_supervisor.engine.decide.confirmation import consistent_gain
from kopt_supervisor.engine.decide.estimate import ClassResult, Verdict


def cls(name: str, ratio: float, verdict: str) -> ClassResult:
    return ClassResult(
        cls=name,
        rounds=6,
        n=6,
        best=100.0,
        cand=100.0 * ratio,
        ratio=ratio,
        lo=ratio * 0.8,
        hi=ratio * 1.2,
        verdict=verdict,
    )


FIRST = Verdict("keep", "both faster", (cls("narrow", 0.35, "improved"), cls("wide", 0.57, "improved")))


def test_a_real_gain_the_fresh_processes_could_not_resolve_is_confirmed():
    fresh = Verdict(
        "borderline", "wide undecided after 6 rounds", (cls("narrow", 0.37, "improved"), cls("wide", 0.62, "undecided"))
    )
    assert consistent_gain(FIRST, fresh)


def test_numbers_bent_inside_the_bench_show_no_gain_in_fresh_processes():
    fresh = Verdict("borderline", "undecided", (cls("narrow", 0.97, "undecided"), cls("wide", 1.01, "undecided")))
    assert not consistent_gain(FIRST, fresh)


def test_less_than_half_the_claimed_gain_or_a_slower_class_is_no_confirmation():
    half = Verdict("borderline", "u", (cls("narrow", 0.70, "undecided"), cls("wide", 0.62, "undecided")))
    assert not consistent_gain(FIRST, half)  # narrow claimed -65%, fresh sees -30%
    slower = Verdict(
        "borderline",
        "u",
        (cls("narrow", 0.36, "improved"), cls("wide", 0.60, "improved"), cls("guard", 1.2, "regressed")),
    )
    assert not consistent_gain(FIRST, slower)


def test_only_an_undecided_borderline_is_read_this_way():
    for kind in ("tie", "regression", "likely_regression", "split"):
        fresh = Verdict(kind, "r", (cls("narrow", 0.36, "improved"), cls("wide", 0.58, "improved")))
        assert not consistent_gain(FIRST, fresh)
    assert not consistent_gain(FIRST, Verdict("borderline", "r", (cls("narrow", 0.36, "improved"),)))  # wide unseen


def test_the_re_decision_never_reads_a_cache_the_measured_runs_filled(tmp_path):
    """The fresh-process re-decision's runs get caches of their own, not the trees' caches
    that the decision's (or the profiler's) runs of the same candidate filled, and emptied
    when each re-decision starts: whatever earlier processes of the candidate left there (a
    stored output, a compiled kernel of its choosing) never reaches the processes that
    verify it."""
    from types import SimpleNamespace

    from kopt_supervisor.engine import sandbox
    from kopt_supervisor.engine.loop.measure import ProcessAbba

    tree = "ab" * 20
    ctx = SimpleNamespace(ws=SimpleNamespace(dir=tmp_path))
    lane = SimpleNamespace(index=2)
    measured = sandbox.cache_dir(tmp_path, "cand", tree)
    assert ProcessAbba(ctx, lane)._cache("cand", tree) is None  # type: ignore[arg-type]  # the decision: the tree's own

    fresh = ProcessAbba(ctx, lane, fresh_caches=True)  # type: ignore[arg-type]
    first = fresh._cache("cand", tree)
    assert first is not None and first != measured and first.parent == measured.parent
    assert fresh._cache("best", tree) not in (first, sandbox.cache_dir(tmp_path, "best", tree))
    (first / "xdg").mkdir(parents=True)
    (first / "xdg" / "outputs.npy").write_text("planted by an earlier process")
    assert fresh._cache("cand", tree) == first and (first / "xdg" / "outputs.npy").exists()  # same decision: kept
    fresh.new_decision()
    assert fresh._cache("cand", tree) == first and not first.exists()  # the next re-decision starts empty
