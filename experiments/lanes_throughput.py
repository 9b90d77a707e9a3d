"""Lanes' throughput and decision quality on the fake target (issue: lanes, docs/lanes.md).

    python -m experiments.lanes_throughput                 # 16 candidates, 1 lane vs 4 lanes
    python -m experiments.lanes_throughput --candidates 32 --bench-sleep 0.3 --json out.json

Four scripted idle fake GPUs (KOPT_FAKE_GPUS, the real gate and claims), the fake CPU target
(tests/fake_target) whose bench sleeps `--bench-sleep` s per run, a scripted `command` proposer
that takes `--proposer-sleep` s per proposal. Two kinds of candidates, each run with 1 lane
and with 4 lanes, the whole real loop (sandbox included when bubblewrap is there):

- A/B: every candidate is truly `--slowdown` % slower in both classes: a keep is a false keep,
  a measured regression is the power;
- A/A: every candidate changes a tracked comment file only: a keep is a false keep.

Prints, per run: wall seconds from the engine's start to its stop, candidates, and the
verdicts; then the ratio of wall times (4 lanes / 1 lane) that the lanes issue bounds at 0.35.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from kopt_supervisor.engine.daemon import run_engine  # noqa: E402
from kopt_supervisor.engine.store import Store  # noqa: E402
from kopt_supervisor.engine.workspace import Workspace  # noqa: E402
from kopt_supervisor.kopt_tui.cli import main as kopt  # noqa: E402
from tests.conftest import git, make_fake_repo  # noqa: E402

H100 = {"name": "NVIDIA H100 80GB HBM3", "util_pct": 0, "mem_used_mib": 10, "mem_total_mib": 81559, "processes": []}


def candidate(kind: str, slowdown_pct: float, proposer_sleep: float) -> str:
    """One scripted proposal (the fake proposer's `do:` action, run in the candidate tree)."""
    wait = f"import time; time.sleep({proposer_sleep}); "
    if kind == "ab":
        f = 1 + slowdown_pct / 100
        return (
            "do:" + wait + "k = json.load(open('kernel.json')); "
            f"k['speed']['small'] *= {f}; k['speed']['large'] *= {f}; json.dump(k, open('kernel.json', 'w'))"
        )
    return "do:" + wait + "open('NOTES.md', 'a').write('a comment-only change\\n')"


def one_run(work: Path, kind: str, lanes: int, args: argparse.Namespace) -> dict[str, Any]:
    tag = f"{kind}{lanes}"
    base = work / tag
    base.mkdir()
    script = [candidate(kind, args.slowdown, args.proposer_sleep)]
    repo = make_fake_repo(
        base / "target",
        script=script,
        toml_replace={
            "min_rounds = 3": f"min_rounds = {args.min_rounds}",
            "max_rounds = 8": f"max_rounds = {args.max_rounds}",
            'vendor = "none"': 'vendor = "auto"\nsamples = 1\nsample_interval_s = 0\nwait_s = 0.1\nwait_max_s = 60',
            # the reference program's stop after five regressions would end
            # the A/B runs early: every candidate is a regression here
            "[gpu]": "[stop]\nconsecutive_regressions = 1000\n\n[gpu]",
        },
        extra_toml=f"\n[parallel]\nlanes = {lanes}\n",
    )
    (repo / "NOTES.md").write_text("notes\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "a comment file")
    gpus = base / "gpus.json"
    gpus.write_text(json.dumps([[{**H100, "index": i, "uuid": f"GPU-fake-{i}"} for i in range(4)]]))
    os.environ.update(
        {
            "KOPT_FAKE_GPUS": str(gpus),
            "KOPT_GPU_CLAIMS_DIR": str(base / "claims"),
            "FAKE_SCRIPT": str(base / "target.script.json"),
            "FAKE_SLEEP": str(args.bench_sleep),
            "FAKE_NOISE": str(args.noise),
        }
    )
    root = base / "ws"
    assert kopt(["--root", str(root), "init", "--repo", str(repo), "--tag", tag]) == 0
    ws = Workspace(root, tag)
    t0 = time.monotonic()
    rc = run_engine(ws, max_iters=args.candidates)
    wall = time.monotonic() - t0
    with Store(ws.db_path, readonly=True) as s:
        its = s.iterations()[1:]
    verdicts = Counter(str(it.status) for it in its)
    return {
        "kind": kind,
        "lanes": lanes,
        "rc": rc,
        "wall_s": round(wall, 2),
        "candidates": len(its),
        "verdicts": dict(verdicts),
        "false_keeps": verdicts.get("keep", 0) + verdicts.get("accepted", 0),
        "regressions": verdicts.get("regression", 0) + verdicts.get("likely_regression", 0),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m experiments.lanes_throughput",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--candidates", type=int, default=16)
    ap.add_argument("--bench-sleep", type=float, default=0.3, help="seconds per fake bench run (default 0.3)")
    ap.add_argument("--proposer-sleep", type=float, default=1.0, help="seconds per proposal (default 1)")
    ap.add_argument(
        "--slowdown",
        type=float,
        default=2.0,
        help="A/B candidates' true slowdown, %% (default 2: twice the 1%% a decision must resolve)",
    )
    ap.add_argument("--noise", type=float, default=0.002, help="the fake bench's relative noise (default 0.002)")
    ap.add_argument("--min-rounds", type=int, default=3)
    ap.add_argument("--max-rounds", type=int, default=8)
    ap.add_argument("--kinds", default="ab,aa")
    ap.add_argument("--json", default="")
    args = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="kopt-lanes-bench-"))
    results = []
    try:
        for kind in args.kinds.split(","):
            for lanes in (1, 4):
                r = one_run(work, kind, lanes, args)
                results.append(r)
                print(
                    f"{kind} lanes={lanes}: {r['candidates']} candidates in {r['wall_s']} s; verdicts {r['verdicts']}",
                    flush=True,
                )
    finally:
        if not os.environ.get("KEEP_BENCH"):
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(f"runs kept in {work}")
    by = {(r["kind"], r["lanes"]): r for r in results}
    ratios = {k: round(by[(k, 4)]["wall_s"] / by[(k, 1)]["wall_s"], 3) for k in args.kinds.split(",")}
    print("wall time, 4 lanes / 1 lane: " + ", ".join(f"{k} {v}" for k, v in ratios.items()) + " (target <= 0.35)")
    report = {
        "date": datetime.date.today().isoformat(),
        "machine": f"{platform.node()} ({os.cpu_count()} CPUs)",
        "command": "python -m experiments.lanes_throughput " + " ".join(argv or sys.argv[1:]),
        "args": vars(args),
        "runs": results,
        "ratio_4_to_1": ratios,
    }
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
