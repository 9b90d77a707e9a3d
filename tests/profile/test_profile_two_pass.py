"""ncu's two-pass profile: the full metrics inside the kopt ranges, GPU time alone outside
them, merged into one summary; the fallback to one whole-run pass when the bench emits no
kopt range; and the guards when ncu's NVTX filter did not apply.

The passes run through the stand-in ncu of the loop's tests (tests/fake_target/bin/ncu, a
real subprocess that honours --nvtx-include/--nvtx-exclude and --metrics), driven exactly
as engine/loop/profile_runs.py's profile_in drives them.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kopt_supervisor.engine import KoptFailure
from kopt_supervisor.engine.profile import choose_profiler
from kopt_supervisor.engine.profile.classes import ConfigRef, compare_per_class
from kopt_supervisor.engine.profile.ncu import (
    DEFAULT_METRICS,
    M_TIME,
    PASSES_FALLBACK,
    PASSES_TWO,
    WHOLE_LAUNCHES,
    NcuProfiler,
    profiled_nothing,
)
from kopt_supervisor.engine.profile.profiler import ProfilePass
from kopt_supervisor.engine.profile.rocprof import Rocprofv3Profiler
from kopt_supervisor.engine.profile.summary import ProfileSummary

FAKE_NCU = Path(__file__).resolve().parents[1] / "fake_target" / "bin" / "ncu"
BENCH = [sys.executable, "-c", "pass"]
CONFIGS = [("s0", "small", 128), ("s1", "small", 256), ("s2", "large", 4096), ("s3", "large", 8192)]
REFS = [
    ConfigRef(f"shape={shape},cls={cls},n={n}", f"cls={cls}", {"shape": shape, "cls": cls, "n": n})
    for shape, cls, n in CONFIGS
]


def _option(argv: tuple[str, ...] | list[str], name: str) -> str:
    return argv[list(argv).index(name) + 1]


def run_profile(
    tree: Path, out: Path, profiler: NcuProfiler, kernel: dict, regex: str = ""
) -> tuple[ProfileSummary, list[ProfilePass]]:
    """The passes of `profiler` on a fake tree whose kernel.json is `kernel`, as profile_in runs them."""
    tree.mkdir(parents=True, exist_ok=True)
    (tree / "kernel.json").write_text(json.dumps(kernel))
    done: list[ProfilePass] = []
    while (step := profiler.next_pass(BENCH, out, regex, done)) is not None:
        ran = subprocess.run(list(step.argv), cwd=tree, capture_output=True, text=True, timeout=60)
        assert ran.returncode == 0, ran.stderr
        for after in profiler.after_commands(step.out_dir):
            read = subprocess.run(after, cwd=tree, capture_output=True, text=True, timeout=60)
            assert read.returncode == 0, read.stderr
        done.append(step)
    return profiler.parse_passes(done, regex), done


def test_two_passes_argv(tmp_path: Path):
    prof = NcuProfiler(executable="/opt/ncu")
    out = tmp_path / "v1" / "best"
    first = prof.next_pass(["python", "bench.py", "--once"], out, "k", [])
    assert first is not None and first.out_dir == out.resolve()
    assert first.argv[0] == "/opt/ncu" and list(first.argv[-3:]) == ["python", "bench.py", "--once"]
    assert _option(first.argv, "--nvtx-include") == "regex:kopt:.*/" and "--nvtx-exclude" not in first.argv
    assert "--nvtx" in first.argv and _option(first.argv, "--metrics").split(",") == list(DEFAULT_METRICS)
    assert _option(first.argv, "--log-file") == str(out.resolve() / "ncu.csv")
    # the first pass found launches: the second takes GPU time alone outside the ranges, in its own folder
    (out / "ncu.csv").write_text('==PROF== x\n"ID","Kernel Name","gpu__time_duration.sum"\n"0","k","5"\n')
    stale = out / "outside" / "ncu_nvtx.csv"
    stale.parent.mkdir()
    stale.write_text("left by an earlier attempt")
    second = prof.next_pass(["python", "bench.py", "--once"], out, "k", [first])
    assert second is not None and second.out_dir == (out / "outside").resolve()
    assert not stale.exists()  # an earlier attempt's read-back cannot pass for this one's
    assert _option(second.argv, "--nvtx-exclude") == "regex:kopt:.*/" and "--nvtx-include" not in second.argv
    assert _option(second.argv, "--metrics") == M_TIME and "--nvtx" in second.argv
    assert _option(second.argv, "--export") == str((out / "outside" / "ncu").resolve())
    assert _option(second.argv, "--log-file") == str((out / "outside" / "ncu.csv").resolve())
    assert list(second.argv[-3:]) == ["python", "bench.py", "--once"]
    assert prof.next_pass(["python", "bench.py"], out, "k", [first, second]) is None
    # the first pass found nothing: the whole run once more, every metric, unfiltered
    (out / "ncu.csv").write_text("==PROF== x\n==WARNING== No kernels were profiled.\n")
    whole = prof.next_pass(["b"], out, "k", [first])
    assert whole is not None and whole.out_dir == (out / "whole").resolve()
    assert "--nvtx-include" not in whole.argv and "--nvtx-exclude" not in whole.argv
    assert _option(whole.argv, "--metrics").split(",") == list(DEFAULT_METRICS)
    # a bench timing with its own loops launches ~10^5 kernels: the whole run's first ones only
    assert _option(whole.argv, "--launch-count") == str(WHOLE_LAUNCHES)
    assert "--launch-count" not in first.argv and "--launch-count" not in second.argv
    assert prof.after_commands(out) == []  # no report to read back
    # "full": the single unfiltered pass of before
    full = NcuProfiler(outside_ranges="full")
    one = full.next_pass(["b"], out, "k", [])
    assert one is not None and one.argv == tuple(full.command(["b"], out, "k"))
    assert "--nvtx-include" not in one.argv and full.next_pass(["b"], out, "k", [one]) is None
    with pytest.raises(ValueError):
        NcuProfiler(outside_ranges="none")


def test_both_passes_parsed_and_merged(tmp_path: Path):
    summary, passes = run_profile(
        tmp_path / "tree",
        tmp_path / "out",
        NcuProfiler(executable=str(FAKE_NCU)),
        {"speed": {"small": 1.0, "large": 1.0}, "outside_us": 40},
    )
    assert [p.out_dir.name for p in passes] == ["out", "outside"]
    assert summary.passes == PASSES_TWO and summary.ranges_source.startswith("ncu --print-nvtx-rename")
    assert summary.launches == 12 + 4 + 1
    assert len(summary.files) == 4 and any("/outside/" in f for f in summary.files)
    inside = summary.kernel("fake_kernel_large")
    ref = summary.kernel("fake_reference")
    assert inside is not None and inside.registers_per_thread == 32 and inside.calls == 6
    # outside launches: their GPU time, no other metric
    assert ref is not None and ref.calls == 4 and ref.registers_per_thread is None
    assert ref.total_ns == pytest.approx(10_000 * (4 + 0.006), rel=1e-6)  # 4 launches of 10 us (1 + 0.001 k)
    groups = {(g.range, g.kernel): g for g in summary.ranged}
    assert groups[("", "fake_reference")].calls == 4
    assert "not a kopt range" in groups[("inputs", "fake_inputs")].note
    assert summary.kopt_ranges == tuple(sorted(f"kopt:shape={s},cls={c},n={n}" for s, c, n in CONFIGS))
    # the summary survives its file and renders with the missing metrics
    again = ProfileSummary.from_dict(json.loads(json.dumps(summary.to_dict())))
    assert again == summary
    assert "Profile: two passes" in summary.table()
    # the same tree compared with itself: the ranges and the outside time agree
    cmp = compare_per_class(summary, summary, REFS)
    assert cmp.per_class and not cmp.unattributed.grew and not cmp.problems


def test_work_moved_outside_the_ranges_is_still_refused(tmp_path: Path):
    """Hostile: the candidate's in-range time is the best's, its contract check does 10x the
    work outside the ranges (precomputed out of the timed region). The outside pass's time
    alone must show it."""
    prof = NcuProfiler(executable=str(FAKE_NCU))
    best, _ = run_profile(tmp_path / "best", tmp_path / "pb", prof, {"speed": {"small": 1.0, "large": 1.0}})
    cand, _ = run_profile(
        tmp_path / "cand", tmp_path / "pc", prof, {"speed": {"small": 1.0, "large": 1.0}, "outside_us": 400}
    )
    assert cand.kernel("fake_reference") is not None and cand.kernel("fake_reference").registers_per_thread is None
    cmp = compare_per_class(best, cand, REFS)
    assert cmp.unattributed.grew
    assert cmp.unattributed.cand_ns > 5 * cmp.unattributed.best_ns
    assert any("outside the config ranges grew" in p for p in cmp.problems)
    # and moved out while the ranges got faster: still refused
    faster, _ = run_profile(
        tmp_path / "fast", tmp_path / "pf", prof, {"speed": {"small": 0.9, "large": 0.9}, "outside_us": 400}
    )
    assert compare_per_class(best, faster, REFS).unattributed.grew


def test_no_kopt_range_falls_back_to_one_whole_run_pass(tmp_path: Path):
    summary, passes = run_profile(
        tmp_path / "tree",
        tmp_path / "out",
        NcuProfiler(executable=str(FAKE_NCU)),
        {"speed": {"small": 1.0, "large": 1.0}, "no_ranges": True},
        regex="fake_kernel",
    )
    assert [p.out_dir.name for p in passes] == ["out", "whole"]
    assert profiled_nothing(tmp_path / "out") and not (tmp_path / "out" / "ncu.ncu-rep").exists()
    assert summary.passes == PASSES_FALLBACK and "found no launch" in summary.passes
    assert summary.kopt_ranges == () and summary.launches == 17
    # every kernel with its metrics (the whole-run fallback and the proposer's table keep them)
    ref = summary.kernel("fake_reference")
    assert ref is not None and ref.registers_per_thread == 32
    assert summary.target_per_call_ns > 0 and summary.anchor.startswith("fake_kernel_")
    cmp = compare_per_class(summary, summary, REFS)
    assert not cmp.per_class  # the whole-run comparison, as before


def test_a_filter_that_did_not_apply_is_a_failure_not_a_double_count(tmp_path: Path):
    """An ncu (or a stand-in) that ignores --nvtx-exclude prints the kopt launches again in
    the outside pass: counted twice they would hide a change; kopt refuses the profile."""
    lax = tmp_path / "bin" / "ncu"
    lax.parent.mkdir()
    text = FAKE_NCU.read_text().replace('if "--nvtx-exclude" in opts:', "if False:")
    lax.write_text(text)
    lax.chmod(0o755)
    with pytest.raises(KoptFailure, match="nvtx-exclude filter did not apply"):
        run_profile(
            tmp_path / "tree",
            tmp_path / "out",
            NcuProfiler(executable=str(lax)),
            {"speed": {"small": 1.0, "large": 1.0}},
        )
    lax.write_text(FAKE_NCU.read_text().replace('if "--nvtx-include" in opts:', "if False:"))
    with pytest.raises(KoptFailure, match="nvtx-include filter did not apply"):
        run_profile(
            tmp_path / "tree2",
            tmp_path / "out2",
            NcuProfiler(executable=str(lax)),
            {"speed": {"small": 1.0, "large": 1.0}},
        )


def test_the_merge_follows_the_passes_run_not_the_folders_on_disk(tmp_path: Path):
    """The pass list comes from the loop: a profile whose outside pass did not run (or whose
    outside/ folder was removed by the bench) is a failure, never the ranges pass alone
    (which would hide every outside launch)."""
    prof = NcuProfiler(executable=str(FAKE_NCU))
    _, passes = run_profile(tmp_path / "tree", tmp_path / "out", prof, {"speed": {"small": 1.0, "large": 1.0}})
    with pytest.raises(KoptFailure, match=r"passes \['ranges'\] are not a profile"):
        prof.parse_passes(passes[:1], "")
    shutil.rmtree(tmp_path / "out" / "outside")
    with pytest.raises(KoptFailure, match="ncu wrote no output"):
        prof.parse_passes(passes, "")
    with pytest.raises(KoptFailure, match="expected its one pass"):
        Rocprofv3Profiler().parse_passes(passes, "")


def test_an_empty_pass_with_an_ncu_error_is_a_failure(tmp_path: Path):
    (tmp_path / "ncu.csv").write_text("==PROF== Connected\n==ERROR== ERR_NVGPUCTRPERM - no permission\n")
    with pytest.raises(KoptFailure, match="ERR_NVGPUCTRPERM"):
        NcuProfiler().next_pass(["b"], tmp_path, "", [ProfilePass("ranges", "x", ("ncu",), tmp_path)])
    with pytest.raises(KoptFailure, match="ERR_NVGPUCTRPERM"):
        NcuProfiler().after_commands(tmp_path)
    # no log at all: no verdict (reading back fails and says so)
    assert not profiled_nothing(tmp_path / "nowhere")


def test_an_empty_outside_pass_is_zero_time_outside(tmp_path: Path):
    """A bench whose every kernel runs inside the ranges: the outside pass profiles nothing."""
    tree = tmp_path / "tree"
    lean = tmp_path / "bin" / "ncu"
    lean.parent.mkdir()
    lean.write_text(
        FAKE_NCU.read_text()
        .replace('launches += [["fake_reference"', 'launches += [][:0] and [["x"')
        .replace('launches.append(["fake_inputs"', 'None and launches.append(["fake_inputs"')
    )
    lean.chmod(0o755)
    summary, passes = run_profile(
        tree, tmp_path / "out", NcuProfiler(executable=str(lean)), {"speed": {"small": 1.0, "large": 1.0}}
    )
    assert len(passes) == 2 and profiled_nothing(tmp_path / "out" / "outside")
    assert summary.launches == 12 and summary.passes == PASSES_TWO
    assert compare_per_class(summary, summary, REFS).unattributed.best_ns == 0


def test_outside_ranges_reaches_the_profiler(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shutil.copy(FAKE_NCU, bin_dir / "ncu")
    monkeypatch.setenv("PATH", str(bin_dir))
    prof = choose_profiler("ncu", "nvidia", outside_ranges="full")
    assert isinstance(prof, NcuProfiler) and prof.outside_ranges == "full"
    auto = choose_profiler("auto", "nvidia")
    assert isinstance(auto, NcuProfiler) and auto.outside_ranges == "time"
