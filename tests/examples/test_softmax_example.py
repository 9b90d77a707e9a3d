"""examples/softmax, a kernel repo not written for kopt, onboarded both ways as examples/README.md
does, each run under `kopt run` on this machine's CPU (Triton's interpreter):

1. as it is: its own bench (`bench.py`: a printed table and results/softmax.csv) run once,
   its table detected and a kopt.toml proposed (engine.onboard), process-level rounds;
2. with the 30-line bench on kopt's public harness (`kopt_bench.py`): detected as the harness's
   CSV, the proposal serves looks from one process per tree ([target].serve).

`kopt init --bench` is the CLI's to wire: the tests drive engine.onboard and then the existing
`kopt init --config` and `kopt run --foreground --max-iters 1`, with a scripted `command`
proposer that steps the kernel's ROWS_PER_PROGRAM: one decision shows the onboarded config
measured and decided (each bench process imports torch: a second decision cost 15 CPU-s for
what the first shows; a decision's own candidate process, decision after decision, is
tests/kernels/test_demo.py's on the bundled kernel and, on the fake target,
tests/engine/test_served_trees.py::test_bests_process_is_kept_while_best_stays_and_the_candidates_is_new_per_decision)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from kopt_supervisor.engine import api, onboard
from kopt_supervisor.engine.config.toml_io import load as load_config
from kopt_supervisor.engine.workspace import Workspace
from kopt_supervisor.kopt_tui.cli import main as kopt
from tests.conftest import REPO_ROOT, git, installed

pytestmark = installed("torch", "triton")

EXAMPLE = REPO_ROOT / "examples" / "softmax"
PROPOSER = Path(__file__).parent / "propose_rows.py"
CPU_BENCH = "bench.py --rows 8 --cols 64,100,256 --dtypes float16"
DECIDED = {"keep", "regression", "likely_regression", "tie", "split", "borderline", "accepted", "rejected"}


def example_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "softmax-repo"
    shutil.copytree(EXAMPLE, repo, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "results"))
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "softmax: a Triton row softmax, its tests and its bench")
    return repo


def cpu_env() -> dict[str, str]:
    return {"TRITON_INTERPRET": "1"}


def loop_settings(p: onboard.Proposal) -> None:
    """What a CPU test run needs beside the proposal: the scripted proposer, short decisions
    (two rounds: on the interpreter a step of ROWS_PER_PROGRAM is not decided in three
    either, and each round is two torch processes), no profiler, nobody to review."""
    p.sections["decide"] = {
        **p.sections.get("decide", {}),
        "min_rounds": 2,
        "max_rounds": 2,
        "review_timeout_s": 0.0,
        "max_other_regression_pct": 50.0,
        "suspicious_speedup": 100.0,
    }
    p.sections["profile"] = {**p.sections.get("profile", {}), "kind": "none"}
    p.sections["propose"] = {"kind": "command", "command": f"{sys.executable} {PROPOSER}", "timeout_s": 60.0}
    p.sections["gpu"] = {"samples": 1, "sample_interval_s": 0.0}


def run_loop(tmp_path: Path, repo: Path, text: str, tag: str) -> Workspace:
    cfg_path = tmp_path / f"{tag}.toml"
    cfg_path.write_text(text)
    load_config(cfg_path)  # the proposal loads as it is
    root = tmp_path / "workspaces"
    assert kopt(["--root", str(root), "init", "--repo", str(repo), "--tag", tag, "--config", str(cfg_path)]) == 0
    assert kopt(["--root", str(root), "run", tag, "--foreground", "--max-iters", "1"]) == 0
    return Workspace(root, tag)


def statuses(ws: Workspace) -> list[str]:
    with ws.open_store(readonly=True) as s:
        return [it.status for it in s.iterations()]


def test_the_example_is_a_plain_kernel_repo_with_its_own_tests(tmp_path: Path) -> None:
    # nothing in the repo knows kopt but the harness bench; its own tests pass on the interpreter
    for path in EXAMPLE.rglob("*.py"):
        if path.name != "kopt_bench.py":
            assert "kopt" not in path.read_text(), path
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | cpu_env()
    # in a copy of its own, as its users run them: inside kopt's checkout pytest would take
    # kopt's own settings (pyproject.toml's addopts: parallel workers, each importing torch)
    repo = example_repo(tmp_path)
    res = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    assert " passed" in res.stdout


@pytest.mark.slow
def test_onboarded_as_it_is_through_detection(tmp_path: Path) -> None:
    repo = example_repo(tmp_path)
    bench = f"{sys.executable} {CPU_BENCH}"
    run = onboard.run_once(repo, bench, onboard.local_run_bench(tmp_path / "init-logs", env=cpu_env()))
    assert run.returncode == 0 and Path("results/softmax.csv") in run.files_written
    p = onboard.propose(run)
    assert p.complete, p.error_line()
    t = p.target
    # the CSV file it wrote, not the table it printed; its own timing column, not torch's
    assert (t["csv"], t.get("format", "csv"), t["metric"], t["direction"]) == (
        "results/softmax.csv",
        "csv",
        "triton_ms",
        "min",
    )
    assert "torch_ms" in t["ignore"] and "triton_gbps" in t["ignore"]
    assert t["correct"].startswith("max_abs_err <= ") and t["config"] == ["M", "N", "dtype"]
    # the bench and the package __init__ it imports are protected; the kernel module is not
    assert t["protected"] == ["bench.py", "softmax/__init__.py"]
    assert "softmax/kernel.py" in t["sources"]
    p.target["env"] = cpu_env()
    loop_settings(p)
    ws = run_loop(tmp_path, repo, p.text(), "detected")
    got = statuses(ws)
    assert got[0] == "baseline" and len(got) == 2 and set(got[1:]) <= DECIDED, got
    st = api.status(ws)
    assert st["candidates"] == 1 and st["stop_reason"].startswith("--max-iters 1")
    # process-level: one bench run per side and round, never a served process
    assert not list(ws.dir.glob("logs/v*/*_serve*"))
    frozen = tomllib.loads((ws.dir / "kopt.toml").read_text())
    assert frozen["target"]["serve"] == "" and frozen["target"]["metric"] == "triton_ms"


@pytest.mark.slow
def test_onboarded_on_the_public_harness_serves_its_looks(tmp_path: Path) -> None:
    repo = example_repo(tmp_path)
    bench = f"{sys.executable} kopt_bench.py"
    run = onboard.run_once(repo, bench, onboard.local_run_bench(tmp_path / "init-logs"))
    p = onboard.propose(run)
    assert p.complete, p.error_line()
    t = p.target
    assert (t["metric"], t["correct"], t["production"]) == ("us", "err <= 1", "prod == 1")
    # one served process per tree, the harness's `calls` column read as [target].calls
    assert t["serve"] == f"{bench} --serve" and t["calls"] == "calls"
    assert "calls" not in t["config"] and "calls" in t["ignore"]
    # the Spec names its function "softmax.kernel:softmax": followed like an import, the kernel
    # is a source (a change to it is not "outside the sources") and the package __init__ protected
    assert t["class_by"] == ["dtype"] and t["protected"] == ["kopt_bench.py", "softmax/__init__.py"]
    assert "softmax/kernel.py" in t["sources"]
    assert p.cost is not None and p.cost.mode == "served"
    loop_settings(p)
    ws = run_loop(tmp_path, repo, p.text(), "served")
    got = statuses(ws)
    assert got[0] == "baseline" and len(got) == 2 and set(got[1:]) <= DECIDED, got
    with ws.open_store(readonly=True) as store:
        rules = [f["rule"] for it in store.iterations() for f in (it.record.get("diff_scan") or {}).get("findings", [])]
    assert "outside-sources" not in rules, rules
    # never a process holding both trees: each decision asks a candidate process of its own
    # for several looks, each followed by an audit kopt checks itself
    for v in (1,):
        cand = sorted(ws.log_dir(v).glob("eval_cand_serve*.out"))
        assert len(cand) == 1, cand
        looks = sorted(ws.log_dir(v).glob("eval_r*_cand.csv"))
        audits = sorted(ws.log_dir(v).glob("eval_r*_cand_audit.json"))
        assert len(looks) >= 2 and len(audits) == len(looks) == len(sorted(ws.log_dir(v).glob("eval_r*_best.csv")))
        replies = [line.split() for line in cand[0].read_text().splitlines()]
        measured = [w for w in replies if w[0] in ("done", "audited") and not w[1].startswith("-")]  # no warm-up
        assert [w[0] for w in measured].count("done") == [w[0] for w in measured].count("audited") == len(looks)
        doc = json.loads(audits[0].read_text())
        assert doc["version"] == 1 and [c["config"]["shape"] for c in doc["configs"]] == [
            "cpu-64",
            "cpu-100",
            "cpu-256",
        ]
