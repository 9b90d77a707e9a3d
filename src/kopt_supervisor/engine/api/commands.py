"""Sending a run a command (accept, reject, more rounds, pause, resume, stop, restart, mask,
unmask, submit).

A send inserts a command row that the run's engine polls. When no engine owns the
workspace, commands that only change the history (mask, unmask, restart, pause, resume,
stop) are applied here, under the workspace lock, by the same code the engine uses.

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

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kopt_supervisor.engine import history, integrity
from kopt_supervisor.engine.api.reading import LIVE_STATES
from kopt_supervisor.engine.api.reviews import ANSWERS, answer_version, sealed_answers
from kopt_supervisor.engine.daemon import engine_alive, workspace_lock
from kopt_supervisor.engine.errors import BadInput
from kopt_supervisor.engine.history import write_projections
from kopt_supervisor.engine.propose.proposer import lanes_text, submit_lane, wait_key
from kopt_supervisor.engine.store import Store
from kopt_supervisor.engine.workspace import Workspace


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
    key = integrity.read_secret(ws.dir)
    with Store(ws.db_path) as store, store.transaction():  # checked and inserted at once
        _validate(store, kind, args, key)
        if kind == "submit":
            args = submit_addressed(store, args, ws.load_config().parallel.lanes, pid if alive else None)
        cid = store.send_command(kind, args, source=source, seal=integrity.command_sealer(key))
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
