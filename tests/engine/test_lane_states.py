"""`engine.api.lane_states`: what each lane is doing, from meta and the iterations alone (the
`lanes` key of `kopt status --json`, the dashboard's lanes panel)."""

from __future__ import annotations

from typing import Any

from kopt_supervisor.engine.api import lane_states
from kopt_supervisor.engine.records import Iteration, Status


def it(
    v: int, status: Status, lane: Any = 0, phase: str = "done", gpu: dict[str, Any] | None = None, **record: Any
) -> Iteration:
    rec: dict[str, Any] = {"lane": lane, **record}
    if lane is None:
        del rec["lane"]
    if gpu is not None:
        rec["gpu"] = gpu
    return Iteration(v, status, phase=phase, record=rec)


def gpu(i: int, host: str = "local") -> dict[str, Any]:
    return {
        "index": i,
        "uuid": f"GPU-{i}",
        "name": "NVIDIA H100",
        "host": host,
        "before": {"util_pct": 0},
        "after": {"util_pct": 0},
    }


def step(v: int | None, phase: str, text: str, done: int | None = None, total: int | None = None) -> dict[str, Any]:
    return {
        "version": v,
        "phase": phase,
        "step": text,
        "done": done,
        "total": total,
        "phase_started_at": 1.0e9,
        "eta_s": 12.5 if done else None,
        "t": 1.0e9,
    }


def lease(i: int) -> dict[str, Any]:
    """What the gate's lease leaves in meta lane:<i> (context.py acquire): the GPU's state."""
    return {"index": i, "uuid": f"GPU-{i}", "name": "NVIDIA H100", "util_pct": 0, "mem_used_mib": 3}


def test_several_lanes_each_show_their_own_iteration_step_and_gpu():
    its = [
        it(0, Status.BASELINE, lane=None, gpu=gpu(0)),
        it(1, Status.KEEP, lane=0, gpu=gpu(0)),
        it(2, Status.REGRESSION, lane=1, gpu=gpu(1)),
        it(3, Status.TIE, lane=2, gpu=gpu(3)),
        it(4, Status.RUNNING, lane=0, phase="measure", gpu=gpu(0)),
        it(5, Status.RUNNING, lane=1, phase="gate"),
    ]
    meta = {
        "progress": step(4, "eval", "round 3 (min 3, max 8)", 2, 8),
        "lane:0": {**step(4, "eval", "round 3 (min 3, max 8)", 2, 8), "host": "local", "gpu": lease(0)},
        # lane 1's row is written (phase gate), its step not yet: the lane's record still names v2
        "lane:1": {**step(2, "eval", "round 4 (min 3, max 8)", 3, 8), "host": "local", "gpu": lease(1)},
        # lane 2 ended v3 and is idle: its record still names v3's last step
        "lane:2": {**step(3, "eval", "round 8 (min 3, max 8)", 7, 8), "host": "local", "gpu": lease(3)},
    }
    lanes = lane_states(meta, its, 3)
    assert [x["lane"] for x in lanes] == [0, 1, 2]
    assert lanes[0] == {
        "lane": 0,
        "version": 4,
        "phase": "eval",
        "step": "round 3 (min 3, max 8)",
        "done": 2,
        "total": 8,
        "eta_s": 12.5,
        "gpu": {"index": 0, "uuid": "GPU-0", "name": "NVIDIA H100", "host": "local"},
        "host": "local",
        "hypothesis": None,
        "interval": None,
        "review": None,
    }
    # v5 has no step of its own yet: its row's phase, nothing of v2's step; its GPU the gate's lease for it
    assert lanes[1]["version"] == 5 and lanes[1]["phase"] == "gate"
    assert lanes[1]["step"] is None and lanes[1]["done"] is None and lanes[1]["eta_s"] is None
    assert lanes[1]["gpu"] == {"index": 1, "uuid": "GPU-1", "name": "NVIDIA H100", "host": "local"}
    # idle: no version, no stale step; the GPU of its last iteration
    assert lanes[2] == {
        "lane": 2,
        "version": None,
        "phase": "idle",
        "step": None,
        "done": None,
        "total": None,
        "eta_s": None,
        "gpu": {"index": 3, "uuid": "GPU-3", "name": "NVIDIA H100", "host": "local"},
        "host": "local",
        "hypothesis": None,
        "interval": None,
        "review": None,
    }


def test_a_ray_lane_names_the_worker_host_that_chose_its_gpu():
    # the head holds no GPU for a Ray lane (its lease is None); the record names the worker's
    its = [
        it(0, Status.BASELINE, lane=None, gpu=gpu(0, "node-a")),
        it(1, Status.RUNNING, lane=0, phase="measure", gpu=gpu(2, "node-b")),
        it(2, Status.RUNNING, lane=1, phase="propose"),
    ]
    meta = {
        "progress": step(2, "propose", "proposer (command)"),
        "lane:0": {**step(1, "eval", "round 1 (min 3, max 8)", 0, 8), "host": "node-b", "gpu": None},
        "lane:1": {**step(2, "propose", "proposer (command)"), "host": "ray", "gpu": None},
    }
    lanes = lane_states(meta, its, 2)
    assert lanes[0]["gpu"] == {"index": 2, "uuid": "GPU-2", "name": "NVIDIA H100", "host": "node-b"}
    assert lanes[0]["host"] == "node-b" and lanes[0]["phase"] == "eval"
    # lane 1 proposes: no worker has taken it yet and no GPU is chosen for it
    assert lanes[1]["gpu"] is None and lanes[1]["host"] == "ray" and lanes[1]["step"] == "proposer (command)"


def test_one_lane_reads_the_runs_progress_and_the_baseline_counts_as_lane_0():
    its = [it(0, Status.RUNNING, lane=None, phase="baseline")]
    meta = {"progress": step(0, "baseline", "baseline run 2/3", 1, 3), "lane:0": {"host": "local", "gpu": lease(1)}}
    (only,) = lane_states(meta, its, 1)
    assert only["version"] == 0 and only["phase"] == "baseline" and only["done"] == 1 and only["total"] == 3
    assert only["gpu"] == {"index": 1, "uuid": "GPU-1", "name": "NVIDIA H100", "host": "local"}
    # several lanes: the baseline runs on lane 0 from the run's context (no lane:0 step): still lane 0's
    lanes = lane_states(meta, its, 2)
    assert lanes[0]["version"] == 0 and lanes[0]["step"] == "baseline run 2/3"
    assert lanes[1]["version"] is None and lanes[1]["phase"] == "idle" and lanes[1]["gpu"] is None
    assert lanes[1]["host"] is None
    assert lane_states({}, [], 0) == [
        {
            "lane": 0,
            "version": None,
            "phase": "idle",
            "step": None,
            "done": None,
            "total": None,
            "eta_s": None,
            "gpu": None,
            "host": None,
            "hypothesis": None,
            "interval": None,
            "review": None,
        }
    ]


def test_an_idle_lane_waits_for_a_gpu_only_while_the_run_is_live():
    its = [it(0, Status.BASELINE, lane=None, gpu=gpu(0)), it(1, Status.KEEP, lane=1, gpu=gpu(1))]
    waiting = {**step(1, "waiting_gpu", "lane 1: no idle GPU free for it, next check in 4 s"), "host": "local"}
    live = lane_states({"progress": step(None, "propose", "x"), "lane:1": waiting}, its, 2)
    assert live[1]["version"] is None and live[1]["phase"] == "waiting_gpu"
    assert live[1]["step"].startswith("lane 1: no idle GPU")
    assert live[1]["gpu"]["uuid"] == "GPU-1"  # its last iteration's
    # the engine clears meta progress when the run ends, not lane:<i>: a stopped run's lanes are idle
    ended = lane_states({"progress": None, "lane:1": waiting}, its, 2)
    assert ended[1]["phase"] == "idle" and ended[1]["step"] is None
    # one lane: the run's progress is the lane's
    (one,) = lane_states({"progress": step(1, "waiting_gpu", "no idle GPU: next check in 3 s")}, its[:1], 1)
    assert one["phase"] == "waiting_gpu" and one["version"] is None


def test_a_borderline_candidate_holds_its_lane_in_review():
    its = [
        it(0, Status.BASELINE, lane=None),
        it(1, Status.BORDERLINE, lane=1, phase="review", gpu=gpu(1)),
        it(2, Status.KEEP, lane=0, gpu=gpu(0)),
    ]
    meta = {"lane:1": {**step(1, "review", "awaiting the engineer (policy: reject in 1200 s)"), "host": "local"}}
    lanes = lane_states(meta, its, 2)
    assert lanes[1]["version"] == 1 and lanes[1]["phase"] == "review"
    assert lanes[0]["version"] is None and lanes[0]["gpu"]["uuid"] == "GPU-0"


def test_records_that_name_no_lane_of_the_run_are_no_lanes_and_a_forged_step_no_iteration():
    # a record is data: a lane that is not an index of this run's lanes belongs to none of them
    its = [
        it(0, Status.BASELINE, lane=None, gpu=gpu(0)),
        it(1, Status.RUNNING, lane=7, gpu=gpu(7)),
        it(2, Status.RUNNING, lane="1", gpu=gpu(8)),
        it(3, Status.RUNNING, lane=True, gpu=gpu(9)),
        it(4, Status.RUNNING, lane=-1, gpu=gpu(10)),
        it(5, Status.RUNNING, lane=0, phase="propose"),
    ]
    # lane 1's record claims v5 (lane 0's) and a GPU: it runs nothing, and v5 is not shown twice
    meta = {
        "lane:1": {**step(5, "eval", "round 9", 8, 8), "gpu": "GPU 3", "host": 42},
        "lane:0": {**step(5, "propose", "proposer (command)"), "gpu": ["not", "a", "dict"]},
    }
    lanes = lane_states(meta, its, 2)
    assert lanes[0]["version"] == 5 and lanes[0]["phase"] == "propose"
    assert lanes[0]["gpu"] is None and lanes[0]["host"] is None  # v5 has no GPU yet, the lease is junk
    assert lanes[1]["version"] is None and lanes[1]["phase"] == "idle" and lanes[1]["gpu"] is None
    assert lanes[1]["host"] is None  # not a host name
    assert all(x["version"] not in (1, 2, 3, 4) for x in lanes)
