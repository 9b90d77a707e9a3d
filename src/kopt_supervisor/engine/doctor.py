"""What this machine offers kopt, as the two commands that ask it: `kopt doctor` (the
sandbox, GPU backends, profilers and packages, and what is missing) and `kopt ceilings` (this
GPU's copy bandwidth and matrix rate, measured and registered). Each section below opens with
its command. (`kopt gpus`, what the idle gate sees per GPU, is the gate's: engine/gpu/.)

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
preferred to the datasheet's, which stay listed beside them)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from kopt_supervisor.engine import KoptFailure, sandbox
from kopt_supervisor.engine.config import GpuConfig
from kopt_supervisor.engine.gpu.backends import open_backend
from kopt_supervisor.engine.gpu.gate import Gate
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
            "the gate falls back to the nvidia-smi CLI: slower polls (pip install 'kopt[nvidia]')",
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
