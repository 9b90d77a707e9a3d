"""Helpers for the GPU room's tests: scripted fake GPUs, a fake clock, fast configs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kopt_supervisor.engine.config import GpuConfig


class FakeTime:
    """A clock that only moves when the gate sleeps through the loop's sleep."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def sleep(self, s: float) -> None:
        assert s >= 0
        self.sleeps.append(s)
        self.now += s

    def clock(self) -> float:
        return self.now


def gpu(index: int, util: float = 0, mem: float = 0, procs: Any = (), **kw: Any) -> dict[str, Any]:
    """One GPU entry of a KOPT_FAKE_GPUS snapshot."""
    entry: dict[str, Any] = {
        "index": index,
        "name": "NVIDIA H100 80GB HBM3",
        "uuid": f"GPU-fake-{index}",
        "util_pct": util,
        "mem_used_mib": mem,
        "mem_total_mib": 81559,
    }
    entry["processes"] = (
        None
        if procs is None
        else [p if isinstance(p, dict) else {"pid": p[0], "name": p[1], "mem_mib": p[2]} for p in procs]
    )
    entry.update(kw)
    return entry


def write_script(path: Path, snapshots: list[list[dict[str, Any]]]) -> Path:
    path.write_text(json.dumps(snapshots))
    return path


def cfg(**kw: Any) -> GpuConfig:
    """A GpuConfig with fast defaults: 3 samples 1 s apart, 10 min waits, 1 h limit."""
    base: dict[str, Any] = {"samples": 3, "sample_interval_s": 1.0, "wait_s": 600.0, "wait_max_s": 3600.0}
    base.update(kw)
    return GpuConfig(**base)
