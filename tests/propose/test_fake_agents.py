"""Each preset against a fake of its CLI on PATH (tests/fake_agents): the fake checks the argv
and environment contract, edits cand/, writes the plan and prints its CLI's real output
format; kopt must parse cost, tokens and the session id from it. No real API is called."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from kopt_supervisor.engine.loop import make_proposer
from kopt_supervisor.engine.propose.agents import PRESETS, check_agent, writable_paths
from kopt_supervisor.engine.propose.proposer import assess_plan
from kopt_supervisor.engine.records import spent

from .helpers import agents_path, cfg_with, git, history, make_ctx, make_repo

# what each fake prints, in kopt's token semantics (input includes the cached prompt tokens)
EXPECTED = {
    "claude-code": dict(
        cost_usd=0.0421,
        input_tokens=12 + 2400 + 30000,
        output_tokens=850,
        cache_read_tokens=30000,
        cache_write_tokens=2400,
        turns=3,
    ),
    "codex": dict(cost_usd=None, input_tokens=24763, output_tokens=122, cache_read_tokens=24448, turns=1),
    "gemini": dict(cost_usd=None, input_tokens=20000, output_tokens=500, cache_read_tokens=15000),
    "aider": dict(
        cost_usd=0.04,
        input_tokens=2600 + 12000 + 8100,
        output_tokens=219 + 540,
        cache_read_tokens=8100,
        cache_write_tokens=1300,
        turns=2,
    ),
    "opencode": dict(
        cost_usd=pytest.approx(0.02),
        input_tokens=5000 + 12000 + 800 + 700 + 17000,
        output_tokens=300 + 100 + 200,
        cache_read_tokens=29000,
        cache_write_tokens=800,
        turns=2,
    ),
}
SESSION_DIR = {
    "claude-code": "~/.claude/projects/fake",
    "codex": "~/.codex/sessions",
    "gemini": "~/.gemini/tmp/chats",
    "opencode": "~/.local/share/opencode/storage/session",
}


@pytest.fixture
def agent_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("PATH", agents_path())
    monkeypatch.setenv("FAKE_AGENT_LOG", str(tmp_path / "calls.jsonl"))
    for var in ("FAKE_AGENT_MODE", "CLAUDE_CONFIG_DIR", "CODEX_HOME"):
        monkeypatch.delenv(var, raising=False)
    return tmp_path


def calls(tmp: Path) -> list[dict]:
    path = tmp / "calls.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


@pytest.mark.parametrize("agent", list(EXPECTED))
def test_preset_runs_its_cli_and_reads_cost_tokens_and_session(agent_env: Path, agent: str) -> None:
    cfg = cfg_with(f'kind = "command"\nagent = "{agent}"\n')
    assert check_agent(cfg) is None
    ctx = make_ctx(agent_env, cfg)
    proposal = make_proposer(cfg).propose(ctx)
    err = (ctx.log_dir / "proposer.err").read_text()
    assert proposal.ok, (proposal.reason, err)
    assert "FAKE AGENT CONTRACT" not in err
    run = proposal.details["agent"]
    for key, value in EXPECTED[agent].items():
        assert run[key] == value, (key, run)
    assert run["agent"] == agent and run["exit"] == 0 and run["wall_s"] > 0
    assert run["transcript_path"] == "logs/v6/proposer.out" and not run["transcript_cut"]
    if agent in SESSION_DIR:  # a real session id, kept where the preset says the CLI writes
        assert run["session_id"] and run["session_started"] == 6 and not run["resumed"]
        folder = Path(os.path.expanduser(SESSION_DIR[agent]))
        assert (folder / f"{run['session_id']}.json").is_file()
        allowed = [Path(os.path.expanduser(p)) for p in writable_paths(PRESETS[agent])]
        assert any(folder.is_relative_to(a) for a in allowed), (folder, allowed)
    else:
        assert run["session_id"] is None
    # a real edit in cand/, uncommitted, and the plan; the plan cites the pack's evidence
    assert "tuned by the fake agent, iteration 6" in (ctx.worktree / "kernel.py").read_text()
    assert git(ctx.worktree, "status", "--porcelain") == "M kernel.py"
    assert git(ctx.worktree, "rev-list", "--count", "HEAD") == "1"
    a = assess_plan(ctx.plan_path.read_text(), json.loads(ctx.prompt_path.with_suffix(".json").read_text()))
    assert a.ok and not a.flags and a.plan.target_class == "dclass=wide"
    assert {c.term for c in a.citations} >= {"dclass=wide"}
    # the proposer's record adds up
    totals = spent([(6, {"proposal": proposal.details})])
    assert totals.runs == 1 and totals.input_tokens == EXPECTED[agent]["input_tokens"]


def test_aider_is_handed_the_pack_and_the_editable_sources_but_not_the_protected_bench(agent_env: Path) -> None:
    cfg = cfg_with('kind = "command"\nagent = "aider"\n')
    ctx = make_ctx(agent_env, cfg)
    assert make_proposer(cfg).propose(ctx).ok
    argv = calls(agent_env)[-1]["argv"]
    files = [argv[i + 1] for i, a in enumerate(argv) if a == "--file"]
    assert str(ctx.worktree / "kernel.py") in files and str(ctx.plan_path) in files
    assert not any(f.endswith("bench.py") for f in files)
    assert not list(ctx.worktree.glob(".aider*"))  # its history files live in logs/vN/agent/
    assert argv[argv.index("--chat-history-file") + 1] == str(ctx.log_dir / "agent" / "aider.chat.history.md")


@pytest.mark.parametrize("agent", ["claude-code", "codex", "gemini", "opencode"])
def test_resume_continues_the_previous_iterations_session(agent_env: Path, agent: str) -> None:
    cfg = cfg_with(f'kind = "command"\nagent = "{agent}"\nsession = "resume"\n')
    first = make_proposer(cfg).propose(make_ctx(agent_env, cfg, iteration=6))
    assert first.ok
    sid = first.details["agent"]["session_id"]
    hist = [{"version": 5, "status": "regression"}, {"version": 6, "status": "tie", "proposal": first.details}]
    second = make_proposer(cfg).propose(make_ctx(agent_env, cfg, iteration=7, hist=hist))
    err = (agent_env / "ws" / "logs" / "v7" / "proposer.err").read_text()
    assert second.ok, (second.reason, err)
    run = second.details["agent"]
    assert run["session_id"] == sid and run["resumed"] and run["session_started"] == 6
    assert sid in calls(agent_env)[-1]["argv"]
    assert calls(agent_env)[-1]["env"]["KOPT_SESSION"] == sid


def test_resume_after_a_masked_iteration_starts_fresh(agent_env: Path) -> None:
    cfg = cfg_with('kind = "command"\nagent = "claude-code"\nsession = "resume"\n')
    first = make_proposer(cfg).propose(make_ctx(agent_env, cfg, iteration=6))
    # v7 continued v6's session and was then masked: history (unmasked only) lacks it
    hist = [{"version": 6, "status": "tie", "proposal": first.details}]
    second = make_proposer(cfg).propose(make_ctx(agent_env, cfg, iteration=8, hist=hist))
    assert second.ok
    assert not second.details["agent"]["resumed"] and second.details["agent"]["session_started"] == 8
    assert "--resume" not in calls(agent_env)[-1]["argv"]
    assert "masked" in second.details["session"]


def test_a_repair_continues_its_iterations_session_even_when_fresh(agent_env: Path) -> None:
    cfg = cfg_with('kind = "command"\nagent = "codex"\n')
    proposer = make_proposer(cfg)
    first = proposer.propose(make_ctx(agent_env, cfg, iteration=6))
    repair = proposer.propose(make_ctx(agent_env, cfg, iteration=6, repair=1))
    assert repair.ok, repair.reason
    assert repair.details["agent"]["session_id"] == first.details["agent"]["session_id"]
    assert calls(agent_env)[-1]["argv"][-3] == "resume"
    assert (agent_env / "ws" / "logs" / "v6" / "proposer_repair1.out").is_file()


def test_generic_agent_reports_through_kopt_usage_and_fills_session(agent_env: Path) -> None:
    cmd = "my-agent --brief {prompt} --plan {plan} --session {session}"
    cfg = cfg_with(f'kind = "command"\nagent = "generic"\ncommand = "{cmd}"\nsession = "resume"\n')
    first = make_proposer(cfg).propose(make_ctx(agent_env, cfg))
    assert first.ok, (first.reason, (agent_env / "ws/logs/v6/proposer.err").read_text())
    run = first.details["agent"]
    assert (run["cost_usd"], run["input_tokens"], run["output_tokens"], run["session_id"]) == (0.5, 1000, 200, "g-6-0")
    hist = [{"version": 6, "status": "tie", "proposal": first.details}]
    second = make_proposer(cfg).propose(make_ctx(agent_env, cfg, iteration=7, hist=hist))
    assert second.ok and second.details["agent"]["session_id"] == "g-6-0" and second.details["agent"]["resumed"]


def test_generic_agent_may_print_its_usage_as_a_json_line(agent_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_AGENT_USAGE", "stdout")
    cfg = cfg_with('kind = "command"\nagent = "generic"\ncommand = "my-agent --brief {prompt} --plan {plan}"\n')
    p = make_proposer(cfg).propose(make_ctx(agent_env, cfg))
    assert p.ok and p.details["agent"]["cost_usd"] == 0.5


def test_a_preset_ignores_a_usage_file_the_agent_writes_to_lie_about_its_cost(
    agent_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = cfg_with(
        'kind = "command"\nagent = "claude-code"\ncommand = "claude -p \\"$KOPT_PROMPT $KOPT_PLAN\\" '
        "--output-format stream-json --verbose --permission-mode acceptEdits "
        "--disallowedTools 'Bash(git commit:*),Bash(git push:*)' --add-dir \\\"$(dirname $KOPT_PLAN)\\\" "
        '&& echo \'{\\"cost_usd\\": 0}\' > \\"$KOPT_USAGE\\""\n'
    )
    p = make_proposer(cfg).propose(make_ctx(agent_env, cfg))
    assert p.ok, (p.reason, (agent_env / "ws/logs/v6/proposer.err").read_text())
    assert p.details["agent"]["cost_usd"] == 0.0421  # the CLI's report, not the file


def test_plain_command_keeps_working_and_records_wall_time(agent_env: Path) -> None:
    cfg = cfg_with('kind = "command"\ncommand = "echo hi >> kernel.py && echo plan > {plan}"\n')
    ctx = make_ctx(agent_env, cfg)
    p = make_proposer(cfg).propose(ctx)
    assert p.ok and p.details["exit"] == 0 and "echo hi" in p.details["command"]
    run = p.details["agent"]
    assert run["agent"] == "command" and run["cost_usd"] is None and run["wall_s"] is not None
    assert ctx.plan_path.read_text() == "plan\n"


@pytest.mark.parametrize("mode,why", [("fail", "exit code 1"), ("hang", "timed out")])
def test_a_failing_or_hanging_agent_is_a_failed_proposal_with_its_usage_kept(
    agent_env: Path, monkeypatch: pytest.MonkeyPatch, mode: str, why: str
) -> None:
    monkeypatch.setenv("FAKE_AGENT_MODE", mode)
    cfg = cfg_with('kind = "command"\nagent = "claude-code"\ntimeout_s = 2\n')
    p = make_proposer(cfg).propose(make_ctx(agent_env, cfg))
    assert not p.ok and why in p.reason
    assert p.details["agent"]["cost_usd"] is None and p.details["agent"]["notes"]


def test_a_wrong_flag_fails_loudly(agent_env: Path) -> None:
    cfg = cfg_with('kind = "command"\nagent = "codex"\nargs = ["--yolo"]\n')
    p = make_proposer(cfg).propose(make_ctx(agent_env, cfg))
    assert not p.ok and "exit code 2" in p.reason and "--yolo" in p.reason


def test_a_huge_transcript_is_cut_after_its_usage_is_read(agent_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_AGENT_MODE", "huge")
    cfg = cfg_with('kind = "command"\nagent = "claude-code"\ntranscript_max_kib = 64\n')
    ctx = make_ctx(agent_env, cfg)
    p = make_proposer(cfg).propose(ctx)
    assert p.ok, p.reason
    run = p.details["agent"]
    assert run["cost_usd"] == 0.0421 and run["transcript_cut"] and run["transcript_bytes"] > 10 * 2**20
    out = (ctx.log_dir / "proposer.out").read_bytes()
    assert len(out) < 70 * 1024 and b"kopt cut" in out and out.rstrip().endswith(b"}")


def test_missing_executable_is_one_clear_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "nothing-here"))
    for agent in ("claude-code", "codex", "gemini", "aider", "opencode"):
        msg = check_agent(cfg_with(f'kind = "command"\nagent = "{agent}"\n'))
        exe = PRESETS[agent].executable
        assert msg is not None and "\n" not in msg and f"`{exe}` is not on PATH" in msg and agent in msg
    msg = check_agent(cfg_with('kind = "command"\ncommand = "my-agent --brief {prompt}"\n'))
    assert msg == "[propose].command: `my-agent` is not on PATH (the proposer could not start)"
    assert check_agent(cfg_with('kind = "command"\ncommand = "cd sub && my-agent"\n')) is None  # not plain: no guess
    assert check_agent(cfg_with("")) is None  # the manual proposer needs nothing


def test_missing_executable_at_iteration_time_names_the_agent(agent_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = cfg_with('kind = "command"\nagent = "gemini"\n')
    ctx = make_ctx(agent_env, cfg)
    monkeypatch.setenv("PATH", str(agent_env / "empty"))
    p = make_proposer(cfg).propose(ctx)
    assert not p.ok and "`gemini` could not start" in p.reason and '"gemini"' in p.reason


def _fake_profile() -> dict:
    k = [
        {"name": "fake_kernel_wide", "calls": 3, "total_ns": 30000.0, "avg_ns": 10000.0, "target": True},
        {"name": "fake_kernel_narrow", "calls": 3, "total_ns": 6000.0, "avg_ns": 2000.0, "target": True},
    ]
    return {
        "tool": "ncu",
        "kernel_regex": "fake",
        "calls": 3,
        "anchor": "fake_kernel_wide",
        "target_total_ns": 36000.0,
        "target_per_call_ns": 12000.0,
        "hottest": "fake_kernel_wide",
        "launches": 6,
        "kernels": k,
    }


@pytest.mark.parametrize("with_profile", [True, False])
def test_the_evidence_agent_gains_only_when_the_pack_says_where(
    agent_env: Path, monkeypatch: pytest.MonkeyPatch, with_profile: bool
) -> None:
    monkeypatch.setenv("FAKE_AGENT_MODE", "evidence")
    cfg = cfg_with('kind = "command"\nagent = "generic"\ncommand = "my-agent --brief {prompt} --plan {plan}"\n')
    cand = agent_env / "ws" / "cand"
    make_repo(cand)
    (cand / "kernel.json").write_text('{"speed": {"narrow": 1.0, "wide": 1.0}}')
    git(cand, "add", "-A")
    git(cand, "commit", "-qm", "kernel.json")
    ctx = make_ctx(agent_env, cfg, its=history(_fake_profile() if with_profile else None))
    p = make_proposer(cfg).propose(ctx)
    assert p.ok, p.reason
    speed = json.loads((cand / "kernel.json").read_text())["speed"]
    pack = json.loads(ctx.prompt_path.with_suffix(".json").read_text())
    a = assess_plan(ctx.plan_path.read_text(), pack)
    if with_profile:
        assert speed == {"narrow": 1.0, "wide": pytest.approx(0.9)} and a.plan.target_class == "dclass=wide"
        assert {("kernel", "fake_kernel_wide"), ("class", "dclass=wide")} <= {(c.kind, c.term) for c in a.citations}
    else:
        assert speed["narrow"] == pytest.approx(1.05) and a.flags == ("uncited",)


def test_the_agent_gets_its_own_folder_and_the_usage_file_lives_there(agent_env: Path) -> None:
    cfg = cfg_with('kind = "command"\nagent = "generic"\ncommand = "my-agent --brief {prompt} --plan {plan}"\n')
    ctx = make_ctx(agent_env, cfg)
    assert make_proposer(cfg).propose(ctx).ok
    env = calls(agent_env)[-1]["env"]
    assert env["KOPT_AGENT_DIR"] == str(ctx.log_dir / "agent")
    assert env["KOPT_USAGE"] == str(ctx.log_dir / "agent" / "usage.json")
    assert (ctx.log_dir / "agent" / "usage.json").is_file()
