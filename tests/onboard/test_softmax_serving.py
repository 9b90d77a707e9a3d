"""`kopt init --bench` on examples/softmax proposes served looks where it can and says why where
it cannot (the H200 MCP session was onboarded from `bench.py`, process-level, and each decision
took > 200 s: docs/agents.md). On the CPU: Triton's interpreter runs each bench once.

- `kopt_bench.py` (the example's bench on kopt's harness): served, one process per tree;
- `bench.py` (its own script: a plain table): process-level, and the proposal says why and names
  `kopt_bench.py` with the `kopt init --bench` command that serves it;
- the same without `kopt_bench.py` in the repo: process-level, why, and no script named."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from kopt_supervisor.engine import onboard
from kopt_supervisor.engine.onboard.scratch import harness_benches
from tests.conftest import REPO_ROOT, git, installed

pytestmark = installed("torch", "triton", "numpy")

EXAMPLE = REPO_ROOT / "examples" / "softmax"
SMALL = "bench.py --rows 4 --cols 64,100 --dtypes float16"


def example(tmp_path: Path, *, without: str = "") -> Path:
    repo = tmp_path / "softmax"
    shutil.copytree(EXAMPLE, repo, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "results"))
    if without:
        (repo / without).unlink()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "softmax")
    return repo


def proposal(tmp_path: Path, repo: Path, bench: str) -> onboard.Proposal:
    run_bench = onboard.local_run_bench(tmp_path / "logs", env={"TRITON_INTERPRET": "1"})
    return onboard.settle(onboard.run_once(repo, f"{sys.executable} {bench}", run_bench))


def test_the_harness_bench_is_found_by_its_text(tmp_path: Path) -> None:
    repo = example(tmp_path)
    assert harness_benches(repo, "python bench.py") == ["kopt_bench.py"]
    assert harness_benches(repo, f"{sys.executable} kopt_bench.py --dtypes float16") == []  # the one it runs
    # a script that only mentions the harness, or imports it without handing it a Spec, is none
    (repo / "notes.py").write_text("# see kopt_supervisor.kernels.harness and harness.main(SPEC)\n")
    (repo / "tools").mkdir()
    (repo / "tools" / "check.py").write_text("from kopt_supervisor.kernels import harness\nprint(harness)\n")
    (repo / "tools" / "bench2.py").write_text(
        "from kopt_supervisor.kernels import harness\nSPEC = None\nraise SystemExit(harness.main(SPEC))\n"
    )
    assert harness_benches(repo, "python bench.py") == ["kopt_bench.py", "tools/bench2.py"]


@pytest.mark.slow
def test_the_harness_bench_is_proposed_served(tmp_path: Path) -> None:
    p = proposal(tmp_path, example(tmp_path), "kopt_bench.py")
    assert p.served and p.serving.startswith("served:"), p.serving
    assert p.target["serve"] == f"{sys.executable} kopt_bench.py --serve" and p.target["metric"] == "us"
    assert p.cost is not None and p.cost.mode == "served"
    assert "Looks: served" in p.text()
    assert not any("process-level looks" in c for c in p.checks), p.checks


@pytest.mark.slow
def test_its_own_bench_says_why_it_is_not_served_and_names_the_harness_bench(tmp_path: Path) -> None:
    p = proposal(tmp_path, example(tmp_path), SMALL)
    assert not p.served and "serve" not in p.target
    assert p.serving.startswith("process-level looks"), p.serving
    assert "not the CSV of kopt's harness" in p.serving, p.serving
    assert f'`kopt init --bench "{sys.executable} kopt_bench.py"` proposes it served' in p.serving, p.serving
    assert p.serving in p.checks  # the header of the proposed kopt.toml says it
    assert "kopt_bench.py" in " ".join(p.text().split())


@pytest.mark.slow
def test_without_a_harness_bench_it_says_why_and_names_none(tmp_path: Path) -> None:
    p = proposal(tmp_path, example(tmp_path, without="kopt_bench.py"), SMALL)
    assert not p.served and p.serving.startswith("process-level looks"), p.serving
    assert "kopt_bench.py" not in p.serving and "kopt's public harness" in p.serving, p.serving
