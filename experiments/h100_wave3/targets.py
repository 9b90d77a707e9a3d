"""The RMSNorm target the wave's scripted runs measure: the bundled kernel materialized as a repo
of its own (kernels.catalog, the tuned params.json unless told otherwise), and its kopt.toml:
the catalog's own (the served harness the catalog proposes, [profile] kind auto, the bundled
decision settings) with the scripted `command` proposer instead of `tune`, nobody reviewing
(review_timeout_s = 0: the policy decides a borderline at once), no repairs, and the stop rules
out of the way of a counted run.

The softmax example (examples/softmax, onboarded as `kopt init --bench` does) is the second
wave's experiments/h100_wave2/softmax_target.py.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

from experiments.h100_wave3 import candidates

HERE = Path(__file__).resolve().parent
KERNEL = "rmsnorm"


def rms_repo(dest: Path, *, cpu: bool, params: dict[str, Any] | None = None, naive: bool = False) -> Path:
    """The bundled RMSNorm as a committed repo in `dest` (created empty): the tuned params.json
    (naive: the demo's start), or `params` as given."""
    from kopt_supervisor.engine import gitops
    from kopt_supervisor.kernels import catalog

    dest.mkdir(parents=True)
    catalog.materialize(KERNEL, dest, naive=naive, cpu=cpu, review_timeout_s=0.0, profile=True)
    if params is not None:
        (dest / candidates.PARAMS).write_text(json.dumps(params, indent=2) + "\n", encoding="utf-8")
    gitops.init_repo(dest, f"{KERNEL}: bundled kernel for the third H100 wave")
    return dest


def install_proposer(tools: Path) -> Path:
    """The scripted proposer where a sandboxed proposer can read it (outside /tmp, which the
    sandbox makes private)."""
    tools.mkdir(parents=True, exist_ok=True)
    dest = tools / "propose_scripted.py"
    dest.write_text((HERE / "propose_scripted.py").read_text(encoding="utf-8"), encoding="utf-8")
    return dest


def write_plan(path: Path, plan: dict[str, dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(plan, indent=1) + "\n", encoding="utf-8")
    return path


def rms_config(
    repo: Path,
    proposer: Path,
    plan: Path,
    *,
    profile: bool,
    allow: list[str] | None = None,
    process: bool = False,
    pooled: bool = True,
) -> str:
    """The kopt.toml of a scripted run on `repo` (see the module docstring); it loads as it is,
    or this fails naming the key. `process`: without the catalog's `serve` (the bench runs once
    per tree per round, ABBA; a keep is confirmed by a re-decision in fresh processes).
    `pooled`: [decide].pooled_noise (on by default; docs/decision.md, "The run's spread")."""
    from kopt_supervisor.engine.config.toml_io import dumps
    from kopt_supervisor.engine.config.toml_io import loads as loads_config

    cfg = loads_config((repo / "kopt.toml").read_text(encoding="utf-8"), source=str(repo / "kopt.toml"))
    target = dataclasses.replace(cfg.target, allow_constructs=[*cfg.target.allow_constructs, *(allow or [])])
    if process:
        target = dataclasses.replace(target, serve="", serve_prepare=False)
    propose = dataclasses.replace(
        cfg.propose, kind="command", command=f"{sys.executable} {proposer} {plan}", timeout_s=180.0, repair_attempts=0
    )
    cfg = dataclasses.replace(
        cfg,
        target=target,
        propose=propose,
        profile=dataclasses.replace(cfg.profile, kind="auto" if profile else "none"),
        decide=dataclasses.replace(cfg.decide, review_timeout_s=0.0, pooled_noise=pooled),
        stop=dataclasses.replace(cfg.stop, max_iters=0, consecutive_regressions=1000, consecutive_failures=1000),
    )
    text = dumps(cfg)
    loads_config(text, source="the wave's kopt.toml")
    return text


def measured_through(ws_toml: Path) -> str:
    """How a workspace's frozen kopt.toml measures: per-tree servers or process-level runs (the
    one-process A/B command was removed on 2026-12-01)."""
    from kopt_supervisor.engine.config.toml_io import load as load_config

    t = load_config(ws_toml).target
    if getattr(t, "serve", ""):
        return f"serve (one process per tree): {t.serve}"
    return "process-level bench runs"
