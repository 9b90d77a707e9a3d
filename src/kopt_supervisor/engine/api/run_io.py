"""A client's reads and writes of one run: its state (`status`, the stable JSON of `kopt
status --json`, docs/design.md §10), its review queue (`pending_reviews`: every lane's, oldest
first), every run under a root, its memory records, `RunReader` (the TUI's cheap read-only
view), an agent's transcript, and `send`: a command to the run (accept, reject, more rounds,
pause, resume, stop, restart, mask, unmask, submit). Reads open run.db read-only and never
block the engine.

A send inserts a command row that the run's engine polls. When no engine owns the workspace,
commands that only change the history (mask, unmask, restart, pause, resume, stop) are
applied here, under the workspace lock, by the same code the engine uses.

An answer to a review (accept, reject, more rounds) names its iteration, and is refused
unless that iteration awaits review and no answer to it is pending yet (from any client:
the TUI, `kopt accept`, another TUI): the engine takes the first answer of a review, so a
second one could only be refused later, or, after more rounds, answer the review re-opened
without the engineer having seen it. The check and the insert are one write transaction, so
two clients answering at once cannot both pass.

A submit (the manual proposer's) names the lane it is for, checked the same way
(`submit_addressed`): a lane the run has, waiting for a submit (with several lanes), with no
other submit for that lane pending.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kopt_supervisor.engine import BadInput, KoptError, history, projections
from kopt_supervisor.engine.api import run_summary
from kopt_supervisor.engine.api.run_meta import ANSWERS, PendingReview, answer_version, review_queue, sealed_answers
from kopt_supervisor.engine.api.run_summary import progress
from kopt_supervisor.engine.daemon import engine_alive, workspace_lock
from kopt_supervisor.engine.history import write_projections
from kopt_supervisor.engine.projections import best_speedup
from kopt_supervisor.engine.propose.proposer import lanes_text, submit_lane, wait_key
from kopt_supervisor.engine.records import Iteration
from kopt_supervisor.engine.store import Command, Event, Store
from kopt_supervisor.engine.workspace import Workspace, command_sealer, existing_secret, list_workspaces, read_secret

__all__ = [
    "LIVE_STATES",
    "RunReader",
    "Transcript",
    "TrustedHistory",
    "best_speedup",
    "effective_state",
    "heartbeat_age",
    "list_runs",
    "memory_record",
    "memory_records",
    "pending_reviews",
    "read_transcript",
    "status",
    "trusted_history",
    "Sent",
    "send",
]  # what engine.api exports from here

LIVE_STATES = ("running", "paused", "waiting_gpu", "awaiting_review")
"""States in which an engine should be running."""


def effective_state(meta: dict[str, Any], alive: bool, lanes: Sequence[Mapping[str, Any]] = ()) -> str:
    """The run's state as a client shows it: a live state with no engine alive is "crashed".
    With several lanes (`lanes`: run_summary.lane_states) the engine's one `state` is whichever
    lane wrote last, so running / waiting_gpu / awaiting_review is read from the lanes instead:
    "running" while any lane works on a step, else "awaiting_review" while a review waits for
    the engineer, else "waiting_gpu" while a lane waits for a GPU, else "running"."""
    state = meta.get("state") or "stopped"
    if state in LIVE_STATES and not alive:
        return "crashed"
    if len(lanes) > 1 and state in ("running", "waiting_gpu", "awaiting_review"):
        return lanes_state(lanes)
    return state


LANE_WAITS = ("idle", "waiting_gpu", "review")
"""Lane phases in which a lane works on no step."""


def lanes_state(lanes: Sequence[Mapping[str, Any]]) -> str:
    """What several lanes are doing together (effective_state)."""
    if any(str(x.get("phase")) not in LANE_WAITS for x in lanes):
        return "running"
    if any(_needs_engineer(x.get("review")) for x in lanes):
        return "awaiting_review"
    return "waiting_gpu" if any(x.get("phase") == "waiting_gpu" for x in lanes) else "running"


def _needs_engineer(review: Any) -> bool:
    return isinstance(review, Mapping) and not review.get("answer") and not review.get("more_rounds")


def heartbeat_age(meta: dict[str, Any], now: float | None = None) -> float | None:
    """Seconds since the engine's last heartbeat, None when it never beat."""
    hb = meta.get("heartbeat") or {}
    t = hb.get("t")
    return None if t is None else max(0.0, (now or time.time()) - float(t))


@dataclass(frozen=True)
class TrustedHistory:
    """A run's history as its seals vouch for it (engine/history.read_chain)."""

    iterations: list[Iteration]
    """Every iteration but the keeps the run's seals do not vouch for: what a client derives
    BEST, the counters, the speedup and the keeps from."""
    best_commit: str | None
    """BEST_COMMIT: the last keep whose seal verifies (None: the seals vouch for none)."""
    baseline_commit: str | None
    tampered: str | None
    """One line naming what was forged; None when the chain of keeps is the engine's."""


def trusted_history(ws: Workspace, iterations: list[Iteration], meta: dict[str, Any]) -> TrustedHistory:
    """What a client may show of a run's keeps: a forged keep is never BEST, never counted,
    and the run is said to be tampered with (the secret is read, never made)."""
    chain = history.read_chain(ws, iterations, meta)
    its = projections.trusted_rows(iterations, chain.trusted)
    return TrustedHistory(
        its, projections.best_commit(its) or chain.baseline_commit, chain.baseline_commit, chain.problem
    )


def status(ws: Workspace) -> dict[str, Any]:
    """The stable JSON of `kopt status TAG --json` (docs/files.md names every key). BEST is
    the last keep the run's seals vouch for; a run whose chain of keeps was tampered with
    says so in `tampered` (one line; None when the chain is the engine's)."""
    with ws.open_store(readonly=True) as store, store.snapshot():
        meta = store.meta()
        everything = store.iterations()
        commands = store.pending_commands()
    trusted = trusted_history(ws, everything, meta)
    its = trusted.iterations  # a forged keep counts for nothing
    alive, pid = engine_alive(ws)
    reviews = review_queue(its, meta, review_answers(ws, commands), alive=alive)
    cfg = ws.load_config()
    lanes = run_summary.lane_states(meta, its, cfg.parallel.lanes, reviews)
    c = projections.counters(its)
    cfg_direction = cfg.target.direction
    last = everything[-1] if everything else None
    return {
        "tag": ws.tag,
        "state": effective_state(meta, alive, lanes),
        "iteration": last.version if last else None,
        "iteration_status": last.status if last else None,
        "best_commit": trusted.best_commit,
        "baseline_commit": trusted.baseline_commit,
        "tampered": trusted.tampered,
        "best_speedup": best_speedup(its, cfg_direction),
        "consecutive_regressions": c.consecutive_regressions,
        "recent_regressions": c.recent_regressions,
        "candidates": c.candidates,
        "keeps": c.keeps,
        "pending_reviews": [r.version for r in reviews],
        "reviews": [r.to_dict() for r in reviews],
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
        "sandbox": run_summary.sandbox_state(meta),
        "unsandboxed": run_summary.ran_unsandboxed(meta),
        "decision_cost": run_summary.decision_cost(meta, its),
        "external_truth": run_summary.external_truth(its),
        "timings": run_summary.phase_timings(its),
        "agent": run_summary.agent_spending(its, cfg.propose.budget_usd, cfg.propose.budget_tokens),
        "lanes": lanes,
        "gpu_time": progress(its, cfg_direction).to_dict(),
    }


def review_answers(ws: Workspace, commands: list[Command]) -> list[Command]:
    """The pending review answers the run's secret vouches for (engine.api.run_meta.sealed_answers;
    a run whose secret cannot be read has none: the engine would refuse them too)."""
    try:
        key = existing_secret(ws.dir)
    except KoptError:
        key = None
    return sealed_answers(key, commands)


def pending_reviews(ws: Workspace) -> list[PendingReview]:
    """The run's review queue (engine.api.run_meta.review_queue): every candidate awaiting the
    engineer, whatever its lane, oldest review first, with the answer already sent for it."""
    with ws.open_store(readonly=True) as store, store.snapshot():
        meta = store.meta()
        its = store.iterations()
        commands = store.pending_commands()
    trusted = trusted_history(ws, its, meta)
    return review_queue(trusted.iterations, meta, review_answers(ws, commands), alive=engine_alive(ws)[0])


def list_runs(root: Path) -> list[dict[str, Any]]:
    out = []
    for ws in list_workspaces(root):
        try:
            out.append(status(ws))
        except Exception as e:  # noqa: BLE001 - one broken run must not hide the others
            out.append({"tag": ws.tag, "state": "unreadable", "error": str(e)})
    return out


def memory_records(ws: Workspace, *, unmasked_only: bool = False) -> list[dict[str, Any]]:
    """Every iteration's memory record (what memory/vN.json holds), oldest first; only the
    unmasked ones with `unmasked_only` (`kopt memory summary`)."""
    from kopt_supervisor.engine.projections import memory_record as project

    with ws.open_store(readonly=True) as store:
        its = store.iterations()
    return [project(it) for it in its if not (unmasked_only and it.masked)]


def memory_record(ws: Workspace, version: int) -> dict[str, Any]:
    """One iteration's memory record; BadInput when vN does not exist."""
    from kopt_supervisor.engine.projections import memory_record as project

    with ws.open_store(readonly=True) as store:
        it = store.iteration(version)
    if it is None:
        raise BadInput(f"v{version} does not exist")
    return project(it)


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
            "SELECT version, status, phase, masked, finished_at, length(record) FROM iterations"
        )
        return {int(r[0]): tuple(r[1:]) for r in rows}

    def pending_commands(self) -> list[Command]:
        """Commands sent but not yet handled (queued while no engine runs, or in flight)."""
        return self.store.pending_commands()

    def review_answers(self, commands: list[Command]) -> list[Command]:
        """The review answers among `commands` that the run's secret vouches for."""
        return review_answers(self.ws, commands)

    def events(self, since_id: int = 0, version: int | None = None, limit: int = 500) -> list[Event]:
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

    def transcript(self, path: str, limit: int | None = None) -> Transcript:
        """An agent's transcript (record["proposal"]["agent"]["transcript_path"], relative to
        the workspace): see `read_transcript`."""
        return read_transcript(self.ws, path, TRANSCRIPT_SHOWN_BYTES if limit is None else limit)


TRANSCRIPT_SHOWN_BYTES = 1 << 20
"""How much of a transcript a client is handed: its head and its tail when it is longer."""


@dataclass(frozen=True)
class Transcript:
    path: str
    text: str
    size: int = 0
    """The file's size in bytes."""
    cut: bool = False
    """Only the head and the tail are in `text` (the file is over the limit)."""
    error: str = ""
    """Why nothing could be read (then `text` is "")."""


def read_transcript(ws: Workspace, path: str, limit: int = TRANSCRIPT_SHOWN_BYTES) -> Transcript:
    """The text of a transcript under the run's logs/ (the path a record names is the
    engine's, but a record is data: a path that leads outside logs/, through `..`, an
    absolute name or a symbolic link, and anything but a regular file are refused). Over
    `limit` bytes, the head and the tail with a line between them saying what was left out."""
    if not path or "\x00" in path:
        return Transcript(path, "", error="no transcript path")
    logs = ws.logs.resolve()
    try:
        real = (ws.dir / path).resolve(strict=True)
    except (OSError, RuntimeError) as e:
        return Transcript(path, "", error=f"cannot read {path}: {getattr(e, 'strerror', None) or e}")
    if not real.is_relative_to(logs):
        return Transcript(path, "", error=f"{path} is not under the run's logs/: not shown")
    try:
        fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        return Transcript(path, "", error=f"cannot read {path}: {e.strerror}")
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            return Transcript(path, "", error=f"{path} is not a regular file: not shown")
        size = st.st_size
        if size <= limit:
            return Transcript(path, f.read(limit).decode("utf-8", "replace"), size)
        half = max(1, limit // 2)
        head = f.read(half)
        f.seek(size - half)
        tail = f.read(half)
    marker = f"\n[... {size - 2 * half} bytes of the transcript not shown here: the file is {path} ...]\n"
    return Transcript(path, head.decode("utf-8", "replace") + marker + tail.decode("utf-8", "replace"), size, True)


def _read_text(path: Path, limit: int = 1_000_000) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read(limit)
    except OSError:
        return ""


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
    key = read_secret(ws.dir)
    with Store(ws.db_path) as store, store.transaction():  # checked and inserted at once
        _validate(store, kind, args, key)
        if kind == "submit":
            args = submit_addressed(store, args, ws.load_config().parallel.lanes, pid if alive else None)
        cid = store.send_command(kind, args, source=source, seal=command_sealer(key))
    if alive:
        return Sent(cid, False, f"sent to the engine (pid {pid})")
    return Sent(cid, False, "queued: no engine is running; it applies when the run resumes (`kopt run`)")


def _validate(store: Store, kind: str, args: dict[str, Any], key: bytes) -> None:
    if kind in ANSWERS:
        v = int(args["version"])
        it = store.iteration(v)
        if it is None or not it.awaiting_review:
            raise BadInput(
                f"v{v} is not awaiting review"
                + (f" (status {it.status}{', masked' if it.masked else ''})" if it else "")
            )
        sent = [c for c in sealed_answers(key, store.pending_commands(ANSWERS)) if answer_version(c) == v]
        if sent:
            c = sent[0]
            raise BadInput(
                f"v{v} already has an answer waiting for the engine: {c.kind.replace('_', ' ')} "
                f"(command #{c.id}, from {c.source or 'an unnamed client'})"
            )
    if kind == "restart":
        history.check_restart_point(store, int(args["version"]))


def submit_addressed(store: Store, args: dict[str, Any], lanes: int, engine_pid: int | None) -> dict[str, Any]:
    """A submit's arguments with the lane it is for (`kopt submit --lane N`; one lane: lane 0),
    checked where it can be known before the engine sees it: the run has that lane; with
    several lanes one is named and, while an engine runs, that lane waits for a submit; and no
    submit for that lane is pending already (each lane's manual proposer takes one submit per
    iteration: a second would judge another's edit). BadInput, one line, otherwise."""
    lane = submit_lane(args, lanes)
    waits = submit_waits(store.get, lanes, engine_pid)
    if lane is None:
        raise BadInput(
            f"the run has {lanes_text(lanes)}: name the submit's lane with --lane N ({waiting_text(waits, engine_pid)})"
        )
    pending = [c for c in store.pending_commands(["submit"]) if addressed_lane(c.args, lanes) == lane]
    if pending:
        raise BadInput(
            f"a submit{f' for lane {lane}' if lanes > 1 else ''} is already waiting for the engine "
            f"(command #{pending[0].id}, from {pending[0].source or 'an unnamed client'}): one submit at "
            "a time"
        )
    if lanes > 1 and engine_pid is not None and lane not in waits:
        step = store.get(f"lane:{lane}")
        doing = (
            f"at {step.get('phase')} of v{step.get('version')}"
            if isinstance(step, dict) and step.get("phase")
            else "between iterations"
        )
        raise BadInput(f"lane {lane} is not waiting for a submit (it is {doing}): {waiting_text(waits, engine_pid)}")
    return {**args, "lane": lane}


def addressed_lane(args: dict[str, Any], lanes: int) -> int | None:
    """The lane a submit's arguments name (None: none, or one the run does not have)."""
    try:
        return submit_lane(args, lanes)
    except BadInput:
        return None


def submit_waits(get: Callable[[str], Any], lanes: int, engine_pid: int | None) -> dict[int, dict[str, Any]]:
    """The lanes whose manual proposer waits for a submit now, each with what it said (its
    `worktree`, the `version` it waits for, its `repair`), read from the run's meta with
    `get`; only the running engine's waits count (`engine_pid`, None: no engine runs)."""
    out = {}
    for lane in range(lanes):
        said = get(wait_key(lane))
        if engine_pid is not None and isinstance(said, dict) and said.get("waiting") and said.get("pid") == engine_pid:
            out[lane] = said
    return out


def said_worktree(get: Callable[[str], Any], lane: int) -> str | None:
    """Where the engine said lane `lane`'s candidate worktree is (at its manual proposer's
    latest wait, in this run or an earlier session of it; None: not said yet)."""
    said = get(wait_key(lane))
    where = said.get("worktree") if isinstance(said, dict) else None
    return where if isinstance(where, str) else None


def waiting_text(waits: dict[int, Any], engine_pid: int | None) -> str:
    if engine_pid is None:
        return "no engine runs: the submit waits for the lane it names"
    if not waits:
        return "no lane waits for a submit now"
    return "waiting for a submit now: " + ", ".join(f"lane {lane}" for lane in sorted(waits))


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
        return (
            f"restarted from v{args['version']}: masked {', '.join(f'v{v}' for v in changed) or 'nothing'}; "
            f"`kopt run {ws.tag}` continues from there"
        )
    if kind in ("pause", "resume"):
        store.set("paused", kind == "pause")
        return f"{kind}d (takes effect when the engine runs)"
    if store.get("state") in LIVE_STATES:
        store.set_many({"state": "stopped", "stop_reason": "stopped by the engineer (the engine was not running)"})
    return "no engine is running; the run is stopped"
