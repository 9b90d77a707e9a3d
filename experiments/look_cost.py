"""Where a served look's seconds go, config by config, inside one process.

    python -m experiments.look_cost [--looks 4] [--naive] [--out DIR] [--cpu]

A served look of the bundled RMSNorm took ~2.2 s on the H200 (part 20) while its timed blocks
were ~0.3 s a side: per side a `prepare` (check, draws, CUDA graph capture) of ~0.85 s run
beside the other side's, a look of ~0.55 s (timing 0.3 s, the commitment 0.2 s), and the
engine's ~0.2 s. This probe builds the harness's Bench in-process on the tuned tree (the naive
one with --naive), as `bench.py --serve` does, and times per config and look: the contract
check, the timed sets' draw, the capture, the timed blocks, and each config's share of the
commitment (its output summaries), each after a device synchronize; then a cProfile of one
look's commitment. Writes DIR/look_cost.json and prints a table.
Needs a CUDA GPU (`--cpu`: Triton's interpreter, a smoke test of the script only).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import statistics
import tempfile
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--looks", type=int, default=4)
    ap.add_argument("--naive", action="store_true", help="the demo's naive start instead of the tuned tree")
    ap.add_argument("--out", default="")
    ap.add_argument("--cpu", action="store_true", help="Triton's interpreter: a smoke test of the script")
    args = ap.parse_args(argv)
    if args.cpu:
        import os

        os.environ["TRITON_INTERPRET"] = "1"
    from experiments.h100_wave3 import targets
    from kopt_supervisor.kernels.harness import audit
    from kopt_supervisor.kernels.harness import bench as hb

    work = Path(args.out or tempfile.mkdtemp(prefix="look-cost-"))
    work.mkdir(parents=True, exist_ok=True)
    tree = targets.rms_repo(work / "tree", cpu=args.cpu, naive=args.naive)
    torch, gpu = hb.setup_device()

    def sync() -> float:
        if gpu:
            torch.cuda.synchronize()
        return time.perf_counter()

    a = hb.parse_args(["--serve", "--dtypes", "bfloat16"], gpu)
    bench = hb.Bench(tree, a, torch, gpu, hb.PhaseClock(), tree)
    per: dict[str, dict[str, list[float]]] = {}

    def note(key: str, phase: str, s: float) -> None:
        per.setdefault(key, {}).setdefault(phase, []).append(round(s, 5))

    looks = []
    for n in range(-1, args.looks):
        seed = hb.new_seed()
        t0 = sync()
        ready = bench.prepare_look(seed) if n >= 0 else None
        t1 = sync()
        rows = bench.timed_rows(seed, copy=False, prepared=ready)
        t2 = sync()
        commit_s = {}
        for case, sets in bench.looked:
            c0 = sync()
            audit.summarise_sets(torch, [sets.outputs(i) for i in range(sets.count)])
            commit_s[case.key] = sync() - c0
            note(f"{case.shape.name} ({sets.count} sets)", "commit", commit_s[case.key])
        t3 = sync()
        whole = bench.commitment()
        json.dumps(whole)
        t4 = sync()
        looks.append(
            {
                "look": n,
                "prepare_s": round(t1 - t0, 4),
                "look_s": round(t2 - t1, 4),
                "commit_by_config_s": round(t3 - t2, 4),
                "commitment_s": round(t4 - t3, 4),
                "rows": len(rows),
            }
        )
        print(json.dumps(looks[-1]), flush=True)
    prof = cProfile.Profile()
    prof.enable()
    bench.commitment()
    sync()
    prof.disable()
    text = io.StringIO()
    pstats.Stats(prof, stream=text).sort_stats("cumulative").print_stats(25)
    summary = {
        "gpu": torch.cuda.get_device_name(0) if gpu else "cpu",
        "naive": args.naive,
        "looks": looks,
        "per_config": {k: {p: statistics.median(v) for p, v in d.items()} for k, d in per.items()},
        "commitment_profile": text.getvalue(),
    }
    (work / "look_cost.json").write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    for k, d in summary["per_config"].items():
        print(f"{k:36s} " + "  ".join(f"{p} {v * 1e3:7.1f} ms" for p, v in d.items()))
    print(text.getvalue()[:6000])
    print(f"wrote {work / 'look_cost.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
