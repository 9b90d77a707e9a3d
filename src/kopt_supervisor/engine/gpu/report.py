"""`kopt gpus`: what the gate sees, per GPU, and why each is idle or busy.

`gpus_report(cfg)` runs one gate check (cfg.samples readings, no claim taken) and returns a
stable JSON-able dict; `format_report(report)` renders it as a table for the terminal.

Report keys (stable, documented in docs/gpu-gate.md):
    time, backend {name, vendor, status, tried}, config {util_max_pct, mem_used_max_mib,
    mem_growth_max_mib, samples, sample_interval_s, wait_s, wait_max_s, devices},
    gpus [{index, name, uuid, vendor, idle, reasons, notes, util_pct, util_max_pct,
           mem_used_mib, mem_total_mib, mem_growth_mib, processes, foreign, claimed_by,
           sm_clock_mhz, mem_clock_mhz, temp_c, power_w, throttle, throttle_counters, na}],
    pick {index, uuid, env} or null, summary
"""

from __future__ import annotations

import time
from typing import Any

from kopt_supervisor.engine.config.sections import GpuConfig
from kopt_supervisor.engine.gpu.backends import open_backend
from kopt_supervisor.engine.gpu.gate import ClaimRegistry, Gate, visible_devices_env
from kopt_supervisor.engine.gpu.state import Assessment, Backend, busyness, is_na, jsonable


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
