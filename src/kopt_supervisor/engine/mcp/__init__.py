"""`kopt mcp TAG`: kopt as the judge an interactive agent works through (docs/agents.md, "kopt
as an MCP judge"). The agent drives and kopt judges: an MCP server whose tools read the run and
submit the agent's edits in cand/ to the run's `manual` proposer, a client of the run like the
CLI (through `engine.api`), so what an agent submits goes through the same police,
confinement, statistics and review as any candidate. This module holds the tools' rules (pure,
below); `mcp.judge` the run as the tools see it, and `Seats`: the lane each session holds;
`mcp.server` the MCP server: tools, stdio and streamable HTTP.

The rules of `kopt mcp`'s tools, pure: what an argument may be, when a submit may be sent,
and the words of its progress and verdict.

An MCP caller is an agent with a shell: every argument is checked for its type and size, and
text that reaches a plan file is one printable line (the plan's own `target_class:` and
`scope:` lines are kopt's to write, never smuggled in through a hypothesis).

What an MCP caller is refused (`Refused`, `EngineGone`), as one line it can act on. The server
turns each into an MCP tool error; nothing of the run's state has changed when one is raised.

`kopt mcp TAG --print-config CLIENT` (`snippet`): the snippet each MCP client's documentation
asks for (pure text), pasted as it is (or redirected into the file); where it goes and what
else to know goes beside it, as `where`. A submit returns only when its verdict is in, which
takes minutes on a real kernel: each snippet raises the client's tool timeout where the client
has one in its config.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


class Refused(Exception):
    """Bad arguments, or a call the run cannot take now (another submit measuring, no change
    in cand/, no engine, restarts not allowed): nothing was sent to the run."""


class EngineGone(Exception):
    """The run's engine died (or stopped beating) while a submit waited for its verdict."""


HYPOTHESIS_MAX = 500
"""Characters of a hypothesis (the plan keeps as many)."""
WHY_MAX = 500
HISTORY_MAX = 50
VERSION_MAX = 10_000_000
DIFF_MAX_BYTES = 200_000
"""What the `diff` tool returns of a candidate's patch (the rest is named, not sent)."""

FINAL_WAITS = ("running", "borderline")
"""Statuses of an iteration that has not ended."""


def parse_version(value: object, what: str = "version") -> int:
    """An iteration as an agent may write it: 3, "3" or "v3"."""
    if isinstance(value, bool):
        raise Refused(f"{what} must be an iteration (vN or N), not {value!r}")
    if isinstance(value, int):
        n = value
    elif isinstance(value, str) and len(value) <= 12:
        text = value.strip().lower().removeprefix("v")
        if not (text.isascii() and text.isdigit()):
            raise Refused(f"{what} must be an iteration (vN or N): got {value!r}")
        n = int(text)
    else:
        shown = repr(value) if len(repr(value)) <= 40 else f"{repr(value)[:40]}..."
        raise Refused(f"{what} must be an iteration (vN or N): got {shown}")
    if not 0 <= n <= VERSION_MAX:
        raise Refused(f"{what} {n} is out of range (0..{VERSION_MAX})")
    return n


def history_count(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= HISTORY_MAX:
        raise Refused(f"n must be a whole number from 1 to {HISTORY_MAX}: got {value!r:.40}")
    return value


def one_line(value: object, what: str, limit: int, *, required: bool = True) -> str:
    """Text that may reach a plan or a record: one printable line of at most `limit` characters."""
    if value is None and not required:
        return ""
    if not isinstance(value, str):
        raise Refused(f"{what} must be text: got {type(value).__name__}")
    text = value.strip()
    if required and not text:
        raise Refused(f"{what} is empty: say in one sentence what should get faster and why")
    if len(text) > limit:
        raise Refused(f"{what} is {len(text)} characters long: at most {limit}")
    if not text.isprintable():  # newlines (and U+2028, U+0085, ...) would add lines to the plan
        raise Refused(f"{what} must be one line of printable text (no newlines or control characters)")
    return text


def submit_args(hypothesis: object, target_class: object, scope: object, classes: Sequence[str]) -> dict[str, Any]:
    """The submit command's arguments, as `kopt submit TAG HYPOTHESIS [--class C]` sends them.
    `scope` "class" needs a target class of the run; "global" (all classes must improve)
    takes none; left out, it follows from whether a target class is named."""
    text = one_line(hypothesis, "hypothesis", HYPOTHESIS_MAX)
    if scope is not None and scope not in ("class", "global"):
        raise Refused(f'scope must be "class" or "global": got {scope!r:.40}')
    target = one_line(target_class, "target_class", 200, required=False) or None
    if scope == "global" and target is not None:
        raise Refused('scope "global" takes no target_class (every class must improve); leave one out')
    if scope == "class" and target is None:
        raise Refused(f'scope "class" needs a target_class, one of: {", ".join(classes) or "(none recorded yet)"}')
    if target is not None and target not in classes:
        raise Refused(
            f"target_class {target!r} is not a class of this run; its classes: "
            f"{', '.join(classes) or '(none recorded yet)'}"
        )
    return {"hypothesis": text, "target_class": target, "notes": ""}


# ---------------------------------------------------------------------------------------
# When a submit may be sent


@dataclass(frozen=True)
class RunMoment:
    """What the run is doing, as a submit needs to know it (read by the judge)."""

    tag: str
    alive: bool
    proposer: str | None
    """The running engine's proposer (meta `proposer`); None when unknown."""
    lanes: int
    state: str
    version: int | None = None
    """The lane's newest iteration."""
    status: str | None = None
    phase: str | None = None
    repair: int = 0
    pending_submit: str | None = None
    """The source of a submit for this lane sent and not yet taken by the engine."""
    stop_reason: str | None = None
    lane: int = 0
    """The lane the moment is of (the session's, on a run of several lanes)."""
    waiting: bool = True
    """The running engine said the lane's manual proposer waits for a submit (its worktree
    named: engine/propose/proposer.py `wait_key`)."""

    @property
    def where(self) -> str:
        """ "lane N: " on a run of several lanes (what each refusal starts with), else ""."""
        return f"lane {self.lane}: " if self.lanes > 1 else ""


def start_line(tag: str) -> str:
    return f"kopt run {tag} --headless --proposer manual"


def serve_problem(tag: str, alive: bool, proposer: str | None) -> str | None:
    """Why `kopt mcp TAG` cannot serve this run at all (None: it can)."""
    if alive and proposer not in (None, "manual"):
        return (
            f"run {tag}'s engine uses the {proposer!r} proposer: an MCP agent submits to the manual one; "
            f"stop it (`kopt stop {tag}`) and start `{start_line(tag)}`"
        )
    return None


def submit_problem(m: RunMoment) -> str | None:
    """Why a submit cannot be sent now (None: the engine waits for one in the moment's lane)."""
    problem = serve_problem(m.tag, m.alive, m.proposer)
    if problem:
        return problem
    if not m.alive:
        why = f" ({m.stop_reason})" if m.stop_reason else ""
        return f"no engine runs run {m.tag}{why}: start `{start_line(m.tag)}`, then submit"
    if m.proposer is None:
        return f"run {m.tag}'s engine is starting: ask `status` again in a moment"
    at = m.where
    if m.pending_submit is not None:
        return f"{at}a submit is already waiting for the engine (from {m.pending_submit}): one submit at a time"
    if m.status not in FINAL_WAITS or m.version is None:
        return f"{at}run {m.tag} is between iterations: ask `status` until ready_for_edits is true"
    if m.status == "borderline":
        return (
            f"{at}v{m.version} awaits the engineer's review: one submit at a time (kopt accept/reject {m.tag} "
            f"v{m.version})"
        )
    if m.phase != "propose":
        return f"{at}v{m.version} is being evaluated ({m.phase}): one submit at a time; its submit returns its verdict"
    if not m.waiting:
        return f"{at}the engine is about to wait for v{m.version}'s submit: ask `status` again in a moment"
    return None


def ready_for_edits(m: RunMoment) -> bool:
    """cand/ is at BEST (or holds the candidate a repair fixes) and the engine waits for a
    submit: edits made now are the ones evaluated (an edit made between iterations is wiped
    when the next one puts cand/ back at BEST)."""
    return submit_problem(m) is None


# ---------------------------------------------------------------------------------------
# What a waiting submit tells the agent

PHASE_WORDS = {
    "gate": "waiting for an idle GPU",
    "propose": "handing the submit to the engine",
    "police": "policing the candidate (plan, both trees, protected files, diff scan)",
    "measure": "measuring best against the candidate",
    "evidence": "checking the evidence (profiler, roofline, fresh processes)",
    "review": "awaiting the engineer's review",
    "keep": "formatting the kept tree and measuring it again",
    "commit": "committing the keep",
    "advance": "moving BEST to the new commit",
    "discard": "discarding the candidate",
    "done": "done",
}


def progress_text(version: int, phase: str | None, progress: Mapping[str, Any] | None) -> str:
    """One progress line: the phase in words, then the engine's live step for this iteration."""
    words = PHASE_WORDS.get(str(phase), str(phase or "working"))
    step = ""
    if phase == "propose":  # the engine's step there is the manual proposer's "waiting for `kopt submit`"
        return f"v{version}: {words}"
    if isinstance(progress, Mapping) and progress.get("version") == version and progress.get("step"):
        step = str(progress["step"])[:200]
        done, total = progress.get("done"), progress.get("total")
        if isinstance(done, int) and isinstance(total, int) and total > 0:
            step += f" ({done}/{total})"
    return f"v{version}: {words}" + (f": {step}" if step and step != words else "")


def review_text(tag: str, version: int) -> str:
    return (
        f"v{version} awaits the engineer's review (TUI, or `kopt accept {tag} v{version}` / "
        f"`kopt reject {tag} v{version}`); this submit keeps waiting for the answer"
    )


def review_missed(tag: str, version: int, said_review: bool, verdict: Mapping[str, Any]) -> str | None:
    """The review line a submit's progress never carried (the engineer answered between two of
    its looks), for an iteration the engineer decided: the agent learns that its verdict is a
    person's, not the statistics'. None when the review was said or none took place."""
    if said_review or verdict.get("decided_by") != "engineer":
        return None
    return f"v{version} went to the engineer's review ({tag}); the engineer's answer: {verdict.get('status')}"


def _pct(ratio: Any) -> float | None:
    return round((float(ratio) - 1.0) * 100.0, 3) if _num(ratio) else None


def _num(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def class_deltas(classes: Any) -> dict[str, dict[str, Any]]:
    """Per class: the candidate's change against best in percent (negative: less of the
    metric), its interval, the class verdict and the rounds it took."""
    out: dict[str, dict[str, Any]] = {}
    if not isinstance(classes, Mapping):
        return out
    for cls, c in classes.items():
        if not isinstance(c, Mapping):
            continue
        lo, hi = _pct(c.get("lo")), _pct(c.get("hi"))
        out[str(cls)] = {
            "delta_pct": _pct(c.get("ratio")),
            "interval_pct": [lo, hi] if lo is not None else None,
            "verdict": c.get("verdict"),
            "rounds": c.get("rounds"),
            "best": c.get("best") if _num(c.get("best")) else None,
            "candidate": c.get("cand") if _num(c.get("cand")) else None,
        }
    return out


def verdict_view(record: Mapping[str, Any]) -> dict[str, Any]:
    """What a submit returns of its iteration's record (memory/vN.json)."""
    dec = record.get("decision") if isinstance(record.get("decision"), Mapping) else {}
    assert isinstance(dec, Mapping)
    return {
        "iteration": record.get("version"),
        "status": record.get("status"),
        "verdict": dec.get("verdict"),
        "reason": dec.get("reason"),
        "decided_by": dec.get("by"),
        "flags": list(dec.get("flags") or []),
        "hypothesis": record.get("hypothesis"),
        "target_class": record.get("target_class"),
        "scope": record.get("scope"),
        "changed_files": list(record.get("changed_files") or []),
        "commit": record.get("commit"),
        "classes": class_deltas(record.get("classes")),
    }


# ---------------------------------------------------------------------------------------
# Lanes: each MCP session its own


def lanes_taken(tag: str, lanes: int) -> str:
    return (
        f"run {tag} has {lanes} lanes and every one is held by another live MCP session (kopt mcp gives each "
        "session a lane of its own): end one of those sessions to free its lane"
    )


def no_session(tag: str, lanes: int) -> str:
    return (
        f"run {tag} has {lanes} lanes and kopt mcp gives each MCP session a lane of its own, but this request "
        "belongs to no session (protocol 2026-07-28 has none over HTTP): connect with the initialize handshake "
        "(protocol 2025-11-25, which the server answers with an Mcp-Session-Id), or over stdio"
    )


CLIENTS = ("claude-code", "codex", "cursor", "gemini")
TOOL_TIMEOUT_S = 3600
"""The tool timeout the snippets ask for: a submit waits for measurement and any review."""


@dataclass(frozen=True)
class Snippet:
    text: str
    """What to paste (valid JSON or TOML on its own)."""
    where: str
    """Where it goes, and how else to add it."""


def server_name(tag: str) -> str:
    return f"kopt-{tag}"


def _toml_str(s: str) -> str:
    return json.dumps(s)  # a JSON string is a valid TOML basic string


def snippet(client: str, tag: str, command: str, args: list[str]) -> Snippet:
    """The config for `client` that starts `command args` (kopt mcp TAG ...) over stdio."""
    name = server_name(tag)
    if client == "codex":
        text = (
            "\n".join(
                [
                    f"[mcp_servers.{name}]",
                    f"command = {_toml_str(command)}",
                    f"args = [{', '.join(_toml_str(a) for a in args)}]",
                    "startup_timeout_sec = 30",
                    f"tool_timeout_sec = {TOOL_TIMEOUT_S}",
                ]
            )
            + "\n"
        )
        return Snippet(
            text,
            "append to ~/.codex/config.toml (or .codex/config.toml of a trusted project); "
            f"or: codex mcp add {name} -- {command} {' '.join(args)}",
        )
    server: dict[str, object] = {"command": command, "args": args}
    if client == "claude-code":
        where = (
            ".mcp.json at the project's root (or: claude mcp add --scope project "
            f"{name} -- {command} {' '.join(args)}); a submit waits minutes: start claude with "
            f"MCP_TOOL_TIMEOUT={TOOL_TIMEOUT_S * 1000}"
        )
    elif client == "cursor":
        where = ".cursor/mcp.json in the project (or ~/.cursor/mcp.json for every project)"
    elif client == "gemini":
        server.update({"timeout": TOOL_TIMEOUT_S * 1000, "trust": False})
        where = (
            f".gemini/settings.json in the project (or ~/.gemini/settings.json); or: gemini mcp add {name} "
            f"{command} {' '.join(args)}"
        )
    else:
        raise ValueError(f"unknown MCP client {client!r}: one of {', '.join(CLIENTS)}")
    return Snippet(json.dumps({"mcpServers": {name: server}}, indent=2) + "\n", where)
