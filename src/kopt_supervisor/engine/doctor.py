"""What this machine offers kopt, and the software a run measured under: `kopt doctor` (the
sandbox, GPU backends, profilers and packages, and what is missing), `kopt ceilings` (this
GPU's copy bandwidth and matrix rate, measured and registered) and `capture_environment` (the
record a run keeps of its interpreter, GPU driver and toolkit). Each section below opens with
its command or function. (`kopt gpus`, what the idle gate sees per GPU, is the gate's: gpu/.)

`kopt doctor`: what this machine offers kopt, and what is missing with its consequence.

`report()` gathers it as data (JSON-ready): bubblewrap and user namespaces
(`engine.sandbox.probe`: which bwrap, the system's or the bundled one, and why; or the
cause and fix when none works), the GPU device nodes the sandbox would pass through, each GPU
backend of `engine.gpu` and what it answered, whether NVIDIA profiling is restricted to
admins (a sandboxed profiler has no capabilities), the profilers on PATH with their
versions, git, and the Python kopt runs on with the versions of torch, triton and the GPU
bindings (read in a subprocess from package metadata: nothing is imported into kopt).
`format_text(report)` is the same for a terminal. Every probe has a timeout; nothing here
changes the machine.

`kopt ceilings`: measure this GPU's copy bandwidth and bf16 matrix rate, register them.

Runs `python -m kopt_supervisor.kernels.ceilings --json` (the only torch code, in a subprocess) on an idle
GPU chosen by the gate, and writes the result as a wiki page of measured sources under
`<root>/.ceilings/`, where every run's roofline lookup finds it (measured values are
preferred to the datasheet's, which stay listed beside them).

The environment: the software a run measured under, as far as kopt can honestly know it.

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
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from kopt_supervisor.engine import KoptFailure, sandbox
from kopt_supervisor.engine.config import Config, GpuConfig
from kopt_supervisor.engine.gpu.backends import open_backend
from kopt_supervisor.engine.gpu.gate import Gate
from kopt_supervisor.engine.gpu.smi import run_command as run_tool
from kopt_supervisor.engine.profile.roofline import lookup_specs, register_measured
from kopt_supervisor.engine.runner.command import run as run_command

TIMEOUT_S = 20.0
PACKAGES = {
    "torch": "torch",
    "triton": "triton",
    "pytorch-triton-rocm": "triton",
    "nvidia-ml-py": "pynvml",
    "amdsmi": "amdsmi",
    "numpy": "numpy",
}
"""Distribution -> the module it provides (whether it is importable is checked too)."""
PROFILERS = ("ncu", "rocprofv3")
BACKENDS = ("nvml", "amdsmi", "nvidia-smi", "amd-smi", "rocm-smi")
NVIDIA_PARAMS = Path("/proc/driver/nvidia/params")


def report(*, dev: Path = Path("/dev"), nvidia_params: Path = NVIDIA_PARAMS) -> dict[str, Any]:
    """Everything `kopt doctor` shows, as data."""
    support = sandbox.probe()
    devices = [str(p) for p in sandbox.gpu_devices(dev)]
    out: dict[str, Any] = {
        "sandbox": {**support.to_dict(), "summary": support.summary()},
        "gpu_devices": devices,
        "gpu_backends": _backends(),
        "fake_gpus": os.environ.get("KOPT_FAKE_GPUS") or None,
        "nvidia_profiling_admin_only": _profiling_admin_only(nvidia_params),
        "profilers": {name: _tool(name, ["--version"]) for name in PROFILERS},
        "git": _tool("git", ["--version"]),
        "python": _python(sys.executable),
        "unix_sockets_covered": [
            str(p)
            for p in sandbox.host_unix_sockets()
            if not any(str(p).startswith(d + "/") for d in sandbox.PRIVATE_DIRS)
        ],
    }
    out["missing"] = missing(out)
    return out


def missing(r: dict[str, Any]) -> list[dict[str, str]]:
    """What is missing or off, each with what it means for a run (pure: from a report)."""
    out: list[dict[str, str]] = []

    def add(what: str, consequence: str) -> None:
        out.append({"what": what, "consequence": consequence})

    sb = r["sandbox"]
    if not sb["works"]:
        add(
            f"bubblewrap ({sb['reason']})",
            "benches and the `command` proposer cannot be confined: `kopt run` refuses to start unless --no-sandbox "
            "(then every result is marked unsandboxed); `kopt demo` runs its own bundled kernel and tune proposer "
            f"unconfined, marked so. To fix: {sb['hint']}",
        )
    devices = r["gpu_devices"]
    nvidia = any(Path(d).name.startswith("nvidia") for d in devices)
    amd = any(Path(d).name in ("kfd", "dri") for d in devices)
    found = [b for b in r["gpu_backends"] if b["gpus"]]
    if not devices:
        add(
            "GPU device nodes (/dev/nvidia*, /dev/kfd, /dev/dri)",
            'no GPU here: the gate records "no GPU" and only CPU-only targets run (the demo uses Triton\'s interpreter)',
        )
    elif not found:
        add(
            "a GPU backend that sees the GPUs",
            "the GPU idle gate cannot read utilisation or foreign processes: "
            + "; ".join(f"{b['backend']}: {b['status']}" for b in r["gpu_backends"]),
        )
    if nvidia and "/dev/nvidia-uvm" not in devices:
        add(
            "/dev/nvidia-uvm",
            "CUDA creates it on first use through the setuid nvidia-modprobe, which cannot run in "
            "the sandbox: run `nvidia-modprobe -u -c=0` (or any CUDA program) once before kopt",
        )
    if nvidia and found and not any(b["backend"] == "nvml" and b["gpus"] for b in r["gpu_backends"]):
        add(
            "NVML (nvidia-ml-py)",
            "the gate falls back to the nvidia-smi CLI: slower polls (pip install 'kopt-supervisor[nvidia]')",
        )
    if amd and found and not any(b["backend"] == "amdsmi" and b["gpus"] for b in r["gpu_backends"]):
        add("amdsmi bindings", "the gate falls back to the amd-smi/rocm-smi CLI: slower polls")
    for name, vendor_here in (("ncu", nvidia), ("rocprofv3", amd)):
        if vendor_here and not r["profilers"][name]["path"]:
            add(name, "no profiler confirmation of keeps on this GPU: verdicts rest on the bench alone")
    if nvidia and r["nvidia_profiling_admin_only"]:
        add(
            "GPU performance counters for non-admin users (RmProfilingAdminOnly: 1)",
            "ncu inside the sandbox has no capabilities and cannot read counters (ERR_NVGPUCTRPERM): load the "
            'driver with NVreg_RestrictProfilingToAdminUsers=0, or set [profile].kind = "none"',
        )
    if not r["git"]["path"]:
        add("git", "kopt cannot run: worktrees, commits and the branch are git's")
    pkgs = r["python"]["packages"]
    if not pkgs.get("torch") or not (pkgs.get("triton") or pkgs.get("pytorch-triton-rocm")):
        add(
            "torch and triton (for kopt's interpreter)",
            "the bundled kernels and `kopt demo` cannot run "
            "(pip install 'kopt-supervisor[kernels]'); your own targets use their own interpreter",
        )
    return out


def format_text(r: dict[str, Any]) -> str:
    """The report for a terminal: one line per thing, then what is missing."""
    sb = r["sandbox"]
    userns = {True: "yes", False: "no", None: "not tried"}[sb["user_namespaces"]]
    if sb["works"]:
        box = (
            f"{sb['version'] or 'bwrap'}, {sb['source'] or 'bwrap'}, at {sb['bwrap']}: works "
            f"({'as root' if sb['privileged'] else 'unprivileged'}); user namespaces: {userns}"
        )
        why = sb["choice"]
    else:
        box = f"unavailable ({sb['cause'] or 'unknown cause'}): {sb['reason']}; user namespaces: {userns}"
        why = f"to fix: {sb['hint']}"
    lines = ["kopt doctor", f"  sandbox       {box}", f"                {why}"]
    lines.append(f"  GPU devices   {', '.join(r['gpu_devices']) or 'none'}")
    for b in r["gpu_backends"]:
        lines.append(f"  {b['backend']:<13} {b['gpus']} GPU(s): {b['status']}")
    if r["fake_gpus"]:
        lines.append(f"  KOPT_FAKE_GPUS={r['fake_gpus']}: the engine would use this scripted fake, not the above")
    admin = r["nvidia_profiling_admin_only"]
    if admin is not None:
        lines.append(f"  NVIDIA counters  {'admins only' if admin else 'open to all users'}")
    for name, tool in r["profilers"].items():
        lines.append(f"  {name:<13} {_show_tool(tool)}")
    lines.append(f"  git           {_show_tool(r['git'])}")
    py = r["python"]
    pkgs = ", ".join(f"{k} {v}" for k, v in py["packages"].items() if v) or "none of torch, triton, bindings"
    lines.append(f"  python        {py['version']} ({py['executable']}): {pkgs}")
    if r["unix_sockets_covered"]:
        lines.append(
            f"  unix sockets  {len(r['unix_sockets_covered'])} outside /run and /tmp, covered in every sandbox"
        )
    if r["missing"]:
        lines.append("missing:")
        lines += [f"  - {m['what']}: {m['consequence']}" for m in r["missing"]]
    else:
        lines.append("nothing missing")
    return "\n".join(lines)


def _show_tool(tool: dict[str, Any]) -> str:
    if not tool["path"]:
        return "not on PATH"
    return f"{tool['version'] or '(version unknown)'} ({tool['path']})"


def _tool(name: str, args: list[str]) -> dict[str, Any]:
    path = shutil.which(name)
    if path is None:
        return {"path": None, "version": None}
    try:
        p = subprocess.run([path, *args], capture_output=True, text=True, timeout=TIMEOUT_S, stdin=subprocess.DEVNULL)
        lines = [ln.strip() for ln in (p.stdout + "\n" + p.stderr).splitlines() if ln.strip()]
        version = next((ln for ln in reversed(lines) if any(c.isdigit() for c in ln)), lines[-1] if lines else "")
    except (OSError, subprocess.TimeoutExpired) as exc:
        version = f"no answer: {exc}"
    return {"path": path, "version": version[:160] or None}


def _backends() -> list[dict[str, Any]]:
    from kopt_supervisor.engine.gpu.backends import BACKENDS as MAKE

    out = []
    for name in BACKENDS:
        backend = MAKE[name]()
        try:
            gpus = backend.read()
            out.append({"backend": name, "gpus": len(gpus), "status": str(getattr(backend, "status", ""))})
        except Exception as exc:  # a broken binding must not stop the doctor
            out.append({"backend": name, "gpus": 0, "status": f"failed: {type(exc).__name__}: {exc}"})
        finally:
            backend.close()
    return out


def _profiling_admin_only(params: Path) -> bool | None:
    try:
        text = params.read_text(errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "RmProfilingAdminOnly":
            return value.strip() == "1"
    return None


_VERSIONS = """
import importlib.metadata as m, importlib.util as u, json, sys
out = {}
for dist, module in json.loads(sys.argv[1]).items():
    try:
        v = m.version(dist)
    except m.PackageNotFoundError:
        v = None
    out[dist] = v if v is None or u.find_spec(module) is not None else v + " (not importable)"
print(json.dumps({"version": sys.version.split()[0], "packages": out}))
"""


def _python(executable: str) -> dict[str, Any]:
    """The interpreter's version and its packages' versions, asked in a subprocess."""
    try:
        p = subprocess.run(
            [executable, "-I", "-c", _VERSIONS, json.dumps(PACKAGES)],
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            stdin=subprocess.DEVNULL,
        )
        data = json.loads(p.stdout)
    except (OSError, subprocess.TimeoutExpired, json.JSONDecodeError) as exc:
        return {"executable": executable, "version": f"no answer: {exc}", "packages": {}}
    return {"executable": executable, **data}


# `kopt ceilings`


def measured_dir(root: Path) -> Path:
    return root / ".ceilings"


def measure_ceilings(root: Path, *, gpu: GpuConfig | None = None, timeout_s: float = 600.0) -> dict[str, Any]:
    gate = Gate(gpu or GpuConfig(), open_backend((gpu or GpuConfig()).vendor), owner="kopt ceilings")
    try:
        decision = gate.acquire()
        if decision.gpu is None:
            raise KoptFailure(f"kopt ceilings needs a GPU: {decision.note or 'none found'}")
        with tempfile.TemporaryDirectory(prefix="kopt-ceilings-") as tmp:
            res = run_command(
                [sys.executable, "-m", "kopt_supervisor.kernels.ceilings", "--json", "--out", f"{tmp}/ceilings.json"],
                cwd=Path(__file__).resolve().parent.parent,
                log_dir=tmp,
                name="ceilings",
                timeout_s=timeout_s,
                env=decision.env,
            )
            if not res.ok:
                raise KoptFailure(f"the ceilings measurement {res.why()}: {res.tail(1)}")
            result = json.loads(Path(tmp, "ceilings.json").read_text())
    finally:
        gate.close()
    page = register_measured(result, measured_dir(root))
    specs = lookup_specs(result["gpu_name"], measured_dir=measured_dir(root), gpu_uuid=result.get("gpu_uuid"))
    lines = [f"{result['gpu_name']} ({result.get('gpu_uuid')}), measured {time.strftime('%Y-%m-%d')}:"]
    lines += [f"  {specs[m].line()}" for m in ("hbm_bandwidth", "bf16_dense_tflops") if m in specs]
    lines.append(f"registered in {page}")
    return {"result": result, "page": str(page), "lines": lines}


# `capture_environment`: the software a run measured under

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
    run = run or run_tool
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
