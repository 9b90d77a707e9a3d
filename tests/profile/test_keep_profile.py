"""A keep's profile ([profile].keep): ncu's one pass over the whole run with GPU time alone,
its read-backs run at once (runner.command.all_at_once), and the config key that chooses it.

The pass runs through the stand-in ncu of the loop's tests (tests/fake_target/bin/ncu, which
honours --metrics and the NVTX filters), driven as engine/loop/evidence.py drives it."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from kopt_supervisor.engine import BadInput
from kopt_supervisor.engine.config.toml_io import loads as loads_config
from kopt_supervisor.engine.profile.classes import compare_per_class
from kopt_supervisor.engine.profile.ncu import DEFAULT_METRICS, M_L2_BYTES, M_TIME, PASS_KEEP, NcuProfiler
from kopt_supervisor.engine.profile.rocprof import Rocprofv3Profiler
from kopt_supervisor.engine.runner.command import all_at_once
from tests.profile.test_profile_config import MIN as MIN_TOML
from tests.profile.test_profile_two_pass import FAKE_NCU, REFS, _option, run_profile


def test_the_keep_pass_is_one_unfiltered_pass_of_gpu_time_and_l2_bytes(tmp_path: Path):
    full = NcuProfiler(executable="/opt/ncu")
    keep = full.for_keep("time")
    assert full.for_keep("full") is full and full.metrics == DEFAULT_METRICS  # the baseline's profiler is untouched
    one = keep.next_pass(["python", "bench.py", "--profile"], tmp_path / "v3" / "cand", "k", [])
    assert one is not None and one.role == "single" and one.label == PASS_KEEP
    assert _option(one.argv, "--metrics") == f"{M_TIME},{M_L2_BYTES}" and "--nvtx" in one.argv
    assert "--nvtx-include" not in one.argv and "--nvtx-exclude" not in one.argv  # everything, inside and out
    assert one.argv[0] == "/opt/ncu" and _option(one.argv, "--clock-control") == "none"
    assert keep.next_pass(["b"], tmp_path / "v3" / "cand", "k", [one]) is None
    with pytest.raises(ValueError, match="keep must be one of"):
        full.for_keep("fast")
    rocprof = Rocprofv3Profiler()
    assert rocprof.for_keep("time") is rocprof  # one pass already: nothing to leave out


def test_the_keep_pass_sees_the_classes_and_the_work_moved_outside(tmp_path: Path):
    keep = NcuProfiler(executable=str(FAKE_NCU)).for_keep("time")
    best, passes = run_profile(tmp_path / "best", tmp_path / "pb", keep, {"speed": {"small": 1.0, "large": 1.0}})
    assert len(passes) == 1 and best.passes == PASS_KEEP
    assert best.launches == 12 + 4 + 1  # the ranges' launches and the ones outside, in one pass
    inside = best.kernel("fake_kernel_large")
    assert inside is not None and inside.calls == 6 and inside.registers_per_thread is None  # time alone
    assert best.kopt_ranges  # ranges still attributed (the NVTX read-back)
    faster, _ = run_profile(tmp_path / "fast", tmp_path / "pf", keep, {"speed": {"small": 0.5, "large": 1.0}})
    cmp = compare_per_class(best, faster, REFS)
    ratios = {c.cls: c.ratio for c in cmp.classes}
    assert cmp.per_class and ratios["cls=small"] == pytest.approx(0.5, abs=0.01)
    assert ratios["cls=large"] == pytest.approx(1.0, abs=0.01)
    # hostile: 10x the GPU time outside the ranges while the ranges get faster: still seen
    moved, _ = run_profile(
        tmp_path / "moved", tmp_path / "pm", keep, {"speed": {"small": 0.9, "large": 0.9}, "outside_us": 400}
    )
    assert compare_per_class(best, moved, REFS).unattributed.grew


def test_all_at_once_runs_together_and_fails_naming_the_command(tmp_path: Path):
    py = sys.executable
    sleep = [py, "-c", "import time; time.sleep(0.6)"]
    t0 = time.monotonic()
    ok = subprocess.run(all_at_once([sleep, sleep, sleep]), capture_output=True, text=True, timeout=30)
    assert ok.returncode == 0 and time.monotonic() - t0 < 1.5  # together: ~0.6 s, not 1.8 s
    # an argument with spaces and quotes reaches the command as it is, never through a shell's words
    out = tmp_path / "it's a file"
    write = [py, "-c", "import sys; open(sys.argv[1], 'w').write(sys.argv[2])", str(out), "a b; $(no)"]
    bad = [py, "-c", "import sys; sys.exit(3)"]
    done = subprocess.run(all_at_once([write, bad]), capture_output=True, text=True, timeout=30)
    assert done.returncode != 0 and "command 2 of 2 failed: exit 3" in done.stderr
    assert out.read_text() == "a b; $(no)"  # the other one ran to its end
    assert all_at_once([write]) == write  # one command: as it is


def test_the_keep_key_is_read_and_checked():
    assert loads_config(MIN_TOML).profile.keep == "time"
    assert loads_config(MIN_TOML + '[profile]\nkeep = "full"\n').profile.keep == "full"
    with pytest.raises(BadInput, match=r'\[profile\]\.keep must be "time" or "full", not \'all\''):
        loads_config(MIN_TOML + "[profile]\nkeep = 'all'\n")
    assert loads_config(MIN_TOML).profile.reuse_best_s == 900
    with pytest.raises(BadInput, match=r"\[profile\]\.reuse_best_s must be between 0 and 86400"):
        loads_config(MIN_TOML + "[profile]\nreuse_best_s = -1\n")
