"""Where a bench's table is: the files it wrote and its stdout, read by every adapter.

    BenchRun                      one run of the bench (what `run_bench` returned, and how long)
    candidates(run) -> [Candidate] every table found, each with the kopt.toml keys that read it

A file the bench wrote is read by its kind (.csv: a CSV, a perf_report CSV or long-format
rows (adapters/long_format.py); .json:
pytest-benchmark or Google Benchmark; .txt/.md/.log/.out: printed tables), stdout by every
adapter (adapters.sniff). Tables of stdout that share their columns are one candidate (read
as one, a `table` column telling them apart); tables with different columns are one each,
named by title or position as `[target.adapter].table` will name them.

Reads the files it is given; nothing else.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kopt_supervisor.engine.adapters import read_tables, sniff
from kopt_supervisor.engine.adapters.long_format import classify as as_long_format
from kopt_supervisor.engine.adapters.model import AdapterError, Table
from kopt_supervisor.engine.adapters.perf_report import classify as as_perf_report
from kopt_supervisor.engine.adapters.text import find_tables, join, read_csv_file

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
    (onboard/served.py's import_probe); None when nothing was tried."""

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
            chosen = as_perf_report(t) or as_long_format(t) or t
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
