"""Presets: the command lines they build, the [propose] keys they need, sessions, writable paths."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kopt_supervisor.engine import BadInput
from kopt_supervisor.engine.config import supports_resume
from kopt_supervisor.engine.propose import agents
from kopt_supervisor.engine.propose.agents import (
    PRESETS,
    AgentCall,
    choose_session,
    command_executable,
    task_message,
    writable_paths,
)

from .helpers import cfg_with

CALL = AgentCall(
    worktree=Path("/ws/cand"),
    prompt=Path("/ws/logs/v3/prompt.md"),
    prompt_json=Path("/ws/logs/v3/prompt.json"),
    plan=Path("/ws/plans/v3_plan.md"),
    agent_dir=Path("/ws/logs/v3/agent"),
    iteration=3,
)


def test_every_preset_names_its_version_docs_and_folders() -> None:
    assert set(PRESETS) == {"claude-code", "codex", "gemini", "aider", "opencode", "generic"}
    for p in PRESETS.values():
        assert p.version and p.docs and p.parse
        for w in p.writable:
            assert w.startswith("~/") and w.count("/") >= 1 and w != "~/"


def test_claude_code_command_line() -> None:
    argv = PRESETS["claude-code"].argv(CALL)
    assert argv[:3] == ["claude", "-p", task_message(CALL)]
    assert argv[argv.index("--output-format") + 1] == "stream-json" and "--verbose" in argv
    assert argv[argv.index("--permission-mode") + 1] == "acceptEdits"
    assert "Bash(git commit:*)" in argv[argv.index("--disallowedTools") + 1]
    assert argv[argv.index("--add-dir") + 1 : argv.index("--add-dir") + 3] == ["/ws/plans", "/ws/logs/v3"]
    assert "--resume" not in argv and "--dangerously-skip-permissions" not in argv
    resumed = PRESETS["claude-code"].argv(AgentCall(**{**CALL.__dict__, "session_id": "abc", "model": "opus"}))
    assert resumed[resumed.index("--resume") + 1] == "abc" and resumed[resumed.index("--model") + 1] == "opus"


def test_codex_puts_exec_options_before_resume_and_the_prompt_last() -> None:
    argv = PRESETS["codex"].argv(AgentCall(**{**CALL.__dict__, "session_id": "th-1", "extra_args": ("-c", "x=1")}))
    assert argv[:3] == ["codex", "exec", "--json"]
    assert argv[argv.index("--sandbox") + 1] == "workspace-write" and argv[argv.index("--cd") + 1] == "/ws/cand"
    assert argv[-3:] == ["resume", "th-1", task_message(CALL)]
    assert argv.index("-c") < argv.index("resume")
    assert "--full-auto" not in argv and "--dangerously-bypass-approvals-and-sandbox" not in argv


def test_gemini_opencode_and_aider_command_lines() -> None:
    g = PRESETS["gemini"].argv(CALL)
    assert g[:3] == ["gemini", "-p", task_message(CALL)] and g[g.index("--output-format") + 1] == "stream-json"
    assert g[g.index("--include-directories") + 1] == "/ws/plans,/ws/logs/v3"
    o = PRESETS["opencode"].argv(AgentCall(**{**CALL.__dict__, "session_id": "ses_9"}))
    assert o[:4] == ["opencode", "run", "--format", "json"] and o[o.index("--session") + 1] == "ses_9"
    assert o[-1] == task_message(CALL)
    env = PRESETS["opencode"].env
    assert env is not None
    perm = json.loads(env(CALL)["OPENCODE_CONFIG_CONTENT"])["permission"]
    assert perm["bash"]["git commit*"] == "deny" and perm["external_directory"]["/ws/plans/*"] == "allow"
    a = PRESETS["aider"].argv(AgentCall(**{**CALL.__dict__, "editable": ("solution/k.py",)}))
    assert a[:3] == ["aider", "--message-file", "/ws/logs/v3/prompt.md"]
    assert "--no-auto-commits" in a and "--no-git" in a
    assert a[-4:] == ["--file", "/ws/plans/v3_plan.md", "--file", "/ws/cand/solution/k.py"]


def test_the_task_message_names_the_pack_the_plan_and_the_repair() -> None:
    msg = task_message(AgentCall(**{**CALL.__dict__, "repair": 2}))
    assert "/ws/logs/v3/prompt.md" in msg and "/ws/plans/v3_plan.md" in msg and "repair 2" in msg
    assert "Do not commit" in msg


def test_generic_has_no_command_line_of_its_own() -> None:
    with pytest.raises(ValueError, match=r"\[propose\].command"):
        PRESETS["generic"].argv(CALL)


def test_writable_paths_follow_the_home_variable_and_add_the_configured_ones() -> None:
    assert writable_paths(PRESETS["codex"], environ={}) == ("~/.codex",)
    assert writable_paths(PRESETS["codex"], ["/scratch/me/cache"], {"CODEX_HOME": "/data/codex"}) == (
        "/data/codex",
        "/scratch/me/cache",
    )
    assert writable_paths(PRESETS["claude-code"], environ={"CLAUDE_CONFIG_DIR": "/c"})[0] == "/c"
    assert writable_paths(PRESETS["generic"], ["~/.my-agent"], {}) == ("~/.my-agent",)


def test_supports_resume() -> None:
    assert supports_resume("claude-code") and supports_resume("codex") and not supports_resume("aider")
    assert not supports_resume("claude-code", "claude -p x")  # a command override without {session}
    assert supports_resume("generic", "my-agent --session {session}") and not supports_resume("generic", "my-agent")
    assert not supports_resume("")


H = [
    {"version": 4, "status": "tie", "proposal": {"agent": {"agent": "codex", "session_id": "S", "session_started": 2}}},
    {"version": 2, "status": "tie"},
    {"version": 3, "status": "regression"},
]


def test_choose_session_continues_an_unbroken_chain() -> None:
    c = choose_session(H, 5, "codex", mode="resume")
    assert (c.session_id, c.started) == ("S", 2)


@pytest.mark.parametrize(
    "history,iteration,agent,why",
    [
        (H, 5, "claude-code", "left no claude-code session"),  # another CLI's session is not ours
        ([h for h in H if h["version"] != 3], 5, "codex", "v3 of the session is masked"),  # v3 masked inside the chain
        (H, 6, "codex", "v5 is masked or not finished"),  # the previous iteration masked
        ([{"version": 4, "status": "fail_propose", "proposal": {"command": "x"}}], 5, "codex", "left no codex session"),
    ],
)
def test_choose_session_starts_fresh_when_the_chain_is_broken(
    history: list, iteration: int, agent: str, why: str
) -> None:
    c = choose_session(history, iteration, agent, mode="resume")
    assert c.session_id is None and c.started == iteration and why in c.why


def test_choose_session_fresh_mode_and_repairs() -> None:
    assert choose_session(H, 5, "codex", mode="fresh").session_id is None
    c = choose_session([], 5, "codex", mode="fresh", repair_session="R", repair_started=5)
    assert (c.session_id, c.started) == ("R", 5)


def test_choose_session_ignores_a_forged_start_after_the_iteration() -> None:
    h = [
        {
            "version": 4,
            "status": "tie",
            "proposal": {"agent": {"agent": "codex", "session_id": "S", "session_started": 99}},
        }
    ]
    c = choose_session(h, 5, "codex", mode="resume")
    assert c.session_id == "S" and c.started == 4


@pytest.mark.parametrize(
    "command,exe",
    [
        ("claude -p x", "claude"),
        ("FOO=1 BAR=2 /opt/bin/agent --x", "/opt/bin/agent"),
        ("cd x && agent", None),
        ("agent | tee log", "agent"),
        ("./run_agent.sh x", None),
        ("$AGENT run", None),
        ("'unterminated", None),
        ("env A=1 agent", None),
    ],
)
def test_command_executable(command: str, exe: str | None) -> None:
    assert command_executable(command) == exe


def test_timeout_defaults_to_the_presets() -> None:
    assert agents.timeout_s(cfg_with('kind = "command"\nagent = "aider"\n')) == 1800
    assert agents.timeout_s(cfg_with('kind = "command"\nagent = "aider"\ntimeout_s = 60\n')) == 60
    assert agents.timeout_s(cfg_with('kind = "command"\ncommand = "x"\n')) == 3600


@pytest.mark.parametrize(
    "propose,needle",
    [
        ('kind = "command"\nagent = "cursor"\n', "[propose].agent must be one of"),
        ('agent = "codex"\n', '[propose].agent needs [propose].kind = "command"'),
        ('kind = "command"\nagent = "generic"\n', '[propose].command is required with [propose].agent = "generic"'),
        ('kind = "command"\n', "[propose].command is required"),
        ('kind = "command"\nagent = "aider"\nsession = "resume"\n', "aider has no session id"),
        ('kind = "command"\ncommand = "x"\nsession = "resume"\n', "{session}"),
        ('kind = "command"\nagent = "codex"\ncommand = "codex exec x"\nsession = "resume"\n', "{session}"),
        ('kind = "command"\nagent = "codex"\nsession = "always"\n', '[propose].session must be "fresh" or "resume"'),
        ('session = "resume"\n', '= "resume" needs an agent'),
        ('kind = "command"\nagent = "codex"\nbudget_usd = 10\n', "OpenAI Codex CLI reports no cost"),
        ('kind = "command"\nagent = "gemini"\nbudget_usd = 10\n', "reports no cost"),
        ("budget_tokens = 1000\n", "[propose].budget_tokens counts agent runs"),
        ('kind = "command"\nagent = "codex"\nbudget_tokens = -1\n', "[propose].budget_tokens must be >= 0"),
        ('kind = "command"\ncommand = "x"\nmodel = "o3"\n', "[propose].model needs an agent preset"),
        ('kind = "command"\nagent = "codex"\ncommand = "x"\nargs = ["-v"]\n', "[propose].args needs an agent preset"),
        ('kind = "command"\nagent = "codex"\nwritable = ["~"]\n', "[propose].writable[0]"),
        ('kind = "command"\nagent = "codex"\nwritable = ["/"]\n', "[propose].writable[0]"),
        ('kind = "command"\nagent = "codex"\nwritable = ["/home"]\n', "too much writable"),
        ('kind = "command"\nagent = "codex"\nwritable = ["~/../etc"]\n', "[propose].writable[0]"),
        ('kind = "command"\nagent = "codex"\nwritable = ["cache"]\n', "absolute path or one under ~/"),
        ('kind = "command"\nagent = "codex"\nwritable = ["/tmp/./x"]\n', "[propose].writable[0]"),
        ('kind = "command"\nagent = "codex"\ntranscript_max_kib = 1\n', "[propose].transcript_max_kib must be >= 16"),
        ('kind = "command"\nagent = "codex"\nprompt_max_kib = 4096\n', "[propose].prompt_max_kib must be between"),
        ('kind = "command"\nagent = "codex"\ntimeout_s = -1\n', "[propose].timeout_s must be >= 0"),
        ('kind = "command"\nagent = "codex"\nsesion = "resume"\n', "did you mean 'session'"),
    ],
)
def test_propose_keys_are_checked_at_load(propose: str, needle: str) -> None:
    with pytest.raises(BadInput) as info:
        cfg_with(propose)
    assert needle in str(info.value) and "\n" not in str(info.value)


def test_valid_agent_configs_load() -> None:
    cfg = cfg_with(
        'kind = "command"\nagent = "claude-code"\nsession = "resume"\nbudget_usd = 20\nmodel = "opus"\n'
        'args = ["--max-turns", "40"]\nwritable = ["~/.cache/triton", "/scratch/u/ccache"]\n'
    )
    assert cfg.propose.agent == "claude-code" and cfg.propose.args == ["--max-turns", "40"]
    cfg = cfg_with(
        'kind = "command"\nagent = "generic"\ncommand = "a --s {session}"\nsession = "resume"\nbudget_usd = 1\n'
    )
    assert cfg.propose.session == "resume"
    from kopt_supervisor.engine.config.toml_io import dumps as dumps_config
    from kopt_supervisor.engine.config.toml_io import loads as loads_config

    assert loads_config(dumps_config(cfg)) == cfg  # the frozen copy round-trips


def test_choose_session_never_hands_back_an_id_that_looks_like_a_flag() -> None:
    h = [
        {
            "version": 4,
            "status": "tie",
            "proposal": {"agent": {"agent": "codex", "session_id": "--dangerously-bypass-approvals-and-sandbox"}},
        }
    ]
    c = choose_session(h, 5, "codex", mode="resume")
    assert c.session_id is None and "not one kopt hands back" in c.why
    assert choose_session([], 5, "codex", mode="fresh", repair_session="-x").session_id is None
