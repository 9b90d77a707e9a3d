"""The context pack: what it carries, what it leaves out (masked iterations), its size budget."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from kopt_supervisor.engine.config import Config
from kopt_supervisor.engine.profile.ncu import NcuProfiler
from kopt_supervisor.engine.propose.context import build_pack
from kopt_supervisor.engine.propose.context_inputs import Pack, PackInputs, SourceFile, list_sources
from kopt_supervisor.engine.store import Iteration

from .helpers import CONFIGS, META, cfg_with, cls_entry, history, make_repo

DATA = Path(__file__).resolve().parents[1] / "data"


@pytest.fixture(scope="module")
def h100_profile(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """A real profile: the ncu capture of tests/data, parsed by kopt's adapter."""
    d = tmp_path_factory.mktemp("ncu")
    shutil.copy(DATA / "ncu_h100_raw.csv", d / "ncu.csv")
    return NcuProfiler().parse(d, "kopt_capture").to_dict()


def pack_for(its: list[Iteration] | None = None, cfg: Config | None = None, **kw: Any) -> Pack:
    return build_pack(PackInputs(cfg or cfg_with(), META, its if its is not None else history(), 6, **kw))


def test_the_pack_carries_rules_classes_roofline_history_and_regressions() -> None:
    pack = pack_for()
    md, data = pack.markdown, pack.data
    for needle in (
        "Correctness first",
        "One hypothesis per iteration",
        "Do not commit",
        "`bench.py`",
        "`err == 0`",
        "Write the plan",
    ):
        assert needle in md
    # best per class against the baseline, with the roofline
    assert data["best"]["dclass=wide"]["value"] == 30.0 and data["best"]["dclass=wide"]["baseline"] == 40.0
    assert data["best"]["dclass=wide"]["vs_baseline_pct"] == pytest.approx(-25.0)
    # cited specs, per production config bytes, bound, % of peak, the stop target
    assert "hbm_bandwidth: 3.35 TB/s <- docs/gpu-wiki/h100.md:12" in md
    wide = next(r for r in data["roofline"]["configs"] if r["cls"] == "dclass=wide")
    assert wide["bytes"] == 16384 and wide["bound"] == "memory" and wide["production"]
    assert wide["pct_of_peak"] == pytest.approx(100 * (16384 / 3.35e12) / 30e-6)
    assert wide["target"] == pytest.approx(16384 / 3.35e12 / 0.9 / 1e-6)
    # the per-class history with intervals
    v1 = next(h for h in data["history"] if h["version"] == 1)
    assert v1["classes"]["dclass=wide"]["lo_pct"] == pytest.approx(-27.0)
    assert "`dclass=wide` -25.0% [-27.0, -23.0] improved, 6 rounds" in md
    # tried from the current BEST (c1): v2, v3, v5 — not v1, which made it
    assert [h["version"] for h in data["tried_from_best"]] == [2, 3, 5]
    # RECENT_REGRESSIONS: the tie v3 reset them; v5 is the one left
    assert [r["version"] for r in data["recent_regressions"]] == [5] and data["consecutive_regressions"] == 1
    assert "nothing (one lane)" in md


def test_masked_iterations_never_reach_the_agent() -> None:
    pack = pack_for()
    assert "SECRET MASKED IDEA" not in pack.markdown and "SECRET MASKED IDEA" not in pack.json
    assert pack.data["masked_versions"] == [4]
    # v4 (masked) was a keep: the best is still v1's tree
    assert pack.data["goal"]["best_commit"] == "c1"


def test_the_json_is_the_same_data(h100_profile: dict) -> None:
    pack = pack_for(history(h100_profile))
    assert json.loads(pack.json) == json.loads(json.dumps(pack.data, default=str))
    assert set(pack.data["evidence"]) == {"classes", "kernels", "metrics"}


def test_profile_evidence_from_a_real_capture(h100_profile: dict) -> None:
    pack = pack_for(history(h100_profile))
    prof = pack.data["profile"]
    assert prof["tool"] == "ncu" and prof["source"].startswith("v1")
    names = [k["name"] for k in prof["kernels"]]
    assert "kopt_capture_add_kernel" in " ".join(names)
    k0 = prof["kernels"][0]
    assert k0["registers_per_thread"] is not None and k0["occupancy_pct"] is not None
    assert {"registers", "occupancy", "memory throughput"} <= set(prof["reported"])
    assert "stall reasons" in prof["not_reported"] and "per-class attribution" in prof["not_reported"]
    assert "| regs | smem B | occupancy % | DRAM GB/s | DRAM % peak |" in pack.markdown
    assert "Not in this profile: stall reasons" in pack.markdown
    assert "registers" in pack.data["evidence"]["metrics"] and names[0] in pack.data["evidence"]["kernels"]


def test_the_newest_profile_of_the_best_tree_wins(h100_profile: dict) -> None:
    newer = dict(h100_profile, target_per_call_ns=123456.0)
    its = history(h100_profile)
    its[5] = Iteration(
        5,
        "regression",
        hypothesis="x",
        best_commit_before="c1",
        record={"profile": {"best": newer, "cand": h100_profile}},
    )
    prof = pack_for(its).data["profile"]
    assert prof["source"].startswith("v5") and prof["target_per_call_us"] == pytest.approx(123.456)


def test_a_repair_lists_the_failing_rows_with_their_errors() -> None:
    rows = [
        {"config": f"n={i},dclass=wide", "cls": "dclass=wide", "reasons": [f"err = {i} (err == 0)"]} for i in range(50)
    ]
    pack = pack_for(repair=2, failing_rows=rows, hypothesis="two rows per program", target_class="dclass=wide")
    md = pack.markdown
    assert "correctness repair 2 of 3" in md and "The hypothesis under repair: two rows per program" in md
    assert "- `n=3,dclass=wide` (class `dclass=wide`): err = 3 (err == 0)" in md
    assert "and 10 more rows" in md and pack.data["repair"]["more_failing_rows"] == 10


def test_a_run_with_only_its_baseline() -> None:
    pack = pack_for(history()[:1])
    assert "no candidate iteration yet" in pack.markdown and "- nothing yet" in pack.markdown
    assert pack.data["goal"]["best_commit"] == "c0" and "No profile of the best tree yet" in pack.markdown


def _long_history(n: int) -> list[Iteration]:
    its = history()[:2]
    for v in range(2, n + 2):
        its.append(
            Iteration(
                v,
                "regression" if v % 3 else "tie",
                hypothesis=f"idea number {v} " + "z" * 150,
                target_class="dclass=narrow",
                scope="class",
                best_commit_before="c1",
                record={
                    "classes": {
                        "dclass=narrow": cls_entry(10.0, 10.5, 1.03, 1.07, "regressed"),
                        "dclass=wide": cls_entry(30.0, 30.0, 0.99, 1.01, "undecided"),
                    },
                    "decision": {"reason": "slower " + "r" * 100},
                },
            )
        )
    return its


def test_the_budget_summarises_the_oldest_history_first_and_never_the_rules_or_evidence() -> None:
    t0 = time.perf_counter()
    pack = pack_for(_long_history(300), max_bytes=48 * 1024)
    assert time.perf_counter() - t0 < 1.0  # the engine's own work per iteration stays under a second
    md = pack.markdown
    assert len(md.encode()) <= 48 * 1024 and not pack.over_budget and pack.summarised > 0
    assert "Correctness first" in md and "hbm_bandwidth: 3.35 TB/s" in md and "Recent regressions" in md
    kept = [h["version"] for h in pack.data["history"]]
    assert kept == sorted(kept) and kept[-1] == 301  # the newest stay in full
    assert pack.data["history_summary"] and pack.data["budget"]["summarised"] == pack.summarised
    assert "idea number 301" in md


def test_a_tight_budget_collapses_old_history_into_counts() -> None:
    pack = pack_for(_long_history(300), max_bytes=40 * 1024)
    assert any("older iterations summarised for size" in s for s in pack.data["history_summary"])
    # what was tried from BEST stays whole (30 newest), even when the history is collapsed
    assert len(pack.data["tried_from_best"]) == 30


def test_over_budget_is_said_not_hidden() -> None:
    pack = pack_for(_long_history(50), max_bytes=1024)
    assert pack.over_budget and pack.data["budget"]["over_budget"] and "Correctness first" in pack.markdown


def test_list_sources_marks_protected_params_and_dispatch(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r")
    cfg = cfg_with('kind = "tune"\n[propose.tune]\nparams = "kernel.py"\nspace = {B = [1, 2]}\n')
    files = {s.path: s for s in list_sources(repo, cfg)}
    assert files["bench.py"].role == "protected" and not files["bench.py"].editable
    assert files["kernel.py"].role == "params" and files["kernel.py"].lines == 2
    files = {s.path: s for s in list_sources(repo, cfg_with())}
    assert files["kernel.py"].role == "dispatch"
    only = list_sources(repo, cfg_with().replace("target", sources=["kernel.py"]))
    assert [s.path for s in only] == ["bench.py", "kernel.py"]  # protected files are always shown


def test_sources_table_and_dispatch_line() -> None:
    srcs = [
        SourceFile("solution/k.py", 5500, 111, True, "dispatch"),
        SourceFile("bench.py", 500, 17, False, "protected"),
    ]
    md = pack_for(sources=srcs).markdown
    assert (
        "| `solution/k.py` | 5500 | 111 | dispatch |" in md and "| `bench.py` | 500 | 17 | protected, read-only |" in md
    )
    assert "Dispatch (files that name it): `solution/k.py`" in md


def test_configs_without_a_roofline_say_so() -> None:
    its = history()
    for it in its:
        it.record.pop("roofline", None)
    md = pack_for(its, cfg=cfg_with().replace("roofline", bytes="")).markdown
    assert "No roofline" in md and CONFIGS


def test_per_class_profile_evidence_from_the_config_ranges() -> None:
    """The NVTX sample of tests/data (ranges `kopt:dclass=...,n=...`): the pack shows each
    class's kernels from the launches inside its configs' ranges."""
    folder = DATA / "ncu_nvtx_best"
    prof = NcuProfiler().parse(folder, "_rms").to_dict()
    expect = json.loads((folder / "expect.json").read_text())
    configs = {
        f"dclass={d},n={n}": {"cls": f"dclass={d}", "production": True, "row": {"dclass": d, "n": n}}
        for d, n in (("narrow", 1024), ("narrow", 2048), ("wide", 4096))
    }
    its = history()
    its[0].record["configs"] = configs
    its[1].record["profile"] = {"best": prof, "cand": prof}
    p = pack_for(its).data["profile"]
    calls: dict[str, int] = {}
    for rng, note, kernel, n in expect["groups"]:
        if rng.startswith("kopt:") and not note and kernel == "_rms_kernel":
            cls = "dclass=" + rng.split("dclass=")[1].split(",")[0]
            calls[cls] = calls.get(cls, 0) + n
    assert {c: ks[0]["calls"] for c, ks in p["classes"].items()} == calls
    assert all(ks[0]["kernel"] == "_rms_kernel" for ks in p["classes"].values())
    assert "per-class attribution" in p["reported"] and p["outside_ranges_pct"] > 0
    md = pack_for(its).markdown
    assert "Per config class (the launches inside each config's `kopt:` NVTX/roctx range):" in md
    assert "- `dclass=wide`: `_rms_kernel`" in md and "outside any config's range" in md
