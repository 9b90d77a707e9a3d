"""What this machine offers kopt, as the three commands that ask it: `kopt doctor` (the
sandbox, GPU backends, profilers and packages, and what is missing), `kopt gpus` (what the
idle gate sees, per GPU) and `kopt ceilings` (this GPU's copy bandwidth and matrix rate,
measured and registered). Each section below opens with its command.

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

`kopt gpus`: what the gate sees, per GPU, and why each is idle or busy.

`gpus_report(cfg)` runs one gate check (cfg.samples readings, no claim taken) and returns a
stable JSON-able dict; `format_report(report)` renders it as a table for the terminal.

Report keys (stable, documented in docs/gpu-gate.md):
    time, backend {name, vendor, status, tried}, config {util_max_pct, mem_used_max_mib,
    mem_growth_max_mib, samples, sample_interval_s, wait_s, wait_max_s, devices},
    gpus [{index, name, uuid, vendor, idle, reasons, notes, util_pct, util_max_pct,
           mem_used_mib, mem_total_mib, mem_growth_mib, processes, foreign, claimed_by,
           sm_clock_mhz, mem_clock_mhz, temp_c, power_w, throttle, throttle_counters, na}],
    pick {index, uuid, env} or null, summary

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
from kopt_supervisor.engine.gpu import Assessment, Backend, busyness, is_na, jsonable
from kopt_supervisor.engine.gpu.backends import open_backend
from kopt_supervisor.engine.gpu.gate import ClaimRegistry, Gate, visible_devices_env
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


# `kopt gpus`


def gpus_report(cfg: GpuConfig, backend: Backend | None = None, *, sleep=time.sleep) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    """One gate check, as a JSON-able dict. Opens (and closes) a backend when none is given."""
    own_backend = backend is None
    be = open_backend(cfg.vendor) if backend is None else backend
    gate = Gate(cfg, be, sleep=sleep, claims=ClaimRegistry(owner="kopt gpus"))
    try:
        found = gate.check()
    finally:
        if own_backend:
            be.close()
    idle = sorted((a for a in found if a.idle), key=busyness)
    pick = idle[0] if idle else None
    if not found:
        summary = "no GPU: CPU-only targets run without the gate" if not gate.ever_seen else "no GPU visible"
    elif pick is not None:
        summary = f"{len(idle)} of {len(found)} GPU(s) idle; the gate would pick GPU {pick.gpu.index}"
    else:
        summary = f"all {len(found)} GPU(s) busy; the gate would wait {cfg.wait_s:g} s and check again"
    return {
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "backend": {
            "name": be.name,
            "vendor": be.vendor,
            "status": str(getattr(be, "status", "")),
            "tried": list(getattr(be, "tried", [])),
        },
        "config": {
            "util_max_pct": cfg.util_max_pct,
            "mem_used_max_mib": cfg.mem_used_max_mib,
            "mem_growth_max_mib": cfg.mem_growth_max_mib,
            "samples": cfg.samples,
            "sample_interval_s": cfg.sample_interval_s,
            "wait_s": cfg.wait_s,
            "wait_max_s": cfg.wait_max_s,
            "devices": list(cfg.devices),
        },
        "gpus": [_gpu_entry(a) for a in found],
        "pick": None
        if pick is None
        else {
            "index": pick.gpu.index,
            "uuid": jsonable(pick.gpu.uuid),
            "env": visible_devices_env(pick.gpu),
        },
        "summary": summary,
    }


def _gpu_entry(a: Assessment) -> dict[str, Any]:
    g = a.gpu.to_dict()
    d = a.to_dict()
    return {
        "index": g["index"],
        "name": g["name"],
        "uuid": g["uuid"],
        "vendor": g["vendor"],
        "backend": g["backend"],
        "idle": a.idle,
        "reasons": d["reasons"],
        "notes": d["notes"],
        "util_pct": g["util_pct"],
        "util_max_pct": d["util_max_pct"],
        "mem_used_mib": g["mem_used_mib"],
        "mem_total_mib": g["mem_total_mib"],
        "mem_growth_mib": d["mem_growth_mib"],
        "processes": g["processes"],
        "foreign": d["foreign"],
        "claimed_by": d["claimed_by"],
        "sm_clock_mhz": g["sm_clock_mhz"],
        "mem_clock_mhz": g["mem_clock_mhz"],
        "temp_c": g["temp_c"],
        "power_w": g["power_w"],
        "throttle": g["throttle"],
        "throttle_counters": g["throttle_counters"],
        "na": (g.get("extra") or {}).get("na", {}),
    }


def _num(v: Any, fmt: str, unit: str = "") -> str:
    return "NA" if v is None or is_na(v) else format(v, fmt) + unit


def format_report(report: dict[str, Any]) -> str:
    b = report["backend"]
    c = report["config"]
    lines = [
        f"backend: {b['name']}" + ("" if b.get("tried") and not report["gpus"] else f" ({b['status']})"),
        f"idle: no foreign process, util <= {c['util_max_pct']:g}%, memory used <= {c['mem_used_max_mib']:g} MiB",
        f"      and growing <= {c['mem_growth_max_mib']:g} MiB, over {c['samples']} samples "
        f"{c['sample_interval_s']:g} s apart; no other kopt run's claim",
    ]
    if not report["gpus"]:
        for t in b.get("tried", []):
            lines.append(f"  tried {t['backend']}: {t['status']}")
        lines.append(report["summary"])
        return "\n".join(lines)
    lines.append("")
    lines.append(
        f"{'GPU':>3}  {'NAME':<22} {'UTIL':>5} {'MEM USED/TOTAL MiB':>19} {'PROCS':>5} {'TEMP':>5} {'POWER':>6}  STATE"
    )
    pick = (report.get("pick") or {}).get("index")
    for g in report["gpus"]:
        procs = "NA" if g["processes"] is None else str(len(g["processes"]))
        mem = f"{_num(g['mem_used_mib'], '.0f')}/{_num(g['mem_total_mib'], '.0f')}"
        state = "idle" if g["idle"] else "busy"
        if g["index"] == pick:
            state += " <- the gate's pick"
        name = (g["name"] or "?")[:22]
        lines.append(
            f"{g['index']:>3}  {name:<22} {_num(g['util_max_pct'], '.0f', '%'):>5} {mem:>19} {procs:>5} "
            f"{_num(g['temp_c'], '.0f', 'C'):>5} {_num(g['power_w'], '.0f', 'W'):>6}  {state}"
        )
        for r in g["reasons"]:
            lines.append(f"       busy: {r}")
        for n in g["notes"]:
            lines.append(f"       note: {n}")
        throttle = [t for t in (g["throttle"] or []) if t != "gpu_idle"]
        if throttle:
            lines.append(f"       throttle: {', '.join(throttle)}")
    lines.append("")
    lines.append(report["summary"])
    return "\n".join(lines)


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
