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

The rooms: `table` (Table, AdapterError, units), `text` (tables printed as text, perf_report,
long format), `benchmarks` (pytest-benchmark, Google Benchmark, torch.utils.benchmark).

Also here, for the loop: where a bench run's table is and what it says
(`csv_stamps`, `find_csv`, `read_kopt_csv`, `read_measurement`): the CSV file it wrote (a glob inside the
worktree, newest file written during this run) or its stdout, read and handed to the pure
parser (engine/metrics.py).

Side effects: file system reads only.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from kopt_supervisor.engine.adapters import benchmarks, text
from kopt_supervisor.engine.adapters.table import AdapterError, Table
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
