"""`kopt demo` as the README runs it, on this machine (its CPU on CI): the bundled kernel is
materialised, its frozen kopt.toml loads, and the loop measures a baseline and decides
candidates of the `tune` proposer (through Triton's interpreter when there is no GPU)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kopt_supervisor.engine import BadInput, api
from kopt_supervisor.engine.config.toml_io import load as load_config
from kopt_supervisor.engine.store import Store
from kopt_supervisor.engine.workspace import Workspace
from kopt_supervisor.kernels import catalog
from tests.conftest import installed

pytestmark = installed("torch", "triton")


BUNDLED = {"kernels": catalog.KERNELS, "materialize": catalog.materialize}
"""What `kopt demo` hands the engine: the engine never imports the bundled kernels itself."""


@pytest.mark.parametrize("kernel", sorted(catalog.KERNELS))
def test_prepare_demo_on_a_machine_without_a_gpu(tmp_path: Path, monkeypatch, kernel: str) -> None:
    monkeypatch.setattr(api, "has_gpu", lambda: False)
    ws, gpu = api.prepare_demo(tmp_path, kernel, "t", headless=True, **BUNDLED)
    assert not gpu and ws.dir == tmp_path / "t"
    cfg = load_config(ws.dir / "kopt.toml")  # the frozen copy, as the engine will read it
    assert set(cfg.propose.tune.space) == set(catalog.CPU_PARAMS) and cfg.decide.review_timeout_s == 0
    with Store(ws.db_path) as store:
        assert store.get("notice") == api.CPU_NOTICE and store.get("demo")["gpu"] is False
    with pytest.raises(BadInput, match="exists already"):
        api.prepare_demo(tmp_path, kernel, "t", **BUNDLED)
    with pytest.raises(BadInput, match="unknown demo kernel 'nope'"):
        api.prepare_demo(tmp_path, "nope", **BUNDLED)


def test_prepare_demo_takes_whatever_catalog_it_is_handed(tmp_path: Path, monkeypatch) -> None:
    """The engine side knows no kernel by name: it materialises what the caller names, with
    the caller's function, and says which kernels it was given when asked for another."""
    monkeypatch.setattr(api, "has_gpu", lambda: True)
    calls: list[tuple[str, Path, dict]] = []

    def materialize(name: str, dest: Path, naive: bool = True, **kw) -> None:
        calls.append((name, dest, {"naive": naive, **kw}))
        (dest / "kopt.toml").write_text('[target]\nbench = "python bench.py"\nmetric = "us"\n')
        (dest / "bench.py").write_text("print('config,us')\n")

    ws, gpu = api.prepare_demo(tmp_path, "toy", "t", kernels={"toy"}, materialize=materialize)
    assert gpu and calls == [
        (
            "toy",
            tmp_path / ".repos" / "t",
            {"naive": True, "cpu": False, "review_timeout_s": api.TUI_REVIEW_S, "profile": True},
        )
    ]
    assert (tmp_path / ".repos" / "t" / "bench.py").exists() and ws.load_config().target.metric == "us"
    with pytest.raises(BadInput, match=r"unknown demo kernel 'rmsnorm' \(bundled: toy\)"):
        api.prepare_demo(tmp_path, "rmsnorm", "u", kernels={"toy"}, materialize=materialize)


def test_a_failed_materialisation_leaves_no_repo_behind(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(api, "has_gpu", lambda: False)

    def broken(name: str, dest: Path, naive: bool = True, **kw) -> None:
        (dest / "half-written").write_text("x")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        api.prepare_demo(tmp_path, "toy", "t", kernels={"toy"}, materialize=broken)
    assert not (tmp_path / ".repos" / "t").exists() and not (tmp_path / "t").exists()


@pytest.mark.slow
def test_kopt_demo_headless_runs_the_loop_as_the_readme_does(tmp_path: Path) -> None:
    # on this machine's path: the interpreter without a GPU (CI), the real kernel with one;
    # beside a package importable as `kernels` (Hugging Face's, installed with transformers)
    # and one importable as `engine`: kopt's own modules live under kopt_supervisor only
    gpu = api.has_gpu()
    shadow = tmp_path / "site"
    for name in ("kernels", "engine"):
        (shadow / name).mkdir(parents=True)
        (shadow / name / "__init__.py").write_text(f"raise ImportError('the unrelated {name} package')\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "TRITON_INTERPRET")}
    env["PYTHONPATH"] = str(shadow)
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "kopt_supervisor.kopt_tui.cli",
            "--root",
            str(tmp_path),
            "demo",
            "--headless",
            "--kernel",
            "rmsnorm",
            "--max-iters",
            "1",
            "--tag",
            "d",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=400,
        cwd=tmp_path,
    )
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    assert ("Timings are CPU timings" in res.stdout) is not gpu
    st = api.status(Workspace(tmp_path, "d"))
    assert st["candidates"] == 1 and st["stop_reason"].startswith("--max-iters 1")
    # the candidate was measured and decided, not failed: the loop ran on the real kernel,
    # and the naive start's first step (a wider tile for every class) is a clear keep
    line = res.stdout.split("v1: ")[1].split("\n")[0]
    assert line.startswith("keep"), line
    assert st["keeps"] == 1 and "best speedup over the naive start" in res.stdout
    # one served process per tree (never both trees in one), each of which answered its
    # looks and audits; best's process kept while BEST stays and started anew once it moves
    # is checked on the fake target (tests/engine/test_served_trees.py::
    # test_bests_process_is_kept_while_best_stays_and_the_candidates_is_new_per_decision).
    # The demo ran to a second candidate (a tie, run to 10 interpreted looks) until
    # 2026-11-29: ~15 CPU-s of a suite that must fit in 8 minutes on 2 cores.
    ws = Workspace(tmp_path, "d")
    # best's process is the one its baseline started (the baseline's looks, then v1's: no
    # process-level run of the bench, no second start); the candidate's started for v1
    assert not list(ws.log_dir(0).glob("baseline_r*.out")) and not list(ws.log_dir(1).glob("eval_best_serve*"))
    for side, version, name in (("best", 0, "baseline_best_serve*.out"), ("cand", 1, "eval_cand_serve*.out")):
        served = list(ws.log_dir(version).glob(name))
        assert len(served) == 1, (side, served)
        replies = served[0].read_text().split()
        assert "done" in replies and "audited" in replies
        if side == "best":
            n_looks = len(list(ws.log_dir(0).glob("baseline_r*_best.csv"))) + len(
                list(ws.log_dir(1).glob("eval_r*_best.csv"))
            )
            assert replies.count("done") == n_looks >= 2 + 3, replies
    looks = sorted(ws.log_dir(1).glob("eval_r*_cand.csv"))
    assert len(looks) >= 3 and len(list(ws.log_dir(1).glob("eval_r*_cand_audit.json"))) == len(looks)
    assert "calls" in looks[0].read_text().splitlines()[0].split(",")
