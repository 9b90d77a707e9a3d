"""NVIDIA GPUs through NVML (the `pynvml` module of nvidia-ml-py).

Lazy: `pynvml` is imported and `nvmlInit()` called on the first `read()`. A library that
cannot load (no driver, no GPU) makes `read()` return [] with the reason in `status`. Every
field is read on its own; a failure (NVMLError_NotSupported, a function missing from an old
driver, a lost GPU) leaves that field NA and its reason in `extra["na"]`.

Choices that matter for the gate:
- memory used comes from `nvmlDeviceGetMemoryInfo(version=nvmlMemory_v2)`, which excludes
  the driver's reserved memory, as `nvidia-smi`'s memory.used does; v1 (used = total - free,
  reserved included) is the fallback on drivers without v2;
- processes are the compute processes (`nvmlDeviceGetComputeRunningProcesses`, falling back
  to `_v2` when the bindings and the driver disagree on the struct version);
- throttle reasons come from `nvmlDeviceGetCurrentClocksEventReasons` (new name) or
  `...ClocksThrottleReasons` (old name); the cumulative power/thermal violation times
  (`nvmlDeviceGetViolationStatus`, ns) are the throttle counters.
"""

from __future__ import annotations

from typing import Any

from kopt_supervisor.engine.gpu.base import (
    NA,
    GpuProcess,
    GpuState,
    LibraryBackend,
    number,
    nvidia_throttle_names,
    read_field,
    text,
    why,
)

_MIB = 1024 * 1024


class NvmlBackend(LibraryBackend):
    name = "nvml"
    vendor = "nvidia"
    module_name = "pynvml"
    missing = "nvidia-ml-py is not installed (pip install 'kopt[nvidia]')"

    init_call = "nvmlInit"

    def _init(self, lib: Any) -> None:
        lib.nvmlInit()

    def _shutdown(self, lib: Any) -> None:
        lib.nvmlShutdown()

    def _ready_status(self, lib: Any) -> str:
        na: dict[str, str] = {}
        driver = read_field(na, "driver", lib.nvmlSystemGetDriverVersion, convert=text)
        return f"NVML (driver {driver})" if driver is not NA else "NVML"

    def read(self) -> list[GpuState]:
        if not self._start():
            return []
        nvml = self.lib
        try:
            count = int(nvml.nvmlDeviceGetCount())
        except Exception as exc:
            self.status = f"nvmlDeviceGetCount failed: {why(exc)}"
            return []
        gpus = []
        for i in range(count):
            try:
                handle = nvml.nvmlDeviceGetHandleByIndex(i)
            except Exception:  # lost or vanished between the count and the handle
                continue
            try:
                gpus.append(self._read_one(i, handle))
            except Exception as exc:  # an unforeseen binding shape: this GPU is all NA
                gpus.append(GpuState(i, vendor="nvidia", backend=self.name, extra={"na": {"*": why(exc)}}))
        return gpus

    def _read_one(self, index: int, h: Any) -> GpuState:
        nvml = self.lib
        na: dict[str, str] = {}
        extra: dict[str, Any] = {"na": na}
        util = read_field(na, "util_pct", nvml.nvmlDeviceGetUtilizationRates, h, convert=lambda u: number(u.gpu))
        mem = read_field(na, "mem_used_mib", self._memory, h)
        if mem is NA:
            used = total = NA
            na.setdefault("mem_total_mib", na["mem_used_mib"])
        else:
            used, total, reserved = mem
            if reserved is not NA:
                extra["mem_reserved_mib"] = reserved
        return GpuState(
            index=index,
            name=read_field(na, "name", nvml.nvmlDeviceGetName, h, convert=text),
            uuid=read_field(na, "uuid", nvml.nvmlDeviceGetUUID, h, convert=text),
            util_pct=util,
            mem_used_mib=used,
            mem_total_mib=total,
            processes=read_field(na, "processes", self._processes, h),
            sm_clock_mhz=read_field(
                na, "sm_clock_mhz", nvml.nvmlDeviceGetClockInfo, h, nvml.NVML_CLOCK_SM, convert=number
            ),
            mem_clock_mhz=read_field(
                na, "mem_clock_mhz", nvml.nvmlDeviceGetClockInfo, h, nvml.NVML_CLOCK_MEM, convert=number
            ),
            temp_c=read_field(na, "temp_c", self._temperature, h),
            power_w=read_field(na, "power_w", nvml.nvmlDeviceGetPowerUsage, h, convert=lambda mw: number(mw, 1e-3)),
            throttle=read_field(na, "throttle", self._throttle, h),
            throttle_counters=read_field(na, "throttle_counters", self._violations, h),
            vendor="nvidia",
            backend=self.name,
            extra=extra,
        )

    def _memory(self, h: Any) -> tuple[float, float, Any]:
        nvml = self.lib
        version = getattr(nvml, "nvmlMemory_v2", None)
        if version is not None:
            try:
                m = nvml.nvmlDeviceGetMemoryInfo(h, version=version)
                return m.used / _MIB, m.total / _MIB, m.reserved / _MIB
            except Exception:  # driver without _v2 (or bindings without `version`): use v1
                pass
        m = nvml.nvmlDeviceGetMemoryInfo(h)
        return m.used / _MIB, m.total / _MIB, NA

    def _processes(self, h: Any) -> tuple[GpuProcess, ...]:
        nvml = self.lib
        try:
            procs = nvml.nvmlDeviceGetComputeRunningProcesses(h)
        except Exception as exc:
            fallback = getattr(nvml, "nvmlDeviceGetComputeRunningProcesses_v2", None)
            mismatch = type(exc).__name__ in ("NVMLLibraryMismatchError", "NVMLError_FunctionNotFound")
            if fallback is None or not mismatch:
                raise
            procs = fallback(h)
        out = []
        for p in procs:
            used = getattr(p, "usedGpuMemory", None)
            out.append(GpuProcess(pid=int(p.pid), mem_mib=NA if used is None else used / _MIB))
        return tuple(out)

    def _temperature(self, h: Any) -> Any:
        nvml = self.lib
        newer = getattr(nvml, "nvmlDeviceGetTemperatureV", None)
        if newer is not None:
            try:
                return number(newer(h, nvml.NVML_TEMPERATURE_GPU))
            except Exception:  # driver older than the V call: use the deprecated one
                pass
        return number(nvml.nvmlDeviceGetTemperature(h, nvml.NVML_TEMPERATURE_GPU))

    def _throttle(self, h: Any) -> tuple[str, ...]:
        nvml = self.lib
        fn = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
        if fn is not None:
            try:
                return nvidia_throttle_names(int(fn(h)))
            except Exception:  # an older driver knows only the "throttle" name
                pass
        return nvidia_throttle_names(int(nvml.nvmlDeviceGetCurrentClocksThrottleReasons(h)))

    def _violations(self, h: Any) -> Any:
        nvml = self.lib
        counters = {}
        for key, policy in (("power_ns", "NVML_PERF_POLICY_POWER"), ("thermal_ns", "NVML_PERF_POLICY_THERMAL")):
            try:
                v = nvml.nvmlDeviceGetViolationStatus(h, getattr(nvml, policy))
                counters[key] = float(v.violationTime)
            except Exception:  # not supported on this GPU/driver: leave the counter out
                continue
        if not counters:
            raise RuntimeError("violation counters not supported")
        return counters
