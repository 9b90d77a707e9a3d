"""The `kopt` command line through engine.api, on the fake CPU target: what each command
prints and returns, for the paths the other suites do not drive (init --bench, run
--foreground, memory, ls, the demo's catalog hand-over)."""

from __future__ import annotations

import json
import sys

from kopt_supervisor.engine import api
from kopt_supervisor.engine.workspace import Workspace
from kopt_supervisor.kopt_tui.cli import main as kopt


def test_init_with_bench_overrides_the_repo_config_and_needs_the_rest(fake_env, capsys, tmp_path):
    repo, root = fake_env([])
    assert (
        kopt(["--root", str(root), "init", "--repo", str(repo / "."), "--tag", "b", "--bench", "python other.py"]) == 0
    )
    out = capsys.readouterr().out
    assert f"created {root / 'b'}" in out and "next: kopt run b --root" in out
    cfg = Workspace(root, "b").load_config()
    assert cfg.target.bench == "python other.py" and cfg.target.metric == "us"  # the rest from REPO/kopt.toml
    # no kopt.toml at all: kopt runs the bench once to propose one; a bench that fails gives
    # nothing to propose from, and the error names its output
    (repo / "kopt.toml").unlink()
    assert (
        kopt(["--root", str(root), "init", "--repo", str(repo), "--tag", "c", "--bench", f"{sys.executable} b.py"]) == 2
    )
    err = capsys.readouterr().err
    assert "the bench exited 2 (" in err and "b.py" in err and "init_bench.out" in err
    log = err.split("see its output: ")[1].split(" and ")[0]
    assert "b.py" in open(log[: -len(".out")] + ".err").read()  # the log is kept where the message says
    assert not (repo / "kopt.toml").exists()
    bad = tmp_path / "bad.toml"
    bad.write_text("[target\n")
    assert (
        kopt(
            [
                "--root",
                str(root),
                "init",
                "--repo",
                str(repo),
                "--tag",
                "d",
                "--config",
                str(bad),
                "--bench",
                "python b.py",
            ]
        )
        == 2
    )
    assert f"{bad}: not valid TOML" in capsys.readouterr().err
    assert (
        kopt(["--root", str(root), "init", "--repo", str(repo), "--tag", "e", "--config", str(tmp_path / "no.toml")])
        == 2
    )
    err = capsys.readouterr().err
    assert err.strip().endswith("no.toml: no such config file (--config)"), err  # the file it was given
    assert not (root / "c").exists() and not (root / "d").exists() and not (root / "e").exists()


def test_run_in_the_foreground_then_read_it_back(fake_env, capsys):
    repo, root = fake_env(["gain5"])
    r = ["--root", str(root)]
    assert kopt([*r, "init", "--repo", str(repo), "--tag", "f"]) == 0
    capsys.readouterr()
    assert kopt([*r, "run", "f", "--foreground", "--max-iters", "1"]) == 0
    st = api.status(Workspace(root, "f"))
    assert st["candidates"] == 1 and st["keeps"] == 1 and st["stop_reason"].startswith("--max-iters 1")
    capsys.readouterr()

    assert kopt([*r, "ls"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("f "))
    assert "stopped" in line and "v1" in line and api.fmt.speedup(st["best_speedup"]) in line

    assert kopt([*r, "status", "f"]) == 0
    assert f"best speedup {api.fmt.speedup(st['best_speedup'])}" in capsys.readouterr().out

    assert kopt([*r, "memory", "f", "show", "v1"]) == 0
    rec = json.loads(capsys.readouterr().out)
    assert rec["version"] == 1 and rec["status"] == "keep" and rec["masked"] is False
    assert kopt([*r, "memory", "f", "mask", "v1"]) == 0
    assert "mask: masked v1" in capsys.readouterr().out
    assert kopt([*r, "memory", "f", "summary", "--json"]) == 0
    assert [x["version"] for x in json.loads(capsys.readouterr().out)] == [0]  # the masked one left out
    assert kopt([*r, "memory", "f", "list", "--json"]) == 0
    assert [x["version"] for x in json.loads(capsys.readouterr().out)] == [0, 1]
    assert kopt([*r, "memory", "f", "show", "v7"]) == 2
    assert "v7 does not exist" in capsys.readouterr().err
    assert kopt([*r, "memory", "f", "show", "seven"]) == 2
    assert "'seven' is not an iteration" in capsys.readouterr().err


def test_the_demo_command_hands_the_engine_the_bundled_catalog(monkeypatch, tmp_path, capsys):
    """`kopt demo` names the catalog's kernels and its materialize to the engine (which
    imports no kernel itself); an unknown kernel is refused with the bundled names."""
    from kopt_supervisor.kernels import catalog

    seen: dict[str, object] = {}

    def prepare_demo(root, kernel, tag, *, kernels, materialize, headless, profile):
        seen.update(kernel=kernel, kernels=kernels, materialize=materialize, headless=headless, profile=profile)
        raise api.BadInput("stop here")

    monkeypatch.setattr(api, "prepare_demo", prepare_demo)
    assert kopt(["--root", str(tmp_path), "demo", "--headless", "--kernel", "adaln", "--no-profile"]) == 2
    assert seen == {
        "kernel": "adaln",
        "kernels": catalog.KERNELS,
        "materialize": catalog.materialize,
        "headless": True,
        "profile": False,
    }
    monkeypatch.undo()
    assert kopt(["--root", str(tmp_path), "demo", "--headless", "--kernel", "nope"]) == 2
    assert f"unknown demo kernel 'nope' (bundled: {', '.join(sorted(catalog.KERNELS))})" in capsys.readouterr().err


def test_only_a_candidate_awaiting_review_can_be_answered(runs_root, capsys):
    """The one pending-review rule (projections.awaiting_review): a borderline candidate masked by
    a restart is out of the history and no longer awaits an answer; neither does a keep."""
    from tests.tui.fixtures import PENDING, REVIEW

    r = ["--root", str(runs_root)]
    assert api.status(Workspace(runs_root, REVIEW))["pending_reviews"] == [PENDING]
    assert kopt([*r, "accept", REVIEW, "v1"]) == 2
    assert "v1 is not awaiting review (status keep)" in capsys.readouterr().err
    # a restart masks it with the rest of the later history; then there is nothing to answer
    assert kopt([*r, "restart", REVIEW, "--from", "v1"]) == 0
    assert api.status(Workspace(runs_root, REVIEW))["pending_reviews"] == []
    capsys.readouterr()
    assert kopt([*r, "accept", REVIEW, f"v{PENDING}"]) == 2
    assert f"v{PENDING} is not awaiting review (status borderline, masked)" in capsys.readouterr().err


def test_status_lists_every_lanes_review_and_each_lanes_state(tmp_path, capsys):
    """kopt status on the frozen lanes runs: the reviews of two lanes in the order they
    opened, each lane's step, interval and GPU; an answer sent shows, a second is refused."""
    from tests.tui.fixtures import LANES4, LANES_REVIEW, install_runs

    root = install_runs(tmp_path / "workspaces", (LANES_REVIEW, LANES4))
    r = ["--root", str(root)]
    assert kopt([*r, "status", LANES4]) == 0
    out = capsys.readouterr().out
    assert "pending reviews v1 (lane 0)\n" in out
    assert "  lane 0: v1 awaiting your review · cls=large -70.0% faster [-83.4, -45.7] · GPU 1 on local\n" in out
    assert (
        "  lane 1: v2 deciding · round 3 of up to 4 · cls=large -1.1% faster [-18.8, +20.5] · GPU 2 on local\n" in out
    )
    assert "  lane 2: waiting for an idle GPU · no GPU known\n" in out
    assert "  lane 3: v3 proposing · proposer (command) · GPU 3 on local\n" in out
    assert kopt([*r, "accept", LANES_REVIEW, "v2", "--why", "worth it"]) == 0
    capsys.readouterr()
    assert kopt([*r, "reject", LANES_REVIEW, "v2"]) == 2
    assert "v2 already has an answer waiting for the engine: accept" in capsys.readouterr().err
    assert kopt([*r, "status", LANES_REVIEW]) == 0
    out = capsys.readouterr().out
    assert "pending reviews v1 (lane 0), v2 (lane 1, accept sent)\n" in out
    assert (
        "  lane 1: v2 accept sent · the engine applies it · cls=large -0.5% faster [-0.6, -0.3] · GPU 2 on local" in out
    )
    assert kopt([*r, "status", LANES_REVIEW, "--json"]) == 0
    st = json.loads(capsys.readouterr().out)
    assert [(x["version"], x["lane"], x["answer"] and x["answer"]["kind"]) for x in st["reviews"]] == [
        (1, 0, None),
        (2, 1, "accept"),
    ]
