"""How precisely a keep's profile measures each class, by the calls per config (issue 26: the
first profile of a keep, at 2 calls per config, could not tell a -10% narrow claim on the H200,
docs/h100-wave3/part15-...; the closer profile at 12 calls then cost 50-110 s).

On a GPU host with ncu, after `kopt demo --kernel rmsnorm --max-iters 0` made the target repo:

    python experiments/profile_noise.py REPO OUT

profiles one tree of the RMSNorm demo (its params at the demo's v7, the state its ~3% and -10%
keeps were claimed against) with the bench's `--profile` at 12 calls per config, twice per ncu
setting: the keep pass as kopt runs it (no clock or cache control), with every cache flushed
before each launch, and with the clocks also locked at base. Per setting it prints each config's
launches (mean us, spread between calls) and the harness's seconds per config (inputs, calls,
outputs); then, from the first k calls of each config (k = 2, 3, 4, 6, 8, 12), the A/A per-class
comparison kopt would make between the two runs (`compare_per_class`): how wide each class's
interval is when nothing changed, so which calls per config would show a 3% claim.

With `PROFILE_NOISE_PAIRS=N` (profile_noise.sh passes the environment through) it measures
instead how often a null change passes the external truth's rule on a GPU (docs/decision.md,
"The profiler's word on a small claim"): the keep pass only, the tree profiled 2N times in a
row at 4 calls per config (a keep's first profile), each consecutive pair compared as kopt
compares a keep's best and candidate (at k = 2 and 4 calls), and per class the share of pairs
whose interval lies below 1 (what `profile.agrees` alone took as a gain) and whose estimate
also keeps half of a claimed -3.4% (`external_truth.profiler_shows`: what a timer patch
claiming the RMSNorm demo's real ~3% step would need). `null_rates` is the counting, tested
without a GPU (experiments/test_profile_noise.py). Each profile takes 19-22 s on the H200, so a
call of the device's 600 s holds about 10 pairs: PROFILE_NOISE_BUDGET_S stops at the last whole
pair that fits (docs/h100-wave3/part32-profile-pairs-and-reuse-h200.md). On the device:

    PROFILE_NOISE_PAIRS=30 PROFILE_NOISE_BUDGET_S=450 bash experiments/profile_noise.sh
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

from kopt_supervisor.engine.decide.confirmation import shows_half
from kopt_supervisor.engine.profile.classes import ConfigRef, compare_per_class, parse_range
from kopt_supervisor.engine.profile.ncu import NcuProfiler, pass_launches
from kopt_supervisor.engine.profile.summary import KOPT_PREFIX, Launch, summarize

BENCH = [sys.executable, "bench.py", "--profile", "--dtypes", "bfloat16"]
KERNEL = "_rms_(kernel|whole_tiles)"
V7 = {
    "*": {"BLOCK_D": 32, "ROWS_PER_PROG": 8, "num_warps": 1, "num_stages": 1},
    "dclass=narrow": {"ROWS_PER_PROG": 16},
}
SETTINGS = {
    "keep pass (kopt's: no clock or cache control)": [],
    "caches flushed before each launch": ["--cache-control", "all"],
    "caches flushed, clocks at base": ["--cache-control", "all", "--clock-control", "base"],
}
CALLS = 12
KS = (2, 3, 4, 6, 8, 12)


def profile(tree: Path, folder: Path, extra: list[str], calls: int = CALLS) -> list[Launch]:
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    env = {**os.environ, "KOPT_PROFILE": "1", "KOPT_PROFILE_SEED": "12345", "KOPT_PROFILE_CALLS": str(calls)}
    env["KOPT_PROFILE_OUTPUTS"] = str(folder / "outputs.json")
    env["TRITON_CACHE_DIR"] = str(tree / ".triton")
    step = NcuProfiler().for_keep("time").next_pass(list(BENCH), folder, KERNEL, [])
    assert step is not None
    argv = list(step.argv)
    for flag in ("--cache-control", "--clock-control"):  # this setting's value replaces kopt's
        if flag in extra:
            i = argv.index(flag)
            del argv[i : i + 2]
    argv[1:1] = extra
    t0 = time.monotonic()
    res = subprocess.run(argv, cwd=tree, env=env, capture_output=True, text=True, timeout=900)
    wall = time.monotonic() - t0
    for line in res.stderr.splitlines():
        if line.startswith("profile "):
            print("   " + line[:160], flush=True)
    if res.returncode != 0:
        print(res.stderr[-3000:], flush=True)
        raise SystemExit(f"{folder}: rc {res.returncode}")
    # read back as kopt does (none where the run's own page names each launch's range)
    reads = [
        subprocess.run(c, capture_output=True, text=True, timeout=600) for c in NcuProfiler().after_commands(folder)
    ]
    if any(r.returncode for r in reads):
        raise SystemExit(f"{folder}: ncu --import failed")
    launches = pass_launches(folder)
    print(f"   {wall:.1f} s, {len(launches)} launches", flush=True)
    return launches


def first_calls(launches: list[Launch], k: int) -> list[Launch]:
    """Each config range's first k launches of each kernel; everything outside kept."""
    seen: dict[tuple[str, str], int] = defaultdict(int)
    kept = []
    for x in launches:
        if x.range and x.range.startswith(KOPT_PREFIX):
            seen[(x.range, x.kernel)] += 1
            if seen[(x.range, x.kernel)] > k:
                continue
        kept.append(x)
    return kept


def refs(launches: list[Launch], production: set[str]) -> list[ConfigRef]:
    out = {}
    for x in launches:
        if x.range and x.range.startswith(KOPT_PREFIX) and x.range not in out:
            cols = [p.split("=", 1)[0] for p in x.range[len(KOPT_PREFIX) :].split(",") if "=" in p]
            row = dict(parse_range(x.range, cols))
            cls = f"dclass={row.get('dclass')}" if row.get("shape") in production else "guard"
            out[x.range] = ConfigRef(x.range, cls, row)
    return list(out.values())


def per_config(launches: list[Launch]) -> dict[str, list[float]]:
    by: dict[str, list[float]] = defaultdict(list)
    for x in launches:
        if x.range and x.range.startswith(KOPT_PREFIX):
            by[x.range].append(x.duration_ns / 1e3)
    return by


PAIR_CALLS = 4
FAKE_CLAIM = 0.966
"""A timer patch's claim: the RMSNorm demo's real ~3% step as the bench read it (-3.4%, part 31)."""


def null_rates(
    pairs: list[dict[str, tuple[float, float, float]]], claim: float = FAKE_CLAIM
) -> dict[str, dict[str, float]]:
    """Per class over A/A pairs (class -> (ratio, lo, hi) each): how many, the share whose
    interval lies below 1, the share that also keeps half of `claim` (shows_half on the
    estimate), and the estimates' sd in percent."""
    out: dict[str, dict[str, float]] = {}
    for cls in sorted({c for p in pairs for c in p}):
        got = [p[cls] for p in pairs if cls in p]
        below = [r for r, _, hi in got if hi < 1.0]
        shown = [r for r in below if shows_half(claim, r)]
        sd = statistics.stdev([(r - 1.0) * 100.0 for r, _, _ in got]) if len(got) > 1 else float("nan")
        out[cls] = {"pairs": len(got), "below_1": len(below) / len(got), "shown": len(shown) / len(got), "sd_pct": sd}
    return out


def pairs_main(tree: Path, out: Path, n: int, production: set[str]) -> int:
    """PROFILE_NOISE_PAIRS=n: 2n keep-pass profiles of one tree at PAIR_CALLS calls per config
    (a keep's first profile: kopt's harness's own calls), compared in consecutive pairs."""
    budget = float(os.environ.get("PROFILE_NOISE_BUDGET_S", "inf"))  # the call's limit: stop at a whole pair
    t0, runs = time.monotonic(), []
    for i in range(2 * n):
        if i % 2 == 0 and runs and (time.monotonic() - t0) / len(runs) * (len(runs) + 2) > budget:
            print(f"   stopped at {len(runs) // 2} pairs: PROFILE_NOISE_BUDGET_S={budget:.0f}", flush=True)
            break
        runs.append(profile(tree, out / f"pair-{i}", [], PAIR_CALLS))
    config_refs = refs(runs[0], production)
    report: dict[str, object] = {"claim": FAKE_CLAIM}
    for k in (2, PAIR_CALLS):
        pairs = []
        for a, b in zip(runs[0::2], runs[1::2], strict=True):
            s = [summarize(first_calls(r, k), KERNEL, tool="ncu") for r in (a, b)]
            cmp = compare_per_class(s[0], s[1], config_refs, confidence=0.99, run_noise_pct=0.3)
            pairs.append(
                {
                    c.cls: (float(c.ratio), float(c.lo), float(c.hi))
                    for c in cmp.classes
                    if c.ratio is not None and c.lo is not None and c.hi is not None
                }
            )
        rates = null_rates(pairs)
        report[f"k={k}"] = {"pairs": pairs, "rates": rates}
        for cls, r in rates.items():
            print(
                f"   k={k:2d} {cls:16s} {r['pairs']:.0f} pairs: estimate sd {r['sd_pct']:.2f}%, "
                f"interval below 1 in {r['below_1']:.0%}, and past half of -3.4% in {r['shown']:.0%}",
                flush=True,
            )
    (out / "profile_noise.json").write_text(json.dumps(report, default=str) + "\n")
    return 0


def main() -> int:
    repo, out = Path(sys.argv[1]), Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    tree = out / "tree"
    shutil.rmtree(tree, ignore_errors=True)
    shutil.copytree(repo, tree, ignore=shutil.ignore_patterns(".git"))
    (tree / "params.json").write_text(json.dumps(V7) + "\n")
    from kopt_supervisor.kernels.catalog import contract

    production = {s.name for s in contract("rmsnorm").SHAPES if s.kind == "production"}
    subprocess.run(BENCH[:2] + ["--dtypes", "bfloat16"], cwd=tree, capture_output=True, timeout=600)  # warm cache
    if os.environ.get("PROFILE_NOISE_PAIRS"):
        return pairs_main(tree, out, int(os.environ["PROFILE_NOISE_PAIRS"]), production)
    report: dict[str, object] = {}
    for name, extra in SETTINGS.items():
        print(f"== {name}", flush=True)
        runs = [profile(tree, out / f"{len(report)}-{i}", extra) for i in range(2)]
        cfgs = [per_config(r) for r in runs]
        for key in sorted(cfgs[0]):
            a, b = cfgs[0][key], cfgs[1].get(key, [])
            cv = statistics.stdev(a) / statistics.mean(a) * 100 if len(a) > 1 else float("nan")
            short = key[len(KOPT_PREFIX) :].split(",")[0]
            print(
                f"   {short:28s} n={len(a):2d} mean {statistics.mean(a):9.2f} us  spread {cv:5.2f}%  "
                f"run2/run1 {statistics.mean(b) / statistics.mean(a):.4f}  first {a[0]:.2f} rest {statistics.mean(a[1:]):.2f}",
                flush=True,
            )
        rows = {}
        config_refs = refs(runs[0], production)
        for k in KS:
            s = [summarize(first_calls(r, k), KERNEL, tool="ncu") for r in runs]
            cmp = compare_per_class(s[0], s[1], config_refs, confidence=0.99, run_noise_pct=0.3)
            rows[k] = {c.cls: (c.ratio, c.lo, c.hi) for c in cmp.classes}
            print(
                f"   k={k:2d}: "
                + "; ".join(
                    f"{c.cls} {(c.ratio - 1) * 100:+.2f}% [{(c.lo - 1) * 100:+.2f}, {(c.hi - 1) * 100:+.2f}]"
                    for c in cmp.classes
                    if c.ratio is not None and c.lo is not None and c.hi is not None
                ),
                flush=True,
            )
        report[name] = {"intervals": rows, "launches_us": cfgs}
    (out / "profile_noise.json").write_text(json.dumps(report, default=str) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
