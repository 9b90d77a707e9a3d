"""The `command` proposer: any program (an agent CLI, a script) edits `cand/` (docs/design.md §10).

The configured command runs with the working directory `cand/`, the KOPT_* variables, and
its placeholders ({prompt}, {prompt_json}, {plan}, {worktree}, {agent_dir}, {session},
{message}) filled with shell-quoted values. Exit 0 means the candidate is ready; anything
else, or a timeout, is a failed proposal.

With an agent preset (`[propose].agent`, engine.propose.agents) the preset builds the
command line (an argv, no shell) unless `[propose].command` replaces it, and after the run
the CLI's output is parsed into an `AgentRun` (cost, tokens, session id, wall time) that
goes into `Proposal.details["agent"]`; the transcript (the run's stdout and stderr in
logs/vN/) is cut to `[propose].transcript_max_kib`. A plain command or the "generic"
agent may report its usage by writing JSON to the file named by $KOPT_USAGE. The agent's
own folder is logs/vN/agent/ ($KOPT_AGENT_DIR): the one place of the workspace, besides
cand/ and the plan, the sandbox should let it write.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence
from dataclasses import replace
from itertools import chain
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kopt_supervisor.engine.config.sections import supports_resume
from kopt_supervisor.engine.propose.agent_parsers import parse_usage_object
from kopt_supervisor.engine.propose.agents import (
    PRESETS,
    AgentCall,
    AgentPreset,
    choose_session,
    task_message,
)
from kopt_supervisor.engine.propose.agents import timeout_s as agent_timeout_s
from kopt_supervisor.engine.propose.costs import AgentRun, cap_file, read_lines
from kopt_supervisor.engine.propose.proposer import Proposal, ProposalContext

if TYPE_CHECKING:
    from kopt_supervisor.engine.config.sections import Config

USAGE_MAX_BYTES = 64 * 1024


def prompt_json_path(ctx: ProposalContext) -> Path:
    return ctx.prompt_json_path or ctx.prompt_path.with_suffix(".json")


def agent_dir(ctx: ProposalContext) -> Path:
    return ctx.log_dir / "agent"


def fill_placeholders(template: str, ctx: ProposalContext, extra: dict[str, str] | None = None) -> str:
    values: dict[str, Any] = {
        "{prompt}": ctx.prompt_path,
        "{prompt_json}": prompt_json_path(ctx),
        "{plan}": ctx.plan_path,
        "{worktree}": ctx.worktree,
        "{agent_dir}": agent_dir(ctx),
        **(extra or {}),
    }
    out = template
    for k, v in values.items():
        out = out.replace(k, shlex.quote(str(v)))
    return out


def editable_sources(pack_json: Path) -> tuple[str, ...]:
    """The kernel sources the context pack lists as editable (for CLIs that must be handed
    the files to edit by name)."""
    try:
        pack = json.loads(pack_json.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return ()
    files = (pack.get("target") or {}).get("sources") or [] if isinstance(pack, dict) else []
    return tuple(
        str(f["path"])
        for f in files
        if isinstance(f, dict)
        and f.get("editable")
        and isinstance(f.get("path"), str)
        and not Path(f["path"]).is_absolute()
        and ".." not in Path(f["path"]).parts
    )


class CommandProposer:
    kind = "command"

    def __init__(
        self,
        command: str,
        timeout_s: float,
        *,
        agent: str = "",
        model: str = "",
        args: Sequence[str] = (),
        session: str = "fresh",
        transcript_max_kib: int = 4096,
    ) -> None:
        self.command = command
        self.timeout_s = timeout_s
        self.agent = agent
        self.preset: AgentPreset | None = PRESETS[agent] if agent else None
        self.model = model
        self.args = tuple(args)
        self.session = session
        self.transcript_max_bytes = int(transcript_max_kib) * 1024
        self._sessions: dict[int, tuple[str, int]] = {}
        """iteration -> (session id, iteration that started it): a repair continues it."""

    @classmethod
    def from_config(cls, cfg: Config) -> CommandProposer:
        p = cfg.propose
        return cls(
            p.command,
            agent_timeout_s(cfg),
            agent=p.agent,
            model=p.model,
            args=p.args,
            session=p.session,
            transcript_max_kib=p.transcript_max_kib,
        )

    def propose(self, ctx: ProposalContext) -> Proposal:
        assert ctx.run is not None, "the engine passes its runner"
        resumable = self.preset is not None and supports_resume(self.agent, self.command) or "{session}" in self.command
        mine = self._sessions.get(ctx.iteration) if ctx.repair and resumable else None
        choice = choose_session(
            ctx.history,
            ctx.iteration,
            self.agent or "command",
            mode=self.session if resumable else "fresh",
            repair_session=mine[0] if mine else None,
            repair_started=mine[1] if mine else None,
        )
        pack_json = prompt_json_path(ctx)
        own = agent_dir(ctx)
        own.mkdir(parents=True, exist_ok=True)
        call = AgentCall(
            worktree=ctx.worktree,
            prompt=ctx.prompt_path,
            prompt_json=pack_json,
            plan=ctx.plan_path,
            agent_dir=own,
            iteration=ctx.iteration,
            repair=ctx.repair,
            session_id=choice.session_id,
            model=self.model,
            extra_args=self.args,
            editable=editable_sources(pack_json) if self.agent == "aider" else (),
        )
        suffix = f"_repair{ctx.repair}" if ctx.repair else ""
        usage_path = own / f"usage{suffix}.json"
        env = {
            **ctx.env,
            "KOPT_PROMPT_JSON": str(pack_json),
            "KOPT_USAGE": str(usage_path),
            "KOPT_SESSION": choice.session_id or "",
            "KOPT_AGENT_DIR": str(own),
        }
        if self.preset is not None and self.preset.env is not None:
            env.update(self.preset.env(call))
        cmd: str | list[str]
        if self.command.strip():
            cmd = fill_placeholders(
                self.command, ctx, {"{session}": choice.session_id or "", "{message}": task_message(call)}
            )
            shown = cmd
        else:
            assert self.preset is not None, "config validation requires a command or an agent"
            cmd = self.preset.argv(call)
            shown = shlex.join(cmd)
        try:
            usage_path.unlink()
        except OSError:
            pass
        name = f"proposer{suffix}"
        result = ctx.run(cmd, cwd=ctx.worktree, name=name, timeout_s=self.timeout_s, env=env)
        run = self._agent_run(result, ctx, usage_path, choice.session_id, choice.started)
        if run.session_id:
            self._sessions[ctx.iteration] = (run.session_id, choice.started)
        details: dict[str, Any] = {
            "command": shown,
            "exit": result.returncode,
            "seconds": round(result.duration_s, 1),
            "agent": run.to_dict(),
        }
        if choice.why:
            details["session"] = choice.why
        if not result.ok:
            if result.start_error and self.preset is not None and not self.command.strip():
                why = (
                    f'`{self.preset.executable}` could not start ([propose].agent = "{self.agent}"): '
                    f"{result.start_error}"
                )
                return Proposal(False, f"proposer {why}", details)
            tail = result.tail(3)
            return Proposal(False, f"proposer {result.why()}" + (f": {tail.splitlines()[-1]}" if tail else ""), details)
        return Proposal(True, "", details)

    def _agent_run(
        self, result: Any, ctx: ProposalContext, usage_path: Path, resumed: str | None, started: int
    ) -> AgentRun:
        """Parse the transcript, then cut it to size; the usage file of a plain or generic
        command (never of a preset: a CLI's own report is what counts)."""
        out_path, err_path = Path(result.stdout_path), Path(result.stderr_path)
        if self.preset is not None:  # streamed: a transcript of any size parses in bounded memory
            lines = read_lines(out_path)
            run = self.preset.parse(chain(lines, read_lines(err_path)) if self.preset.parses_stderr else lines)
        else:
            run = AgentRun(agent="command")
        if self.preset is None or self.agent == "generic":
            reported = _read_usage(usage_path)
            if reported is not None:
                run = replace(reported, notes=(*reported.notes, f"reported in {usage_path.name}"))
        out_size, out_cut = cap_file(out_path, self.transcript_max_bytes)
        _, err_cut = cap_file(err_path, self.transcript_max_bytes)
        try:
            shown = str(out_path.relative_to(ctx.workspace))
        except ValueError:
            shown = str(out_path)
        return replace(
            run,
            agent=self.agent or "command",
            session_id=run.session_id or resumed,
            session_started=started if (run.session_id or resumed) else None,
            resumed=bool(resumed),
            model=run.model or self.model or None,
            wall_s=round(result.duration_s, 3),
            exit=result.returncode,
            transcript_path=shown,
            transcript_bytes=out_size,
            transcript_cut=out_cut or err_cut,
        )


def _read_usage(path: Path) -> AgentRun | None:
    try:
        with open(path, "rb") as f:
            data = f.read(USAGE_MAX_BYTES + 1)
    except OSError:
        return None
    if len(data) > USAGE_MAX_BYTES:
        return AgentRun(notes=(f"{path.name} is over {USAGE_MAX_BYTES} bytes: ignored",))
    try:
        obj = json.loads(data.decode("utf-8", "replace"))
    except ValueError:
        return AgentRun(notes=(f"{path.name} is not JSON: ignored",))
    if not isinstance(obj, dict):
        return AgentRun(notes=(f"{path.name} is not a JSON object: ignored",))
    return parse_usage_object(obj, agent="command")
