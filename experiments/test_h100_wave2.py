"""experiments/h100_wave2 without a GPU: what it reads out of a run's records (on profiler
output parsed by kopt's own ncu adapter from tests/data), the scripted proposer's changes, the
prescan's choice, the deadline and the packing rules, and the smoke mode of its cheapest part
end to end (part1 with one demo of one iteration, Triton's interpreter)."""

from __future__ import annotations

import ast
import csv
import difflib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from experiments.h100_wave2 import common, probes, records
from experiments.h100_wave2.prescan import choose
from experiments.h100_wave2.propose_softmax import apply
from kopt_supervisor.engine.diffscan import scan
from kopt_supervisor.engine.profile import agrees
from kopt_supervisor.engine.profile.classes import ConfigRef, compare_per_class
from kopt_supervisor.engine.profile.ncu import NCU_IMPORT, NCU_NVTX, NcuProfiler
from kopt_supervisor.engine.sandbox import probe

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data"
REFS = [
    ConfigRef(f"dclass={d},n={n}", f"dclass={d}", {"dclass": d, "n": n})
    for d, n in (("narrow", 1024), ("narrow", 2048), ("wide", 4096))
]
NARROW, WIDE = "dclass=narrow", "dclass=wide"


class BenchClass:
    """A bench class result as decide.estimate.ClassResult carries it (what `agrees` reads)."""

    def __init__(self, cls: str, verdict: str, ratio: float, lo: float, hi: float) -> None:
        self.cls, self.verdict, self.ratio, self.lo, self.hi = cls, verdict, ratio, lo, hi


def profile_record(cand: str, bench: list[BenchClass]) -> tuple[dict[str, Any], bool]:
    """record["profile"] as engine/loop/evidence.py writes it, from tests/data samples."""
    best_s, cand_s = NcuProfiler().parse(DATA / "ncu_nvtx_best", "_rms"), NcuProfiler().parse(DATA / cand, "_rms")
    cmp = compare_per_class(best_s, cand_s, REFS)
    agreement = agrees(bench, cmp, min_effect_pct=1.0)
    return {
        "best": best_s.to_dict(),
        "cand": cand_s.to_dict(),
        "comparison": cmp.to_dict(),
        "agreement": agreement.to_dict(),
    }, agreement.disagrees


def launches_by_range(folder: str) -> dict[str, dict[str, int]]:
    """range ("" outside) -> kernel -> launches, read from the two CSVs' text with the csv module."""

    def rows(p: Path) -> list[dict[str, str]]:
        return [r for r in csv.DictReader(x for x in p.read_text().splitlines() if x.startswith('"')) if r["ID"]]

    out: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for plain, named in zip(rows(DATA / folder / NCU_IMPORT), rows(DATA / folder / NCU_NVTX), strict=True):
        rng = "" if plain["Kernel Name"] == named["Kernel Name"] else named["Kernel Name"]
        out[rng][plain["Kernel Name"]] += 1
    return out


def view(
    version: int,
    record: dict[str, Any],
    *,
    target: str | None,
    status: str,
    flags: list[str],
    reverify_s: float | None = None,
) -> dict[str, Any]:
    record = {
        **record,
        "decision": {"verdict": status, "flags": flags, "rounds": 4, "reason": "r"},
        "timings": {"looks_s": [0.5, 0.4], "total_s": 9.0, **({"reverify_s": reverify_s} if reverify_s else {})},
    }
    if reverify_s:
        record["reverify"] = {"verdict": "keep", "rounds": 3, "agrees": True, "seconds": reverify_s}
    return records.iteration_view(version, status, "h", target, "class" if target else "global", record)


# --- what the records say -----------------------------------------------------------------


def test_every_kernel_of_every_config_range_is_listed_on_both_sides() -> None:
    rec, disagrees = profile_record(
        "ncu_nvtx_renamed",
        [BenchClass(NARROW, "improved", 0.963, 0.95, 0.975), BenchClass(WIDE, "tied", 1.0, 0.995, 1.005)],
    )
    assert not disagrees
    v = records.profile_view(rec)
    assert v is not None
    for side, folder in (("best", "ncu_nvtx_best"), ("cand", "ncu_nvtx_renamed")):
        expected = launches_by_range(folder)
        got = {rng: {k["kernel"]: k["calls"] for k in ks} for rng, ks in v["ranges"][side].items()}
        assert got == {rng: dict(ks) for rng, ks in expected.items()}, side
    # the renamed kernel shows as appeared/disappeared in its class, whatever its name
    wide = next(c for c in v["comparison"]["classes"] if c["cls"] == WIDE)
    best_wide = set(launches_by_range("ncu_nvtx_best")["kopt:dclass=wide,n=4096"])
    cand_wide = set(launches_by_range("ncu_nvtx_renamed")["kopt:dclass=wide,n=4096"])
    assert set(wide["appeared"]) == cand_wide - best_wide and set(wide["disappeared"]) == best_wide - cand_wide
    assert wide["appeared"]  # the sample does rename a kernel
    table = records.range_table([view(3, {"profile": rec}, target=NARROW, status="keep", flags=[])])
    assert {r[1] for r in table["rows"]} == {"best", "cand"}
    assert any("(outside every range)" == r[2] for r in table["rows"])


def test_a_class_targeted_keep_the_profiler_refutes_is_named_and_a_global_one_is_not() -> None:
    rec, disagrees = profile_record(
        "ncu_nvtx_moved", [BenchClass(NARROW, "improved", 0.6, 0.58, 0.62), BenchClass(WIDE, "tied", 1.0, 0.995, 1.005)]
    )
    assert disagrees  # work moved outside the ranges: the narrow gain cannot be confirmed
    views = [
        view(0, {}, target=None, status="baseline", flags=[]),
        view(1, {"profile": rec}, target=NARROW, status="rejected", flags=["profiler_disagrees"]),
        view(2, {"profile": rec}, target=None, status="rejected", flags=["profiler_disagrees"]),
        view(3, {}, target=WIDE, status="keep", flags=[], reverify_s=30.0),
        view(4, {}, target=None, status="keep", flags=[], reverify_s=50.0),
    ]
    fig = records.verification_figures(views)
    assert [x["version"] for x in fig["class_targeted_keeps_rejected_by_profiler"]] == [1]
    assert fig["profiler_disagreed"] == [1, 2]
    assert fig["keeps"] == 2 and fig["iterations"] == 4
    assert fig["reverify_s_per_bench_keep"] == {"n": 2, "median": 40.0, "min": 30.0, "max": 50.0}
    agreement = views[1]["profile"]["agreement"]
    assert agreement["disagrees"] and {c["cls"]: c["status"] for c in agreement["classes"]}[NARROW] == "disagrees"


def test_a_profiler_error_is_reported_as_such() -> None:
    v = view(
        5, {"profile": {"error": "ncu on best/ exited 1"}}, target=None, status="rejected", flags=["profiler_failed"]
    )
    assert records.verification_figures([v])["profiler_failed"] == [5]
    assert "error: ncu on best/" in records.iteration_table([v])["rows"][0][7]


# --- the scripted proposer and the prescan ------------------------------------------------


KERNEL = (REPO / "examples" / "softmax" / "softmax" / "kernel.py").read_text()


def test_the_aa_candidate_is_the_same_code() -> None:
    out = apply(KERNEL, {"kind": "comment", "text": "A/A"})
    assert out != KERNEL and ast.dump(ast.parse(out)) == ast.dump(ast.parse(KERNEL))


def test_a_set_change_moves_exactly_one_launch_global() -> None:
    out = apply(KERNEL, {"kind": "set", "name": "NUM_WARPS", "value": 8})
    diff = [(a, b) for a, b in zip(KERNEL.splitlines(), out.splitlines(), strict=True) if a != b]
    assert diff == [("NUM_WARPS = 4", "NUM_WARPS = 8")]
    with pytest.raises(SystemExit):
        apply(KERNEL, {"kind": "set", "name": "NO_SUCH_GLOBAL", "value": 1})


def test_the_delay_is_injected_after_the_launch_only_on_a_gpu_tensor() -> None:
    out = apply(KERNEL, {"kind": "delay", "cycles": 5000})
    assert out.count("torch.cuda._sleep(5000)") == 1
    tail = out[out.index("_softmax_rows[grid]") :]
    assert tail.index("if x.is_cuda:") < tail.index("return out.reshape(shape)")


def test_the_proposer_writes_its_plan_and_refuses_repairs(tmp_path: Path) -> None:
    (tmp_path / "softmax").mkdir()
    (tmp_path / "softmax" / "kernel.py").write_text(KERNEL)
    changes = tmp_path / "changes.json"
    changes.write_text(json.dumps({"1": {"kind": "set", "name": "ROWS_PER_PROGRAM", "value": 2, "hypothesis": "rows"}}))
    script = REPO / "experiments" / "h100_wave2" / "propose_softmax.py"
    env = {**os.environ, "KOPT_ITERATION": "1", "KOPT_PLAN": str(tmp_path / "plan.md")}
    assert subprocess.run([sys.executable, script, changes], cwd=tmp_path, env=env).returncode == 0
    assert "ROWS_PER_PROGRAM = 2" in (tmp_path / "softmax" / "kernel.py").read_text()
    assert (tmp_path / "plan.md").read_text().splitlines() == ["rows", "scope: global"]
    for extra in ({"KOPT_REPAIR": "1"}, {"KOPT_ITERATION": "2"}):  # a repair, an iteration with no change
        assert (
            subprocess.run(
                [sys.executable, script, changes], cwd=tmp_path, env={**env, **extra}, capture_output=True
            ).returncode
            == 1
        )


def test_the_prescan_picks_the_change_closest_to_the_target_in_every_class() -> None:
    per_class = {
        "NUM_WARPS=8": {"float16": 1.031, "bfloat16": 1.026},  # slower by ~3% in both: the pick
        "NUM_WARPS=2": {"float16": 1.029, "bfloat16": 0.97},  # mixed signs: never
        "NUM_WARPS=16": {"float16": 1.09, "bfloat16": 1.08},  # beyond twice the target
        "ROWS_PER_PROGRAM=2": {"float16": 0.975, "bfloat16": 0.972},  # faster
    }
    assert choose(per_class, 3.0, "slower") == "NUM_WARPS=8"
    assert choose(per_class, 3.0, "faster") == "ROWS_PER_PROGRAM=2"
    assert choose(per_class, 3.0, "any") == "NUM_WARPS=8"  # 0.6 points off against 0.8
    assert choose({"x": {"float16": 1.01, "bfloat16": 1.012}}, 3.0, "any") is None  # under half the target


# --- deadlines and packing ----------------------------------------------------------------


def test_a_command_is_asked_to_stop_then_killed(tmp_path: Path) -> None:
    asked: list[float] = []
    t0 = time.monotonic()
    res = common.run_cmd(
        [sys.executable, "-c", "import time; print('up', flush=True); time.sleep(60)"],
        tmp_path / "log",
        timeout_s=2.0,
        stop_after_s=0.5,
        on_stop=lambda: asked.append(time.monotonic()),
    )
    assert res.stopped and res.killed and not res.ok
    assert len(asked) == 1 and asked[0] - t0 >= 0.5
    assert res.wall_s < 10 and "up" in res.log.read_text()


def test_the_pack_leaves_trees_and_caches_out_and_keeps_under_its_limit(tmp_path: Path) -> None:
    ws = tmp_path / "raw"
    for sub in ("cache/x", "best", "cand", "logs/v1"):
        (ws / "ws_t" / sub).mkdir(parents=True)
    (ws / "ws_t" / "cache" / "x" / "kernel.cubin").write_bytes(b"c")
    (ws / "ws_t" / "best" / "kernel.py").write_text("x")
    (ws / "ws_t" / "logs" / "v1" / "eval.out").write_text("look")
    (ws / "ws_t" / "profile.ncu-rep").write_bytes(os.urandom(300_000))
    (ws / "ws_t" / "profiles" / "v1" / "cand").mkdir(parents=True)
    (ws / "ws_t" / "profiles" / "v1" / "cand" / "ncu.csv").write_text("==PROF== 1 pass")
    got = common.pack(tmp_path / "a.tgz", [(ws, "raw")], limit_bytes=10**7)
    names = set(tarfile.open(tmp_path / "a.tgz").getnames())
    assert "raw/ws_t/logs/v1/eval.out" in names and "raw/ws_t/profile.ncu-rep" in names
    assert "raw/ws_t/profiles/v1/cand/ncu.csv" in names  # a profile's side folder is no tree
    trees = [n for n in names if "profiles" not in n.split("/")]
    assert not any(part in n.split("/") for n in trees for part in ("cache", "best", "cand"))
    got = common.pack(tmp_path / "b.tgz", [(ws, "raw")], limit_bytes=100_000)
    assert "raw/ws_t/profile.ncu-rep" in got["left_out"]
    assert "raw/ws_t/profile.ncu-rep" not in tarfile.open(tmp_path / "b.tgz").getnames()


def test_the_summary_survives_a_failing_step(tmp_path: Path) -> None:
    s = common.Summary(tmp_path, "partX", "test", "cmd")
    with common.measured(s, "breaks"):
        raise RuntimeError("boom")
    with common.measured(s, "works") as e:
        e["figure"] = 1.5
    data = json.loads((tmp_path / "summary.json").read_text())
    assert data["steps"]["breaks"]["ok"] is False and "boom" in data["steps"]["breaks"]["error"]
    assert data["steps"]["works"] == {**data["steps"]["works"], "ok": True, "figure": 1.5}
    assert "## breaks: FAILED" in (tmp_path / "summary.md").read_text()


# --- the smoke mode of the cheapest part --------------------------------------------------


@pytest.fixture
def home_work() -> Iterator[Path]:
    """A folder of this test's own outside /tmp (the sandbox makes /tmp private), under the
    home folder: unique, so two suites at once (a clone's and a worktree's) never share one,
    and removed after."""
    base = Path.home() / ".kopt-wave2-test"
    base.mkdir(exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f"{os.getpid()}-", dir=base))
    yield work
    shutil.rmtree(work, ignore_errors=True)


@pytest.mark.slow
def test_part1_smoke_runs_end_to_end(tmp_path: Path, home_work: Path) -> None:
    """One demo through the script as the lead calls it (--smoke), its baseline only (a candidate
    of the tune proposer is a keep on the interpreter, and its fresh-process re-decision alone
    takes a minute on this kind of machine; the candidates' records are read above, and
    `bash experiments/h100_wave2.sh part1 --smoke` runs both demos with one candidate each)."""
    env = {
        **os.environ,
        "OUT": str(tmp_path / "out"),
        "WAVE2_WORK": str(home_work),
        "WAVE2_DEMOS": "rmsnorm",
        "WAVE2_DEMO_ITERS": "0",
        "PY": sys.executable,
    }
    res = subprocess.run(
        ["bash", str(REPO / "experiments" / "h100_wave2.sh"), "part1", "--smoke"],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]
    out = tmp_path / "out" / "part1"
    assert sorted(p.name for p in out.iterdir()) == ["part1.tgz", "run.log", "summary.json", "summary.md"]
    data = json.loads((out / "summary.json").read_text())
    demo = data["steps"]["demo_rmsnorm"]
    assert demo["ok"] and [(v["version"], v["status"]) for v in demo["iterations"]] == [(0, "baseline")]
    assert demo["result"]["rc"] == 0 and "--max-iters 0" in demo["result"]["command"]
    assert demo["iterations"][0]["timings"]["total_s"] > 0
    assert data["steps"]["ncu_range_capture"]["skipped"] and data["machine"]["torch_version"]
    names = tarfile.open(out / "part1.tgz").getnames()
    assert "raw/ws_wave2-rmsnorm/records.json" in names and "raw/ws_wave2-rmsnorm/run.db" in names


def test_the_ncu_probe_runs_kopts_command_inside_the_sandbox(monkeypatch: pytest.MonkeyPatch, home_work: Path) -> None:
    """probes.ncu_under_sandbox with the fake ncu of tests/fake_target (it runs the command, then
    reports launches in kopt ranges): the confinement, the runner and the report's reading back
    are the device's; only ncu and the workload are stand-ins."""
    if not probe().works:
        pytest.skip("bubblewrap does not work on this machine")
    fake_bin = REPO / "tests" / "fake_target" / "bin"
    monkeypatch.setenv("PATH", f"{fake_bin}:{os.environ['PATH']}")
    work = home_work / "probe"
    got = probes.ncu_under_sandbox(
        work,
        workload="open('ran.txt', 'w').write('1')\n",
        files={"kernel.json": (REPO / "tests" / "fake_target" / "kernel.json").read_text()},
    )
    assert got["ok"] is True, got
    # the fake ncu's 12 launches in kopt ranges, and 5 of the bench's own outside them (one
    # unfiltered pass here: the probe runs kopt's single-pass command)
    assert got["launches"] == 17 and all(r.startswith("kopt:") for r in got["kopt_ranges"])
    assert {"fake_reference", "fake_inputs"} <= set(got["kernels"])
    assert (work / "ncu-probe" / "ws" / "tree" / "ran.txt").read_text() == "1"  # the workload ran, in its tree
    monkeypatch.setenv("PATH", f"{fake_bin}:{os.environ['PATH']}")
    bad = probes.ncu_under_sandbox(
        work,
        workload="raise SystemExit(3)\n",
        files={"kernel.json": (REPO / "tests" / "fake_target" / "kernel.json").read_text()},
    )
    assert bad["ok"] is False and "3" in bad["why"]


def git_diff(old: str, new: str, path: str = "softmax/kernel.py") -> str:
    return f"diff --git a/{path} b/{path}\n" + "".join(
        difflib.unified_diff(old.splitlines(True), new.splitlines(True), f"a/{path}", f"b/{path}")
    )


def test_the_delay_candidate_passes_the_diff_scan_only_with_its_allowance() -> None:
    """The injected delay is what the diff scan's clock-time rule exists for: without the
    allowance config_text adds, the candidate would go to review instead of being decided."""
    out = apply(KERNEL, {"kind": "delay", "cycles": 5000})
    assert [f.rule for f in scan(git_diff(KERNEL, out), lambda path: out)] == ["clock-time"]
    assert scan(git_diff(KERNEL, out), lambda path: out, allow=["clock-time:softmax/kernel.py"]) == []
    comment = apply(KERNEL, {"kind": "comment", "text": "A/A"})
    assert scan(git_diff(KERNEL, comment), lambda path: comment) == []


def test_each_mode_gets_the_onboarded_config_with_only_its_own_differences(tmp_path: Path) -> None:
    """The softmax example onboarded as `kopt init --bench` does (its harness bench run once, on
    the interpreter), then the kopt.toml of each mode, loaded by kopt's own config loader."""
    from experiments.h100_wave2 import softmax_target
    from kopt_supervisor.engine.config import DecideConfig
    from kopt_supervisor.engine.config.toml_io import loads as loads_config

    repo = softmax_target.make_repo(tmp_path / "repo")
    proposal = softmax_target.onboard(repo, tmp_path / "logs")
    tools = tmp_path / "tools"
    proposer = softmax_target.install_tools(tools)
    changes = softmax_target.write_changes(tools / "c.json", {1: {"kind": "comment", "hypothesis": "A/A"}})
    cfgs = {
        m: loads_config(softmax_target.config_text(proposal, m, proposer, changes, smoke=False))
        for m in softmax_target.MODES
    }
    served, process, ray = cfgs["served"], cfgs["process"], cfgs["ray"]
    assert "--serve" in served.target.serve and served.target.calls == "calls"
    assert (process.target.serve, process.target.serve_prepare) == ("", False)
    assert process.target.bench == served.target.bench and process.decide == served.decide
    assert (ray.parallel.backend, ray.parallel.lanes, ray.parallel.address) == ("ray", 1, "auto")
    assert served.parallel.backend == "local" and ray.target == served.target and ray.decide == served.decide
    for c in cfgs.values():
        assert c.propose.kind == "command" and str(proposer) in c.propose.command and str(changes) in c.propose.command
        assert c.profile.kind == "none" and c.decide.review_timeout_s == 0.0
        assert c.decide.production_verdicts and c.decide.max_rounds == DecideConfig().max_rounds
        assert c.target.allow_constructs == []
    allowed = loads_config(
        softmax_target.config_text(proposal, "served", proposer, changes, smoke=False, allow_sleep=True)
    )
    assert allowed.target.allow_constructs == ["clock-time:softmax/kernel.py"]


def test_the_serve_phases_are_averaged_from_every_serving_log(tmp_path: Path) -> None:
    from experiments.h100_wave2.run import serve_phases

    logs = tmp_path / "logs" / "v1"
    logs.mkdir(parents=True)
    (logs / "eval_cand_serve1.err").write_text(
        "compiling\nlook 0: bench phases: check 0.40 s, capture 0.10 s, timing 0.05 s; total 0.55 s\n"
        "look 1: bench phases: check 0.20 s, capture 0.30 s, timing 0.05 s; total 0.55 s\n"
    )
    (logs / "eval_bench.err").write_text("look 9: bench phases: check 9.0 s; total 9.0 s\n")  # not a server's
    got = serve_phases(tmp_path)
    assert got["looks"] == 2
    assert got["mean_s"] == pytest.approx({"check": 0.30, "capture": 0.20, "timing": 0.05})
