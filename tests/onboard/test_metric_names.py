"""A metric name checked against the columns the bench's adapter produces (issue 28, item 4):
`kopt init --bench ... --answer metric=NAME` (first attempt, and the kept draft answered again)
fails in one line naming the answer, the adapter and file, a close match (`median` ->
`median_us`) and the available names, and says what it kept (the measured run; no workspace);
a hand-written kopt.toml (init does not run the bench) fails at the baseline, in one line
naming the file and the value, and `kopt run` exits 1. The user's checkout is never written.

The bench: a script that writes a pytest-benchmark JSON report (tests/adapters/data), no
pytest, no Triton: each `kopt init` runs it in well under a second."""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import tomllib
from pathlib import Path

import pytest

from kopt_supervisor.engine import BadInput, onboard
from kopt_supervisor.engine.metrics import close_name
from kopt_supervisor.engine.workspace import Workspace
from kopt_supervisor.kopt_tui.cli import main as kopt
from tests.conftest import git
from tests.onboard.test_propose import fake_run

REPORT = Path(__file__).resolve().parents[1] / "adapters" / "data" / "pytest_benchmark.json"
BENCH = f"{sys.executable} bench.py"
METRICS = "min_us, median_us, mean_us, max_us, stddev_us, iqr_us, ops_per_s, gbps"
"""What the pytest-benchmark adapter makes measurements of in REPORT: its stats in µs, ops/s,
and the test's own `gbps` (extra_info; a rate by its name)."""


def hashes(repo: Path) -> dict[str, str]:
    out = {}
    for dirpath, dirnames, filenames in os.walk(repo):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        for name in filenames:
            p = Path(dirpath) / name
            out[p.relative_to(repo).as_posix()] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


@pytest.fixture
def pb(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """A repo whose bench writes a pytest-benchmark report to bench.json; the runs' root."""
    monkeypatch.delenv("KOPT_FAKE_GPUS", raising=False)
    monkeypatch.delenv("KOPT_ROOT", raising=False)
    repo = tmp_path / "repo"
    repo.mkdir()
    shutil.copyfile(REPORT, repo / "report.json")
    (repo / "bench.py").write_text(
        "import pathlib, shutil\n"
        "shutil.copyfile(pathlib.Path(__file__).with_name('report.json'), 'bench.json')\n"
        "print('==== 3 passed ====')\n"
    )
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "bench")
    return repo, tmp_path / "workspaces"


def init(root: Path, repo: Path, *extra: str) -> int:
    return kopt(
        ["--root", str(root), "init", "--repo", str(repo), "--tag", "t", "--bench", BENCH, "--no-sandbox", *extra]
    )


def expected(name: str, guess: str | None, draft: Path) -> str:
    return (
        f"kopt: kopt init --bench: --answer metric={name!r}: no such column among those the pytest-benchmark "
        f"adapter produces from bench.json"
        + (f"; did you mean {guess!r}?" if guess else ";")
        + f" available: {METRICS}; the measured run is kept in {draft} and reused by the next `kopt init "
        "--bench` with the same command (nothing else was created)"
    )


def test_an_answered_metric_the_adapter_does_not_produce_fails_in_one_line_and_keeps_the_run(pb, capsys) -> None:
    repo, root = pb
    before = hashes(repo)
    draft = root / ".init" / "t" / "draft"
    # the first attempt: the bench runs (in a copy), the answer is checked against its table
    assert init(root, repo, "--answer", "metric=median") == 2
    out, err = capsys.readouterr()
    assert "running the bench" in out
    assert err.strip() == expected("median", "median_us", draft) and err.count("\n") == 1
    assert (draft / "run.json").is_file() and not (draft / "kopt.toml").exists()  # the run kept, no proposal
    assert not (root / "t").exists() and hashes(repo) == before and git(repo, "status", "--porcelain") == ""
    measured = (draft / "run.json").read_text()

    # the kept run answered again: not run again; a name in other case is matched, one with no
    # close spelling lists the names alone
    assert init(root, repo, "--answer", "metric=Median_US") == 2
    out, err = capsys.readouterr()
    assert "reusing the bench run measured" in out and "running the bench" not in out
    assert err.strip() == expected("Median_US", "median_us", draft)
    assert init(root, repo, "--answer", "metric=wallclock") == 2
    assert capsys.readouterr().err.strip() == expected("wallclock", None, draft)
    assert (draft / "run.json").read_text() == measured and not (root / "t").exists()

    # the name the message offered is taken, from the same kept run
    assert init(root, repo, "--answer", "metric=median_us", "--yes") == 0
    out = capsys.readouterr().out
    assert "reusing the bench run measured" in out and f"created {root / 't'}" in out
    t = tomllib.loads((root / "t" / "kopt.toml").read_text())["target"]
    assert (t["format"], t["metric"], t["direction"]) == ("pytest-benchmark", "median_us", "min")
    assert hashes(repo) == before and git(repo, "status", "--porcelain") == ""


def test_a_hand_written_metric_the_rows_lack_fails_at_the_baseline_in_one_line(pb, tmp_path: Path, capsys) -> None:
    """init does not run the bench for a kopt.toml of the user's: the columns are first known at
    the baseline, whose failure names the file, the value and the columns, and exits 1."""
    repo, root = pb
    before = hashes(repo)
    cfg = tmp_path / "wrong.toml"
    cfg.write_text(f'[target]\nbench = "{BENCH}"\ncsv = "bench.json"\nformat = "pytest-benchmark"\nmetric = "median"\n')
    r = ["--root", str(root)]
    assert kopt([*r, "init", "--repo", str(repo), "--tag", "hw", "--config", str(cfg)]) == 0
    capsys.readouterr()
    assert kopt([*r, "run", "hw", "--foreground", "--max-iters", "0", "--no-sandbox"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("kopt: the run failed: the baseline bench failed: bench.json: ")
    assert "'median'" in err and "median_us" in err
    assert "[target].metric names no column" in err and "did you mean 'median_us'?" in err
    assert err.endswith("and `kopt init` again under a new tag)")  # the config is frozen: the way out, said
    with Workspace(root, "hw").open_store(readonly=True) as s:
        (b,) = s.iterations()
    assert b.status == "fail_bench"  # recorded as the bench's failure, nothing measured kept as a baseline
    assert hashes(repo) == before and git(repo, "status", "--porcelain") == ""


def test_a_metric_no_table_has_is_refused_before_the_table_question(tmp_path: Path) -> None:
    """Two written tables would be a question; a metric answer neither holds is the error,
    listing the names of both, never a question about the table first."""
    run = fake_run(tmp_path, "", {"a.csv": "N,triton_us,err\n64,1.0,0\n", "b.csv": "N,gbps\n64,812.5\n"})
    assert [q.key for q in onboard.propose(run).questions] == ["table"]
    with pytest.raises(BadInput) as e:
        onboard.propose(run, {"metric": "triton"})
    assert str(e.value) == (
        "kopt init --bench: --answer metric='triton': no such column among those the csv adapter "
        "produces from a.csv and b.csv; did you mean 'triton_us'? available: triton_us, gbps; "
        "nothing was created"
    )
    # a name one table has picks that table
    assert onboard.propose(run, {"metric": "gbps"}).target["csv"] == "b.csv"


@pytest.mark.parametrize(
    ("name", "guess"),
    [
        ("median", "median_us"),  # the unit suffix left out
        ("Median US", "median_us"),  # case and spacing
        ("mediun_us", "median_us"),  # a misspelling
        ("liger speed", "liger speed (ms)"),
        ("mean", "mean_us"),  # the shortest that starts with it
        ("n", "N"),  # not a measurement, but the same name but for case
        ("wallclock", None),
        ("", None),
    ],
)
def test_the_close_match(name: str, guess: str | None) -> None:
    available = ["min_us", "median_us", "mean_us", "mean_us_long", "liger speed (ms)"]
    assert close_name(name, available, ["N", "dtype"]) == guess
