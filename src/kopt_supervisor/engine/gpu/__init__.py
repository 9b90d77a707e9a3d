"""GPU backends, the idle gate and its host-wide claims (docs/design.md §1, §6, §10; docs/gpu-gate.md).
This module holds what a GPU backend is and reports (`Backend`; `AutoBackend`, the backend that
tries candidates in turn), and the idle gate's pure judgement of it. Pure: no side effects of
its own. The backends are `gpu.backends` (choosing one, the scripted fake, the vendor Python
bindings) and `gpu.smi` (the SMI tools, run and parsed), the gate that reads, sleeps and claims
`gpu.gate`.

Records. A backend never raises into its caller for a field it cannot read: the field is
`NA`, and the reason goes into `GpuState.extra["na"]` so the UI can say why. A GPU that
vanished is simply absent from the next reading. `NA` is falsy, compares unequal to every
number, and prints as "NA", so the UI can show it without special cases. Also here: the
shared vocabulary of throttle reasons (NVML bits, amdsmi violation flags) and `read_field`,
the one place where a library call becomes a value or an NA.

Judgement. A check's readings of every GPU -> one assessment each (idle, or busy and why),
and what disturbed a timed step from the evidence before and after it (`round_flags`). The
gate (engine/gpu/gate.py) reads, sleeps and claims; this room only judges.

`kopt gpus`: what the gate sees, per GPU, and why each is idle or busy. `gate.gpus_report(cfg)`
runs one check (cfg.samples readings, no claim taken); `check_report` makes its stable JSON-able
dict, `format_report(report)` the table for the terminal. Keys (documented in docs/gpu-gate.md):
    time, backend {name, vendor, status, tried}, config {util_max_pct, mem_used_max_mib,
    mem_growth_max_mib, samples, sample_interval_s, wait_s, wait_max_s, devices},
    gpus [{index, name, uuid, vendor, idle, reasons, notes, util_pct, util_max_pct,
           mem_used_mib, mem_total_mib, mem_growth_mib, processes, foreign, claimed_by,
           sm_clock_mhz, mem_clock_mhz, temp_c, power_w, throttle, throttle_counters, na}],
    pick {index, uuid, env} or null, summary
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from kopt_supervisor.engine.config import GpuConfig


class _NAType:
    _instance: _NAType | None = None

    def __new__(cls) -> _NAType:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "NA"

    __str__ = __repr__

    def __bool__(self) -> bool:
        return False

    def __reduce__(self) -> str:
        return "NA"


NA: Any = _NAType()
"""The value of a field a backend could not read."""


def is_na(x: Any) -> bool:
    return x is NA


def jsonable(x: Any) -> Any:
    """NA → None, recursively, for JSON and SQLite."""
    if x is NA:
        return None
    if isinstance(x, dict):
        return {k: jsonable(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [jsonable(v) for v in x]
    return x


@dataclass(frozen=True)
class GpuProcess:
    pid: int
    name: Any = NA
    mem_mib: Any = NA
    user: Any = NA


@dataclass(frozen=True)
class GpuState:
    index: int
    name: Any = NA
    uuid: Any = NA
    util_pct: Any = NA
    mem_used_mib: Any = NA
    mem_total_mib: Any = NA
    processes: Any = NA
    """A tuple of GpuProcess, or NA when the backend cannot list processes."""
    sm_clock_mhz: Any = NA
    mem_clock_mhz: Any = NA
    temp_c: Any = NA
    power_w: Any = NA
    throttle: Any = NA
    """A tuple of active throttle reasons (e.g. "sw_thermal"), empty when none."""
    throttle_counters: Any = NA
    """Cumulative throttle counters {name: value} (NVML violation ns, amdsmi acc_*);
    an increase between two readings means the GPU throttled in between."""
    vendor: str = "unknown"
    backend: str = "unknown"
    extra: dict[str, Any] = field(default_factory=dict)
    """Backend-specific details; "na": {field: why it is NA}."""

    def to_dict(self) -> dict[str, Any]:
        return jsonable(asdict(self))


class Backend(Protocol):
    """One source of GPU readings. Lazily initialised; `close()` shuts it down cleanly.

    Backends also carry `status: str`: what they are reading through, or why they read
    nothing (the gate and `kopt gpus` show it).
    """

    @property
    def name(self) -> str: ...

    @property
    def vendor(self) -> str: ...

    def read(self) -> list[GpuState]:
        """The GPUs now. Never raises for a field; returns [] when the library is gone."""
        ...

    def close(self) -> None: ...


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


# ---------------------------------------------------------------------------------------
# Throttle reasons

NVIDIA_THROTTLE_BITS: dict[int, str] = {
    0x1: "gpu_idle",
    0x2: "applications_clocks",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal",
    0x40: "hw_thermal",
    0x80: "hw_power_brake",
    0x100: "display_clocks",
    0x200: "board_limit",
    0x400: "reliability",
}
"""nvmlClocksEventReason* / nvmlClocksThrottleReason* bits (nvml.h), and the bitmask
`nvidia-smi --query-gpu=clocks_throttle_reasons.active` prints."""

BENIGN_THROTTLE = frozenset({"gpu_idle", "applications_clocks", "sync_boost", "display_clocks"})
"""Reasons that say nothing about a disturbed measurement (idle clocks, user settings)."""


def nvidia_throttle_names(mask: int) -> tuple[str, ...]:
    names = [name for bit, name in NVIDIA_THROTTLE_BITS.items() if mask & bit]
    unknown = mask & ~sum(NVIDIA_THROTTLE_BITS)
    if unknown:
        names.append(f"other_0x{unknown:x}")
    return tuple(names)


def disturbing(throttle: Any) -> list[str]:
    """The active throttle reasons that can distort a timing."""
    if is_na(throttle):
        return []
    return [t for t in throttle if t not in BENIGN_THROTTLE]


# ---------------------------------------------------------------------------------------
# Reading one field


def why(exc: BaseException) -> str:
    """One line (amdsmi's messages span several: "Error code:\n\t2 | AMDSMI_STATUS_...")."""
    message = " ".join(str(exc).split()) or type(exc).__name__
    return message[:160]


def read_field(
    na: dict[str, str], key: str, fn: Callable[..., Any], *args: Any, convert: Callable[[Any], Any] | None = None
) -> Any:
    """Call a library function for one field; any failure is NA with its reason in `na`.

    `convert` may return NA itself (e.g. for the library's own "N/A" string)."""
    try:
        value = fn(*args)
        if convert is not None:
            value = convert(value)
    except Exception as exc:  # a library error is a missing field, never a crash
        na.setdefault(key, why(exc))
        return NA
    if value is NA:
        na.setdefault(key, "not available")
    return value


def number(value: Any, scale: float = 1.0) -> Any:
    """A float from a library value; NA for None, "N/A" and other non-numbers."""
    if value is None or value is NA or isinstance(value, bool):
        return NA
    if isinstance(value, int | float):
        return float(value) * scale
    if isinstance(value, str):
        text = value.strip()
        try:
            return float(text) * scale
        except ValueError:
            return NA
    return NA


def text(value: Any) -> Any:
    """A clean string from a library value (bytes from old bindings); NA for "N/A"/empty."""
    if isinstance(value, bytes):
        value = value.decode(errors="replace")
    if not isinstance(value, str):
        return NA
    value = value.strip()
    if not value or value.upper() in ("N/A", "[N/A]", "NA", "UNKNOWN"):
        return NA
    return value


# ---------------------------------------------------------------------------------------
# The idle gate's judgement


@dataclass
class Assessment:
    gpu: GpuState
    """The GPU as last seen during the check."""
    idle: bool
    reasons: list[str] = field(default_factory=list)
    """Why it is busy; empty when idle."""
    notes: list[str] = field(default_factory=list)
    """What the gate could not see (NA fields) and did without."""
    samples: int = 1
    util_max_pct: Any = NA
    mem_used_mib: Any = NA
    """Memory used at the last sample, less this run's own processes."""
    mem_growth_mib: Any = NA
    foreign: list[GpuProcess] = field(default_factory=list)
    claimed_by: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "gpu": self.gpu.to_dict(),
            "idle": self.idle,
            "reasons": list(self.reasons),
            "notes": list(self.notes),
            "samples": self.samples,
            "util_max_pct": None if is_na(self.util_max_pct) else self.util_max_pct,
            "mem_used_mib": None if is_na(self.mem_used_mib) else self.mem_used_mib,
            "mem_growth_mib": None if is_na(self.mem_growth_mib) else self.mem_growth_mib,
            "foreign": [proc_dict(p) for p in self.foreign],
            "claimed_by": self.claimed_by,
        }


def gpu_key(g: GpuState) -> str:
    return str(g.uuid) if not is_na(g.uuid) else f"index-{g.index}"


def assess(
    samples: list[list[GpuState]],
    cfg: GpuConfig,
    own: set[int],
    *,
    claimed_by: Callable[[GpuState], dict[str, Any] | None] = lambda g: None,
    enrich: Callable[[GpuProcess], GpuProcess] = lambda p: p,
    judge_util: bool = True,
) -> list[Assessment]:
    """Judge every GPU seen in the last sample (and note those that vanished meanwhile).
    judge_util=False: no sample's utilization is judged (all may show this run's own step)."""
    if not samples:
        return []
    last = {gpu_key(g): g for g in samples[-1]}
    seen: dict[str, GpuState] = {}
    for snap in samples:
        for g in snap:
            seen[gpu_key(g)] = g
    out = []
    for key, g in last.items():
        series = [s[key] for s in ({gpu_key(x): x for x in snap} for snap in samples) if key in s]
        out.append(_assess_one(g, series, len(samples), cfg, own, claimed_by(g), enrich, judge_util))
    for key, g in seen.items():
        if key not in last:
            out.append(Assessment(g, False, ["disappeared during the check"], samples=len(samples)))
    return sorted(out, key=lambda a: a.gpu.index)


def _assess_one(
    g: GpuState,
    series: list[GpuState],
    n: int,
    cfg: GpuConfig,
    own: set[int],
    claim: dict[str, Any] | None,
    enrich: Callable[[GpuProcess], GpuProcess],
    judge_util: bool = True,
) -> Assessment:
    reasons: list[str] = []
    notes: list[str] = []
    if claim is not None:
        reasons.append(f"claimed by another kopt run ({holder(claim)})")
    if len(series) < n:
        reasons.append(f"seen in {len(series)} of {n} samples")

    foreign: dict[int, GpuProcess] = {}
    procs_known = False
    for s in series:
        if is_na(s.processes):
            continue
        procs_known = True
        for p in s.processes:
            if p.pid not in own:
                foreign.setdefault(p.pid, p)
    last_procs = () if is_na(series[-1].processes) else series[-1].processes
    own_mem = sum(p.mem_mib for p in last_procs if p.pid in own and not is_na(p.mem_mib))
    foreign_list = [enrich(p) for p in foreign.values()]
    if foreign_list:
        reasons.append(f"{len(foreign_list)} foreign process(es): " + ", ".join(proc_text(p) for p in foreign_list))
    if not procs_known:
        notes.append("processes not readable: " + g.extra.get("na", {}).get("processes", "backend cannot list them"))

    # NVML's utilization covers a trailing window of up to 1 s, so the first sample can still
    # see this run's own step that just ended: with several samples it is not judged.
    judged = (series[1:] if len(series) > 1 else series) if judge_util else []
    utils = [s.util_pct for s in judged if not is_na(s.util_pct)]
    util_max = max(utils) if utils else NA
    if utils and util_max > cfg.util_max_pct:
        reasons.append(f"utilization up to {util_max:.0f}% > {cfg.util_max_pct:g}%")
    elif not judge_util:
        notes.append("utilization not judged (quick recheck right after this run's own step)")
    elif not utils:
        notes.append("utilization not readable")

    mems = [s.mem_used_mib for s in series if not is_na(s.mem_used_mib)]
    used = max(0.0, mems[-1] - own_mem) if mems else NA
    growth = mems[-1] - mems[0] if len(mems) >= 2 else NA
    if mems:
        if used > cfg.mem_used_max_mib:
            reasons.append(f"memory used {used:.0f} MiB > {cfg.mem_used_max_mib:g} MiB")
        if not is_na(growth) and growth > cfg.mem_growth_max_mib:
            reasons.append(f"memory grew {growth:.0f} MiB during the check > {cfg.mem_growth_max_mib:g} MiB")
    else:
        notes.append("memory used not readable")

    if not utils and not procs_known:
        reasons.append(
            "cannot tell: neither utilization nor processes readable"
            if judge_util
            else "cannot tell: processes not readable"
        )
    return Assessment(g, not reasons, reasons, notes, len(series), util_max, used, growth, foreign_list, claim)


def busyness(a: Assessment) -> tuple[float, float, int]:
    """Sort key: the most idle GPU first (lowest peak utilization, then memory, then index)."""
    util = 0.0 if is_na(a.util_max_pct) else a.util_max_pct
    mem = 0.0 if is_na(a.mem_used_mib) else a.mem_used_mib
    return (util, mem, a.gpu.index)


def round_flags(before: dict[str, Any] | None, after: dict[str, Any] | None) -> list[str]:
    """What disturbed a timed step, from the evidence before and after it ([] when nothing).

    Flags: "gpu_vanished", "gpu_changed", "throttle:<reason>" (a disturbing throttle reason
    active before or after), "throttle_counter:<name>+<delta>" (a cumulative throttle counter
    grew in between), "foreign_process:<pid>:<name>" (a foreign process on the GPU)."""
    if before is None and after is None:
        return []
    if after is None or after.get("missing"):
        return ["gpu_vanished"]
    if before is None or before.get("missing"):
        return ["gpu_appeared"] if before is not None else []
    flags: set[str] = set()
    if before.get("uuid") != after.get("uuid"):
        flags.add("gpu_changed")
    for ev in (before, after):
        for reason in disturbing(tuple(ev.get("throttle") or ())):
            flags.add(f"throttle:{reason}")
    b_counters = before.get("throttle_counters") or {}
    for name, value in (after.get("throttle_counters") or {}).items():
        old = b_counters.get(name)
        if isinstance(old, int | float) and isinstance(value, int | float) and value > old:
            flags.add(f"throttle_counter:{name}+{value - old:g}")
    for ev in (before, after):
        for p in ev.get("foreign_processes") or ():
            flags.add(f"foreign_process:{p.get('pid')}:{p.get('name') or '?'}")
    return sorted(flags)


def proc_text(p: GpuProcess) -> str:
    name = "?" if is_na(p.name) else p.name
    who = "" if is_na(p.user) else f" ({p.user})"
    mem = "" if is_na(p.mem_mib) else f" {p.mem_mib:.0f} MiB"
    return f"{p.pid} {name}{who}{mem}"


def proc_dict(p: GpuProcess) -> dict[str, Any]:
    return {
        "pid": p.pid,
        "name": None if is_na(p.name) else p.name,
        "user": None if is_na(p.user) else p.user,
        "mem_mib": None if is_na(p.mem_mib) else p.mem_mib,
    }


def holder(info: dict[str, Any]) -> str:
    parts = [str(info["owner"])] if info.get("owner") else []
    if info.get("pid"):
        parts.append(f"pid {info['pid']}")
    if info.get("since"):
        parts.append(f"since {info['since']}")
    return ", ".join(parts) or "holder unknown"


def visible_devices_env(gpu: GpuState) -> dict[str, str]:
    """The environment that binds a child process to `gpu`."""
    if gpu.vendor == "amd":
        return {"HIP_VISIBLE_DEVICES": str(gpu.index)}
    # NVML numbers GPUs in PCI bus order; CUDA's default order may differ.
    return {"CUDA_VISIBLE_DEVICES": str(gpu.index), "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}


# ---------------------------------------------------------------------------------------
# The `kopt gpus` report (`gate.gpus_report` runs the check)


def check_report(
    cfg: GpuConfig, backend: Backend, found: list[Assessment], *, gpu_seen: bool, when: str
) -> dict[str, Any]:
    """`kopt gpus`: one check's assessments (`found`, by `backend`; `gpu_seen`: whether it ever
    read a GPU) as the stable JSON of docs/gpu-gate.md, made at `when`."""
    idle = sorted((a for a in found if a.idle), key=busyness)
    pick = idle[0] if idle else None
    if not found:
        summary = "no GPU: CPU-only targets run without the gate" if not gpu_seen else "no GPU visible"
    elif pick is not None:
        summary = f"{len(idle)} of {len(found)} GPU(s) idle; the gate would pick GPU {pick.gpu.index}"
    else:
        summary = f"all {len(found)} GPU(s) busy; the gate would wait {cfg.wait_s:g} s and check again"
    return {
        "time": when,
        "backend": {
            "name": backend.name,
            "vendor": backend.vendor,
            "status": str(getattr(backend, "status", "")),
            "tried": list(getattr(backend, "tried", [])),
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
