"""The adapters' common data: a `Table` read from a bench's output, `AdapterError`, and the
units in column names and values.

A Table is kopt's rows (one per config, or several per config as samples) with what the
format itself says about its columns: which identify a config, which are measurements and in
what unit, which judge correctness. The loop only needs the frame; `kopt init` detection
(engine/onboard) uses the rest to propose a kopt.toml.

Units: which columns are times, which are rates, in what unit. A bench names its columns as
it likes: `us`, `time (us)`, `latency[ms]`, `triton_ms`, `median_us`, `Triton (GB/s)`,
`gbps`, `TFLOPS`, `it/s`. `column_unit` reads the unit a name carries (in brackets or
parentheses, as a `_suffix`/`prefix_`, or the whole name) and says whether it is a time
(lower is better) or a rate (higher is better). `to_unit` converts times between units
(adapters normalise to one unit, so a table that switches from ms to us when a kernel gets
faster still compares like with like).

Pure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import pandas as pd

from kopt_supervisor.engine.errors import KoptFailure


class AdapterError(KoptFailure):
    """A bench's output cannot be read in the configured format (one line naming the file,
    the format and what is wrong). engine.metrics turns it into a BenchError."""


@dataclass(frozen=True)
class Table:
    frame: pd.DataFrame
    format: str
    """The adapter that read it ("csv", "table", "perf_report", "pytest-benchmark",
    "google-benchmark", "torch-benchmark")."""
    title: str = ""
    """What the output calls this table (a perf_report plot name, a torch label, the line
    printed above a table), or ""."""
    config: tuple[str, ...] = ()
    """Columns the format says identify a config (empty: the format does not say)."""
    metrics: tuple[str, ...] = ()
    """Columns the format says are measurements (empty: the format does not say)."""
    units: dict[str, str] = field(default_factory=dict)
    """Column -> unit, where the format says it ("us", "ms", "GB/s", "TFLOPS"...)."""
    correctness: tuple[str, ...] = ()
    """Columns the format says judge correctness (an error flag, an error message)."""
    source: str = ""
    """Where it was read from (a file name, or "stdout")."""
    notes: tuple[str, ...] = ()
    """What the adapter did that a reader should know (rows dropped, units converted)."""

    @property
    def columns(self) -> list[str]:
        return [str(c) for c in self.frame.columns]

    def describe(self) -> str:
        """One line: source, format, title, columns."""
        where = f"{self.source}: " if self.source else ""
        title = f" {self.title!r}" if self.title else ""
        return f"{where}{self.format}{title} ({len(self.frame)} rows; columns {', '.join(self.columns)})"


TIME = "time"
RATE = "rate"

SECONDS: dict[str, float] = {
    "ns": 1e-9,
    "nsec": 1e-9,
    "nanoseconds": 1e-9,
    "nanosecond": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "μs": 1e-6,
    "usec": 1e-6,
    "microseconds": 1e-6,
    "microsecond": 1e-6,
    "ms": 1e-3,
    "msec": 1e-3,
    "milliseconds": 1e-3,
    "millisecond": 1e-3,
    "s": 1.0,
    "sec": 1.0,
    "secs": 1.0,
    "seconds": 1.0,
    "second": 1.0,
}
"""Time units -> seconds."""

RATES = (
    "gb/s",
    "gib/s",
    "tb/s",
    "tib/s",
    "mb/s",
    "mib/s",
    "kb/s",
    "b/s",
    "bytes/s",
    "bytes_per_second",
    "gbps",
    "tbps",
    "tflops",
    "gflops",
    "pflops",
    "mflops",
    "flops",
    "tflop/s",
    "gflop/s",
    "tops",
    "gops",
    "it/s",
    "items/s",
    "items_per_second",
    "ops/s",
    "op/s",
    "iter/s",
    "samples/s",
    "tokens/s",
    "throughput",
    "bandwidth",
    "bw",
)
"""Names (lower case) of rate units: more is better."""

TIME_WORDS = ("time", "latency", "duration", "elapsed", "runtime", "walltime", "wall")
"""Words that name a time when no unit says which (the unit is then unknown)."""

_BRACKETED = re.compile(r"^(?P<base>.*?)\s*[\(\[\{]\s*(?P<unit>[^\)\]\}]+?)\s*[\)\]\}]\s*$")


@dataclass(frozen=True)
class ColumnUnit:
    base: str
    """The name without its unit (`time (us)` -> `time`)."""
    unit: str
    """The unit as written (normalised to lower case, µ -> u), or "" when none is named."""
    kind: str
    """TIME, RATE, or "" (neither: a config column or a statistic of another kind)."""

    @property
    def seconds(self) -> float | None:
        """Seconds per unit for a time (None for rates or an unknown unit)."""
        return SECONDS.get(self.unit) if self.kind == TIME else None


def _norm(unit: str) -> str:
    return unit.strip().lower().replace("µ", "u").replace("μ", "u").replace(" ", "")


def _kind(unit: str) -> str:
    u = _norm(unit)
    if u in SECONDS:
        return TIME
    if u in RATES or u.endswith("/s") or u.endswith("flops") or u.endswith("ps") and u[:-2] in ("gb", "tb", "mb"):
        return RATE
    return ""


def column_unit(name: str) -> ColumnUnit:
    """What `name` says about its unit (see the module docstring)."""
    text = str(name).strip()
    m = _BRACKETED.match(text)
    if m and _kind(m["unit"]):
        return ColumnUnit(m["base"].strip(), _norm(m["unit"]), _kind(m["unit"]))
    low = text.lower()
    whole = _norm(low)
    if _kind(whole):
        return ColumnUnit(text, whole, _kind(whole))
    parts = re.split(r"[_\-\s.:]+", low)
    for part in (parts[-1], parts[0]) if len(parts) > 1 else ():
        k = _kind(part)
        if k:
            return ColumnUnit(text, _norm(part), k)
    for part in parts:
        if part in ("gbps", "tflops", "gflops", "throughput", "bandwidth"):
            return ColumnUnit(text, part, RATE)
    if any(w in parts for w in TIME_WORDS) or any(low.startswith(w) or low.endswith(w) for w in TIME_WORDS):
        return ColumnUnit(text, "", TIME)
    return ColumnUnit(text, "", "")


def to_unit(value: float, from_unit: str, to: str) -> float:
    """A time converted between units (ValueError naming an unknown one)."""
    f, t = _norm(from_unit), _norm(to)
    if f not in SECONDS:
        raise ValueError(f"unknown time unit {from_unit!r}")
    if t not in SECONDS:
        raise ValueError(f"unknown time unit {to!r}")
    return value * SECONDS[f] / SECONDS[t]


def is_time_unit(unit: str) -> bool:
    return _norm(unit) in SECONDS
