"""The software environment a run measured under, as far as kopt can honestly know it.

`capture_environment(cfg, worktree)` returns a JSON-able dict:

- host, platform, and kopt's own Python;
- the bench's Python: the interpreter the bench command starts (its first word after
  `VAR=value` assignments and `env`, a `python*` on PATH, or the `#!` line of a script it
  names), asked in a short subprocess (cwd = the worktree, the target's [target].env) for
  its version and the installed torch (with the CUDA/HIP it was built for) and triton
  versions, read from package metadata and torch/version.py without importing torch.
  When the bench starts no Python kopt can see (a shell script, `uv run ...`), kopt's own
  interpreter is asked instead and the record says so;
- the GPU driver and CUDA/ROCm versions: NVML (nvidia-ml-py) or `nvidia-smi`'s header
  on NVIDIA; `amd-smi version`, /opt/rocm/.info/version or `rocm-smi --showdriverversion`
  on AMD; each value names where it came from, and one that cannot be read is None with
  the reason;
- [target].compile_flags and [target].env as the target declares them.

The loop should call it once, after the baseline is measured, and store it as meta
`environment`; `kopt report` falls back to capturing at report time and says so. The
parsers are pure and tested on captured tool output; the probes never raise.
"""

from __future__ import annotations

import importlib
import json
import os
import platform
import re
import shlex
import shutil
import socket
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from kopt_supervisor.engine.config import Config
from kopt_supervisor.engine.runner.command import run as run_command

PROBE_TIMEOUT_S = 60.0
PYTHON_RE = re.compile(r"^(python|pypy)(\d+(\.\d+)*)?$")
ENV_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
ENV_OPTIONS_WITH_VALUE = ("-u", "--unset", "-C", "--chdir", "-S", "--split-string")

# Runs inside the bench's interpreter. It imports nothing heavy: versions come from package
# metadata, and torch's build (CUDA/HIP) from torch/version.py, executed on its own.
PROBE = r"""
import json, sys, platform, importlib.util, importlib.metadata as md
out = {"executable": sys.executable, "version": sys.version.split()[0], "implementation": platform.python_implementation()}
def ver(*names):
    for n in names:
        try:
            return md.version(n)
        except Exception:
            pass
    return None
out["torch"] = ver("torch")
out["triton"] = ver("triton", "pytorch-triton", "pytorch-triton-rocm", "triton-rocm")
out["numpy"] = ver("numpy")
try:
    spec = importlib.util.find_spec("torch")
    locs = list(spec.submodule_search_locations or []) if spec else []
    if locs:
        ns = {}
        with open(locs[0] + "/version.py") as f:
            exec(compile(f.read(), "torch/version.py", "exec"), ns)
        out["torch_cuda"] = ns.get("cuda")
        out["torch_hip"] = ns.get("hip")
        out["torch_git"] = ns.get("git_version")
except Exception as e:
    out["torch_build_error"] = str(e)[:200]
print("KOPT_ENV " + json.dumps(out))
"""

Run = Callable[[Sequence[str]], tuple[int, str, str]]


def capture_environment(cfg: Config, worktree: str | Path, *, run: Run | None = None) -> dict[str, Any]:
    """Everything the report says about the environment; never raises."""
    from kopt_supervisor.engine.gpu.backends import run_command

    run = run or run_command
    target_env = dict(cfg.target.env)
    return {
        "captured_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "kopt_python": {"executable": sys.executable, "version": sys.version.split()[0]},
        "bench_python": bench_python(cfg.target.bench, Path(worktree), target_env),
        "gpu_software": gpu_software(cfg.gpu.vendor, run),
        "compile_flags": cfg.target.compile_flags,
        "target_env": target_env,
    }


# ---------------------------------------------------------------------------------------
# The bench's interpreter


def bench_interpreter(command: str, cwd: Path, path_env: str | None) -> tuple[str | None, str]:
    """(interpreter path or None, how it was found) for a bench command."""
    try:
        words = shlex.split(command)
    except ValueError:
        return None, "the bench command cannot be split into words"
    i = 0
    while i < len(words) and (ENV_ASSIGNMENT.match(words[i]) or words[i] in ("env", "exec", "command")):
        was_env = words[i] == "env"
        i += 1
        while was_env and i < len(words) and words[i].startswith("-"):  # env's own options
            i += 2 if words[i] in ENV_OPTIONS_WITH_VALUE else 1
    if i >= len(words):
        return None, "the bench command names no program"
    first = words[i]
    name = Path(first).name
    if PYTHON_RE.match(name):
        found = _which(first, cwd, path_env)
        return (found, f"`{first}` from the bench command") if found else (None, f"`{first}` is not on PATH")
    script = _which(first, cwd, path_env)
    if script is None:
        return None, f"`{first}` (the bench's program) was not found"
    interp = _shebang_python(Path(script), cwd, path_env)
    if interp:
        return interp, f"the #! line of `{first}`"
    return None, f"the bench starts `{first}`, not a Python interpreter kopt can see"


def _which(program: str, cwd: Path, path_env: str | None) -> str | None:
    if "/" in program:
        p = Path(program) if Path(program).is_absolute() else cwd / program
        return str(p) if p.is_file() and os.access(p, os.X_OK) else None
    return shutil.which(program, path=path_env)


def _shebang_python(script: Path, cwd: Path, path_env: str | None) -> str | None:
    try:
        with open(script, "rb") as f:
            first = f.readline(512).decode(errors="replace").strip()
    except OSError:
        return None
    if not first.startswith("#!"):
        return None
    parts = first[2:].split()
    if parts and Path(parts[0]).name == "env":
        parts = [p for p in parts[1:] if not p.startswith("-")]
    if parts and PYTHON_RE.match(Path(parts[0]).name):
        return _which(parts[0], cwd, path_env)
    return None


def bench_python(command: str, worktree: Path, target_env: Mapping[str, str]) -> dict[str, Any]:
    path_env = target_env.get("PATH", os.environ.get("PATH"))
    cwd = worktree if worktree.is_dir() else Path.cwd()
    interp, how = bench_interpreter(command, cwd, path_env)
    info: dict[str, Any] = {"found_by": how}
    if interp is None:
        interp = sys.executable
        info["found_by"] = f"{how}; these are kopt's own interpreter's versions"
        info["is_kopt_interpreter"] = True
    info.update(probe_python(interp, cwd, target_env))
    return info


def probe_python(interpreter: str, cwd: Path, env: Mapping[str, str]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="kopt-env-") as logs:
        try:
            res = run_command(
                [interpreter, "-c", PROBE],
                cwd=cwd,
                log_dir=logs,
                name="probe",
                timeout_s=PROBE_TIMEOUT_S,
                env=dict(env),
            )
        except OSError as e:
            return {"error": f"cannot start {interpreter}: {e.strerror}"}
        out = res.stdout_path.read_text(errors="replace")
        err = res.tail(3)
    return parse_probe(out) or {"error": f"{interpreter} {res.why()}: {err.strip()[-200:] or 'no output'}"}


def parse_probe(stdout: str) -> dict[str, Any] | None:
    for line in stdout.splitlines():
        if line.startswith("KOPT_ENV "):
            try:
                data = json.loads(line[len("KOPT_ENV ") :])
            except ValueError:
                return None
            return data if isinstance(data, dict) else None
    return None


# ---------------------------------------------------------------------------------------
# Driver and CUDA/ROCm


def gpu_software(vendor: str, run: Run, *, nvml: ModuleType | None = None) -> dict[str, Any]:
    """Driver and CUDA/ROCm versions with their sources; None values carry a reason.
    `nvml`: the pynvml module to use (default: import it)."""
    if os.environ.get("KOPT_FAKE_GPUS"):
        return {"vendor": "fake", "note": "scripted GPUs (KOPT_FAKE_GPUS): no driver to read"}
    if vendor == "none":
        return {"vendor": "none", "note": '[gpu].vendor = "none": CPU-only target'}
    notes: list[str] = []
    if vendor in ("auto", "nvidia"):
        got = nvidia_software(run, notes, nvml)
        if got:
            return got
    if vendor in ("auto", "amd"):
        got = amd_software(run, notes)
        if got:
            return got
    return {"vendor": vendor, "driver": None, "note": "; ".join(notes) or "no GPU software found"}


def nvidia_software(run: Run, notes: list[str], pynvml: ModuleType | None = None) -> dict[str, Any] | None:
    if pynvml is None:
        try:
            pynvml = importlib.import_module("pynvml")
        except ImportError:
            notes.append("NVML: nvidia-ml-py is not installed")
    if pynvml is not None:
        try:
            pynvml.nvmlInit()
            try:
                driver = _text(pynvml.nvmlSystemGetDriverVersion())
                getter = (
                    getattr(pynvml, "nvmlSystemGetCudaDriverVersion_v2", None) or pynvml.nvmlSystemGetCudaDriverVersion
                )
                cuda = cuda_version_from_int(int(getter()))
            finally:
                pynvml.nvmlShutdown()
            return {"vendor": "nvidia", "driver": driver, "cuda_driver": cuda, "source": "NVML"}
        except Exception as e:  # no driver, no GPU, an old library: fall back to the CLI
            notes.append(f"NVML: {str(e) or type(e).__name__}")
    rc, out, err = run(["nvidia-smi"])
    if rc != 0:
        notes.append(f"nvidia-smi: {(err or out).strip().splitlines()[-1] if (err or out).strip() else f'exit {rc}'}")
        return None
    parsed = parse_nvidia_smi_header(out)
    if not parsed:
        notes.append("nvidia-smi: no 'Driver Version' in its output")
        return None
    return {"vendor": "nvidia", **parsed, "source": "nvidia-smi"}


def amd_software(run: Run, notes: list[str]) -> dict[str, Any] | None:
    rc, out, err = run(["amd-smi", "version"])
    if rc == 0:
        parsed = parse_amd_smi_version(out)
        if parsed.get("rocm"):
            return {"vendor": "amd", **parsed, "source": "amd-smi version"}
    notes.append(f"amd-smi: exit {rc}")
    try:
        rocm = Path("/opt/rocm/.info/version").read_text().strip() or None
    except OSError:
        rocm = None
    rc, out, err = run(["rocm-smi", "--showdriverversion"])
    driver = parse_rocm_smi_driver(out) if rc == 0 else None
    if rocm or driver:
        return {
            "vendor": "amd",
            "driver": driver,
            "rocm": rocm,
            "source": "/opt/rocm/.info/version and rocm-smi --showdriverversion",
        }
    notes.append(f"rocm-smi: exit {rc}")
    return None


def _text(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def cuda_version_from_int(v: int) -> str:
    """NVML's CUDA driver version integer (12040) -> "12.4"."""
    return f"{v // 1000}.{(v % 1000) // 10}"


def parse_nvidia_smi_header(text: str) -> dict[str, str]:
    """`| NVIDIA-SMI 550.54.15   Driver Version: 550.54.15   CUDA Version: 12.4 |`."""
    out = {}
    m = re.search(r"Driver Version:\s*([0-9][\w.\-]*)", text)
    if m:
        out["driver"] = m.group(1)
    m = re.search(r"CUDA Version:\s*([0-9][\w.\-]*)", text)
    if m:
        out["cuda_driver"] = m.group(1)
    return out


def parse_amd_smi_version(text: str) -> dict[str, str]:
    """`AMDSMI Tool: 25.3.0+ede62f2 | AMDSMI Library version: 25.3.0 | ROCm version: 6.4.0 |
    amdgpu version: 6.12.12 | ...`."""
    fields = {}
    for part in text.replace("\n", "|").split("|"):
        key, sep, value = part.partition(":")
        if sep:
            fields[key.strip().lower()] = value.strip()
    out = {}
    if fields.get("rocm version") and fields["rocm version"] != "N/A":
        out["rocm"] = fields["rocm version"]
    if fields.get("amdgpu version") and fields["amdgpu version"] != "N/A":
        out["driver"] = fields["amdgpu version"]
    return out


def parse_rocm_smi_driver(text: str) -> str | None:
    m = re.search(r"Driver version:\s*(\S+)", text, re.IGNORECASE)
    return m.group(1) if m else None
