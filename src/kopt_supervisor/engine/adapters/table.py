"""Tables: the adapters' common data (a `Table` read from a bench's output, `AdapterError`, the
units in column names and values) and the tables printed as text that most formats are read
from (at the end, below).

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

Tables printed as text: CSV blocks, markdown tables and whitespace-aligned tables (pandas'
`print(df)` / `df.to_string()`, f-string columns) found among the log lines of a bench's
stdout, and CSV files; the two table shapes read from them are triton's perf_report tables
(engine/adapters/benchmarks.py) and long-format rows read wide (engine/adapters/__init__.py).

    find_tables(text, source)  -> every table in the text, in order (formats "csv", "table")
    csv_file_table(text, name) -> a CSV file as one Table (read_csv_file(path) reads it)
    select(tables, which, ...) -> the one table kopt.toml's [target.adapter].table names
    load_json(text, source, key=...) -> the JSON document in the output (a file, or stdout
                                       with log lines around)

A table is a header line and at least one row with the same number of fields (a pandas
index column, an extra leading field of row labels, is dropped; a named index becomes a
column). Its title is the line printed just above it ("softmax-performance:", "== fp16 =="),
if any. Values that parse as numbers (nan and inf included) become numbers, column by column.

Pure apart from read_text / read_csv_file, which read the file they are given.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from kopt_supervisor.engine import KoptFailure
from kopt_supervisor.engine.metrics import BenchError, parse_table


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


# Tables printed as text.

ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
MD_SEPARATOR = re.compile(r"^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$")
TABLE_COLUMN = "table"
"""The config column added when several tables with the same columns are read as one."""


def is_number(text: str) -> bool:
    t = text.strip().lower()
    if t in ("nan", "inf", "-inf", "+inf", "infinity", "-infinity"):
        return True
    try:
        float(t)
    except ValueError:
        return False
    return True


def _to_number(text: str) -> float:
    t = text.strip().lower()
    if t in ("infinity", "+infinity"):
        return math.inf
    if t == "-infinity":
        return -math.inf
    return float(t)


def typed_frame(header: Sequence[str], rows: Sequence[Sequence[str]]) -> pd.DataFrame:
    """A frame from text cells: a column whose every cell is a number becomes numeric."""
    names = _unique([h.strip() for h in header])
    data: dict[str, list[Any]] = {}
    for j, name in enumerate(names):
        cells = [r[j].strip() for r in rows]
        if cells and all(is_number(c) for c in cells):
            data[name] = [_to_number(c) for c in cells]
        else:
            data[name] = cells
    return pd.DataFrame(data)


def _unique(names: list[str]) -> list[str]:
    out: list[str] = []
    for i, n in enumerate(names):
        base = n or f"column{i + 1}"
        name, k = base, 1
        while name in out:
            name, k = f"{base}.{k}", k + 1
        out.append(name)
    return out


# ---------------------------------------------------------------------------------------
# Finding tables


def _title(lines: list[str], start: int, taken: set[int]) -> str:
    """The line just above a table (at most one blank line between), cleaned of decoration."""
    for i in (start - 1, start - 2):
        if i < 0 or i in taken:
            return ""
        line = lines[i].strip()
        if not line:
            continue
        return line.strip("=-#*[]: \t").strip()
    return ""


def _csv_fields(line: str) -> list[str] | None:
    if "," not in line or "|" in line:  # a table drawn with bars (markdown, torch's Compare) is not CSV
        return None
    try:
        return next(csv.reader([line]))
    except (csv.Error, StopIteration):
        return None


def _csv_block(lines: list[str], i: int) -> int:
    """The end (exclusive) of a CSV block whose header is line i, or i when there is none."""
    head = _csv_fields(lines[i])
    if head is None or len(head) < 2 or not all(h.strip() for h in head):
        return i
    if sum(is_number(h) for h in head) * 2 > len(head):
        return i
    j = i + 1
    while j < len(lines):
        row = _csv_fields(lines[j])
        if row is None or len(row) != len(head):
            break
        j += 1
    return j if j > i + 1 else i


def _md_cells(line: str) -> list[str]:
    s = line.strip()
    if s.startswith("|"):
        s = s[1:]
    if s.endswith("|"):
        s = s[:-1]
    return [c.strip() for c in s.split("|")]


def _md_block(lines: list[str], i: int) -> tuple[int, list[str], list[list[str]]]:
    if "|" not in lines[i] or i + 1 >= len(lines) or not MD_SEPARATOR.match(lines[i + 1]):
        return i, [], []
    head = _md_cells(lines[i])
    rows = []
    j = i + 2
    while j < len(lines) and "|" in lines[j] and len(_md_cells(lines[j])) == len(head):
        rows.append(_md_cells(lines[j]))
        j += 1
    return (j, head, rows) if rows else (i, [], [])


def _split(line: str, wide: bool) -> list[str]:
    s = line.strip()
    return re.split(r"\s{2,}", s) if wide else s.split()


def _positional(header: str, rows: list[str]) -> tuple[list[str], list[list[str]]] | None:
    """Columns by where they sit: the data rows' tokens (values hold no spaces) give each
    column its span of characters, and each header word goes to the column it overlaps or
    lies nearest, so a name with a space in it (`time (us)`, `max diff`) stays one name
    whichever way the columns are aligned. A first column no header word reaches is an
    unnamed index (pandas' 0, 1, 2...) and is dropped. None when the rows disagree."""
    cells = [[(m.start(), m.end(), m.group()) for m in re.finditer(r"\S+", r)] for r in rows]
    k = len(cells[0])
    if k < 2 or any(len(c) != k for c in cells):
        return None
    spans = [(min(c[j][0] for c in cells), max(c[j][1] for c in cells)) for j in range(k)]
    if any(spans[j][1] > spans[j + 1][0] for j in range(k - 1)):
        return None  # columns overlap: not aligned
    names: list[list[str]] = [[] for _ in range(k)]

    def gap(j: int, start: int, end: int) -> int:
        lo, hi = spans[j]
        return max(0, lo - end, start - hi)

    def place(start: int, end: int, text: str) -> None:  # nearest column; a tie goes right
        names[min(range(k), key=lambda j: (gap(j, start, end), -j))].append(text)

    for phrase in re.finditer(r"\S+(?: \S+)*", header):  # words one space apart: one name...
        touched = [j for j in range(k) if gap(j, phrase.start(), phrase.end()) == 0]
        if len(touched) <= 1:
            place(phrase.start(), phrase.end(), phrase.group())
        else:  # ...unless it lies over several columns (pandas' `N dtype`): word by word
            for m in re.finditer(r"\S+", phrase.group()):
                place(phrase.start() + m.start(), phrase.start() + m.end(), m.group())
    if not names[0] and all(names[1:]):
        return [" ".join(n) for n in names[1:]], [[c[2] for c in row[1:]] for row in cells]
    if not all(names):
        return None
    return [" ".join(n) for n in names], [[c[2] for c in row] for row in cells]


def _ws_block(lines: list[str], i: int) -> tuple[int, list[str], list[list[str]]]:
    """A whitespace-aligned table whose header is line i (see the module docstring)."""
    line = lines[i]
    if not line.strip() or "|" in line or "," in line:
        return i, [], []
    words = line.split()
    if len(words) < 2 or sum(is_number(w) for w in words) * 2 >= len(words):
        return i, [], []
    j = i + 1
    index_name = ""
    # pandas prints a named index on its own line under the header, then rows led by its values
    if (
        j + 1 < len(lines)
        and len(lines[j].split()) == 1
        and not is_number(lines[j])
        and len(lines[j + 1].split()) >= 2
        and is_number(lines[j + 1].split()[0])
    ):
        index_name, j = lines[j].strip(), j + 1
    start = j
    width = len(lines[j].split()) if j < len(lines) else 0
    while j < len(lines) and lines[j].strip() and "|" not in lines[j] and len(lines[j].split()) == width:
        j += 1
    body = lines[start:j]
    if not body:
        return i, [], []
    found = _positional(line, body)
    if found is not None and index_name and len(found[0]) == width - 1:
        found = ([index_name, *found[0]], [r.split() for r in body])
    if found is None:  # fall back on splitting: two or more spaces, then any
        for wide in (True, False):
            head = _split(line, wide)
            rows = [_split(r, wide) for r in body]
            if all(len(r) == len(head) for r in rows):
                found = (head, rows)
                break
            if all(len(r) == len(head) + 1 for r in rows):
                found = ([index_name, *head] if index_name else head, rows if index_name else [r[1:] for r in rows])
                break
    if found is None:
        return i, [], []
    head, rows = found
    if len(set(head)) != len(head) or sum(is_number(h) for h in head) * 2 >= len(head):
        return i, [], []
    if any(all(is_number(r[k]) for r in rows) for k in range(len(head))):
        return j, head, rows
    return i, [], []


def find_tables(text: str, source: str = "stdout") -> list[Table]:
    """Every CSV block, markdown table and whitespace-aligned table in `text`, in order."""
    lines = [ANSI.sub("", ln).rstrip("\r") for ln in text.splitlines()]
    tables: list[Table] = []
    taken: set[int] = set()
    i = 0
    while i < len(lines):
        end = _csv_block(lines, i)
        if end > i:
            block = "\n".join(lines[i:end]) + "\n"
            try:
                df = pd.read_csv(io.StringIO(block), skipinitialspace=True)
                df.columns = [str(c).strip() for c in df.columns]
            except (pd.errors.ParserError, pd.errors.EmptyDataError):
                df = None
            if df is not None and not df.empty:
                tables.append(Table(df, "csv", _title(lines, i, taken), source=source))
                taken.update(range(i, end))
                i = end
                continue
        for finder in (_md_block, _ws_block):
            end, head, rows = finder(lines, i)
            if end > i:
                tables.append(Table(typed_frame(head, rows), "table", _title(lines, i, taken), source=source))
                taken.update(range(i, end))
                i = end
                break
        else:
            i += 1
    return tables


def csv_file_table(content: str, name: str) -> Table:
    """A CSV file's text as one table (an AdapterError names the file). Pure."""
    try:
        df = parse_table(content, metric="", source=name)  # the bench's CSV, read as the metrics read it
    except BenchError as exc:
        raise AdapterError(str(exc)) from None
    unnamed = [c for c in df.columns if c.startswith("Unnamed: ")]
    notes: tuple[str, ...] = ()
    if unnamed and unnamed[0] == df.columns[0]:  # pandas' to_csv(index=True): the index, not data
        df = df.drop(columns=[unnamed[0]])
        notes = (f"dropped the unnamed first column (a pandas index written by to_csv) of {name}",)
    return Table(df, "csv", Path(name).stem, source=name, notes=notes)


def read_text(path: Path) -> str:
    """A file's text (an AdapterError names it when it cannot be read)."""
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise AdapterError(f"{path.name}: cannot read: {exc.strerror}") from None


def read_csv_file(path: Path) -> Table:
    """A CSV file the bench wrote, as one table."""
    return csv_file_table(read_text(path), path.name)


# ---------------------------------------------------------------------------------------
# Choosing one


def select(tables: list[Table], which: str, source: str) -> Table:
    """The table `which` names (a 1-based index or a title); with `which` empty the only
    table, or all of them as one when they share their columns (a `table` column then says
    which each row came from). Anything else is an AdapterError that lists the tables."""
    if not tables:
        raise AdapterError(f"{source}: no table found")
    if which:
        if which.isdigit():
            k = int(which)
            if 1 <= k <= len(tables):
                return tables[k - 1]
            raise AdapterError(
                f"{source}: [target.adapter].table = {which!r}, but the output has "
                f"{len(tables)} table(s): {_listing(tables)}"
            )
        named = [t for t in tables if t.title == which]
        if len(named) == 1:
            return named[0]
        raise AdapterError(
            f"{source}: [target.adapter].table = {which!r} names "
            f"{'no table' if not named else f'{len(named)} tables'}: {_listing(tables)}"
        )
    if len(tables) == 1:
        return tables[0]
    if all(t.columns == tables[0].columns for t in tables):
        return join(tables)
    raise AdapterError(
        f"{source}: {len(tables)} tables with different columns; name one in [target.adapter].table: {_listing(tables)}"
    )


def join(tables: list[Table]) -> Table:
    """Tables with the same columns as one, a first column `table` naming each row's table
    (its title, else its position)."""
    titles = [t.title for t in tables]
    names = titles if all(titles) and len(set(titles)) == len(titles) else [str(i + 1) for i in range(len(tables))]
    frames = []
    for name, t in zip(names, tables, strict=True):
        f = t.frame.copy()
        f.insert(0, TABLE_COLUMN, name)
        frames.append(f)
    first = tables[0]
    return Table(
        pd.concat(frames, ignore_index=True),
        first.format,
        "",
        (TABLE_COLUMN, *first.config),
        first.metrics,
        dict(first.units),
        first.correctness,
        first.source,
        (*first.notes, f"{len(tables)} tables with the same columns read as one, column {TABLE_COLUMN!r} says which"),
    )


def _listing(tables: list[Table]) -> str:
    return "; ".join(f"{i + 1}: {t.title or '(untitled)'} [{', '.join(t.columns)}]" for i, t in enumerate(tables))


def load_json(text: str, source: str, *, key: str) -> dict[str, Any]:
    """The first JSON object in `text` that has `key` (the whole text when it is one; else the
    first `{` at the start of a line that decodes to such an object). NaN and Infinity, which
    Google Benchmark writes, are read as floats."""
    lead = len(text) - len(text.lstrip())
    starts = [lead] if text[lead : lead + 1] == "{" else []
    starts += [m.start() + 1 for m in re.finditer(r"\n\{", text) if m.start() + 1 != lead]
    decoder = json.JSONDecoder()
    first_error = ""
    for start in starts:
        try:
            obj, _ = decoder.raw_decode(text, start)
        except json.JSONDecodeError as exc:
            first_error = first_error or f"{exc.msg} at line {exc.lineno}"
            continue
        if isinstance(obj, dict) and key in obj:
            return obj
    why = f" ({first_error})" if first_error else ""
    raise AdapterError(f"{source}: no JSON object with {key!r} found{why}")
