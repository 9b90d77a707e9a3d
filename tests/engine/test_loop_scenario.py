"""The whole loop on the fake target with a scripted proposer (issue 2's acceptance test)."""

from __future__ import annotations

import json

import psutil
import pytest

from kopt_supervisor.engine import api
from kopt_supervisor.engine.daemon import run_engine
from kopt_supervisor.engine.workspace import Workspace
from kopt_supervisor.kopt_tui.cli import main as kopt
from tests.conftest import git


def statuses(ws: Workspace) -> list[str]:
    with ws.open_store(readonly=True) as s:
        return [it.status for it in s.iterations()]


@pytest.mark.slow
def test_scripted_run_reaches_every_status_and_stops_after_its_consecutive_regressions(fake_env, capsys):
    # [stop].consecutive_regressions = 2, not the default 5: the stop, its reason, the count and
    # the streak's list (v3's regression reset by v5's keep, never part of it) are the same checks
    # on two regressions instead of five (3 iterations, 18 bench runs less). The default of 5 is
    # tests/engine/test_config.py's; N regressions stopping the run and a non-regression resetting
    # the count, tests/engine/test_machine.py::test_three_regressions_stop_the_run_and_a_tie_resets_the_count.
    script = [
        "gain5",
        "nochange",
        "loss5",
        "wrong",
        "wrong_fixed_on_repair",
        "protected",
        "split",
        "hang_bench",
        "loss5",
        "loss5",
        "gain5",
    ]
    repo, root = fake_env(
        script,
        toml_replace={"timeout_s = 20\n\n[decide]": "timeout_s = 4\n\n[decide]"},
        extra_toml="\n[stop]\nconsecutive_regressions = 2\n",
    )
    assert kopt(["--root", str(root), "init", "--repo", str(repo), "--tag", "t1"]) == 0
    ws = Workspace(root, "t1")
    base = git(repo, "rev-parse", "HEAD")

    assert run_engine(ws) == 0

    got = statuses(ws)
    assert got == [
        "baseline",
        "keep",
        "fail_propose",
        "regression",
        "fail_correctness",
        "keep",
        "fail_protected",
        "split",
        "fail_bench",
        "regression",
        "regression",
    ]
    st = api.status(ws)
    assert st["state"] == "stopped"
    assert st["stop_reason"] == "2 consecutive measured regressions"
    assert st["consecutive_regressions"] == 2
    assert [r["version"] for r in st["recent_regressions"]] == [9, 10]

    # git: two keeps on the run's branch, each a child of the previous best; worktrees at best.
    log = git(repo, "log", "--format=%H %P", "kopt/t1").splitlines()
    assert len(log) == 3 and log[-1].split()[0] == base
    best = log[0].split()[0]
    assert st["best_commit"] == best
    assert git(ws.best, "rev-parse", "HEAD") == best
    assert git(ws.cand, "rev-parse", "HEAD") == best
    assert git(ws.cand, "status", "--porcelain") == ""
    speed = json.loads((ws.best / "kernel.json").read_text())["speed"]
    assert abs(speed["small"] - 0.95 * 0.95) < 1e-9  # v1 and the repaired v5 kept
    msg = git(repo, "log", "-1", "--format=%B", "kopt/t1")
    assert "wrong_fixed_on_repair" in msg and "kopt v5" in msg

    # memory projections exist for every iteration and match the store
    for v, status in enumerate(got):
        rec = json.loads(ws.memory_path(v).read_text())
        assert rec["status"] == status and rec["masked"] is False
    v5 = json.loads(ws.memory_path(5).read_text())
    assert v5["repair_attempts"] == 1 and v5["commit"]
    v4 = json.loads(ws.memory_path(4).read_text())
    assert v4["repair_attempts"] == 3
    v8 = json.loads(ws.memory_path(8).read_text())
    assert "timed out" in v8["decision"]["reason"]
    v6 = json.loads(ws.memory_path(6).read_text())
    assert "bench.py" in v6["decision"]["reason"]
    v7 = json.loads(ws.memory_path(7).read_text())
    assert v7["classes"]["cls=small"]["verdict"] == "improved"
    assert v7["classes"]["cls=large"]["verdict"] == "regressed"

    perf = ws.performance.read_text()
    assert perf.count("| keep |") == 2 and "| baseline |" in perf
    assert "## Stop Summary" in perf and "2 consecutive measured regressions" in perf
    # no benchmark process left behind
    left = [p.pid for p in psutil.process_iter(["cmdline"]) if str(ws.dir) in " ".join(p.info["cmdline"] or [])]
    assert left == []


@pytest.mark.slow
def test_bench_outputs_in_the_tree_are_never_committed(fake_env, monkeypatch):
    # v1 a keep on the baseline's tree, v2 a keep through a repair on v1's: every run of either
    # (eval, confirmation, the re-decision after the formatter: 18 bench runs a keep) writes
    # results/out.csv into its tree, and neither keep commits it; a second plain keep between
    # them (the test ran three keeps) checked nothing these two do not
    repo, root = fake_env(
        ["gain5", "wrong_fixed_on_repair"],
        toml_replace={'csv = "-"': 'csv = "results/*.csv"'},
        extra_toml="\n[format]\ncommand = \"python3 -c \\\"open('kernel.json','a').write('\\\\n')\\\"\"\n",
    )
    monkeypatch.setenv("FAKE_CSV_TO", "results/out.csv")
    assert kopt(["--root", str(root), "init", "--repo", str(repo), "--tag", "o"]) == 0
    ws = Workspace(root, "o")
    assert run_engine(ws, max_iters=2) == 0
    assert statuses(ws) == ["baseline", "keep", "keep"]
    files = git(repo, "ls-tree", "-r", "--name-only", "kopt/o").splitlines()
    assert "results/out.csv" not in files and sorted(files) == ["bench.py", "kernel.json", "kopt.toml"]
    # the formatter's change is part of the keep; the bench's CSV was read from results/
    assert (ws.best / "kernel.json").read_text().endswith("}\n")  # json.dump writes no newline; the formatter did
    assert (ws.log_dir(1) / "eval_r0_cand.csv").exists()


def test_production_verdicts_let_the_grid_guard_but_not_vote(fake_env):
    # n=128 is the "regression grid" here: 30% faster on it alone is no keep, and the
    # decision shows the guard class beside the production classes
    repo, root = fake_env(
        ['knob:speed_n={"128": 0.7}', "gain5"],
        toml_replace={
            'correct = "err == 0"': 'correct = "err == 0"\nproduction = "n != 128"',
            "[decide]\n": "[decide]\nproduction_verdicts = true\n",
        },
    )
    assert kopt(["--root", str(root), "init", "--repo", str(repo), "--tag", "pv"]) == 0
    ws = Workspace(root, "pv")
    assert run_engine(ws, max_iters=2) == 0
    with ws.open_store(readonly=True) as s:
        its = s.iterations()
    # v1 is no keep: a tie, or on the suite's loaded machine (run FL, 2026-12-01) a production
    # class still undecided at the final look sent it to review, whose default rejects
    assert [it.status for it in its] in (["baseline", "tie", "keep"], ["baseline", "rejected", "keep"])
    # the baseline's classes are the ones decisions vote in: the guard beside the production ones
    base = its[0].record["classes"]
    assert set(base) == {"cls=small", "cls=large", "guard (non-production)"}
    assert base["cls=small"]["configs"] == 1 and base["guard (non-production)"]["configs"] == 1
    with ws.open_store(readonly=True) as s:
        assert s.get("classes") == ["cls=large", "cls=small"]  # what proposers target: the real classes
    grid_only = its[1].record
    assert set(grid_only["classes"]) == {"cls=small", "cls=large", "guard (non-production)"}
    assert grid_only["classes"]["guard (non-production)"]["verdict"] == "improved"
    # the production classes: tied, or on the suite's loaded machine undecided at the final look
    # (run CD, cls=small); never improved: the guard's 30% alone made v1 a tie, not a keep
    assert grid_only["classes"]["cls=small"]["verdict"] in ("tied", "undecided")
    assert all(grid_only["classes"][c]["verdict"] != "improved" for c in ("cls=small", "cls=large"))
    if its[1].status == "rejected":  # only for a production class left undecided, never for the guard's gain
        assert "undecided" in {grid_only["classes"][c]["verdict"] for c in ("cls=small", "cls=large")}


@pytest.mark.slow
def test_a_claimed_saving_the_process_never_spent_goes_to_review(fake_env, monkeypatch, driven_clock):
    """[target].calls: the bench says how many timed calls each row's latency stands for, so
    the process-level decision knows how many seconds the candidate claims to have saved.
    v1's timer lies (its rows say 2x faster while its calls take as long as ever): the claim
    is not in its process's wall time, and the keep goes to review (the policy rejects). v2
    is really faster: the wall time fell with the claim, and it is kept. v1's review times out
    on the driven clock (nobody answers), not in 2 s of real time."""
    monkeypatch.setenv("FAKE_REPS", "2000")  # ~0.75 s of timed calls per bench run
    repo, root = fake_env(
        ["knob:fast=2", "do:speed['small'] *= 0.5; speed['large'] *= 0.5; json.dump(k, open('kernel.json', 'w'))"],
        toml_replace={'metric = "us"': 'metric = "us"\ncalls = "reps"'},
    )
    assert kopt(["--root", str(root), "init", "--repo", str(repo), "--tag", "wall"]) == 0
    ws = Workspace(root, "wall")
    assert run_engine(ws, max_iters=2) == 0
    with ws.open_store(readonly=True) as s:
        lie, real = s.iteration(1), s.iteration(2)
    assert lie is not None and lie.status == "rejected", lie.record["decision"]
    flags, reason = lie.record["decision"]["flags"], lie.record["decision"]["reason"]
    # the decision's wall-time rule sees it; where the looks' noise hides it there (seen once
    # under the suite's load), the confirmation's OS accounting over every look refutes it
    assert {"wall_time_unexplained", "external_truth_refutes"} & set(flags), (flags, reason)
    if "wall_time_unexplained" in flags:
        assert "but its process wall time fell by" in reason, reason
    else:
        assert "the claim is not a measurement of faster code" in reason, reason
    runs = lie.record["bench_runs"]["eval"]
    assert all(r["timed_s"] is not None and r["timed_s"] > 0.3 for r in runs)
    assert real is not None and real.status == "keep", real.record["decision"]
    assert "wall_time_unexplained" not in real.record["decision"]["flags"]
