"""A check before part1's demos: does ncu, as kopt runs it (its own command line, confined the
way the loop confines a profiled bench: engine.sandbox.for_bench through engine.runner), profile
a small torch workload on this machine? If bubblewrap works but ncu does not inside it, the
demos would send every keep to review as `profiler_failed`; part1 then says so and (with
WAVE2_SANDBOX=auto) runs them unconfined instead, noting it."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

WORKLOAD = """\
import torch
x = torch.randn(1 << 20, device="cuda")
torch.cuda.nvtx.range_push("kopt:n=1")
(x * 2).sum()
torch.cuda.nvtx.range_pop()
torch.cuda.synchronize()
"""


def ncu_under_sandbox(
    work: Path, *, workload: str = WORKLOAD, files: dict[str, str] | None = None, timeout_s: float = 150.0
) -> dict[str, Any]:
    """Profile `workload` (a Python script) with kopt's ncu command inside the confinement of a
    profiled bench; `files` go into its tree beside it. `ok`: ncu's report was read back with
    launches in it (None: bubblewrap does not work here, nothing to check)."""
    from kopt_supervisor.engine import sandbox
    from kopt_supervisor.engine.profile.ncu import NcuProfiler
    from kopt_supervisor.engine.profile.profiler import PROFILE_ENV
    from kopt_supervisor.engine.runner.command import run as run_command

    support = sandbox.probe()
    if not support.works:
        return {"ok": None, "why": f"bubblewrap does not work here: {support.summary()}"}
    ws = work / "ncu-probe" / "ws"
    tree, out, logs = ws / "tree", ws / "out", work / "ncu-probe" / "logs"
    tree.mkdir(parents=True, exist_ok=True)
    (tree / "probe.py").write_text(workload)
    for name, text in (files or {}).items():
        (tree / name).write_text(text)
    prof = NcuProfiler()
    argv = prof.command([sys.executable, "probe.py"], out, "")
    confine = sandbox.for_bench(
        workspace=ws, cache=ws / "cache", writable_trees=[tree], outputs=[out], bwrap=support.bwrap or sandbox.BWRAP
    )
    t0 = time.monotonic()
    res = run_command(
        argv,
        cwd=tree,
        log_dir=logs,
        name="ncu_in_sandbox",
        timeout_s=timeout_s,
        env={**os.environ, **PROFILE_ENV},
        confine=confine,
    )
    seconds = round(time.monotonic() - t0, 2)
    tail = _tail(logs)
    if not res.ok:
        return {"ok": False, "seconds": seconds, "why": res.why(), "tail": tail, "command": " ".join(argv)}
    for after in prof.after_commands(out):
        done = run_command(after, cwd=tree, log_dir=logs, name="ncu_read", timeout_s=timeout_s)
        if not done.ok:
            return {"ok": False, "seconds": seconds, "why": f"reading the report: {done.why()}", "tail": _tail(logs)}
    summary = prof.parse(out, "")
    return {
        "ok": summary.launches > 0,
        "seconds": seconds,
        "launches": summary.launches,
        "kopt_ranges": list(summary.kopt_ranges),
        "kernels": [k.name for k in summary.kernels],
        "command": " ".join(argv),
    }


def _tail(logs: Path) -> str:
    lines: list[str] = []
    for p in sorted(logs.glob("*")):
        if p.is_file():
            lines += [f"{p.name}: {ln}" for ln in p.read_text(errors="replace").splitlines()[-6:]]
    return "\n".join(lines[-20:])
