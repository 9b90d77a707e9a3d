"""A keep's confirmation through the whole engine, on the served fake target (its per-tree
server burns the CPU time it reports; its hostile knobs are the candidate's kernel.json):
two freshly started servers decide only what the keep claims, in a few looks, and on a
target without a GPU the OS's accounting of every look weighs the seconds the bench claims.
The record, `kopt status --json` and results.md name what confirmed each keep."""

from __future__ import annotations

from kopt_supervisor.engine import api
from kopt_supervisor.engine.decide.confirmation import MAX_LOOKS
from kopt_supervisor.engine.decide.external_truth import TIMER_ONLY
from kopt_supervisor.engine.decide.verdict import GUARD_CLASS
from kopt_supervisor.engine.workspace import Workspace
from kopt_supervisor.kopt_tui.cli import main as kopt
from tests.engine import test_served_trees
from tests.engine.test_served_trees import record, run

served = test_served_trees.served
"""The fixture: a served fake target initialised, its servers' starts logged."""

GUARDED = "production = \"cls == 'large'\"\n"
"""The small rows are a non-production guard class ([decide].production_verdicts)."""
GAIN30 = "do:k['speed'] = {c: v * 0.7 for c, v in k['speed'].items()}; json.dump(k, open('kernel.json', 'w'))"
NO_CALLS = 'ignore = ["calls"]\n'
"""No [target].calls: the OS's accounting has nothing to weigh (the confirmation's looks are
then the claim rule's alone)."""
CALLS = "400"
"""Timed calls per config: a look's timed work is ~150 ms of CPU, many of the CPU clock's
10 ms ticks (the default 100 calls, ~37 ms a look, leave a 5% gain under a tick)."""


# A real gain kept after a few fresh looks, naming its external truth: checked on v1 of
# tests/engine/test_served_trees.py::test_two_processes_per_decision_abba_one_seed_per_look_and_the_costs_recorded
# (the same 30% gain at 400 calls, the same served target: one run, not two).


def test_the_guard_class_does_not_make_the_confirmation_wait(fake_env, tmp_path, monkeypatch):
    """The non-production rows guard the keep (they may be 10% slower) and the production
    class is what the keep claims: the confirmation ends as soon as that class shows its gain,
    whatever the guard's interval (no [target].calls: no OS accounting asks for more looks)."""
    logs = tmp_path / "serve_log"
    logs.mkdir()
    monkeypatch.setenv("FAKE_SERVE_LOG", str(logs / "serve.log"))
    repo, root = fake_env(
        ["gain5"],
        files=("serve.py", "kernel.json"),
        toml_file="serve_kopt.toml",
        toml_replace={
            "timeout_s = 20\n\n[decide]": f'timeout_s = 20\nwritable = ["{logs}"]\n{GUARDED}\n[decide]\n'
            "production_verdicts = true",
            'calls = "calls"\n': NO_CALLS,
        },
    )
    assert kopt(["--root", str(root), "init", "--repo", str(repo), "--tag", "g"]) == 0
    ws = Workspace(root, "g")
    assert run(ws, 1) == ["baseline", "keep"]
    conf = record(ws, 1)["confirmation"]
    assert conf["outcome"] == "confirmed" and conf["looks"] < MAX_LOOKS, conf
    assert conf["classes"][GUARD_CLASS]["claimed"] is None and conf["classes"][GUARD_CLASS]["state"] == "within"
    assert [c for c, x in conf["classes"].items() if x["claimed"] is not None] == ["cls=large"]


def test_a_timer_patch_on_the_cpu_is_refuted_by_the_os_and_not_kept_nor_a_suspicious_one(served, monkeypatch):
    """v1: the candidate's rows say 60% of the time it really burns: a 1.7x 'gain' the bench's
    own statistics and the fresh servers both see (the patch runs there too), and the OS's CPU
    and wall accounting do not. v2, on the same BEST (the baseline): 20%, beyond
    suspicious_speedup (a run of its own until 2026-11-30)."""
    monkeypatch.setenv("FAKE_CALLS", CALLS)
    ws, _ = served(["knob:timer_patch=0.6", "knob:timer_patch=0.2"])
    assert run(ws, 2) == ["baseline", "rejected", "rejected"]
    v1 = record(ws, 1)
    decision = v1["decision"]
    assert "external_truth_refutes" in decision["flags"], decision
    assert decision["reason"].startswith("the OS's accounting shows"), decision["reason"]
    assert "(bench: " in decision["reason"]
    assert v1["external_truth"]["kind"] == "os_time" and v1["external_truth"]["outcome"] == "refuted"
    assert v1["confirmation"]["outcome"] == "confirmed"  # the fresh servers alone could not tell
    assert api.status(ws)["external_truth"]["version"] is None  # BEST is still the baseline
    # v2: refuted by the CPU clock; on a loaded machine, where a burst of load on best's looks can
    # make the wall clock seem to show the claim, the OS's word is at worst inconclusive (review)
    flags = set(record(ws, 2)["decision"]["flags"])
    assert flags & {"external_truth_refutes", "external_truth_inconclusive"}, flags


def test_a_suspicious_real_speedup_is_kept_once_the_stronger_checks_agree(served, monkeypatch):
    """A real 3.7x step (the kernel burns 27% of the time): beyond suspicious_speedup, so it
    needs the stronger checks; on the CPU the fresh servers' audited looks and the OS's
    accounting agree, and the keep stands, saying so."""
    monkeypatch.setenv("FAKE_CALLS", CALLS)
    ws, _ = served([GAIN30.replace("0.7", "0.27")])
    assert run(ws, 1) == ["baseline", "keep"]
    decision = record(ws, 1)["decision"]
    assert "needs_stronger_checks" not in decision["flags"] and "suspicious_speedup" in decision["flags"]
    assert "the stronger checks agree" in decision["reason"] and "the OS's accounting shows" in decision["reason"]


def test_a_keep_without_timed_seconds_is_confirmed_by_the_benchs_timer_only(fake_env, tmp_path, monkeypatch):
    """No [target].calls: the OS has no claimed seconds to weigh, and the keep says so."""
    logs = tmp_path / "serve_log"
    logs.mkdir()
    monkeypatch.setenv("FAKE_SERVE_LOG", str(logs / "serve.log"))
    repo, root = fake_env(
        ["gain5"],
        files=("serve.py", "kernel.json"),
        toml_file="serve_kopt.toml",
        toml_replace={
            'calls = "calls"\n': NO_CALLS,
            "timeout_s = 20\n\n[decide]": f'timeout_s = 20\nwritable = ["{logs}"]\n\n[decide]',
        },
    )
    assert kopt(["--root", str(root), "init", "--repo", str(repo), "--tag", "n"]) == 0
    ws = Workspace(root, "n")
    assert run(ws, 1) == ["baseline", "keep"]
    v1 = record(ws, 1)
    assert v1["external_truth"]["kind"] == "none" and v1["external_truth"]["reason"].startswith(TIMER_ONLY)
    assert "[target].calls" in v1["external_truth"]["reason"]
    assert TIMER_ONLY in v1["decision"]["reason"]
    assert api.status(ws)["external_truth"]["timer_only"] == [1]
    assert kopt(["--root", str(root), "report", "n"]) == 0
    assert f"{TIMER_ONLY.capitalize()}: v1" in (ws.dir / "results.md").read_text()
