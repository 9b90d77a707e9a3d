"""GPU idle gate on a real NVIDIA GPU: NVML vs nvidia-smi, and a foreign process making the gate wait.

Run from the repository root on the GPU machine (Python >= 3.11 with psutil and nvidia-ml-py;
torch is optional, the foreign process falls back to the CUDA driver API through ctypes):

    python tests/device/gpu_gate_check.py --out $OUT/gpu_gate_check.json

It takes about 1.5 minutes and prints a short table; the full results go to --out. What it does:

1. reads the GPUs through NVML and through the nvidia-smi fallback back to back and checks
   that they agree (same uuid and name, utilization within 5 points, memory used within
   8 MiB, total memory within 1 MiB), and prints `kopt gpus` (gpus_report/format_report)
   for both;
2. acquires the idle GPU through the gate (it must not wait), takes the "before" evidence;
3. starts a foreign process (not a descendant of this one: its launcher exits) that holds
   ~2 GiB on that GPU and keeps it busy for --hold-s seconds; the gate (wait_s = 2 s,
   restricted to that GPU) must wait, and acquire once the process has ended; the evidence
   taken while it runs must flag the round; done once through NVML and once through
   nvidia-smi;
4. has another process claim the GPU the way a second kopt run would, and checks that the
   report shows it as claimed.

Exit status 0 when every check passed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from kopt_supervisor.engine.config import GpuConfig  # noqa: E402
from kopt_supervisor.engine.gpu import GpuState, format_report, is_na, round_flags  # noqa: E402
from kopt_supervisor.engine.gpu.backends import open_backend  # noqa: E402
from kopt_supervisor.engine.gpu.claims import claim_key  # noqa: E402
from kopt_supervisor.engine.gpu.gate import Gate, gpus_report  # noqa: E402

HOG = r"""
import ctypes, os, sys, time
mib, hold_s = int(sys.argv[1]), float(sys.argv[2])
try:
    import torch
    x = torch.empty(mib * 2**20 // 4, dtype=torch.float32, device="cuda")
    a = torch.randn(4096, 4096, device="cuda")
    torch.cuda.synchronize()
    kind = "torch"
    def burst():
        for _ in range(20):
            a.matmul(a)
        torch.cuda.synchronize()
except ImportError:
    cuda = ctypes.CDLL("libcuda.so.1")
    def ok(r, what):
        if r != 0:
            raise SystemExit(f"{what} failed: CUresult {r}")
    ok(cuda.cuInit(0), "cuInit")
    dev, ctx, ptr = ctypes.c_int(), ctypes.c_void_p(), ctypes.c_uint64()
    ok(cuda.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
    ok(cuda.cuCtxCreate_v2(ctypes.byref(ctx), 0, dev), "cuCtxCreate")
    n = mib * 2**20
    ok(cuda.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(n)), "cuMemAlloc")
    kind = "cuda-driver"
    def burst():
        for _ in range(20):
            cuda.cuMemsetD32_v2(ptr, ctypes.c_uint(1), ctypes.c_size_t(n // 4))
        cuda.cuCtxSynchronize()
print("ready", os.getpid(), kind, flush=True)
end = time.time() + hold_s
while time.time() < end:
    burst()
print("done", flush=True)
"""

LAUNCH = (
    "import subprocess, sys; subprocess.Popen([sys.executable, '-c', sys.argv[1], sys.argv[2], sys.argv[3]], "
    "start_new_session=True)"
)


def start_foreign(index: int, mib: int, hold_s: float) -> tuple[subprocess.Popen, int, str]:
    """A GPU hog that is not our descendant (its launcher exits at once)."""
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": str(index), "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    launcher = subprocess.Popen(
        [sys.executable, "-c", LAUNCH, HOG, str(mib), str(hold_s)], stdout=subprocess.PIPE, text=True, env=env
    )
    line = launcher.stdout.readline().split()
    if not line or line[0] != "ready":
        raise SystemExit(f"the foreign process did not start: {line}")
    return launcher, int(line[1]), line[2]


def wait_done(launcher: subprocess.Popen, pid: int, timeout: float) -> None:
    end = time.time() + timeout
    while time.time() < end:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.2)
    else:
        os.kill(pid, 9)
    launcher.wait()


def compare(a: list[GpuState], b: list[GpuState]) -> list[dict[str, Any]]:
    rows = []
    smi = {g.uuid: g for g in b}
    for g in a:
        h = smi.get(g.uuid)
        row: dict[str, Any] = {
            "index": g.index,
            "uuid": g.uuid,
            "nvml": g.to_dict(),
            "nvidia_smi": h.to_dict() if h else None,
            "problems": [],
        }
        if h is None:
            row["problems"].append("nvidia-smi does not list this uuid")
            rows.append(row)
            continue
        for field, tol in (("util_pct", 5.0), ("mem_used_mib", 8.0), ("mem_total_mib", 1.0), ("temp_c", 2.0)):
            x, y = getattr(g, field), getattr(h, field)
            if is_na(x) or is_na(y) or abs(x - y) > tol:
                row["problems"].append(f"{field}: nvml {x} vs nvidia-smi {y} (tolerance {tol})")
        if g.name != h.name or g.index != h.index:
            row["problems"].append(f"name/index: nvml {g.index} {g.name} vs nvidia-smi {h.index} {h.name}")
        rows.append(row)
    if not a:
        rows.append({"problems": ["NVML read no GPU"]})
    return rows


def side_by_side(rows: list[dict[str, Any]]) -> str:
    fields = (
        "name",
        "uuid",
        "util_pct",
        "mem_used_mib",
        "mem_total_mib",
        "sm_clock_mhz",
        "mem_clock_mhz",
        "temp_c",
        "power_w",
        "throttle",
        "processes",
    )
    out = []
    for r in rows:
        if "nvml" not in r:
            continue
        out.append(f"GPU {r['index']}: {'field':<14} {'NVML':<44} nvidia-smi")
        for f in fields:
            x = r["nvml"].get(f)
            y = (r["nvidia_smi"] or {}).get(f)
            out.append(f"       {f:<14} {str(x)[:44]:<44} {str(y)[:44]}")
    return "\n".join(out)


def gate_waits(backend_name: str, index: int, args: argparse.Namespace) -> dict[str, Any]:
    logs: list[tuple[float, str]] = []
    t0 = time.monotonic()
    cfg = GpuConfig(samples=3, sample_interval_s=0.5, wait_s=2.0, wait_max_s=args.hold_s + 120, devices=[index])
    gate = Gate(
        cfg,
        open_backend(backend_name),
        log=lambda m: logs.append((round(time.monotonic() - t0, 1), m)),
        owner=f"gpu_gate_check {backend_name}",
    )
    result: dict[str, Any] = {"backend": backend_name}
    try:
        first = gate.acquire()
        result["idle_waited_s"] = round(first.waited_s, 2)
        before = gate.evidence()
        launcher, pid, kind = start_foreign(index, args.mib, args.hold_s)
        started = time.monotonic()
        result.update(foreign_pid=pid, foreign_kind=kind)
        time.sleep(min(3.0, args.hold_s / 4))  # let it allocate and spin up
        during = gate.evidence()
        result["flags_during"] = round_flags(before, during)
        result["foreign_seen_by_pid"] = any(p["pid"] == pid for p in (during or {}).get("foreign_processes", []))
        d = gate.acquire()  # must wait until the foreign process is gone
        ended_after = time.monotonic() - started
        wait_done(launcher, pid, 30)
        result.update(
            waited_s=round(d.waited_s, 1),
            acquired_after_foreign_start_s=round(ended_after, 1),
            waits=[m for _, m in logs if m.startswith("no idle GPU")],
            log=[f"{t:6.1f} s  {m}" for t, m in logs],
            after=gate.evidence(),
            during=during,
        )
        result["ok"] = bool(
            result["idle_waited_s"] < 2.0
            and result["waits"]
            and d.waited_s >= args.hold_s - 6
            and d.gpu is not None
            and d.gpu.index == index
            and result["flags_during"]
        )
    finally:
        gate.close()
    return result


def claim_check(index: int, uuid: str) -> dict[str, Any]:
    code = (
        "import sys, time; sys.path.insert(0, sys.argv[1]); from kopt_supervisor.engine.gpu.claims import ClaimRegistry;"
        "r = ClaimRegistry(owner='kopt run other-tag'); print(r.claim(sys.argv[2]), flush=True); time.sleep(30)"
    )
    key = claim_key("", uuid, index)
    p = subprocess.Popen([sys.executable, "-c", code, str(ROOT), key], stdout=subprocess.PIPE, text=True)
    try:
        held = p.stdout.readline().strip() == "True"
        report = gpus_report(GpuConfig(samples=1, devices=[index]), open_backend("nvml"))
        g = report["gpus"][0] if report["gpus"] else {}
        ok = held and not g.get("idle", True) and (g.get("claimed_by") or {}).get("pid") == p.pid
        return {"ok": ok, "reasons": g.get("reasons"), "holder_pid": p.pid}
    finally:
        p.kill()
        p.wait()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="gpu_gate_check.json")
    ap.add_argument("--hold-s", type=float, default=20.0, help="how long the foreign process runs")
    ap.add_argument("--mib", type=int, default=2048, help="memory the foreign process holds")
    args = ap.parse_args()
    results: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %z"),
        "host": os.uname().nodename,
        "python": sys.version.split()[0],
    }

    nvml, smi = open_backend("nvml"), open_backend("nvidia-smi")
    a, b = nvml.read(), smi.read()
    results["backends"] = {"nvml": nvml.status, "nvidia-smi": smi.status}
    results["compare"] = compare(a, b)
    print(side_by_side(results["compare"]))
    cfg = GpuConfig(samples=3, sample_interval_s=1.0)
    for name, backend in (("nvml", nvml), ("nvidia-smi", smi)):
        report = gpus_report(cfg, backend)
        results[f"report_{name}"] = report
        print(f"\n$ kopt gpus   # through {name}\n{format_report(report)}")
    nvml.close()
    if not a:
        print("NVML read no GPU:", nvml.status)
        Path(args.out).write_text(json.dumps(results, indent=2, default=str))
        return 1

    index, uuid = a[0].index, a[0].uuid
    for name in ("nvml", "nvidia-smi"):
        print(f"\n-- the gate through {name}: foreign process for {args.hold_s:g} s on GPU {index} --")
        r = gate_waits(name, index, args)
        results[f"wait_{name}"] = r
        print("\n".join(r.get("log", [])))
        print(f"flags while it ran: {r.get('flags_during')}")
    results["claim"] = claim_check(index, uuid)

    checks = [
        (
            "NVML and nvidia-smi agree",
            all(not r["problems"] for r in results["compare"]),
            "; ".join(p for r in results["compare"] for p in r["problems"]) or "uuid, name, util, memory, temp",
        ),
    ]
    for name in ("nvml", "nvidia-smi"):
        r = results[f"wait_{name}"]
        checks.append(
            (
                f"gate waits for the foreign process ({name})",
                r.get("ok", False),
                f"idle acquire {r.get('idle_waited_s')} s; waited {r.get('waited_s')} s "
                f"for a {args.hold_s:g} s {r.get('foreign_kind')} process; "
                f"pid seen: {r.get('foreign_seen_by_pid')}",
            )
        )
    checks.append(
        (
            "another kopt run's claim makes the GPU busy",
            results["claim"]["ok"],
            "; ".join(results["claim"].get("reasons") or []),
        )
    )
    results["checks"] = [{"check": c, "ok": ok, "detail": d} for c, ok, d in checks]
    Path(args.out).write_text(json.dumps(results, indent=2, default=str))

    print("\n== summary ==")
    for c, ok, d in checks:
        print(f"{'PASS' if ok else 'FAIL'}  {c}: {d}")
    print(f"full results: {args.out}")
    return 0 if all(ok for _, ok, _ in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
