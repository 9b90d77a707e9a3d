"""The run as `kopt mcp`'s tools see it: reads of its records, the submit, and the following
of the iteration a submit started until its verdict. Synchronous (the server calls it from
worker threads) and a client of the run like the CLI: `engine.api` (and `gitops` to read what
a lane's worktree changes: `changed_files`), commands sent sealed
through `send`, records read through `RunReader`; it never runs the agent,
never writes the workspace (its lane locks aside: `Seats`), never touches cand/.

On a run of several lanes every call that concerns a candidate (`status`, `context`, the
submit) is for a lane: the session's own (`Seats`; the server says which session a call
is of), whose worktree is the one its submit evaluates and whose submit the engine's lane
alone takes (each lane's manual proposer waits for a submit addressed to it).

`Seats`: which lane each MCP session holds, on a run of several lanes: a lane of its own, that no
other live session holds (docs/agents.md, "kopt as an MCP judge").

A lane is held with an exclusive `flock` on `<workspace>/mcp-lanes/lane-<i>.lock`, one open
file per session. So two `kopt mcp` processes on one run (two stdio clients) never hand out
the same lane, nor do two sessions of one HTTP server (a flock belongs to the open file, not to
the process), and a server that dies frees its lanes with it (the kernel drops its locks).
A session takes the first free lane; `release` (its end) frees it.
"""

from __future__ import annotations

import dataclasses
import fcntl
import os
import threading
import time
from collections.abc import Hashable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kopt_supervisor.engine import BadInput, gitops
from kopt_supervisor.engine import mcp as rules
from kopt_supervisor.engine.api.iteration_record import proposal_origin
from kopt_supervisor.engine.api.run_io import (
    RunReader,
    addressed_lane,
    engine_alive,
    heartbeat_age,
    memory_record,
    memory_records,
    read_transcript,
    said_worktree,
    send,
    status,
    submit_waits,
)
from kopt_supervisor.engine.api.run_meta import lane_of
from kopt_supervisor.engine.api.run_summary import profiler_evidence
from kopt_supervisor.engine.mcp import EngineGone, Refused
from kopt_supervisor.engine.workspace import Workspace

HEARTBEAT_STALE_S = 30.0
"""An engine whose heartbeat (written every second) is older than this is taken for dead."""
READY_WAIT_S = 60.0
"""After a verdict, how long a submit waits for the engine to put cand/ back at BEST and wait
for the next submit, so that the agent's next edit is not wiped by the next iteration's start."""


@dataclass
class Submission:
    """A submit sent: what its following needs."""

    version: int
    repair: int
    command_id: int | None
    source: str
    changed_files: list[str]
    lane: int = 0
    started: float = field(default_factory=time.monotonic)


@dataclass(frozen=True)
class Observation:
    kind: str
    """"working" (the iteration goes on), "review" (awaits the engineer), "repair" (the engine
    asks for a correctness repair: the iteration waits for another submit) or "done"."""
    message: str
    record: dict[str, Any] | None = None


class Judge:
    def __init__(
        self,
        ws: Workspace,
        *,
        allow_restart: bool = False,
        heartbeat_stale_s: float = HEARTBEAT_STALE_S,
        ready_wait_s: float = READY_WAIT_S,
        poll_s: float = 0.25,
    ) -> None:
        self.ws = ws.require()
        self.allow_restart = allow_restart
        self.lanes = ws.load_config().parallel.lanes
        self.heartbeat_stale_s = heartbeat_stale_s
        self.ready_wait_s = ready_wait_s
        self.poll_s = poll_s
        self._submitting = [threading.Lock() for _ in range(self.lanes)]
        self._unanswered: dict[int, int] = {}
        """lane -> the version of a submit sent whose verdict the client has not been given."""
        """One submit at a time per lane from this server (every session of it)."""
        self.seats = Seats(self.ws.dir, self.ws.tag, self.lanes)
        """The lane each session holds (runs of several lanes)."""

    # -- the run now -----------------------------------------------------------------------

    def moment(self, lane: int = 0) -> tuple[rules.RunMoment, dict[str, Any]]:
        """What the run does now in `lane` (its newest iteration, a submit pending for it), and
        the run's meta."""
        with RunReader(self.ws) as r:
            meta = r.meta()
            last = None
            for v in sorted(r.iteration_stamps(), reverse=True):  # one lane: the newest at once
                it = r.iteration(v)
                if it is not None and lane_of(it) == lane:
                    last = it
                    break
            pending = [
                c for c in r.pending_commands() if c.kind == "submit" and addressed_lane(c.args, self.lanes) == lane
            ]
        alive, pid = engine_alive(self.ws)
        proposer = meta.get("proposer")
        waiting = lane in submit_waits(meta.get, self.lanes, pid if alive else None)
        return rules.RunMoment(
            self.ws.tag,
            alive,
            str(proposer) if alive and proposer else None,
            self.lanes,
            str(meta.get("state") or "stopped"),
            last.version if last else None,
            str(last.status) if last else None,
            str(last.phase) if last and last.phase else None,
            last.repair_attempts if last else 0,
            (pending[0].source or "an unnamed client") if pending else None,
            meta.get("stop_reason"),
            lane,
            waiting,
        ), meta

    def worktree(self, lane: int, meta: dict[str, Any]) -> Path | None:
        """The candidate worktree of `lane`, absolute: cand/ for lane 0, else where the engine
        said its manual proposer waits (None before the lane's first wait)."""
        if lane == 0:
            return self.ws.cand.absolute()
        where = said_worktree(meta.get, lane)
        return Path(where) if where and Path(where).is_absolute() else None

    def _where(self, lane: int, meta: dict[str, Any]) -> str:
        tree = self.worktree(lane, meta)
        return (
            str(tree) if tree else f"lane {lane}'s worktree (named once the engine waits for a submit in lane {lane})"
        )

    def serve_problem(self) -> str | None:
        """Why this run cannot be served at all (checked when the server starts)."""
        m, _ = self.moment()
        return rules.serve_problem(self.ws.tag, m.alive, m.proposer)

    def status(self, lane: int = 0) -> dict[str, Any]:
        st = status(self.ws)
        m, meta = self.moment(lane)
        problem = rules.submit_problem(m)
        return {
            "tag": st["tag"],
            "state": st["state"],
            "lane": lane,
            "lanes": self.lanes,
            "iteration": m.version,
            "iteration_status": m.status,
            "phase": m.phase,
            "repair": m.repair,
            "ready_for_edits": problem is None,
            "why_not_ready": problem,
            "worktree": self._where(lane, meta),
            "best_commit": st["best_commit"],
            "best_speedup": st["best_speedup"],
            "keeps": st["keeps"],
            "candidates": st["candidates"],
            "consecutive_regressions": st["consecutive_regressions"],
            "pending_reviews": st["pending_reviews"],
            "classes": list(meta.get("classes") or []),
            "progress": st["progress"],
            "stop_reason": st["stop_reason"],
            "engine_alive": m.alive,
            "proposer": m.proposer,
            "restart_allowed": self.allow_restart,
        }

    def context(self, lane: int = 0) -> str:
        """The context pack the engine wrote for the lane's iteration that waits (as the
        `command` proposer's KOPT_PROMPT gets it), under a header saying where to edit and how
        to submit."""
        m, meta = self.moment(lane)
        problem = rules.submit_problem(m)
        head = [f"# kopt run {self.ws.tag}: context for the next candidate", ""]
        if self.lanes > 1:
            head.append(
                f"- your lane: {lane} of the run's {self.lanes} (this MCP session's own; other sessions edit "
                "and submit in theirs)"
            )
        head += [
            f"- edit the candidate in: {self._where(lane, meta)} (a git worktree at BEST; kopt evaluates what it "
            "holds; edit no other worktree)",
            f"- the run's classes: {', '.join(meta.get('classes') or []) or '(none recorded yet)'}",
            "- when the edit is ready: call `submit` with a one-line hypothesis, and a target_class "
            '(or scope "global": every class must improve)',
        ]
        if problem is None and m.version is not None:
            head.append(
                f"- the engine waits for v{m.version}"
                + (f" (correctness repair {m.repair}: fix the candidate the worktree still holds)" if m.repair else "")
            )
        else:
            head.append(f"- NOT READY for edits: {problem}")
        pack = ""
        if m.version is not None:
            for repair in range(m.repair, -1, -1):  # the newest prompt of the iteration
                suffix = f"_repair{repair}" if repair else ""
                t = read_transcript(self.ws, f"logs/v{m.version}/prompt{suffix}.md")
                if not t.error:
                    pack = t.text
                    break
        return (
            "\n".join(head)
            + "\n\n"
            + (pack or "(no context pack written yet: the engine writes it when an iteration waits for a submit)")
            + "\n"
        )

    def history(self, n: int) -> list[dict[str, Any]]:
        records = memory_records(self.ws)[-rules.history_count(n) :]
        out = []
        for r in records:
            view = rules.verdict_view(r)
            out.append(
                {
                    **{
                        k: view[k]
                        for k in (
                            "iteration",
                            "status",
                            "verdict",
                            "reason",
                            "hypothesis",
                            "target_class",
                            "commit",
                            "classes",
                        )
                    },
                    "masked": bool(r.get("masked")),
                    "origin": proposal_origin(r.get("proposal")).text,
                }
            )
        return out

    def _record(self, version: object) -> dict[str, Any]:
        v = rules.parse_version(version)
        try:
            return memory_record(self.ws, v)
        except BadInput as e:
            raise Refused(str(e)) from None

    def profile(self, version: object) -> dict[str, Any]:
        rec = self._record(version)
        ev = profiler_evidence(rec.get("profile"))
        if ev is None:
            return {
                "iteration": rec.get("version"),
                "profiled": False,
                "note": "no profile of best against this candidate (no profiler configured, a CPU target, "
                "or a candidate that never reached the profiler)",
            }
        return {"iteration": rec.get("version"), "profiled": True, **dataclasses.asdict(ev)}

    def diff(self, version: object) -> str:
        rec = self._record(version)
        v = int(rec["version"])
        with RunReader(self.ws) as r:
            text = r.diff(v)
        if not text:
            return f"v{v}: no diff recorded (the baseline, or a candidate stopped before the police read it)"
        data = text.encode()
        if len(data) > rules.DIFF_MAX_BYTES:
            cut = data[: rules.DIFF_MAX_BYTES].decode(errors="ignore")
            return f"{cut}\n[... {len(data) - rules.DIFF_MAX_BYTES} more bytes: logs/v{v}/candidate.diff]\n"
        return text

    # -- commands an engineer may let the agent send ---------------------------------------

    def _allowed(self, tool: str) -> None:
        if not self.allow_restart:
            raise Refused(
                f"{tool} is off: the engineer lets an agent restart or mask with "
                f"`kopt mcp {self.ws.tag} --allow-restart`"
            )

    def restart_from(self, version: object, why: object, source: str) -> str:
        self._allowed("restart_from")
        v = rules.parse_version(version)
        text = rules.one_line(why, "why", rules.WHY_MAX, required=False)
        return self._send("restart", {"version": v, "why": text}, source)

    def mask(self, version: object, source: str) -> str:
        self._allowed("mask")
        v = rules.parse_version(version)
        self._record(v)  # it exists
        return self._send("mask", {"versions": [v]}, source)

    def _send(self, kind: str, args: dict[str, Any], source: str) -> str:
        try:
            return send(self.ws, kind, args, source=source).message
        except BadInput as e:
            raise Refused(str(e)) from None

    # -- the submit ------------------------------------------------------------------------

    def begin_submit(
        self, hypothesis: object, target_class: object, scope: object, source: str, lane: int = 0
    ) -> Submission:
        """Check the lane's moment and candidate, then send the submit for the lane as
        `kopt submit --lane N` does."""
        if not self._submitting[lane].acquire(blocking=False):
            raise Refused(
                "another submit of this server is being evaluated"
                + (f" in lane {lane}" if self.lanes > 1 else "")
                + ": one submit at a time"
            )
        try:
            m, meta = self.moment(lane)
            args = rules.submit_args(hypothesis, target_class, scope, [str(c) for c in meta.get("classes") or []])
            problem = rules.submit_problem(m)
            if problem:
                raise Refused(problem)
            assert m.version is not None
            with RunReader(self.ws) as r:
                it = r.iteration(m.version)
            base = it.best_commit_before if it else None
            if not base:
                raise Refused(f"v{m.version} names no BEST commit yet: ask `status` again in a moment")
            tree = self.worktree(lane, meta)
            if tree is None:
                raise Refused(f"lane {lane}'s worktree is not known yet: ask `status` again in a moment")
            changed = gitops.changed_files(tree, base)  # as the police will read it (a scratch index)
            if not changed and not m.repair:
                raise Refused(
                    f"{m.where}the worktree ({tree}) holds no change against BEST {base[:10]}: edit the "
                    "kernel first (nothing was sent)"
                )
            try:
                sent = send(self.ws, "submit", {**args, "lane": lane}, source=source)
            except BadInput as e:
                raise Refused(str(e)) from None
            self._unanswered[lane] = m.version
            return Submission(m.version, m.repair, sent.command_id, source, changed, lane)
        except BaseException:
            self._submitting[lane].release()
            raise

    def end_submit(self, sub: Submission) -> None:
        self._submitting[sub.lane].release()

    def answered(self, sub: Submission) -> None:
        """The client was given `sub`'s verdict (or its repair request)."""
        if self._unanswered.get(sub.lane) == sub.version:
            del self._unanswered[sub.lane]

    def submits_in_flight(self) -> list[int]:
        """The versions of submits sent whose verdict no client was given (the client went
        away while they were measured): the engine decides and records them all the same."""
        return sorted(self._unanswered.values())

    def observe(self, sub: Submission) -> Observation:
        """One look at the submitted iteration (raises EngineGone when its engine died)."""
        with RunReader(self.ws) as r:
            meta = r.meta()
            it = r.iteration(sub.version)
            taken = sub.command_id is None or all(c.id != sub.command_id for c in r.pending_commands())
            sent = r.store.command(sub.command_id) if sub.command_id is not None else None
        if sent is not None and sent.status == "rejected":
            raise Refused(f"the engine refused the submit: {sent.result}")
        if it is None:
            raise EngineGone(f"v{sub.version} is no longer in the run's records")
        if str(it.status) not in rules.FINAL_WAITS:
            return Observation("done", f"v{sub.version}: {it.status}", memory_record(self.ws, sub.version))
        self._check_alive(meta, sub)
        if it.awaiting_review:
            return Observation("review", rules.review_text(self.ws.tag, sub.version))
        if taken and str(it.phase) == "propose" and it.repair_attempts > sub.repair:
            return Observation(
                "repair",
                f"v{sub.version}: correctness fails; repair {it.repair_attempts}",
                memory_record(self.ws, sub.version),
            )
        return Observation("working", rules.progress_text(sub.version, str(it.phase), meta.get("progress")))

    def _check_alive(self, meta: dict[str, Any], sub: Submission) -> None:
        alive, _ = engine_alive(self.ws)
        age = heartbeat_age(meta)
        if not alive or (age is not None and age > self.heartbeat_stale_s):
            why = "its engine is gone" if not alive else f"its engine has not beaten for {age:.0f} s"
            raise EngineGone(
                f"v{sub.version} did not end: {why} (`kopt status {self.ws.tag}`; "
                f"`{rules.start_line(self.ws.tag)}` resumes the run, closing v{sub.version} as "
                "interrupted)"
            )

    def wait_ready(self, sub: Submission, sleep: Any = time.sleep) -> tuple[bool, str]:
        """After a verdict: wait (up to ready_wait_s) until the engine waits for the next submit
        with cand/ back at BEST, or the run stops. (ready, what to tell the agent)."""
        end = time.monotonic() + self.ready_wait_s
        while True:
            m, meta = self.moment(sub.lane)
            if rules.submit_problem(m) is None and m.version is not None and m.version > sub.version:
                return True, (
                    f"{m.where}the worktree ({self._where(sub.lane, meta)}) is at BEST again; the engine "
                    f"waits for v{m.version}'s submit"
                )
            if not m.alive:
                return False, f"the run stopped ({m.stop_reason or m.state}): no further submit is taken"
            if time.monotonic() >= end:
                return False, (
                    f"the engine has not reached the next submit yet ({m.phase or m.state}): wait until "
                    "`status` says ready_for_edits before editing cand/ (an edit made before is wiped)"
                )
            sleep(self.poll_s)

    def verdict(self, sub: Submission, record: dict[str, Any], kind: str) -> dict[str, Any]:
        """What a submit returns: the verdict, the per-class deltas, the profiler's word, the
        iteration's number, and whether the agent may edit again."""
        view = rules.verdict_view(record)
        ev = profiler_evidence(record.get("profile"))
        view["profiler"] = dataclasses.asdict(ev) if ev is not None else None
        view["seconds"] = round(time.monotonic() - sub.started, 1)
        if kind == "repair":
            rows = record.get("failing_rows") or []
            view.update(
                {
                    "status": "repair",
                    "repair": record.get("repair_attempts"),
                    "failing_rows": rows[:20] if isinstance(rows, list) else [],
                    "next": "correctness fails: cand/ still holds the candidate; fix it and submit again "
                    "(same iteration, same hypothesis)",
                    "ready_for_edits": True,
                }
            )
        return view


FOLDER = "mcp-lanes"


class Seats:
    def __init__(self, workspace: Path, tag: str, lanes: int) -> None:
        self.dir = workspace / FOLDER
        self.tag = tag
        self.lanes = lanes
        self._held: dict[Hashable, tuple[int, int]] = {}
        """session -> (its lane, the open lock file that holds it)."""
        self._lock = threading.Lock()

    def lane(self, session: Hashable) -> int | None:
        """The lane `session` holds (None: none yet)."""
        with self._lock:
            held = self._held.get(session)
        return held[0] if held else None

    def take(self, session: Hashable) -> int:
        """The lane `session` holds, or the first lane no live session holds (Refused: none is free)."""
        with self._lock:
            if session in self._held:
                return self._held[session][0]
            self.dir.mkdir(mode=0o700, exist_ok=True)
            for lane in range(self.lanes):
                fd = os.open(
                    self.dir / f"lane-{lane}.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600
                )
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    os.close(fd)
                    continue
                self._held[session] = (lane, fd)
                return lane
        raise Refused(rules.lanes_taken(self.tag, self.lanes))

    def release(self, session: Hashable) -> None:
        """The session ended: its lane is free for the next one."""
        with self._lock:
            held = self._held.pop(session, None)
        if held is not None:
            os.close(held[1])  # closing the file drops its lock

    def release_all(self) -> None:
        with self._lock:
            sessions = list(self._held)
        for session in sessions:
            self.release(session)
