"""The GPU gate inside the loop, with scripted fake GPUs (KOPT_FAKE_GPUS)."""

from __future__ import annotations

import json

from kopt_supervisor.engine import api
from kopt_supervisor.engine.daemon import run_engine
from kopt_supervisor.engine.store import Store
from kopt_supervisor.engine.workspace import Workspace
from kopt_supervisor.kopt_tui.cli import main as kopt

GPU = {
    "index": 0,
    "name": "NVIDIA H100 80GB HBM3",
    "uuid": "GPU-fake-0",
    "util_pct": 0,
    "mem_used_mib": 10,
    "mem_total_mib": 81559,
    "processes": [],
}
BUSY = {
    **GPU,
    "util_pct": 97,
    "mem_used_mib": 30000,
    "processes": [{"pid": 999999, "name": "train.py", "mem_mib": 30000}],
}
FAST_GATE = 'vendor = "none"', 'vendor = "auto"\nsamples = 1\nsample_interval_s = 0\nwait_s = 0.2\nwait_max_s = 2'


def setup(fake_env, tmp_path, monkeypatch, snapshots):
    repo, root = fake_env(["gain5", "gain5"], toml_replace=dict([FAST_GATE]))
    fake = tmp_path / "gpus.json"
    fake.write_text(json.dumps(snapshots))
    monkeypatch.setenv("KOPT_FAKE_GPUS", str(fake))
    monkeypatch.setenv("KOPT_GPU_CLAIMS_DIR", str(tmp_path / "claims"))
    assert kopt(["--root", str(root), "init", "--repo", str(repo), "--tag", "g"]) == 0
    return Workspace(root, "g")


def test_busy_then_idle_waits_then_binds_and_records_evidence(fake_env, tmp_path, monkeypatch):
    ws = setup(fake_env, tmp_path, monkeypatch, [[BUSY]] * 3 + [[GPU]])
    assert run_engine(ws, max_iters=1) == 0
    with Store(ws.db_path, readonly=True) as s:
        events = [e.message for e in s.events() if e.kind == "gpu"]
        v1 = s.iteration(1)
    assert any("no idle GPU" in m and "train.py" in m for m in events)
    assert v1.status == "keep"
    gpu = v1.record["gpu"]
    assert gpu["uuid"] == "GPU-fake-0" and gpu["before"]["util_pct"] == 0 and gpu["after"] is not None
    rec = json.loads(ws.memory_path(1).read_text())
    assert rec["gpu"]["name"] == "NVIDIA H100 80GB HBM3"
    # the bench ran bound to the chosen GPU
    env_seen = (ws.log_dir(1) / "prompt.md").exists()
    assert env_seen


def test_no_idle_gpu_stops_the_run_with_that_reason(fake_env, tmp_path, monkeypatch):
    ws = setup(fake_env, tmp_path, monkeypatch, [[BUSY]])
    assert run_engine(ws) == 0
    st = api.status(ws)
    assert st["state"] == "stopped" and st["stop_reason"].startswith("no idle GPU")
    assert "train.py" in st["stop_reason"]
    assert "no idle GPU" in ws.performance.read_text()


NCU_BIN = __import__("pathlib").Path(__file__).parent.parent / "fake_target" / "bin"


def test_profiler_agreement_confirms_a_keep_and_disagreement_sends_it_to_review(fake_env, monkeypatch, driven_clock):
    repo, root = fake_env(
        ["gain5", "gain5"],
        extra_toml='\n[profile]\nkind = "ncu"\nkernel = "fake"\nbaseline = "start"\n',
        toml_replace={"review_timeout_s = 2": "review_timeout_s = 1800"},
    )
    monkeypatch.setenv("PATH", f"{NCU_BIN}:{__import__('os').environ['PATH']}")
    assert kopt(["--root", str(root), "init", "--repo", str(repo), "--tag", "p"]) == 0
    ws = Workspace(root, "p")
    assert run_engine(ws, max_iters=1) == 0
    v1 = json.loads(ws.memory_path(1).read_text())
    # the profiler's word, per class, from the launches inside each config's NVTX range
    assert v1["status"] == "keep" and "profiler: cls=large agrees" in v1["decision"]["reason"], v1["decision"]
    agreement = {c["cls"]: c["status"] for c in v1["profile"]["agreement"]["classes"]}
    assert agreement == {"cls=large": "agrees", "cls=small": "agrees"}
    assert v1["profile"]["agreement"]["per_class"] is True
    assert v1["profile"]["cand"]["target_per_call_ns"] < v1["profile"]["best"]["target_per_call_ns"]
    assert (ws.profiles / "v1" / "cand" / "summary.json").exists()
    # a keep's trees: one ncu pass over the whole run, GPU time and L2 bytes ([profile].keep = "time"),
    # its two read-backs run as one step
    assert (ws.profiles / "v1" / "cand" / "ncu_nvtx.csv").exists() and (
        ws.profiles / "v1" / "cand" / "ncu_import.csv"
    ).exists()
    assert not (ws.profiles / "v1" / "cand" / "outside").exists()
    assert v1["profile"]["cand"]["passes"].startswith("a keep's profile: one pass")
    assert (ws.log_dir(1) / "profile_cand_read.out").exists() and not (
        ws.log_dir(1) / "profile_cand_pass1.out"
    ).exists()
    kernels = {k["name"]: k for k in v1["profile"]["cand"]["kernels"]}
    assert kernels["fake_kernel_large"]["registers_per_thread"] is None  # time and L2 bytes alone
    assert kernels["fake_reference"]["calls"] == 4  # the launches outside the ranges are in the one pass
    assert v1["profile"]["comparison"]["unattributed"]["grew"] is False
    # [profile].baseline = "start": the baseline's profile, before the first proposal, keeps every
    # metric (two passes, the full metrics inside the kopt ranges) and anchors every keep's outputs
    assert "anchor" not in v1["profile"] and v1["profile"]["outputs"]["against"] == "baseline"
    v0 = json.loads(ws.memory_path(0).read_text())
    assert v0["profile"]["best"]["hottest"] == "fake_kernel_large"
    assert v0["profile"]["best"]["passes"].startswith("two passes")
    assert (ws.profiles / "v0" / "best" / "outside" / "ncu_nvtx.csv").exists()
    base = {k["name"]: k for k in v0["profile"]["best"]["kernels"]}
    assert base["fake_kernel_large"]["registers_per_thread"] == 32
    monkeypatch.setenv("FAKE_NCU_INVERT", "1")
    assert run_engine(ws, max_iters=1) == 0
    v2 = json.loads(ws.memory_path(2).read_text())
    assert v2["status"] == "rejected" and "profiler disagrees on cls=large: bench -" in v2["decision"]["reason"]
    assert "profiler_disagrees" in v2["decision"]["flags"]


def test_a_keep_that_moves_work_outside_the_ranges_is_not_confirmed(fake_env, monkeypatch, driven_clock):
    """Hostile: 5% faster per the bench, and 10x the GPU time outside the kopt ranges (work
    precomputed out of the timed region). The outside pass, GPU time alone, still sees it."""
    moved = (
        "do:speed['small'] *= 0.95; speed['large'] *= 0.95; k['outside_us'] = 400; "
        "json.dump(k, open('kernel.json', 'w'))"
    )
    repo, root = fake_env(
        [moved],
        extra_toml='\n[profile]\nkind = "ncu"\nkernel = "fake"\n',
        toml_replace={"review_timeout_s = 2": "review_timeout_s = 1800"},
    )
    monkeypatch.setenv("PATH", f"{NCU_BIN}:{__import__('os').environ['PATH']}")
    assert kopt(["--root", str(root), "init", "--repo", str(repo), "--tag", "m"]) == 0
    ws = Workspace(root, "m")
    assert run_engine(ws, max_iters=1) == 0
    v1 = json.loads(ws.memory_path(1).read_text())
    outside = v1["profile"]["comparison"]["unattributed"]
    assert outside["grew"] is True and outside["cand_ns"] > 5 * outside["best_ns"]
    assert v1["status"] != "keep", v1["decision"]


def test_a_bench_without_kopt_ranges_is_profiled_in_one_whole_run_pass(fake_env, monkeypatch, driven_clock):
    repo, root = fake_env(
        ["gain5"],
        extra_toml='\n[profile]\nkind = "ncu"\nkernel = "fake_kernel"\nbaseline = "start"\n',
        toml_replace={"review_timeout_s = 2": "review_timeout_s = 1800"},
    )
    kernel = json.loads((repo / "kernel.json").read_text())
    (repo / "kernel.json").write_text(json.dumps({**kernel, "no_ranges": True}))
    import subprocess

    subprocess.run(
        ["git", "commit", "-qam", "no ranges"],
        cwd=repo,
        check=True,
        env={
            **__import__("os").environ,
            "GIT_AUTHOR_NAME": "a",
            "GIT_AUTHOR_EMAIL": "a@b",
            "GIT_COMMITTER_NAME": "a",
            "GIT_COMMITTER_EMAIL": "a@b",
        },
    )
    monkeypatch.setenv("PATH", f"{NCU_BIN}:{__import__('os').environ['PATH']}")
    assert kopt(["--root", str(root), "init", "--repo", str(repo), "--tag", "w"]) == 0
    ws = Workspace(root, "w")
    assert run_engine(ws, max_iters=1) == 0
    v0 = json.loads(ws.memory_path(0).read_text())
    assert "whole-run pass" in v0["profile"]["best"]["passes"]
    assert (ws.profiles / "v0" / "best" / "whole" / "ncu_import.csv").exists()
    assert not (ws.profiles / "v0" / "best" / "outside").exists()
    kernels = {k["name"]: k for k in v0["profile"]["best"]["kernels"]}
    assert kernels["fake_reference"]["registers_per_thread"] == 32  # every kernel with its metrics
    v1 = json.loads(ws.memory_path(1).read_text())  # a keep: one pass, time alone, as with ranges
    assert v1["profile"]["cand"]["passes"].startswith("a keep's profile: one pass")
    assert v1["profile"]["comparison"]["per_class"] is False  # the whole-run comparison, as before
    assert v1["status"] == "keep", v1["decision"]
