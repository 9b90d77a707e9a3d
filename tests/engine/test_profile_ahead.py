"""A keep's profile started ahead (loop/profile_runs.py `HeldProfile`, [profile].ahead): on a
served GPU target the profile a keep would take first starts with the decision and holds; it
goes on only once the decision keeps, and is told to stop when it does not. A profile command that does not hold fails that keep's profile and turns
profiles ahead off for the run. Scripted fake GPU, the stand-in ncu, the fake served target,
and the fake bench as the profile command (it holds as kopt's harness does)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from kopt_supervisor.engine.workspace import Workspace
from kopt_supervisor.kopt_tui.cli import main as kopt
from tests.conftest import git
from tests.engine.test_gate_in_loop import FAST_GATE, GPU, NCU_BIN
from tests.engine.test_served_trees import record, run, starts


def served_gpu(
    fake_env,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    script: list[str],
    start: dict | None = None,
    *,
    prepare: bool = False,
    profile: str = "",
) -> tuple[Workspace, Path]:
    """`prepare`: the served target answers `prepare` ([target].serve_prepare); `profile`: more
    [profile] keys."""
    logs = tmp_path / "serve_log"
    logs.mkdir()
    log = logs / "serve.log"
    monkeypatch.setenv("FAKE_SERVE_LOG", str(log))
    gpus = tmp_path / "gpus.json"
    gpus.write_text(json.dumps([[GPU]]))
    monkeypatch.setenv("KOPT_FAKE_GPUS", str(gpus))
    monkeypatch.setenv("KOPT_GPU_CLAIMS_DIR", str(tmp_path / "claims"))
    monkeypatch.setenv("PATH", f"{NCU_BIN}:{__import__('os').environ['PATH']}")
    repo, root = fake_env(
        script,
        files=("serve.py", "kernel.json", "bench.py"),
        toml_file="serve_kopt.toml",
        toml_replace={
            "timeout_s = 20\n\n[decide]": f'timeout_s = 20\nwritable = ["{logs}"]\n\n[decide]',
            **dict([FAST_GATE]),
            **({SERVE: f"{SERVE}serve_prepare = true\n"} if prepare else {}),
        },
        extra_toml=f'\n[profile]\nkind = "ncu"\nkernel = "fake"\ncommand = "{sys.executable} bench.py"\n{profile}',
    )
    if start:
        kernel = repo / "kernel.json"
        kernel.write_text(json.dumps({**json.loads(kernel.read_text()), **start}))
        git(repo, "commit", "-qam", "the starting tree's knobs")
    assert kopt(["--root", str(root), "init", "--repo", str(repo), "--tag", "a"]) == 0
    return Workspace(root, "a"), log


SERVE = 'csv = "-"\n'


def events(log: Path) -> list[tuple[str, str, float, str]]:
    """(word, tree folder, time, look number or '') of the log's lines that matter here."""
    out = []
    for line in log.read_text().splitlines():
        w = line.split()
        if w[0] in ("held", "go", "stopped"):  # the profile: held PID CWD TIME
            out.append((w[0], Path(w[2]).name, float(w[3]), ""))
        elif w[0] in ("look", "done"):  # the served sides: look|done N SEED PID CWD TIME
            out.append((w[0], Path(w[4]).name, float(w[5]), w[1]))
    return out


def test_a_keeps_profile_starts_with_the_decision_holds_through_its_looks_and_goes_only_on_the_keep(
    fake_env, tmp_path, monkeypatch
):
    ws, log = served_gpu(fake_env, tmp_path, monkeypatch, ["gain30", "loss5"])
    statuses = run(ws, 2)
    assert statuses[:2] == ["baseline", "keep"] and statuses[2] != "keep", statuses
    taken = record(ws, 1)["profile"]["taken"]
    assert sorted(taken["ahead"]) == ["best", "cand"]  # the first keep: best's not reusable yet
    ev = events(log)
    held = [e for e in ev if e[0] == "held"]
    go = [e for e in ev if e[0] == "go"]
    # both in copies that say neither side (profile_runs.ProfiledTree): the same folder name, two labels
    assert [t for _, t, _, _ in held[:2]] == ["tree", "tree"] and len(go) == 2
    cwds = [Path(w[2]) for w in (ln.split() for ln in log.read_text().splitlines()) if w[0] == "held"]
    assert len({c.parent.name for c in cwds[:2]}) == 2 and all(c.parent.parent == ws.dir / "sandbox" for c in cwds)
    v1_looks = [e for e in ev if e[0] == "done" and e[3] != "" and int(e[3]) >= 0 and e[2] < go[0][2]]
    assert v1_looks, ev
    # started before the decision's measured looks ended; went on only after the last of them
    assert max(t for _, _, t, _ in held[:2]) < max(t for _, _, t, _ in v1_looks) < min(t for _, _, t, _ in go)
    # v2 (a loss): its candidate's profile started ahead (best's reused), told to stop and ended
    after = ev[ev.index(go[-1]) + 1 :]
    # held, then told to stop and ended at once (it may not live to log its "stopped"): never went on
    assert [w for w, _, _, _ in after if w in ("held", "go", "stopped")] in (["held"], ["held", "stopped"]), after
    assert not (ws.profiles / "v2" / "cand").exists()  # nothing of it handed over
    assert not list((ws.dir / "sandbox").iterdir())  # its copy removed
    # the profile pair confirmed the keep: no fresh confirmation server was started, none while
    # best was profiled (a candidate's imports there could slow best's kernels)
    assert starts(log, confirmation=True) == []


def test_the_baselines_early_profile_holds_through_its_runs_and_the_first_keep_profiles_one_tree(
    fake_env, tmp_path, monkeypatch
):
    """[profile].baseline "early" on a served GPU target: the baseline's own profile starts with
    its runs and holds through them (its imports and input draws beside them, nothing of the tree
    run: the harness holds before it), goes on once they end, and is the one a first keep
    reuses: that keep starts and takes its candidate's profile alone."""
    ws, log = served_gpu(fake_env, tmp_path, monkeypatch, ["gain30"], profile='baseline = "early"\n')
    statuses = run(ws, 1)
    assert statuses[:2] == ["baseline", "keep"], statuses
    v0, v1 = record(ws, 0), record(ws, 1)
    ev = events(log)
    held = [e for e in ev if e[0] == "held"]
    go = [e for e in ev if e[0] == "go"]
    assert len(held) == len(go) == 2, ev  # the baseline's, then the first keep's candidate's
    between = [e for e in ev if e[0] == "done" and held[0][2] < e[2] < go[0][2]]
    assert between, ev  # held while the baseline's looks ran; released after them
    assert said_of(ws, 0, "the profiles started ahead hold") and list(ws.log_dir(0).glob("profile_*_ahead.*"))
    assert set(v0["profile"]["taken"]["trees"]) == {"best"} and v0["profile"]["taken"]["seed"] == v0["profile"]["seed"]
    taken = v1["profile"]["taken"]
    assert taken["best_from"] == 0 and taken["ahead"] == ["cand"] and taken["seed"] == v0["profile"]["seed"]
    assert not (ws.profiles / "v1" / "best").exists() and v1["profile"]["outputs"]["against"] == "baseline"


def test_a_failed_baseline_stops_its_early_profile_and_leaves_nothing_of_it(fake_env, tmp_path, monkeypatch):
    """The baseline's early profile held through its runs: where they fail (here its server dies
    at its first look), the run ends, and the held profile is told to stop before it ever goes
    on, its copy of the tree removed (Baseline.measure; without it the copy stays behind)."""
    ws, log = served_gpu(fake_env, tmp_path, monkeypatch, [], start={"die_at": "0"}, profile='baseline = "early"\n')
    assert kopt(["--root", str(ws.root), "run", ws.tag, "--foreground", "--max-iters", "1"]) == 1
    assert record(ws, 0)["status"] == "fail_bench"
    ev = events(log)
    assert [w for w, _, _, _ in ev if w in ("held", "go", "stopped")] in (["held"], ["held", "stopped"]), ev
    assert not list((ws.dir / "sandbox").iterdir())  # its copy removed: nothing of it stays
    assert record(ws, 0).get("profile") is None


def said_of(ws: Workspace, v: int, words: str) -> list[str]:
    """The messages of v's events that hold `words`."""
    with ws.open_store(readonly=True) as s:
        return [e.message for e in s.events(version=v) if words in e.message]


def looks_of(ws: Workspace, log: Path, v: int) -> list[float]:
    """When v's decision's looks started (the served sides' `look` lines from v's start on)."""
    with ws.open_store(readonly=True) as s:
        it = s.iteration(v)
    assert it is not None and it.started_at is not None
    return [t for w, _, t, n in events(log) if w == "look" and n != "" and t >= it.started_at]


def unheld(log: Path) -> list[tuple[str, float]]:
    """(word, time) of the log's `unheld` and `unheld_end` lines: a profile command that ignored
    the hold, as it started and ended."""
    return [
        (w[0], float(w[3])) for w in (ln.split() for ln in log.read_text().splitlines()) if w[0].startswith("unheld")
    ]


def test_a_profile_command_that_does_not_hold_is_stopped_before_any_look_and_ahead_turns_off(
    fake_env, tmp_path, monkeypatch
):
    """A profile command that ignores KOPT_PROFILE_HOLD runs the tree and the profiler at once.
    The run's first profile started ahead is waited for before the decision's first look: one
    that ends without holding (here) is over before any look, ahead turns off for the run, and
    the keep's profile is taken as without it (found on the H200, 2026-12-02: Liger's imported
    bench profiled beside the decision's looks, and the GPU gate then held the run 10 minutes)."""
    ws, log = served_gpu(fake_env, tmp_path, monkeypatch, ["gain30", "gain30"], start={"ignores_hold": True})
    statuses = run(ws, 2)
    v1, v2 = record(ws, 1), record(ws, 2)
    assert statuses[1:3] == ["keep", "keep"], (v1["decision"], v2["decision"])
    assert v1["profile"]["taken"]["ahead"] == [] and v2["profile"]["taken"]["ahead"] == []
    ran = unheld(log)
    ahead = [t for w, t in ran if w == "unheld"]
    assert len(ahead) >= 1 and ran[0][0] == "unheld", ran
    first_end = next(t for w, t in ran if w == "unheld_end")  # the one waited for
    v1_looks = looks_of(ws, log, 1)
    assert v1_looks and first_end < min(v1_looks), (ran, v1_looks[:2])
    said = said_of(ws, 1, "did not hold")
    assert said and 'set [profile].ahead = "off"' in said[0] and "ended without holding" in said[0], said
    # v1's (the candidate's, and best's unless it was stopped before it began), all over before
    # its looks; none started ahead for v2
    assert len(ahead) <= 2 and max(t for _, t in ran) < min(v1_looks), ran


def test_a_profile_command_still_running_without_holding_is_killed_before_any_look(fake_env, tmp_path, monkeypatch):
    """The other way not to hold: still running, no `go.held`, when the wait ends. It is
    stopped (killed: it never wrote its end) before the decision's first look."""
    monkeypatch.setattr("kopt_supervisor.engine.loop.profile_runs.ACK_WAIT_S", 0.5)
    monkeypatch.setenv("FAKE_SLEEP", "3")  # the profile command alone: the served sides are serve.py
    ws, log = served_gpu(fake_env, tmp_path, monkeypatch, ["gain30"], start={"ignores_hold": True})
    statuses = run(ws, 1)
    v1 = record(ws, 1)
    assert statuses[1] == "keep" and v1["profile"]["taken"]["ahead"] == [], v1["decision"]
    ran = unheld(log)
    v1_looks = looks_of(ws, log, 1)
    assert ran[0][0] == "unheld" and (len(ran) < 2 or ran[1][0] == "unheld"), ran  # the first never ended
    assert v1_looks and ran[0][1] < min(v1_looks), (ran, v1_looks[:2])
    said = said_of(ws, 1, "did not hold")
    assert said and "no go.held" in said[0], said


def test_a_repaired_candidates_profile_is_started_ahead_for_the_repaired_tree(fake_env, tmp_path, monkeypatch):
    """Found by a hostile review (2026-12-01): the profile started before a repair's decision
    took the first attempt's tree from the record and never matched the repaired one."""
    ws, log = served_gpu(fake_env, tmp_path, monkeypatch, ["wrong_fixed_on_repair"])
    statuses = run(ws, 1)
    v1 = record(ws, 1)
    assert statuses[1] == "keep", v1["decision"]
    assert sorted(v1["profile"]["taken"]["ahead"]) == ["best", "cand"]
    # the first attempt's held profiles were told to stop, the repaired tree's went on
    words = [w for w, _, _, _ in events(log) if w in ("held", "go")]
    assert words.count("go") == 2 and words.count("held") > 2, words


def test_a_held_profile_that_ends_before_go_is_taken_anew_and_profiles_ahead_stay_on(fake_env, tmp_path, monkeypatch):
    """A profile that held and then ended (its own limit, out of memory) is no command that
    ignores the hold: the keep's profile is taken anew, and the next decision starts one ahead."""
    ws, log = served_gpu(fake_env, tmp_path, monkeypatch, ["gain30", "gain30"], start={"held_exit": True})
    statuses = run(ws, 2)
    v1 = record(ws, 1)
    assert statuses[1] == "keep" and v1["profile"]["taken"]["ahead"] == [], v1["decision"]
    assert "error" not in v1["profile"] and (ws.profiles / "v1" / "cand" / "summary.json").is_file()
    assert [w for w, *_ in events(log)].count("held") >= 3  # v1's two, then v2's candidate's: still on
