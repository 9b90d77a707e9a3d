"""Lanes on a real Ray cluster ([parallel] backend = "ray"): a head and worker nodes started
here with ray.cluster_utils.Cluster (real raylets and worker processes on this machine). The
candidate travels as a git bundle, each look runs on a worker with that worker's own GPU gate
(scripted fake GPUs) and comes back to the head, which keeps the store and decides."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time

import pytest

from kopt_supervisor.engine.daemon import run_engine
from kopt_supervisor.engine.store import Store
from tests.conftest import installed
from tests.lanes.test_lanes import check_invariants_lanes, gpus, lanes_env
from tests.reliability.helpers import events, iterations

# Ray imported by the tests that start a cluster, not while every worker collects the suite
pytestmark = [pytest.mark.slow, installed("ray")]


@pytest.fixture(scope="module")
def head():
    """The cluster's head, started once for the module (3.8 CPU-s and 8 s a start): it has no
    resources for lanes, so nothing of a test runs on it; each test adds the worker nodes its
    lanes run on and removes them."""
    import ray
    from ray import cluster_utils

    c = cluster_utils.Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "num_gpus": 0})
    yield c
    if ray.is_initialized():
        ray.shutdown()
    c.shutdown()


@pytest.fixture
def cluster(monkeypatch, head):
    """The head and worker nodes of this test's own, each with two (logical) GPUs; the
    environment set before they start (fake GPUs, claims) reaches their workers."""

    def start(env: dict[str, str], workers: int = 1):
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        nodes = [head.add_node(num_cpus=2, num_gpus=2) for _ in range(workers)]
        head.wait_for_nodes()
        return head, nodes

    yield start
    import ray

    if ray.is_initialized():
        ray.shutdown()
    for node in list(head.worker_nodes):  # the test's (and any it added), gone with their actors
        head.remove_node(node)
    head.wait_for_nodes()


def ray_env(fake_env, tmp_path, monkeypatch, script, *, lanes, address_from, sleep=0.0, snapshots=None, extra=""):
    ws, repo = lanes_env(
        fake_env,
        tmp_path,
        monkeypatch,
        script,
        lanes=lanes,
        sleep=sleep,
        snapshots=snapshots or [gpus(2)],
        extra='backend = "ray"\naddress = "ADDRESS"\nconnect_timeout_s = 60\n' + extra,
    )
    c, nodes = address_from({k: v for k, v in os.environ.items() if k.startswith(("KOPT_", "FAKE_")) or k == "PATH"})
    for path in (ws.config_path,):
        path.write_text(path.read_text().replace('address = "ADDRESS"', f'address = "{c.address}"'))
    cfg = ws.config_path.read_text()
    from kopt_supervisor.engine.workspace import config_seal, read_secret

    with Store(ws.db_path) as s:  # the address is known only now: freeze it as `kopt init` would have
        s.set_many({"frozen_config": cfg, "frozen_config_seal": config_seal(read_secret(ws.dir), cfg)})
    return ws, repo, c, nodes


def test_two_lanes_on_a_ray_cluster_decide_as_local_lanes_do(fake_env, tmp_path, monkeypatch, cluster):
    worker_tmp = tmp_path / "worker-tmp"  # the workers' temporary directory (they inherit TMPDIR)
    worker_tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(worker_tmp))
    ws, repo, c, _ = ray_env(
        fake_env, tmp_path, monkeypatch, ["gain5", "loss5", "gain5", "loss5"], lanes=2, address_from=cluster
    )
    assert run_engine(ws, max_iters=4) == 0
    # each lane's worker removed its trees and workspace before the head ended it
    assert not list(worker_tmp.glob("kopt-ray-*")), sorted(p.name for p in worker_tmp.iterdir())
    its = iterations(ws)
    assert [str(it.status) for it in its[1:]].count("keep") >= 1, [(it.status, it.record.get("decision")) for it in its]
    for it in its[1:]:
        if it.record.get("decision", {}).get("reason", "").startswith(("cls=", "no answer")):
            gpu = it.record["gpu"]
            assert gpu["host"] and gpu["uuid"] in ("GPU-fake-0", "GPU-fake-1"), gpu  # the worker's gate chose it
    # every run, the baseline's too, in a worker's own checkout of the bundles, never in the
    # head's trees (which hold no GPU)
    trees = [line.split()[3] for line in (tmp_path / "bind" / "bind.log").read_text().splitlines()]
    assert [t for t in trees if not t.startswith("trees/")] == [], trees
    assert "trees/cand" in trees and "trees/best" in trees
    assert its[0].record["gpu"]["uuid"] in ("GPU-fake-0", "GPU-fake-1") and its[0].record["gpu"]["host"] != "ray"
    for it in its[1:]:  # measured and decided (two edits of kernel.json from one BEST may not rebase)
        assert str(it.status) in ("keep", "regression", "likely_regression", "tie", "rejected") or (
            it.status == "fail_propose" and "no longer applies" in it.record["decision"]["reason"]
        ), it.record["decision"]
    check_invariants_lanes(ws, repo)


def test_every_run_of_a_ray_lane_is_on_its_worker_s_idle_gpu_the_baseline_and_profiler_included(
    fake_env, tmp_path, monkeypatch, cluster
):
    # the worker node offers Ray two (logical) GPUs; GPU 0 runs someone's training, which Ray's
    # accounting cannot see: whichever GPU Ray hands the lane's actor, kopt's gate on the worker
    # reads the GPUs and runs everything on GPU 1, never on GPU 0. ncu exists on the worker only
    # (the stand-in on the PATH its node started with): a head without a GPU or a profiler still
    # gets the baseline profiled and each keep confirmed by the profiler's kernel time, because
    # those runs go where the lane's GPU is, and their folders come back
    from tests.engine.test_gate_in_loop import NCU_BIN

    path = os.environ["PATH"]
    monkeypatch.setenv("PATH", f"{NCU_BIN}:{path}")
    ws, repo, c, _ = ray_env(
        fake_env,
        tmp_path,
        monkeypatch,
        ["gain5", "loss5"],
        lanes=1,
        address_from=cluster,
        snapshots=[gpus(2, busy=(0,))],
        extra='\n[profile]\nkind = "ncu"\nkernel = "fake"\nbaseline = "start"\n',
    )
    monkeypatch.setenv("PATH", path)  # the head's own: no ncu
    import shutil as sh

    assert sh.which("ncu") is None or "fake_target" not in str(sh.which("ncu"))
    assert run_engine(ws, max_iters=2) == 0
    its = iterations(ws)
    runs = [line.split() for line in (tmp_path / "bind" / "bind.log").read_text().splitlines()]
    # the worker's trees, or a profile's copy of one (profile_runs.ProfiledTree: `<label>/tree`)
    assert all(t.startswith("trees/") or re.fullmatch(r"[0-9a-f]{16}/tree", t) for *_, t in runs), runs
    assert any(t.startswith("trees/") for *_, t in runs) and any(t.endswith("/tree") for *_, t in runs), runs
    # the unmodified baseline (v0) too: every run on the worker's GPU 1 (the head has none)
    assert {dev for dev, *_ in runs} == {"1"}, runs
    assert its[0].record["gpu"]["uuid"] == "GPU-fake-1", its[0].record["gpu"]
    for it in its[1:]:
        if it.record.get("gpu", {}).get("uuid"):
            assert it.record["gpu"]["uuid"] == "GPU-fake-1" and it.record["gpu"]["host"], it.record["gpu"]
    # the profiler: the baseline's profile and v1's profile pair, taken on the worker
    base, v1 = its[0], its[1]
    assert base.record["profile"]["best"], base.record.get("profile")
    assert v1.status == "keep", v1.record.get("decision")
    taken = v1.record["profile"]["taken"]
    assert taken["profiler"] == "ncu" and taken["gpu"].split(":")[-1] == "GPU-fake-1", taken
    assert v1.record["profile"]["outputs"]["checked"] == 4, v1.record["profile"].get("outputs")
    assert v1.record["confirmation"]["path"] == "profiler", v1.record["confirmation"]
    for side in ("v1/cand/summary.json", "v1/cand/outputs.json", "v0/best/summary.json"):  # brought back
        assert (ws.profiles / side).is_file(), side
    assert list(ws.log_dir(1).glob("ray_profile_cand*")), sorted(p.name for p in ws.log_dir(1).iterdir())
    check_invariants_lanes(ws, repo)


def test_a_worker_lost_mid_look_is_measured_again_elsewhere_and_nothing_counts_twice(
    fake_env, tmp_path, monkeypatch, cluster
):
    ws, repo, c, nodes = ray_env(fake_env, tmp_path, monkeypatch, ["gain5"], lanes=1, address_from=cluster, sleep=0.6)
    import threading

    result: list[int] = []
    t = threading.Thread(target=lambda: result.append(run_engine(ws, max_iters=1)))
    t.start()
    deadline = time.time() + 180
    while time.time() < deadline:  # the first look of v1 came back: the next one is on its way
        with Store(ws.db_path, readonly=True) as s:
            if s.samples(1, "eval"):
                break
        time.sleep(0.1)
    else:
        pytest.fail("v1 never measured a look")
    c.add_node(num_cpus=2, num_gpus=2)  # somewhere for the look to go
    c.remove_node(nodes[0], allow_graceful=False)
    t.join(300)
    assert result == [0]
    its = iterations(ws)
    v1 = its[1]
    assert v1.status == "keep", v1.record.get("decision")
    assert any("was lost" in m for m in events(ws, "lanes"))
    with Store(ws.db_path, readonly=True) as s:
        cells = [(x["round"], x["block"], x["config"], x["side"]) for x in s.samples(1, "eval")]
        rounds = sorted({x["round"] for x in s.samples(1, "eval")})
    assert len(cells) == len(set(cells)), "a look was counted twice"
    assert rounds == list(range(len(rounds)))
    check_invariants_lanes(ws, repo)


def test_a_cluster_that_cannot_be_reached_fails_within_the_timeout_naming_it(tmp_path):
    # in a process of its own: a ray.init that hangs must not be left in the test's process
    code = (
        "import time, sys\n"
        "import ray\n"  # its first import from a fresh install (bytecode written, ~5 s under load) is not the connection's
        "from kopt_supervisor.engine.loop.start import connect\n"
        "from kopt_supervisor.engine import BadInput\n"
        "t = time.monotonic()\n"
        "try:\n"
        "    connect('127.0.0.1:9', 3)\n"
        "except BadInput as e:\n"
        "    print(round(time.monotonic() - t, 1), e)\n"
        "    sys.stdout.flush()\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    out = res.stdout.strip()
    assert out, res.stderr[-2000:]
    seconds, message = out.split(" ", 1)
    assert float(seconds) <= 3 + 5 and "127.0.0.1:9" in message, out
    json.dumps(message)  # one line
