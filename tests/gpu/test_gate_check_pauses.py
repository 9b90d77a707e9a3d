"""A full check's pauses between its samples are no wait for a busy GPU: the loop's gate takes
them without saying "no idle GPU" or entering waiting_gpu (docs/agents.md: on the H200 every
full check of an idle GPU, each `quick_recheck_s`, showed as "no idle GPU: next check in 1 s",
then "0 s", in an MCP agent's progress, and the look's own line was lost).

The gate's side: `pause` takes the pauses between samples, `sleep` only the waits. The loop's
side (engine/loop/context.py single_lane, engine/loop/start.py lane_gate): their gates, over a scripted
fake GPU, report a wait for a busy GPU and nothing for an idle one."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from gpu_helpers import cfg, gpu, write_script

from kopt_supervisor.engine.config import GpuConfig
from kopt_supervisor.engine.gpu.backends import FakeBackend
from kopt_supervisor.engine.gpu.claims import ClaimRegistry
from kopt_supervisor.engine.gpu.gate import Gate

IDLE = [gpu(0)]
BUSY = [gpu(0, util=90, mem=9000, procs=[(4_000_002, "intruder", 9000)])]


def test_a_full_check_pauses_between_samples_and_sleeps_only_to_wait(tmp_path: Path) -> None:
    slept: list[float] = []
    paused: list[float] = []
    gate = Gate(
        cfg(wait_s=5.0),
        FakeBackend(write_script(tmp_path / "gpus.json", [IDLE] * 3 + [BUSY] * 3 + [IDLE] * 3)),
        sleep=slept.append,
        pause=paused.append,
        claims=ClaimRegistry(tmp_path / "claims"),
    )
    assert gate.acquire().note == "idle"
    assert (paused, slept) == ([1.0, 1.0], [])  # an idle GPU: two pauses, no wait
    gate.cfg = cfg(wait_s=5.0, quick_recheck_s=0)  # the next acquire checks fully again
    assert gate.acquire().note == "kept"
    assert slept == [5.0] and paused == [1.0] * 6  # busy: one wait, then the idle check's pauses


class Ctx:
    """What single_lane and lane_gate use of the run's context, recording what they say."""

    def __init__(self, tmp_path: Path) -> None:
        self.cfg = SimpleNamespace(gpu=GpuConfig(samples=3, sample_interval_s=1.0, wait_s=2.0, quick_recheck_s=0))
        self.cfg.parallel = SimpleNamespace(backend="local")
        self.ws = SimpleNamespace(tag="t", dir=tmp_path, best=tmp_path / "best", cand=tmp_path / "cand")
        self.procs = SimpleNamespace(own_pids=set)
        self.said: list[str] = []
        self.states: list[str] = []
        self.slept: list[float] = []
        self.control = SimpleNamespace(sleep=self._sleep)

    def _sleep(self, seconds: float, tick: Any) -> None:  # the pump's sleep: ticks, no real time
        self.slept.append(seconds)
        tick(seconds)
        tick(0.0)

    def progress(self, _v: object, _phase: str, step: str) -> None:
        self.said.append(step)

    def set_state(self, state: str) -> None:
        self.states.append(state)

    def event(self, *_a: object, **_k: object) -> None:
        pass


@pytest.mark.parametrize("which", ["single_lane", "lane_gate"])
def test_the_loops_gate_says_no_idle_gpu_only_while_one_is_busy(
    which: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kopt_supervisor.engine.loop.context import single_lane
    from kopt_supervisor.engine.loop.start import lane_gate

    script = write_script(tmp_path / "gpus.json", [IDLE] * 3 + [BUSY] * 3 + [IDLE] * 3)
    monkeypatch.setenv("KOPT_FAKE_GPUS", str(script))
    ctx = Ctx(tmp_path)
    gate = single_lane(ctx).gate if which == "single_lane" else lane_gate(ctx, 1)  # type: ignore[arg-type]
    try:
        assert gate.acquire().note == "idle"
        assert ctx.slept == [1.0, 1.0]  # the check's pauses still go through the pump (stop, restart)
        assert ctx.said == [] and "waiting_gpu" not in ctx.states, (ctx.said, ctx.states)
        assert gate.acquire().note == "kept"  # busy, a wait of wait_s, then idle
        assert "waiting_gpu" in ctx.states
        assert any("no idle GPU" in s and "next check in 2 s" in s for s in ctx.said), ctx.said
        assert not any("next check in 1 s" in s for s in ctx.said), ctx.said  # the pauses said nothing
    finally:
        gate.close()
