"""The tune proposer with lanes (engine/propose/tune_space.py): points in flight at once never
step the same parameter for classes in common, a lane whose every point left overlaps one in
flight is told `busy` (never handed an overlapping point), progress is still reached with four
lanes, and a point handed back after another lane's keep is proposed again on the new BEST."""

from __future__ import annotations

import json
import random
from dataclasses import replace
from pathlib import Path
from typing import Any

from kopt_supervisor.engine.propose.tune import TuneProposer
from kopt_supervisor.engine.propose.tune_space import ALL, Footprint, dump_params, overlapping_pairs
from tests.engine.test_tune import Harness
from tests.engine.test_tune_search import (
    CLASSES,
    NAIVE,
    ORDER,
    RMS,
    RMS_NAIVE,
    RMS_SPACE,
    SAME_BEST,
    SPACE,
    cost,
    judge,
    optimum,
)


def test_footprints_overlap_only_on_a_parameter_for_classes_in_common() -> None:
    g_warps = Footprint(None, frozenset({"num_warps"}))
    narrow_warps = Footprint("dclass=narrow", frozenset({"num_warps"}))
    wide_warps = Footprint("dclass=wide", frozenset({"num_warps"}))
    narrow_rows = Footprint("dclass=narrow", frozenset({"ROWS_PER_PROG"}))
    g_block = Footprint(None, frozenset({"BLOCK_D"}))
    # the case: the same step as global, narrow-only and wide-only at once
    assert overlapping_pairs([g_warps, narrow_warps, wide_warps]) == [(0, 1), (0, 2)]
    assert not narrow_warps.overlaps(wide_warps)  # disjoint classes
    assert not narrow_warps.overlaps(narrow_rows)  # another parameter
    assert not g_block.overlaps(narrow_warps)
    assert Footprint(None, frozenset({"a", "b"})).overlaps(Footprint("c", frozenset({"b"})))


class Lanes:
    """K lanes over one Harness: each proposal sees the others' points in flight (their records
    running, as the loop's history shows them); a lane's point ends when the model judges it."""

    def __init__(self, tmp: Path, model: Any, k: int, *, space=SPACE, naive=NAIVE, seed: int = 0) -> None:
        self.h = Harness(tmp, naive, space=space, per_class=True, classes=CLASSES, order=ORDER)
        self.h.proposer = TuneProposer(replace(self.h.proposer.cfg, shared_first=True))
        self.model, self.k, self.best = model, k, naive
        self.flight: dict[
            int, tuple[dict[str, Any], dict[str, Any], str | None]
        ] = {}  # lane -> (record, written, target)
        self.rng = random.Random(seed)
        self.kept = self.busy = self.stale = 0
        self.proposals: list[dict[str, Any]] = []

    def propose(self, lane: int) -> bool:
        p, plan, written = self.h.propose(status="running")
        record = self.h.history[-1]
        if not p.ok:
            self.h.history.pop()
            assert p.details.get("busy"), p.reason  # never exhausted here: only busy
            self.busy += 1
            return False
        self.proposals.append(p.details)
        self.flight[lane] = (record, written, plan.target_class)
        points = [
            Footprint(r["proposal"]["class"], frozenset(r["proposal"]["changed"])) for r, _, _ in self.flight.values()
        ]
        assert not overlapping_pairs(points), [r["proposal"] for r, _, _ in self.flight.values()]
        return True

    def end(self, lane: int, i: int) -> None:
        record, written, target = self.flight.pop(lane)
        if record["best_commit_before"] != self.h.base:  # another lane kept meanwhile: decided against a BEST
            self.stale += 1  # that no longer is (the loop rebases it)
            changed = record["proposal"]["changed"]
            entry = record["proposal"]["class"] or ALL
            written = json.loads(self.h.best_text)
            written.setdefault(entry, {}).update({p: v[1] for p, v in changed.items()})
        status, classes = judge(self.model, self.best, written, target)
        record.update(status=status, classes=classes)
        if status == "keep":
            keep(self.h, record, written, f"{i:040x}")
            self.best = written
            self.kept += 1

    def done(self) -> bool:
        return all(cost(self.model, c, self.best) <= optimum(self.model, c) * 1.0001 for c in CLASSES)

    def run(self, limit: int) -> int:
        """Lanes propose while idle; one lane in flight (chosen at random) ends per step."""
        for i in range(1, limit + 1):
            for lane in range(self.k):
                if lane not in self.flight:
                    self.propose(lane)
            assert self.flight, "no lane could propose: the search stalled"
            self.end(self.rng.choice(sorted(self.flight)), i)
            if self.done():
                return i
        return limit + 1


def keep(h: Harness, record: dict[str, Any], written: dict[str, Any], commit: str) -> None:
    """A lane's point kept: its record a keep, its params the new BEST."""
    record.update(status="keep", commit=commit)
    h.base, h.best_text = commit, dump_params(written)


def test_four_lanes_never_hold_overlapping_points_and_still_reach_the_best(tmp_path: Path) -> None:
    for seed, (model, space, naive) in enumerate([(SAME_BEST, SPACE, NAIVE), (RMS, RMS_SPACE, RMS_NAIVE)]):
        d = tmp_path / str(seed)
        d.mkdir()
        lanes = Lanes(d, model, 4, space=space, naive=naive, seed=seed)
        ended = lanes.run(limit=120)  # asserts no overlap at every proposal
        assert ended <= 120, f"four lanes never reached the model's best ({lanes.kept} keeps)"
        assert lanes.kept >= 3
        # the lanes were spread: several parameters and both class entries were in flight together
        assert {p["class"] for p in lanes.proposals} >= {None, *CLASSES}


def test_a_lane_whose_every_point_left_overlaps_is_told_busy_not_handed_an_overlapping_one(tmp_path: Path) -> None:
    # one parameter, global search: a second lane has nothing that does not overlap the first
    h = Harness(tmp_path, {ALL: {"num_warps": 1}}, space={"num_warps": [1, 2, 4, 8]}, per_class=False, classes=CLASSES)
    first, _, _ = h.propose(status="running")
    assert first.ok and first.details["changed"] == {"num_warps": [1, 2]}
    second, _, _ = h.propose(status="running")
    assert not second.ok and second.details == {"busy": True, "base": h.base}
    h.history.pop()
    h.history[-1]["status"] = "regression"  # the first lane's point ended: the second gets one
    third, _, _ = h.propose(status="running")
    assert third.ok and third.details["changed"]["num_warps"][0] == 1


def test_a_point_handed_back_is_proposed_again_on_the_new_best(tmp_path: Path) -> None:
    h = Harness(tmp_path, NAIVE, space=SPACE, per_class=True, classes=CLASSES, order=ORDER)
    p, _, _ = h.propose(status="running")
    assert p.ok
    previous = dict(p.details)
    other = next(q for q in ORDER if q not in previous["changed"])
    # another lane kept a step of another parameter for every class meanwhile
    moved = {ALL: {**NAIVE[ALL], other: SPACE[other][1]}}
    h.base, h.best_text = "d1" * 20, dump_params(moved)
    h.history.pop()
    (h.tree / h.name).write_text(h.best_text)
    ctx = replace(h.ctx(), handed_back={"onto": h.base, "why": "no longer applies", "proposal": previous})
    again = h.proposer.propose(ctx)
    assert again.ok and again.details["handed_back"] is True
    written = json.loads((h.tree / h.name).read_text())
    entry = written.get(previous["class"] or ALL, {})
    for param, (_, new) in previous["changed"].items():
        assert entry.get(param, written[ALL].get(param)) == new  # the same values ...
    assert written[ALL][other] == SPACE[other][1]  # ... on the new BEST
    assert again.details["base"] == h.base and again.details["changed"] == previous["changed"]
    # the new BEST already runs those values: nothing to propose again, the search chooses afresh
    h.best_text = dump_params(written)
    (h.tree / h.name).write_text(h.best_text)
    fresh = h.proposer.propose(replace(h.ctx(), handed_back={"proposal": previous}))
    assert fresh.ok and "handed_back" not in fresh.details and fresh.details["changed"] != previous["changed"]
