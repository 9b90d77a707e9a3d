"""The vendor command-line tools (nvidia-smi, amd-smi, rocm-smi): the pure parsers of their
machine-readable output, and the backends that run them (at the end, below), the fallbacks when
the Python bindings (engine/gpu/backends.py) are missing.

- `nvidia-smi --query-gpu=<fields> --format=csv,noheader,nounits` and
  `nvidia-smi --query-compute-apps=gpu_uuid,pid,process_name,used_memory --format=csv,noheader,nounits`:
  one line per GPU/process, values joined by ", "; unreadable values print as "[N/A]",
  "[Not Supported]", "[Unknown Error]" and similar (all NA here).
- `rocm-smi ... --json`: {"card0": {"GPU use (%)": "3", "VRAM Total Used Memory (B)": "…"}};
  `rocm-smi --showpids --json`: {"system": {"PID1234": "python3, 1, 2147483648, 0, 100"}}
  (name, number of GPUs, VRAM bytes, SDMA, CU occupancy; the name lower-cased and its spaces
  turned into ", " by rocm-smi's own printer). rocm-smi does not say *which* GPU a process
  uses, so with several GPUs processes are attributed only when there are none at all.
- `amd-smi list|static --asic|metric|process --json`: a list of {"gpu": N, ...} (ROCm 6.0–6.3)
  or {"gpu_data": [...]} (6.4+); values are {"value": v, "unit": u}, bare numbers, "512 MB"
  strings, or "N/A".

Each parser returns `GpuState`s with NA for whatever the text does not hold.

Each backend's `read()` runs the tool (a real subprocess with a timeout) and hands its text to
the parsers. A tool that is not on PATH, fails, hangs or prints nothing usable makes `read()`
return [] with the reason in `status`. nvidia-smi rejects the whole query when one field is
unknown to the installed driver ('Field "x" is not a valid field to query.'); the backend then
retries without that field (`clocks_event_reasons.active` first falls back to its old name
`clocks_throttle_reasons.active`) and remembers the fields that worked.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Callable, Sequence
from typing import Any

from kopt_supervisor.engine.gpu import (
    NA,
    GpuProcess,
    GpuState,
    number,
    nvidia_throttle_names,
    text,
)

_MIB = 1024 * 1024

# ---------------------------------------------------------------------------------------
# nvidia-smi

NVIDIA_SMI_FIELDS = (
    "index",
    "uuid",
    "name",
    "utilization.gpu",
    "memory.used",
    "memory.total",
    "clocks.sm",
    "clocks.mem",
    "temperature.gpu",
    "power.draw",
    "clocks_event_reasons.active",
)
NVIDIA_SMI_REQUIRED = ("index", "uuid", "name", "utilization.gpu", "memory.used", "memory.total")
NVIDIA_SMI_APPS = "gpu_uuid,pid,process_name,used_memory"
_INVALID_FIELD = re.compile(r'Field "([^"]+)" is not a valid field to query')


def invalid_field(output: str) -> str | None:
    """The field nvidia-smi rejected ('Field "x" is not a valid field to query.')."""
    m = _INVALID_FIELD.search(output)
    return m.group(1) if m else None


def _smi_value(raw: str) -> Any:
    raw = raw.strip()
    if not raw or raw.startswith("[") or raw.upper() == "N/A":
        return NA
    return raw


def parse_nvidia_smi(gpu_csv: str, fields: Sequence[str], apps_csv: str | None) -> list[GpuState]:
    """GPUs from the --query-gpu CSV; processes from the --query-compute-apps CSV (None: unread)."""
    apps = parse_nvidia_smi_apps(apps_csv) if apps_csv is not None else None
    gpus = []
    for line in gpu_csv.splitlines():
        if not line.strip():
            continue
        values = [v.strip() for v in line.split(",")]
        if len(values) != len(fields):
            continue  # a warning line or a name with a comma: not a row we can trust
        row = dict(zip(fields, values, strict=True))
        try:
            index = int(row["index"])
        except ValueError:
            continue
        uuid = text(_smi_value(row["uuid"]))
        throttle_raw = _smi_value(
            row.get("clocks_event_reasons.active") or row.get("clocks_throttle_reasons.active") or ""
        )
        try:
            throttle = NA if throttle_raw is NA else nvidia_throttle_names(int(throttle_raw, 16))
        except ValueError:
            throttle = NA
        na = {f: row[f] or "empty" for f in fields if _smi_value(row[f]) is NA}
        gpus.append(
            GpuState(
                index=index,
                name=text(_smi_value(row["name"])),
                uuid=uuid,
                util_pct=number(_smi_value(row["utilization.gpu"])),
                mem_used_mib=number(_smi_value(row["memory.used"])),
                mem_total_mib=number(_smi_value(row["memory.total"])),
                processes=NA if apps is None else tuple(apps.get(uuid, ())),
                sm_clock_mhz=number(_smi_value(row.get("clocks.sm", ""))),
                mem_clock_mhz=number(_smi_value(row.get("clocks.mem", ""))),
                temp_c=number(_smi_value(row.get("temperature.gpu", ""))),
                power_w=number(_smi_value(row.get("power.draw", ""))),
                throttle=throttle,
                vendor="nvidia",
                backend="nvidia-smi",
                extra={"na": na},
            )
        )
    return gpus


def parse_nvidia_smi_apps(apps_csv: str) -> dict[str, list[GpuProcess]]:
    """{gpu uuid: processes}. The process name may itself hold ", ": uuid and pid are the first
    two values, the memory the last, and the name all between."""
    out: dict[str, list[GpuProcess]] = {}
    for line in apps_csv.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 4:
            continue  # "No running processes found" and the like
        try:
            pid = int(parts[1])
        except ValueError:
            continue
        name = text(_smi_value(", ".join(parts[2:-1])))
        out.setdefault(parts[0], []).append(GpuProcess(pid=pid, name=name, mem_mib=number(_smi_value(parts[-1]))))
    return out


# ---------------------------------------------------------------------------------------
# rocm-smi

ROCM_SMI_ARGS = (
    "--showid",
    "--showuniqueid",
    "--showproductname",
    "--showuse",
    "--showmeminfo",
    "vram",
    "--showpower",
    "--showtemp",
    "--showclocks",
    "--json",
)


def _loads(raw: str | None) -> Any:
    """JSON from a tool's stdout, skipping warning lines printed before it."""
    if raw is None:
        return None
    start = min((i for i in (raw.find("{"), raw.find("[")) if i >= 0), default=-1)
    if start < 0:
        return None
    try:
        return json.loads(raw[start:])
    except ValueError:
        return None


def _first(d: dict[str, Any], *keys: str) -> Any:
    for k in keys:
        v = d.get(k.lower())
        if v is not None and text(str(v)) is not NA:
            return v
    return NA


def _mhz(raw: Any) -> Any:
    m = re.search(r"([\d.]+)\s*mhz", str(raw), re.IGNORECASE)
    return float(m.group(1)) if m else NA


def parse_rocm_smi_pids(pids_json: str | None) -> list[tuple[GpuProcess, Any]] | None:
    """[(process, number of GPUs it uses)] from `rocm-smi --showpids --json`; None: unreadable."""
    data = _loads(pids_json)
    if data is None:
        return None
    system = data.get("system", {}) if isinstance(data, dict) else {}
    out = []
    for key, value in system.items():
        if not key.startswith("PID"):
            continue
        try:
            pid = int(key[3:])
        except ValueError:
            continue
        parts = [p.strip() for p in str(value).split(",")]
        if len(parts) >= 5:
            name = " ".join(parts[:-4])
            ngpus, vram = number(parts[-4]), number(parts[-3])
        else:
            name, ngpus, vram = parts[0], NA, NA
        out.append((GpuProcess(pid=pid, name=text(name), mem_mib=NA if vram is NA else vram / _MIB), ngpus))
    return out


def parse_rocm_smi(metrics_json: str, pids_json: str | None) -> list[GpuState]:
    data = _loads(metrics_json)
    if not isinstance(data, dict):
        return []
    cards = []
    for key, fields in data.items():
        m = re.fullmatch(r"card(\d+)", key)
        if m and isinstance(fields, dict):
            cards.append((int(m.group(1)), {k.lower().strip(): v for k, v in fields.items()}))
    cards.sort()
    procs = parse_rocm_smi_pids(pids_json)
    note = None
    if procs is None:
        per_gpu: Any = NA
    elif not procs:
        per_gpu = ()
    elif len(cards) == 1:
        per_gpu = tuple(p for p, _ in procs)
    else:
        per_gpu = NA
        note = "rocm-smi lists compute processes without their GPU; with several GPUs they are NA"
    gpus = []
    for index, f in cards:
        used = number(_first(f, "VRAM Total Used Memory (B)"))
        total = number(_first(f, "VRAM Total Memory (B)"))
        extra: dict[str, Any] = {"na": {}}
        if note:
            extra["note"] = note
            extra["host_processes"] = [{"pid": p.pid, "name": p.name} for p, _ in procs or []]
        gpus.append(
            GpuState(
                index=index,
                name=text(str(_first(f, "Card Series", "Device Name", "Card Model"))),
                uuid=text(str(_first(f, "Unique ID", "GUID"))),
                util_pct=number(_first(f, "GPU use (%)")),
                mem_used_mib=NA if used is NA else used / _MIB,
                mem_total_mib=NA if total is NA else total / _MIB,
                processes=per_gpu,
                sm_clock_mhz=_mhz(_first(f, "sclk clock speed:")),
                mem_clock_mhz=_mhz(_first(f, "mclk clock speed:")),
                temp_c=number(_first(f, "Temperature (Sensor edge) (C)", "Temperature (Sensor junction) (C)")),
                power_w=number(
                    _first(f, "Current Socket Graphics Package Power (W)", "Average Graphics Package Power (W)")
                ),
                vendor="amd",
                backend="rocm-smi",
                extra=extra,
            )
        )
    return gpus


# ---------------------------------------------------------------------------------------
# amd-smi

AMD_SMI_METRIC_ARGS = ("metric", "--usage", "--mem-usage", "--power", "--temperature", "--clock", "--json")
_UNIT_TO_MIB = {"b": 1 / _MIB, "kb": 1 / 1024, "kib": 1 / 1024, "mb": 1.0, "mib": 1.0, "gb": 1024.0, "gib": 1024.0}


def _entries(raw: str | None) -> dict[int, dict[str, Any]] | None:
    """{gpu index: entry} from any amd-smi JSON shape; None when unreadable."""
    data = _loads(raw)
    if isinstance(data, dict):
        data = data.get("gpu_data", data.get("gpu", None))
    if not isinstance(data, list):
        return None
    out = {}
    for e in data:
        if isinstance(e, dict) and isinstance(e.get("gpu"), int):
            out[e["gpu"]] = e
    return out


def _amd_value(v: Any) -> tuple[Any, str]:
    """(number or NA, unit) from {"value": v, "unit": u}, a bare number, or "512 MB"."""
    if isinstance(v, dict):
        value, unit = v.get("value"), str(v.get("unit", ""))
        return number(value), unit
    if isinstance(v, str):
        m = re.fullmatch(r"\s*(-?[\d.]+)\s*([A-Za-z%]*)\s*", v)
        return (float(m.group(1)), m.group(2)) if m else (NA, "")
    return number(v), ""


def _amd_mib(v: Any, default_unit: str) -> Any:
    value, unit = _amd_value(v)
    if value is NA:
        return NA
    return value * _UNIT_TO_MIB.get((unit or default_unit).lower(), 1.0)


def _dig(d: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(d, dict):
            return None
        d = d.get(key)
    return d


def _amd_processes(entry: dict[str, Any] | None) -> Any:
    if entry is None:
        return NA
    plist = entry.get("process_list", [])
    if isinstance(plist, dict):
        plist = [plist]
    out = []
    for item in plist if isinstance(plist, list) else []:
        info = item.get("process_info", item) if isinstance(item, dict) else None
        if not isinstance(info, dict) or "pid" not in info:
            continue  # "No running processes detected"
        try:
            pid = int(info["pid"])
        except (TypeError, ValueError):
            continue
        mem = _dig(info, "memory_usage", "vram_mem")
        if mem is None:
            mem = info.get("mem_usage", info.get("mem"))
        out.append(GpuProcess(pid=pid, name=text(info.get("name")), mem_mib=_amd_mib(mem, "B")))
    return tuple(out)


def parse_amd_smi(
    list_json: str | None, static_json: str | None, metric_json: str, process_json: str | None
) -> list[GpuState]:
    metrics = _entries(metric_json)
    if metrics is None:
        return []
    ids = _entries(list_json) or {}
    static = _entries(static_json) or {}
    procs = _entries(process_json)
    gpus = []
    for index in sorted(metrics):
        m = metrics[index]
        power = _dig(m, "power") or {}
        temp = _dig(m, "temperature") or {}
        clock = _dig(m, "clock") or {}
        throttle_status = text(power.get("throttle_status")) if isinstance(power, dict) else NA
        gpus.append(
            GpuState(
                index=index,
                name=text(_dig(static.get(index), "asic", "market_name")),
                uuid=text(_dig(ids.get(index), "uuid")),
                util_pct=_amd_value(_dig(m, "usage", "gfx_activity"))[0],
                mem_used_mib=_amd_mib(_dig(m, "mem_usage", "used_vram"), "MB"),
                mem_total_mib=_amd_mib(_dig(m, "mem_usage", "total_vram"), "MB"),
                processes=NA if procs is None else _amd_processes(procs.get(index, {"process_list": []})),
                sm_clock_mhz=_amd_value(_dig(clock, "gfx_0", "clk"))[0],
                mem_clock_mhz=_amd_value(_dig(clock, "mem_0", "clk"))[0],
                temp_c=next((v for v in (_amd_value(temp.get(k))[0] for k in ("edge", "hotspot")) if v is not NA), NA)
                if isinstance(temp, dict)
                else NA,
                power_w=next(
                    (
                        v
                        for v in (
                            _amd_value(power.get(k))[0]
                            for k in ("socket_power", "current_socket_power", "average_socket_power")
                        )
                        if v is not NA
                    ),
                    NA,
                )
                if isinstance(power, dict)
                else NA,
                throttle=NA
                if throttle_status is NA
                else (("throttled",) if throttle_status.upper() == "THROTTLED" else ()),
                vendor="amd",
                backend="amd-smi",
                extra={"na": {}},
            )
        )
    return gpus


# ---------------------------------------------------------------------------------------
# The command-line tools

TIMEOUT_S = 20.0

Run = Callable[[Sequence[str]], tuple[int, str, str]]


def run_command(argv: Sequence[str]) -> tuple[int, str, str]:
    """(exit status, stdout, stderr); 127 when the tool cannot start, 124 when it hangs."""
    try:
        p = subprocess.run(list(argv), capture_output=True, text=True, timeout=TIMEOUT_S, stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        return 127, "", f"{argv[0]}: not found"
    except subprocess.TimeoutExpired:
        return 124, "", f"{argv[0]}: no answer within {TIMEOUT_S:.0f} s"
    except OSError as exc:
        return 126, "", f"{argv[0]}: {exc.strerror}"
    return p.returncode, p.stdout, p.stderr


def _tail(rc: int, out: str, err: str) -> str:
    lines = [ln.strip() for ln in (err + "\n" + out).splitlines() if ln.strip()]
    return f"exit {rc}: {lines[-1][:160]}" if lines else f"exit {rc}"


class _SmiBackend:
    exe: str = ""

    def __init__(self, exe: str | None = None, run: Run = run_command) -> None:
        self.exe = exe or self.exe
        self.run = run
        self.status = "not started"

    def _path(self) -> str | None:
        path = shutil.which(self.exe)
        if path is None:
            self.status = f"{self.exe} is not on PATH"
        return path

    def close(self) -> None:
        pass


class NvidiaSmiBackend(_SmiBackend):
    name = "nvidia-smi"
    vendor = "nvidia"
    exe = "nvidia-smi"

    def __init__(self, exe: str | None = None, run: Run = run_command) -> None:
        super().__init__(exe, run)
        self.fields = list(NVIDIA_SMI_FIELDS)

    def read(self) -> list[GpuState]:
        path = self._path()
        if path is None:
            return []
        gpu_csv = self._query_gpus(path)
        if gpu_csv is None:
            return []
        rc, apps, _err = self.run([path, f"--query-compute-apps={NVIDIA_SMI_APPS}", "--format=csv,noheader,nounits"])
        gpus = parse_nvidia_smi(gpu_csv, self.fields, apps if rc == 0 else None)
        self.status = f"nvidia-smi ({path})" if gpus else f"nvidia-smi printed no GPU: {gpu_csv.strip()[:120]!r}"
        return gpus

    def _query_gpus(self, path: str) -> str | None:
        for _attempt in range(len(NVIDIA_SMI_FIELDS)):
            rc, out, err = self.run([path, f"--query-gpu={','.join(self.fields)}", "--format=csv,noheader,nounits"])
            if rc == 0:
                return out
            bad = invalid_field(out + "\n" + err)
            if bad is None or bad not in self.fields or bad in NVIDIA_SMI_REQUIRED:
                self.status = f"nvidia-smi failed: {_tail(rc, out, err)}"
                return None
            if bad == "clocks_event_reasons.active":
                self.fields[self.fields.index(bad)] = "clocks_throttle_reasons.active"
            else:
                self.fields.remove(bad)
        self.status = "nvidia-smi rejected every optional field"
        return None


class AmdSmiCliBackend(_SmiBackend):
    name = "amd-smi"
    vendor = "amd"
    exe = "amd-smi"

    def __init__(self, exe: str | None = None, run: Run = run_command) -> None:
        super().__init__(exe, run)
        self._ids: tuple[str | None, str | None] | None = None  # list/static: read once

    def read(self) -> list[GpuState]:
        path = self._path()
        if path is None:
            return []
        rc, metric, err = self.run([path, *AMD_SMI_METRIC_ARGS])
        if rc != 0:
            self.status = f"amd-smi metric failed: {_tail(rc, metric, err)}"
            return []
        if self._ids is None:
            rc_l, listing, _ = self.run([path, "list", "--json"])
            rc_s, static, _ = self.run([path, "static", "--asic", "--json"])
            self._ids = (listing if rc_l == 0 else None, static if rc_s == 0 else None)
        rc_p, procs, _ = self.run([path, "process", "--json"])
        gpus = parse_amd_smi(*self._ids, metric, procs if rc_p == 0 else None)
        self.status = f"amd-smi ({path})" if gpus else "amd-smi printed no GPU"
        return gpus


class RocmSmiBackend(_SmiBackend):
    name = "rocm-smi"
    vendor = "amd"
    exe = "rocm-smi"

    def read(self) -> list[GpuState]:
        path = self._path()
        if path is None:
            return []
        rc, out, err = self.run([path, *ROCM_SMI_ARGS])
        if rc != 0 and "{" not in out:  # rocm-smi exits non-zero when one sub-query fails
            self.status = f"rocm-smi failed: {_tail(rc, out, err)}"
            return []
        rc_p, pids, _ = self.run([path, "--showpids", "--json"])
        # No JSON at all but success: rocm-smi had no KFD process to print.
        pids_json = pids if "{" in pids else ("{}" if rc_p == 0 else None)
        gpus = parse_rocm_smi(out, pids_json)
        self.status = f"rocm-smi ({path})" if gpus else "rocm-smi printed no GPU"
        return gpus
