"""`kopt status TAG` and `--json` on a real run with two lanes (the fake target, scripted fake
GPUs, the real gate and claims): while both lanes measure, each entry of `lanes` names the
iteration in flight in that lane and the GPU its looks ran on; once the run stops, every lane
is idle and names the GPU of its last iteration."""

from __future__ import annotations

import json
import threading
import time

import pytest

from kopt_supervisor.engine.daemon import run_engine
from kopt_supervisor.kopt_tui.cli import main as kopt
from tests.lanes.test_lanes import lanes_env
from tests.reliability.helpers import iterations

pytestmark = pytest.mark.slow

FAKE_GPUS = {"GPU-fake-0", "GPU-fake-1"}


def status_json(ws, capsys) -> dict:
    capsys.readouterr()
    assert kopt(["--root", str(ws.root), "status", ws.tag, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_status_shows_what_each_of_two_lanes_runs_and_on_which_gpu(fake_env, tmp_path, monkeypatch, capsys):
    """... and each lane is told what the others are trying (its prompt's section; a test of
    its own in tests/lanes/test_lanes.py, on the same run, until 2026-11-30)."""
    ws, _ = lanes_env(fake_env, tmp_path, monkeypatch, ["gain5", "loss5", "gain1", "loss5"], lanes=2, sleep=0.2)
    result: list[int] = []
    engine = threading.Thread(target=lambda: result.append(run_engine(ws, max_iters=4)))
    engine.start()
    try:
        deadline = time.time() + 120
        while time.time() < deadline:  # both lanes measuring at once
            st = status_json(ws, capsys) if ws.db_path.exists() else {"lanes": []}
            busy = [x for x in st["lanes"] if x["version"] is not None and x["phase"] == "eval" and x["gpu"]]
            if len(busy) == 2:
                break
            time.sleep(0.1)
        else:
            pytest.fail("never saw both lanes measuring at once")
        assert [x["lane"] for x in st["lanes"]] == [0, 1]
        assert st["lanes"][0]["version"] != st["lanes"][1]["version"]
        assert {x["gpu"]["uuid"] for x in st["lanes"]} == FAKE_GPUS  # one GPU each, never the same
        for x in st["lanes"]:
            assert x["host"] == "local" and x["gpu"]["host"] == "local" and x["gpu"]["name"].startswith("NVIDIA")
            assert isinstance(x["done"], int) and x["total"] == 4 and x["step"].startswith("round ")
        live = st["lanes"]
        capsys.readouterr()
        assert kopt(["--root", str(ws.root), "status", ws.tag]) == 0
        text = capsys.readouterr().out
        assert "  lane 0: v" in text and "  lane 1: v" in text and "on local" in text
    finally:
        if engine.is_alive() and not result:  # the iterations in flight end and record their GPU
            engine.join(300)
        if engine.is_alive():
            kopt(["--root", str(ws.root), "stop", ws.tag])
            engine.join(60)
    assert result == [0]
    its = {it.version: it for it in iterations(ws)}
    # what status said each lane ran is what the run recorded: its lane, its GPU
    for x in live:
        it = its[x["version"]]
        assert it.record["lane"] == x["lane"] and it.record["gpu"]["uuid"] == x["gpu"]["uuid"]
    st = status_json(ws, capsys)
    assert st["state"] == "stopped"
    for x in st["lanes"]:
        last = max((it for it in its.values() if it.record.get("lane") == x["lane"]), key=lambda it: it.version)
        assert x["version"] is None and x["phase"] == "idle" and x["step"] is None and x["done"] is None
        assert x["gpu"]["uuid"] == last.record["gpu"]["uuid"] and x["gpu"]["index"] == last.record["gpu"]["index"]
    # `kopt gpus --tag TAG --json` lists the run's lanes beside what the gate sees
    capsys.readouterr()
    assert kopt(["--root", str(ws.root), "gpus", "--tag", ws.tag, "--json"]) == 0
    gpus = json.loads(capsys.readouterr().out)
    assert [x["lane"] for x in gpus["lanes"]] == [x["lane"] for x in st["lanes"]]
    assert {x["gpu"]["uuid"] for x in gpus["lanes"]} == {x["gpu"]["uuid"] for x in st["lanes"]}
    # each lane is told what the others are trying, never its own
    ordered = sorted(its.values(), key=lambda it: it.version)
    told = []
    for it in ordered[1:]:
        prompt = (ws.log_dir(it.version) / "prompt.md").read_text()
        section = prompt.split("## Other lanes are trying now")[1].split("##")[0]
        others = [o.hypothesis for o in ordered[1:] if o.version != it.version and o.hypothesis in section]
        assert it.hypothesis not in section  # never its own
        told += others
    # the first two start together (nothing in flight yet); each later one meets the other lane's
    assert told, "no proposal was told what the other lane was trying"
