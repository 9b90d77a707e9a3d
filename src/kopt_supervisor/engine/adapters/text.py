"""Tables printed as text, and the two table shapes read from them: CSV blocks, markdown
tables and whitespace-aligned tables (pandas' `print(df)` / `df.to_string()`, f-string
columns) found among the log lines of a bench's stdout; triton's perf_report tables; and
long-format rows read wide.

    find_tables(text, source)  -> every table in the text, in order (formats "csv", "table")
    csv_file_table(text, name) -> a CSV file as one Table (read_csv_file(path) reads it)
    select(tables, which, ...) -> the one table kopt.toml's [target.adapter].table names
    load_json(text, source, key=...) -> the JSON document in the output (a file, or stdout
                                       with log lines around)
    classify_perf_report(table) / classify_long_format(table)
                               -> the table as that shape's, or None when it is not one

A table is a header line and at least one row with the same number of fields (a pandas
index column, an extra leading field of row labels, is dropped; a named index becomes a
column). Its title is the line printed just above it ("softmax-performance:", "== fp16 =="),
if any. Values that parse as numbers (nan and inf included) become numbers, column by column.

perf_report (triton.testing.perf_report): the CSV `Mark.run(save_path=...)` writes and the
table `run(print_data=True)` prints hold the benchmark's `x_names` columns first, then one
column per line named `<line_name> (<ylabel>)` (the mean the benchmark function returned, in
whatever its ylabel says: ms, GB/s, TFLOPS...), and with `diff_col=True` a last `Diff` column.
The printout is `<plot_name>:` followed by pandas' `df.to_string()` (an index column, dropped
here). Several benchmarks give several tables, each titled by its plot_name (the CSV file's
stem). Rows: the x_names are the config columns, each line column a metric (its unit from the
parentheses; kopt.toml's metric names the line of the kernel being optimised, the others are
ignored), `Diff` an ignored extra.

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

Pure apart from read_text / read_csv_file / read_perf_report_file, which read the file they
are given.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from kopt_supervisor.engine.adapters.table import AdapterError, Table

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
    if not content.strip():
        raise AdapterError(f"{name}: empty CSV")
    try:
        df = pd.read_csv(io.StringIO(content), skipinitialspace=True)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise AdapterError(f"{name}: malformed CSV: {first}") from None
    df.columns = [str(c).strip() for c in df.columns]
    if df.empty:
        raise AdapterError(f"{name}: the CSV has a header but no rows")
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


PERF_REPORT_LINE = re.compile(r"^(?P<line>.+?) \((?P<unit>[^()]*)\)$")
PERF_REPORT_DIFF = "Diff"


def classify_perf_report(t: Table) -> Table | None:
    """The table as perf_report's (config = x_names, metrics = line columns), or None when
    its columns are not perf_report's: x columns first, then `<line> (<ylabel>)` columns."""
    cols = [c for c in t.columns if c != TABLE_COLUMN]
    lines = [c for c in cols if PERF_REPORT_LINE.match(c)]
    if not lines:
        return None
    rest = [c for c in cols if c not in lines and c != PERF_REPORT_DIFF]
    if not rest or cols[: len(rest)] != rest:
        return None  # x_names come first
    units = {c: PERF_REPORT_LINE.match(c)["unit"].strip() for c in lines}  # type: ignore[index]  # matched above
    config = tuple(([TABLE_COLUMN] if TABLE_COLUMN in t.columns else []) + rest)
    return Table(t.frame, "perf_report", t.title, config, tuple(lines), units, (), t.source, t.notes)


def read_perf_report(content: str, source: str = "stdout") -> list[Table]:
    """Every perf_report table printed in `text` (run(print_data=True))."""
    return [c for c in (classify_perf_report(t) for t in find_tables(content, source)) if c is not None]


def perf_report_file_table(content: str, name: str) -> Table:
    """A CSV file perf_report wrote (run(save_path=...)), from its"""
    t = classify_perf_report(csv_file_table(content, name))
    if t is None:
        raise AdapterError(f"{name}: not a perf_report CSV (expected the x columns, then '<line> (<ylabel>)' columns)")
    return t


def read_perf_report_file(path: Path) -> Table:
    return perf_report_file_table(read_text(path), path.name)


LONG_FORMAT = "long"
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
