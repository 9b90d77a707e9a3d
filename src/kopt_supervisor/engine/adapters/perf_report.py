"""triton.testing.perf_report: the CSV `Mark.run(save_path=...)` writes and the table
`run(print_data=True)` prints.

Both hold the benchmark's `x_names` columns first, then one column per line named
`<line_name> (<ylabel>)` (the mean the benchmark function returned, in whatever its ylabel
says: ms, GB/s, TFLOPS...), and with `diff_col=True` a last `Diff` column. The printout is
`<plot_name>:` followed by pandas' `df.to_string()` (an index column, dropped here). Several
benchmarks give several tables, each titled by its plot_name (the CSV file's stem).

Rows: the x_names are the config columns, each line column a metric (its unit from the
parentheses; kopt.toml's metric names the line of the kernel being optimised, the others are
ignored), `Diff` an ignored extra.

Pure apart from reading the file it is given.
"""

from __future__ import annotations

import re
from pathlib import Path

from kopt_supervisor.engine.adapters import text
from kopt_supervisor.engine.adapters.model import AdapterError, Table

LINE = re.compile(r"^(?P<line>.+?) \((?P<unit>[^()]*)\)$")
DIFF = "Diff"


def classify(t: Table) -> Table | None:
    """The table as perf_report's (config = x_names, metrics = line columns), or None when
    its columns are not perf_report's: x columns first, then `<line> (<ylabel>)` columns."""
    cols = [c for c in t.columns if c != text.TABLE_COLUMN]
    lines = [c for c in cols if LINE.match(c)]
    if not lines:
        return None
    rest = [c for c in cols if c not in lines and c != DIFF]
    if not rest or cols[: len(rest)] != rest:
        return None  # x_names come first
    units = {c: LINE.match(c)["unit"].strip() for c in lines}  # type: ignore[index]  # matched above
    config = tuple(([text.TABLE_COLUMN] if text.TABLE_COLUMN in t.columns else []) + rest)
    return Table(t.frame, "perf_report", t.title, config, tuple(lines), units, (), t.source, t.notes)


def read_text(content: str, source: str = "stdout") -> list[Table]:
    """Every perf_report table printed in `text` (run(print_data=True))."""
    return [c for c in (classify(t) for t in text.find_tables(content, source)) if c is not None]


def file_table(content: str, name: str) -> Table:
    """A CSV file perf_report wrote (run(save_path=...)), from its text."""
    t = classify(text.csv_file_table(content, name))
    if t is None:
        raise AdapterError(f"{name}: not a perf_report CSV (expected the x columns, then '<line> (<ylabel>)' columns)")
    return t


def read_file(path: Path) -> Table:
    return file_table(text.read_text(path), path.name)
