"""A clock the tests drive in place of the engine's waits (engine/loop/control.CLOCK): a
review's timeout, the manual proposer's submit, the gate's pause between checks and a pause
pass in a few polls of virtual time instead of being slept through.

Each sleep the engine asks for moves the clock on by at least `step_s` (a poll stands for
that much time), and yields the real CPU for a moment so that other threads go on. Use it
only where nothing outside the engine is meant to answer within the wait: an engineer who
answers a review from another thread needs the real clock."""

from __future__ import annotations

import time

from kopt_supervisor.engine.loop.control import Clock


class DrivenClock(Clock):
    def __init__(self, step_s: float = 60.0) -> None:
        self.now = 1000.0
        self.step_s = step_s
        self.slept: list[float] = []
        """Every sleep the engine asked for, in order (seconds)."""

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += max(seconds, self.step_s)
        time.sleep(0.001)

    @property
    def elapsed(self) -> float:
        """Virtual seconds since the clock started."""
        return self.now - 1000.0
