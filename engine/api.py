"""What clients (the CLI, the TUI) read from a run and send to it.

Reads open run.db read-only and never block the engine. Sends insert a command row; when no
engine owns the workspace, commands that only change the history (mask, unmask, restart,
pause, resume) are applied here, under the workspace lock, by the same code the engine uses.
`status()` is the stable JSON of `kopt status --json` (DESIGN.md §10).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kopt_supervisor.engine import bookkeeping, history
from kopt_supervisor.engine.daemon import engine_alive, workspace_lock
from kopt_supervisor.engine.errors import BadInput
from kopt_supervisor.engine.store import Command, Iteration, Store
from kopt_supervisor.engine.workspace import Workspace, list_workspaces, write_projections

LIVE_STATES = ("running", "paused", "waiting_gpu", "awaiting_review")
STALE_HEARTBEAT_S = 10.0


def effective_state(meta: dict[str, Any], alive: bool) -> str:
    state = meta.get("state") or "stopped"
    if state in LIVE_STATES and not alive:
        return "crashed"
    return state


def heartbeat_age(meta: dict[str, Any], now: float | None = None) -> float | None:
    hb = meta.get("heartbeat") or {}
    t = hb.get("t")
    return None if t is None else max(0.0, (now or time.time()) - float(t))


def best_speedup(iterations: list[Iteration], direction: str = "min") -> float | None:
    """Geometric mean over classes of baseline / best (>1: faster than the baseline)."""
    base = bookkeeping.baseline(iterations)
    if base is None:
        return None
    from kopt_supervisor.engine.projections import best_per_class

    best = best_per_class(iterations)
    ratios = []
    for cls, c in (base.record.get("classes") or {}).items():
        b, now = c.get("best"), best.get(cls)
        if b and now and b > 0 and now > 0:
            ratios.append(b / now if direction == "min" else now / b)
    if not ratios:
        return None
    return math.exp(sum(math.log(r) for r in ratios) / len(ratios))


def status(ws: Workspace) -> dict[str, Any]:
    with ws.open_store(readonly=True) as store, store.snapshot():
        meta = store.meta()
        its = store.iterations()
    alive, pid = engine_alive(ws)
    c = bookkeeping.counters(its)
    cfg_direction = ws.load_config().target.direction
    last = its[-1] if its else None
    return {
        "tag": ws.tag,
        "state": effective_state(meta, alive),
        "iteration": last.version if last else None,
        "iteration_status": last.status if last else None,
        "best_commit": bookkeeping.best_commit(its) or meta.get("baseline_commit"),
        "baseline_commit": meta.get("baseline_commit"),
        "best_speedup": best_speedup(its, cfg_direction),
        "consecutive_regressions": c.consecutive_regressions,
        "recent_regressions": c.recent_regressions,
        "candidates": c.candidates,
        "keeps": c.keeps,
        "pending_reviews": [it.version for it in its if it.status == "borderline" and not it.masked],
        "masked": [it.version for it in its if it.masked],
        "stop_reason": meta.get("stop_reason"),
        "engine_pid": pid if alive else None,
        "heartbeat_age_s": heartbeat_age(meta),
        "paused": bool(meta.get("paused")),
        "progress": meta.get("progress"),
        "last_error": meta.get("last_error"),
        "notice": meta.get("notice"),
        "repo": meta.get("repo"),
        "workspace": str(ws.dir),
    }


def list_runs(root: Path) -> list[dict[str, Any]]:
    out = []
    for ws in list_workspaces(root):
        try:
            out.append(status(ws))
        except Exception as e:  # noqa: BLE001 - one broken run must not hide the others
            out.append({"tag": ws.tag, "state": "unreadable", "error": str(e)})
    return out


@dataclass(frozen=True)
class Sent:
    command_id: int | None
    applied: bool
    """True when no engine ran and the change was applied directly."""
    message: str


def send(ws: Workspace, kind: str, args: dict[str, Any] | None = None, *, source: str = "cli") -> Sent:
    """Send a command to the run's engine, or apply it when no engine owns the workspace."""
    args = dict(args or {})
    ws.require()
    alive, pid = engine_alive(ws)
    if not alive:
        applied = _apply_offline(ws, kind, args, source)
        if applied is not None:
            return Sent(None, True, applied)
    with Store(ws.db_path) as store:
        _validate(store, kind, args)
        cid = store.send_command(kind, args, source=source)
    if alive:
        return Sent(cid, False, f"sent to the engine (pid {pid})")
    return Sent(cid, False, "queued: no engine is running; it applies when the run resumes (`kopt run`)")


def _validate(store: Store, kind: str, args: dict[str, Any]) -> None:
    if kind in ("accept", "reject", "more_rounds"):
        v = int(args["version"])
        it = store.iteration(v)
        if it is None or it.status != "borderline":
            raise BadInput(f"v{v} is not awaiting review" + (f" (status {it.status})" if it else ""))
    if kind == "restart":
        history.check_restart_point(store, int(args["version"]))


def _apply_offline(ws: Workspace, kind: str, args: dict[str, Any], source: str) -> str | None:
    if kind not in ("mask", "unmask", "restart", "pause", "resume", "stop"):
        return None
    with workspace_lock(ws), Store(ws.db_path) as store:
        message = _apply_locked(ws, store, kind, args, source)
        write_projections(ws, store, ws.load_config())
        return message


def _apply_locked(ws: Workspace, store: Store, kind: str, args: dict[str, Any], source: str) -> str:
    if kind in ("mask", "unmask"):
        changed = history.set_masked(ws, store, [int(v) for v in args.get("versions", [])], kind == "mask")
        store.event("command", f"{kind}ed {', '.join(f'v{v}' for v in changed) or 'nothing'} ({source}, offline)")
        return f"{kind}ed {', '.join(f'v{v}' for v in changed) or 'nothing'}"
    if kind == "restart":
        changed = history.restart_from(ws, store, int(args["version"]), str(args.get("why") or ""))
        store.set_many({"state": "stopped", "stop_reason": f"restarted from v{args['version']}; `kopt run` resumes"})
        return (f"restarted from v{args['version']}: masked {', '.join(f'v{v}' for v in changed) or 'nothing'}; "
                f"`kopt run {ws.tag}` continues from there")
    if kind in ("pause", "resume"):
        store.set("paused", kind == "pause")
        return f"{kind}d (takes effect when the engine runs)"
    if store.get("state") in LIVE_STATES:
        store.set_many({"state": "stopped", "stop_reason": "stopped by the engineer (the engine was not running)"})
    return "no engine is running; the run is stopped"


class RunReader:
    """A read-only view of one run for the TUI: cheap queries, no engine side effects."""

    def __init__(self, ws: Workspace) -> None:
        self.ws = ws.require()
        self.store = Store(ws.db_path, readonly=True)

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> RunReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def meta(self) -> dict[str, Any]:
        return self.store.meta()

    def data_version(self) -> int:
        """Changes whenever another connection commits (SQLite's PRAGMA data_version): a
        client polls this and re-reads only when it moved."""
        return int(self.store.db.execute("PRAGMA data_version").fetchone()[0])

    def iterations(self, since: int = 0) -> list[Iteration]:
        return self.store.iterations(since=since)

    def iteration(self, version: int) -> Iteration | None:
        return self.store.iteration(version)

    def iteration_stamps(self) -> dict[int, tuple[Any, ...]]:
        """Per iteration, the cheap columns that move whenever its row is saved (status,
        phase, masked, finished_at, record length): a client compares them between looks and
        re-reads only the rows that changed (a 1,000-iteration run costs one small query)."""
        rows = self.store.db.execute(
            "SELECT version, status, phase, masked, finished_at, length(record) FROM iterations")
        return {int(r[0]): tuple(r[1:]) for r in rows}

    def pending_commands(self) -> list[Command]:
        """Commands sent but not yet handled (queued while no engine runs, or in flight)."""
        return self.store.pending_commands()

    def events(self, since_id: int = 0, version: int | None = None, limit: int = 500) -> list[Any]:
        return self.store.events(since_id=since_id, version=version, limit=limit)

    def samples(self, version: int, stage: str | None = None) -> list[dict[str, Any]]:
        return [dict(r) for r in self.store.samples(version, stage)]

    def plan(self, version: int) -> str:
        return _read_text(self.ws.plan_path(version))

    def diff(self, version: int) -> str:
        return _read_text(self.ws.log_dir(version) / "candidate.diff")

    def log_files(self, version: int) -> list[Path]:
        d = self.ws.log_dir(version)
        return sorted((p for p in d.iterdir() if p.is_file()), key=lambda p: p.stat().st_mtime) if d.is_dir() else []

    def live_log(self) -> Path | None:
        p = self.store.get("live_log")
        return Path(p) if p else None


def _read_text(path: Path, limit: int = 1_000_000) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read(limit)
    except OSError:
        return ""
