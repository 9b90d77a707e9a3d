"""Run tests/device/ncu_workload.py under kopt's ncu command and keep the CSVs (see capture_ncu.sh).

Usage (from the repo root, on a machine with an NVIDIA GPU and ncu): python3 tests/device/capture_ncu.py OUT_DIR
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from kopt_supervisor.engine.profile.ncu import NcuProfiler, parse_ncu_csv  # noqa: E402
from kopt_supervisor.engine.profile.profiler import PROFILE_ENV  # noqa: E402

CALLS = 7
REGEX = "kopt_capture"


def _tool_line(argv: list[str]) -> str:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=60).stdout.strip()
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"({shlex.join(argv)} failed: {exc})"


def main(out: Path) -> int:
    import os

    out.mkdir(parents=True, exist_ok=True)
    workload = [sys.executable, str(REPO / "tests/device/ncu_workload.py"), "--calls", str(CALLS)]
    gpu = _tool_line(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"])
    ncu_version = _tool_line(["ncu", "--version"]).splitlines()[-1:] or ["?"]
    date = datetime.now(UTC).isoformat(timespec="seconds")
    notes = [
        f"date: {date}",
        f"gpu: {gpu}",
        f"ncu: {ncu_version[0]}",
        f"python: {sys.version.split()[0]}",
    ]
    with tempfile.TemporaryDirectory() as tmp:
        for page in ("raw", "details"):
            argv = NcuProfiler().command(workload, Path(tmp) / page, REGEX)
            if page == "details":
                argv[argv.index("--page") + 1] = "details"
            print("+", shlex.join(argv), flush=True)
            done = subprocess.run(argv, cwd=REPO, env={**os.environ, **PROFILE_ENV}, timeout=600)
            if done.returncode != 0:
                print(f"capture: ncu exited {done.returncode} for the {page} page", file=sys.stderr)
                return 1
            target = out / f"ncu_h100_{page}.csv"
            shutil.copyfile(Path(tmp) / page / "ncu.csv", target)
            summary = parse_ncu_csv(target, REGEX)
            print(summary.table(), flush=True)
            expect = {
                "origin": f"captured on {gpu} with ncu {ncu_version[0]} on {date} by tests/device/capture_ncu.sh "
                f"({page} page); expectations are what tests/device/ncu_workload.py launches",
                "kernel_regex": REGEX,
                "calls": CALLS,
                "anchor": "kopt_capture_add_kernel",
                "launches": 3 * CALLS,
                "kernels": {
                    "kopt_capture_add_kernel": {"calls": CALLS},
                    "kopt_capture_scale_kernel": {"calls": 2 * CALLS},
                },
            }
            target.with_suffix(".expect.json").write_text(json.dumps(expect, indent=2) + "\n")
            notes.append(f"{page} page command (cwd = repo root, env KOPT_PROFILE=1; --log-file was a temp dir):")
            notes.append("  " + shlex.join(argv))
    (out / "ncu_h100_command.txt").write_text("\n".join(notes) + "\n")
    print(f"capture: wrote {sorted(p.name for p in out.iterdir())} to {out}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.exit(main(Path(sys.argv[1])))
