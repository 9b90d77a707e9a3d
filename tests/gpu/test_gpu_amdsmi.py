"""The amdsmi backend against test doubles of the `amdsmi` module of two ROCm generations.

The shapes follow ROCm's py-interface/amdsmi_interface.py: `amdsmi_get_gpu_vram_usage`
returns {"vram_total", "vram_used"} in MB (amdsmi.h: "In MB"); `amdsmi_get_gpu_activity`
returns {"gfx_activity", "umc_activity", "mm_activity"} with "N/A" for 0xFFFF;
`amdsmi_get_gpu_process_list` returns dicts with `memory_usage.vram_mem` in bytes since
ROCm 6.1 and process handles (read with `amdsmi_get_gpu_process_info`) before;
`amdsmi_get_power_info` has `socket_power` (6.4+), `current_socket_power` (MI300) or only
`average_socket_power`; `amdsmi_get_clock_info` returns `clk` (6.1+) or `cur_clk` (6.0);
errors are `AmdSmiLibraryException(err_code)`, a subclass of `AmdSmiException`.
"""

from __future__ import annotations

import sys
import types
from typing import Any

import pytest

from kopt_supervisor.engine.gpu import NA
from kopt_supervisor.engine.gpu.backends import AmdSmiBackend

MIB = 1024 * 1024
NOT_SUPPORTED = 2


class AmdSmiException(Exception):
    pass


class AmdSmiLibraryException(AmdSmiException):
    def __init__(self, err_code: int) -> None:
        self.err_code = err_code
        super().__init__(f"Error code:\n\t{err_code} | AMDSMI_STATUS_NOT_SUPPORTED - Feature not supported")

    def get_error_code(self) -> int:
        return self.err_code


def fake_amdsmi(gpus: list[dict[str, Any]], *, rocm: str = "6.4", init_error: bool = False) -> types.ModuleType:
    m = types.ModuleType("amdsmi")
    m.AmdSmiException = AmdSmiException
    m.AmdSmiLibraryException = AmdSmiLibraryException
    m.AmdSmiClkType = types.SimpleNamespace(SYS=0, GFX=0, MEM=5)
    m.AmdSmiTemperatureType = types.SimpleNamespace(EDGE=0, HOTSPOT=1, JUNCTION=1, VRAM=2)
    m.AmdSmiTemperatureMetric = types.SimpleNamespace(CURRENT=0)
    m.AmdSmiMemoryType = types.SimpleNamespace(VRAM=0)
    m.calls = []

    def unsupported():
        raise AmdSmiLibraryException(NOT_SUPPORTED)

    def init(*args):
        m.calls.append("amdsmi_init")
        if init_error:
            raise AmdSmiLibraryException(34)  # AMDSMI_STATUS_DRIVER_NOT_LOADED

    m.amdsmi_init = init
    m.amdsmi_shut_down = lambda: m.calls.append("amdsmi_shut_down")
    m.amdsmi_get_processor_handles = lambda: [f"h{i}" for i in range(len(gpus))]

    def g(h: str) -> dict[str, Any]:
        return gpus[int(h[1:])]

    m.amdsmi_get_gpu_asic_info = lambda h: {"market_name": g(h)["name"], "vendor_id": "0x1002"}
    m.amdsmi_get_gpu_device_uuid = lambda h: g(h)["uuid"]
    m.amdsmi_get_gpu_activity = lambda h: {"gfx_activity": g(h)["gfx"], "umc_activity": "N/A", "mm_activity": "N/A"}
    m.amdsmi_get_gpu_metrics_info = lambda h: {"average_gfx_activity": g(h).get("metrics_gfx", "N/A")}
    m.amdsmi_get_gpu_vram_usage = lambda h: {"vram_total": g(h)["vram_total_mb"], "vram_used": g(h)["vram_used_mb"]}

    def temp(h, kind, metric):
        t = g(h)["temps"].get(kind)
        if t is None:
            unsupported()
        return t

    m.amdsmi_get_temp_metric = temp
    if rocm == "6.0":
        m.amdsmi_get_gpu_process_list = lambda h: list(range(len(g(h)["procs"])))
        m.amdsmi_get_gpu_process_info = lambda h, p: {
            "name": g(h)["procs"][p][1],
            "pid": g(h)["procs"][p][0],
            "mem": g(h)["procs"][p][2],
            "engine_usage": {"gfx": 0, "enc": 0},
            "memory_usage": {"gtt_mem": 0, "cpu_mem": 0, "vram_mem": g(h)["procs"][p][2]},
        }
        m.amdsmi_get_power_info = lambda h: {
            "average_socket_power": g(h)["power"],
            "gfx_voltage": 0,
            "soc_voltage": 0,
            "mem_voltage": 0,
            "power_limit": 300,
        }
        m.amdsmi_get_clock_info = lambda h, kind: {"cur_clk": g(h)["clk"][kind], "min_clk": 500, "max_clk": 2100}
        m.amdsmi_get_violation_status = lambda h: unsupported()
    else:
        m.amdsmi_get_gpu_process_list = lambda h: [
            {
                "name": name,
                "pid": pid,
                "mem": mem,
                "engine_usage": {"gfx": 0, "enc": 0},
                "memory_usage": {"gtt_mem": 0, "cpu_mem": 0, "vram_mem": mem},
                "cu_occupancy": "N/A",
            }
            for pid, name, mem in g(h)["procs"]
        ]
        m.amdsmi_get_power_info = lambda h: {
            "socket_power": g(h)["power"],
            "current_socket_power": "N/A",
            "average_socket_power": "N/A",
            "gfx_voltage": "N/A",
            "soc_voltage": "N/A",
            "mem_voltage": "N/A",
            "power_limit": 750,
        }
        m.amdsmi_get_clock_info = lambda h, kind: {
            "clk": g(h)["clk"][kind],
            "min_clk": 500,
            "max_clk": 2100,
            "clk_locked": False,
            "clk_deep_sleep": False,
        }
        m.amdsmi_get_violation_status = lambda h: g(h)["violation"]
        m.amdsmi_get_gpu_enumeration_info = lambda h: {"hip_id": g(h)["hip_id"], "drm_card": 1}
    return m


def mi300(i: int = 0, **kw: Any) -> dict[str, Any]:
    d = {
        "name": "AMD Instinct MI300X",
        "uuid": f"ae{i}f74a1-0000-1000-80e8-4a6b2c1d{i:04d}",
        "gfx": 7,
        "vram_total_mb": 196592,
        "vram_used_mb": 283,
        "procs": [(31337, "python3", 2 * 1024 * MIB)],
        "temps": {1: 48},
        "power": 132,
        "clk": {0: 1305, 5: 1300},
        "hip_id": i,
        "violation": {
            "acc_ppt_pwr": 10,
            "acc_socket_thrm": 0,
            "acc_prochot_thrm": 0,
            "acc_vr_thrm": 0,
            "acc_hbm_thrm": "N/A",
            "active_ppt_pwr": True,
            "active_socket_thrm": False,
            "active_prochot_thrm": False,
            "active_vr_thrm": False,
            "active_hbm_thrm": "N/A",
        },
    }
    d.update(kw)
    return d


def test_rocm_6_4_fields_units_and_na_strings():
    backend = AmdSmiBackend(fake_amdsmi([mi300(0), mi300(1, hip_id=1, gfx="N/A", metrics_gfx=55)]))
    g0, g1 = backend.read()
    assert (g0.index, g0.name, g0.vendor, g0.backend) == (0, "AMD Instinct MI300X", "amd", "amdsmi")
    assert g0.util_pct == 7.0
    assert (g0.mem_used_mib, g0.mem_total_mib) == (283.0, 196592.0)  # MB as the library reports
    assert [(p.pid, p.name, p.mem_mib) for p in g0.processes] == [(31337, "python3", 2048.0)]
    assert g0.temp_c == 48.0  # MI300 has no edge sensor: hotspot
    assert g0.power_w == 132.0
    assert (g0.sm_clock_mhz, g0.mem_clock_mhz) == (1305.0, 1300.0)
    assert g0.throttle == ("power_ppt",)
    assert g0.throttle_counters == {"power_ppt": 10.0, "thermal_socket": 0.0, "thermal_prochot": 0.0, "thermal_vr": 0.0}
    assert g1.util_pct == 55.0  # "N/A" activity: from the metrics table
    assert backend.status == "amdsmi"


def test_rocm_6_0_process_handles_average_power_and_cur_clk():
    gpu = mi300(0, name="AMD Instinct MI250X", temps={0: 35000}, power=88, procs=[(4242, "N/A", 512 * MIB)])
    (g,) = AmdSmiBackend(fake_amdsmi([gpu], rocm="6.0")).read()
    assert [(p.pid, p.name, p.mem_mib) for p in g.processes] == [(4242, NA, 512.0)]
    assert g.power_w == 88.0 and g.sm_clock_mhz == 1305.0
    assert g.temp_c == 35.0  # millidegrees from an old library
    assert g.throttle is NA and g.throttle_counters is NA
    assert "not supported" in g.extra["na"]["throttle"].lower()


def test_a_failing_field_is_na_and_the_rest_is_read():
    smi = fake_amdsmi([mi300()])
    smi.amdsmi_get_gpu_process_list = lambda h: (_ for _ in ()).throw(AmdSmiLibraryException(NOT_SUPPORTED))
    (g,) = AmdSmiBackend(smi).read()
    assert g.processes is NA and g.util_pct == 7.0
    assert "AMDSMI_STATUS_NOT_SUPPORTED" in g.extra["na"]["processes"]


def test_init_failure_and_missing_bindings(monkeypatch):
    smi = fake_amdsmi([mi300()], init_error=True)
    backend = AmdSmiBackend(smi)
    assert backend.read() == [] and backend.read() == []
    assert backend.status.startswith("amdsmi_init failed: Error code")
    assert smi.calls == ["amdsmi_init"]
    monkeypatch.setitem(sys.modules, "amdsmi", None)
    missing = AmdSmiBackend()
    assert missing.read() == [] and missing.status.startswith("amdsmi is not usable")


def test_lazy_and_shut_down_once(monkeypatch):
    smi = fake_amdsmi([mi300()])
    monkeypatch.setitem(sys.modules, "amdsmi", smi)
    backend = AmdSmiBackend()
    assert smi.calls == []
    assert len(backend.read()) == 1
    backend.close()
    backend.close()
    assert smi.calls == ["amdsmi_init", "amdsmi_shut_down"]


def test_processor_handles_failing_reads_nothing():
    smi = fake_amdsmi([mi300()])
    smi.amdsmi_get_processor_handles = lambda: (_ for _ in ()).throw(AmdSmiLibraryException(NOT_SUPPORTED))
    backend = AmdSmiBackend(smi)
    assert backend.read() == []
    assert backend.status.startswith("amdsmi_get_processor_handles failed")


@pytest.mark.parametrize("vram, used", [({"vram_total": "N/A", "vram_used": "N/A"}, NA)])
def test_vram_na_falls_back_to_byte_calls(vram, used):
    smi = fake_amdsmi([mi300()])
    smi.amdsmi_get_gpu_vram_usage = lambda h: vram
    smi.amdsmi_get_gpu_memory_usage = lambda h, t: 300 * MIB
    smi.amdsmi_get_gpu_memory_total = lambda h, t: 196592 * MIB
    (g,) = AmdSmiBackend(smi).read()
    assert (g.mem_used_mib, g.mem_total_mib) == (300.0, 196592.0)


def test_a_library_without_violation_status_or_with_odd_shapes_never_raises():
    smi = fake_amdsmi([mi300(), mi300(1, hip_id=1)])
    del smi.amdsmi_get_violation_status  # ROCm before 6.3
    smi.amdsmi_get_gpu_enumeration_info = lambda h: (_ for _ in ()).throw(AttributeError("no such call"))
    smi.amdsmi_get_gpu_asic_info = lambda h: "not a dict"
    g0, g1 = AmdSmiBackend(smi).read()
    assert g0.throttle is NA and "not in this ROCm version" in g0.extra["na"]["throttle"]
    assert g0.name is NA and (g0.index, g1.index) == (0, 1)  # listing order
    assert g0.util_pct == 7.0
