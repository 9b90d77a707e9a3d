"""Which kernels ncu profiles under `--nvtx-include` / `--nvtx-exclude` with a regex on kopt's
push/pop ranges (for a two-pass profile: full metrics inside the config ranges, time only
outside them). Run on a GPU host with ncu:

    python experiments/ncu_nvtx_filter_probe.py OUT_DIR

Prints, per filter, the kernels ncu profiled and whether each was made inside a kopt range.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

WORKLOAD = """
import torch
x = torch.randn(1024, 1024, device="cuda")
y = x.exp()                                   # outside any range
torch.cuda.nvtx.range_push("kopt:dtype=float32,n=1024")
z = x @ x                                     # inside the kopt range
torch.cuda.nvtx.range_pop()
torch.cuda.nvtx.range_push("other")
w = x.sin()                                   # inside another range
torch.cuda.nvtx.range_pop()
torch.cuda.synchronize()
"""

FILTERS = {
    "none": [],
    "include regex:kopt:.*/": ["--nvtx-include", "regex:kopt:.*/"],
    "exclude regex:kopt:.*/": ["--nvtx-exclude", "regex:kopt:.*/"],
    "include regex:^kopt:/": ["--nvtx-include", "regex:^kopt:/"],
}


def main(out: Path) -> int:
    out.mkdir(parents=True, exist_ok=True)
    (out / "workload.py").write_text(WORKLOAD)
    for name, extra in FILTERS.items():
        argv = [
            "ncu",
            "--nvtx",
            *extra,
            "--metrics",
            "gpu__time_duration.sum",
            "--csv",
            "--page",
            "raw",
            "--print-kernel-base",
            "function",
            "--print-nvtx-rename",
            "kernel",
            sys.executable,
            str(out / "workload.py"),
        ]
        res = subprocess.run(argv, capture_output=True, text=True, timeout=300)
        names = [
            line.split('","')[4] if line.count('","') > 4 else line
            for line in res.stdout.splitlines()
            if line.startswith('"') and "Kernel Name" not in line and '"ID"' not in line
        ]
        print(f"== {name} (rc {res.returncode}): {len(names)} kernel row(s)")
        for n in names:
            print("   ", n[:120])
        if res.returncode:
            print("   stderr:", res.stderr.strip()[-400:])
    return 0


if __name__ == "__main__":
    raise SystemExit(main(Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/ncu_probe")))
