"""The GPU block timers against a stand-in `torch.cuda`: what is flushed, captured, replayed.

The stand-in records every call in one log and reports a fixed 2 ms between the events, so
the tests check the order of operations and the per-launch arithmetic, not the GPU.
"""

from __future__ import annotations

from types import SimpleNamespace

from kopt_supervisor.kernels.harness import timing


class StandInCuda:
    def __init__(self) -> None:
        self.log: list[str] = []
        self.capturing = False
        cuda = self

        class Event:
            def __init__(self, enable_timing: bool) -> None:
                self.name = "event"

            def record(self) -> None:
                cuda.log.append("record")

            def synchronize(self) -> None:
                cuda.log.append("sync")

            def elapsed_time(self, other: object) -> float:
                return 2.0  # ms

        class CUDAGraph:
            def __init__(self) -> None:
                self.calls = 0

            def replay(self) -> None:
                cuda.log.append(f"replay x{self.calls}")

        class Capture:
            def __init__(self, graph: CUDAGraph) -> None:
                self.graph = graph

            def __enter__(self) -> None:
                cuda.capturing, cuda.graph = True, self.graph

            def __exit__(self, *exc: object) -> None:
                cuda.capturing = False

        self.Event, self.CUDAGraph, self.graph = Event, CUDAGraph, Capture

    def synchronize(self) -> None:
        self.log.append("sync")


def make():
    cuda = StandInCuda()
    torch = SimpleNamespace(cuda=cuda)

    def fn() -> None:
        if cuda.capturing:
            cuda.graph.calls += 1
        else:
            cuda.log.append("launch")

    return torch, cuda, fn, lambda: cuda.log.append("flush")


def test_the_event_timer_flushes_then_times_reps_eager_launches():
    torch, cuda, fn, flush = make()
    t = timing.EventTimer(torch, fn, reps=4, flush=flush, warm_blocks=1)
    cuda.log.clear()
    assert t.block() == 2.0 * 1000.0 / 4  # µs per launch
    assert cuda.log == ["flush", "record", "launch", "launch", "launch", "launch", "record", "sync"]


def test_the_graph_timer_captures_reps_launches_once_and_replays_them_per_block():
    torch, cuda, fn, flush = make()
    before = len(timing.LIVE_GRAPHS)
    t = timing.GraphTimer(torch, fn, reps=5, flush=flush, warm_blocks=2)
    assert t.graph.calls == 5  # captured once, 5 launches
    assert cuda.log[:2] == ["launch", "sync"]  # one eager warm-up launch before the capture
    assert cuda.log.count("replay x5") == 2  # the warm blocks
    cuda.log.clear()
    assert t.block() == 2.0 * 1000.0 / 5
    assert cuda.log == ["flush", "record", "replay x5", "record", "sync"]
    assert timing.LIVE_GRAPHS[before] is t  # kept until the process ends
