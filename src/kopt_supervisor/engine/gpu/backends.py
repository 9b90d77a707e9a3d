"""Choosing a backend: the scripted fake (KOPT_FAKE_GPUS), NVML, amdsmi, the CLIs, or none.

`open_backend(vendor)` returns a lazily initialised backend; nothing is loaded until the
first `read()`. For "auto" (and "nvidia", "amd") the first read tries the candidates in
order and keeps the first that finds a GPU:

    auto:   NVML → amdsmi → nvidia-smi → amd-smi → rocm-smi
    nvidia: NVML → nvidia-smi
    amd:    amdsmi → amd-smi → rocm-smi

With no GPU at all the result reads `[]`, and its `status` says what each candidate
answered. A single backend can also be named ("nvml", "nvidia-smi", "amdsmi", "amd-smi",
"rocm-smi"), e.g. to compare NVML with the nvidia-smi fallback.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

from kopt_supervisor.engine.errors import BadInput
from kopt_supervisor.engine.gpu.amd import AmdSmiBackend
from kopt_supervisor.engine.gpu.base import Backend, GpuState
from kopt_supervisor.engine.gpu.fake import FakeBackend
from kopt_supervisor.engine.gpu.nvml import NvmlBackend
from kopt_supervisor.engine.gpu.smi import AmdSmiCliBackend, NvidiaSmiBackend, RocmSmiBackend

__all__ = ["AutoBackend", "FakeBackend", "NoGpu", "open_backend", "BACKENDS", "CHAINS"]

BACKENDS: dict[str, Callable[[], Backend]] = {
    "nvml": NvmlBackend,
    "amdsmi": AmdSmiBackend,
    "nvidia-smi": NvidiaSmiBackend,
    "amd-smi": AmdSmiCliBackend,
    "rocm-smi": RocmSmiBackend,
}
CHAINS: dict[str, tuple[str, ...]] = {
    "auto": ("nvml", "amdsmi", "nvidia-smi", "amd-smi", "rocm-smi"),
    "nvidia": ("nvml", "nvidia-smi"),
    "amd": ("amdsmi", "amd-smi", "rocm-smi"),
}


class NoGpu:
    name = "none"
    vendor = "none"

    def __init__(self, reason: str = "no GPU") -> None:
        self.status = reason

    def read(self) -> list[GpuState]:
        return []

    def close(self) -> None:
        pass


class AutoBackend:
    """Tries candidate backends on the first read; keeps the first that finds a GPU."""

    def __init__(self, vendor: str, candidates: Sequence[tuple[str, Callable[[], Backend]]]) -> None:
        self.requested = vendor
        self.candidates = list(candidates)
        self.chosen: Any = None
        self.tried: list[dict[str, Any]] = []
        self._probed = False

    @property
    def name(self) -> str:
        return self.chosen.name if self.chosen else "none"

    @property
    def vendor(self) -> str:
        return self.chosen.vendor if self.chosen else "none"

    @property
    def status(self) -> str:
        if self.chosen is not None:
            return self.chosen.status
        if not self._probed:
            return "not started"
        return "no GPU found: " + "; ".join(f"{t['backend']}: {t['status']}" for t in self.tried)

    def read(self) -> list[GpuState]:
        if self._probed:
            return self.chosen.read() if self.chosen else []
        self._probed = True
        for name, make in self.candidates:
            backend = make()
            gpus = backend.read()
            self.tried.append({"backend": name, "status": getattr(backend, "status", ""), "gpus": len(gpus)})
            if gpus:
                self.chosen = backend
                return gpus
            backend.close()
        return []

    def close(self) -> None:
        if self.chosen is not None:
            self.chosen.close()


def open_backend(vendor: str = "auto") -> Backend:
    fake = os.environ.get("KOPT_FAKE_GPUS")
    if fake:
        return FakeBackend(fake)
    if vendor == "none":
        return NoGpu('[gpu].vendor = "none": CPU-only target')
    if vendor in CHAINS:
        return AutoBackend(vendor, [(n, BACKENDS[n]) for n in CHAINS[vendor]])
    if vendor in BACKENDS:
        return BACKENDS[vendor]()
    known = ", ".join([*CHAINS, "none", *BACKENDS])
    raise BadInput(f"GPU vendor/backend {vendor!r} is not one of: {known}")
