"""Capture a real NVTX/roctx range profile for the parser tests. Run once on a GPU machine,
from the repository root (needs torch with CUDA or ROCm, and ncu or rocprofv3 on PATH):

    python3 tests/data/capture_ranges.py --tool ncu --out "$OUT/ncu_h100_ranges"
    python3 tests/data/capture_ranges.py --tool rocprofv3 --out "$OUT/rocprofv3_mi300_ranges"

It profiles a small torch workload through kopt's own commands (the adapter's `command`
and `after_commands`, so the flags are exactly kopt's), parses the output with the
adapter, prints the launches grouped by (range, note, kernel), checks what kopt's
attribution relies on, and writes into --out: the tool's CSV files, `expect.json` (the
groups, for tests/profile/test_profile_attribution.py) and `command.txt`. Commit --out
under tests/data/ when every check says PASS; paste the output into the issue otherwise.

The workload (torch.cuda.nvtx: nvtxRangePushA in the default domain on CUDA, roctx on ROCm):
  - outside any range: a fill (x.add_)
  - per config n in (1024, 4096): 1 warm-up + 3 timed calls, each in its own range
    `kopt:n=<n>` (the same name 4 times); 1 call inside `kopt:n=<n>` > `inner_region`
  - a call: y = x[:n] * 2; torch.cumsum(y, 0)  (an elementwise kernel, a CUB scan)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
WORKLOAD = textwrap.dedent(
    """\
    import torch
    x = torch.randn(1 << 20, device="cuda")
    def call(n):
        y = x[:n] * 2
        return torch.cumsum(y, 0)
    x.add_(1)
    torch.cuda.synchronize()
    for n in (1024, 4096):
        name = f"kopt:n={n}"
        for _ in range(4):
            torch.cuda.nvtx.range_push(name); call(n); torch.cuda.nvtx.range_pop()
        torch.cuda.nvtx.range_push(name); torch.cuda.nvtx.range_push("inner_region")
        call(n)
        torch.cuda.nvtx.range_pop(); torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()
    """
)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tool", choices=("ncu", "rocprofv3"), required=True)
    ap.add_argument("--out", required=True, type=Path)
    a = ap.parse_args()
    sys.path.insert(0, str(REPO))
    from kopt_supervisor.engine.profile.ncu import NcuProfiler
    from kopt_supervisor.engine.profile.profiler import PROFILE_ENV
    from kopt_supervisor.engine.profile.rocprof import Rocprofv3Profiler

    out: Path = a.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    work = out / "workload.py"
    work.write_text(WORKLOAD)
    profiler = NcuProfiler() if a.tool == "ncu" else Rocprofv3Profiler()
    raw = out / "raw"
    cmds = [profiler.command([sys.executable, str(work)], raw, ""), *profiler.after_commands(raw)]
    version = subprocess.run([profiler.executable, "--version"], capture_output=True, text=True).stdout.strip()
    (out / "command.txt").write_text(f"{version}\n" + "\n".join(" ".join(c) for c in cmds) + "\n")
    for argv in cmds:
        print("$", " ".join(argv), flush=True)
        subprocess.run(argv, check=True, env={**os.environ, **PROFILE_ENV})
    summary = profiler.parse(raw, "")
    groups = sorted((g.range, g.note, g.kernel, g.calls) for g in summary.ranged)
    print(f"\nranges read by: {summary.ranges_source}\nopenings: {summary.range_openings}\n")
    for rng, note, kernel, calls in groups:
        print(f"{calls:4d}  {rng or '(outside)':22}  {kernel[:60]:60}  {note}")
    checks = {
        "both kopt ranges seen": set(summary.kopt_ranges) == {"kopt:n=1024", "kopt:n=4096"},
        "the fill outside every range": any(not r and not n for r, n, _, _ in groups),
        "each kernel in a kopt range launched 4 times per config (warm-up + 3 timed)":
            all(c % 4 == 0 for r, n, _, c in groups if r.startswith("kopt:") and not n),
        "the nested call is set apart (ncu: by its innermost range) or kept (rocprofv3: 5 openings)":
            (any(r == "inner_region" for r, _, _, _ in groups) if a.tool == "ncu"
             else dict(summary.range_openings or ()) == {"kopt:n=1024": 5, "kopt:n=4096": 5}),
        "no launch in a range kopt does not expect (e.g. CUB's own ranges)":
            all(r in ("", "kopt:n=1024", "kopt:n=4096", "inner_region") for r, _, _, _ in groups),
    }
    for text, ok in checks.items():
        print(f"{'PASS' if ok else 'FAIL'}: {text}")
    for f in sorted(raw.rglob("*.csv")):
        (out / f.name).write_bytes(f.read_bytes())
    (out / "expect.json").write_text(json.dumps({
        "origin": f"captured by tests/data/capture_ranges.py --tool {a.tool} ({version})",
        "tool": a.tool,
        "kernel_regex": "",
        "groups": [list(g) for g in groups],
    }, indent=2) + "\n")
    print(f"\nwrote {out}")
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
