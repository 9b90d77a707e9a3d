"""Shared by the fake agent CLIs: the kopt side of the contract, the edit, the plan, sessions.

Every fake checks its CLI's argv strictly (argparse, no abbreviations: a wrong flag exits 2
loudly), then checks kopt's environment contract (KOPT_* variables, the working directory
is the candidate worktree), makes a real edit in it, writes the plan, keeps a session in its
config folder under $HOME (the folder the preset names as writable) and prints output in
its CLI's real format. No network, no model.

FAKE_AGENT_MODE: "edit" (default), "noplan", "fail", "commit", "hang", "huge", "outside"
(writes a file outside the worktree), "nochange". FAKE_AGENT_LOG: a file to append one JSON
line per call (argv, cwd, the KOPT_* environment) for the test to read.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import TextIO


class Loud(argparse.ArgumentParser):
    def __init__(self, prog: str) -> None:
        super().__init__(prog=prog, allow_abbrev=False, add_help=False)

    def error(self, message: str) -> None:  # argparse's own exit 2, with the fake named
        die(f"{self.prog}: {message}", 2)


def die(message: str, code: int = 1) -> None:
    sys.stderr.write(f"FAKE AGENT CONTRACT: {message}\n")
    sys.exit(code)


def need(ok: bool, message: str) -> None:
    if not ok:
        die(message)


def kopt_contract() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k.startswith("KOPT_")}
    for key in ("KOPT_ITERATION", "KOPT_REPAIR", "KOPT_PROMPT", "KOPT_PROMPT_JSON", "KOPT_PLAN", "KOPT_USAGE"):
        need(key in env, f"{key} is not set")
    need(Path(env["KOPT_PROMPT"]).is_file(), f"KOPT_PROMPT {env['KOPT_PROMPT']} does not exist")
    need((Path.cwd() / ".git").exists(), f"the working directory {Path.cwd()} is not the candidate worktree")
    return env


def log_call(cli: str, argv: list[str], env: dict[str, str]) -> None:
    path = os.environ.get("FAKE_AGENT_LOG")
    if path:
        with open(path, "a") as f:
            f.write(json.dumps({"cli": cli, "argv": argv, "cwd": str(Path.cwd()), "env": env}) + "\n")


def session(cli_dir: str, resume: str | None, default: str) -> str:
    """The session id: the resumed one (it must exist in the CLI's folder under $HOME), or a
    new one kept there."""
    folder = Path(os.path.expanduser(cli_dir))
    if resume:
        need((folder / f"{resume}.json").is_file(), f"no conversation found with session ID {resume} in {folder}")
        return resume
    folder.mkdir(parents=True, exist_ok=True)
    sid = default
    (folder / f"{sid}.json").write_text(json.dumps({"session": sid, "started": time.time()}))
    return sid


def act(plan_lines: list[str] | None = None) -> str:
    """The agent's work in the worktree per FAKE_AGENT_MODE; returns the mode."""
    mode = os.environ.get("FAKE_AGENT_MODE", "edit")
    if mode == "fail":
        die("the model refused (scripted failure)", 1)
    if mode == "hang":
        time.sleep(600)
    target = Path(os.environ.get("FAKE_AGENT_EDIT", "kernel.py"))
    if mode != "nochange":
        n = os.environ.get("KOPT_ITERATION", "?")
        with open(target, "a") as f:
            f.write(f"# tuned by the fake agent, iteration {n} repair {os.environ.get('KOPT_REPAIR')}\n")
    if mode == "outside":
        Path(os.environ["KOPT_PROMPT"]).parent.joinpath("planted.txt").write_text("x")
    if mode == "commit":
        subprocess.run(["git", "commit", "-qam", "agent commit"], check=False)
    if mode != "noplan":
        lines = plan_lines or [
            os.environ.get("FAKE_AGENT_HYPOTHESIS", "Widen the tile of dclass=wide to raise DRAM throughput"),
            os.environ.get("FAKE_AGENT_SCOPE", "target_class: dclass=wide"),
            "",
            "Evidence: dclass=wide is the slowest class in the brief.",
        ]
        Path(os.environ["KOPT_PLAN"]).write_text("\n".join(lines) + "\n")
    return mode


def emit(lines: list[str], stream: TextIO | None = None) -> None:
    """Print the CLI's output; in "huge" mode with 200k lines of tool noise before the last line."""
    out = stream or sys.stdout
    for line in lines[:-1]:
        out.write(line + "\n")
    if os.environ.get("FAKE_AGENT_MODE") == "huge":
        for i in range(200000):
            out.write(json.dumps({"type": "noise", "i": i, "pad": "x" * 40}) + "\n")
    if lines:
        out.write(lines[-1] + "\n")
    out.flush()
