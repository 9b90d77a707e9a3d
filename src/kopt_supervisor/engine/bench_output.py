"""Where a bench run's table is and what it says: the CSV file it wrote (a glob inside the
worktree, newest file written during this run) or its stdout, read and handed to the pure
parser (engine/metrics.py).

Side effects: file system reads only.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from kopt_supervisor.engine import adapters
from kopt_supervisor.engine.adapters.table import AdapterError
from kopt_supervisor.engine.config import TargetConfig
from kopt_supervisor.engine.metrics import BenchError, Measurement, measure, parse_table
from kopt_supervisor.engine.sandbox import read_output

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


def read_table(path: Path, *, metric: str, from_stdout: bool = False) -> pd.DataFrame:
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
        return measure(read_table(path, metric=cfg.metric, from_stdout=from_stdout), cfg, path.name)
    try:
        text = read_output(path, MAX_TABLE_BYTES).decode("utf-8", errors="replace")
    except OSError as exc:
        raise BenchError(f"{path.name}: cannot read: {exc.strerror or exc}") from None
    source = "stdout" if from_stdout else path.name
    try:
        df = adapters.frame_from_text(
            cfg.format, text, source, cfg.adapter, csv_file=not from_stdout and path.suffix.lower() == ".csv"
        )
    except AdapterError as exc:
        raise BenchError(str(exc)) from None
    return measure(df, cfg, source)
