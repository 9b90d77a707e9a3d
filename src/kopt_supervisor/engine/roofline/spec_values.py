"""A hardware spec value with its source (pure): what the roofline math and the reports read
of a spec wiki. A value with no source is `UNKNOWN (no source)` and never enters a target.
Reading the wiki (finding and parsing pages) is engine/roofline/specs.py's.
"""

from __future__ import annotations

from dataclasses import dataclass

UNKNOWN = "UNKNOWN (no source)"

_TO_SI = {
    "TB/s": 1e12,
    "GB/s": 1e9,
    "MB/s": 1e6,
    "B/s": 1.0,
    "PFLOPS": 1e15,
    "TFLOPS": 1e12,
    "GFLOPS": 1e9,
    "FLOP/s": 1.0,
}


@dataclass(frozen=True)
class Spec:
    metric: str
    value: float | None
    unit: str = ""
    source: str = ""
    """`<path>:<line>` of the value in its wiki page; empty when unknown."""
    citation: str = ""
    """What the page cites for it (the document, table or section; or the measurement)."""

    @property
    def known(self) -> bool:
        return self.value is not None and bool(self.source)

    def line(self) -> str:
        if not self.known:
            return f"{self.metric}: {UNKNOWN}"
        return f"{self.metric}: {format_value(self.value)} {self.unit} <- {self.source}"

    def si(self) -> float | None:
        """The value in bytes/s or FLOP/s (for bandwidth and rate units), else None."""
        if not self.known or self.unit not in _TO_SI:
            return None
        assert self.value is not None  # known
        return float(self.value) * _TO_SI[self.unit]


def format_value(value: float | None) -> str:
    if value is None:
        return "UNKNOWN"
    return f"{value:.6g}" if abs(value) < 1e6 else f"{value:.0f}"


def unknown(metric: str) -> Spec:
    return Spec(metric, None)


def get_spec(specs: dict[str, Spec], metric: str) -> Spec:
    """The spec for `metric`, or the UNKNOWN one."""
    return specs.get(metric) or unknown(metric)
