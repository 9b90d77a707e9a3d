"""Can code inside the profiled process hide a kernel from kopt's keep profile by switching the
profiler off around it (cudaProfilerStop / cuProfilerStop, then Start again)? A hostile
candidate runs in the process ncu profiles: if ncu honours those calls while profiling from the
start, the candidate could run its real work unseen and leave one cheap kernel in its range.

Run on a GPU host with ncu (the device machine):

    python3 experiments/ncu_profiler_api_probe.py

The workload launches, inside one `kopt:` range: a reduction (always visible), then with the
runtime's cudaProfilerStop a cumulative sum, Start, then with the driver's cuProfilerStop a sort,
Start, and a last reduction. It runs under exactly the argv kopt gives a keep's profile
(`NcuProfiler().for_keep("time")`), the report is read back as kopt reads it, and each launch's
kernel name and range are printed, with whether the hidden kernels (scan, sort) were profiled.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

from kopt_supervisor.engine.profile.ncu import NCU_IMPORT, NcuProfiler, ncu_launches

WORKLOAD = """
import ctypes, torch
x = torch.randn(1 << 22, device="cuda")
torch.cuda.synchronize()
cudart = torch.cuda.cudart()
libcuda = ctypes.CDLL("libcuda.so.1")
torch.cuda.nvtx.range_push("kopt:probe=1")
x.sum()
torch.cuda.synchronize()
cudart.cudaProfilerStop()
torch.cumsum(x, 0)          # hidden if the runtime's stop is honoured
torch.cuda.synchronize()
cudart.cudaProfilerStart()
libcuda.cuProfilerStop()
torch.sort(x)               # hidden if the driver's stop is honoured
torch.cuda.synchronize()
libcuda.cuProfilerStart()
x.amax()
torch.cuda.synchronize()
torch.cuda.nvtx.range_pop()
print("workload done", flush=True)
"""


def main() -> int:
    out = Path(tempfile.mkdtemp(prefix="ncu_api_probe_"))
    work = out / "workload.py"
    work.write_text(WORKLOAD)
    prof = NcuProfiler().for_keep("time")
    step = prof.next_pass([sys.executable, str(work)], out / "pass", "", [])
    assert step is not None
    res = subprocess.run(list(step.argv), capture_output=True, text=True, timeout=300)
    print(f"ncu exit {res.returncode}; stdout tail: {res.stdout[-300:]!r}; stderr tail: {res.stderr[-300:]!r}")
    for argv in prof.after_commands(step.out_dir):
        subprocess.run(argv, check=False, timeout=300)
    csv = step.out_dir / NCU_IMPORT
    launches = ncu_launches(csv.read_text()) if csv.is_file() else []
    names = [(launch.kernel, launch.duration_ns) for launch in launches]
    for name, ns in names:
        print(f"launch {name} {ns:.0f} ns")
    text = " ".join(n.lower() for n, _ in names)
    print(f"scan (after cudaProfilerStop) profiled: {'scan' in text}")
    print(f"sort (after cuProfilerStop) profiled: {'sort' in text}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
