"""The NVML backend against a test double of `pynvml` that behaves like the real module.

The double is built from the installed nvidia-ml-py: its constants, its `NVMLError`
hierarchy (`NVMLError(NVML_ERROR_NOT_SUPPORTED)` becomes `NVMLError_NotSupported`) and its
`NVMLLibraryMismatchError`; only the C calls are replaced, returning the same shapes as the
ctypes structs (`.gpu`, `.used`/`.total`/`.reserved` in bytes, `.pid`/`.usedGpuMemory`,
milliwatts, a reason bitmask, `.violationTime` in ns).
"""

from __future__ import annotations

import sys
import types
from dataclasses import dataclass, field
from typing import Any

import pynvml as real
import pytest

from kopt_supervisor.engine.gpu import NA
from kopt_supervisor.engine.gpu.backends import NvmlBackend

MIB = 1024 * 1024


@dataclass
class Dev:
    name: Any = "NVIDIA H100 80GB HBM3"
    uuid: Any = "GPU-6b2a1c3d-0e4f-5a6b-7c8d-9e0f1a2b3c4d"
    util: int = 3
    used: int = 1 * MIB
    total: int = 81559 * MIB
    reserved: int = 543 * MIB
    procs: list[tuple[int, int | None]] = field(default_factory=list)
    sm: int = 1980
    mem: int = 2619
    temp: int = 34
    power_mw: int = 71234
    reasons: int = 0x1
    violations: dict[int, int] = field(default_factory=lambda: {0: 1_000, 1: 0})
    fail: dict[str, int] = field(default_factory=dict)
    """function name → NVML error code it raises"""


def fake_pynvml(
    devs: list[Dev], *, init_error: int | None = None, old_driver: bool = False, lost: tuple[int, ...] = ()
) -> types.ModuleType:
    m = types.ModuleType("pynvml")
    for name in dir(real):
        if name.startswith(("NVML_", "NVMLError", "nvmlMemory_v2", "NVMLLibraryMismatchError")):
            setattr(m, name, getattr(real, name))
    m.calls = []

    def nvml_call(fn_name: str):
        def deco(fn):
            def wrapper(*args, **kw):
                m.calls.append(fn_name)
                if args and isinstance(args[0], int):
                    code = devs[args[0]].fail.get(fn_name)
                    if code is not None:
                        raise real.NVMLError(code)
                return fn(*args, **kw)

            setattr(m, fn_name, wrapper)
            return wrapper

        return deco

    @nvml_call("nvmlInit")
    def _init():
        if init_error is not None:
            raise real.NVMLError(init_error)

    nvml_call("nvmlShutdown")(lambda: None)
    nvml_call("nvmlSystemGetDriverVersion")(lambda: "580.95.05")
    nvml_call("nvmlDeviceGetCount")(lambda: len(devs))

    @nvml_call("nvmlDeviceGetHandleByIndex")
    def _handle(i):
        if i in lost:
            raise real.NVMLError(real.NVML_ERROR_GPU_IS_LOST)
        return i

    nvml_call("nvmlDeviceGetName")(lambda h: devs[h].name)
    nvml_call("nvmlDeviceGetUUID")(lambda h: devs[h].uuid)
    nvml_call("nvmlDeviceGetUtilizationRates")(lambda h: types.SimpleNamespace(gpu=devs[h].util, memory=1))

    @nvml_call("nvmlDeviceGetMemoryInfo")
    def _mem(h, version=None):
        d = devs[h]
        if version is None:  # v1: used includes the reserved memory
            return types.SimpleNamespace(used=d.used + d.reserved, total=d.total, free=d.total - d.used - d.reserved)
        if old_driver:
            raise real.NVMLError(real.NVML_ERROR_FUNCTION_NOT_FOUND)
        return types.SimpleNamespace(
            version=version, used=d.used, total=d.total, reserved=d.reserved, free=d.total - d.used - d.reserved
        )

    def procs(h):
        return [
            types.SimpleNamespace(pid=pid, usedGpuMemory=mem, gpuInstanceId=0xFFFFFFFF) for pid, mem in devs[h].procs
        ]

    @nvml_call("nvmlDeviceGetComputeRunningProcesses")
    def _procs_v3(h):
        if old_driver:  # what real pynvml's throwOnVersionMismatch raises
            raise real.NVMLLibraryMismatchError(
                "Unversioned function called and the pyNVML version does not match the NVML lib version."
            )
        return procs(h)

    nvml_call("nvmlDeviceGetComputeRunningProcesses_v2")(procs)
    nvml_call("nvmlDeviceGetClockInfo")(lambda h, kind: devs[h].sm if kind == real.NVML_CLOCK_SM else devs[h].mem)
    nvml_call("nvmlDeviceGetTemperature")(lambda h, sensor: devs[h].temp)
    nvml_call("nvmlDeviceGetPowerUsage")(lambda h: devs[h].power_mw)
    nvml_call("nvmlDeviceGetCurrentClocksThrottleReasons")(lambda h: devs[h].reasons)
    nvml_call("nvmlDeviceGetViolationStatus")(
        lambda h, policy: types.SimpleNamespace(referenceTime=1, violationTime=devs[h].violations[policy])
    )
    if not old_driver:
        nvml_call("nvmlDeviceGetTemperatureV")(lambda h, sensor: devs[h].temp)
        nvml_call("nvmlDeviceGetCurrentClocksEventReasons")(lambda h: devs[h].reasons)
    return m


def test_every_field_is_read_and_converted():
    nvml = fake_pynvml([Dev(procs=[(4242, 2354 * MIB), (777, None)], reasons=0x1 | 0x4)])
    backend = NvmlBackend(nvml)
    (g,) = backend.read()
    assert (g.index, g.name, g.uuid) == (0, "NVIDIA H100 80GB HBM3", "GPU-6b2a1c3d-0e4f-5a6b-7c8d-9e0f1a2b3c4d")
    assert g.util_pct == 3.0
    assert (g.mem_used_mib, g.mem_total_mib) == (1.0, 81559.0)  # v2: reserved memory excluded
    assert g.extra["mem_reserved_mib"] == 543.0
    assert [(p.pid, p.mem_mib) for p in g.processes] == [(4242, 2354.0), (777, NA)]
    assert (g.sm_clock_mhz, g.mem_clock_mhz, g.temp_c) == (1980.0, 2619.0, 34.0)
    assert g.power_w == pytest.approx(71.234)
    assert g.throttle == ("gpu_idle", "sw_power_cap")
    assert g.throttle_counters == {"power_ns": 1000.0, "thermal_ns": 0.0}
    assert g.vendor == "nvidia" and g.backend == "nvml"
    assert g.extra["na"] == {}
    assert backend.status == "NVML (driver 580.95.05)"


def test_an_unsupported_field_is_na_with_its_reason_and_the_rest_is_read():
    dev = Dev(
        fail={
            "nvmlDeviceGetPowerUsage": real.NVML_ERROR_NOT_SUPPORTED,
            "nvmlDeviceGetComputeRunningProcesses": real.NVML_ERROR_NO_PERMISSION,
            "nvmlDeviceGetViolationStatus": real.NVML_ERROR_NOT_SUPPORTED,
        }
    )
    (g,) = NvmlBackend(fake_pynvml([dev])).read()
    assert g.power_w is NA and g.processes is NA and g.throttle_counters is NA
    assert g.extra["na"]["power_w"] == "Not Supported"
    assert g.extra["na"]["processes"] == "Insufficient Permissions"
    assert g.util_pct == 3.0 and g.mem_used_mib == 1.0
    assert g.to_dict()["power_w"] is None


def test_an_old_driver_uses_the_older_calls():
    (g,) = NvmlBackend(fake_pynvml([Dev(procs=[(9, 10 * MIB)])], old_driver=True)).read()
    assert g.mem_used_mib == 1 + 543  # v1 counts the reserved memory as used
    assert "mem_reserved_mib" not in g.extra
    assert [p.pid for p in g.processes] == [9]  # _v2 after the library-version mismatch
    assert g.temp_c == 34.0 and g.throttle == ("gpu_idle",)


def test_bytes_from_old_bindings_are_decoded():
    (g,) = NvmlBackend(fake_pynvml([Dev(name=b"Tesla V100-SXM2-16GB", uuid=b"GPU-abc")])).read()
    assert (g.name, g.uuid) == ("Tesla V100-SXM2-16GB", "GPU-abc")


def test_a_lost_gpu_is_left_out_and_the_others_are_read():
    gpus = NvmlBackend(fake_pynvml([Dev(), Dev(uuid="GPU-2")], lost=(0,))).read()
    assert [(g.index, g.uuid) for g in gpus] == [(1, "GPU-2")]


def test_a_gpu_falling_off_the_bus_mid_read_gives_nas_not_an_exception():
    lost = real.NVML_ERROR_GPU_IS_LOST
    dev = Dev(
        fail={
            name: lost
            for name in (
                "nvmlDeviceGetUtilizationRates",
                "nvmlDeviceGetMemoryInfo",
                "nvmlDeviceGetComputeRunningProcesses",
                "nvmlDeviceGetName",
            )
        }
    )
    (g,) = NvmlBackend(fake_pynvml([dev])).read()
    assert g.util_pct is NA and g.mem_used_mib is NA and g.mem_total_mib is NA and g.processes is NA
    assert g.extra["na"]["util_pct"] == "GPU is lost"


def test_init_failure_reads_nothing_says_why_and_is_not_retried():
    nvml = fake_pynvml([Dev()], init_error=real.NVML_ERROR_DRIVER_NOT_LOADED)
    backend = NvmlBackend(nvml)
    assert backend.read() == [] and backend.read() == []
    assert backend.status == "nvmlInit failed: Driver Not Loaded"
    assert nvml.calls == ["nvmlInit"]
    backend.close()
    assert "nvmlShutdown" not in nvml.calls


def test_lazy_start_and_clean_shutdown(monkeypatch):
    nvml = fake_pynvml([Dev()])
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    backend = NvmlBackend()  # imports pynvml itself, on first read
    assert nvml.calls == []
    backend.read()
    assert nvml.calls[0] == "nvmlInit"
    backend.close()
    backend.close()
    assert nvml.calls.count("nvmlShutdown") == 1


def test_missing_bindings_are_a_reason_not_an_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import raises ImportError
    backend = NvmlBackend()
    assert backend.read() == []
    assert "nvidia-ml-py is not installed" in backend.status


def test_the_real_library_here(monkeypatch):
    backend = NvmlBackend()
    gpus = backend.read()
    if gpus:  # on a GPU machine this is a real reading
        assert all(g.backend == "nvml" and g.uuid for g in gpus)
    else:
        assert backend.status.startswith("nvmlInit failed: ")
    backend.close()


def test_an_unforeseen_binding_shape_makes_that_gpu_na_not_an_exception():
    nvml = fake_pynvml([Dev(), Dev(uuid="GPU-2")])
    del nvml.NVML_CLOCK_SM  # looked up outside any single field read
    gpus = NvmlBackend(nvml).read()
    assert [g.index for g in gpus] == [0, 1]
    assert gpus[0].uuid is NA and "NVML_CLOCK_SM" in gpus[0].extra["na"]["*"]
