"""The proposer interface, the plan file (docs/design.md §10), and the two proposers a person or
an agent drives: `manual` and `command` (the built-in parameter search is engine.propose.tune).

A proposer turns the current best tree into a candidate in `cand/` and writes a plan:
first line the hypothesis, an optional line `target_class: <class>`, an optional line
`scope: global`. The engine reads the plan back with `parse_plan`; it never passes
anything from a plan to a shell. `assess_plan` checks that the plan points at evidence of
the context pack it was written from (engine.propose.context).

The `manual` proposer: the engineer edits `cand/` and tells the engine to evaluate. It waits
for a `submit` command (`kopt submit TAG "hypothesis" [--class C] [--lane N]`, or an agent
through `kopt mcp`), then writes the plan from it. While it waits the run's state says so.
With several lanes ([parallel] lanes, docs/lanes.md) each lane's manual proposer waits for a
submit addressed to its own lane, and evaluates that lane's worktree: a submit names its lane
(`submit_lane`), is never taken by another lane, and one naming a lane the run does not have
is answered "rejected" by the engine (`route_submit`). While a lane waits, the engine says so
in the run's meta (`wait_key(lane)`), where clients read which lanes wait and where each
lane's worktree is.

The `command` proposer: any program (an agent CLI, a script) edits `cand/` (docs/design.md §10).

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
cand/ and the plan, the sandbox should let it write."""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from itertools import chain
from pathlib import Path
from typing import Any, Protocol

from kopt_supervisor.engine import BadInput
from kopt_supervisor.engine.config import Config, supports_resume
from kopt_supervisor.engine.propose import cap_file, parse_usage_object, read_lines
from kopt_supervisor.engine.propose.agents import (
    PRESETS,
    AgentCall,
    AgentPreset,
    choose_session,
    task_message,
)
from kopt_supervisor.engine.propose.agents import timeout_s as agent_timeout_s
from kopt_supervisor.engine.records import AgentRun


@dataclass(frozen=True)
class Plan:
    hypothesis: str
    target_class: str | None = None
    scope: str = "class"
    """"global" (all classes must improve) or "class" (the target class must improve).
    A plan with no target class is global."""
    text: str = ""


def parse_plan(text: str) -> Plan:
    lines = [ln.strip() for ln in text.splitlines()]
    body = [ln for ln in lines if ln]
    hypothesis = ""
    target: str | None = None
    scope: str | None = None
    for ln in body:
        m = re.match(r"(?i)^target_class\s*:\s*(.+)$", ln)
        if m:
            target = m.group(1).strip() or None
            continue
        m = re.match(r"(?i)^scope\s*:\s*(\w+)\s*$", ln)
        if m:
            scope = m.group(1).lower()
            continue
        if not hypothesis:
            hypothesis = ln.lstrip("#").strip()
    if target is None or scope == "global":
        scope, target = "global", None if scope == "global" else target
    return Plan(hypothesis[:500], target, scope or "class", text)


def format_plan(hypothesis: str, target_class: str | None, body: str = "") -> str:
    lines = [hypothesis.strip()]
    lines.append(f"target_class: {target_class}" if target_class else "scope: global")
    if body:
        lines += ["", body.rstrip()]
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class ProposalContext:
    """What a proposer is given for one attempt."""

    iteration: int
    repair: int
    """0, or 1..N during a correctness repair of the same hypothesis."""
    worktree: Path
    workspace: Path
    prompt_path: Path
    plan_path: Path
    log_dir: Path
    config: Config
    best_commit: str
    classes: list[str]
    history: list[dict[str, Any]]
    """Unmasked iteration records (memory/vN.json's fields), oldest first."""
    env: dict[str, str] = field(default_factory=dict)
    run: Callable[..., Any] | None = None
    """The engine's interruptible subprocess runner (`runner.command.run`-like)."""
    wait_for_command: Callable[[set[str], float], Any] | None = None
    """Block until the engineer sends one of these command kinds (manual proposer)."""
    prompt_json_path: Path | None = None
    """The context pack as JSON, beside KOPT_PROMPT (default: prompt_path with .json)."""
    handed_back: dict[str, Any] | None = None
    """With lanes: the change this iteration proposed before, which no longer applies on the
    BEST another lane kept meanwhile ({"from", "onto", "why", "hypothesis", "proposal": its
    details}); propose again on `best_commit` (None: a first proposal)."""


@dataclass(frozen=True)
class Proposal:
    ok: bool
    reason: str = ""
    """Why it failed (timeout, exit code, no change) or a note."""
    details: dict[str, Any] = field(default_factory=dict)
    """Proposer-specific, stored in memory/vN.json `proposal` (the tune point, the command)."""


class Proposer(Protocol):
    kind: str
    # optional: `instant = True` for a proposer that runs inside the engine in a moment (the
    # tune proposer); the loop then keeps a serving bench up across the proposal

    def propose(self, ctx: ProposalContext) -> Proposal:
        """Edit ctx.worktree into a candidate and write ctx.plan_path."""
        ...


# ---------------------------------------------------------------------------------------
# Plans that point at evidence (the context pack's vocabulary)

PLAN_MAX_CHARS = 20000


@dataclass(frozen=True)
class Citation:
    kind: str
    """"class", "kernel" or "metric"."""
    term: str
    """The pack's own name for it (a class key, a kernel name, a metric label)."""
    evidence: str
    """The line of evidence the pack showed for it."""


@dataclass(frozen=True)
class PlanAssessment:
    ok: bool
    """False: a failed proposal (an empty plan, an unknown target class)."""
    plan: Plan
    citations: tuple[Citation, ...] = ()
    flags: tuple[str, ...] = ()
    """"uncited": the plan names no config class, profiled kernel or metric of the pack."""
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "hypothesis": self.plan.hypothesis,
            "target_class": self.plan.target_class,
            "scope": self.plan.scope,
            "flags": list(self.flags),
            "reason": self.reason,
            "citations": [{"kind": c.kind, "term": c.term, "evidence": c.evidence} for c in self.citations],
        }


def _plan_pack(pack_json: Any) -> dict[str, Any]:
    if isinstance(pack_json, str | bytes):
        try:
            pack_json = json.loads(pack_json)
        except ValueError:
            return {}
    return dict(pack_json) if isinstance(pack_json, dict) else {}


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _word(term: str) -> re.Pattern[str]:
    return re.compile(r"(?<![\w])" + re.escape(term) + r"(?![\w])", re.IGNORECASE)


def _class_pattern(key: str) -> re.Pattern[str]:
    """A class key `a=1,b=2` as written in prose: spaces around `=` and after `,` allowed."""
    parts = [re.escape(p.strip()).replace("=", r"\s*=\s*") for p in key.split(",")]
    return re.compile(r"(?<![\w=])" + r",\s*".join(parts) + r"(?![\w])", re.IGNORECASE)


def assess_plan(plan_text: str, pack_json: Any) -> PlanAssessment:
    """Read a plan against the context pack it was written from (its JSON, as text or a
    dict). The first line is the hypothesis: an empty plan fails, so does a target class
    the bench does not have. A plan that cites nothing of the pack (a class key, a kernel
    name from the profile, or a metric the pack showed) is accepted but flagged "uncited".
    The `target_class:`/`scope:` lines do not count as citations: evidence is in the prose.
    Pure."""
    from kopt_supervisor.engine.propose.context_inputs import METRIC_TERMS, kernel_short

    text = (plan_text or "")[:PLAN_MAX_CHARS]
    plan = parse_plan(text)
    if not plan.hypothesis:
        return PlanAssessment(False, plan, reason="the plan is empty (first line: the hypothesis)")
    pack = _plan_pack(pack_json)
    evidence = _dict(pack.get("evidence"))
    classes = _dict(evidence.get("classes"))
    kernels = _dict(evidence.get("kernels"))
    metrics = _dict(evidence.get("metrics"))
    if plan.target_class and classes and plan.target_class not in classes:
        return PlanAssessment(
            False,
            plan,
            reason=f"target_class {plan.target_class!r} is not a class of this bench (classes: {', '.join(classes)})",
        )
    prose = "\n".join(ln for ln in text.splitlines() if not re.match(r"(?i)^\s*(target_class|scope)\s*:", ln))
    cites: list[Citation] = []
    for key, line in classes.items():
        if _class_pattern(str(key)).search(prose):
            cites.append(Citation("class", str(key), str(line)))
    for name, line in kernels.items():
        short = kernel_short(str(name))
        names = {str(name), short} if len(short) >= 4 else {str(name)}
        if any(_word(n).search(prose) for n in names):
            cites.append(Citation("kernel", str(name), str(line)))
    for label, line in metrics.items():
        terms = METRIC_TERMS.get(str(label))
        if terms is not None:
            hit = any(_word(t).search(prose) for t in terms)
        else:  # the bench's own metric column: a short name counts in backticks or after a number
            hit = bool(
                re.search(r"`" + re.escape(str(label)) + r"`", prose)
                or re.search(r"\d\s*" + re.escape(str(label)) + r"(?![\w])", prose)
                or len(str(label)) >= 4
                and _word(str(label)).search(prose)
            )
        if hit:
            cites.append(Citation("metric", str(label), str(line)))
    if not cites:
        why = (
            "the plan names no config class, profiled kernel or metric from the context pack"
            if pack
            else "no context pack to check the plan against"
        )
        return PlanAssessment(True, plan, (), ("uncited",), why)
    return PlanAssessment(True, plan, tuple(cites))


WAIT_KEY_PREFIX = "submit_wait:"


def wait_key(lane: int) -> str:
    """The meta key where lane `lane`'s manual proposer says whether it waits for a submit: a
    dict with `lane`, `worktree` (absolute), `waiting`, `version`, `repair` and the engine's
    `pid` (a wait published by an engine that is gone is no wait)."""
    return f"{WAIT_KEY_PREFIX}{lane}"


def lanes_text(lanes: int) -> str:
    return f"{lanes} lane{'s' if lanes != 1 else ''}: {', '.join(str(i) for i in range(lanes))}"


def submit_lane(args: Mapping[str, Any], lanes: int) -> int | None:
    """The lane a submit is addressed to: its `lane` argument; none named, lane 0 on a run of
    one lane and None on a run of several (it must name one). BadInput for a lane the run does
    not have."""
    lane = args.get("lane")
    if lane is None:
        return 0 if lanes == 1 else None
    if isinstance(lane, bool) or not isinstance(lane, int) or not 0 <= lane < lanes:
        shown = repr(lane) if len(repr(lane)) <= 20 else f"{repr(lane)[:20]}..."
        raise BadInput(f"no lane {shown} (the run has {lanes_text(lanes)})")
    return lane


def route_submit(lanes: int, mine: int) -> Callable[[Mapping[str, Any]], bool | str]:
    """The filter of lane `mine`'s wait (engine/loop/control.py `Control.wait_for`): True for a
    submit addressed to this lane, False for another lane's (left for it), and the rejection's
    text for a submit no lane of the run can take."""

    def route(args: Mapping[str, Any]) -> bool | str:
        try:
            lane = submit_lane(args, lanes)
        except BadInput as e:
            return str(e)
        if lane is None:
            return f"the submit names no lane (the run has {lanes_text(lanes)}): send it with --lane N"
        return lane == mine

    return route


class ManualProposer:
    kind = "manual"

    def propose(self, ctx: ProposalContext) -> Proposal:
        assert ctx.wait_for_command is not None, "the engine passes its command wait"
        cmd = ctx.wait_for_command({"submit"}, float("inf"))
        hypothesis = str(cmd.args.get("hypothesis") or "").strip() or "manual change"
        target = cmd.args.get("target_class") or None
        if ctx.repair and not cmd.args.get("hypothesis"):
            hypothesis = "repair"
        ctx.plan_path.parent.mkdir(parents=True, exist_ok=True)
        ctx.plan_path.write_text(format_plan(hypothesis, target, str(cmd.args.get("notes") or "")))
        return Proposal(True, "", {"submitted_by": cmd.source})


# The `command` proposer

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
