"""Hostile review of [profile].baseline = "first-keep" (2026-11-30): the first keep's profile
pair's best side (the baseline's tree) anchors every later keep's profiled outputs
(`Evidence.confirm` records `anchor`, `profiler.baseline_reference` finds it). Evidence.confirm
is driven with stand-ins for the profiler (no GPU): what matters is which tree's outputs end up
in the anchor's folder and whether the record still names it."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from kopt_supervisor.engine.decide.estimate import Verdict
from kopt_supervisor.engine.loop import evidence as ev

BASE, KEPT = "c0ffee-baseline", "beef-kept-by-another-lane"


def harness(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """An Evidence whose profiler writes, per folder, which tree's outputs it holds."""
    base_it = SimpleNamespace(version=0, commit=BASE, record={"profile": None}, masked=False)
    it = SimpleNamespace(version=1, commit=None, record={"evaluated_tree": "t-cand"}, masked=False)
    it.best_commit_before = BASE
    iterations = [base_it, it]
    history = SimpleNamespace(
        baseline=lambda: base_it, best_iteration=lambda: None, store=SimpleNamespace(iterations=lambda: iterations)
    )
    ctx = SimpleNamespace(
        cfg=SimpleNamespace(
            profile=SimpleNamespace(keep="time", run_noise_pct=0.3, repeats=1),
            decide=SimpleNamespace(),
            target=SimpleNamespace(direction="min"),
            roofline=SimpleNamespace(bytes=""),  # no bytes per call: the bytes floor is not checked
        ),
        ws=SimpleNamespace(profiles=tmp_path / "profiles"),
        history=history,
        save=lambda *a, **k: None,
        event=lambda *a, **k: None,
    )
    e = ev.Evidence(ctx)  # type: ignore[arg-type]
    lane = SimpleNamespace(index=0, best="lane-best", cand="lane-cand", tree_in_best=BASE)
    written: dict[Path, list[str]] = {}  # folder -> the trees whose outputs were written there

    def profile_pair(it, lane, prof, reused, calls, seed, best_dir="best"):
        more = "_more" if calls.more is not None else ""  # calls: profiler.ProfileCalls
        folder = ctx.ws.profiles / f"v{it.version}" / f"{best_dir}{more}"
        written.setdefault(folder, []).append(lane.tree_in_best)  # profile_in(..., lane.best, "best")
        summary = SimpleNamespace(
            to_dict=dict, ranged=(), range_openings=None
        )  # no launches: nothing for the bytes floor
        return [summary], [summary]

    compared: list[tuple[Path, str]] = []

    def profile_outputs(ref_dir, cand_dir, *, reference="best", asked=None):
        compared.append((ref_dir, reference))
        return {"checked": 1, "against": reference}

    agreement = SimpleNamespace(disagrees=False, to_dict=dict, summary_line=lambda: "agrees", classes=())
    monkeypatch.setattr(ev, "compare_per_class", lambda *a, **k: SimpleNamespace(to_dict=dict, summary_line=str))
    monkeypatch.setattr(ev, "agrees", lambda *a, **k: agreement)
    monkeypatch.setattr(ev, "tree_of", lambda tree, commit: f"tree-of-{commit}")
    monkeypatch.setattr(
        ev.Policy,
        "from_config",
        classmethod(
            lambda cls, *a: SimpleNamespace(
                confidence=0.99, min_effect_pct=1.0, guard_max_regression_pct=10.0, max_other_regression_pct=1.0
            )
        ),
    )
    prof = SimpleNamespace(name="ncu", for_keep=lambda keep: prof)
    for name, value in {
        "roofline": lambda *a, **k: None,
        "profiler": lambda lane, it: prof,
        "gpu_uuid": lambda lane: "host:GPU-0",
        "reusable_best": lambda tree, gpu: None,
        "config_refs": lambda: [],
        "profile_pair": profile_pair,
        "profile_outputs": profile_outputs,
    }.items():
        setattr(e, name, value)
    monkeypatch.setattr(ev, "cand_medians", lambda *a: {})
    return e, it, lane, written, compared


def test_a_second_confirmation_of_the_anchoring_keep_neither_drops_nor_overwrites_the_anchor(tmp_path, monkeypatch):
    """Found by the hostile review (2026-11-30): confirmed again after a rebase, the anchoring
    keep re-profiled lane.best (now a kept candidate's tree) into the anchor's folder and wrote
    its record without `anchor`; its best side now goes to best_again/ and the anchor stays."""
    e, it, lane, written, compared = harness(tmp_path, monkeypatch)
    keep = Verdict(kind="keep", reason="bench: keep")
    e.confirm(it, lane, keep)  # the run's first keep, on the baseline's tree: it anchors
    anchor = it.record["profile"]["anchor"]
    folder = tmp_path / "profiles" / "v1" / "best"
    assert e.baseline_outputs() == (anchor, folder) and written[folder] == [BASE]

    # another lane's keep moved BEST; this lane's keep is rebased onto it and decided again
    # (keep.rebase: lane.best reset to the new BEST, best_commit_before moved), then confirmed again
    it.best_commit_before, lane.tree_in_best = KEPT, KEPT
    e.confirm(it, lane, keep)
    assert compared[-1] == (folder, "baseline")
    assert written[folder] == [BASE], "the anchor's folder now holds a kept candidate's outputs"
    assert e.baseline_outputs() == (anchor, folder), "the anchor is gone from the record"


def test_a_review_that_confirms_the_first_keep_again_keeps_the_anchor(tmp_path, monkeypatch):
    """The review's "more rounds" keep confirms the anchoring iteration again: the record keeps
    `anchor`, so the run still has the baseline's outputs."""
    e, it, lane, written, compared = harness(tmp_path, monkeypatch)
    keep = Verdict(kind="keep", reason="bench: keep")
    e.confirm(it, lane, keep)
    anchor = it.record["profile"]["anchor"]
    e.confirm(it, lane, keep)  # loop: `verdict.kind == "keep"` after review -> confirm again
    assert e.baseline_outputs() == (anchor, tmp_path / "profiles" / "v1" / "best")
