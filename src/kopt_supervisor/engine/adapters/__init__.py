"""Adapters: the outputs engineers already have, read as kopt's rows.

kopt.toml's `[target].format` names one (`[target.adapter]` holds its options):

| format | reads |
|---|---|
| `csv` | kopt's CSV (a file, or the last CSV block of stdout that names the metric) |
| `table` | a printed table: whitespace-aligned (pandas' `print(df)`, f-strings), markdown, or CSV |
| `perf_report` | triton.testing.perf_report's CSV (`run(save_path=)`) or printout (`print_data=True`) |
| `pytest-benchmark` | `pytest --benchmark-json=PATH` |
| `google-benchmark` | `--benchmark_format=json` (stdout) or `--benchmark_out=PATH` |
| `torch-benchmark` | torch.utils.benchmark `Compare(...).print()` tables and printed Measurements |
| `long` | long-format rows: a value column beside a metric-name/unit column (Liger-Kernel's CSV), read wide |

A KernelBench `Model`/`ModelNew` pair is not an output format: kopt times it itself through
its public harness (`python -m kopt_supervisor.kernels.harness.kernelbench`), whose CSV is
kopt's own.

    read_tables(fmt, text, source, options)        -> every table in the output (detection)
    frame_from_text(fmt, text, source, options, csv_file=...)
                                                   -> the one table the loop measures (pure;
                                                      engine.metrics.measure reads it)
    read_frame(fmt, path, options, from_stdout=...) -> the same from a file

Pure apart from read_table / read_frame, which read the file they are given.

The rooms: `table` (Table, AdapterError, units), `text` (tables printed as text, perf_report,
long format), `benchmarks` (pytest-benchmark, Google Benchmark, torch.utils.benchmark).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from kopt_supervisor.engine.adapters import benchmarks, text
from kopt_supervisor.engine.adapters.table import AdapterError, Table
from kopt_supervisor.engine.config import FORMATS, AdapterConfig

__all__ = [
    "FORMATS",
    "AdapterError",
    "Table",
    "frame_from_text",
    "read_frame",
    "read_table",
    "read_tables",
    "sniff",
    "table_from_text",
]


def read_tables(fmt: str, content: str, source: str, options: AdapterConfig | None = None) -> list[Table]:
    """Every table of format `fmt` in `content` (a file's text, or stdout)."""
    o = options or AdapterConfig()
    if fmt not in FORMATS:
        raise AdapterError(f"unknown format {fmt!r} (known: {', '.join(FORMATS)})")
    if fmt == "csv":
        return [t for t in text.find_tables(content, source) if t.format == "csv"]
    if fmt == "table":
        return text.find_tables(content, source)
    if fmt == "perf_report":
        return text.read_perf_report(content, source)
    if fmt == text.LONG_FORMAT:
        return text.read_long_format(content, source)
    if fmt == "pytest-benchmark":
        return [benchmarks.read_pytest_benchmark(content, source, unit=o.unit)]
    if fmt == "google-benchmark":
        return [benchmarks.read_google_benchmark(content, source, unit=o.unit, stat=o.stat)]
    return benchmarks.read_torch_benchmark(content, source, unit=o.unit)


def table_from_text(
    fmt: str, content: str, source: str, options: AdapterConfig | None = None, *, csv_file: bool = False
) -> Table:
    """The table kopt measures in `content` (a file's text, or stdout): with `csv_file` the
    whole text is one CSV file (formats csv and perf_report), else the table
    [target.adapter].table names, or the only one (text.select). Pure."""
    o = options or AdapterConfig()
    if csv_file and fmt == "csv":
        return text.csv_file_table(content, source)
    if csv_file and fmt == "perf_report":
        return text.perf_report_file_table(content, source)
    if csv_file and fmt == text.LONG_FORMAT:
        return text.long_format_file_table(content, source)
    tables = read_tables(fmt, content, source, o)
    if not tables:
        raise AdapterError(f"{source}: no {fmt} output found")
    return text.select(tables, o.table, f"{source} ({fmt})")


def frame_from_text(
    fmt: str, content: str, source: str, options: AdapterConfig | None = None, *, csv_file: bool = False
) -> pd.DataFrame:
    """What engine.metrics.measure reads: the rows of `table_from_text`. Pure."""
    return table_from_text(fmt, content, source, options, csv_file=csv_file).frame


def read_table(fmt: str, path: Path, options: AdapterConfig | None = None, *, from_stdout: bool = False) -> Table:
    """`table_from_text` of a file: the bench's stdout, or the file it wrote (a .csv file is
    one CSV table)."""
    csv_file = not from_stdout and path.suffix.lower() == ".csv"
    return table_from_text(
        fmt, text.read_text(path), "stdout" if from_stdout else path.name, options, csv_file=csv_file
    )


def read_frame(
    fmt: str, path: Path, options: AdapterConfig | None = None, *, from_stdout: bool = False
) -> pd.DataFrame:
    """The rows of `read_table` (an AdapterError, one line naming the file and the format,
    when the output cannot be read)."""
    return read_table(fmt, path, options, from_stdout=from_stdout).frame


SPECIFIC = ("google-benchmark", "pytest-benchmark", "torch-benchmark", "perf_report", text.LONG_FORMAT)
GENERIC = ("csv", "table")


def sniff(content: str, source: str, options: AdapterConfig | None = None) -> list[Table]:
    """Every table in `content`, for detection: the tables of the first specific format that
    finds any (a JSON report, torch.utils.benchmark's printout, perf_report's tables: the
    lines around them are their own syntax, not tables of their own), else every CSV block
    and printed table."""
    for fmt in SPECIFIC:
        if fmt in ("google-benchmark", "pytest-benchmark") and '"benchmarks"' not in content:
            continue
        try:
            tables = read_tables(fmt, content, source, options)
        except AdapterError:
            continue
        if tables:
            return tables
    return read_tables("table", content, source, options)
