"""A/A check of the serving A/B bench on a GPU: are looks of one process independent?

    python tests/device/serve_aa.py --kernel rmsnorm --looks 48 --out aa_rmsnorm.json

Two identical trees (a bundled kernel, materialized twice from the same params) are
compared by `bench.py --ab BEST CAND --serve`, driven by kopt's own runner.server.Server exactly as
the loop drives it (a fresh process whenever one answers `done N last`). Per class it prints
the looks' log-ratio means (should centre on 0), their spread against what the blocks inside
a look predict (a ratio near 1: looks vary no more than their blocks say, so a look is a
fair unit; well above 1: a per-process or per-look offset the interval must absorb), and
the A/A decisions kopt's `evaluate` makes over consecutive looks ([decide] of the kernel's
kopt.toml): every keep or regression here is a false one. Also seconds per look and looks
per process. Needs the kernel's deps (torch, triton); the engine for metrics and decide.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from kopt_supervisor.engine import adapters, metrics  # noqa: E402
from kopt_supervisor.engine.config.toml_io import loads as loads_config  # noqa: E402
from kopt_supervisor.engine.decide.estimate import Policy  # noqa: E402
from kopt_supervisor.engine.decide.verdict import evaluate, voting_classes  # noqa: E402
from kopt_supervisor.engine.runner.server import Server  # noqa: E402
from kopt_supervisor.kernels import catalog  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernel", default="rmsnorm", choices=sorted(catalog.KERNELS))
    ap.add_argument("--looks", type=int, default=48)
    ap.add_argument("--tuned", action="store_true", help="the tuned params (default: the naive start)")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix=f"aa_{a.kernel}_"))
    trees = {}
    for side in ("best", "cand"):
        trees[side] = work / side
        trees[side].mkdir()
        catalog.materialize(a.kernel, trees[side], naive=not a.tuned, python=sys.executable)
    cfg = loads_config((trees["best"] / "kopt.toml").read_text())
    cmd = cfg.target.ab_command.replace("{best}", str(trees["best"])).replace("{cand}", str(trees["cand"]))
    policy = Policy.from_config(cfg.decide, cfg.target.direction)
    logs = work / "logs"
    server, starts, seconds, pairs_by_look, looks_per_process, served = None, 0, [], [], [], 0
    t_start = time.monotonic()
    for r in range(a.looks):
        if server is None:
            starts += 1
            server = Server(cmd, cwd=trees["best"], log_dir=logs, name=f"serve{starts}")
            served = 0
        path = logs / f"look{r}.csv"
        t0 = time.monotonic()
        reply = server.ask(
            f"look {r} {path}",
            timeout_s=600,
            is_reply=lambda line, r=r: line.split()[:2] in (["done", str(r)], ["fail", str(r)]),
        )
        seconds.append(time.monotonic() - t0)
        if reply.startswith("fail"):
            raise SystemExit(f"look {r}: {reply}")
        served += 1
        if reply.split()[2:3] == ["last"]:
            server.close()
            server = None
            looks_per_process.append(served)
        df = adapters.read_kopt_csv(path, metric=cfg.target.metric)
        pairs, best_m, _ = metrics.ab_pairs(df, cfg.target, r, path.name)
        guard = frozenset(k for k, c in best_m.configs.items() if not c.production)
        classes = voting_classes({p.config: p.cls for p in pairs}, guard)
        pairs_by_look.append([replace(p, cls=classes[p.config]) for p in pairs])
        print(f"look {r}: {seconds[-1]:.2f} s", file=sys.stderr, flush=True)
    if server is not None:
        looks_per_process.append(served)
        server.close()
    total = time.monotonic() - t_start

    # per class: look means of the log ratio, and the spread the blocks predict
    report: dict = {
        "kernel": a.kernel,
        "looks": a.looks,
        "processes": starts,
        "looks_per_process": looks_per_process,
        "seconds_per_look": {"median": statistics.median(seconds), "max": max(seconds)},
        "wall_s": total,
        "classes": {},
        "decisions": [],
    }
    classes = sorted({p.cls for look in pairs_by_look for p in look})
    for cls in classes:
        means, within = [], []
        for look in pairs_by_look:
            by_block: dict[int, list[float]] = {}
            for p in look:
                if p.cls == cls:
                    by_block.setdefault(p.block, []).append(math.log(p.cand / p.best))
            blocks = [statistics.fmean(v) for _, v in sorted(by_block.items())]
            means.append(statistics.fmean(blocks))
            within.append(statistics.variance(blocks) / len(blocks) if len(blocks) > 1 else math.nan)
        sd_between = statistics.stdev(means)
        se_within = math.sqrt(statistics.fmean([w for w in within if not math.isnan(w)]))
        report["classes"][cls] = {
            "mean_pct": 100 * statistics.fmean(means),
            "sd_looks_pct": 100 * sd_between,
            "se_blocks_pct": 100 * se_within,
            "ratio": sd_between / se_within if se_within else None,
        }
    # consecutive A/A decisions, as the loop makes them
    start = 0
    while start < len(pairs_by_look):
        pairs = []
        for k in range(start, len(pairs_by_look)):
            pairs += [replace(p, round=k - start) for p in pairs_by_look[k]]
            if k - start + 1 < policy.min_rounds:
                continue
            v = evaluate(pairs, policy)
            if v.final:
                report["decisions"].append({"looks": k - start + 1, "verdict": v.kind, "reason": v.reason})
                start = k + 1
                break
        else:
            break
    Path(a.out).write_text(json.dumps(report, indent=2) + "\n")
    print(
        f"\n{a.kernel} A/A, serving bench: {a.looks} looks in {starts} process(es) {looks_per_process}, "
        f"{report['seconds_per_look']['median']:.2f} s per look (median), {total:.0f} s in all"
    )
    print("| class | mean of looks | SD of look means | SE from blocks | ratio |\n|---|---|---|---|---|")
    for cls, c in report["classes"].items():
        print(
            f"| {cls} | {c['mean_pct']:+.3f}% | {c['sd_looks_pct']:.3f}% | {c['se_blocks_pct']:.3f}% | "
            f"{c['ratio']:.2f} |"
        )
    verdicts = [d["verdict"] for d in report["decisions"]]
    print(f"A/A decisions: {len(verdicts)}: " + ", ".join(f"{v} {verdicts.count(v)}" for v in sorted(set(verdicts))))
    for d in report["decisions"]:
        print(f"  {d['looks']} looks: {d['verdict']}: {d['reason']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
