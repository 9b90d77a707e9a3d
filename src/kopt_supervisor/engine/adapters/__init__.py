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

Pure apart from read_table / read_frame, which read the file they are given, and the bench
run's output found and read (below).

The rooms: `table` (Table, AdapterError, units; tables printed as text), `benchmarks`
(pytest-benchmark, Google Benchmark, torch.utils.benchmark, perf_report); the long format is
read here (at the end, below).

Also here, for the loop: where a bench run's table is and what it says
(`csv_stamps`, `find_csv`, `read_kopt_csv`, `read_measurement`): the CSV file it wrote (a glob inside the
worktree, newest file written during this run) or its stdout, read and handed to the pure
parser (engine/metrics.py).

Long format (`[target].format = "long"`): one row per (config, implementation, metric), the
number in one value column and what it measures in a metric-name and/or unit column, as
Liger-Kernel's `benchmark/data/all_benchmark_data.csv` holds them (`kernel_provider`,
`metric_name`, `metric_unit`, `x_value`, `y_value_50`, `gpu_name`...). Read wide: the config
columns are every column that is not the value, a statistic of it (`y_value_20`,
`y_value_80`), the metric's name, unit or provider, or per-run bookkeeping (`timestamp`,
`*_version`, a label describing another column); one column per (provider, metric) named
`<provider> <metric> (<unit>)` (`liger speed (ms)`), so the unit reads as perf_report's
`Triton (GB/s)` does and a reference provider's column (`huggingface speed (ms)`) is
recognised by its name. A column naming the GPU or host (`gpu_name`) stays a config column:
rows measured on different hardware are never merged as samples of one config. Rows repeating
a (config, provider, metric) are further samples of that config.

Side effects: file system reads only.
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from kopt_supervisor.engine.adapters import benchmarks
from kopt_supervisor.engine.adapters.table import (
    TABLE_COLUMN,
    AdapterError,
    Table,
    csv_file_table,
    find_tables,
    read_text,
    select,
)
from kopt_supervisor.engine.config import FORMATS, AdapterConfig, TargetConfig
from kopt_supervisor.engine.metrics import BenchError, Measurement, measure, parse_table
from kopt_supervisor.engine.sandbox import read_output

__all__ = [
    "FORMATS",
    "MAX_TABLE_BYTES",
    "AdapterError",
    "CsvStamps",
    "Table",
    "frame_from_text",
    "csv_stamps",
    "find_csv",
    "read_frame",
    "read_kopt_csv",
    "read_measurement",
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
        return [t for t in find_tables(content, source) if t.format == "csv"]
    if fmt == "table":
        return find_tables(content, source)
    if fmt == "perf_report":
        return benchmarks.read_perf_report(content, source)
    if fmt == LONG_FORMAT:
        return read_long_format(content, source)
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
    [target.adapter].table names, or the only one (table.select). Pure."""
    o = options or AdapterConfig()
    if csv_file and fmt == "csv":
        return csv_file_table(content, source)
    if csv_file and fmt == "perf_report":
        return benchmarks.perf_report_file_table(content, source)
    if csv_file and fmt == LONG_FORMAT:
        return long_format_file_table(content, source)
    tables = read_tables(fmt, content, source, o)
    if not tables:
        raise AdapterError(f"{source}: no {fmt} output found")
    return select(tables, o.table, f"{source} ({fmt})")


def frame_from_text(
    fmt: str, content: str, source: str, options: AdapterConfig | None = None, *, csv_file: bool = False
) -> pd.DataFrame:
    """What engine.metrics.measure reads: the rows of `table_from_text`. Pure."""
    return table_from_text(fmt, content, source, options, csv_file=csv_file).frame


def read_table(fmt: str, path: Path, options: AdapterConfig | None = None, *, from_stdout: bool = False) -> Table:
    """`table_from_text` of a file: the bench's stdout, or the file it wrote (a .csv file is
    one CSV table)."""
    csv_file = not from_stdout and path.suffix.lower() == ".csv"
    return table_from_text(fmt, read_text(path), "stdout" if from_stdout else path.name, options, csv_file=csv_file)


def read_frame(
    fmt: str, path: Path, options: AdapterConfig | None = None, *, from_stdout: bool = False
) -> pd.DataFrame:
    """The rows of `read_table` (an AdapterError, one line naming the file and the format,
    when the output cannot be read)."""
    return read_table(fmt, path, options, from_stdout=from_stdout).frame


LONG_FORMAT = "long"
"""`[target].format` of the long format (read at the end, below)."""
SPECIFIC = ("google-benchmark", "pytest-benchmark", "torch-benchmark", "perf_report", LONG_FORMAT)
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


CsvStamps = dict[Path, tuple[int, int, int, int]]
"""Files matching the CSV glob before a run: resolved path -> (mtime_ns, ctime_ns, size,
inode). Any write changes ctime, whichever way the clock went."""


def csv_stamps(worktree: Path, pattern: str) -> CsvStamps:
    """The files inside `worktree` that match `pattern` now, with what identifies their
    content (taken before a bench run; "-" has none)."""
    if pattern == "-":
        return {}
    root = worktree.resolve()
    out: CsvStamps = {}
    try:
        matches = list(root.glob(pattern))
    except (NotImplementedError, ValueError) as exc:  # an absolute or empty pattern
        raise BenchError(f"csv = {pattern!r}: not a glob inside the worktree ({exc})") from None
    for p in matches:
        try:
            rp = p.resolve()
            if root not in rp.parents or not rp.is_file():
                continue  # a glob may not escape the worktree (.., symlinks)
            st = rp.stat()
        except OSError:
            continue
        out[rp] = (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino)
    return out


def find_csv(worktree: Path, pattern: str, before: CsvStamps, stdout_path: Path) -> Path:
    """The CSV this run wrote: stdout for "-", else the newest file matching `pattern` that
    is new or changed since `before` (taken by `csv_stamps` before the run). A file left over
    from an earlier run never counts, whatever its timestamp says: the wall clock may jump."""
    if pattern == "-":
        return stdout_path
    found = [(stamp[0], path) for path, stamp in csv_stamps(worktree, pattern).items() if before.get(path) != stamp]
    if not found:
        raise BenchError(f"no CSV matching {pattern!r} was written by this run in {worktree.name}/")
    return max(found)[1]


MAX_TABLE_BYTES = 256 * 2**20


def read_kopt_csv(path: Path, *, metric: str, from_stdout: bool = False) -> pd.DataFrame:
    """The table in `path`, read as a file candidate code may have written is read: never
    through a link, never blocking on a FIFO, at most MAX_TABLE_BYTES."""
    try:
        text = read_output(path, MAX_TABLE_BYTES).decode("utf-8", errors="replace")
    except OSError as exc:
        raise BenchError(f"{path.name}: cannot read: {exc.strerror or exc}") from None
    return parse_table(text, metric=metric, from_stdout=from_stdout, source=path.name)


def read_measurement(path: Path, cfg: TargetConfig, *, from_stdout: bool = False) -> Measurement:
    """A bench run's rows by the target's rules: kopt's CSV, or the output format
    [target].format names, read by its adapter (engine/adapters)."""
    if cfg.format == "csv":
        return measure(read_kopt_csv(path, metric=cfg.metric, from_stdout=from_stdout), cfg, path.name)
    try:
        text = read_output(path, MAX_TABLE_BYTES).decode("utf-8", errors="replace")
    except OSError as exc:
        raise BenchError(f"{path.name}: cannot read: {exc.strerror or exc}") from None
    source = "stdout" if from_stdout else path.name
    try:
        df = frame_from_text(
            cfg.format, text, source, cfg.adapter, csv_file=not from_stdout and path.suffix.lower() == ".csv"
        )
    except AdapterError as exc:
        raise BenchError(str(exc)) from None
    return measure(df, cfg, source)


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


def classify_long_format(t: Table) -> Table | None:
    """The table read wide (see the module docstring), or None when it has no metric-name or
    unit column beside a numeric value column."""
    cols = [c for c in t.columns if c != TABLE_COLUMN]
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
    return Table(wide, LONG_FORMAT, t.title, tuple(config), metrics, units, (), t.source, (*t.notes, *notes))


def long_format_file_table(content: str, name: str) -> Table:
    """A long-format CSV file, read wide."""
    t = classify_long_format(csv_file_table(content, name))
    if t is None:
        raise AdapterError(
            f"{name}: not a long-format table (expected a value column such as 'y_value_50' or "
            f"'value' beside a metric-name or unit column such as 'metric_name'/'metric_unit')"
        )
    return t


def read_long_format(content: str, source: str = "stdout") -> list[Table]:
    """Every long-format table among the tables printed in `content`."""
    return [c for c in (classify_long_format(t) for t in find_tables(content, source)) if c is not None]
