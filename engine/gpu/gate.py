"""The idle gate: pick an idle GPU before every timed step, or wait, or stop the run.

Interface used by the loop (keep it stable):

    gate = Gate(cfg.gpu, backend, sleep=loop_sleep, own_pids=lambda: runner.live_pids())
    decision = gate.acquire()      # GateDecision; raises NoIdleGpu after wait_max_s
    decision.env                   # {"CUDA_VISIBLE_DEVICES": "3"} for the child processes
    gate.evidence()                # the chosen GPU's state now, JSON-able (before/after)
    gate.close()

`sleep` is the loop's: it polls the engine's commands and may raise to abort a wait.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from engine.config import GpuConfig
from engine.errors import KoptFailure
from engine.gpu.base import Backend, GpuState, is_na


class NoIdleGpu(KoptFailure):
    """No GPU became idle within gpu.wait_max_s: a stop condition for the whole run."""


@dataclass
class Assessment:
    gpu: GpuState
    idle: bool
    reasons: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"gpu": self.gpu.to_dict(), "idle": self.idle, "reasons": list(self.reasons)}


@dataclass
class GateDecision:
    gpu: GpuState | None
    """None when the machine has no GPU (CPU-only targets run)."""
    env: dict[str, str]
    waited_s: float
    assessments: list[Assessment]

    def to_dict(self) -> dict[str, Any]:
        return {
            "gpu": self.gpu.to_dict() if self.gpu else None,
            "env": dict(self.env),
            "waited_s": self.waited_s,
            "assessments": [a.to_dict() for a in self.assessments],
        }


def visible_devices_env(gpu: GpuState) -> dict[str, str]:
    key = "HIP_VISIBLE_DEVICES" if gpu.vendor == "amd" else "CUDA_VISIBLE_DEVICES"
    return {key: str(gpu.index)}


class Gate:
    def __init__(
        self,
        cfg: GpuConfig,
        backend: Backend,
        *,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        own_pids: Callable[[], set[int]] = set,
        log: Callable[[str], None] = lambda msg: None,
    ) -> None:
        self.cfg = cfg
        self.backend = backend
        self.sleep = sleep
        self.clock = clock
        self.own_pids = own_pids
        self.log = log
        self.chosen_uuid: Any = None

    def assess(self) -> list[Assessment]:
        gpus = [g for g in self.backend.read() if not self.cfg.devices or g.index in self.cfg.devices]
        own = self.own_pids()
        out = []
        for g in gpus:
            reasons = []
            procs = [] if is_na(g.processes) else [p for p in g.processes if p.pid not in own]
            if procs:
                reasons.append(f"{len(procs)} foreign process(es): " + ", ".join(f"{p.pid} {p.name}" for p in procs))
            if not is_na(g.util_pct) and g.util_pct > self.cfg.util_max_pct:
                reasons.append(f"utilization {g.util_pct:.0f}% > {self.cfg.util_max_pct:.0f}%")
            if not is_na(g.mem_used_mib) and g.mem_used_mib > self.cfg.mem_used_max_mib:
                reasons.append(f"memory used {g.mem_used_mib:.0f} MiB > {self.cfg.mem_used_max_mib:.0f} MiB")
            out.append(Assessment(g, not reasons, reasons))
        return out

    def acquire(self) -> GateDecision:
        start = self.clock()
        while True:
            found = self.assess()
            if not found:
                return GateDecision(None, {}, self.clock() - start, [])
            idle = [a for a in found if a.idle]
            if idle:
                sticky = [a for a in idle if a.gpu.uuid == self.chosen_uuid]
                pick = sticky[0] if sticky else min(idle, key=_busyness)
                self.chosen_uuid = pick.gpu.uuid
                return GateDecision(pick.gpu, visible_devices_env(pick.gpu), self.clock() - start, found)
            waited = self.clock() - start
            if waited >= self.cfg.wait_max_s:
                raise NoIdleGpu(f"no idle GPU for {waited / 60:.0f} min: " + "; ".join(
                    f"GPU {a.gpu.index}: {', '.join(a.reasons)}" for a in found))
            self.log("no idle GPU: " + "; ".join(f"GPU {a.gpu.index}: {', '.join(a.reasons)}" for a in found))
            self.sleep(min(self.cfg.wait_s, max(0.0, self.cfg.wait_max_s - waited)))

    def evidence(self) -> dict[str, Any] | None:
        for g in self.backend.read():
            if g.uuid == self.chosen_uuid:
                return g.to_dict()
        return None

    def close(self) -> None:
        self.backend.close()


def _busyness(a: Assessment) -> tuple[float, float]:
    g = a.gpu
    return (0.0 if is_na(g.util_pct) else g.util_pct, 0.0 if is_na(g.mem_used_mib) else g.mem_used_mib)
