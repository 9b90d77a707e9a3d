"""Best's floor on honest profiles: how far does one unchanged tree's time per call move between
profiles, at the bench's own calls and at a closer profile's 12, and what does a new empty cache
cost a profile?

Every profile now runs in a copy with a new empty cache (engine/loop/profile_runs.py
`ProfiledTree`), and best profiled afresh is held to its profile from its keep
(engine/profile/floors.py `slower_than_kept`). This probe profiles the RMSNorm demo's tree as a
keep's profile is taken (`NcuProfiler().for_keep("time")`, the harness's --profile at one seed):
first with a new cache and again with the cache it filled (the difference is what compiling under
the profiler costs), then PAIRS times at its own calls and at 12 calls a config, each with a new
cache, and runs every (own, closer) and (own, own) pair through the floor. A finding on an
unchanged tree is a false alarm.

Run on a GPU host with ncu (the device machine), from the repository root:

    python3 experiments/best_floor_probe.py [PAIRS]
"""

from __future__ import annotations

import itertools
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from experiments.hidden_work_probe import KERNEL, refs_of
from kopt_supervisor.engine.profile.classes import RangeMatcher, attribute
from kopt_supervisor.engine.profile.floors import _calls, slower_than_kept
from kopt_supervisor.engine.profile.ncu import NcuProfiler
from kopt_supervisor.engine.profile.summary import ProfileSummary


def profile(tree: Path, out: Path, cache: Path, calls: int | None) -> tuple[ProfileSummary, float]:
    """One keep's profile of `tree` (its outputs into `out`, Triton's cache in `cache`), at the
    bench's own calls or `calls` a config: the summary and the wall seconds of the profiled run."""
    prof = NcuProfiler().for_keep("time")
    step = prof.next_pass([sys.executable, "bench.py", "--profile", "--dtypes", "bfloat16"], out, "", [])
    assert step is not None
    env = {**os.environ, "KOPT_PROFILE": "1", "KOPT_PROFILE_SEED": "7", "TRITON_CACHE_DIR": str(cache)}
    if calls is not None:
        env["KOPT_PROFILE_CALLS"] = str(calls)
    t0 = time.monotonic()
    res = subprocess.run(list(step.argv), cwd=tree, env=env, capture_output=True, text=True, timeout=300)
    seconds = time.monotonic() - t0
    if res.returncode != 0:
        raise SystemExit(f"ncu exit {res.returncode}: {res.stderr[-500:]}")
    for argv in prof.after_commands(step.out_dir):
        subprocess.run(argv, check=True, timeout=300)
    return prof.parse_passes([step], ""), seconds


def per_call_ratios(kept: ProfileSummary, fresh: ProfileSummary, refs: list) -> dict[str, float]:
    """Per class, fresh / kept time per call (geometric mean of its configs'): what the floor weighs."""
    m = RangeMatcher(refs)
    runs, calls = [attribute(s, m) for s in (kept, fresh)], [_calls(s, m) for s in (kept, fresh)]
    logs: dict[str, list[float]] = {}
    for ref in refs:
        if all(ref.key in r.configs for r in runs) and all(c.get(ref.key) for c in calls):
            t = [
                sum(a.total for a in r.configs[ref.key].values()) / c[ref.key] for r, c in zip(runs, calls, strict=True)
            ]
            logs.setdefault(ref.cls, []).append(math.log(t[1] / t[0]))
    return {cls: math.exp(sum(v) / len(v)) for cls, v in sorted(logs.items())}


def main() -> int:
    pairs = int(sys.argv[1]) if len(sys.argv) > 1 else 4
    work = Path(tempfile.mkdtemp(prefix="best_floor_"))
    tree = work / "tree"
    shutil.copytree(KERNEL, tree, ignore=shutil.ignore_patterns("__pycache__"))
    _, cold = profile(tree, work / "cold", work / "cache0", None)
    _, warm = profile(tree, work / "warm", work / "cache0", None)
    print(f"a profile with a new empty cache: {cold:.1f} s; again with the cache it filled: {warm:.1f} s")
    own: list[ProfileSummary] = []
    closer: list[ProfileSummary] = []
    for n in range(pairs):
        for calls, got in ((None, own), (12, closer)):
            summary, seconds = profile(tree, work / f"p{n}_{calls}", work / f"cache_{n}_{calls}", calls)
            got.append(summary)
            print(f"profile {n} at {calls or 'its own'} calls, new cache: {seconds:.1f} s")
    refs, _ = refs_of(own[0])
    found = 0
    for label, kept_list, fresh_list in (("own -> closer", own, closer), ("own -> own", own, own)):
        for (i, kept), (j, fresh) in itertools.product(enumerate(kept_list), enumerate(fresh_list)):
            if kept_list is fresh_list and i == j:
                continue
            slow = slower_than_kept(kept, fresh, refs)
            found += bool(slow)
            ratios = ", ".join(f"{cls} {100 * (r - 1):+.2f}%" for cls, r in per_call_ratios(kept, fresh, refs).items())
            print(
                f"{label} {i}->{j}: {ratios}; {'SLOWER: ' + '; '.join(x.line() for x in slow) if slow else 'no finding'}"
            )
    print(f"false alarms on an unchanged tree: {found}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
