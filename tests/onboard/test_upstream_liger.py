"""Onboarding Liger-Kernel's RMSNorm bench as it is (tests/onboard/upstream/liger_rmsnorm: its
layout, its long-format CSV appended to a tracked file holding other kernels' and GPUs' history,
its `cd benchmark && ...` command; a CPU stand-in, SOURCE.md) in one `kopt init --bench ...`
pass: the proposal field by field, the draft reused, the user's checkout byte-identical after
`init` and after a run, and a baseline that fails making `kopt run` exit 1."""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import tomllib
from pathlib import Path

import pytest

from kopt_supervisor.engine.workspace import Workspace
from kopt_supervisor.kopt_tui.cli import main as kopt
from tests.conftest import git

FIXTURE = Path(__file__).parent / "upstream" / "liger_rmsnorm"
DATA = "benchmark/data/all_benchmark_data.csv"
AGENT = f"{sys.executable} my_agent.py --prompt {{prompt}}"
BENCH = f"cd benchmark && PYTHONPATH=../src {sys.executable} scripts/benchmark_rms_norm.py"


def checkout_hashes(repo: Path) -> dict[str, str]:
    """Every file of the checkout, tracked or not, ignored or not (.git aside): path -> sha256."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(repo):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        for name in filenames:
            p = Path(dirpath) / name
            out[p.relative_to(repo).as_posix()] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


@pytest.fixture
def liger(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    monkeypatch.delenv("KOPT_FAKE_GPUS", raising=False)
    monkeypatch.delenv("KOPT_ROOT", raising=False)
    repo = tmp_path / "Liger-Kernel"
    shutil.copytree(FIXTURE, repo, ignore=shutil.ignore_patterns("__pycache__", "SOURCE.md"))
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "upstream")
    return repo, tmp_path / "workspaces"


def test_liger_onboards_in_one_pass_and_the_checkout_stays_byte_identical(liger, capsys) -> None:
    repo, root = liger
    before = checkout_hashes(repo)
    history = (repo / DATA).read_text()
    r = ["--root", str(root)]
    # without --yes: the proposal is shown and kept as a draft; nothing is created
    assert kopt([*r, "init", "--repo", str(repo), "--tag", "lg", "--bench", BENCH, "--no-sandbox"]) == 2
    out, err = capsys.readouterr()
    assert "ran it again without them" in out and "pass --yes" not in err and "--yes" in err and "kept as" in err
    draft = root / ".init" / "lg" / "draft"
    assert (draft / "kopt.toml").is_file() and (draft / "run.json").is_file()
    assert checkout_hashes(repo) == before and not (root / "lg").exists()
    measured = (draft / "run.json").read_text()

    # --yes: the measured run is reused (the bench is not run again), the run created
    assert (
        kopt(
            [
                *r,
                "init",
                "--repo",
                str(repo),
                "--tag",
                "lg",
                "--bench",
                BENCH,
                "--no-sandbox",
                "--yes",
                "--propose-command",
                AGENT,
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "reusing the bench run measured" in out and "running the bench" not in out
    assert (draft / "run.json").read_text() == measured
    assert checkout_hashes(repo) == before  # init wrote nothing into the checkout

    frozen = tomllib.loads((root / "lg" / "kopt.toml").read_text())
    t = frozen["target"]
    assert (t["format"], t["csv"], t["metric"], t["direction"]) == ("long", DATA, "liger speed (ms)", "min")
    assert t["untrack"] == [DATA] and DATA in t["protected"]
    assert "benchmark/scripts/benchmark_rms_norm.py" in t["protected"]  # scanned from benchmark/
    assert "benchmark/scripts/utils.py" in t["protected"]
    assert "src/liger_kernel/ops/rms_norm.py" not in t["protected"]  # the kernel stays editable
    assert "gpu_name" in t["config"] and "x_value" in t["config"] and "timestamp" not in t["config"]
    assert t["class_by"] == ["kernel_operation_mode"]
    assert frozen["propose"]["kind"] == "command" and frozen["propose"]["command"] == AGENT
    assert "noise not measured (one run" in (draft / "kopt.toml").read_text()

    # the run's baseline: kopt's own commit without the tracked output file; the user's branch untouched
    ws = Workspace(root, "lg")
    with ws.open_store(readonly=True) as s:
        base = str(s.get("baseline_commit"))
    assert git(repo, "rev-parse", f"{base}^") == git(repo, "rev-parse", "HEAD")
    assert DATA not in git(repo, "ls-tree", "-r", "--name-only", base).splitlines()
    assert not (ws.best / DATA).exists()

    # a baseline: the bench writes the file afresh in best/, its rows alone are read
    assert kopt([*r, "run", "lg", "--foreground", "--max-iters", "0", "--no-sandbox"]) == 0
    with ws.open_store(readonly=True) as s:
        (b,) = s.iterations()
    assert b.status == "baseline", b.record.get("decision")
    # this run's 6 configs (3 sizes x 2 modes on this machine), none of the file's 26 rows of history
    assert len(b.record["configs"]) == 6 and all("gpu_name=cpu" in k for k in b.record["configs"])
    assert {c: v["configs"] for c, v in b.record["classes"].items()} == {
        "kernel_operation_mode=forward": 3,
        "kernel_operation_mode=full": 3,
    }
    assert checkout_hashes(repo) == before and (repo / DATA).read_text() == history
    assert git(repo, "status", "--porcelain") == ""


def test_a_baseline_that_fails_makes_kopt_run_exit_1(liger, tmp_path: Path, capsys) -> None:
    repo, root = liger
    cfg = tmp_path / "wrong.toml"  # the pytest-benchmark mistake of the issue: a metric the rows lack
    cfg.write_text(
        f'[target]\nbench = {BENCH!r}\ncsv = "{DATA}"\nformat = "long"\nmetric = "speed"\n'
        f'untrack = ["{DATA}"]\n'.replace("'", '"')
    )
    r = ["--root", str(root)]
    assert kopt([*r, "init", "--repo", str(repo), "--tag", "bad", "--config", str(cfg)]) == 0
    capsys.readouterr()
    assert kopt([*r, "run", "bad", "--foreground", "--max-iters", "0", "--no-sandbox"]) == 1
    assert "the run failed: the baseline bench failed" in capsys.readouterr().err
