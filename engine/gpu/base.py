"""What a GPU backend reports: plain records with an explicit NA for what it cannot read.

A backend never raises into its caller for a field it cannot read: the field is `NA`. A GPU
that vanished is simply absent from the next reading. `NA` is falsy, compares unequal to
every number, and prints as "NA", so the UI can show it without special cases.
"""

from __future__ import annotations

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
    vendor: str = "unknown"
    backend: str = "unknown"
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return jsonable(asdict(self))


class Backend(Protocol):
    """One source of GPU readings. Lazily initialised; `close()` shuts it down cleanly."""

    name: str
    vendor: str

    def read(self) -> list[GpuState]:
        """The GPUs now. Never raises for a field; returns [] when the library is gone."""
        ...

    def close(self) -> None: ...
