"""Builders for the propose tests: iterations with real record shapes, a candidate worktree,
a workspace with logs/vN/ and plans/, and a ProposalContext whose runner is engine.runner."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

from kopt_supervisor.engine.config import Config
from kopt_supervisor.engine.config.toml_io import loads as loads_config
from kopt_supervisor.engine.propose.context import build_pack
from kopt_supervisor.engine.propose.context_inputs import PackInputs, list_sources
from kopt_supervisor.engine.propose.proposer import ProposalContext
from kopt_supervisor.engine.runner.command import RunResult
from kopt_supervisor.engine.runner.command import run as run_command
from kopt_supervisor.engine.store import Iteration

FAKE_AGENTS = Path(__file__).resolve().parent.parent / "fake_agents"
BASE_TOML = """\
[target]
bench = "python bench.py"
metric = "us"
correct = "err == 0"
class_by = ["dclass"]
protected = ["bench.py"]
[roofline]
bytes = "2 * n * 2"
"""
CLASSES = ["dclass=narrow", "dclass=wide"]
CONFIGS = {
    "n=64,dclass=narrow": {"cls": "dclass=narrow", "production": True, "row": {"n": 64, "dclass": "narrow"}},
    "n=4096,dclass=wide": {"cls": "dclass=wide", "production": True, "row": {"n": 4096, "dclass": "wide"}},
}


def cfg_with(propose: str = "", extra: str = "") -> Config:
    return loads_config(BASE_TOML + ("[propose]\n" + propose if propose else "") + extra)


def git(cwd: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
    }
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True, env=env).stdout.strip()


def roofline(values: dict[str, float]) -> dict[str, Any]:
    """record["roofline"] as engine.profile.roofline writes it, for an H100-like peak."""
    out: dict[str, Any] = {
        "gpu": "NVIDIA H100 80GB HBM3",
        "specs": {"hbm_bandwidth": "hbm_bandwidth: 3.35 TB/s <- docs/gpu-wiki/h100.md:12"},
        "configs": {},
        "classes": {},
        "production": list(CONFIGS),
        "target_pct": 90.0,
    }
    for key, c in CONFIGS.items():
        b = 2 * c["row"]["n"] * 2
        floor = b / 3.35e12
        sec = values[c["cls"]] * 1e-6
        out["configs"][key] = {
            "flops": 0.0,
            "bytes": float(b),
            "intensity": 0.0,
            "ridge": None,
            "bound": "memory",
            "floor_s": floor,
            "seconds": sec,
            "achieved_Bps": b / sec,
            "achieved_flops": 0.0,
            "pct_of_peak": 100 * floor / sec,
            "suspicious": False,
        }
        out["classes"][c["cls"]] = {
            "cls": c["cls"],
            "configs": 1,
            "bound": "memory",
            "pct_geomean": 100 * floor / sec,
            "pct_min": 100 * floor / sec,
            "suspicious": 0,
        }
    return out


def cls_entry(best: float, cand: float, lo: float, hi: float, verdict: str, rounds: int = 6) -> dict[str, Any]:
    r = cand / best
    return {
        "best": best,
        "cand": cand,
        "ratio": r,
        "lo": lo,
        "hi": hi,
        "verdict": verdict,
        "rounds": rounds,
        "delta_pct": (r - 1) * 100,
        "interval": [lo, hi],
    }


def history(profile: dict[str, Any] | None = None) -> list[Iteration]:
    """v0 baseline, v1 keep (wide), v2 regression, v3 tie, v4 masked keep, v5 regression from v1's best."""
    base = Iteration(
        0,
        "baseline",
        hypothesis="baseline (unmodified)",
        commit="c0",
        best_commit_before="c0",
        record={
            "classes": {"dclass=narrow": {"best": 10.0, "configs": 1}, "dclass=wide": {"best": 40.0, "configs": 1}},
            "configs": CONFIGS,
            "roofline": roofline({"dclass=narrow": 10.0, "dclass=wide": 40.0}),
        },
    )
    v1 = Iteration(
        1,
        "keep",
        hypothesis="vectorise the wide loads to raise DRAM throughput",
        target_class="dclass=wide",
        scope="class",
        commit="c1",
        best_commit_before="c0",
        record={
            "classes": {
                "dclass=narrow": cls_entry(10.0, 10.02, 0.99, 1.01, "undecided"),
                "dclass=wide": cls_entry(40.0, 30.0, 0.73, 0.77, "improved"),
            },
            "decision": {"verdict": "keep", "reason": "dclass=wide −25% faster"},
            "roofline": roofline({"dclass=narrow": 10.02, "dclass=wide": 30.0}),
            "changed_files": ["kernel.py"],
            **({"profile": {"best": profile, "cand": profile}} if profile else {}),
        },
    )
    v2 = Iteration(
        2,
        "regression",
        hypothesis="unroll the narrow loop by 4",
        target_class="dclass=narrow",
        scope="class",
        best_commit_before="c1",
        record={
            "classes": {
                "dclass=narrow": cls_entry(10.0, 10.6, 1.05, 1.07, "regressed"),
                "dclass=wide": cls_entry(30.0, 30.1, 0.99, 1.02, "undecided"),
            },
            "decision": {"verdict": "regression", "reason": "dclass=narrow +6% slower"},
            "changed_files": ["kernel.py"],
        },
    )
    v3 = Iteration(
        3,
        "tie",
        hypothesis="cache the weight in shared memory",
        scope="global",
        best_commit_before="c1",
        record={
            "classes": {
                "dclass=narrow": cls_entry(10.0, 10.0, 0.995, 1.005, "tied"),
                "dclass=wide": cls_entry(30.0, 29.9, 0.99, 1.005, "tied"),
            },
            "decision": {"verdict": "tie", "reason": "within noise"},
        },
    )
    v4 = Iteration(
        4,
        "keep",
        masked=True,
        hypothesis="SECRET MASKED IDEA",
        commit="c4",
        best_commit_before="c1",
        record={"classes": {"dclass=wide": cls_entry(30.0, 20.0, 0.6, 0.7, "improved")}},
    )
    v5 = Iteration(
        5,
        "regression",
        hypothesis="two rows per program on the wide class",
        target_class="dclass=wide",
        scope="class",
        best_commit_before="c1",
        record={
            "classes": {
                "dclass=narrow": cls_entry(10.0, 10.0, 0.99, 1.01, "undecided"),
                "dclass=wide": cls_entry(30.0, 33.0, 1.08, 1.12, "regressed"),
            },
            "decision": {"verdict": "regression", "reason": "dclass=wide +10% slower"},
            "changed_files": ["kernel.py"],
        },
    )
    return [base, v1, v2, v3, v4, v5]


META = {"tag": "t1", "classes": CLASSES, "config_columns": ["n", "dclass"], "baseline_commit": "c0"}


def make_repo(path: Path) -> Path:
    path.mkdir(parents=True)
    (path / "kernel.py").write_text("def kernel():\n    return 1  # dispatch by dclass\n")
    (path / "bench.py").write_text("print('us,err')\n")
    git(path, "init", "-q", "-b", "main")
    git(path, "add", "-A")
    git(path, "commit", "-qm", "target")
    return path


def make_ctx(
    tmp: Path,
    cfg: Config,
    *,
    iteration: int = 6,
    repair: int = 0,
    its: Sequence[Iteration] | None = None,
    hist: list[dict[str, Any]] | None = None,
    timeout_s: float | None = None,
) -> ProposalContext:
    """A workspace under tmp (cand/ a real git repo, logs/vN/ with the pack, plans/) and the context."""
    ws = tmp / "ws"
    cand = ws / "cand" if (ws / "cand").exists() else make_repo(ws / "cand")
    log_dir = ws / "logs" / f"v{iteration}"
    log_dir.mkdir(parents=True, exist_ok=True)
    (ws / "plans").mkdir(exist_ok=True)
    suffix = f"_repair{repair}" if repair else ""
    prompt = log_dir / f"prompt{suffix}.md"
    plan = ws / "plans" / f"v{iteration}_plan.md"
    pack = build_pack(
        PackInputs(
            cfg,
            META,
            list(its if its is not None else history()),
            iteration,
            repair=repair,
            sources=list_sources(cand, cfg),
            worktree=cand,
            plan_path=plan,
            prompt_json_path=prompt.with_suffix(".json"),
        )
    )
    prompt.write_text(pack.markdown)
    prompt.with_suffix(".json").write_text(pack.json)
    env = {
        "KOPT_ITERATION": str(iteration),
        "KOPT_REPAIR": str(repair),
        "KOPT_PROMPT": str(prompt),
        "KOPT_PLAN": str(plan),
        "KOPT_WORKSPACE": str(ws),
    }
    run = partial(_run, log_dir=log_dir)
    return ProposalContext(
        iteration=iteration,
        repair=repair,
        worktree=cand,
        workspace=ws,
        prompt_path=prompt,
        plan_path=plan,
        log_dir=log_dir,
        config=cfg,
        best_commit="c1",
        classes=CLASSES,
        history=hist or [],
        env=env,
        run=run,
    )


def _run(
    command: Any, *, cwd: Path, name: str, timeout_s: float, env: dict[str, str] | None = None, log_dir: Path
) -> RunResult:
    return run_command(command, cwd=cwd, log_dir=log_dir, name=name, timeout_s=min(timeout_s, 60), env=env)


def agents_path() -> str:
    """PATH with the fake CLIs first and this Python next (the fakes run on `python3`)."""
    return os.pathsep.join([str(FAKE_AGENTS), str(Path(sys.executable).parent), os.environ.get("PATH", "")])
