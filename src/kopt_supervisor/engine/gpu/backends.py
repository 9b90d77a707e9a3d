"""Choosing a backend: the scripted fake (KOPT_FAKE_GPUS), NVML, amdsmi, the CLIs, or none; the
fake itself, and the backends through the vendor Python bindings (below). The CLIs' backends are
engine/gpu/smi.py's; `AutoBackend`, which tries the candidates in turn, is the package's.

`open_backend(vendor)` returns a lazily initialised backend; nothing is loaded until the
first `read()`. For "auto" (and "nvidia", "amd") the first read tries the candidates in
order and keeps the first that finds a GPU:

    auto:   NVML → amdsmi → nvidia-smi → amd-smi → rocm-smi
    nvidia: NVML → nvidia-smi
    amd:    amdsmi → amd-smi → rocm-smi

With no GPU at all the result reads `[]`, and its `status` says what each candidate
answered. A single backend can also be named ("nvml", "nvidia-smi", "amdsmi", "amd-smi",
"rocm-smi"), e.g. to compare NVML with the nvidia-smi fallback.

The scripted fake backend (docs/design.md §10), for tests and demos:
`KOPT_FAKE_GPUS=path.json` holds a JSON list of snapshots, each a list of GPUs
`{index, name, uuid, util_pct, mem_used_mib, mem_total_mib, processes: [{pid, name, mem_mib}]}`.
Each `read()` takes the next snapshot; the last one repeats. A GPU missing from a snapshot
has vanished. Optional per GPU: `vendor` ("nvidia" or "amd"), `sm_clock_mhz`,
`mem_clock_mhz`, `temp_c`, `power_w`, `throttle` (list of reasons), `throttle_counters`
({name: cumulative value}); per process `user`. A field given as null reads as NA
(`"processes": null`: the backend cannot list processes).

The backends through the vendor Python bindings: NVIDIA GPUs through NVML, AMD GPUs through amdsmi.

NVML (the `pynvml` module of nvidia-ml-py). Lazy: `pynvml` is imported and `nvmlInit()` called
on the first `read()`. A library that cannot load (no driver, no GPU) makes `read()` return [] with the reason in `status`. Every
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

amdsmi (the `amdsmi` Python bindings, ROCm 6.x and 7.x). Lazy like the NVML backend: imported
and initialised on the first `read()`; a library that cannot load gives [] and the reason in `status`. What differs between ROCm versions, and how
this backend copes:
- the library marks what it cannot read with the string "N/A" (and sometimes 0xFFFF):
  those become NA;
- `amdsmi_get_gpu_vram_usage` reports MB (MiB in fact); process memory is in bytes;
- `amdsmi_get_gpu_process_list` returns dicts since ROCm 6.1 (`memory_usage.vram_mem`),
  but process handles before it, which `amdsmi_get_gpu_process_info` turns into dicts;
- power is `socket_power` (ROCm 6.4+), `current_socket_power` (MI300) or
  `average_socket_power` (older); clocks are `clk` (new) or `cur_clk` (old);
- GPU activity falls back to `amdsmi_get_gpu_metrics_info()["average_gfx_activity"]`;
- throttling comes from `amdsmi_get_violation_status` (MI300 and later): `active_*` flags
  are the throttle reasons, `acc_*` counters the cumulative throttle counters.
"""

from __future__ import annotations

import hashlib
import json
import os
from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kopt_supervisor.engine import BadInput
from kopt_supervisor.engine.gpu import (
    NA,
    AutoBackend,
    Backend,
    GpuProcess,
    GpuState,
    number,
    nvidia_throttle_names,
    read_field,
    text,
    why,
)
from kopt_supervisor.engine.gpu.smi import AmdSmiCliBackend, NvidiaSmiBackend, RocmSmiBackend

# ---------------------------------------------------------------------------------------
# The vendor Python bindings

_MIB = 1024 * 1024


class LibraryBackend(ABC):
    """A backend over a Python binding (pynvml, amdsmi), loaded and initialised on the first
    `read()`; a binding that cannot be imported or initialised leaves the backend empty with
    the reason in `status`, and `close()` shuts an initialised library down, never raising."""

    name = ""
    vendor = ""
    module_name = ""
    missing = ""
    """The status when the binding cannot be imported."""
    init_call = ""
    """The library's init function, named in the status when it fails."""

    def __init__(self, module: Any = None) -> None:
        self._module = module
        self.lib: Any = None
        self._ready = False
        self._failed = False
        self.status = "not started"

    @abstractmethod
    def _init(self, lib: Any) -> None:
        """Initialise the library (raises on failure)."""

    @abstractmethod
    def _shutdown(self, lib: Any) -> None:
        """Shut the library down (raises on failure; `close` catches it)."""

    def _ready_status(self, lib: Any) -> str:
        return self.name

    def _start(self) -> bool:
        if self._ready:
            return True
        if self._failed:
            return False
        import importlib

        try:
            lib = self._module or importlib.import_module(self.module_name)
        except Exception as exc:  # ImportError, or bindings that cannot find their .so
            return self._fail(f"{self.missing}: {why(exc)}")
        try:
            self._init(lib)
        except Exception as exc:
            return self._fail(f"{self.init_call} failed: {why(exc)}")
        self.lib = lib
        self._ready = True
        self.status = self._ready_status(lib)
        return True

    def _fail(self, reason: str) -> bool:
        self._failed = True
        self.status = reason
        return False

    def close(self) -> None:
        if self._ready:
            try:
                self._shutdown(self.lib)
            except Exception:  # shutting down a broken library must not raise either
                pass
        self._ready = False
        self.lib = None


class NvmlBackend(LibraryBackend):
    name = "nvml"
    vendor = "nvidia"
    module_name = "pynvml"
    missing = "nvidia-ml-py is not installed (pip install 'kopt-supervisor[nvidia]')"

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


_VIOLATIONS = {  # amdsmi_get_violation_status keys → kopt's throttle vocabulary
    "ppt_pwr": "power_ppt",
    "socket_thrm": "thermal_socket",
    "prochot_thrm": "thermal_prochot",
    "vr_thrm": "thermal_vr",
    "hbm_thrm": "thermal_hbm",
}


def _value(v: Any) -> Any:
    """amdsmi's "N/A" and its all-ones sentinels → NA; numbers → float."""
    if isinstance(v, int) and v in (0xFFFF, 0xFFFFFFFF, 0xFFFFFFFFFFFFFFFF):
        return NA
    return number(v)


class AmdSmiBackend(LibraryBackend):
    name = "amdsmi"
    vendor = "amd"
    module_name = "amdsmi"
    missing = "amdsmi is not usable"

    init_call = "amdsmi_init"

    def _init(self, lib: Any) -> None:
        lib.amdsmi_init()

    def _shutdown(self, lib: Any) -> None:
        lib.amdsmi_shut_down()

    def _ready_status(self, lib: Any) -> str:
        return "amdsmi"

    def read(self) -> list[GpuState]:
        if not self._start():
            return []
        try:
            handles = list(self.lib.amdsmi_get_processor_handles())
        except Exception as exc:
            self.status = f"amdsmi_get_processor_handles failed: {why(exc)}"
            return []
        gpus = []
        for pos, h in enumerate(handles):
            try:
                gpus.append(self._read_one(pos, h))
            except Exception as exc:  # an unforeseen library shape: this GPU is all NA
                gpus.append(GpuState(pos, vendor="amd", backend=self.name, extra={"na": {"*": why(exc)}}))
        return gpus

    def _read_one(self, pos: int, h: Any) -> GpuState:
        smi = self.lib
        na: dict[str, str] = {}
        used, total = read_field(na, "mem_used_mib", self._vram, h) or (NA, NA)
        if used is NA:
            na.setdefault("mem_total_mib", na.get("mem_used_mib", "not available"))
        violations = read_field(na, "throttle", self._violations, h)
        throttle, counters = _throttle(violations)
        if counters is NA:
            na.setdefault("throttle_counters", na.get("throttle", "not available"))
        return GpuState(
            index=self._index(pos, h),
            name=read_field(na, "name", lambda: text(smi.amdsmi_get_gpu_asic_info(h).get("market_name"))),
            uuid=read_field(na, "uuid", smi.amdsmi_get_gpu_device_uuid, h, convert=text),
            util_pct=read_field(na, "util_pct", self._activity, h),
            mem_used_mib=used,
            mem_total_mib=total,
            processes=read_field(na, "processes", self._processes, h),
            sm_clock_mhz=read_field(na, "sm_clock_mhz", self._clock, h, "GFX"),
            mem_clock_mhz=read_field(na, "mem_clock_mhz", self._clock, h, "MEM"),
            temp_c=read_field(na, "temp_c", self._temperature, h),
            power_w=read_field(na, "power_w", self._power, h),
            throttle=throttle,
            throttle_counters=counters,
            vendor="amd",
            backend=self.name,
            extra={"na": na},
        )

    def _index(self, pos: int, h: Any) -> int:
        """The HIP device index where the library says it (ROCm 7), else the listing order."""
        info = getattr(self.lib, "amdsmi_get_gpu_enumeration_info", None)
        if info is not None:
            try:
                hip_id = info(h).get("hip_id")
                if isinstance(hip_id, int):
                    return hip_id
            except Exception:  # older library or unsupported: the listing order it is
                pass
        return pos

    def _activity(self, h: Any) -> Any:
        smi = self.lib
        try:
            v = _value(smi.amdsmi_get_gpu_activity(h).get("gfx_activity"))
        except Exception:
            v = NA
        if v is NA:
            v = _value(smi.amdsmi_get_gpu_metrics_info(h).get("average_gfx_activity"))
        return v

    def _vram(self, h: Any) -> tuple[Any, Any]:
        smi = self.lib
        try:
            vram = smi.amdsmi_get_gpu_vram_usage(h)
            used, total = _value(vram.get("vram_used")), _value(vram.get("vram_total"))
            if used is not NA and total is not NA:
                return used, total  # MB
        except Exception:  # try the byte-level calls below
            pass
        vram_type = smi.AmdSmiMemoryType.VRAM
        used = _value(smi.amdsmi_get_gpu_memory_usage(h, vram_type))
        total = _value(smi.amdsmi_get_gpu_memory_total(h, vram_type))
        return (used / _MIB if used is not NA else NA), (total / _MIB if total is not NA else NA)

    def _processes(self, h: Any) -> tuple[GpuProcess, ...]:
        smi = self.lib
        out = []
        for p in smi.amdsmi_get_gpu_process_list(h):
            info = p if isinstance(p, dict) else smi.amdsmi_get_gpu_process_info(h, p)
            mem = info.get("memory_usage", {}).get("vram_mem") if isinstance(info.get("memory_usage"), dict) else None
            mem = _value(mem) if mem is not None else _value(info.get("mem"))
            out.append(
                GpuProcess(pid=int(info["pid"]), name=text(info.get("name")), mem_mib=NA if mem is NA else mem / _MIB)
            )
        return tuple(out)

    def _violations(self, h: Any) -> Any:
        fn = getattr(self.lib, "amdsmi_get_violation_status", None)
        if fn is None:
            raise RuntimeError("amdsmi_get_violation_status not in this ROCm version")
        return fn(h)

    def _clock(self, h: Any, kind: str) -> Any:
        smi = self.lib
        info = smi.amdsmi_get_clock_info(h, getattr(smi.AmdSmiClkType, kind))
        return _value(info.get("clk", info.get("cur_clk")))

    def _temperature(self, h: Any) -> Any:
        smi = self.lib
        kinds = smi.AmdSmiTemperatureType
        for name in ("EDGE", "HOTSPOT", "JUNCTION"):
            kind = getattr(kinds, name, None)
            if kind is None:
                continue
            try:
                t = _value(smi.amdsmi_get_temp_metric(h, kind, smi.AmdSmiTemperatureMetric.CURRENT))
            except Exception:  # this sensor is not on this GPU (MI300 has no edge sensor)
                continue
            if t is not NA:
                return t / 1000 if t > 1000 else t  # ROCm 5 reported millidegrees
        return NA

    def _power(self, h: Any) -> Any:
        info = self.lib.amdsmi_get_power_info(h)
        for key in ("socket_power", "current_socket_power", "average_socket_power"):
            v = _value(info.get(key))
            if v is not NA and v > 0:
                return v
        return NA


def _throttle(violations: Any) -> tuple[Any, Any]:
    """(active throttle reasons, cumulative counters) from amdsmi_get_violation_status."""
    if not isinstance(violations, dict):
        return NA, NA
    active, counters = [], {}
    for key, name in _VIOLATIONS.items():
        if violations.get(f"active_{key}") is True:
            active.append(name)
        acc = _value(violations.get(f"acc_{key}"))
        if acc is not NA:
            counters[name] = acc
    return tuple(active), (counters or NA)


# ---------------------------------------------------------------------------------------
# Choosing a backend; the scripted fake

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


_NUMBERS = ("util_pct", "mem_used_mib", "mem_total_mib", "sm_clock_mhz", "mem_clock_mhz", "temp_c", "power_w")
_DEFAULTS = {"util_pct": 0.0, "mem_used_mib": 0.0, "mem_total_mib": 81559.0}


class FakeBackend:
    """docs/design.md §10: a JSON list of snapshots; each read takes the next, the last repeats."""

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
        self.snapshots = []
        for n, snap in enumerate(data):
            if not isinstance(snap, list):
                raise BadInput(f"KOPT_FAKE_GPUS={self.path}: snapshot {n} must be a list of GPUs")
            self.snapshots.append([_fake_gpu(self.path, g) for g in snap])
        self.i = 0
        self.status = f"scripted fake GPUs from {self.path} ({len(self.snapshots)} snapshots)"
        # Claims on fake GPUs are scoped to the script, so unrelated tests never collide.
        self.claim_namespace = "fake-" + hashlib.sha1(str(self.path.resolve()).encode()).hexdigest()[:10]

    def read(self) -> list[GpuState]:
        snap = self.snapshots[min(self.i, len(self.snapshots) - 1)]
        self.i += 1
        return list(snap)

    def close(self) -> None:
        pass


def _fake_gpu(path: Path, g: Any) -> GpuState:
    try:
        if not isinstance(g, dict):
            raise TypeError("a GPU must be an object")
        index = int(g["index"])
        values = {k: _num(g, k) for k in _NUMBERS}
        raw_procs = g.get("processes", [])
        procs: Any = (
            NA
            if raw_procs is None
            else tuple(
                GpuProcess(int(p["pid"]), p.get("name", "?"), _num(p, "mem_mib", 0.0), p.get("user", NA))
                for p in raw_procs
            )
        )
        throttle = g.get("throttle", ())
        counters = g.get("throttle_counters")
        vendor = g.get("vendor", "nvidia")
        if vendor not in ("nvidia", "amd"):
            raise ValueError(f"vendor must be 'nvidia' or 'amd', not {vendor!r}")
        return GpuState(
            index=index,
            name=g.get("name", "Fake GPU"),
            uuid=g.get("uuid", f"GPU-fake-{index}"),
            processes=procs,
            throttle=NA if throttle is None else tuple(str(t) for t in throttle),
            throttle_counters=NA if counters is None else {str(k): float(v) for k, v in counters.items()},
            vendor=vendor,
            backend="fake",
            **values,
        )
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise BadInput(f"KOPT_FAKE_GPUS={path}: bad GPU entry {g!r}: {exc}") from None


def _num(d: dict[str, Any], key: str, default: float | None = None) -> Any:
    if key not in d:
        default = _DEFAULTS.get(key, default)
        return NA if default is None else default
    value = d[key]
    if value is None:
        return NA
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{key} must be a number, not {value!r}")
    return float(value)
