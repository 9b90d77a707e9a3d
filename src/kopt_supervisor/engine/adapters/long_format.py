"""Long-format tables: one row per (config, implementation, metric), the number in one value
column and what it measures in a metric-name and/or unit column, as Liger-Kernel's
`benchmark/data/all_benchmark_data.csv` holds them (`kernel_provider`, `metric_name`,
`metric_unit`, `x_value`, `y_value_50`, `gpu_name`...).

    classify(table) -> Table | None     the table read wide, or None when it is not long-format

Read wide: the config columns are every column that is not the value, a statistic of it
(`y_value_20`, `y_value_80`), the metric's name, unit or provider, or per-run bookkeeping
(`timestamp`, `*_version`, a label describing another column); one column per (provider,
metric) named `<provider> <metric> (<unit>)` (`liger speed (ms)`), so the unit reads as
perf_report's `Triton (GB/s)` does and a reference provider's column (`huggingface speed
(ms)`) is recognised by its name. A column naming the GPU or host (`gpu_name`) stays a config
column: rows measured on different hardware are never merged as samples of one config. Rows
repeating a (config, provider, metric) are further samples of that config.

Pure.
"""

from __future__ import annotations

import re

import pandas as pd

from kopt_supervisor.engine.adapters import text
from kopt_supervisor.engine.adapters.model import AdapterError, Table

FORMAT = "long"
METRIC_NAME_COLUMNS = ("metric_name", "metric", "measure", "quantity", "measurement_name")
UNIT_COLUMNS = ("metric_unit", "unit", "units")
PROVIDER_COLUMNS = ("kernel_provider", "provider", "impl", "implementation", "backend", "library", "variant", "method")
VALUE = re.compile(r"^(y_?)?values?(_?(50|p50|median))?$|^median$|^result$", re.IGNORECASE)
VALUE_STAT = re.compile(r"^(y_?)?values?_?(p?\d{1,2}|mean|min|max|std|stddev)$", re.IGNORECASE)
BOOKKEEPING = re.compile(r"(^|_)(timestamp|date|datetime|time_?stamp|version|commit|label)$", re.IGNORECASE)
"""Per-run bookkeeping (a timestamp changes every run: as a config column no two runs would
ever share a config) and labels describing another column (`x_label`)."""


def _find(columns: list[str], names: tuple[str, ...]) -> str | None:
    low = {c.lower(): c for c in columns}
    return next((low[n] for n in names if n in low), None)


def _value_column(frame: pd.DataFrame) -> str | None:
    numeric = [c for c in map(str, frame.columns) if pd.api.types.is_numeric_dtype(frame[c])]
    exact = [c for c in numeric if VALUE.match(c)]
    return min(exact, key=lambda c: (not re.search(r"50|median", c, re.IGNORECASE), len(c))) if exact else None


def classify(t: Table) -> Table | None:
    """The table read wide (see the module docstring), or None when it has no metric-name or
    unit column beside a numeric value column."""
    cols = [c for c in t.columns if c != text.TABLE_COLUMN]
    name_col = _find(cols, METRIC_NAME_COLUMNS)
    unit_col = _find(cols, UNIT_COLUMNS)
    value = _value_column(t.frame)
    if value is None or (name_col is None and unit_col is None):
        return None
    if name_col is not None and pd.api.types.is_numeric_dtype(t.frame[name_col]):
        return None
    provider = _find(cols, PROVIDER_COLUMNS)
    stats = [c for c in cols if c != value and VALUE_STAT.match(c)]
    dropped = [c for c in cols if BOOKKEEPING.search(c)]
    special = {value, name_col, unit_col, provider, *stats, *dropped} - {None}
    config = [c for c in t.columns if c not in special]
    frame = t.frame

    def part(col: str | None) -> pd.Series:
        if col is None:
            return pd.Series([""] * len(frame), index=frame.index)
        return frame[col].fillna("").astype(str).str.strip()

    label = (part(provider) + " " + part(name_col)).str.strip()
    label = label.where(label != "", "value")
    unit = part(unit_col)
    wide_name = label.where(unit == "", label + " (" + unit + ")")
    units = {w: u for w, u in zip(wide_name, unit, strict=True) if u}
    rows: dict[tuple[object, ...], dict[str, object]] = {}
    seen: dict[tuple[object, ...], int] = {}
    records = frame[config].astype(object).where(frame[config].notna(), None).itertuples(index=False, name=None)
    for key, metric, v in zip(records, wide_name, frame[value], strict=True):
        k = (*key, metric)
        n = seen.get(k, 0)  # the n-th row of this (config, metric): the n-th sample of the config
        seen[k] = n + 1
        rows.setdefault((*key, n), dict(zip(config, key, strict=True)))[metric] = v
    metrics = tuple(dict.fromkeys(str(w) for w in wide_name))
    wide = pd.DataFrame(list(rows.values()), columns=[*config, *metrics])
    notes = [
        f"long-format rows read wide: the value {value!r}"
        + (f" named by {name_col!r}" if name_col else "")
        + (f" in {unit_col!r}" if unit_col else "")
        + (f", one column per {provider!r}" if provider else "")
        + (
            f"; {', '.join(stats)} (statistics of the value) and {', '.join(dropped)} (bookkeeping) set aside"
            if stats or dropped
            else ""
        )
    ]
    return Table(wide, FORMAT, t.title, tuple(config), metrics, units, (), t.source, (*t.notes, *notes))


def file_table(content: str, name: str) -> Table:
    """A long-format CSV file, read wide."""
    t = classify(text.csv_file_table(content, name))
    if t is None:
        raise AdapterError(
            f"{name}: not a long-format table (expected a value column such as 'y_value_50' or "
            f"'value' beside a metric-name or unit column such as 'metric_name'/'metric_unit')"
        )
    return t


def read_text(content: str, source: str = "stdout") -> list[Table]:
    """Every long-format table among the tables printed in `content`."""
    return [c for c in (classify(t) for t in text.find_tables(content, source)) if c is not None]
