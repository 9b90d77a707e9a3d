"""Where a keep's profile of the RMSNorm demo spends its time (issue 26: the profiler was 17.5-36 s
of a 41-59 s keep iteration on the H200, docs/h100-wave3/part11-wild-first-keep-h200.md).

On a GPU host with ncu, after `kopt demo --kernel rmsnorm --max-iters 0` made the target repo:

    python experiments/profile_cost.py REPO OUT

runs the bench's `--profile` in REPO five ways and prints one line each (wall seconds, the
harness's per-config lines: inputs, calls, outputs): unprofiled with and without the outputs'
summaries, then under kopt's keep pass of ncu (one pass, GPU time alone, every launch) with and
without them, and once more with an empty Triton cache (what a profile in a fresh cache pays).
The ncu runs also count the launches ncu profiled.
"""

from __future__ import annotations

import csv
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from kopt_supervisor.engine.profile.ncu import NcuProfiler

BENCH = [sys.executable, "bench.py", "--profile", "--dtypes", "bfloat16"]
KERNEL = "_rms_(kernel|whole_tiles)"


def launches(folder: Path) -> int:
    path = folder / "ncu.csv"
    if not path.exists():
        return -1
    rows = [r for r in csv.reader(line for line in path.read_text().splitlines() if not line.startswith("=="))]
    return max(0, len(rows) - 2)  # header and units rows


def run(repo: Path, out: Path, name: str, *, ncu: bool, outputs: bool, fresh_cache: bool) -> None:
    folder = out / name
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    env = {**os.environ, "KOPT_PROFILE": "1", "KOPT_PROFILE_SEED": "12345"}
    if outputs:
        env["KOPT_PROFILE_OUTPUTS"] = str(folder / "outputs.json")
    cache = out / "triton-cache"
    if fresh_cache:
        shutil.rmtree(cache, ignore_errors=True)
    env["TRITON_CACHE_DIR"] = str(cache)
    argv = list(BENCH)
    if ncu:
        step = NcuProfiler().for_keep("time").next_pass(argv, folder, KERNEL, [])
        assert step is not None
        argv = list(step.argv)
    t0 = time.monotonic()
    res = subprocess.run(argv, cwd=repo, env=env, capture_output=True, text=True, timeout=600)
    wall = time.monotonic() - t0
    counted = f", {launches(folder)} launches profiled" if ncu else ""
    print(f"== {name}: {wall:.2f} s (rc {res.returncode}){counted}", flush=True)
    for line in res.stderr.splitlines():
        if line.startswith(("profile ", "bench phases")) or "Error" in line:
            print("   " + line[:200], flush=True)
    if res.returncode != 0:
        print(res.stderr[-2000:], flush=True)


def main() -> int:
    repo, out = Path(sys.argv[1]), Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    run(repo, out, "warm-up (unprofiled, fills the Triton cache)", ncu=False, outputs=False, fresh_cache=True)
    run(repo, out, "unprofiled, outputs summarised", ncu=False, outputs=True, fresh_cache=False)
    run(repo, out, "unprofiled, no outputs", ncu=False, outputs=False, fresh_cache=False)
    run(repo, out, "ncu keep pass, outputs summarised", ncu=True, outputs=True, fresh_cache=False)
    run(repo, out, "ncu keep pass, no outputs", ncu=True, outputs=False, fresh_cache=False)
    run(repo, out, "ncu keep pass, outputs, empty Triton cache", ncu=True, outputs=True, fresh_cache=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
