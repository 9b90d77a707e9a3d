"""The command-line fallbacks: parsers on captured-format text, and backends running real
(fake) executables on PATH.

Formats, and where they come from:
- nvidia-smi: `--query-gpu=... --format=csv,noheader,nounits` prints one line per GPU, the
  values joined by ", ", and "[N/A]" / "[Not Supported]" for what it cannot read; an unknown
  field aborts the whole query with 'Field "<name>" is not a valid field to query.' (exit 2).
  `--query-compute-apps=gpu_uuid,pid,process_name,used_memory` prints one line per process
  and nothing when there is none. (nvidia-smi(1), `nvidia-smi --help-query-gpu`,
  `--help-query-compute-apps`; the H100 lines below follow what a driver-580 H100 prints.)
- rocm-smi: `--json` prints {"cardN": {"<metric name>": "<value as text>"}}; the names are
  those of rocm_smi.py's printLog calls ("GPU use (%)", "VRAM Total Used Memory (B)",
  "Average Graphics Package Power (W)", "sclk clock speed:" "(1700Mhz)", ...);
  `--showpids --json` goes through print2DArray, which lower-cases the row, turns its spaces
  into ", " and files it under {"system": {"PID<pid>": "<name>, <gpus>, <vram B>, <sdma>, <cu>"}}
  (ROCm/rocm_smi_lib python_smi_tools/rocm_smi.py).
- amd-smi: `metric|process|list|static --json` print a list of {"gpu": N, ...} (ROCm 6.0–6.3)
  or {"gpu_data": [...]} (6.4+), values as {"value": v, "unit": u} or "N/A"
  (ROCm/amdsmi amdsmi_cli; the shapes below are those of the 6.4 CLI).
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from kopt_supervisor.engine.gpu import NA, smi
from kopt_supervisor.engine.gpu.smi import (
    NVIDIA_SMI_FIELDS,
    AmdSmiCliBackend,
    NvidiaSmiBackend,
    RocmSmiBackend,
    invalid_field,
    parse_amd_smi,
    parse_nvidia_smi,
    parse_rocm_smi,
)

H100_UUID = "GPU-3f1c2b8e-9d4a-4e6b-a1f0-7c2d5e8b9a10"
NVIDIA_GPUS = (
    f"0, {H100_UUID}, NVIDIA H100 80GB HBM3, 0, 1, 81559, 345, 2619, 29, 69.02, 0x0000000000000001\n"
    "1, GPU-77aa0e51-5a2f-4b4e-8f70-3e3c9d1f2a44, NVIDIA H100 80GB HBM3, 100, 2933, 81559, 1980, 2619, 52, "
    "[N/A], 0x0000000000000004\n"
    "2, GPU-0b3a0d36-1111-2222-3333-444455556666, NVIDIA H100 80GB HBM3, [Not Supported], 0, 81559, "
    "[Not Supported], [Not Supported], 31, 70.11, [Not Supported]\n"
)
NVIDIA_APPS = (
    "GPU-77aa0e51-5a2f-4b4e-8f70-3e3c9d1f2a44, 48211, /usr/bin/python3, 2354\n"
    "GPU-77aa0e51-5a2f-4b4e-8f70-3e3c9d1f2a44, 48290, /opt/job, with comma/bin/trainer, [N/A]\n"
)


def test_nvidia_smi_csv_values_na_and_throttle_bits():
    g0, g1, g2 = parse_nvidia_smi(NVIDIA_GPUS, NVIDIA_SMI_FIELDS, NVIDIA_APPS)
    assert (g0.index, g0.uuid, g0.name) == (0, H100_UUID, "NVIDIA H100 80GB HBM3")
    assert (g0.util_pct, g0.mem_used_mib, g0.mem_total_mib) == (0.0, 1.0, 81559.0)
    assert (g0.sm_clock_mhz, g0.mem_clock_mhz, g0.temp_c, g0.power_w) == (345.0, 2619.0, 29.0, 69.02)
    assert g0.throttle == ("gpu_idle",) and g0.processes == ()
    assert g1.power_w is NA and g1.extra["na"]["power.draw"] == "[N/A]"
    assert g1.throttle == ("sw_power_cap",)
    assert [(p.pid, p.name, p.mem_mib) for p in g1.processes] == [
        (48211, "/usr/bin/python3", 2354.0),
        (48290, "/opt/job, with comma/bin/trainer", NA),
    ]
    assert g2.util_pct is NA and g2.sm_clock_mhz is NA and g2.throttle is NA
    assert g2.backend == "nvidia-smi" and g2.vendor == "nvidia"


def test_nvidia_smi_without_the_apps_query_has_na_processes_and_odd_lines_are_skipped():
    text = "WARNING: infoROM is corrupted at gpu 0000:3B:00.0\n" + NVIDIA_GPUS.splitlines()[0] + "\n\n"
    (g,) = parse_nvidia_smi(text, NVIDIA_SMI_FIELDS, None)
    assert g.processes is NA and g.index == 0


def test_nvidia_smi_invalid_field_message():
    msg = 'Field "clocks_event_reasons.active" is not a valid field to query.\n'
    assert invalid_field(msg) == "clocks_event_reasons.active"
    assert invalid_field("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.") is None


ROCM_METRICS = json.dumps(
    {
        "card0": {
            "GPU ID": "0x74a1",
            "Unique ID": "0x18a8c5f7e0b9d1a2",
            "GPU use (%)": "0",
            "GFX Activity": "2231789870",
            "Temperature (Sensor edge) (C)": "N/A",
            "Temperature (Sensor junction) (C)": "41.0",
            "Temperature (Sensor memory) (C)": "33.0",
            "Current Socket Graphics Package Power (W)": "131.0",
            "sclk clock speed:": "(132Mhz)",
            "sclk clock level:": "0",
            "mclk clock speed:": "(900Mhz)",
            "mclk clock level:": "0",
            "VRAM Total Memory (B)": "206141652992",
            "VRAM Total Used Memory (B)": "296587264",
            "Card Series": "AMD Instinct MI300X",
            "Card Model": "0x74a1",
            "Card Vendor": "Advanced Micro Devices, Inc. [AMD/ATI]",
            "Card SKU": "M3000100",
        },
        "card1": {
            "Unique ID": "0x5c4f3a2b1d0e9f88",
            "GPU use (%)": "100",
            "Temperature (Sensor edge) (C)": "N/A",
            "Temperature (Sensor junction) (C)": "63.0",
            "Current Socket Graphics Package Power (W)": "612.0",
            "sclk clock speed:": "(2100Mhz)",
            "mclk clock speed:": "(1300Mhz)",
            "VRAM Total Memory (B)": "206141652992",
            "VRAM Total Used Memory (B)": "73014444032",
            "Card Series": "AMD Instinct MI300X",
        },
    }
)
ROCM_PIDS = json.dumps(
    {"system": {"PID2877461": "python3, 1, 72717856768, 0, 100", "PID77": "pt, main, thread, 1, 0, 0, 0"}}
)


def test_rocm_smi_json_with_bytes_mhz_strings_and_na():
    g0, g1 = parse_rocm_smi(ROCM_METRICS, "{}")
    assert (g0.index, g0.name, g0.uuid) == (0, "AMD Instinct MI300X", "0x18a8c5f7e0b9d1a2")
    assert g0.mem_used_mib == pytest.approx(296587264 / 2**20)
    assert g0.mem_total_mib == pytest.approx(196592.0, abs=1)
    assert (g0.sm_clock_mhz, g0.mem_clock_mhz, g0.temp_c, g0.power_w) == (132.0, 900.0, 41.0, 131.0)
    assert g0.processes == () and g1.processes == ()  # no KFD process on the host at all
    assert g1.util_pct == 100.0 and g1.vendor == "amd" and g1.backend == "rocm-smi"


def test_rocm_smi_processes_are_attributed_only_when_that_is_certain():
    g0, g1 = parse_rocm_smi(ROCM_METRICS, ROCM_PIDS)
    assert g0.processes is NA and g1.processes is NA  # two GPUs: which one? unknown
    assert g0.extra["host_processes"] == [{"pid": 2877461, "name": "python3"}, {"pid": 77, "name": "pt main thread"}]
    one_card = json.dumps({"card0": json.loads(ROCM_METRICS)["card1"]})
    (only,) = parse_rocm_smi(one_card, ROCM_PIDS)
    assert [(p.pid, p.name) for p in only.processes] == [(2877461, "python3"), (77, "pt main thread")]
    assert only.processes[0].mem_mib == pytest.approx(72717856768 / 2**20)
    (unread,) = parse_rocm_smi(one_card, None)
    assert unread.processes is NA


def test_rocm_smi_warnings_before_the_json_and_garbage():
    (g,) = parse_rocm_smi(
        "WARNING: AMD GPU device(s) is/are in a low-power state.\n" + json.dumps({"card0": {"GPU use (%)": "5"}}), "{}"
    )
    assert g.util_pct == 5.0 and g.mem_used_mib is NA and g.name is NA
    assert parse_rocm_smi("ERROR: no GPU", None) == []


AMD_LIST = json.dumps(
    [
        {
            "gpu": 0,
            "bdf": "0000:0c:00.0",
            "uuid": "b6ff74a1-0000-1000-8003-6c1e4d4c95d3",
            "kfd_id": 43123,
            "node_id": 2,
            "partition_id": 0,
        }
    ]
)
AMD_STATIC = json.dumps(
    {"gpu_data": [{"gpu": 0, "asic": {"market_name": "AMD Instinct MI300X", "vendor_id": "0x1002"}}]}
)
AMD_METRIC = json.dumps(
    {
        "gpu_data": [
            {
                "gpu": 0,
                "usage": {
                    "gfx_activity": {"value": 12, "unit": "%"},
                    "umc_activity": {"value": 0, "unit": "%"},
                    "mm_activity": "N/A",
                },
                "power": {
                    "socket_power": {"value": 140, "unit": "W"},
                    "gfx_voltage": "N/A",
                    "throttle_status": "UNTHROTTLED",
                    "power_management": "ENABLED",
                },
                "clock": {
                    "gfx_0": {"clk": {"value": 1407, "unit": "MHz"}},
                    "mem_0": {"clk": {"value": 1300, "unit": "MHz"}},
                },
                "temperature": {
                    "edge": "N/A",
                    "hotspot": {"value": 44, "unit": "C"},
                    "mem": {"value": 35, "unit": "C"},
                },
                "mem_usage": {
                    "total_vram": {"value": 196592, "unit": "MB"},
                    "used_vram": {"value": 2331, "unit": "MB"},
                    "free_vram": {"value": 194261, "unit": "MB"},
                },
            }
        ]
    }
)
AMD_PROCESS = json.dumps(
    [
        {
            "gpu": 0,
            "process_list": [
                {
                    "process_info": {
                        "name": "python3",
                        "pid": 90210,
                        "memory_usage": {
                            "gtt_mem": {"value": 2, "unit": "MB"},
                            "cpu_mem": {"value": 1, "unit": "MB"},
                            "vram_mem": {"value": 2147483648, "unit": "B"},
                        },
                        "mem_usage": {"value": 2147483648, "unit": "B"},
                        "usage": {"gfx": {"value": 0, "unit": "ns"}},
                    }
                }
            ],
        }
    ]
)


def test_amd_smi_json_value_objects_units_and_processes():
    (g,) = parse_amd_smi(AMD_LIST, AMD_STATIC, AMD_METRIC, AMD_PROCESS)
    assert (g.index, g.name, g.uuid) == (0, "AMD Instinct MI300X", "b6ff74a1-0000-1000-8003-6c1e4d4c95d3")
    assert (g.util_pct, g.mem_used_mib, g.mem_total_mib) == (12.0, 2331.0, 196592.0)
    assert (g.sm_clock_mhz, g.mem_clock_mhz, g.temp_c, g.power_w) == (1407.0, 1300.0, 44.0, 140.0)
    assert g.throttle == ()
    assert [(p.pid, p.name, p.mem_mib) for p in g.processes] == [(90210, "python3", 2048.0)]


def test_amd_smi_older_list_shape_and_no_process_text():
    metric = json.dumps(
        [
            {
                "gpu": 0,
                "usage": {"gfx_activity": "100 %"},
                "mem_usage": {"used_vram": "65536 MB", "total_vram": "196592 MB"},
            }
        ]
    )
    procs = json.dumps([{"gpu": 0, "process_list": [{"process_info": "No running processes detected"}]}])
    (g,) = parse_amd_smi(None, None, metric, procs)
    assert (g.util_pct, g.mem_used_mib, g.name, g.uuid) == (100.0, 65536.0, NA, NA)
    assert g.processes == ()
    (g,) = parse_amd_smi(None, None, metric, None)
    assert g.processes is NA
    assert parse_amd_smi(None, None, "not json", None) == []


# ---------------------------------------------------------------------------------------
# Backends running executables


def tool(bindir: Path, name: str, body: str) -> None:
    path = bindir / name
    path.write_text("#!/bin/bash\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


@pytest.fixture
def bindir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "bin"
    d.mkdir()
    monkeypatch.setenv("PATH", f"{d}{os.pathsep}/usr/bin{os.pathsep}/bin")
    return d


def test_nvidia_smi_backend_retries_without_a_field_the_driver_rejects(bindir, tmp_path):
    (tmp_path / "gpus.csv").write_text(NVIDIA_GPUS)
    (tmp_path / "apps.csv").write_text(NVIDIA_APPS)
    tool(
        bindir,
        "nvidia-smi",
        f"""
echo "$@" >> {tmp_path}/calls
case "$1" in
  *clocks_event_reasons.active*) echo 'Field "clocks_event_reasons.active" is not a valid field to query.'; exit 2;;
  --query-gpu=*) cat {tmp_path}/gpus.csv;;
  --query-compute-apps=*) cat {tmp_path}/apps.csv;;
esac
""",
    )
    backend = NvidiaSmiBackend()
    gpus = backend.read()
    assert [g.index for g in gpus] == [0, 1, 2]
    assert gpus[1].throttle == ("sw_power_cap",) and len(gpus[1].processes) == 2
    assert "clocks_throttle_reasons.active" in backend.fields
    assert backend.status == f"nvidia-smi ({bindir / 'nvidia-smi'})"
    backend.read()  # remembers the field that worked: no second rejection
    calls = (tmp_path / "calls").read_text().splitlines()
    assert sum("clocks_event_reasons.active" in c for c in calls) == 1
    assert len(calls) == 5


def test_nvidia_smi_backend_failures_read_nothing_with_the_reason(bindir, monkeypatch):
    assert NvidiaSmiBackend().read() == []  # not on PATH
    tool(
        bindir,
        "nvidia-smi",
        'echo "NVIDIA-SMI has failed because it couldn\'t communicate with the NVIDIA driver."; exit 9\n',
    )
    backend = NvidiaSmiBackend()
    assert backend.read() == []
    assert backend.status == (
        "nvidia-smi failed: exit 9: NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."
    )
    tool(bindir, "nvidia-smi", "sleep 5\n")
    monkeypatch.setattr(smi, "TIMEOUT_S", 0.3)
    hung = NvidiaSmiBackend()
    assert hung.read() == [] and "no answer within" in hung.status


def test_rocm_smi_backend_reads_metrics_and_pids(bindir, tmp_path):
    (tmp_path / "m.json").write_text(
        "WARNING: AMD GPU device(s) is/are in a low-power state.\n"
        + json.dumps({"card0": json.loads(ROCM_METRICS)["card0"]})
    )
    tool(
        bindir,
        "rocm-smi",
        f"""
if [ "$1" = "--showpids" ]; then echo '{ROCM_PIDS}'; exit 0; fi
cat {tmp_path}/m.json; exit 2   # rocm-smi exits non-zero when one sub-query failed
""",
    )
    (g,) = RocmSmiBackend().read()
    assert g.util_pct == 0.0 and [p.pid for p in g.processes] == [2877461, 77]


def test_rocm_smi_backend_with_no_kfd_process_prints_nothing(bindir, tmp_path):
    (tmp_path / "m.json").write_text(json.dumps({"card0": {"GPU use (%)": "0"}}))
    tool(bindir, "rocm-smi", f'[ "$1" = "--showpids" ] && exit 0\ncat {tmp_path}/m.json\n')
    (g,) = RocmSmiBackend().read()
    assert g.processes == ()


def test_amd_smi_backend_reads_identity_once(bindir, tmp_path):
    for name, content in (("list", AMD_LIST), ("static", AMD_STATIC), ("metric", AMD_METRIC), ("process", AMD_PROCESS)):
        (tmp_path / f"{name}.json").write_text(content)
    tool(bindir, "amd-smi", f'echo "$1" >> {tmp_path}/calls\ncat {tmp_path}/$1.json\n')
    backend = AmdSmiCliBackend()
    (g,) = backend.read()
    backend.read()
    assert g.name == "AMD Instinct MI300X" and g.processes[0].pid == 90210
    assert (tmp_path / "calls").read_text().split() == ["metric", "list", "static", "process", "metric", "process"]
