"""The adapters' common data: a `Table` read from a bench's output, and `AdapterError`.

A Table is kopt's rows (one per config, or several per config as samples) with what the
format itself says about its columns: which identify a config, which are measurements and in
what unit, which judge correctness. The loop only needs the frame; `kopt init` detection
(engine/onboard) uses the rest to propose a kopt.toml.

Pure.
"""

from __future__ import annotations

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
