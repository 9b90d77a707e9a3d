"""kopt's own time per iteration (`timings.engine_s`, "kopt's own time" in `kopt status`) leaves
out what others spent: the proposer, the looks, the profiler, the GPU gate's wait, and the
engineer's review (a new user's 59 s review had read as kopt's own time)."""

from __future__ import annotations

from typing import Any, cast

from kopt_supervisor.engine.loop.context import RunContext
from kopt_supervisor.engine.records import Iteration, Status


def test_the_engineer_s_review_is_not_kopt_s_own_time() -> None:
    it = Iteration(3, Status.REJECTED, started_at=100.0, finished_at=180.0)
    it.record["timings"] = {
        "proposer_s": 5.0,
        "looks_s": [4.0, 2.0],
        "profiler_s": 8.0,
        "gate_wait_s": 1.0,
        "spent": {"measure": 6.0, "review": 59.0},
    }
    RunContext.finish_timings(cast(Any, None), it)
    t = it.record["timings"]
    assert t["total_s"] == 80.0 and t["engine_s"] == 1.0  # 80 - (5 + 6 + 8 + 1 + 59)
