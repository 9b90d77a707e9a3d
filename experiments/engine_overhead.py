"""What the engine itself spends per iteration, at a short and at a long history (issue: the
loop on one page; docs/design.md §11: under 1 s and flat with the history's length).

    python -m experiments.engine_overhead [--histories 10 1000] [--iterations 8] [--out FILE]

For each history length H: a fake CPU target (tests/fake_target: a bench that prints a CSV,
a scripted `command` proposer), a real run whose first iterations are measured (a baseline
and one keep, so the history has real records), then H iterations of that history copied in
run.db (with a keep every 25th: performance.md has rows to render), then `--iterations` more
candidate iterations run by the real engine. Each iteration's record["timings"] says how the
time went; `engine_s` is the iteration's wall time less the proposer, the looks, the profiler
and the GPU gate's waits. The figures go in docs/architecture.md with the machine and date.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from kopt_supervisor.engine.daemon import run_engine  # noqa: E402
from kopt_supervisor.engine.records import Iteration, Status  # noqa: E402
from kopt_supervisor.engine.store import Store  # noqa: E402
from kopt_supervisor.engine.workspace import Workspace  # noqa: E402
from kopt_supervisor.kopt_tui.cli import main as kopt  # noqa: E402
from tests.conftest import make_fake_repo  # noqa: E402

PHASES = ("engine_s", "proposer_s", "police_s", "reload_s", "gate_wait_s", "format_s", "commit_s", "total_s")


def grow_history(ws: Workspace, length: int) -> None:
    """Copy the real iterations' records until the history holds `length` candidates."""
    with Store(ws.db_path) as s:
        its = s.iterations()
        keep = next(it for it in its if it.status == Status.KEEP)
        tie = next((it for it in its if it.status in (Status.TIE, Status.REGRESSION)), keep)
        v = s.next_version()
        with s.transaction():
            while v <= length:
                model = keep if v % 25 == 0 else tie
                status = Status.KEEP if model is keep else Status.TIE
                s.save_iteration(
                    Iteration(
                        v,
                        status,
                        phase="done",
                        parent=keep.version,
                        hypothesis=model.hypothesis,
                        scope=model.scope,
                        commit=keep.commit if status == Status.KEEP else None,
                        best_commit_before=keep.best_commit_before,
                        started_at=time.time(),
                        finished_at=time.time(),
                        record=json.loads(json.dumps(model.record)),
                    )
                )
                v += 1


def measure(history: int, iterations: int, work: Path) -> dict[str, Any]:
    os.environ["FAKE_NOISE"] = "0.00001"  # every decision at min_rounds: the looks cost the same each time
    repo = make_fake_repo(
        work / f"target{history}", script=["gain5", "nochange"], extra_toml="\n[stop]\nconsecutive_failures = 100000\n"
    )
    os.environ["FAKE_SCRIPT"] = str(work / f"target{history}.script.json")
    root = work / "workspaces"
    assert kopt(["--root", str(root), "init", "--repo", str(repo), "--tag", f"h{history}"]) == 0
    ws = Workspace(root, f"h{history}")
    assert run_engine(ws, max_iters=2) == 0  # the baseline, a keep, a tie: real records
    grow_history(ws, history)
    with Store(ws.db_path) as s:
        first = s.next_version()
    t0 = time.monotonic()
    assert run_engine(ws, max_iters=iterations) == 0
    wall = time.monotonic() - t0
    with Store(ws.db_path, readonly=True) as s:
        measured = [it for it in s.iterations() if it.version >= first]
    rows = [it.record.get("timings", {}) for it in measured]
    out: dict[str, Any] = {
        "history": history,
        "iterations": len(measured),
        "wall_s": round(wall, 2),
        "statuses": [str(it.status) for it in measured],
    }
    for key in PHASES:
        values = [float(r.get(key, 0.0)) for r in rows]
        out[key] = {"median": round(statistics.median(values), 4), "max": round(max(values), 4)}
    looks = [x for r in rows for x in r.get("looks_s", [])]
    out["looks_per_iteration"] = round(len(looks) / max(1, len(rows)), 1)
    out["look_s_median"] = round(statistics.median(looks), 4) if looks else None
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--histories", type=int, nargs="+", default=[10, 1000])
    ap.add_argument("--iterations", type=int, default=8)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    results = []
    with tempfile.TemporaryDirectory(prefix="kopt-overhead-") as tmp:
        for h in args.histories:
            results.append(measure(h, args.iterations, Path(tmp)))
            shutil.rmtree(Path(tmp) / "workspaces" / f"h{h}" / "logs", ignore_errors=True)
    report = {
        "date": time.strftime("%Y-%m-%d %H:%M %Z"),
        "machine": f"{platform.node()} ({os.cpu_count()} cores, "
        f"{platform.processor() or platform.machine()}), Python {platform.python_version()}",
        "command": "python -m experiments.engine_overhead " + " ".join(argv or sys.argv[1:]),
        "results": results,
    }
    print(
        f"{'history':>8} {'iters':>5} {'engine_s med':>12} {'engine_s max':>12} {'police_s':>9} "
        f"{'commit_s':>9} {'proposer_s':>10} {'looks/it':>8} {'look_s':>7}"
    )
    for r in results:
        print(
            f"{r['history']:>8} {r['iterations']:>5} {r['engine_s']['median']:>12.3f} {r['engine_s']['max']:>12.3f} "
            f"{r['police_s']['median']:>9.3f} {r['commit_s']['median']:>9.3f} {r['proposer_s']['median']:>10.3f} "
            f"{r['looks_per_iteration']:>8} {r['look_s_median'] or 0:>7.3f}"
        )
    if args.out:
        args.out.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
