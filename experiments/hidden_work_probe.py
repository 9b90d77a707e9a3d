"""Work hidden from a keep's profile, caught by the bytes floor (engine/profile/floors.py).

A hostile copy of the RMSNorm demo's tree switches ncu off around its real kernel
(cuProfilerStop, then Start) and leaves one cheap kernel in each call's range: its outputs are
right, its profiled time a fraction of the honest tree's. Both trees are profiled as kopt
profiles a keep (`NcuProfiler().for_keep("time")`, the harness's --profile at one seed) and each
summary goes through kopt's own bytes floor with the RMSNorm [roofline].bytes.

Run on a GPU host with ncu (the device machine), from the repository root:

    python3 experiments/hidden_work_probe.py
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from kopt_supervisor.engine.profile.classes import ConfigRef
from kopt_supervisor.engine.profile.floors import bytes_short
from kopt_supervisor.engine.profile.ncu import NcuProfiler
from kopt_supervisor.engine.profile.summary import KOPT_PREFIX, ProfileSummary

KERNEL = Path(__file__).resolve().parent.parent / "src" / "kopt_supervisor" / "kernels" / "rmsnorm"
HIDE = """

import ctypes as _ctypes

_honest = rms_norm
_driver = _ctypes.CDLL("libcuda.so.1")


def rms_norm(x, weight, eps=1e-6, out=None):  # the real kernel with ncu switched off, one cheap kernel seen
    _driver.cuProfilerStop()
    y = _honest(x, weight, eps, out)
    torch.cuda.synchronize()
    _driver.cuProfilerStart()
    y.view(-1)[:1].add_(0)
    return y
"""


def profile(tree: Path, out: Path) -> ProfileSummary:
    prof = NcuProfiler().for_keep("time")
    step = prof.next_pass([sys.executable, "bench.py", "--profile", "--dtypes", "bfloat16"], out, "", [])
    assert step is not None
    res = subprocess.run(list(step.argv), cwd=tree, capture_output=True, text=True, timeout=300)
    if res.returncode != 0:
        raise SystemExit(f"{tree.name}: ncu exit {res.returncode}: {res.stderr[-500:]}")
    for argv in prof.after_commands(step.out_dir):
        subprocess.run(argv, check=True, timeout=300)
    return prof.parse_passes([step], "")


def refs_of(summary: ProfileSummary) -> tuple[list[ConfigRef], dict[str, float]]:
    """The configs named by the profile's kopt ranges, and the bytes a call moves ([roofline].bytes
    of the RMSNorm demo: x read, y written, the weight read)."""
    refs: list[ConfigRef] = []
    need: dict[str, float] = {}
    for name in sorted({g.range for g in summary.ranged if g.range.startswith(KOPT_PREFIX)}):
        key = name[len(KOPT_PREFIX) :]
        row: dict[str, object] = {}
        for pair in key.split(","):
            col, value = pair.split("=", 1)
            row[col] = int(value) if value.isdigit() else value
        refs.append(ConfigRef(key, f"dclass={row['dclass']}", row))
        b, n, h, hd, esize = (int(str(row[c])) for c in ("B", "N", "H", "hd", "esize"))
        need[key] = 2 * b * n * h * hd * esize + hd * esize
    return refs, need


def main() -> int:
    work = Path(tempfile.mkdtemp(prefix="hidden_work_"))
    os.environ["KOPT_PROFILE_SEED"] = "7"
    trees = {}
    for name in ("honest", "hidden"):
        tree = work / name
        shutil.copytree(KERNEL, tree, ignore=shutil.ignore_patterns("__pycache__"))
        trees[name] = tree
    with open(trees["hidden"] / "solution" / "rmsnorm.py", "a") as f:
        f.write(HIDE)
    summaries = {name: profile(tree, work / f"{name}_profile") for name, tree in trees.items()}
    for name, summary in summaries.items():
        refs, need = refs_of(summary)
        ranged_ns = sum(g.total_ns for g in summary.ranged if g.range.startswith(KOPT_PREFIX))
        short = bytes_short(summaries["honest"], summary, refs, need)  # calls counted from the honest (best's) profile
        print(f"{name}: {len(refs)} configs, GPU time in the ranges {ranged_ns / 1e3:.1f} us")
        print(f"{name}: bytes floor {'not measured' if short is None else f'{len(short)} config(s) short'}")
        for x in short or []:
            print(f"  {x.line()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
