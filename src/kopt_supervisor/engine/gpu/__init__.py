"""GPU backends and the idle gate (docs/design.md §1, §6, §10). See docs/gpu-gate.md."""

from kopt_supervisor.engine.gpu.base import NA, Backend, GpuProcess, GpuState, is_na

__all__ = ["NA", "Backend", "GpuProcess", "GpuState", "is_na"]
