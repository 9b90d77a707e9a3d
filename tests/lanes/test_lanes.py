"""Lanes on one host ([parallel] lanes = K, docs/lanes.md): K candidates at once from the same
BEST, each on its own idle GPU (scripted fake GPUs, the real gate and claims), keeps in any
order, a keep decided against a BEST another lane moved carried there (its claim confirmed on
the new BEST), and a kill -9 with lanes in flight."""

from __future__ import annotations

import json
import os
import re
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from kopt_supervisor.engine import api
from kopt_supervisor.engine.daemon import run_engine
from kopt_supervisor.engine.store import Store
from kopt_supervisor.engine.workspace import Workspace
from tests.conftest import git
from tests.reliability.helpers import FAST, events, init, iterations

pytestmark = pytest.mark.slow

H100 = {"name": "NVIDIA H100 80GB HBM3", "util_pct": 0, "mem_used_mib": 10, "mem_total_mib": 81559, "processes": []}
FAST_GATE = ('vendor = "none"', 'vendor = "auto"\nsamples = 1\nsample_interval_s = 0\nwait_s = 0.1\nwait_max_s = 30')


def gpus(n: int, busy: tuple[int, ...] = ()) -> list[dict]:
    out = []
    for i in range(n):
        g = {**H100, "index": i, "uuid": f"GPU-fake-{i}"}
        if i in busy:
            g.update(util_pct=97, mem_used_mib=30000, processes=[{"pid": 999999, "name": "train.py", "mem_mib": 30000}])
        out.append(g)
    return out


def lanes_env(
    fake_env,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    script: list[str],
    *,
    lanes: int,
    snapshots: list[list[dict]] | None = None,
    sleep: float = 0.0,
    extra: str = "",
    class_files: bool = False,
    rounds: dict[str, str] | None = None,
    wait_max_s: float = 30,
) -> tuple[Workspace, Path]:
    (tmp_path / "bind").mkdir()  # the benches run confined: the log's folder is named writable
    gate = {FAST_GATE[0]: FAST_GATE[1].replace("wait_max_s = 30", f"wait_max_s = {wait_max_s:g}")}
    repo, root = fake_env(
        script,
        toml_replace={
            **(rounds or FAST),
            **gate,
            "timeout_s = 20\n\n[decide]": f'timeout_s = 20\nwritable = ["{tmp_path / "bind"}"]\n\n[decide]',
        },
        extra_toml=f"\n[parallel]\nlanes = {lanes}\n{extra}",
    )
    if class_files:  # small.speed and large.speed: a class's speed in a file of its own (and .boost)
        for cls in ("small", "large"):
            (repo / f"{cls}.speed").write_text("1.0")
            (repo / f"{cls}.boost").write_text("1.0")
        git(repo, "add", "-A")
        git(repo, "commit", "-qm", "a file per class")
    fake = tmp_path / "gpus.json"
    fake.write_text(json.dumps(snapshots or [gpus(lanes)]))
    monkeypatch.setenv("KOPT_FAKE_GPUS", str(fake))
    monkeypatch.setenv("KOPT_GPU_CLAIMS_DIR", str(tmp_path / "claims"))
    monkeypatch.setenv("FAKE_BIND_LOG", str(tmp_path / "bind" / "bind.log"))
    monkeypatch.setenv("FAKE_SLEEP", str(sleep))
    return init(repo, root), repo


def bind_log(tmp_path: Path) -> list[tuple[str, float, float, str]]:
    """(CUDA_VISIBLE_DEVICES, start, end, tree) of every bench run, as the bench saw them."""
    out = []
    for line in (tmp_path / "bind" / "bind.log").read_text().splitlines():
        dev, start, end, tree = line.split()
        out.append((dev, float(start), float(end), tree))
    return out


def assert_no_gpu_shared(runs: list[tuple[str, float, float, str]]) -> int:
    """No two lanes' benches on one GPU at the same moment; returns how many pairs of runs of
    different lanes overlapped in time (the lanes did run at once)."""
    lane_runs: dict[str, list[tuple[str, float, float]]] = {}
    for dev, start, end, tree in runs:  # tree: "<lane folder>/<best|cand>"
        lane_runs.setdefault(tree.rsplit("/", 1)[0], []).append((dev, start, end))
    overlapping = 0
    for a, ra in lane_runs.items():
        for b, rb in lane_runs.items():
            if a >= b:
                continue
            for dev_a, s_a, e_a in ra:
                for dev_b, s_b, e_b in rb:
                    if s_a < e_b and s_b < e_a:
                        overlapping += 1
                        assert dev_a != dev_b, f"lanes {a} and {b} ran on GPU {dev_a} at the same time"
    return overlapping


def test_lanes_run_at_once_each_on_its_own_gpu(fake_env, tmp_path, monkeypatch):
    # four GPUs, one of them busy with someone's training: three lanes on the three idle ones
    ws, repo = lanes_env(
        fake_env,
        tmp_path,
        monkeypatch,
        ["gain5", "loss5", "gain1", "loss5", "gain5", "loss5"],
        lanes=3,
        snapshots=[gpus(4, busy=(2,))],
        sleep=0.15,
    )
    assert run_engine(ws, max_iters=6) == 0
    its = iterations(ws)
    assert len(its) == 7 and all(it.final for it in its)
    runs = bind_log(tmp_path)
    assert runs and all(dev in ("0", "1", "3") for dev, *_ in runs), "a bench ran on the busy GPU or unbound"
    overlapping_lanes = assert_no_gpu_shared(runs)
    assert overlapping_lanes > 0, "the lanes never ran at the same time"
    # each iteration's record names its lane and GPU; best and candidate of a look on one GPU
    for it in its[1:]:
        gpu = it.record["gpu"]
        assert gpu["uuid"] in ("GPU-fake-0", "GPU-fake-1", "GPU-fake-3") and "lane" in it.record
    lanes_used = {it.record["lane"] for it in its[1:]}
    assert lanes_used == {0, 1, 2}
    check_invariants_lanes(ws, repo)


def check_invariants_lanes(ws: Workspace, repo: Path) -> None:
    """The reliability suite's invariants, with several lanes: keeps are a chain in the order
    they ended (not by version), every tree back at BEST."""
    its = iterations(ws)
    kept = sorted([it for it in its if it.kept and not it.masked], key=lambda it: (it.order, it.version))
    chain = git(repo, "rev-list", "--reverse", f"kopt/{ws.tag}").splitlines()
    assert chain[chain.index(its[0].commit) :] == [it.commit for it in kept]
    for prev, it in zip(kept, kept[1:], strict=False):
        assert it.best_commit_before == prev.commit, f"v{it.version} was committed on a BEST it was not decided against"
    best = kept[-1].commit
    assert api.status(ws)["best_commit"] == best
    assert git(ws.best, "rev-parse", "HEAD") == best
    for d in sorted(ws.dir.glob("lanes/*/*")) + [ws.cand]:
        assert git(d, "rev-parse", "HEAD") == best, d
        assert git(d, "status", "--porcelain") == "", d
    assert not [it.version for it in its if it.status == "running"]


def two_files(name: str, factor: float) -> str:
    """A scripted proposal that speeds one class up in that class's own file, aimed at it."""
    cls = name.split(".")[0]
    return (
        f"do:open({name!r}, 'w').write('{factor}'); "
        f"plan = 'faster cls={cls} through {name}\\ntarget_class: cls={cls}\\n'"
    )


def test_a_keep_decided_against_an_older_best_is_put_on_the_new_best_and_its_claim_confirmed_there(
    fake_env, tmp_path, monkeypatch
):
    # two lanes from the same BEST: each speeds up one class in a file of its own; whichever
    # keeps second was decided against a BEST that no longer is: its change is put on the
    # first keep and only what it claims is confirmed there, against the first keep, before it
    # is committed (not decided again from scratch)
    ws, repo = lanes_env(
        fake_env,
        tmp_path,
        monkeypatch,
        [two_files("small.speed", 0.8), two_files("large.speed", 0.8)],
        lanes=2,
        class_files=True,
    )
    assert run_engine(ws, max_iters=2) == 0
    its = iterations(ws)
    v1, v2 = its[1], its[2]
    assert v1.status == "keep" and v2.status == "keep", [
        (it.status, it.record.get("decision", {}).get("reason")) for it in its
    ]
    second = max((v1, v2), key=lambda it: it.order)
    first = min((v1, v2), key=lambda it: it.order)
    base = its[0].commit
    assert second.record.get("rebased") and second.record["rebased"][0]["onto"] == first.commit
    carried = second.record.get("carried")
    assert carried and carried[0]["decided_on"] == base and carried[0]["onto"] == first.commit, carried
    assert second.best_commit_before == first.commit
    assert "where its claim is confirmed" in second.record["decision"]["reason"]
    assert any("only its claim is confirmed" in m for m in events(ws, "lanes"))
    assert (
        git(repo, "show", f"{second.commit}:small.speed") == git(repo, "show", f"{second.commit}:large.speed") == "0.8"
    )
    # its decision compared it with the baseline; its confirmation with the first keep (whose
    # class is 20% faster): both sides of the confirmation ran on the new BEST
    first_cls = "cls=" + first.hypothesis.split("cls=")[1].split()[0]
    with Store(ws.db_path, readonly=True) as store:

        def best_side(v: int, stage: str) -> list[float]:
            return [x["value"] for x in store.samples(v, stage) if x["side"] == "best" and x["cls"] == first_cls]

        decided, confirmed = best_side(second.version, "eval"), best_side(second.version, "reverify")
    assert decided and confirmed, "a decision against the old BEST and a confirmation against the new"
    assert statistics.median(confirmed) < 0.85 * statistics.median(decided), (confirmed, decided)
    assert second.record["confirmation"]["outcome"] == "confirmed", second.record["confirmation"]
    # what the history says of the tree committed is what its confirmation measured on the new
    # BEST (on the H200 a carried keep's figures from the old BEST once read as 3.22x -> 1.65x)
    decided_cls = second.record["carried"][-1]["classes"]
    assert second.record["classes"][first_cls]["best"] < 0.85 * decided_cls[first_cls]["best"]
    curve = api.status(ws)["gpu_time"]["curve"]
    assert [p["version"] for p in curve] == [first.version, second.version]
    assert curve[1]["speedup"] > 1.05 * curve[0]["speedup"] > 1.05, curve
    check_invariants_lanes(ws, repo)


def scale_file(name: str, factor: float) -> str:
    """A scripted proposal that scales the speed in `name` by `factor` from whatever BEST holds."""
    cls = name.split(".")[0]
    return (
        f"do:v = float(open({name!r}).read()); open({name!r}, 'w').write(str(round(v * {factor}, 6))); "
        f"plan = 'scale cls={cls} by {factor} in {name}\\ntarget_class: cls={cls}\\n'"
    )


def test_a_change_that_no_longer_applies_goes_back_to_its_proposer_on_the_new_best(fake_env, tmp_path, monkeypatch):
    # both lanes rewrite the same line of the same file from the same BEST: the later one's
    # patch cannot be put on the first keep, so it goes back to its proposer, which makes its
    # change again on the new BEST (told why in its prompt), and that is decided and kept
    ws, repo = lanes_env(
        fake_env, tmp_path, monkeypatch, [scale_file("small.speed", 0.8)] * 2, lanes=2, class_files=True
    )
    assert run_engine(ws, max_iters=2) == 0
    its = iterations(ws)
    assert [str(it.status) for it in its[1:]] == ["keep", "keep"], [it.record.get("decision") for it in its]
    first, second = sorted(its[1:], key=lambda it: it.order)
    back = second.record.get("handed_back")
    assert back and back[0]["onto"] == first.commit and back[0]["from"] == its[0].commit
    assert "no longer applies" in back[0]["why"]
    assert second.best_commit_before == first.commit
    prompt = (ws.log_dir(second.version) / "prompt.md").read_text()
    assert prompt.startswith("## Handed back") and first.commit[:10] in prompt
    assert git(repo, "show", f"{second.commit}:small.speed") == "0.64"  # the change made again on the first keep
    st = api.status(ws)
    assert st["consecutive_regressions"] == 0
    lanes = {x["lane"]: x for x in st["gpu_time"]["lanes"]}
    assert lanes[second.record["lane"]]["handed_back"] == 1 and st["gpu_time"]["curve"][-1]["version"] == second.version
    assert any("handed back to the proposer" in m for m in events(ws, "lanes"))
    check_invariants_lanes(ws, repo)


def waits_for_looks(tmp_path: Path, runs: int) -> str:
    """A scripted proposal's prefix: wait until the lanes' benches have run `runs` times."""
    log = tmp_path / "bind" / "bind.log"
    return (
        f"do:import time, os\nwhile not os.path.exists({str(log)!r}) or "
        f"len(open({str(log)!r}).read().splitlines()) < {runs}: time.sleep(0.05)\n"
    )


def b_decides_while_a_keeps(
    fake_env, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, a: str, b: str, a_mark: str, b_mark: str
) -> tuple[Workspace, Path, list[Any], Any, Any]:
    """Two lanes, two iterations: A's proposal `a`, and `b` once A has taken five looks (ten bench
    runs), so that A's keep lands while B is deciding. Returns the workspace, the repo, the
    iterations and A's and B's (by a mark in their hypotheses)."""
    ws, repo = lanes_env(
        fake_env,
        tmp_path,
        monkeypatch,
        [a, waits_for_looks(tmp_path, 10) + b[3:]],
        lanes=2,
        class_files=True,
        sleep=0.15,
    )
    assert run_engine(ws, max_iters=2) == 0
    its = iterations(ws)
    return (
        ws,
        repo,
        its,
        next(it for it in its[1:] if a_mark in it.hypothesis),
        next(it for it in its[1:] if b_mark in it.hypothesis),
    )


def test_a_keep_landing_mid_decision_lets_the_other_decision_finish_and_confirms_its_keep_on_the_new_best(
    fake_env, tmp_path, monkeypatch
):
    # lanes A and B each speed up a class of their own; B's proposer waits until A has taken
    # five looks (ten bench runs), so A's keep lands while B is deciding. B's decision goes on
    # against the BEST it started on (every look it took counts), B's change is put on A's
    # keep and only its claim is confirmed there: nothing B measured is thrown away
    ws, repo, its, a, b = b_decides_while_a_keeps(
        fake_env,
        tmp_path,
        monkeypatch,
        scale_file("small.speed", 0.8),
        scale_file("large.speed", 0.8),
        "cls=small",
        "cls=large",
    )
    assert a.status == "keep" and b.status == "keep", [(it.status, it.record.get("decision")) for it in its]
    assert a.order < b.order and b.record["rebased"][0]["onto"] == a.commit and b.best_commit_before == a.commit
    assert b.record["carried"][0]["decided_on"] == its[0].commit
    # every look of B's decision counts (none went to the stale bucket); only a confirmation
    # that A's keep cut short, when it landed after B's decision, is stale
    looks, rounds = b.record["timings"]["looks_s"], b.record["decision"]["rounds"]
    spent = b.record["timings"]["spent"]
    assert spent["measure"] >= 0.9 * sum(looks[:rounds]) and spent["confirm"] > 0, (spent, looks)
    assert spent.get("stale", 0.0) <= sum(looks[rounds:]), (spent, looks)
    with Store(ws.db_path, readonly=True) as store:  # the decision that counts: against the BEST it started on
        rounds = {x["round"] for x in store.samples(b.version, "eval")}
    assert len(rounds) == b.record["decision"]["rounds"]
    assert git(repo, "show", f"{b.commit}:small.speed") == git(repo, "show", f"{b.commit}:large.speed") == "0.8"
    st = api.status(ws)["gpu_time"]
    assert st["stale_s"] == pytest.approx(spent.get("stale", 0.0), abs=0.01) and st["stale_share"] < 0.25
    check_invariants_lanes(ws, repo)


def test_a_carried_keep_whose_gain_is_gone_on_the_new_best_is_not_kept(fake_env, tmp_path, monkeypatch):
    # hostile to the carry: B's change (small.boost) is a real 20% gain against the BEST it was
    # decided on, and applies cleanly on A's keep, but A's keep (small.speed) makes it moot
    # there. Its claim confirmed on the new BEST must fail: B is not kept, BEST stays A's
    ws, repo, its, a, b = b_decides_while_a_keeps(
        fake_env,
        tmp_path,
        monkeypatch,
        two_files("small.speed", 0.5),
        two_files("small.boost", 0.8),
        "small.speed",
        "small.boost",
    )
    assert a.status == "keep", a.record.get("decision")
    assert b.status != "keep" and not b.kept, (b.status, b.record.get("decision"), b.record.get("confirmation"))
    assert b.record.get("carried"), "B was decided a keep against the old BEST and carried to A's keep"
    assert b.record["confirmation"]["outcome"] in ("refuted", "undecided"), b.record["confirmation"]
    assert api.status(ws)["best_commit"] == a.commit
    assert git(repo, "show", f"{a.commit}:small.speed") == "0.5"
    check_invariants_lanes(ws, repo)


def test_fewer_idle_gpus_than_lanes_makes_a_lane_wait(fake_env, tmp_path, monkeypatch):
    # three lanes, two GPUs: never more than two benches at once, and every iteration runs.
    # (A lane waiting for a GPU holds one of --max-iters' slots until [gpu].wait_max_s ends
    # its wait: with 30 s, the last iteration started 27 s after the one before it.)
    ws, repo = lanes_env(
        fake_env, tmp_path, monkeypatch, ["loss5"], lanes=3, snapshots=[gpus(2)], sleep=0.1, wait_max_s=2
    )
    assert run_engine(ws, max_iters=4) == 0
    its = iterations(ws)
    assert len(its) == 5 and all(it.final for it in its), [it.status for it in its]
    runs = bind_log(tmp_path)
    edges = sorted([(s, 1) for _, s, _, _ in runs] + [(e, -1) for _, _, e, _ in runs])
    live = peak = 0
    for _, d in edges:
        live += d
        peak = max(peak, live)
    assert peak <= 2, f"{peak} benches ran at once on two GPUs"
    check_invariants_lanes(ws, repo)


def test_kill_9_with_lanes_in_flight_resumes_and_keeps_every_guarantee(fake_env, tmp_path, monkeypatch):
    ws, repo = lanes_env(fake_env, tmp_path, monkeypatch, ["gain5", "loss5", "loss5", "gain1"], lanes=4, sleep=0.3)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kopt_supervisor.kopt_tui.cli",
            "--root",
            str(ws.root),
            "run",
            ws.tag,
            "--foreground",
            "--max-iters",
            "8",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.time() + 120
    while time.time() < deadline:  # until four lanes are in flight, three of them measuring
        running = [it for it in iterations(ws) if it.status == "running"] if ws.db_path.exists() else []
        if len(running) == 4 and len([it for it in running if it.phase == "measure"]) >= 3:
            break
        time.sleep(0.2)
    else:
        proc.kill()
        pytest.fail("the lanes never measured at once")
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    # the claims of the dead engine do not keep the GPUs from the next one
    assert run_engine(ws, max_iters=3) == 0
    its = iterations(ws)
    assert not [it for it in its if it.status == "running"]
    assert any(it.status == "interrupted" for it in its), [it.status for it in its]
    check_invariants_lanes(ws, repo)


# Each lane is told what the others are trying: checked on the run of
# tests/engine/test_lane_status.py::test_status_shows_what_each_of_two_lanes_runs_and_on_which_gpu
# (the same script, lanes and iterations: one run, not two).


def test_tune_lanes_each_get_a_different_point(tmp_path, monkeypatch):
    from tests.engine.test_tune import make_tune_run

    repo, ws = make_tune_run(tmp_path, monkeypatch)
    cfg = re.sub(r"(\[parallel\]\n(?:#.*\n)*)lanes = 1\b", r"\1lanes = 3", ws.config_path.read_text())
    assert "lanes = 3" in cfg
    ws.config_path.write_text(cfg)
    with Store(ws.db_path) as s:  # the run was frozen by `kopt init`: freeze the lanes too
        from kopt_supervisor.engine.workspace import config_seal, read_secret

        s.set_many({"frozen_config": cfg, "frozen_config_seal": config_seal(read_secret(ws.dir), cfg)})
    assert run_engine(ws, max_iters=6) == 0
    its = iterations(ws)[1:]
    assert len(its) == 6 and len({it.record["lane"] for it in its}) == 3
    seen = set()
    for it in its:
        d = it.record["proposal"]
        key = json.dumps([d["class"], d["base"], d["point"]], sort_keys=True)
        assert key not in seen, f"v{it.version} ({it.record['lane']}) was handed a point another lane had"
        seen.add(key)


def test_a_masked_restart_stops_every_lane_and_the_run_goes_on_from_there(fake_env, tmp_path, monkeypatch):
    import threading

    from kopt_supervisor.kopt_tui.cli import main as kopt

    ws, repo = lanes_env(fake_env, tmp_path, monkeypatch, ["gain5", "loss5", "gain1", "loss5"], lanes=2, sleep=0.25)
    result: list[int] = []
    t = threading.Thread(target=lambda: result.append(run_engine(ws, max_iters=8)))
    t.start()
    deadline = time.time() + 120
    while time.time() < deadline:  # a keep made, and both lanes busy again
        its = iterations(ws) if ws.db_path.exists() else []
        if any(it.kept for it in its[1:]) and len([it for it in its if it.status == "running"]) >= 2:
            break
        time.sleep(0.1)
    else:
        pytest.fail("never had a keep with two lanes in flight")
    assert kopt(["--root", str(ws.root), "restart", ws.tag, "--from", "v0", "--why", "start over"]) == 0
    t.join(300)
    assert result == [0]
    its = iterations(ws)
    masked = [it for it in its if it.masked]
    assert masked and all(it.final for it in its)
    # every iteration in flight when the restart came was ended (interrupted) and masked with it
    assert any(it.status == "interrupted" and it.masked for it in its), [
        (it.version, it.status, it.masked) for it in its
    ]
    # what came after started from the baseline again
    after = [it for it in its[1:] if not it.masked]
    assert after and all(it.best_commit_before in (its[0].commit, *[a.commit for a in after if a.kept]) for it in after)
    check_invariants_lanes(ws, repo)


def test_a_gpu_vanishing_mid_run_moves_its_lane_to_the_free_one(fake_env, tmp_path, monkeypatch):
    # four GPUs, three lanes; GPU 1 falls off the bus after a few readings of every gate: the
    # look timed while it vanished is flagged, and its lane goes on on the GPU left free
    gone = [g for g in gpus(4) if g["index"] != 1]
    ws, repo = lanes_env(
        fake_env,
        tmp_path,
        monkeypatch,
        ["loss5", "gain1", "loss5"],
        lanes=3,
        snapshots=[gpus(4)] * 5 + [gone],
        sleep=0.1,
    )
    assert run_engine(ws, max_iters=6) == 0
    its = iterations(ws)
    assert len(its) == 7 and all(it.final for it in its), [it.status for it in its]
    flagged = [
        it for it in its[1:] if any("gpu_vanished" in f["flags"] for f in it.record["gpu"].get("flagged_rounds", []))
    ]
    assert flagged, "no look was flagged when its GPU vanished"
    runs = bind_log(tmp_path)
    assert_no_gpu_shared(runs)
    last_on_1 = max((end for dev, _, end, _ in runs if dev == "1"), default=0.0)
    assert [dev for dev, start, _, _ in runs if start > last_on_1] and all(
        dev != "1" for dev, start, _, _ in runs if start > last_on_1
    )
    assert {dev for dev, *_ in runs} == {"0", "1", "2", "3"}  # the lane on 1 moved to the free GPU 3
    check_invariants_lanes(ws, repo)


def test_a_ray_worker_sweeps_the_folders_of_dead_workers_on_its_host_and_no_other(tmp_path):
    """A LaneWorker killed mid-look (a stop), lost with its head, or crashed never ran `close`:
    the next worker on the host removes its folder, and leaves a live worker's, one whose
    owner is not written yet, another host's (a container sharing the folder, its processes
    unseen here), and anything not named as a worker's folder."""
    import socket

    from kopt_supervisor.engine.loop.ray_lanes import OWNER_FILE, sweep_orphans

    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()  # a pid that no longer runs
    folders = {}
    here = socket.gethostname()
    for name, owner in [
        ("kopt-ray-t-lane0-dead", f"{ended.pid} {here}"),
        ("kopt-ray-t-lane1-alive", f"{os.getpid()} {here}"),
        ("kopt-ray-t-lane2-starting", None),
        ("kopt-ray-t-lane3-elsewhere", f"{ended.pid} another-{here}"),
        ("kopt-ray-notaworker", f"{ended.pid} {here}"),
    ]:
        folders[name] = tmp_path / name
        (folders[name] / "trees").mkdir(parents=True)
        if owner is not None:
            (folders[name] / OWNER_FILE).write_text(f"{owner}\n")
    # a link named like a dead worker's folder, to a folder that is not one: never followed
    victim = tmp_path.parent / f"{tmp_path.name}-victim"
    victim.mkdir()
    (victim / OWNER_FILE).write_text(f"{ended.pid} {here}\n")
    (tmp_path / "kopt-ray-t-lane4-link").symlink_to(victim, target_is_directory=True)
    assert sweep_orphans(tmp_path) == [folders["kopt-ray-t-lane0-dead"]]
    assert (victim / OWNER_FILE).is_file()
    (tmp_path / "kopt-ray-t-lane4-link").unlink()
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "kopt-ray-notaworker",
        "kopt-ray-t-lane1-alive",
        "kopt-ray-t-lane2-starting",
        "kopt-ray-t-lane3-elsewhere",
    ]
