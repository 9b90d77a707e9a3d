"""What ncu costs per kernel launch outside kopt's ranges, by kernel size and metric list (the
two-pass profile's outside pass is time-only). Run on a GPU host with ncu:

    python experiments/ncu_overhead_probe.py

Prints the wall seconds of a workload (many small launches, then a few launches over a 2 GiB
float64 tensor) unprofiled and under ncu with each option set.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

WORKLOAD = """
import sys, torch
kind = sys.argv[1]
if kind == "small":
    x = torch.randn(4096, device="cuda")
    for _ in range(300):
        x = x * 1.0001
else:
    x = torch.randn(256 * 1024 * 1024, device="cuda", dtype=torch.float64)  # 2 GiB
    for _ in range(20):
        x = x * 1.0001
torch.cuda.synchronize()
"""

OPTIONS = {
    "time only": ["--metrics", "gpu__time_duration.sum"],
    "time only, cache-control all": ["--metrics", "gpu__time_duration.sum", "--cache-control", "all"],
    "time only, cache-control none": ["--metrics", "gpu__time_duration.sum", "--cache-control", "none"],
    "time only, application replay": ["--metrics", "gpu__time_duration.sum", "--replay-mode", "application"],
}


def main() -> int:
    path = Path("/tmp/ncu_overhead_workload.py")
    path.write_text(WORKLOAD)
    for kind in ("small", "large"):
        t0 = time.monotonic()
        subprocess.run([sys.executable, str(path), kind], check=True)
        print(f"{kind}: unprofiled {time.monotonic() - t0:.2f} s", flush=True)
        for name, extra in OPTIONS.items():
            t0 = time.monotonic()
            res = subprocess.run(
                ["ncu", "--clock-control", "none", *extra, sys.executable, str(path), kind],
                capture_output=True,
                text=True,
                timeout=300,
            )
            print(
                f"{kind}: ncu {name}: {time.monotonic() - t0:.2f} s (rc {res.returncode}, "
                f"{res.stdout.count('==PROF== Profiling')} launches)",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
