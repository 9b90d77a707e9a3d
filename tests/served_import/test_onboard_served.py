"""`kopt init --bench` on the layer-norm fixture as a user runs it (its process-level bench, a
perf_report table and CSV): kopt's module imports it in the scratch copy and the proposal serves
it by import, field by field, the checkout untouched; then an A/A (a comment-only candidate)
through the engine's served path (ServedTrees: two processes, ABBA, kopt's audit) is decided
and not kept."""

from __future__ import annotations

import json
import shutil
import sys
import tomllib
from pathlib import Path

import pytest

from kopt_supervisor.engine import gitops, onboard
from kopt_supervisor.engine.onboard import scratch
from kopt_supervisor.engine.workspace import Workspace
from kopt_supervisor.kopt_tui.cli import main as kopt
from tests.conftest import git, installed
from tests.onboard.test_upstream_liger import checkout_hashes
from tests.served_import.client import FIXTURE, SCRIPT, STUBS

pytestmark = installed("torch", "triton")

BENCH = f"TRITON_INTERPRET=1 PYTHONPATH={STUBS} {sys.executable} {SCRIPT}"
PROPOSER = Path(__file__).parent / "comment_proposer.py"
NOT_KEPT = {"regression", "likely_regression", "tie", "split", "borderline", "rejected"}


@pytest.fixture
def triton_repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    monkeypatch.delenv("KOPT_FAKE_GPUS", raising=False)
    monkeypatch.delenv("KOPT_ROOT", raising=False)
    # one torch thread in every bench process: on a CPU that another test shares, torch's second
    # thread spins for nothing (the process-level run took 9.4 CPU-s with it, 4.8 without)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    repo = tmp_path / "triton-tutorials"
    repo.mkdir()
    shutil.copy(FIXTURE / SCRIPT, repo / SCRIPT)
    shutil.copy(FIXTURE / "LICENSE", repo / "LICENSE")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "the layer-norm tutorial")
    return repo, tmp_path / "workspaces"


@pytest.mark.slow
def test_init_proposes_serving_by_import_and_an_a_a_is_decided_not_kept(triton_repo, tmp_path, capsys) -> None:
    repo, root = triton_repo
    before = checkout_hashes(repo)
    assert (
        kopt(["--root", str(root), "init", "--repo", str(repo), "--tag", "ln", "--bench", BENCH, "--no-sandbox"]) == 2
    )  # without --yes: the proposal shown and kept as a draft
    capsys.readouterr()
    assert checkout_hashes(repo) == before  # the bench (it writes its CSV and plot into `.`) ran in a copy
    draft = root / ".init" / "ln" / "draft"
    t = tomllib.loads((draft / "kopt.toml").read_text())["target"]
    served = f"TRITON_INTERPRET=1 PYTHONPATH={STUBS} {sys.executable} -m {scratch.MODULE} {SCRIPT} --line triton"
    assert "serve_prepare" not in t  # served by import: its looks are whole (it answers `unprepared`)
    assert (t["bench"], t["serve"], t["csv"], t["metric"], t["direction"]) == (
        served,
        f"{served} --serve",
        "-",
        "us",
        "min",
    )
    assert (t["correct"], t["calls"], t["class_by"]) == ("err <= 1", "calls", [])
    assert t["config"] == ["N", "provider", "M", "dtype", "mode"] and "format" not in t
    assert {"calls", "seed", "us_p90"} <= set(t["ignore"]) and t["sources"] == [SCRIPT]
    text = (draft / "kopt.toml").read_text()
    assert f'command = "{served} --profile"' in text and "holds both the kernel and the benchmark function" in text
    probe = json.loads((draft / "run.json").read_text())["probe"]
    assert probe["ok"] and [line["value"] for line in probe["probe"]["benchmarks"][0]["lines"]] == ["triton", "torch"]

    # the A/A: the same proposal (from the draft's run, no bench run again), short decisions
    run = scratch.load_draft(draft, repo, BENCH, gitops.head(repo))
    assert run is not None and run.probe == probe
    p = onboard.propose(run)
    # an A/A stays undecided to max_rounds (then review, answered by its default: reject): 3
    # rounds go past min_rounds once; each round is a look on each side (6 rounds: 24 CPU-s)
    p.sections["decide"] = {
        "min_rounds": 2,
        "max_rounds": 3,
        "review_timeout_s": 0.0,
        "max_other_regression_pct": 50.0,
        "suspicious_speedup": 100.0,
    }
    p.sections["profile"] = {"kind": "none"}
    p.sections["propose"] = {"kind": "command", "command": f"{sys.executable} {PROPOSER}", "timeout_s": 60.0}
    p.sections["gpu"] = {"samples": 1, "sample_interval_s": 0.0}
    cfg = tmp_path / "aa.toml"
    cfg.write_text(p.text())
    assert kopt(["--root", str(root), "init", "--repo", str(repo), "--tag", "aa", "--config", str(cfg)]) == 0
    assert kopt(["--root", str(root), "run", "aa", "--foreground", "--max-iters", "1"]) == 0
    ws = Workspace(root, "aa")
    with ws.open_store(readonly=True) as s:
        got = [it.status for it in s.iterations()]
    assert got[0] == "baseline" and len(got) == 2 and got[1] in NOT_KEPT, got
    # served: a candidate process of its own, each measured look audited by kopt
    looks = sorted(ws.log_dir(1).glob("eval_r*_cand.csv"))
    audits = sorted(ws.log_dir(1).glob("eval_r*_cand_audit.json"))
    assert len(looks) >= 2 and len(audits) == len(looks) and sorted(ws.log_dir(1).glob("eval_cand_serve*.out"))
    assert checkout_hashes(repo) == before
