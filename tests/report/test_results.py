"""`kopt report` on a finished fake-target run: every section, numbers checked against run.db.

Expected values are computed here from the samples table with the statistics module, for
the scenario as it is (tests/report/scenario.py): v2 and v6 are masked, so the final tree
is v4's commit, measured only by v4's own "verify" candidate samples (the format command
changes the tree, so every keep is re-measured after formatting); the baseline tree is
measured by v0 and by v1's side "best".
"""

from __future__ import annotations

import importlib.metadata
import json
import math
import platform
import statistics
import sys
from pathlib import Path

import pytest

from kopt_supervisor.engine import fmt
from kopt_supervisor.engine.report import write_report
from kopt_supervisor.engine.report.render import SECTIONS
from kopt_supervisor.kopt_tui.cli import main as kopt
from tests.conftest import git
from tests.report.conftest import db_rows, read, sections, table


@pytest.fixture(scope="module")
def report(demo, monkeypatch_module):
    monkeypatch_module.setitem(sys.modules, "matplotlib", None)  # the text chart, even where matplotlib exists
    path = write_report(demo)
    return read(path)


@pytest.fixture(scope="module")
def monkeypatch_module():
    mp = pytest.MonkeyPatch()
    yield mp
    mp.undo()


def iterations(ws) -> dict[int, dict]:
    rows = db_rows(
        ws,
        "SELECT version, status, masked, hypothesis, commit_sha, best_commit_before, record "
        "FROM iterations ORDER BY version",
    )
    return {r["version"]: {**dict(r), "record": json.loads(r["record"])} for r in rows}


def values(ws, where: str, *args) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for r in db_rows(ws, f"SELECT config, value FROM samples WHERE {where} ORDER BY id", *args):
        out.setdefault(r["config"], []).append(r["value"])
    return out


def baseline_values(ws) -> dict[str, list[float]]:
    """v0's baseline and v1's side "best" of every stage (eval, reverify, verify), unflagged."""
    return values(ws, "flagged = 0 AND ((version = 0 AND stage = 'baseline') OR (version = 1 AND side = 'best'))")


def final_values(ws) -> dict[str, list[float]]:
    return values(ws, "flagged = 0 AND version = 4 AND stage = 'verify' AND side = 'cand'")


def production(config: str) -> bool:
    return int(config.split("n=")[1]) >= 256


def geomean(xs: list[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def test_scenario_is_what_the_expectations_assume(demo):
    its = iterations(demo)
    assert [(v, it["status"], bool(it["masked"])) for v, it in its.items()] == [
        (0, "baseline", False),
        (1, "keep", False),
        (2, "regression", True),
        (3, "keep", False),
        (4, "keep", False),
        (5, "fail_propose", False),
        (6, "keep", True),
    ]
    assert its[6]["best_commit_before"] == its[4]["commit_sha"]
    # v6 measured v4's tree too: leaving it out is what masking must do
    assert values(demo, "version = 6 AND side = 'best'")
    assert its[1]["best_commit_before"] == its[0]["commit_sha"]


def test_every_section_is_present_in_order(report):
    heads = [line[3:] for line in report.splitlines() if line.startswith("## ")]
    assert heads == list(SECTIONS)


def test_latency_statistics_match_the_store(demo, report):
    rows = table(sections(report)["Latency per config"], "config")
    base, final = baseline_values(demo), final_values(demo)
    assert set(base) == set(final) and len(base) == 4
    seen = {}
    config = None
    for row in rows:
        config = row["config"] or config
        seen[(config, row["tree"])] = row
    for config in base:
        for tree, vals in (("baseline", base[config]), ("final", final[config])):
            row = seen[(config, tree)]
            q = statistics.quantiles(vals, n=10, method="inclusive")
            assert row["samples"] == str(len(vals))
            assert row["median"] == fmt.num(statistics.median(vals))
            assert row["mean"] == fmt.num(statistics.fmean(vals))
            assert row["std"] == fmt.num(statistics.stdev(vals))
            assert row["min"] == fmt.num(min(vals))
            assert row["p10"] == fmt.num(q[0])
            assert row["p90"] == fmt.num(q[8])
    text = sections(report)["Latency per config"]
    n_base = sum(len(v) for v in base.values())
    assert f"v0 (12), v1 ({n_base - 12})" in text
    assert f"final tree samples by iteration: v4 ({sum(len(v) for v in final.values())})" in text
    assert "v6" not in text


def test_speedups_and_geomeans_match_the_store(demo, report):
    base, final = baseline_values(demo), final_values(demo)
    speed = {c: statistics.median(base[c]) / statistics.median(final[c]) for c in base}
    rows = {r["config"]: r for r in table(sections(report)["Speedup per config"], "config")}
    for c, s in speed.items():
        assert rows[c]["speedup"] == f"{s:.3f}×"
        assert rows[c]["production"] == ("yes" if production(c) else "no")
        assert rows[c]["baseline median us"] == fmt.num(statistics.median(base[c]))
    prod = [speed[c] for c in speed if production(c)]
    assert len(prod) == 3
    gm = geomean(prod)
    assert rows["**geomean over 3 production config(s)**"]["speedup"] == f"{gm:.3f}×"
    assert f"Geometric-mean speedup over the 3 production config(s): {gm:.3f}×" in report

    classes = {r["class"]: r for r in table(sections(report)["Speedup per class"], "class")}
    small = [speed[c] for c in speed if "cls=small" in c and production(c)]
    large = [speed[c] for c in speed if "cls=large" in c and production(c)]
    assert classes["cls=small"]["speedup (medians)"] == f"{geomean(small):.3f}×"
    assert classes["cls=large"]["speedup (medians)"] == f"{geomean(large):.3f}×"
    its = iterations(demo)
    paired = 1 / math.prod(its[v]["record"]["classes"]["cls=small"]["ratio"] for v in (1, 3, 4))
    assert classes["cls=small"]["speedup (paired, chain of keeps)"] == f"{paired:.3f}×"


def test_kept_iterations_dispatch_and_masked(demo, report):
    its = iterations(demo)
    s = sections(report)
    kept = table(s["Kept iterations"], "iteration")
    assert [r["iteration"] for r in kept] == ["v1", "v3", "v4"]
    assert [r["hypothesis"] for r in kept] == [its[v]["hypothesis"] for v in (1, 3, 4)]
    assert kept[1]["target"] == "cls=small"
    assert kept[0]["commit"] == its[1]["commit_sha"][:10]
    assert kept[2]["rounds"] == str(its[4]["record"]["decision"]["rounds"])

    dispatch = {r["dispatch condition (class)"]: r for r in table(s["Dispatch"], "dispatch condition (class)")}
    assert "v3" in dispatch["cls=small"]["implementation (the keeps that chose it)"]
    assert "shared path" in dispatch["cls=large"]["implementation (the keeps that chose it)"]

    masked = table(s["Masked iterations"], "iteration")
    assert [(r["iteration"], r["status (masked)"]) for r in masked] == [("v2", "regression"), ("v6", "keep")]
    assert "2 masked" in s["Summary"]
    assert its[6]["commit_sha"] not in s["Summary"] and its[4]["commit_sha"] in s["Summary"]
    spent = sum(sum(it["record"].get("gpu_seconds", {}).values()) for it in its.values() if not it["masked"])
    assert f"{spent:.1f} s of benchmarking over the unmasked iterations" in s["Summary"]
    assert "interval at 0.99 confidence" in s["Summary"]
    all_its = table(s["All iterations"], "iteration")
    assert [r["iteration"] for r in all_its] == ["v0", "v1", "v3", "v4", "v5"]


def test_roofline_uses_the_formulas_the_medians_and_the_cited_peak(demo, report):
    text = sections(report)["Roofline"]
    assert "hbm_bandwidth: 3.35 TB/s <- kopt_supervisor/gpu_wiki/h100-sxm.md:" in text
    final = final_values(demo)
    rows = {r["config"]: r for r in table(text, "config")}
    for c, vals in final.items():
        n = int(c.split("n=")[1])
        seconds = statistics.median(vals) * 1e-6
        assert rows[c]["bytes"] == fmt.num(float(n * 8))
        assert rows[c]["FLOPs"] == fmt.num(float(n * 2))
        assert rows[c]["final bandwidth"] == fmt.rate(n * 8 / seconds, "B/s")
        assert rows[c]["final bandwidth"].endswith(" MB/s")  # CPU times
        assert rows[c]["bound"] == "memory"
        floor = max(n * 8 / 3.35e12, n * 2 / 989.4e12)
        assert rows[c]["final % of peak"] == fmt.share(100 * floor / seconds)
    classes = {r["class"]: r for r in table(text, "class")}
    assert "below the 90% stop target" in classes["cls=large"]["bound or blocker"]
    # the loop's own record of the final keep is cited beside it
    rec = iterations(demo)[4]["record"]["roofline"]["classes"]["cls=large"]
    assert f"`cls=large` {rec['pct_geomean']:.3g}% (memory)" in text


def test_gpu_commands_environment_provenance(demo, report):
    s = sections(report)
    gpu = s["GPU and idle-state evidence"]
    assert "GPU index 0, model NVIDIA H100 80GB HBM3, UUID GPU-5f1c0d2e-fake-h100" in gpu
    rows = table(gpu, "iteration")
    assert [r["iteration"] for r in rows] == ["v0", "v1", "v3", "v4"]
    assert all(r["before"].startswith("util 0%, mem 12 MiB, no foreign process") for r in rows)

    cfg = demo.load_config()
    cmds = s["Commands"]
    assert f"`{cfg.target.bench}`" in cmds and f"`{cfg.propose.command}`" in cmds
    assert f"`{cfg.format.command}`" in cmds
    assert "Served looks" not in cmds  # a process-level run: the bench is what measured
    # a served run's samples come from its serve command: the report names it beside the bench
    from dataclasses import replace

    from kopt_supervisor.engine.report import prepare
    from kopt_supervisor.engine.report.provenance import commands

    inp = prepare(demo).inputs
    served = replace(inp, cfg=replace(cfg, target=replace(cfg.target, serve="python serve.py --serve")))
    assert (
        "- Served looks (one process per tree, run in its worktree; the decisions' samples): `python serve.py --serve`"
        in commands(served)
    )

    env = s["Environment"]
    assert f"Bench Python: {platform.python_version()} `{sys.executable}`" in env
    try:
        torch = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        torch = "not installed"
    assert f"- torch: {torch}" in env
    assert "`-O3 -DKOPT_FAKE=1`" in env and "`FAKE_NOISE=0.003`" in env
    assert "Captured at the run's baseline" in env  # the loop records it at v0

    its = iterations(demo)
    prov = s["Provenance"]
    repo = Path(db_rows(demo, "SELECT value FROM meta WHERE key = 'repo'")[0][0].strip('"'))
    assert f"Baseline commit: `{its[0]['commit_sha']}`" in prov
    assert f"`{its[4]['commit_sha']}`" in prov
    assert f"`{git(repo, 'rev-parse', its[4]['commit_sha'] + '^{tree}')}`" in prov
    assert 'production = "n >= 256"' in prov  # the frozen kopt.toml


def test_chart_is_text_with_the_kept_points(demo, report):
    txt = read(demo.dir / "results_latency.txt")
    assert not (demo.dir / "results_latency.png").exists()
    assert "matplotlib is not installed" in sections(report)["Latency per class over iterations"]
    assert txt.strip() in report
    base = baseline_values(demo)
    for cls in ("cls=large", "cls=small"):
        block = txt.split(cls + "\n", 1)[1].split("\n\n", 1)[0]
        versions = [line.split()[0] for line in block.splitlines()]
        assert versions == ["v0", "v1", "v3", "v4"]
        first = block.splitlines()[0]
        expected = geomean([statistics.median(v) for c, v in base.items() if cls in c])
        assert first.split()[-1] == fmt.num(expected)


def test_png_is_drawn_when_matplotlib_imports_and_removed_when_it_does_not(demo, tmp_path, monkeypatch):
    calls: list = []
    fake = tmp_path / "fakeplot"
    (fake / "matplotlib").mkdir(parents=True)
    (fake / "matplotlib" / "__init__.py").write_text("def use(name):\n    pass\n")
    (fake / "matplotlib" / "pyplot.py").write_text(
        "CALLS = []\n"
        "class Line:\n    def get_color(self):\n        return 'C0'\n"
        "class Ax:\n"
        "    def step(self, xs, ys, where=None, label=None):\n        CALLS.append(('step', label, list(xs), list(ys)))\n"
        "        return (Line(),)\n"
        "    def plot(self, *a, **k):\n        CALLS.append(('plot',) + tuple(list(x) if isinstance(x, list) else x for x in a))\n"
        "    def __getattr__(self, name):\n        return lambda *a, **k: None\n"
        "class Fig:\n"
        "    def tight_layout(self):\n        pass\n"
        "    def savefig(self, path, dpi=None):\n        open(path, 'wb').write(b'\\x89PNG fake')\n"
        "def subplots(figsize=None):\n    return Fig(), Ax()\n"
        "def close(fig):\n    CALLS.append(('close',))\n"
    )
    monkeypatch.syspath_prepend(str(fake))
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    path = write_report(demo)
    import matplotlib.pyplot as plt  # the fake

    calls = plt.CALLS
    png = demo.dir / "results_latency.png"
    assert png.read_bytes() == b"\x89PNG fake"
    text = read(path)
    assert "![best latency per class](results_latency.png)" in text and "matplotlib is not installed" not in text
    steps = {c[1]: c for c in calls if c[0] == "step"}
    assert set(steps) == {"cls=large", "cls=small"}
    assert steps["cls=small"][2] == [0, 1, 3, 4, 5]  # kept points, then held to the last unmasked iteration
    assert ("close",) in calls

    monkeypatch.setitem(sys.modules, "matplotlib", None)
    write_report(demo)
    assert not png.exists()


def test_cli_report_writes_results(demo, capsys):
    assert kopt(["--root", str(demo.root), "report", demo.tag]) == 0
    assert str(demo.results) in capsys.readouterr().out
    assert "## Summary" in read(demo.results)


def test_performance_md_is_baseline_and_unmasked_keeps_with_the_stop_summary(demo, report):
    its = iterations(demo)
    perf = read(demo.performance)
    rows = table(perf, "Date")
    assert [r["Commit"] for r in rows] == [its[v]["commit_sha"][:10] for v in (0, 1, 3, 4)]
    assert [r["Status"] for r in rows] == ["baseline", "keep", "keep", "keep"]
    assert rows[2]["Class / dispatch condition"] == "cls=small"
    assert rows[3]["Bottleneck targeted"] == its[4]["hypothesis"]
    cls_small = its[3]["record"]["classes"]["cls=small"]
    assert rows[2]["Δ vs previous best"] == f"{cls_small['delta_pct']:+.2f}% faster"  # never a bare sign
    assert rows[2]["us"] == fmt.num(cls_small["cand"])  # performance.md: the one formatter
    assert all(r["Bench command"] == f"`{demo.load_config().target.bench}`" for r in rows)
    stop = sections(perf)["Stop Summary"]
    assert "[stop].max_iters = 6" in stop and f"BEST_COMMIT: {its[4]['commit_sha']}" in stop


def test_agent_costs_add_up_the_records_masked_iterations_included(demo, report):
    """The scenario's proposer reports $0.1·N, 1000·N tokens in (500·N cached) and 100·N out
    through $KOPT_USAGE; v5 (nochange) reports tokens and no cost. Every number is checked
    against the records, and the masked iterations' runs are counted (their money is spent)."""
    its = iterations(demo)
    agents = {v: it["record"]["proposal"]["agent"] for v, it in its.items() if v > 0}
    assert agents[3]["cost_usd"] == pytest.approx(0.3) and agents[5]["cost_usd"] is None
    text = sections(report)["Agent costs"]
    cost = sum(a["cost_usd"] for a in agents.values() if a["cost_usd"] is not None)
    tokens = sum(a["input_tokens"] + a["output_tokens"] for a in agents.values())
    assert f"- Cost: {fmt.usd(cost)} (+ 1 run(s) that reported none) over 6 agent run(s)" in text
    assert f"- Tokens: {tokens:,} (input {sum(a['input_tokens'] for a in agents.values()):,}" in text
    assert "- Reported no cost: `command` (1 run(s)); their dollars are unknown, not zero" in text
    assert "no dollar budget ([propose].budget_usd = 0)" in text
    rows = {r["iteration"]: r for r in table(text, "iteration")}
    assert list(rows) == ["v1", "v2 (masked)", "v3", "v4", "v5", "v6 (masked)"]
    assert rows["v3"]["cost"] == fmt.usd(0.3) and rows["v5"]["cost"] == "not reported"
    assert rows["v3"]["tokens in / cached / out"] == "3k / 1.5k / 300"
    assert rows["v4"]["session"] == "`report-v4`" and rows["v4"]["run"] == "proposal"
    assert rows["v1"]["transcript"].startswith("`logs/v1/proposer.out`")
    summary = sections(report)["Summary"]
    assert f"- Agent: {fmt.usd(cost)} (+ 1 run(s) that reported none) over 6 agent run(s)" in summary


def test_the_sandbox_is_said_in_the_summary(demo, report):
    meta = json.loads(db_rows(demo, "SELECT value FROM meta WHERE key = 'sandbox'")[0][0])
    summary = sections(report)["Summary"]
    assert f"- Sandbox: {meta['summary']}" in summary and "Warning" not in summary
    assert meta["confined"] is True
    perf = read(demo.performance)
    assert f"Sandbox: {meta['summary']}" in perf
