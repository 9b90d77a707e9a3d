"""On a GPU the profiler is a keep's external truth (engine/loop/evidence.py
`Evidence.external_truth`): it confirms only when it agrees on every class the keep claims
(found improved, the guard class aside: confirmation.is_claimed). A profiler that compared the
trees and could not show a claimed gain is inconclusive (the keep goes to review); a GPU
without a profiler, or a profile that did not compare, leaves the keep "confirmed by the
bench's timer only"."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from kopt_supervisor.engine.decide.external_truth import TIMER_ONLY
from kopt_supervisor.engine.loop.evidence import Evidence
from kopt_supervisor.engine.profile import Agreement, ClassAgreement
from kopt_supervisor.engine.records import Iteration, Status


def evidence(profiler: object | None, kind: str = "ncu") -> tuple[Evidence, Any]:
    ctx = SimpleNamespace(cfg=SimpleNamespace(profile=SimpleNamespace(kind=kind)))
    lane = SimpleNamespace(vendor="nvidia")  # the vendor of the GPU its gate chose
    ev = Evidence(ctx)  # type: ignore[arg-type]
    ev._profiler = ("nvidia", profiler)  # type: ignore[assignment]  # what choose_profiler found
    return ev, lane


def keep(*classes: ClassAgreement) -> Iteration:
    return Iteration(1, Status.RUNNING, record={"profile": {"agreement": Agreement(classes, per_class=True).to_dict()}})


def agreement(cls: str, status: str, bench: str = "improved") -> ClassAgreement:
    return ClassAgreement(cls, status, bench, 0.7, 0.68, 0.72, 0.71, 0.69, 0.73, "why")


def test_the_profiler_confirms_when_it_agrees_on_every_improved_class():
    ev, lane = evidence(object())
    truth = ev.external_truth(keep(agreement("narrow", "agrees"), agreement("wide", "cannot_tell", "tied")), lane)
    assert truth.kind == "profiler" and truth.outcome == "confirmed"
    assert truth.reason.startswith("the profiler's kernel time per class agrees: narrow agrees")


def test_a_profiler_that_cannot_tell_on_an_improved_class_is_inconclusive_not_timer_only():
    # H200 (2026-11-29): a timer patch, bench -9.8%, profiler -0.1% [-7.7, +8.1] at 2 calls per
    # config, went down as "confirmed by the bench's timer only" and was kept
    ev, lane = evidence(object())
    truth = ev.external_truth(keep(agreement("narrow", "agrees"), agreement("wide", "cannot_tell")), lane)
    assert truth.kind == "profiler" and truth.outcome == "inconclusive"
    assert truth.reason.startswith(
        "the profiler could not show half the claimed gain for wide (wide: profiler -29.0% [-31.0, -27.0], "
        "cannot tell; narrow agrees"
    )
    it = keep(agreement("wide", "cannot_tell"))
    it.record["profile"]["taken"] = {"calls": 12}
    assert "for wide even at up to 12 calls per config" in ev.external_truth(it, lane).reason


def test_a_gpu_without_a_profiler_or_without_a_comparison_says_so():
    ev, lane = evidence(None, kind="none")
    truth = ev.external_truth(keep(agreement("narrow", "agrees")), lane)
    assert (
        truth.kind == "none"
        and truth.reason == f'{TIMER_ONLY}: no profiler for the nvidia GPU ([profile].kind = "none")'
    )
    ev, lane = evidence(None, kind="auto")
    assert ": none found)" in ev.external_truth(keep(), lane).reason
    ev, lane = evidence(object())
    failed = Iteration(1, Status.RUNNING, record={"profile": {"error": "ncu: ERR_NVGPUCTRPERM"}})
    truth = ev.external_truth(failed, lane)
    assert truth.kind == "none" and "the profiler did not compare the trees (ncu: ERR_NVGPUCTRPERM)" in truth.reason


def test_the_guard_class_is_not_part_of_what_the_profiler_must_confirm():
    # H200 (2026-11-29): the guard read -8.1% [-16.9, +1.6] by the profiler on a -49% keep, and
    # the keep went down as "confirmed by the bench's timer only"
    ev, lane = evidence(object())
    guard = agreement("guard (non-production)", "cannot_tell")
    truth = ev.external_truth(keep(agreement("narrow", "agrees"), guard), lane)
    assert truth.kind == "profiler" and truth.outcome == "confirmed"
    truth = ev.external_truth(keep(guard), lane)  # a keep that claims only the guard claims nothing
    assert truth.kind == "none" and "could not tell for any class" in truth.reason
