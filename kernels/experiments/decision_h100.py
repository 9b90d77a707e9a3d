"""The decision on a real GPU: kopt's paired sequential test against do_bench + the 1% rule.

Run on one idle H100 (about 5 minutes; prints a markdown table, writes every decision):

    python -m kernels.experiments.decision_h100 --out decision_h100.json

Smoke test on a machine without a GPU (Triton's interpreter, tiny sizes, CPU timers):

    python -m kernels.experiments.decision_h100 --smoke --out /tmp/decision_smoke.json

What it does, all in one process and one run:
- A memory-bound Triton kernel (y = 2x + 1 over n fp32 values) is sized so that
  `triton.testing.do_bench` reads about 5 µs, 10 µs and 700 µs (--durations-us).
- Per duration, decisions between a "best" and a "candidate" arm: A/A (the same kernel
  on the same buffers: identical trees) and A/B where the candidate moves 1% or 2% more
  bytes (--slowdowns): a true, known slowdown. --decisions of each (default 50).
- kopt: CUDA-graph blocks (one replay of R launches, about --block-us of GPU time),
  best and candidate interleaved ABBA, --pairs-per-look block pairs per look, and
  `engine.decide.evaluate` with the default Policy after each look, until final. The
  same blocks are judged two ways: "kopt (run unit)", what kopt does by default with
  ab_command data (one mean per look), and "kopt (pooled)", every block a sample
  (Policy.pool_blocks; valid here since every look shares one process and its buffers).
- The naive rule, measured in the same run interleaved with kopt's decisions: one
  do_bench reading of best then one of the candidate; keep if the candidate is > 1%
  faster, regression if > 1% slower, else tie. "twice-in-a-row": also keeps when a
  sub-threshold gain is followed by a second reading pair showing a gain (the reference
  program's rule); "confirm": keeps only when two reading pairs both show > 1%.
- Reported per duration and condition: the share of keep / regression / tie / review
  verdicts (any keep is false: no candidate here is faster), looks per decision, and the
  cost per decision: kopt's timed GPU seconds (sum of its blocks) and wall seconds; for
  do_bench the wall seconds of its calls (it keeps the GPU busy throughout).

Needs torch and triton (the `kernels` extra). The timing functions (GraphTimer,
naive_reading) are kept small and separate so a bundled harness can replace them.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from engine.decide import Pair, Policy, evaluate

KINDS = ("keep", "regression", "tie", "borderline")


# --- the kernel -----------------------------------------------------------------------------


def make_stream_kernel() -> Callable[[Any, Any, int], None]:
    """A launcher for y = 2x + 1 over n fp32 values: reads 4n bytes, writes 4n bytes."""
    import triton
    import triton.language as tl

    @triton.jit
    def stream(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask)
        tl.store(y_ptr + offs, x * 2.0 + 1.0, mask=mask)

    def launch(x: Any, y: Any, n: int) -> None:
        stream[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)

    return launch


@dataclass
class Arm:
    """One side of a comparison: the kernel on its own buffers of n values."""

    name: str
    n: int
    run: Callable[[], None]


def make_arm(torch: Any, launch: Callable[[Any, Any, int], None], name: str, n: int, device: str) -> Arm:
    x = torch.rand(n, device=device, dtype=torch.float32)
    y = torch.empty_like(x)
    return Arm(name, n, lambda: launch(x, y, n))


# --- timing (small and separate: a bundled harness may replace it) --------------------------


class GraphTimer:
    """Times blocks: one replay of a CUDA graph holding `reps` launches of an arm, between
    two CUDA events. block() returns microseconds per launch."""

    def __init__(self, torch: Any, arm: Arm, reps: int) -> None:
        self.torch, self.reps = torch, reps
        arm.run()
        torch.cuda.synchronize()
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            for _ in range(reps):
                arm.run()
        self.start = torch.cuda.Event(enable_timing=True)
        self.end = torch.cuda.Event(enable_timing=True)
        for _ in range(3):
            self.block()

    def block(self) -> float:
        self.start.record()
        self.graph.replay()
        self.end.record()
        self.end.synchronize()
        return self.start.elapsed_time(self.end) * 1000.0 / self.reps


class CpuTimer:
    """The smoke test's stand-in for GraphTimer: wall time of `reps` calls."""

    def __init__(self, torch: Any, arm: Arm, reps: int) -> None:
        self.arm, self.reps = arm, reps
        arm.run()

    def block(self) -> float:
        t0 = time.perf_counter()
        for _ in range(self.reps):
            self.arm.run()
        return (time.perf_counter() - t0) * 1e6 / self.reps


def naive_reading(arm: Arm, smoke: bool) -> float:
    """One reading as users take it: triton.testing.do_bench with its defaults (mean of
    ~100 ms of runs, L2 flushed before each), in microseconds."""
    if smoke:
        times = []
        for _ in range(5):
            t0 = time.perf_counter()
            arm.run()
            times.append(time.perf_counter() - t0)
        return statistics.mean(times) * 1e6
    import triton.testing

    return float(triton.testing.do_bench(arm.run)) * 1000.0


# --- sizing -------------------------------------------------------------------------------


def size_for_durations(torch: Any, launch: Callable[[Any, Any, int], None], targets_us: list[float],
                       device: str, smoke: bool) -> dict[float, tuple[int, float]]:
    """Per target duration, n such that do_bench reads about that long (log-log interpolation
    over powers of two), and the reading at that n."""
    if smoke:
        return {t: (4096 * (i + 1), math.nan) for i, t in enumerate(targets_us)}
    curve: list[tuple[int, float]] = []
    n = 1 << 12
    while n <= 1 << 29:
        curve.append((n, naive_reading(make_arm(torch, launch, "probe", n, device), smoke)))
        torch.cuda.empty_cache()
        if curve[-1][1] > 2 * max(targets_us):
            break
        n <<= 1
    out = {}
    for t in targets_us:
        lo = max((c for c in curve if c[1] <= t), key=lambda c: c[1], default=curve[0])
        hi = min((c for c in curve if c[1] >= t), key=lambda c: c[1], default=curve[-1])
        if hi[0] == lo[0] or hi[1] <= lo[1]:
            n_t = lo[0]
        else:
            f = (math.log(t) - math.log(lo[1])) / (math.log(hi[1]) - math.log(lo[1]))
            n_t = int(math.exp(math.log(lo[0]) + f * (math.log(hi[0]) - math.log(lo[0]))))
        n_t = max(1024, n_t // 1024 * 1024)
        out[t] = (n_t, naive_reading(make_arm(torch, launch, "check", n_t, device), smoke))
        torch.cuda.empty_cache()
    return out


# --- the two deciders ---------------------------------------------------------------------


@dataclass
class Tally:
    """Decisions of one method under one condition."""

    kinds: dict[str, int] = field(default_factory=lambda: {k: 0 for k in KINDS})
    looks: list[int] = field(default_factory=list)
    gpu_s: list[float] = field(default_factory=list)
    wall_s: list[float] = field(default_factory=list)
    decisions: list[dict[str, Any]] = field(default_factory=list)

    def add(self, kind: str, looks: int, gpu_s: float, wall_s: float, **extra: Any) -> None:
        self.kinds[kind] = self.kinds.get(kind, 0) + 1
        self.looks.append(looks)
        self.gpu_s.append(gpu_s)
        self.wall_s.append(wall_s)
        self.decisions.append({"verdict": kind, "looks": looks, "gpu_s": gpu_s, "wall_s": wall_s, **extra})

    def share(self, kind: str) -> float:
        n = sum(self.kinds.values())
        return self.kinds.get(kind, 0) / n if n else math.nan

    def summary(self) -> dict[str, Any]:
        return {
            "n": len(self.looks),
            **{k: self.share(k) for k in KINDS},
            "mean_looks": statistics.mean(self.looks) if self.looks else math.nan,
            "mean_gpu_s": statistics.mean(self.gpu_s) if self.gpu_s else math.nan,
            "mean_wall_s": statistics.mean(self.wall_s) if self.wall_s else math.nan,
        }


def kopt_decision(best: Any, cand: Any, policies: dict[str, Policy], pairs_per_look: int,
                  tallies: dict[str, Tally], ratios: list[float]) -> None:
    """One decision; every policy judges the same blocks and stops on its own."""
    pairs: list[Pair] = []
    gpu_s = 0.0
    t0 = time.perf_counter()
    open_ = dict(policies)
    for look in range(max(p.max_rounds for p in policies.values())):
        for j in range(pairs_per_look):
            order = "AB" if j % 2 == 0 else "BA"
            if order == "AB":
                b = best.block()
                c = cand.block()
            else:
                c = cand.block()
                b = best.block()
            gpu_s += (b * best.reps + c * cand.reps) / 1e6
            pairs.append(Pair("kernel", "all", b, c, look, order, j))
            ratios.append(c / b)
        for name, policy in list(open_.items()):
            if look + 1 < policy.min_rounds:
                continue
            v = evaluate(pairs, policy, gpu_seconds=gpu_s)
            if v.final:
                c0 = v.classes[0]
                tallies[name].add(v.kind, look + 1, gpu_s, time.perf_counter() - t0, reason=v.reason,
                                  ratio=c0.ratio, lo=c0.lo if math.isfinite(c0.lo) else None,
                                  hi=c0.hi if math.isfinite(c0.hi) else None, flags=list(v.flags))
                del open_[name]
        if not open_:
            return


def naive_decision(best: Arm, cand: Arm, smoke: bool, tallies: dict[str, Tally]) -> None:
    """The 1% rule on do_bench readings, and its twice-in-a-row and confirm variants."""
    t0 = time.perf_counter()
    a1, b1 = naive_reading(best, smoke), naive_reading(cand, smoke)
    first_wall = time.perf_counter() - t0
    g1 = 1.0 - b1 / a1
    one = "keep" if g1 > 0.01 else "regression" if g1 < -0.01 else "tie"
    tallies["do_bench 1%"].add(one, 1, first_wall, first_wall, gain=g1)
    if g1 > 0:
        a2, b2 = naive_reading(best, smoke), naive_reading(cand, smoke)
        both_wall = time.perf_counter() - t0
        g2 = 1.0 - b2 / a2
        twice = "keep" if (g1 > 0.01 or g2 > 0) else "tie"
        confirm = "keep" if (g1 > 0.01 and g2 > 0.01) else "tie"
        tallies["do_bench twice-in-a-row"].add(twice, 2 if g1 <= 0.01 else 1,
                                               both_wall if g1 <= 0.01 else first_wall,
                                               both_wall if g1 <= 0.01 else first_wall, gain=g1, gain2=g2)
        tallies["do_bench confirm"].add(confirm, 2 if g1 > 0.01 else 1,
                                        both_wall if g1 > 0.01 else first_wall,
                                        both_wall if g1 > 0.01 else first_wall, gain=g1, gain2=g2)
    else:
        for name in ("do_bench twice-in-a-row", "do_bench confirm"):
            tallies[name].add(one, 1, first_wall, first_wall, gain=g1)


# --- the experiment -----------------------------------------------------------------------


METHODS = ("kopt (run unit)", "kopt (pooled)", "do_bench 1%", "do_bench twice-in-a-row", "do_bench confirm")


def run(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    device = "cpu" if args.smoke else "cuda"
    if not args.smoke and not torch.cuda.is_available():
        raise SystemExit("no CUDA device: run on a GPU machine, or pass --smoke")
    launch = make_stream_kernel()
    timer_cls = CpuTimer if args.smoke else GraphTimer
    policies = {"kopt (run unit)": Policy(max_rounds=args.max_looks),
                "kopt (pooled)": Policy(max_rounds=args.max_looks, pool_blocks=True)}
    sizes = size_for_durations(torch, launch, args.durations_us, device, args.smoke)
    started = time.perf_counter()
    results: dict[str, Any] = {}
    for target, (n, reading) in sizes.items():
        arms = {"A": make_arm(torch, launch, "A", n, device)}
        for s in args.slowdowns:
            arms[f"+{s:g}%"] = make_arm(torch, launch, f"+{s:g}%", int(round(n * (1 + s / 100) / 1024)) * 1024, device)
        per_launch = CpuTimer(torch, arms["A"], 3).block() if args.smoke else _graph_estimate(torch, arms["A"])
        reps = max(1, round(args.block_us / max(per_launch, 1e-3)))
        timers = {k: timer_cls(torch, a, reps) for k, a in arms.items()}
        conditions = {"A/A": ("A", "A")} | {f"A/B +{s:g}% bytes": ("A", f"+{s:g}%") for s in args.slowdowns}
        tallies = {c: {m: Tally() for m in METHODS} for c in conditions}
        ratios: dict[str, list[float]] = {c: [] for c in conditions}
        for i in range(args.decisions):
            for cond, (b, c) in conditions.items():
                kopt_decision(timers[b], timers[c], policies, args.pairs_per_look, tallies[cond], ratios[cond])
                naive_decision(arms[b], arms[c], args.smoke, tallies[cond])
            if (i + 1) % 10 == 0:
                print(f"  {target:g} µs: {i + 1}/{args.decisions} decisions per condition "
                      f"({time.perf_counter() - started:.0f} s)", file=sys.stderr, flush=True)
        results[f"{target:g}"] = {
            "target_us": target, "n": n, "do_bench_us": reading, "graph_us_per_launch": per_launch,
            "reps_per_block": reps,
            "conditions": {
                cond: {
                    "true_change_pct": (math.exp(statistics.mean(math.log(r) for r in ratios[cond])) - 1) * 100,
                    "methods": {m: {**t.summary(), "decisions": t.decisions} for m, t in tallies[cond].items()},
                }
                for cond in conditions
            },
        }
        del timers, arms
        if not args.smoke:
            torch.cuda.empty_cache()
    return {
        "date": datetime.date.today().isoformat(),
        "command": " ".join(["python -m kernels.experiments.decision_h100", *sys.argv[1:]]),
        "device": "cpu (smoke, Triton interpreter)" if args.smoke else torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "triton": __import__("triton").__version__,
        "python": platform.python_version(),
        "policy": {k: vars(p) if hasattr(p, "__dict__") else str(p) for k, p in policies.items()},
        "pairs_per_look": args.pairs_per_look,
        "block_us": args.block_us,
        "seconds": time.perf_counter() - started,
        "durations": results,
    }


def _graph_estimate(torch: Any, arm: Arm) -> float:
    """Microseconds per launch inside a CUDA graph of 20 launches."""
    return statistics.median(GraphTimer(torch, arm, 20).block() for _ in range(5))


def markdown(report: dict[str, Any]) -> str:
    lines = [f"{report['device']}, {report['date']}, torch {report['torch']}, triton {report['triton']}; "
             f"{report['seconds']:.0f} s", ""]
    for d in report["durations"].values():
        lines += [f"**~{d['target_us']:g} µs kernel** (n = {d['n']}, do_bench {d['do_bench_us']:.2f} µs, "
                  f"in a CUDA graph {d['graph_us_per_launch']:.2f} µs/launch, {d['reps_per_block']} launches/block)",
                  "",
                  "| condition (measured change) | method | keep | regression | tie | review | looks | GPU-ms/decision | wall-ms/decision |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for cond, c in d["conditions"].items():
            for m, s in c["methods"].items():
                lines.append(f"| {cond} ({c['true_change_pct']:+.2f}%) | {m} | {s['keep']:.0%} | {s['regression']:.0%} "
                             f"| {s['tie']:.0%} | {s['borderline']:.0%} | {s['mean_looks']:.1f} "
                             f"| {s['mean_gpu_s'] * 1e3:.1f} | {s['mean_wall_s'] * 1e3:.1f} |")
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m kernels.experiments.decision_h100", description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="decision_h100.json", help="JSON with every decision")
    ap.add_argument("--decisions", type=int, default=50, help="decisions per duration and condition (default 50)")
    ap.add_argument("--durations-us", default="5,10,700", help="target do_bench durations in µs")
    ap.add_argument("--slowdowns", default="1,2", help="candidate's extra bytes in %% (A/B conditions)")
    ap.add_argument("--pairs-per-look", type=int, default=8, help="ABBA block pairs per look (default 8)")
    ap.add_argument("--block-us", type=float, default=250.0, help="GPU time of one block (default 250 µs)")
    ap.add_argument("--max-looks", type=int, default=Policy.max_rounds, help="kopt's max_rounds (default 20)")
    ap.add_argument("--smoke", action="store_true",
                    help="no GPU: Triton interpreter, tiny sizes, CPU timers, 4 looks of 2 pairs at most")
    a = ap.parse_args(argv)
    if a.smoke:
        a.max_looks, a.pairs_per_look = min(a.max_looks, 4), min(a.pairs_per_look, 2)
    a.durations_us = [float(x) for x in a.durations_us.split(",") if x]
    a.slowdowns = [float(x) for x in a.slowdowns.split(",") if x]
    if a.smoke:
        os.environ["TRITON_INTERPRET"] = "1"
        if "triton" in sys.modules:
            raise SystemExit("--smoke must set TRITON_INTERPRET before triton is imported")
    report = run(a)
    text = markdown(report)
    print(text)
    with open(a.out, "w") as f:
        json.dump({**report, "markdown": text}, f, indent=1, default=str)
    print(f"wrote {a.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
