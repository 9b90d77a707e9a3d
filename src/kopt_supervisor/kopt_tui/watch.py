"""Reading runs for the TUI, off the UI thread, re-reading only what changed.

Everything here runs in the app's one polling thread (SQLite connections are not shared
between threads). `RunCache` holds one run: each look costs a `PRAGMA data_version` and an
flock probe; only when either moved does it read meta and the per-iteration stamps, and then
only the iterations whose stamp changed. `engine.api.GpuSampler` reads the GPUs through the
same backend and gate rules the engine uses. `Poller` is the loop body: it watches the run on screen
(or every run, for the home screen) and returns what changed since its last step.
Everything it reads comes through `engine.api`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeAlias

from kopt_supervisor.engine.api import (
    BackendFactory,
    Config,
    GpuAssessment,
    GpuConfig,
    GpuSampler,
    Iteration,
    KoptError,
    RunReader,
    Workspace,
    engine_alive,
    gpu_assessment,
    list_workspaces,
    open_backend,
)
from kopt_supervisor.kopt_tui.model import RunData

Probe = Callable[[Workspace], tuple[bool, int | None]]

OPEN_STATUSES = ("running", "borderline")
"""Iterations whose record may change without their stamp changing: always re-read."""

BULK_READ = 64
"""Above this many changed rows, one query for all iterations beats one query per row."""


class RunCache:
    """One run, read incrementally. Create and use it in one thread only."""

    def __init__(self, ws: Workspace, probe: Probe = engine_alive) -> None:
        self.ws = ws
        self.probe = probe
        self.reader = RunReader(ws)
        self.config: Config | None
        try:
            self.config = ws.load_config()
        except KoptError:
            self.config = None
        self._dv: int | None = None
        self._alive: tuple[bool, int | None] | None = None
        self._stamps: dict[int, tuple[Any, ...]] = {}
        self._its: dict[int, Iteration] = {}
        self._generation = 0
        self.data: RunData | None = None

    def close(self) -> None:
        self.reader.close()

    def refresh(self, *, force: bool = False) -> RunData | None:
        """A new reading when anything changed since the last one, else None."""
        alive = self.probe(self.ws)
        dv = self.reader.data_version()
        if not force and self.data is not None and dv == self._dv and alive == self._alive:
            return None
        r = self.reader
        with r.store.snapshot():
            meta = r.meta()
            stamps = r.iteration_stamps()
            stale = [v for v, s in stamps.items() if self._stamps.get(v) != s or s[0] in OPEN_STATUSES]
            changed = False
            if len(stale) > BULK_READ:
                self._its = {it.version: it for it in r.iterations()}
                changed = True
            else:
                for v in stale:
                    it = r.iteration(v)
                    if it is not None and it != self._its.get(v):
                        self._its[v] = it
                        changed = True
            for v in set(self._its) - set(stamps):
                del self._its[v]
                changed = True
            if changed:
                self._generation += 1
            commands = tuple(r.pending_commands())
            events = r.events(limit=1)
        answers = tuple(r.review_answers(list(commands)))  # the secret is a file: outside the read
        self._dv, self._alive, self._stamps = dv, alive, stamps
        previous = self.data
        self.data = RunData(
            tag=self.ws.tag,
            meta=meta,
            iterations=tuple(self._its[v] for v in sorted(self._its)),
            alive=alive[0],
            pid=alive[1],
            pending_commands=commands,
            review_answers=answers,
            last_event=events[-1] if events else None,
            config=self.config,
            workspace=str(self.ws.dir),
            generation=self._generation,
            carried_spending=previous.computed("agent_spending") if previous is not None and not changed else None,
        )
        return self.data


@dataclass(frozen=True)
class RunsSnapshot:
    """Every run under the root (the home screen)."""

    runs: tuple[RunData, ...]


@dataclass(frozen=True)
class GpuReading:
    tag: str
    assessments: tuple[GpuAssessment, ...]
    error: str = ""


@dataclass(frozen=True)
class PollError:
    message: str


Item: TypeAlias = RunData | RunsSnapshot | GpuReading | PollError


class Poller:
    """The body of the app's polling thread. `target` (a tag or None) and `want_runs` are set
    by the UI thread; `step()` returns what changed."""

    def __init__(
        self,
        root: Path,
        *,
        probe: Probe = engine_alive,
        backend: BackendFactory = open_backend,
        gpu_every_s: float = 2.0,
        runs_every_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.root = root
        self.probe = probe
        self.backend = backend
        self.gpu_every_s = gpu_every_s
        self.runs_every_s = runs_every_s
        self.clock = clock
        self.target: str | None = None
        self.want_runs = False
        self.force = False
        self._caches: dict[str, RunCache] = {}
        self._gpu: tuple[str, GpuSampler] | None = None
        self._gpu_last: tuple[GpuAssessment, ...] | None = None
        self._gpu_at = -1e18
        self._runs_at = -1e18
        self._tags: tuple[str, ...] = ()
        self._last_error = ""

    def close(self) -> None:
        for c in self._caches.values():
            c.close()
        self._caches.clear()
        self._close_gpu()

    def _cache(self, tag: str) -> RunCache:
        c = self._caches.get(tag)
        if c is None:
            c = self._caches[tag] = RunCache(Workspace(self.root, tag), self.probe)
        return c

    def step(self) -> list[Item]:
        out: list[Item] = []
        force, self.force = self.force, False
        try:
            target = self.target
            if target is not None:
                data = self._cache(target).refresh(force=force)
                if data is not None:
                    out.append(data)
                gpu = self._sample_gpus(target, force)
                if gpu is not None:
                    out.append(gpu)
            else:
                self._close_gpu()
            if self.want_runs and (force or self.clock() - self._runs_at >= self.runs_every_s):
                self._runs_at = self.clock()
                snap = self._refresh_runs(force)
                if snap is not None:
                    out.append(snap)
            self._last_error = ""
        except Exception as e:  # noqa: BLE001 - a failed look is reported and retried, never fatal
            msg = f"{type(e).__name__}: {e}"
            if msg != self._last_error:
                out.append(PollError(msg))
            self._last_error = msg
        return out

    def _refresh_runs(self, force: bool) -> RunsSnapshot | None:
        tags = tuple(ws.tag for ws in list_workspaces(self.root))
        changed = tags != self._tags
        for gone in set(self._caches) - set(tags) - {self.target}:
            self._caches.pop(gone).close()
        runs = []
        for tag in tags:
            try:
                cache = self._cache(tag)
                if cache.refresh(force=force) is not None:
                    changed = True
                if cache.data is not None:
                    runs.append(cache.data)
            except Exception as e:  # noqa: BLE001 - one unreadable run must not hide the others
                runs.append(
                    RunData(tag, {"state": "unreadable", "last_error": f"{type(e).__name__}: {e}"}, (), False, None)
                )
        self._tags = tags
        return RunsSnapshot(tuple(runs)) if changed or force else None

    def _sample_gpus(self, tag: str, force: bool) -> GpuReading | None:
        if not force and self.clock() - self._gpu_at < self.gpu_every_s:
            return None
        self._gpu_at = self.clock()
        cache = self._cache(tag)
        if self._gpu is None or self._gpu[0] != tag:
            self._close_gpu()
            cfg = cache.config.gpu if cache.config else GpuConfig()
            self._gpu = (tag, GpuSampler(cfg, self.backend))
        try:
            meta = cache.data.meta if cache.data else {}
            readings = tuple(gpu_assessment(a) for a in self._gpu[1].read(meta))
            error = ""
        except Exception as e:  # noqa: BLE001 - a GPU library failing is shown, not fatal
            readings, error = (), f"GPU sampling failed: {type(e).__name__}: {e}"
        if readings == self._gpu_last and not force and not error:
            return None
        self._gpu_last = readings
        return GpuReading(tag, readings, error)

    def _close_gpu(self) -> None:
        if self._gpu is not None:
            self._gpu[1].close()
            self._gpu = None
            self._gpu_last = None
