"""What a GPU backend reports: plain records with an explicit NA for what it cannot read.

A backend never raises into its caller for a field it cannot read: the field is `NA`, and
the reason goes into `GpuState.extra["na"]` so the UI can say why. A GPU that vanished is
simply absent from the next reading. `NA` is falsy, compares unequal to every number, and
prints as "NA", so the UI can show it without special cases.

Also here: the shared vocabulary of throttle reasons (NVML bits, amdsmi violation flags)
and `read_field`, the one place where a library call becomes a value or an NA.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol


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


class LibraryBackend:
    """A backend over a Python binding (pynvml, amdsmi), loaded and initialised on the first
    `read()`; a binding that cannot be imported or initialised leaves the backend empty with
    the reason in `status`, and `close()` shuts an initialised library down, never raising."""

    name = ""
    vendor = ""
    module_name = ""
    missing = ""
    """The status when the binding cannot be imported."""
    init_call = ""
    """The library's init function, named in the status when it fails."""

    def __init__(self, module: Any = None) -> None:
        self._module = module
        self.lib: Any = None
        self._ready = False
        self._failed = False
        self.status = "not started"

    def _init(self, lib: Any) -> None:
        """Initialise the library (raises on failure)."""
        raise NotImplementedError

    def _shutdown(self, lib: Any) -> None:
        raise NotImplementedError

    def _ready_status(self, lib: Any) -> str:
        return self.name

    def _start(self) -> bool:
        if self._ready:
            return True
        if self._failed:
            return False
        import importlib

        try:
            lib = self._module or importlib.import_module(self.module_name)
        except Exception as exc:  # ImportError, or bindings that cannot find their .so
            return self._fail(f"{self.missing}: {why(exc)}")
        try:
            self._init(lib)
        except Exception as exc:
            return self._fail(f"{self.init_call} failed: {why(exc)}")
        self.lib = lib
        self._ready = True
        self.status = self._ready_status(lib)
        return True

    def _fail(self, reason: str) -> bool:
        self._failed = True
        self.status = reason
        return False

    def close(self) -> None:
        if self._ready:
            try:
                self._shutdown(self.lib)
            except Exception:  # shutting down a broken library must not raise either
                pass
        self._ready = False
        self.lib = None
