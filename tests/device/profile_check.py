"""H100 check of kopt's profiler and roofline path. Run on the GPU machine from the repo root:

    python3 tests/device/profile_check.py --out "$OUT"

1. Two workloads, each timed twice: with CUDA events in this process (median over calls,
   no profiler), and through kopt's ncu command (engine.profile.NcuProfiler; `ncu
   --clock-control none`, with --cache-control none and again with all), parsed by kopt's
   parser. It prints the per-call GPU time of the target kernel both ways and their
   difference; the stated margin is 5%.
     copy:   a Triton kernel (kopt_check_copy_kernel) copying 1 GiB of float32
     matmul: torch bf16 4096 x 4096 x 4096 (cuBLAS; the hottest kernel of the profile)
2. `python -m kopt_supervisor.kernels.ceilings --json`, registered with engine.profile.roofline.register_measured.
3. % of peak of both workloads against the shipped wiki's datasheet peaks and against the
   measured ceilings, and the Step 0 README text kopt would write.

Writes to --out: profile_check.json (everything), readme_section.md, ceilings.json, the
measured spec page, ncu_copy.csv and ncu_matmul.csv (the cache-control none profiles).
Exit 0 when every ncu/event difference is within the margin, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from kopt_supervisor.engine.profile.ncu import NcuProfiler  # noqa: E402
from kopt_supervisor.engine.profile.profiler import PROFILE_ENV  # noqa: E402
from kopt_supervisor.engine.profile.roofline import lookup_specs, register_measured, render_readme_section  # noqa: E402
from kopt_supervisor.engine.roofline import aggregate_classes, analyze_row, peaks_from_specs  # noqa: E402

MARGIN_PCT = 5.0
COPY_N = 1 << 28  # float32 elements: 1 GiB read + 1 GiB written
MM = 4096
WORKLOADS = {
    "copy": {"regex": "kopt_check_copy", "flops": 0.0, "bytes": 2.0 * 4 * COPY_N},
    "matmul": {"regex": "", "flops": 2.0 * MM**3, "bytes": 3.0 * MM * MM * 2},
}


def _workload(name: str):
    """A callable running one call of the workload, with its inputs allocated."""
    import torch
    import triton
    import triton.language as tl

    if name == "copy":

        @triton.jit
        def kopt_check_copy_kernel(src, dst, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            mask = offs < n
            tl.store(dst + offs, tl.load(src + offs, mask=mask), mask=mask)

        src = torch.rand(COPY_N, device="cuda")
        dst = torch.empty_like(src)
        grid = (triton.cdiv(COPY_N, 4096),)
        return lambda: kopt_check_copy_kernel[grid](src, dst, COPY_N, BLOCK=4096)
    gen = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(MM, MM, device="cuda", dtype=torch.bfloat16, generator=gen)
    b = torch.randn(MM, MM, device="cuda", dtype=torch.bfloat16, generator=gen)
    c = torch.empty(MM, MM, device="cuda", dtype=torch.bfloat16)
    return lambda: torch.matmul(a, b, out=c)


def run_calls(name: str, calls: int, warmup: int) -> list[float]:
    """Seconds per call with CUDA events (one pair around each call)."""
    import torch

    fn = _workload(name)
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(calls)]
    for start, end in events:
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize()
    return [s.elapsed_time(e) / 1e3 for s, e in events]


def profiled(name: str, cache_control: str, out_dir: Path, calls: int) -> dict:
    """Run the workload under kopt's ncu command; the target kernel's per-call GPU time."""
    regex = WORKLOADS[name]["regex"]
    inner = [sys.executable, str(Path(__file__).resolve()), "--child", name, "--calls", str(calls)]
    profiler = NcuProfiler(cache_control=cache_control)
    argv = profiler.command(inner, out_dir, regex)
    done = subprocess.run(
        argv,
        cwd=REPO,
        env={**os.environ, **PROFILE_ENV},
        capture_output=True,
        text=True,
        timeout=540,
    )
    if done.returncode != 0:
        raise SystemExit(f"ncu failed ({done.returncode}) for {name}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    summary = profiler.parse(out_dir, regex)
    kernel = summary.kernel(summary.hottest)
    return {
        "command": argv,
        "summary": summary.to_dict(),
        "kernel": kernel.name,
        "launches": kernel.calls,
        "avg_ns": kernel.avg_ns,
        "min_ns": kernel.min_ns,
        "max_ns": kernel.max_ns,
        "target_per_call_ns": summary.target_per_call_ns,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description="kopt profiler + roofline check on a GPU")
    ap.add_argument("--out", required=False, default=os.environ.get("OUT", "profile_check_out"))
    ap.add_argument("--calls", type=int, default=30)
    ap.add_argument("--child", choices=sorted(WORKLOADS), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:  # the profiled process: warm-up 3 + calls, no timing
        times = run_calls(args.child, args.calls, warmup=3)
        print(f"{args.child}: {len(times)} calls")
        return 0

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results: dict = {"margin_pct": MARGIN_PCT, "workloads": {}}
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        for name in WORKLOADS:
            times = run_calls(name, args.calls, warmup=5)
            event_ns = statistics.median(times) * 1e9
            entry = {
                "event_median_ns": event_ns,
                "event_min_ns": min(times) * 1e9,
                "calls": len(times),
                "ncu": {},
            }
            for cache in ("none", "all"):
                prof = profiled(name, cache, Path(tmp) / f"{name}_{cache}", args.calls)
                prof["diff_pct"] = (prof["avg_ns"] - event_ns) / event_ns * 100
                prof["within_margin"] = abs(prof["diff_pct"]) <= MARGIN_PCT
                ok &= prof["within_margin"] or cache == "all"
                entry["ncu"][cache] = prof
                if cache == "none":
                    shutil.copyfile(Path(tmp) / f"{name}_{cache}" / "ncu.csv", out / f"ncu_{name}.csv")
            results["workloads"][name] = entry

    ceil_json = out / "ceilings.json"
    done = subprocess.run(
        [sys.executable, "-m", "kopt_supervisor.kernels.ceilings", "--json", "--out", str(ceil_json)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if done.returncode != 0:
        raise SystemExit(f"kopt_supervisor.kernels.ceilings failed:\n{done.stderr[-3000:]}")
    ceilings = json.loads(ceil_json.read_text())
    results["ceilings"] = ceilings
    page = register_measured(ceilings, out / "measured")
    gpu = ceilings["gpu_name"]
    datasheet = lookup_specs(gpu)
    measured = lookup_specs(gpu, measured_dir=out / "measured", gpu_uuid=ceilings.get("gpu_uuid"))
    results["measured_page"] = str(page)

    points = {}
    for label, specs in (("datasheet", datasheet), ("measured", measured)):
        peaks = peaks_from_specs(specs)
        for name, w in WORKLOADS.items():
            seconds = results["workloads"][name]["event_median_ns"] / 1e9
            p = analyze_row(w["flops"], w["bytes"], seconds, peaks.bandwidth_Bps, peaks.flops_per_s)
            results["workloads"][name][f"roofline_{label}"] = p.to_dict()
            if label == "measured":
                points[name] = p
    readme = render_readme_section(
        measured,
        points,
        aggregate_classes(points, {"copy": "memory-bound", "matmul": "compute-bound"}),
        gpu_name=gpu,
        flops_expr="copy: 0; matmul: 2*4096^3",
        bytes_expr="copy: 2*4*2^28; matmul: 3*4096*4096*2",
    )
    (out / "readme_section.md").write_text(readme)
    (out / "profile_check.json").write_text(json.dumps(results, indent=2, default=str) + "\n")

    print(f"GPU {gpu} ({ceilings.get('gpu_uuid')}); margin {MARGIN_PCT}%")
    print(
        f"{'workload':8} {'kernel':40} {'events us':>10} {'ncu none us':>12} {'diff %':>7} {'ncu all us':>11} {'diff %':>7}"
    )
    for name, e in results["workloads"].items():
        n, a = e["ncu"]["none"], e["ncu"]["all"]
        print(
            f"{name:8} {n['kernel'][:40]:40} {e['event_median_ns'] / 1e3:10.2f} {n['avg_ns'] / 1e3:12.2f} "
            f"{n['diff_pct']:+7.2f} {a['avg_ns'] / 1e3:11.2f} {a['diff_pct']:+7.2f}"
        )
    print(
        f"ceilings: d2d copy {ceilings['copy']['bandwidth_Bps'] / 1e12:.3f} TB/s, "
        f"bf16 matmul {ceilings['matmul']['flops_per_s'] / 1e12:.1f} TFLOP/s"
    )
    print(f"{'workload':8} {'bound':8} {'% of datasheet peak':>20} {'% of measured peak':>19}")
    for name, e in results["workloads"].items():
        d, m = e["roofline_datasheet"], e["roofline_measured"]
        print(
            f"{name:8} {d['bound']:8} {d['pct_of_peak'] or float('nan'):20.1f} {m['pct_of_peak'] or float('nan'):19.1f}"
        )
    print(
        "PASS"
        if ok
        else f"FAIL: an ncu (cache-control none) time differs from the event time by more than {MARGIN_PCT}%"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
