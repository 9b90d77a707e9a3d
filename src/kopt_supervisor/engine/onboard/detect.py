"""Where a bench's table is (the files it wrote and its stdout, read by every adapter), and what
each of its columns is.

    BenchRun                      one run of the bench (what `run_bench` returned, and how long)
    candidates(run) -> [Candidate] every table found, each with the kopt.toml keys that read it

A file the bench wrote is read by its kind (.csv: a CSV, a perf_report CSV or long-format
rows (adapters/table.py); .json:
pytest-benchmark or Google Benchmark; .txt/.md/.log/.out: printed tables), stdout by every
adapter (adapters.sniff). Tables of stdout that share their columns are one candidate (read
as one, a `table` column telling them apart); tables with different columns are one each,
named by title or position as `[target.adapter].table` will name them.

Reads the files it is given; nothing else.

What each column of a bench's table is: a config, a metric, a statistic, a correctness
column, or an extra, and why.

Read from the column's name (its words and unit: `time (us)`, `latency[ms]`, `triton_ms`,
`max_abs_err`, `passed`), its values (numbers or text, integers or not, all zero), and what
the table's format says (a perf_report line, pytest-benchmark's stats, Google Benchmark's
real/cpu time). Every classification carries its reason, which the proposed kopt.toml
repeats in a comment.

The classification is pure.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from kopt_supervisor.engine.adapters import classify_long_format, read_tables, sniff
from kopt_supervisor.engine.adapters.benchmarks import classify_perf_report
from kopt_supervisor.engine.adapters.table import (
    RATE,
    TIME,
    AdapterError,
    ColumnUnit,
    Table,
    column_unit,
    find_tables,
    join,
    read_csv_file,
)

RunBench = Callable[[str, Path], tuple[int, Path, list[Path]]]
"""Runs the bench command in a folder: (returncode, stdout path, files it wrote)."""
TEXT_SUFFIXES = (".txt", ".md", ".log", ".out")
MAX_READ_BYTES = 16 << 20


@dataclass(frozen=True)
class BenchRun:
    """One run of the bench in the repo, as `kopt init --bench` made it."""

    bench: str
    repo: Path
    returncode: int
    stdout_path: Path
    files_written: tuple[Path, ...] = ()
    """Files the run created or changed (absolute, or relative to the repo)."""
    seconds: float = float("nan")
    """Wall time of the run."""
    out_dir: Path | None = None
    """Where the files it wrote lie (relative paths as in the repo), when not in `repo`: the
    scratch copy it ran in, or the draft that kept them (onboard/scratch.py)."""
    untracked: tuple[str, ...] = ()
    """Tracked files the bench wrote (a results CSV it appends to): this run ran without them,
    so what they hold is this run's rows only; the proposal untracks them ([target].untrack)."""
    probe: dict[str, Any] | None = None
    """For a perf_report bench: whether kopt's module could import it in the same copy
    (onboard/scratch.py's import_probe); None when nothing was tried."""

    @property
    def outputs(self) -> Path:
        return self.out_dir or self.repo

    def rel(self, path: Path) -> str:
        p = path if path.is_absolute() else self.outputs / path
        for base in (self.outputs, self.repo):
            try:
                return p.resolve().relative_to(base.resolve()).as_posix()
            except ValueError:
                continue
        return str(path)


@dataclass(frozen=True)
class Candidate:
    key: str
    """How an answer names it: `stdout`, `stdout#2`, `file:results/x.csv`, `file:x.json#2`."""
    table: Table
    csv: str
    """[target].csv: "-" or the file (a glob where its name carries a timestamp)."""
    format: str
    """[target].format."""
    adapter_table: str = ""
    """[target.adapter].table (which table of several)."""

    @property
    def from_file(self) -> bool:
        return self.csv != "-"

    def label(self) -> str:
        where = "stdout" if self.csv == "-" else self.csv
        which = f", table {self.adapter_table!r}" if self.adapter_table else ""
        return f"{where}{which} ({self.format}: {len(self.table.frame)} rows; {', '.join(self.table.columns)})"


def glob_of(rel: str) -> str:
    """A file's path as a glob that also matches the next run's file when its name carries a
    timestamp or a run number of 6+ digits (`results_20261122_0912.csv` -> `results_*_*.csv`)."""
    head, _, name = rel.rpartition("/")
    g = re.sub(r"\d{6,}", "*", name)
    return f"{head}/{g}" if head else g


def _read(path: Path) -> str | None:
    try:
        if path.stat().st_size > MAX_READ_BYTES:
            return None
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def _named(tables: list[Table], prefix: str, csv: str, fmt_of: str | None = None) -> list[Candidate]:
    """One candidate per table, or one for all when they share columns and format."""
    if not tables:
        return []
    fmt = fmt_of or tables[0].format
    if len(tables) > 1 and all(t.columns == tables[0].columns and t.format == tables[0].format for t in tables):
        return [Candidate(prefix, join(tables), csv, _loop_format(tables[0], len(tables), fmt_of))]
    if len(tables) == 1:
        return [Candidate(prefix, tables[0], csv, _loop_format(tables[0], 1, fmt_of))]
    titles = [t.title for t in tables]
    out = []
    for i, t in enumerate(tables):
        which = t.title if t.title and titles.count(t.title) == 1 else str(i + 1)
        out.append(
            Candidate(
                f"{prefix}#{i + 1}", t, csv, _loop_format(t, len(tables), fmt_of) if fmt_of is None else fmt, which
            )
        )
    return out


def _loop_format(t: Table, n_tables: int, forced: str | None) -> str:
    """The [target].format that reads this table back: kopt's own CSV reading for a lone CSV
    (engine.metrics as always), the `table` adapter for a CSV among other tables (it picks
    the one named), the table's own format otherwise."""
    if forced:
        return forced
    if t.format == "csv" and n_tables > 1:
        return "table"
    return t.format


def candidates(run: BenchRun) -> list[Candidate]:
    """Every table in the files the bench wrote, then in its stdout."""
    out: list[Candidate] = []
    for f in run.files_written:
        path = f if f.is_absolute() else run.outputs / f
        if path.is_symlink():
            continue  # a link the bench made may point anywhere: not read
        try:
            rel = path.resolve().relative_to(run.outputs.resolve()).as_posix()
        except ValueError:
            continue  # outside the repo: not the bench's table
        suffix = path.suffix.lower()
        if suffix == ".csv":
            try:
                t = read_csv_file(path)
            except AdapterError:
                continue
            chosen = classify_perf_report(t) or classify_long_format(t) or t
            out.append(Candidate(f"file:{rel}", chosen, glob_of(rel), chosen.format))
        elif suffix == ".json":
            text = _read(path)
            if text is None:
                continue
            for fmt in ("google-benchmark", "pytest-benchmark"):
                try:
                    tables = read_tables(fmt, text, rel)
                except AdapterError:
                    continue
                out += _named(tables, f"file:{rel}", glob_of(rel), fmt)
                break
        elif suffix in TEXT_SUFFIXES:
            text = _read(path)
            if text is not None:
                tables = sniff(text, rel)
                specific = tables and tables[0].format not in ("csv", "table")
                out += _named(
                    tables, f"file:{rel}", glob_of(rel), tables[0].format if specific else ("table" if tables else None)
                )
    text = _read(run.stdout_path) or ""
    tables = sniff(text, "stdout")
    if tables:
        specific = tables[0].format not in ("csv", "table")
        if specific:
            out += _named(tables, "stdout", "-", tables[0].format)
        else:
            generic = find_tables(text, "stdout")
            out += _named(generic, "stdout", "-")
    return out


CONFIG, METRIC, SPREAD, ERROR, FLAG, PRODUCTION, EXTRA = (
    "config",
    "metric",
    "spread",
    "error",
    "flag",
    "production",
    "extra",
)

ERROR_WORDS = {
    "err",
    "error",
    "errors",
    "diff",
    "difference",
    "maxerr",
    "max_err",
    "abs_err",
    "rel_err",
    "mae",
    "mse",
    "rmse",
    "deviation",
    "mismatch",
    "mismatches",
    "nan_count",
    "nans",
    "infs",
    "ulp",
    "ulps",
    "residual",
    "atol",
    "rtol",
    "delta",
}
FLAG_WORDS = {
    "pass",
    "passed",
    "passes",
    "ok",
    "correct",
    "valid",
    "verified",
    "match",
    "matches",
    "allclose",
    "success",
    "succeeded",
    "check",
    "checked",
    "equal",
    "close",
}
BAD_FLAG_WORDS = {"fail", "failed", "fails", "failure", "failures", "wrong", "invalid", "incorrect"}
SPREAD_WORDS = {
    "std",
    "stddev",
    "stdev",
    "sd",
    "var",
    "variance",
    "iqr",
    "cv",
    "q1",
    "q3",
    "ci",
    "ci95",
    "lo",
    "hi",
    "lower",
    "upper",
    "samples",
    "rounds",
    "iterations",
    "iters",
    "reps",
    "repeats",
    "repetitions",
    "runs",
    "warmup",
    "stderr",
    "sem",
}
STATISTICS = ("median", "p50", "mean", "avg", "average", "min", "max")
EXTRA_WORDS = {
    "seed",
    "run",
    "trial",
    "timestamp",
    "date",
    "host",
    "hostname",
    "device",
    "gpu",
    "commit",
    "version",
    "pid",
    "note",
    "notes",
    "comment",
    "speedup",
    "ratio",
    "pct",
    "percent",
    "util",
    "utilization",
    "occupancy",
    "efficiency",
    "label",
    "message",
    "msg",
    "status_message",
    "repetition",
    "repetition_index",
    "index",
    "idx",
    "iteration",
}
HARDWARE_WORDS = {"gpu", "host", "hostname", "device", "node", "machine", "arch", "sm"}
"""A text column naming the hardware a row ran on (`gpu_name`, `host`): a config column, so
rows measured on different GPUs or hosts are never merged as samples of one config."""
REFERENCE_WORDS = {
    "huggingface",
    "hf",
    "transformers",
    "apex",
    "xformers",
    "torch",
    "pytorch",
    "eager",
    "ref",
    "reference",
    "baseline",
    "cublas",
    "cublaslt",
    "cudnn",
    "naive",
    "aten",
    "inductor",
    "compile",
    "compiled",
    "numpy",
    "np",
    "rocblas",
    "hipblas",
    "miopen",
    "native",
    "vendor",
    "library",
    "original",
    "old",
}
PRODUCTION_NAMES = {"prod", "production", "is_prod", "is_production"}
TRUE_WORDS = {"true", "1", "yes", "y", "pass", "passed", "ok", "correct", "valid", "success", "match"}
FALSE_WORDS = {"false", "0", "no", "n", "fail", "failed", "wrong", "invalid", "error", "mismatch", "nan"}


def words(name: str) -> list[str]:
    """The lower-case words of a column name (`maxAbsErr` -> max, abs, err; `time (us)` -> time, us)."""
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", str(name))
    return [w for w in re.split(r"[^A-Za-z0-9%]+", spaced.lower()) if w]


@dataclass(frozen=True)
class Column:
    name: str
    role: str
    why: str
    numeric: bool
    integral: bool
    distinct: int
    unit: ColumnUnit
    statistic: str = ""
    """For a metric: median, mean, min, max... ("" when the name names none)."""
    reference: bool = False
    """A metric whose name says it times a reference implementation (torch_ms, cuBLAS (TFLOPS))."""
    all_zero: bool = False
    values: tuple[object, ...] = ()

    @property
    def kind(self) -> str:
        return self.unit.kind

    @property
    def identifier(self) -> bool:
        """Can a kopt.toml expression name it? (a Python identifier)"""
        return self.name.isidentifier()


def _numeric(s: pd.Series) -> pd.Series | None:
    if pd.api.types.is_bool_dtype(s):
        return s.astype(int)
    conv = pd.to_numeric(s, errors="coerce")
    present = s.notna() & (s.astype(str).str.strip() != "")
    if present.any() and conv[present].notna().all():
        return conv
    return None


def is_flag_values(s: pd.Series) -> bool:
    vals = {str(v).strip().lower() for v in s.dropna()}
    return bool(vals) and vals <= TRUE_WORDS | FALSE_WORDS and len(vals) <= 2


def classify(table: Table) -> list[Column]:
    """Every column of the table with its role and reason."""
    out = []
    for name in table.columns:
        out.append(classify_column(table, name))
    return out


def classify_column(table: Table, name: str) -> Column:
    s = table.frame[name]
    num = _numeric(s)
    numeric = num is not None
    finite = [float(v) for v in (num if num is not None else []) if isinstance(v, int | float) and math.isfinite(v)]
    integral = numeric and all(float(v).is_integer() for v in finite) and bool(finite)
    distinct = int(s.nunique(dropna=True))
    unit = column_unit(name)
    if name in table.units and table.units[name]:
        u = column_unit(f"x ({table.units[name]})")
        unit = ColumnUnit(name, u.unit, u.kind or unit.kind)
    w = set(words(name))
    sample = tuple(s.dropna().head(4).tolist())
    all_zero = numeric and bool(finite) and all(v == 0 for v in finite) and len(finite) == len(s.dropna())

    def col(role: str, why: str, **kw: object) -> Column:
        return Column(name, role, why, numeric, integral, distinct, unit, values=sample, all_zero=all_zero, **kw)  # type: ignore[arg-type]  # the keywords are Column's own optional fields

    statistic = next((st for st in STATISTICS if st in w), "")
    reference = bool(w & REFERENCE_WORDS)
    if name in table.correctness:
        return col(FLAG, f"the {table.format} format's error column")
    if name in table.config:
        return col(CONFIG, f"a config column of the {table.format} format")
    if name in table.metrics:
        return col(
            METRIC,
            f"a measurement of the {table.format} format" + (f" in {unit.unit}" if unit.unit else ""),
            statistic=statistic,
            reference=reference,
        )
    if name.lower() in PRODUCTION_NAMES and numeric:
        return col(PRODUCTION, "marks the production rows")
    if w & FLAG_WORDS and is_flag_values(s):
        return col(FLAG, f"a pass/fail column (values {', '.join(sorted({str(v) for v in s.dropna()}))})")
    if w & BAD_FLAG_WORDS and (is_flag_values(s) or numeric):
        return col(FLAG, "a failure flag or count (it must stay false / zero)")
    if w & ERROR_WORDS and numeric and unit.kind != TIME:
        return col(ERROR, "an error magnitude (its name: " + ", ".join(sorted(w & ERROR_WORDS)) + ")")
    if unit.kind in (TIME, RATE) and numeric:
        if w & SPREAD_WORDS:
            return col(SPREAD, f"a spread or count of a measurement ({', '.join(sorted(w & SPREAD_WORDS))}), not one")
        what = "a time" if unit.kind == TIME else "a rate"
        unit_text = f" in {unit.unit}" if unit.unit else " (unit not named: kopt cannot tell which)"
        return col(METRIC, f"{what}{unit_text}", statistic=statistic, reference=reference)
    if w & HARDWARE_WORDS and not numeric and distinct:
        return col(
            CONFIG,
            "the hardware the row ran on: rows of different GPUs or hosts are different configs, never samples of one",
        )
    if w & EXTRA_WORDS or (w & SPREAD_WORDS and numeric):
        return col(EXTRA, "bookkeeping, not a config: " + ", ".join(sorted(w & (EXTRA_WORDS | SPREAD_WORDS))))
    if not numeric:
        return col(CONFIG, "text: a config column" + (f" ({distinct} values)" if distinct else ""))
    if integral:
        return col(CONFIG, f"whole numbers: a dimension ({distinct} values)")
    return col(EXTRA, "a fractional number that is neither named a time nor a rate: an extra statistic")


def dtype_like(c: Column) -> bool:
    """A column holding dtypes (its name, or values such as float16, bf16, fp32, int8)."""
    if set(words(c.name)) & {"dtype", "precision", "type", "datatype"}:
        return True
    vals = {str(v).lower() for v in c.values}
    return bool(vals) and all(
        re.fullmatch(r"(torch\.)?(b?float\d+|bf16|fp\d+|int\d+|uint\d+|half|float|double|e4m3|e5m2|float8\w*)", v)
        for v in vals
    )
