"""A keep's profile of best/ reused from the keep that made it BEST ([profile].reuse_best_s):
only when it is the same tree, on the same GPU, taken the same way, recently; the next keep
then runs the profiler on the candidate alone. Scripted fake GPUs (KOPT_FAKE_GPUS) and the
stand-in ncu (tests/fake_target/bin/ncu)."""

from __future__ import annotations

import json
import os

import pytest

from kopt_supervisor.engine.daemon import run_engine
from kopt_supervisor.engine.profile.profiler import REUSED_RUN_NOISE_PCT
from kopt_supervisor.engine.store import Store
from kopt_supervisor.engine.workspace import Workspace
from kopt_supervisor.kopt_tui.cli import main as kopt
from tests.engine.test_gate_in_loop import FAST_GATE, GPU, NCU_BIN


def two_keeps(
    fake_env, tmp_path, monkeypatch, tag: str, extra: str = "", gpus=None, script=("gain5", "gain5"), iters: int = 2
) -> Workspace:
    repo, root = fake_env(
        list(script),
        extra_toml=f'\n[profile]\nkind = "ncu"\nkernel = "fake"\n{extra}',
        toml_replace={**dict([FAST_GATE]), "review_timeout_s = 2": "review_timeout_s = 1800"},
    )
    fake = tmp_path / "gpus.json"
    fake.write_text(json.dumps(gpus or [[GPU]]))
    monkeypatch.setenv("KOPT_FAKE_GPUS", str(fake))
    monkeypatch.setenv("KOPT_GPU_CLAIMS_DIR", str(tmp_path / "claims"))
    monkeypatch.setenv("PATH", f"{NCU_BIN}:{os.environ['PATH']}")
    assert kopt(["--root", str(root), "init", "--repo", str(repo), "--tag", tag]) == 0
    ws = Workspace(root, tag)
    assert run_engine(ws, max_iters=iters) == 0
    return ws


def record(ws: Workspace, v: int) -> dict:
    return json.loads(ws.memory_path(v).read_text())


def test_the_second_keep_profiles_the_candidate_alone(fake_env, tmp_path, monkeypatch, driven_clock):
    ws = two_keeps(fake_env, tmp_path, monkeypatch, "r")
    v1, v2 = record(ws, 1), record(ws, 2)
    assert v1["status"] == v2["status"] == "keep", (v1["decision"], v2["decision"])
    assert v1["profile"]["taken"]["best_from"] is None and (ws.profiles / "v1" / "best").is_dir()
    # the profiles' outputs compared and their seed recorded (was a run of its own in
    # tests/engine/test_profile_escalation.py, the same as v1 here)
    assert v1["profile"]["outputs"]["checked"] == 4, v1["profile"].get("outputs")
    assert isinstance(v1["profile"]["taken"]["seed"], int) and (ws.profiles / "v1" / "cand" / "outputs.json").is_file()
    taken = v2["profile"]["taken"]
    assert taken["best_from"] == 1 and taken["trees"]["best"] == v1["profile"]["taken"]["trees"]["cand"]
    assert taken["gpu"].endswith("GPU-fake-0") and taken["keep"] == "time"
    assert not (ws.profiles / "v2" / "best").exists() and (ws.profiles / "v2" / "cand" / "summary.json").is_file()
    assert v2["profile"]["best"] == v1["profile"]["cand"]  # the same summary, compared with the new candidate
    # profiled minutes apart, not seconds: the reused pair's run-to-run term is the larger one
    assert "plus 0.3% run-to-run" in v1["profile"]["comparison"]["noise"]
    assert f"plus {REUSED_RUN_NOISE_PCT:g}% run-to-run" in v2["profile"]["comparison"]["noise"]
    assert "profiler: cls=large agrees" in v2["decision"]["reason"]
    # the profile pair, which showed every claimed class, is each keep's confirmation: no
    # fresh servers were started for looks (external_truth.by_profiler)
    with Store(ws.db_path, readonly=True) as store:
        confs = {it.version: it.record["confirmation"] for it in store.iterations() if it.version}
    assert {v: c["path"] for v, c in confs.items()} == {1: "profiler", 2: "profiler"}
    assert confs[2]["outcome"] == "confirmed" and confs[2]["looks"] == 0
    assert "confirmed in fresh processes (the profiler's kernel time: cls=large" in v2["decision"]["reason"]
    assert not list(ws.log_dir(1).glob("reverify*")) and not list(ws.log_dir(2).glob("reverify*"))
    # [profile].baseline = "first-keep" (the default): nothing profiled before the first verdict;
    # the first keep's profile of best (the baseline's tree, kopt's seed) is the baseline's, and
    # every later keep's outputs are compared with it, not with the keep that made best
    assert record(ws, 0)["profile"] is None
    anchor = v1["profile"]["anchor"]
    assert anchor == v1["profile"]["taken"]["seed"] and (ws.profiles / "v1" / "best" / "outputs.json").is_file()
    assert v1["profile"]["outputs"]["against"] == v2["profile"]["outputs"]["against"] == "baseline"
    assert "anchor" not in v2["profile"] and taken["seed"] == anchor
    assert v1["profile"]["baseline"] == v1["profile"]["best"]  # results.md's baseline profile
    assert kopt(["--root", str(ws.root), "report", ws.tag]) == 0
    assert "- baseline: target kernels" in (ws.dir / "results.md").read_text()


def test_no_reuse_of_a_profile_older_than_reuse_best_s(fake_env, tmp_path, monkeypatch, driven_clock):
    ws = two_keeps(fake_env, tmp_path, monkeypatch, "o", extra="reuse_best_s = 0.001\n")
    v2 = record(ws, 2)
    assert v2["status"] == "keep" and v2["profile"]["taken"]["best_from"] is None
    assert (ws.profiles / "v2" / "best" / "summary.json").is_file()


def test_an_early_baseline_profile_lets_the_first_keep_profile_its_candidate_alone(
    fake_env, tmp_path, monkeypatch, driven_clock
):
    """[profile].baseline "early" (the tune proposer's "auto"): the baseline's tree profiled before
    the first proposal as a keep profiles a tree, and the first keep compares its candidate with
    that profile (at its seed, its outputs the reference) instead of profiling both trees."""
    ws = two_keeps(fake_env, tmp_path, monkeypatch, "e", extra='baseline = "early"\n', iters=1)
    v0, v1 = record(ws, 0), record(ws, 1)
    base = v0["profile"]["taken"]
    assert set(base["trees"]) == {"best"} and base["baseline"] is True and base["calls"] is None
    assert base["seed"] == v0["profile"]["seed"] and (ws.profiles / "v0" / "best" / "outputs.json").is_file()
    assert v1["status"] == "keep", v1["decision"]
    taken = v1["profile"]["taken"]
    assert taken["best_from"] == 0 and taken["trees"]["best"] == base["trees"]["best"] and taken["seed"] == base["seed"]
    assert not (ws.profiles / "v1" / "best").exists() and v1["profile"]["best"] == v0["profile"]["best"]
    assert "anchor" not in v1["profile"] and v1["profile"]["outputs"]["against"] == "baseline"
    assert v1["profile"]["outputs"]["checked"] == 4, v1["profile"]["outputs"]
    assert f"plus {REUSED_RUN_NOISE_PCT:g}% run-to-run" in v1["profile"]["comparison"]["noise"]
    with Store(ws.db_path, readonly=True) as store:
        conf = next(it.record["confirmation"] for it in store.iterations() if it.version == 1)
    assert conf["path"] == "profiler" and conf["looks"] == 0  # by the profiler, against the trusted tree


@pytest.mark.parametrize("when", ["first-keep", "early"])
def test_a_timer_patch_never_gets_the_profile_pair_as_its_confirmation(
    fake_env, tmp_path, monkeypatch, driven_clock, when
):
    """Hostile: the bench's numbers halved (timer:0.5), the GPU's work unchanged. The profile
    pair stands in for the fresh looks only when it shows the claim (external_truth.by_profiler):
    here the profiler sees no gain, so no confirmation by it, and no keep; nor against the
    baseline's own profile taken early."""
    extra = f'baseline = "{when}"\n'
    ws = two_keeps(fake_env, tmp_path, monkeypatch, "x", extra=extra, script=["timer:0.5"], iters=1)
    v1 = record(ws, 1)
    if when == "early":  # compared with the baseline's own profile: the candidate's alone was taken
        assert v1["profile"]["taken"]["best_from"] == 0 and not (ws.profiles / "v1" / "best").exists()
    assert v1["status"] != "keep" and "profiler_disagrees" in v1["decision"]["flags"], v1["decision"]
    with Store(ws.db_path, readonly=True) as store:
        rec = next(it.record for it in store.iterations() if it.version == 1)
    assert (rec.get("confirmation") or {}).get("path") != "profiler"
    assert "the profiler's kernel time:" not in v1["decision"]["reason"]
