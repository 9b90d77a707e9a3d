"""Test-only fault injection: SIGKILL the engine right after its Nth persisted step.

The engine calls `step(name)` after each thing it persists that a crash could split from
the next (an iteration row written, a benchmark child recorded, the keep's `git commit`).
Two environment variables, read here and nowhere else, turn it into a crash test:

    KOPT_TEST_STEPS=path       append each step's ordinal and name to `path` (one a line)
    KOPT_TEST_CRASH_AT=N|name  SIGKILL this process right after the Nth step, or after the
                               first step whose name equals `name`

With neither set (every real run) `step()` is one dictionary lookup. tests/reliability
runs a short run once to list its steps, then kills a fresh run at each of them.
"""

from __future__ import annotations

import os
import signal

_count = 0


def step(name: str) -> None:
    steps_log = os.environ.get("KOPT_TEST_STEPS")
    crash_at = os.environ.get("KOPT_TEST_CRASH_AT")
    if not steps_log and not crash_at:
        return
    global _count
    _count += 1
    if steps_log:
        with open(steps_log, "a", encoding="utf-8") as f:
            f.write(f"{_count}\t{name}\n")
    if crash_at and (crash_at == str(_count) or crash_at == name):
        os.kill(os.getpid(), signal.SIGKILL)
