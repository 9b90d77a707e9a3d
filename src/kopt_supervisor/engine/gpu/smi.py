"""Backends that run the vendor command-line tools: nvidia-smi, amd-smi, rocm-smi.

The fallbacks when the Python bindings are missing. Each `read()` runs the tool (a real
subprocess with a timeout) and hands its text to `smi_parse`. A tool that is not on PATH,
fails, hangs or prints nothing usable makes `read()` return [] with the reason in `status`.

nvidia-smi rejects the whole query when one field is unknown to the installed driver
('Field "x" is not a valid field to query.'); the backend then retries without that field
(`clocks_event_reasons.active` first falls back to its old name
`clocks_throttle_reasons.active`) and remembers the fields that worked.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable, Sequence

from kopt_supervisor.engine.gpu import smi_parse
from kopt_supervisor.engine.gpu.base import GpuState

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
