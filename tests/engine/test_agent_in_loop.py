"""An agent as the proposer, end to end on the fake target: the evidence kopt collects (the
profiler's hottest kernel per class) reaches the agent through the context pack, and what
the agent costs is kept per iteration and added up.

The fake agent (tests/fake_agents/my-agent, FAKE_AGENT_MODE=evidence) makes a real gain only
when the pack's profile names the hot kernel (`fake_kernel_large`: the fake ncu's kernels are
named after their class); without it, it can only guess, and its guess is a slowdown."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from kopt_supervisor.engine.daemon import run_engine
from kopt_supervisor.engine.store import Store
from kopt_supervisor.engine.workspace import Workspace
from kopt_supervisor.kopt_tui.cli import main as kopt
from tests.conftest import FAKE

AGENTS = Path(__file__).resolve().parents[1] / "fake_agents"
NCU_BIN = Path(__file__).resolve().parents[1] / "fake_target" / "bin"
AGENT = (
    '\n[propose]\nkind = "command"\nagent = "generic"\n'
    'command = "my-agent --brief {prompt} --plan {plan}"\ntimeout_s = 20\nwritable = ["@LOG@", "~/.my-agent"]\n'
)


@pytest.fixture
def agent_on_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", f"{AGENTS}:{NCU_BIN}:{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_AGENT_MODE", "evidence")
    (tmp_path / "agent_log").mkdir()
    monkeypatch.setenv("FAKE_AGENT_LOG", str(tmp_path / "agent_log" / "calls.jsonl"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


def run(fake_env, profile: bool) -> Workspace:
    log_dir = str(Path(os.environ["FAKE_AGENT_LOG"]).parent)  # the fake agent's own log: writable to it
    toml = {
        '[propose]\nkind = "command"\ncommand = "'
        + f"{sys.executable} {FAKE / 'proposer.py'}"
        + '"\ntimeout_s = 20\n': AGENT.replace("@LOG@", log_dir)
    }
    extra = '\n[profile]\nkind = "ncu"\n' if profile else '\n[profile]\nkind = "none"\n'
    repo, root = fake_env([], toml_replace=toml, extra_toml=extra)
    assert kopt(["--root", str(root), "init", "--repo", str(repo), "--tag", "a"]) == 0
    ws = Workspace(root, "a")
    assert run_engine(ws, max_iters=2) == 0
    return ws


@pytest.mark.slow
def test_profile_evidence_reaches_the_agent_and_its_gain_is_kept(fake_env, agent_on_path) -> None:
    ws = run(fake_env, profile=True)
    with Store(ws.db_path, readonly=True) as s:
        v1 = s.iteration(1)
    assert v1 is not None and v1.status == "keep", v1.record.get("decision")
    assert v1.target_class == "cls=large" and "fake_kernel_large" in v1.hypothesis
    pack = json.loads(ws.prompt_path(1).with_suffix(".json").read_text())
    assert "fake_kernel_large" in json.dumps(pack["profile"])  # what the agent read
    assert v1.record["plan"]["flags"] == [] and {c["term"] for c in v1.record["plan"]["citations"]} >= {"cls=large"}
    agent = v1.record["proposal"]["agent"]
    assert agent["cost_usd"] == 0.5 and agent["input_tokens"] == 1000 and agent["output_tokens"] == 200


def test_without_profile_evidence_the_same_agent_only_guesses(fake_env, agent_on_path) -> None:
    ws = run(fake_env, profile=False)
    with Store(ws.db_path, readonly=True) as s:
        v1 = s.iteration(1)
    assert v1 is not None and v1.status == "regression" and "uncited" in v1.record["plan"]["flags"]
