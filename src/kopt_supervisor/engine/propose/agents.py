"""Agent presets: the command line, permissions, writable folders and output parser of each
agent CLI kernel engineers use (docs/design.md §14; docs/agents.md).

`[propose] agent = "claude-code" | "codex" | "gemini" | "aider" | "opencode" | "generic"`
picks a preset. A preset builds the argv of the CLI's non-interactive mode from an
`AgentCall` (no shell: every path is one argv item), with:

- edits allowed inside the candidate worktree (`cand/`, the working directory) and the plan's
  folder only, no commits (kopt commits keeps; a proposer's own commits are rejected);
- its machine-readable output mode, parsed by `engine.propose` (its parsers) into an `AgentRun`;
- the folders the sandbox must leave writable for the CLI's own config, sessions and caches
  (`writable_paths`, `~` allowed; `engine.sandbox`'s `Confinement.writable` takes them);
- how to continue a session (`[propose] session = "resume"`), where the CLI can.

`[propose].command`, when set, replaces the preset's argv (the preset still names the
executable to check, the parser and the writable folders). `check_agent(cfg)` is the
one-line error `kopt init` and `kopt doctor` print when the CLI is not installed.

Pure, except `check_agent` (looks at PATH).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kopt_supervisor.engine.config import AGENT_NAMES, KINDS, AgentKind
from kopt_supervisor.engine.propose import (
    Parser,
    parse_aider,
    parse_claude,
    parse_codex,
    parse_gemini,
    parse_generic,
    parse_opencode,
    valid_session_id,
)

if TYPE_CHECKING:
    from kopt_supervisor.engine.config import Config

DEFAULT_TIMEOUT_S = 3600.0


@dataclass(frozen=True)
class AgentCall:
    """Everything a preset needs to build one command line."""

    worktree: Path
    """cand/: the working directory, the only tree the agent may edit."""
    prompt: Path
    """KOPT_PROMPT: the context pack (markdown)."""
    prompt_json: Path
    plan: Path
    """KOPT_PLAN: where the agent writes its plan."""
    agent_dir: Path
    """logs/vN/agent/: the one folder of the workspace the agent may write besides cand/ and
    the plan (its own history files, $KOPT_USAGE). The pack and the transcripts in logs/vN/
    stay read-only to it, so it cannot forge the output kopt parses."""
    iteration: int
    repair: int = 0
    session_id: str | None = None
    """Continue this session; None starts a fresh one."""
    model: str = ""
    extra_args: tuple[str, ...] = ()
    editable: tuple[str, ...] = ()
    """Files (relative to the worktree) a CLI must be handed by name to edit them (aider)."""


def task_message(call: AgentCall) -> str:
    """The instruction given on the command line: the context pack is a file (it can be
    larger than an argv item may be), so the message says where it is and what to do."""
    what = (
        f"correctness repair {call.repair} of iteration v{call.iteration}"
        if call.repair
        else f"iteration v{call.iteration}"
    )
    return (
        f"You are the proposer of kopt {what}, optimizing a GPU kernel. Your brief, with the rules kopt "
        f"enforces and the evidence (profile, roofline, per-class history), is the file {call.prompt} "
        f"(the same data as JSON: {call.prompt_json}). Read all of it first and follow it: make one "
        f"bottleneck-driven change in this directory ({call.worktree}), then write your plan to "
        f"{call.plan} (first line: the hypothesis; then `target_class: <class>` or `scope: global`; then "
        f"the evidence from the brief it rests on). Do not commit and do not edit anything outside this "
        f"directory and the plan."
    )


@dataclass(frozen=True)
class AgentPreset:
    name: str
    executable: str
    """The program that must be on PATH."""
    argv: Callable[[AgentCall], list[str]]
    parse: Parser
    writable: tuple[str, ...]
    """Config, session and cache folders (and files) the CLI writes; `~` is the home."""
    home_env: str = ""
    """An environment variable that moves the CLI's config folder; when set, its value
    replaces the first writable path."""
    env: Callable[[AgentCall], dict[str, str]] | None = None
    parses_stderr: bool = False
    """The usage lines are on stderr as well as stdout (both are parsed)."""
    timeout_s: float = DEFAULT_TIMEOUT_S
    version: str = ""
    """The CLI version this preset was written against."""
    docs: tuple[str, ...] = ()
    install: str = ""

    @property
    def kind(self) -> AgentKind:
        """Its title, session and cost support (engine.config.KINDS)."""
        return KINDS[self.name]

    @property
    def title(self) -> str:
        return self.kind.title

    @property
    def reports_cost(self) -> bool:
        return self.kind.reports_cost


def _model(call: AgentCall, flag: str = "--model") -> list[str]:
    return [flag, call.model] if call.model else []


# -- Claude Code ------------------------------------------------------------------------

CLAUDE_TOOLS = "Read,Edit,MultiEdit,Write,Glob,Grep,Bash,TodoWrite"
CLAUDE_DENIED = (
    "Bash(git commit:*),Bash(git push:*),Bash(git reset:*),Bash(git checkout:*),"
    "Bash(git rebase:*),Bash(git stash:*),Bash(git config:*),WebFetch,WebSearch"
)


def claude_argv(call: AgentCall) -> list[str]:
    out = [
        "claude",
        "-p",
        task_message(call),
        "--output-format",
        "stream-json",
        "--verbose",
        "--permission-mode",
        "acceptEdits",
        "--allowedTools",
        CLAUDE_TOOLS,
        "--disallowedTools",
        CLAUDE_DENIED,
        "--add-dir",
        str(call.plan.parent),
        str(call.prompt.parent),
    ]
    out += _model(call)
    if call.session_id:
        out += ["--resume", call.session_id]
    return out + list(call.extra_args)


# -- Codex CLI --------------------------------------------------------------------------


def codex_argv(call: AgentCall) -> list[str]:
    out = [
        "codex",
        "exec",
        "--json",
        "--sandbox",
        "workspace-write",
        "--skip-git-repo-check",
        "--cd",
        str(call.worktree),
        "--add-dir",
        str(call.plan.parent),
    ]
    out += _model(call) + list(call.extra_args)
    if call.session_id:  # exec's options come before the subcommand (docs/exec.md)
        out += ["resume", call.session_id]
    return out + [task_message(call)]


# -- Gemini CLI -------------------------------------------------------------------------


def gemini_argv(call: AgentCall) -> list[str]:
    out = [
        "gemini",
        "-p",
        task_message(call),
        "--output-format",
        "stream-json",
        "--approval-mode",
        "yolo",
        "--include-directories",
        f"{call.plan.parent},{call.prompt.parent}",
    ]
    out += _model(call)
    if call.session_id:
        out += ["--resume", call.session_id]
    return out + list(call.extra_args)


# -- aider ------------------------------------------------------------------------------

AIDER_EDITABLE_MAX = 40


def aider_argv(call: AgentCall) -> list[str]:
    # the whole pack is the message; --no-git: aider never commits, never touches .gitignore,
    # and keeps its history files in logs/vN/agent/ instead of the worktree
    out = [
        "aider",
        "--message-file",
        str(call.prompt),
        "--yes-always",
        "--no-git",
        "--no-auto-commits",
        "--no-dirty-commits",
        "--no-check-update",
        "--no-show-model-warnings",
        "--no-pretty",
        "--no-stream",
        "--analytics-disable",
        "--map-tokens",
        "0",
        "--chat-history-file",
        str(call.agent_dir / "aider.chat.history.md"),
        "--input-history-file",
        str(call.agent_dir / "aider.input.history"),
    ]
    out += _model(call) + list(call.extra_args)
    out += ["--file", str(call.plan)]
    for rel in call.editable[:AIDER_EDITABLE_MAX]:
        out += ["--file", str(call.worktree / rel)]
    return out


# -- opencode ---------------------------------------------------------------------------


def opencode_permissions(call: AgentCall) -> dict[str, Any]:
    """opencode's permission config: everything inside the worktree, the plan's and the
    pack's folders; no git commits, no web (the last matching rule wins)."""
    return {
        "*": "allow",
        "webfetch": "deny",
        "websearch": "deny",
        "bash": {
            "*": "allow",
            "git commit*": "deny",
            "git push*": "deny",
            "git reset*": "deny",
            "git checkout*": "deny",
            "git rebase*": "deny",
            "git stash*": "deny",
            "git config*": "deny",
        },
        "external_directory": {"*": "deny", f"{call.plan.parent}/*": "allow", f"{call.prompt.parent}/*": "allow"},
    }


def opencode_env(call: AgentCall) -> dict[str, str]:
    return {"OPENCODE_CONFIG_CONTENT": json.dumps({"permission": opencode_permissions(call)})}


def opencode_argv(call: AgentCall) -> list[str]:
    out = ["opencode", "run", "--format", "json"]
    out += _model(call)
    if call.session_id:
        out += ["--session", call.session_id]
    return out + list(call.extra_args) + [task_message(call)]


# -- generic ----------------------------------------------------------------------------


def generic_argv(call: AgentCall) -> list[str]:
    raise ValueError('the "generic" agent has no command line of its own: set [propose].command')


PRESETS: dict[str, AgentPreset] = {
    p.name: p
    for p in (
        AgentPreset(
            name="claude-code",
            executable="claude",
            argv=claude_argv,
            parse=parse_claude,
            writable=("~/.claude", "~/.claude.json", "~/.claude.json.backup", "~/.cache/claude-cli-nodejs"),
            home_env="CLAUDE_CONFIG_DIR",
            version="Claude Code 2.1.x (2026)",
            docs=("https://code.claude.com/docs/en/headless", "https://code.claude.com/docs/en/cli-reference"),
            install="npm install -g @anthropic-ai/claude-code",
        ),
        AgentPreset(
            name="codex",
            executable="codex",
            argv=codex_argv,
            parse=parse_codex,
            writable=("~/.codex",),
            home_env="CODEX_HOME",
            version="codex-cli 0.114+ (docs of 2026-04)",
            docs=(
                "https://developers.openai.com/codex/noninteractive",
                "https://developers.openai.com/codex/cli/reference",
                "https://github.com/openai/codex/blob/main/docs/exec.md",
            ),
            install="npm install -g @openai/codex",
        ),
        AgentPreset(
            name="gemini",
            executable="gemini",
            argv=gemini_argv,
            parse=parse_gemini,
            writable=("~/.gemini",),
            version="Gemini CLI 0.2x (headless.md and output/types.ts of 2026)",
            docs=(
                "https://geminicli.com/docs/cli/headless/",
                "https://github.com/google-gemini/gemini-cli/blob/main/docs/cli/cli-reference.md",
                "https://github.com/google-gemini/gemini-cli/blob/main/packages/core/src/output/types.ts",
            ),
            install="npm install -g @google/gemini-cli",
        ),
        AgentPreset(
            name="aider",
            executable="aider",
            argv=aider_argv,
            parse=parse_aider,
            writable=("~/.aider",),
            parses_stderr=True,
            timeout_s=1800.0,
            version="aider 0.86 (base_coder.py usage report)",
            docs=(
                "https://aider.chat/docs/scripting.html",
                "https://aider.chat/docs/config/options.html",
                "https://github.com/Aider-AI/aider/blob/main/aider/coders/base_coder.py",
            ),
            install="python -m pip install aider-install && aider-install",
        ),
        AgentPreset(
            name="opencode",
            executable="opencode",
            argv=opencode_argv,
            parse=parse_opencode,
            writable=("~/.local/share/opencode", "~/.config/opencode", "~/.cache/opencode", "~/.local/state/opencode"),
            env=opencode_env,
            version="opencode 1.x (run --format json)",
            docs=("https://opencode.ai/docs/cli/", "https://opencode.ai/docs/permissions/"),
            install="npm install -g opencode-ai",
        ),
        AgentPreset(
            name="generic",
            executable="",
            argv=generic_argv,
            parse=parse_generic,
            writable=(),
            version="kopt's own contract ($KOPT_USAGE, or a JSON line)",
            docs=("docs/agents.md",),
        ),
    )
}

assert tuple(PRESETS) == AGENT_NAMES, "engine.config.AGENT_NAMES names every preset, in order"


def preset(name: str) -> AgentPreset:
    try:
        return PRESETS[name]
    except KeyError:
        raise ValueError(f"unknown agent {name!r} (known: {', '.join(AGENT_NAMES)})") from None


def writable_paths(
    p: AgentPreset, extra: Sequence[str] = (), environ: Mapping[str, str] | None = None
) -> tuple[str, ...]:
    """The folders and files the sandbox leaves writable for this CLI (besides cand/, the
    plan and logs/vN/agent/): the preset's, with the config folder an environment variable moved
    (CLAUDE_CONFIG_DIR, CODEX_HOME), then [propose].writable."""
    environ = os.environ if environ is None else environ
    paths = list(p.writable)
    if p.home_env and environ.get(p.home_env) and paths:
        paths[0] = environ[p.home_env]
    out: list[str] = []
    for path in [*paths, *extra]:
        if path not in out:
            out.append(path)
    return tuple(out)


def timeout_s(cfg: Config) -> float:
    """[propose].timeout_s, or (0) the preset's."""
    p = cfg.propose
    if p.timeout_s > 0:
        return p.timeout_s
    return PRESETS[p.agent].timeout_s if p.agent else DEFAULT_TIMEOUT_S


# ---------------------------------------------------------------------------------------
# Sessions


@dataclass(frozen=True)
class SessionChoice:
    session_id: str | None
    started: int
    """The iteration that started the session this run continues (its own, when fresh)."""
    why: str = ""


def choose_session(
    history: Sequence[Mapping[str, Any]],
    iteration: int,
    agent: str,
    *,
    mode: str,
    repair_session: str | None = None,
    repair_started: int | None = None,
) -> SessionChoice:
    """Which session the agent continues.

    A repair continues its own iteration's session (same hypothesis), in either mode, when
    the CLI can. With `session = "resume"` an iteration continues the session of the
    iteration before it, as long as every iteration since that session started is unmasked:
    `history` holds the unmasked iterations (memory/vN.json fields), so a version missing
    between the session's start and this iteration was masked and its conversation must not
    influence this one: a fresh session starts. Pure."""
    if repair_session and valid_session_id(repair_session):
        return SessionChoice(
            repair_session,
            repair_started if repair_started is not None else iteration,
            "the repair continues this iteration's session",
        )
    if mode != "resume":
        return SessionChoice(None, iteration, "")
    by_version = {int(h["version"]): h for h in history if isinstance(h.get("version"), int)}
    prev = by_version.get(iteration - 1)
    if prev is None:
        return SessionChoice(None, iteration, f"v{iteration - 1} is masked or not finished: a fresh session")
    run = _last_agent_run(prev)
    if not run or not run.get("session_id") or run.get("agent") != agent:
        return SessionChoice(None, iteration, f"v{iteration - 1} left no {agent} session: a fresh session")
    if not valid_session_id(run["session_id"]):
        return SessionChoice(
            None, iteration, f"v{iteration - 1}'s session id is not one kopt hands back: a fresh session"
        )
    started = run.get("session_started")
    started = started if isinstance(started, int) and started <= iteration - 1 else iteration - 1
    missing = [v for v in range(started, iteration) if v not in by_version]
    if missing:
        return SessionChoice(None, iteration, f"v{missing[0]} of the session is masked: a fresh session")
    return SessionChoice(str(run["session_id"]), started, f"continues the session of v{started}")


def _last_agent_run(record: Mapping[str, Any]) -> dict[str, Any] | None:
    details = [record.get("proposal"), *(record.get("repairs") or [])]
    runs = [d["agent"] for d in details if isinstance(d, Mapping) and isinstance(d.get("agent"), dict)]
    return runs[-1] if runs else None


# ---------------------------------------------------------------------------------------
# Installation check (kopt init, kopt doctor)

_SHELL_WORDS = {
    "cd",
    "exec",
    "env",
    "time",
    "nice",
    "nohup",
    "source",
    ".",
    "eval",
    "if",
    "for",
    "while",
    "case",
    "{",
    "(",
    "!",
}


def command_executable(command: str) -> str | None:
    """The program a shell command line starts, when that is plain to see (None otherwise)."""
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    for w in words:
        if "=" in w and not w.startswith(("/", ".")) and w.split("=", 1)[0].isidentifier():
            continue  # VAR=value before the program
        if w in _SHELL_WORDS or any(c in w for c in "|&;<>()$`{}*?"):
            return None
        if "/" in w and not w.startswith("/"):
            return None  # relative to cand/, where it runs: not kopt's to find
        return w
    return None


@dataclass(frozen=True)
class AgentSetup:
    agent: str
    executable: str | None
    found: str | None
    writable: tuple[str, ...] = field(default_factory=tuple)


def agent_setup(cfg: Config, environ: Mapping[str, str] | None = None) -> AgentSetup | None:
    """The agent kopt will start for this config, the program it needs and where it is."""
    p = cfg.propose
    if p.kind != "command":
        return None
    environ = os.environ if environ is None else environ
    exe = command_executable(p.command) if p.command.strip() else (PRESETS[p.agent].executable if p.agent else None)
    found = shutil.which(exe, path=environ.get("PATH")) if exe else None
    pre = PRESETS.get(p.agent)
    return AgentSetup(
        p.agent or "command", exe, found, writable_paths(pre, p.writable, environ) if pre else tuple(p.writable)
    )


def check_agent(cfg: Config, environ: Mapping[str, str] | None = None) -> str | None:
    """None when the proposer's program is on PATH, else a one-line error for `kopt init`
    and `kopt doctor` (a missing CLI must not wait for iteration 1 to be found)."""
    setup = agent_setup(cfg, environ)
    if setup is None or setup.executable is None or setup.found:
        return None
    p = cfg.propose
    if p.agent and not p.command.strip():
        pre = PRESETS[p.agent]
        how = f" (install: {pre.install})" if pre.install else ""
        return (
            f'[propose].agent = "{p.agent}": `{pre.executable}` is not on PATH{how}; '
            f"or set [propose].command to the program's full path"
        )
    return f"[propose].command: `{setup.executable}` is not on PATH (the proposer could not start)"
