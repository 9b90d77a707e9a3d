"""`kopt gpus`: the report dict and its table."""

from __future__ import annotations

import json

from gpu_helpers import FakeTime, cfg, gpu, write_script

from kopt_supervisor.engine.gpu import format_report
from kopt_supervisor.engine.gpu.backends import FakeBackend, NoGpu
from kopt_supervisor.engine.gpu.claims import ClaimRegistry, claim_key
from kopt_supervisor.engine.gpu.gate import gpus_report

FOREIGN = 4_000_002


def test_report_says_which_gpu_is_idle_which_is_busy_and_why(tmp_path):
    script = write_script(
        tmp_path / "g.json",
        [
            [
                gpu(
                    0,
                    util=97,
                    mem=61000,
                    procs=[(FOREIGN, "train.py", 60000)],
                    temp_c=66,
                    power_w=650.5,
                    throttle=["sw_power_cap"],
                ),
                gpu(1, util=0, mem=1, temp_c=30, power_w=70.1, throttle=["gpu_idle"]),
            ]
        ],
    )
    t = FakeTime()
    report = gpus_report(cfg(), FakeBackend(script), sleep=t.sleep)
    assert t.sleeps == [1.0, 1.0]
    json.dumps(report)  # stable JSON, NA already None
    assert set(report) == {"time", "backend", "config", "gpus", "pick", "summary"}
    assert report["backend"]["name"] == "fake" and "scripted fake" in report["backend"]["status"]
    assert report["config"]["samples"] == 3 and report["config"]["wait_s"] == 600.0
    busy, idle = report["gpus"]
    assert busy["idle"] is False and idle["idle"] is True
    assert busy["reasons"] == [
        f"1 foreign process(es): {FOREIGN} train.py 60000 MiB",
        "utilization up to 97% > 10%",
        "memory used 61000 MiB > 2048 MiB",
    ]
    assert busy["foreign"][0]["pid"] == FOREIGN and busy["throttle"] == ["sw_power_cap"]
    assert idle["reasons"] == [] and idle["util_max_pct"] == 0.0
    assert report["pick"] == {
        "index": 1,
        "uuid": "GPU-fake-1",
        "env": {"CUDA_VISIBLE_DEVICES": "1", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"},
    }
    assert report["summary"] == "1 of 2 GPU(s) idle; the gate would pick GPU 1"

    table = format_report(report)
    lines = table.splitlines()
    assert lines[0].startswith("backend: fake (scripted fake GPUs")
    row0 = next(ln for ln in lines if ln.startswith("  0 "))
    row1 = next(ln for ln in lines if ln.startswith("  1 "))
    assert "97%" in row0 and "61000/81559" in row0 and "66C" in row0 and "650W" in row0 and row0.endswith("busy")
    assert row1.endswith("idle <- the gate's pick")
    assert f"       busy: 1 foreign process(es): {FOREIGN} train.py 60000 MiB" in lines
    assert "       throttle: sw_power_cap" in lines
    assert lines[-1] == report["summary"]
    assert max(len(ln) for ln in lines if ln.startswith("  ")) <= 100


def test_report_takes_no_claim_but_shows_other_runs_claims(tmp_path):
    script = write_script(tmp_path / "g.json", [[gpu(0), gpu(1)]])
    fake = FakeBackend(script)
    other = ClaimRegistry(owner="kopt run nightly")
    assert other.claim(claim_key(fake.claim_namespace, "GPU-fake-1", 1))
    report = gpus_report(cfg(samples=1), fake)
    g0, g1 = report["gpus"]
    assert g1["claimed_by"]["owner"] == "kopt run nightly" and not g1["idle"]
    assert report["pick"]["index"] == 0
    assert ClaimRegistry().claim(claim_key(fake.claim_namespace, "GPU-fake-0", 0))  # still free
    other.release_all()


def test_report_all_busy_and_no_gpu(tmp_path):
    script = write_script(tmp_path / "g.json", [[gpu(0, util=50)]])
    busy = gpus_report(cfg(samples=1), FakeBackend(script))
    assert busy["pick"] is None
    assert busy["summary"] == "all 1 GPU(s) busy; the gate would wait 600 s and check again"
    none = gpus_report(cfg(), NoGpu("no GPU found: nvml: NVML Shared Library Not Found"))
    assert none["gpus"] == [] and none["pick"] is None
    assert none["summary"] == "no GPU: CPU-only targets run without the gate"
    text = format_report(none)
    assert "NVML Shared Library Not Found" in text and text.endswith(none["summary"])


def test_report_opens_the_configured_backend_itself(tmp_path, monkeypatch):
    monkeypatch.setenv("KOPT_FAKE_GPUS", str(write_script(tmp_path / "g.json", [[gpu(0)]])))
    report = gpus_report(cfg(samples=1))
    assert report["backend"]["name"] == "fake" and report["pick"]["index"] == 0
