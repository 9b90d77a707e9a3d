"""examples/softmax as a user would bring it: a git repo of its own, onboarded the way
`kopt init --bench "python kopt_bench.py"` does (the bench run once, its table detected, a
kopt.toml proposed), and the kopt.toml of each way the wave runs it:

- "served": the proposal as it is (the public harness's served looks, one process per tree;
  the wave ran on 2026-11-24 with the then proposed one-process A/B looks);
- "process": the same, without `serve` (every round two fresh bench processes);
- "ray": the served proposal with [parallel] lanes = 1, backend = "ray", address = "auto".

In every mode the proposer is the wave's scripted `command` proposer (propose_softmax.py) with
the candidates of a CHANGES file, nobody reviews (review_timeout_s = 0: the policy decides a
borderline at once) and the profiler is off (these parts time decisions; part1 measures the
profiler). Smoke mode (Triton's interpreter) adds the CPU test run's short decisions.
"""

from __future__ import annotations

import copy
import json
import shutil
import sys
from pathlib import Path
from typing import Any

from experiments.h100_wave2.common import HERE, REPO

EXAMPLE = REPO / "examples" / "softmax"
MODES = ("served", "process", "ray")


def make_repo(dest: Path) -> Path:
    """The example copied to `dest` and committed as a repository of its own."""
    from kopt_supervisor.engine import gitops

    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(EXAMPLE, dest, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "results"))
    gitops.init_repo(dest, "softmax: a Triton row softmax, its tests and its bench")
    return dest


def onboard(repo: Path, logs: Path) -> Any:
    """The proposal `kopt init --bench` makes from one run of the harness bench (engine.onboard)."""
    from kopt_supervisor.engine import onboard as ob

    run = ob.run_once(repo, f"{sys.executable} kopt_bench.py", ob.local_run_bench(logs))
    proposal = ob.propose(run)
    if not proposal.complete:
        raise RuntimeError(proposal.error_line())
    return proposal


def install_tools(tools: Path) -> Path:
    """The proposer script where a sandboxed proposer can read it (tools must lie outside
    /tmp, which the sandbox makes private)."""
    tools.mkdir(parents=True, exist_ok=True)
    dest = tools / "propose_softmax.py"
    shutil.copy2(HERE / "propose_softmax.py", dest)
    return dest


def write_changes(path: Path, changes: dict[int, dict[str, Any]]) -> Path:
    path.write_text(json.dumps({str(k): v for k, v in changes.items()}, indent=2) + "\n")
    return path


def config_text(
    proposal: Any,
    mode: str,
    proposer: Path,
    changes: Path,
    *,
    smoke: bool,
    gpu: dict[str, Any] | None = None,
    ray_timeout_s: float = 60.0,
    allow_sleep: bool = False,
    lanes: int = 1,
) -> str:
    """The kopt.toml of `mode` (see the module docstring) from the onboarding's proposal.
    allow_sleep: the candidates include an injected delay (`torch.cuda._sleep`), which the diff
    scan's `clock-time` rule would otherwise send to review: allowed in softmax/kernel.py."""
    if mode not in MODES:
        raise ValueError(f"mode {mode!r}: one of {MODES}")
    p = copy.deepcopy(proposal)
    if allow_sleep:
        p.target["allow_constructs"] = [*p.target.get("allow_constructs", []), "clock-time:softmax/kernel.py"]
    if mode == "process":
        for key in ("serve", "serve_prepare"):
            p.target.pop(key, None)
    decide = {**p.sections.get("decide", {}), "review_timeout_s": 0.0}
    if smoke:  # interpreted looks vary by a few %: the CPU test run's short decisions
        decide |= {"min_rounds": 2, "max_rounds": 3, "max_other_regression_pct": 50.0, "suspicious_speedup": 100.0}
    p.sections["decide"] = decide
    p.sections["profile"] = {**p.sections.get("profile", {}), "kind": "none"}
    p.sections["propose"] = {"kind": "command", "command": f"{sys.executable} {proposer} {changes}", "timeout_s": 120.0}
    if gpu:
        p.sections["gpu"] = {**p.sections.get("gpu", {}), **gpu}
    if mode == "ray":
        p.sections["parallel"] = {"lanes": 1, "backend": "ray", "address": "auto", "connect_timeout_s": ray_timeout_s}
    elif lanes > 1:
        p.sections["parallel"] = {"lanes": lanes}
    text: str = p.text()
    from kopt_supervisor.engine.config.toml_io import loads as loads_config

    loads_config(text, source=f"{mode} kopt.toml")  # loads as it is, or fails here, naming the key
    return text
