"""How many bytes does L2 (and DRAM) move inside each config's range of a keep's profile, against
the bytes a call must move (its inputs read once, its outputs written once)?

The keep profile's GPU time can be hidden from ncu by the profiled process itself (cudaProfilerStop
around the real work: experiments/ncu_profiler_api_probe.py). A check the process cannot bend is
physical: whatever computes a config's outputs inside its range must move its bytes through L2, so
the range's `lts__t_bytes.sum` is at least the call's input plus output bytes. This probe measures,
on the RMSNorm demo's tree, that ratio per config and what the extra counters cost the keep's pass.

Run on a GPU host with ncu (the device machine), from the repository root:

    python3 experiments/range_bytes_probe.py
"""

from __future__ import annotations

import collections
import csv
import io
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

KERNEL = Path(__file__).resolve().parent.parent / "src" / "kopt_supervisor" / "kernels" / "rmsnorm"
METRICS = ("gpu__time_duration.sum", "lts__t_bytes.sum", "dram__bytes.sum")


def profile(metrics: tuple[str, ...], out: Path) -> tuple[float, str]:
    """One --profile run of the bundled RMSNorm tree under ncu with `metrics`: (seconds, the raw
    page with launches renamed after their NVTX range)."""
    rep = out / "rep"
    argv = [
        "ncu", "--target-processes", "all", "--clock-control", "none", "--cache-control", "none",
        "--replay-mode", "kernel", "--metrics", ",".join(metrics), "--nvtx", "--export", str(rep),
        "--force-overwrite", sys.executable, "bench.py", "--profile", "--dtypes", "bfloat16",
    ]  # fmt: skip
    t0 = time.monotonic()
    res = subprocess.run(argv, cwd=KERNEL, capture_output=True, text=True, timeout=600)
    seconds = time.monotonic() - t0
    if res.returncode != 0:
        print(res.stdout[-2000:], res.stderr[-2000:])
        raise SystemExit(f"ncu exit {res.returncode}")
    page = subprocess.run(
        ["ncu", "--import", f"{rep}.ncu-rep", "--csv", "--page", "raw", "--print-units", "base",
         "--print-nvtx-rename", "kernel"],
        capture_output=True, text=True, timeout=600, check=True,
    ).stdout  # fmt: skip
    return seconds, page


def main() -> int:
    out = Path(tempfile.mkdtemp(prefix="range_bytes_"))
    os.environ.setdefault("KOPT_PROFILE_SEED", "7")
    t_time, _ = profile(METRICS[:1], out)
    t_all, page = profile(METRICS, out)
    print(f"keep pass, GPU time alone: {t_time:.1f} s; with L2 and DRAM bytes: {t_all:.1f} s")
    rows = list(csv.reader(io.StringIO(page[page.index('"ID"') :])))
    header, body = rows[0], rows[2:]
    col = {name: header.index(name) for name in ("Kernel Name", *METRICS)}
    per: dict[str, list[float]] = collections.defaultdict(lambda: [0.0, 0.0, 0.0, 0.0])
    for r in body:
        name = r[col["Kernel Name"]]
        if not name.startswith("kopt:"):
            continue
        acc = per[name]
        acc[0] += 1
        for i, m in enumerate(METRICS, start=1):
            acc[i] += float(r[col[m]].replace(",", "") or 0)
    for name, (n, ns, l2, dram) in sorted(per.items()):
        cols = dict(kv.split("=", 1) for kv in name[len("kopt:") :].split(","))
        b, nn, h, hd, esize = (int(cols[k]) for k in ("B", "N", "H", "hd", "esize"))
        need = 2 * b * nn * h * hd * esize + hd * esize
        print(
            f"{cols['shape']:<24} launches {n:>3}  time/launch {ns / n / 1e3:9.2f} us  "
            f"L2/need {l2 / n / need:6.3f}  DRAM/need {dram / n / need:6.3f}  need {need / 1e6:9.3f} MB"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
