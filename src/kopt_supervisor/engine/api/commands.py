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
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kopt_supervisor.engine import history, integrity
from kopt_supervisor.engine.api.reading import LIVE_STATES
from kopt_supervisor.engine.api.reviews import ANSWERS, answer_version, sealed_answers
from kopt_supervisor.engine.daemon import engine_alive, workspace_lock
from kopt_supervisor.engine.errors import BadInput
from kopt_supervisor.engine.store import Store
from kopt_supervisor.engine.workspace import Workspace, write_projections


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
        cid = store.send_command(kind, args, source=source, seal=integrity.command_sealer(key))
    if alive:
        return Sent(cid, False, f"sent to the engine (pid {pid})")
    return Sent(cid, False, "queued: no engine is running; it applies when the run resumes (`kopt run`)")


def _validate(store: Store, kind: str, args: dict[str, Any], key: bytes) -> None:
    if kind in ANSWERS:
        v = int(args["version"])
        it = store.iteration(v)
        if it is None or not it.awaiting_review:
            raise BadInput(f"v{v} is not awaiting review"
                           + (f" (status {it.status}{', masked' if it.masked else ''})" if it else ""))
        sent = [c for c in sealed_answers(key, store.pending_commands(ANSWERS)) if answer_version(c) == v]
        if sent:
            c = sent[0]
            raise BadInput(f"v{v} already has an answer waiting for the engine: {c.kind.replace('_', ' ')} "
                           f"(command #{c.id}, from {c.source or 'an unnamed client'})")
    if kind == "restart":
        history.check_restart_point(store, int(args["version"]))
    if kind == "submit":  # the manual proposer takes one submit per iteration: a second would judge another's edit
        waiting = store.pending_commands(["submit"])
        if waiting:
            raise BadInput(f"a submit is already waiting for the engine (command #{waiting[0].id}, from "
                           f"{waiting[0].source or 'an unnamed client'}): one submit at a time")


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


