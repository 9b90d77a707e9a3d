"""A Liger-Kernel-style bench served by import (kernels/harness/imported.py with
liger_convention.py), on the CPU (Triton's interpreter) with the stand-in in
tests/served_import/liger_style: the speed run_benchmarks call of its `__main__` block recorded,
not run (the stand-in's run_benchmarks would write data/all_benchmark_data.csv), the memory call
ignored, the configs and their columns, a plain look's CSV, the probe, and the one-line error of
a script that follows neither convention.

The processes get PYTHONPATH = the source root of the kopt_supervisor this test imported, so a
worktree's code is the one run (not an editable install's)."""

from __future__ import annotations

import io
import json
import math
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from kopt_supervisor.kernels.harness import imported
from tests.conftest import installed

pytestmark = installed("torch", "triton")

STAND_IN = Path(__file__).parent / "liger_style"
SCRIPT = "benchmark_rms_norm.py"
COLUMNS = ["kernel_operation_mode", "T", "kernel_provider", "hidden_size", "dtype", "eps"]
SRC = Path(imported.__file__).resolve().parents[3]


def tree(dest: Path, edits: tuple[tuple[str, str], ...] = ()) -> Path:
    """A tree holding the stand-in, each (old, new) of `edits` applied to the script."""
    shutil.copytree(STAND_IN, dest, ignore=shutil.ignore_patterns("__pycache__", "data"))
    text = (dest / SCRIPT).read_text()
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new)
    (dest / SCRIPT).write_text(text)
    return dest


def run(where: Path, *args: str, script: str = SCRIPT) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "TRITON_INTERPRET")}
    env["PYTHONPATH"] = str(SRC)
    return subprocess.run(
        [sys.executable, "-m", imported.MODULE, script, *args],
        cwd=where,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def written(where: Path) -> bool:
    """The stand-in's run_benchmarks ran: it writes data/all_benchmark_data.csv in the tree."""
    return (where / "data").exists()


@pytest.fixture
def isolated(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """In-process imports: the stand-in's `utils` and sys.path entry do not outlive the test."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    before = sys.modules.get("utils")
    yield
    if before is None:
        sys.modules.pop("utils", None)
    else:
        sys.modules["utils"] = before


def test_the_speed_call_is_recorded_not_run_and_its_configs_found(tmp_path: Path, isolated: None) -> None:
    t = tree(tmp_path / "t")
    argv = list(sys.argv)
    imp = imported.import_bench(t / SCRIPT, "kopt_test_liger_bench")
    assert sys.argv == argv  # the script ran with argv [script], put back after
    assert not written(t)  # recorded, not run
    assert imp.marks == [] and len(imp.runs) == 1  # the memory call is not among the runs
    assert imp.runs[0].args["metric_name"] == "speed" and imp.runs[0].plot_name == "rms_norm"
    assert imported.config_columns(imp) == COLUMNS
    configs = imported.configs(imp, ["liger"], SCRIPT)
    assert [list(c.cols) for c in configs] == [COLUMNS] * 4
    assert [(c.cols["kernel_operation_mode"], c.cols["T"], c.cols["kernel_provider"]) for c in configs] == [
        ("forward", 4, "liger"),
        ("forward", 8, "liger"),
        ("full", 4, "liger"),
        ("full", 8, "liger"),
    ]
    assert {(c.cols["hidden_size"], c.cols["dtype"], c.cols["eps"]) for c in configs} == {(48, "float32", 1e-6)}
    both = imported.configs(imp, ["huggingface", "liger"], SCRIPT)
    assert len(both) == 8 and [c.cols["kernel_provider"] for c in both[:2]] == ["huggingface", "huggingface"]
    with pytest.raises(imported.ImportedError, match="names no line"):
        imported.configs(imp, ["triton"], SCRIPT)


def test_a_plain_look_has_one_finite_row_per_config_and_writes_nothing(tmp_path: Path) -> None:
    t = tree(tmp_path / "t")
    p = run(t, "--line", "liger", "--seed", "7")
    assert p.returncode == 0, p.stderr
    df = pd.read_csv(io.StringIO(p.stdout))
    assert list(df.columns[: len(COLUMNS)]) == COLUMNS
    assert len(df) == 4 and set(df["T"]) == {4, 8}  # no T=16: the memory call's
    assert set(df["kernel_operation_mode"]) == {"forward", "full"} and set(df["kernel_provider"]) == {"liger"}
    assert (df["err"] == 0).all() and all(math.isfinite(u) and u > 0 for u in df["us"]) and (df["seed"] == 7).all()
    assert "BENCHMARKING" not in p.stdout and not written(t)


def test_the_probe_reports_the_providers(tmp_path: Path) -> None:
    t = tree(tmp_path / "t")
    p = run(t, "--probe", "--seed", "3")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["version"] == imported.PROBE_VERSION and doc["convention"] == "liger"
    assert doc["config_columns"] == COLUMNS and len(doc["benchmarks"]) == 1
    b = doc["benchmarks"][0]
    assert (b["plot_name"], b["x_names"], b["line_arg"], b["configs"]) == ("rms_norm", ["T"], "kernel_provider", 4)
    assert [(x["value"], x["name"], x["captured"], x["outputs"]) for x in b["lines"]] == [
        ("huggingface", "huggingface", True, 1),
        ("liger", "liger", True, 1),
    ]
    assert not written(t)


def test_a_script_of_neither_convention_fails_in_one_line(tmp_path: Path) -> None:
    t = tree(tmp_path / "t")
    (t / "plain.py").write_text("import torch\n\nif __name__ == '__main__':\n    print(torch.ones(2))\n")
    p = run(t, "--line", "liger", script="plain.py")
    last = p.stderr.strip().splitlines()[-1]
    assert p.returncode == 1 and p.stdout == ""
    assert last.startswith("plain.py: ") and "perf_report" in last and "from X import run_benchmarks" in last


def test_a_memory_only_script_and_duplicate_configs_are_refused(tmp_path: Path, isolated: None) -> None:
    memory_only = tree(tmp_path / "m", (('metric_name="speed"', 'metric_name="latency"'),))
    with pytest.raises(imported.ImportedError, match="metric_name='speed'") as exc:
        imported.import_bench(memory_only / SCRIPT, "kopt_test_liger_memory_only")
    assert "perf_report" in str(exc.value) and "\n" not in str(exc.value)
    twice = tree(tmp_path / "d", (("x_values=[4, 8]", "x_values=[4, 4]"),))
    imp = imported.import_bench(twice / SCRIPT, "kopt_test_liger_twice")
    with pytest.raises(imported.ImportedError, match="twice"):
        imported.configs(imp, ["liger"], SCRIPT)
    assert not written(memory_only) and not written(twice)


@pytest.mark.slow
def test_kopt_init_proposes_serving_a_liger_style_bench_by_import(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`kopt init --bench` on the stand-in run as it is (on the CPU its do_bench falls back to
    its own perf_counter; it appends upstream's long-format rows to data/all_benchmark_data.csv):
    kopt reads the long table, probes the script with its import harness, finds the
    run_benchmarks convention and proposes serving the metric's provider (`liger speed (ms)`:
    `--line liger`); the helper module that times the bench (utils.py) is protected; the
    checkout is left as it was."""
    import tomllib

    from kopt_supervisor.engine.onboard import scratch
    from kopt_supervisor.kopt_tui.cli import main as kopt
    from tests.conftest import git
    from tests.onboard.test_upstream_liger import checkout_hashes

    monkeypatch.delenv("KOPT_FAKE_GPUS", raising=False)
    monkeypatch.delenv("KOPT_ROOT", raising=False)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    repo = tree(tmp_path / "liger-style")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "a Liger-style bench")
    before = checkout_hashes(repo)
    bench = f"TRITON_INTERPRET=1 {sys.executable} {SCRIPT}"
    root = tmp_path / "ws"
    assert (
        kopt(["--root", str(root), "init", "--repo", str(repo), "--tag", "lg", "--bench", bench, "--no-sandbox"]) == 2
    )
    assert checkout_hashes(repo) == before and not written(repo)  # the bench ran in a copy
    draft = root / ".init" / "lg" / "draft"
    t = tomllib.loads((draft / "kopt.toml").read_text())["target"]
    served = f"TRITON_INTERPRET=1 {sys.executable} -m {scratch.MODULE} {SCRIPT} --line liger"
    assert (t["bench"], t["serve"], t["csv"], t["metric"], t["correct"]) == (
        served,
        f"{served} --serve",
        "-",
        "us",
        "err <= 1",
    )
    assert t["config"] == COLUMNS and t["class_by"] == ["kernel_operation_mode"] and "format" not in t
    assert "utils.py" in t["protected"] and "utils.py" in t["sources"]  # the bench's timing helpers
    probe = json.loads((draft / "run.json").read_text())["probe"]
    assert probe["ok"] and probe["probe"]["convention"] == "liger"
    assert [line["value"] for line in probe["probe"]["benchmarks"][0]["lines"]] == ["huggingface", "liger"]
