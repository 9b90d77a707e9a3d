"""Helpers for the TUI tests: the frozen engine runs of tests/tui/data installed under a
root, a clock and probes fixed for snapshots, a grown 1,000-iteration run, and waiting on
the app without sleeping blindly."""

from __future__ import annotations

import json
import shutil
import sqlite3
import time
from collections.abc import Callable, Iterable
from dataclasses import replace
from pathlib import Path

from textual.pilot import Pilot

from kopt_supervisor.engine.gpu.backends import FakeBackend
from kopt_supervisor.engine.store import Store
from kopt_supervisor.engine.workspace import Workspace
from kopt_supervisor.kopt_tui.app import Services
from tests.tui.make_fixture import GPUS, LANE4_GPUS, LANE_GPUS

DATA = Path(__file__).parent / "data"
REVIEW, DONE, LANES = "fake-review", "fake-done", "fake-lanes"
LANES_REVIEW, LANES4 = "fake-lanes-review", "fake-lanes4"
"""Two lanes each awaiting review (v1 in lane 0, v2 in lane 1); four lanes: one reviewing, one
measuring, one proposing, one waiting for a GPU (tests/tui/make_fixture.py)."""
PENDING = 8
"""The borderline candidate of the fake-review run."""


def install_runs(root: Path, tags: Iterable[str] = (REVIEW, DONE)) -> Path:
    """Each frozen run as a workspace under `root` (run.db rebuilt from its SQL text)."""
    root.mkdir(parents=True, exist_ok=True)
    for tag in tags:
        src, dest = DATA / tag, root / tag
        shutil.copytree(src, dest, ignore=shutil.ignore_patterns("run.sql"))
        sql = (
            (src / "run.sql")
            .read_text()
            .replace("@ROOT@", str(root))
            .replace("@REPO@", str(root.parent / f"{tag}-repo"))
        )
        con = sqlite3.connect(dest / "run.db")
        con.executescript(sql)
        con.close()
        for d in ("memory", "profiles"):
            (dest / d).mkdir(exist_ok=True)
    (root.parent / "gpus.json").write_text(json.dumps(GPUS))
    (root.parent / "gpus-lanes.json").write_text(json.dumps(LANE_GPUS))
    (root.parent / "gpus-lanes4.json").write_text(json.dumps(LANE4_GPUS))
    return root


def heartbeat_t(root: Path, tag: str = REVIEW) -> float:
    with Store(Workspace(root, tag).db_path, readonly=True) as s:
        return float(s.get("heartbeat")["t"])


def frozen_services(
    root: Path,
    *,
    alive: Iterable[str] = (REVIEW,),
    auto_review: bool = False,
    clock: str = REVIEW,
    gpus_file: str = "gpus.json",
) -> Services:
    """Services for deterministic screens: the clock stands 0.6 s after the last heartbeat of
    `clock` (fake-review), the engine probe says which runs are alive, and the GPUs are the
    fixture's (`gpus-lanes.json`: the lanes runs'; `gpus-lanes4.json`: fake-lanes4's)."""
    now = heartbeat_t(root, clock) + 0.6
    live = set(alive)
    gpus = root.parent / gpus_file
    return Services(
        now=lambda: now,
        probe=lambda ws: (ws.tag in live, 4242 if ws.tag in live else None),
        backend=lambda vendor: FakeBackend(gpus),
        poll_s=0.05,
        gpu_every_s=0.05,
        auto_review=auto_review,
    )


def offline_services(root: Path, **kw: object) -> Services:
    """The real engine probe (no engine holds these workspaces), fast polling, fixture GPUs."""
    gpus = root.parent / "gpus.json"
    options: dict[str, object] = {"auto_review": False, "poll_s": 0.05, "gpu_every_s": 0.05, **kw}
    return replace(Services(), backend=lambda vendor: FakeBackend(gpus), **options)  # type: ignore[arg-type]


async def until(pilot: Pilot, cond: Callable[[], object], timeout: float = 30.0, what: str = "the app") -> None:
    """Wait for `cond` (the app's own workers moving it); 30 s: a transition took over 10 s on a
    slowed 2-core machine under the whole suite (2026-12-01, run EV), where alone it takes ~0.1 s."""
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        await pilot.pause(0.02)
    await pilot.pause()


def grow_run(ws: Workspace, total: int) -> None:
    """Add iterations (cloned from the run's own candidates, in a cycle) until `total`, through
    the engine's store API, one transaction."""
    with Store(ws.db_path) as store:
        its = store.iterations()
        models = [it for it in its if it.version > 0 and it.final]
        last = its[-1]
        t = last.finished_at or last.started_at
        with store.transaction():
            for v in range(len(its), total):
                m = models[v % len(models)]
                t += 60.0
                store.save_iteration(
                    replace(
                        m,
                        version=v,
                        parent=v - 1,
                        started_at=t,
                        finished_at=t + 55.0,
                        hypothesis=f"{m.hypothesis.split(':')[0]}: generated iteration v{v}",
                        record=dict(m.record),
                    )
                )
