"""Progress per GPU-hour (engine/api/run_summary.py) as a pure projection of iteration records:
the best speedup against wall and GPU time per keep in the order iterations ended, each
lane's time by bucket, stale time and its share, and results.md's section that shows them."""

from __future__ import annotations

from typing import Any

import pytest

from kopt_supervisor.engine.api import progress
from kopt_supervisor.engine.records import Iteration, Status
from kopt_supervisor.engine.report.provenance import PROGRESS_TITLE, progress_section

T0 = 1_000_000.0


def it(
    v: int,
    status: Status,
    *,
    lane: int = 0,
    start: float,
    end: float,
    order: int,
    spent: dict[str, float] | None = None,
    classes: dict[str, float] | None = None,
    masked: bool = False,
    **record: Any,
) -> Iteration:
    rec: dict[str, Any] = {
        "lane": lane,
        "ended_seq": order,
        "timings": {"total_s": end - start, **({"spent": spent} if spent else {})},
        **record,
    }
    if classes is not None:
        rec["classes"] = {c: {"cand": x, "best": x} for c, x in classes.items()}
    return Iteration(
        v,
        status,
        masked=masked,
        commit=f"{v:040x}" if status in (Status.KEEP, Status.BASELINE) else None,
        started_at=T0 + start,
        finished_at=T0 + end,
        record=rec,
    )  # type: ignore[arg-type]


def history() -> list[Iteration]:
    base = it(0, Status.BASELINE, start=-50, end=-1, order=0, classes={"a": 10.0, "b": 10.0})
    return [
        base,
        # lane 0 keeps class a twice as fast at t=30; lane 1 was measuring meanwhile: rebased, stale seconds
        it(
            1,
            Status.KEEP,
            lane=0,
            start=0,
            end=30,
            order=1,
            classes={"a": 5.0, "b": 10.0},
            spent={"wait": 1, "propose": 4, "measure": 15, "confirm": 9},
        ),
        it(
            2,
            Status.TIE,
            lane=1,
            start=0,
            end=40,
            order=2,
            spent={"wait": 2, "propose": 5, "measure": 20, "stale": 12},
            rebased=[{"from": "x", "onto": "y"}],
            carried=[{"decided_on": "x", "onto": "y"}],
        ),
        # lane 2's change no longer applied after two hand-backs: the whole iteration was stale
        it(
            3,
            Status.FAIL_PROPOSE,
            lane=2,
            start=0,
            end=20,
            order=3,
            stale=True,
            handed_back=[{}, {}],
            spent={"propose": 6, "measure": 10},
        ),
        # lane 0 keeps b twice as fast at t=70 (speedup sqrt(2*2) = 2)
        it(
            4,
            Status.KEEP,
            lane=0,
            start=30,
            end=70,
            order=4,
            classes={"b": 5.0},
            spent={"propose": 5, "measure": 20, "confirm": 10, "wait": 1},
        ),
        # a masked keep: its time was spent, its speedup never counts
        it(5, Status.KEEP, lane=1, start=40, end=60, order=5, classes={"a": 1.0}, masked=True, spent={"measure": 20}),
    ]


def test_the_curve_follows_the_keeps_in_the_order_they_ended_against_wall_and_gpu_time() -> None:
    p = progress(history(), "min")
    assert [(x.version, x.t_s, x.gpu_s) for x in p.curve] == [(1, 30.0, 30.0), (4, 70.0, 130.0)]
    assert p.curve[0].speedup == pytest.approx(2**0.5) and p.curve[1].speedup == pytest.approx(2.0)
    assert p.best_speedup == pytest.approx(2.0)  # the masked keep (a 10x class) counts for nothing
    assert p.time_to(1.9) == p.curve[1] and p.time_to(1.2) == p.curve[0] and p.time_to(2.5) is None
    assert p.elapsed_s == 70.0 and p.gpu_s == 150.0 and p.gpu_hours == pytest.approx(150 / 3600)


def test_each_lane_s_time_goes_to_its_buckets_and_stale_time_is_counted_whole() -> None:
    p = progress(history(), "min")
    lanes = {x.lane: x for x in p.lanes}
    assert set(lanes) == {0, 1, 2}
    l0, l1, l2 = lanes[0], lanes[1], lanes[2]
    assert (l0.iterations, l0.busy_s, l0.wait_s, l0.propose_s, l0.measure_s, l0.confirm_s) == (2, 70, 2, 9, 35, 19)
    assert l0.other_s == pytest.approx(70 - 2 - 9 - 35 - 19)
    assert (l1.stale_s, l1.rebased, l1.measure_s) == (12, 1, 40)  # the masked iteration's 20 s were spent too
    assert (l0.carried, l1.carried, l2.carried) == (0, 1, 0)  # a keep carried to a moved BEST, counted
    # an iteration ended because its change no longer applied: every second of it was stale
    assert (l2.stale_s, l2.propose_s, l2.measure_s, l2.handed_back, l2.stale_iterations) == (20, 0, 0, 2, 1)
    assert p.stale_s == 32 and p.stale_share == pytest.approx(32 / 150)
    d = p.to_dict()
    assert d["stale_share"] == pytest.approx(32 / 150) and d["lanes"][2]["stale_iterations"] == 1


def test_records_without_buckets_count_as_other_and_nothing_ended_is_empty() -> None:
    old = [
        it(0, Status.BASELINE, start=-5, end=-1, order=0, classes={"a": 1.0}),
        it(1, Status.REGRESSION, start=0, end=10, order=1),
    ]
    p = progress(old, "min")
    assert p.lanes[0].other_s == 10 and p.lanes[0].measure_s == 0 and p.curve == () and p.stale_share == 0
    empty = progress(old[:1], "min")
    assert empty.gpu_s == 0 and empty.stale_share is None and empty.line() == ""


def test_results_md_shows_the_curve_and_the_lanes_time() -> None:
    text = "\n".join(progress_section(history(), "min"))
    assert text.startswith(f"## {PROGRESS_TITLE}")
    assert "| v1 | 0:30 | 0.01 h | 1.414× |" in text and "| v4 | 1:10 | 0.04 h | 2.000× |" in text
    lane2 = next(line for line in text.splitlines() if line.startswith("| 2 |"))
    assert "0:20 (100%)" in lane2 and lane2.endswith("| 0 / 2 / 0 / 1 |")  # rebased / handed back / carried / stale
    lane1 = next(line for line in text.splitlines() if line.startswith("| 1 |"))
    assert lane1.endswith("| 1 / 0 / 1 / 0 |") and "keeps carried" in text
    assert "21.3% of the GPU time" in text


def test_the_lanes_panel_s_subtitle_says_the_progress_and_where_the_lanes_time_went() -> None:
    from kopt_supervisor.kopt_tui.widgets.lanes import time_split

    p = progress(history(), "min")
    assert p.line() == "2.000× in 1:10 (0.04 GPU-h) · stale 21.3%"
    # 150 lane-seconds: measure 75 (50%), stale 32, confirm 19, propose 14, wait 4; review 0 left out
    assert time_split(p) == "measuring 50% · stale 21% · confirming 13% · proposing 9.3% · waiting 2.7%"
    assert time_split(progress(history()[:1], "min")) == ""


async def test_the_dashboard_s_lanes_panel_carries_the_progress_line(tmp_path) -> None:
    from kopt_supervisor.kopt_tui.app import KoptApp
    from kopt_supervisor.kopt_tui.widgets.lanes import LanesPanel
    from tests.tui.fixtures import LANES, frozen_services, until
    from tests.tui.test_lanes_panel import lanes_root, lanes_shown

    root = lanes_root(tmp_path)
    app = KoptApp(root, LANES, services=frozen_services(root, alive=(LANES,), clock=LANES, gpus_file="gpus-lanes.json"))
    async with app.run_test(size=(120, 30)) as pilot:
        await until(pilot, lambda: lanes_shown(app), what="the lanes panel")
        panel = app.screen.query_one(LanesPanel)
        assert panel.gpu_time is not None and panel.gpu_time.gpu_s > 0
        assert (
            str(panel.border_subtitle).startswith(panel.gpu_time.line()) and " GPU-h) · stale " in panel.border_subtitle
        )
