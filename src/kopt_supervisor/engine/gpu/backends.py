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

The scripted fake backend (docs/design.md §10), for tests and demos:
`KOPT_FAKE_GPUS=path.json` holds a JSON list of snapshots, each a list of GPUs
`{index, name, uuid, util_pct, mem_used_mib, mem_total_mib, processes: [{pid, name, mem_mib}]}`.
Each `read()` takes the next snapshot; the last one repeats. A GPU missing from a snapshot
has vanished. Optional per GPU: `vendor` ("nvidia" or "amd"), `sm_clock_mhz`,
`mem_clock_mhz`, `temp_c`, `power_w`, `throttle` (list of reasons), `throttle_counters`
({name: cumulative value}); per process `user`. A field given as null reads as NA
(`"processes": null`: the backend cannot list processes).

The command-line backends (nvidia-smi, amd-smi, rocm-smi) are here too: the fallbacks when
the Python bindings (engine/gpu/bindings.py) are missing. Each `read()` runs the tool (a real
subprocess with a timeout) and hands its text to the pure parsers of engine/gpu/smi_parse.py.
A tool that is not on PATH, fails, hangs or prints nothing usable makes `read()` return []
with the reason in `status`. nvidia-smi rejects the whole query when one field is unknown to
the installed driver ('Field "x" is not a valid field to query.'); the backend then retries
without that field (`clocks_event_reasons.active` first falls back to its old name
`clocks_throttle_reasons.active`) and remembers the fields that worked.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from kopt_supervisor.engine import BadInput
from kopt_supervisor.engine.gpu import NA, Backend, GpuProcess, GpuState, smi_parse
from kopt_supervisor.engine.gpu.bindings import AmdSmiBackend, NvmlBackend

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
        self.fields = list(smi_parse.NVIDIA_SMI_FIELDS)

    def read(self) -> list[GpuState]:
        path = self._path()
        if path is None:
            return []
        gpu_csv = self._query_gpus(path)
        if gpu_csv is None:
            return []
        rc, apps, _err = self.run(
            [path, f"--query-compute-apps={smi_parse.NVIDIA_SMI_APPS}", "--format=csv,noheader,nounits"]
        )
        gpus = smi_parse.parse_nvidia_smi(gpu_csv, self.fields, apps if rc == 0 else None)
        self.status = f"nvidia-smi ({path})" if gpus else f"nvidia-smi printed no GPU: {gpu_csv.strip()[:120]!r}"
        return gpus

    def _query_gpus(self, path: str) -> str | None:
        for _attempt in range(len(smi_parse.NVIDIA_SMI_FIELDS)):
            rc, out, err = self.run([path, f"--query-gpu={','.join(self.fields)}", "--format=csv,noheader,nounits"])
            if rc == 0:
                return out
            bad = smi_parse.invalid_field(out + "\n" + err)
            if bad is None or bad not in self.fields or bad in smi_parse.NVIDIA_SMI_REQUIRED:
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
        rc, metric, err = self.run([path, *smi_parse.AMD_SMI_METRIC_ARGS])
        if rc != 0:
            self.status = f"amd-smi metric failed: {_tail(rc, metric, err)}"
            return []
        if self._ids is None:
            rc_l, listing, _ = self.run([path, "list", "--json"])
            rc_s, static, _ = self.run([path, "static", "--asic", "--json"])
            self._ids = (listing if rc_l == 0 else None, static if rc_s == 0 else None)
        rc_p, procs, _ = self.run([path, "process", "--json"])
        gpus = smi_parse.parse_amd_smi(*self._ids, metric, procs if rc_p == 0 else None)
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
        rc, out, err = self.run([path, *smi_parse.ROCM_SMI_ARGS])
        if rc != 0 and "{" not in out:  # rocm-smi exits non-zero when one sub-query fails
            self.status = f"rocm-smi failed: {_tail(rc, out, err)}"
            return []
        rc_p, pids, _ = self.run([path, "--showpids", "--json"])
        # No JSON at all but success: rocm-smi had no KFD process to print.
        pids_json = pids if "{" in pids else ("{}" if rc_p == 0 else None)
        gpus = smi_parse.parse_rocm_smi(out, pids_json)
        self.status = f"rocm-smi ({path})" if gpus else "rocm-smi printed no GPU"
        return gpus


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
