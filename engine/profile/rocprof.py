"""rocprofv3 adapter: wrap the bench in a kernel trace, read its CSV files back.

`rocprofv3 --kernel-trace --stats --truncate-kernels --output-format csv -d OUT -o NAME`
writes `NAME_kernel_trace.csv` (one row per dispatch) and `NAME_kernel_stats.csv` (one
row per kernel) under OUT, one set per profiled process. The kernel trace is the source:
GPU time is End_Timestamp - Start_Timestamp (ns), and it carries the launch resources
(VGPR_Count, Accum_VGPR_Count, SGPR_Count, LDS_Block_Size, Scratch_Size). Older
rocprofv3 versions name the resources Private_Segment_Size / Group_Segment_Size, and the
rocpd converter writes lower-case names; columns are matched case-insensitively with
those aliases. Without a trace file the stats file is used (times only).

Names are truncated (`--truncate-kernels`: no template arguments or parameters) so that
the kernel regex means the same thing as with ncu's function names. rocprofv3's own
kernel filters apply to counter collection only, so the regex is applied when parsing.
"""

from __future__ import annotations

import csv
from collections import defaultdict
from pathlib import Path

from kopt_supervisor.engine.errors import KoptFailure
from kopt_supervisor.engine.profile.base import Profiler
from kopt_supervisor.engine.profile.model import (
    KernelStat,
    Launch,
    ProfileSummary,
    summarize,
    summary_from_stats,
)
from kopt_supervisor.engine.profile.units import parse_number

OUTPUT_NAME = "kopt_%pid%"

_ALIASES = {
    "name": ("kernel_name",),
    "start": ("start_timestamp",),
    "end": ("end_timestamp",),
    "vgpr": ("vgpr_count", "arch_vgpr_count"),
    "agpr": ("accum_vgpr_count",),
    "sgpr": ("sgpr_count",),
    "lds": ("lds_block_size", "lds_size", "group_segment_size"),
    "scratch": ("scratch_size", "private_segment_size"),
}


class Rocprofv3Profiler(Profiler):
    name = "rocprofv3"

    def __init__(self, *, executable: str = "rocprofv3") -> None:
        self.executable = executable

    def command(self, inner_argv: list[str], out_dir: Path, kernel_regex: str) -> list[str]:
        """The argv that runs `inner_argv` under rocprofv3; creates `out_dir`.

        `kernel_regex` is applied by `parse`: rocprofv3's kernel filters do not filter the
        kernel trace."""
        out_dir = Path(out_dir).resolve()
        out_dir.mkdir(parents=True, exist_ok=True)
        return [
            self.executable,
            "--kernel-trace",
            "--stats",
            "--truncate-kernels",
            "--output-format", "csv",
            "-d", str(out_dir),
            "-o", OUTPUT_NAME,
            "--",
            *inner_argv,
        ]  # fmt: skip

    def parse(self, out_dir: Path, kernel_regex: str) -> ProfileSummary:
        out_dir = Path(out_dir)
        traces = sorted(out_dir.rglob("*kernel_trace.csv"))
        if traces:
            launches = [x for path in traces for x in trace_launches(path)]
            return summarize(
                launches, kernel_regex, tool="rocprofv3", files=tuple(map(str, traces))
            )
        stats_files = sorted(out_dir.rglob("*kernel_stats.csv"))
        if stats_files:
            stats = merge_stats([s for path in stats_files for s in stats_rows(path)])
            return summary_from_stats(
                stats, kernel_regex, tool="rocprofv3", files=tuple(map(str, stats_files))
            )
        raise KoptFailure(f"{out_dir}: rocprofv3 wrote no *kernel_trace.csv or *kernel_stats.csv")


def _read_rows(path: Path) -> list[dict[str, str]]:
    try:
        with path.open(newline="", encoding="utf-8", errors="replace") as fh:
            reader = csv.DictReader(fh)
            if not reader.fieldnames:
                raise KoptFailure(f"{path}: empty CSV")
            return [
                {(k or "").strip().lower(): (v or "").strip() for k, v in row.items()}
                for row in reader
            ]
    except OSError as exc:
        raise KoptFailure(f"{path}: cannot read: {exc.strerror}") from None


def _column(row: dict[str, str], key: str) -> str | None:
    for alias in _ALIASES[key]:
        if alias in row:
            return row[alias]
    return None


def _number(row: dict[str, str], key: str, path: Path, line: int) -> float | None:
    text = _column(row, key)
    try:
        return parse_number(text)
    except ValueError:
        raise KoptFailure(f"{path}:{line}: {_ALIASES[key][0]} = {text!r} is not a number") from None


def _shape(row: dict[str, str], prefix: str) -> str | None:
    axes = [row.get(f"{prefix}_{a}") for a in "xyz"]
    if all(axes):
        return f"({', '.join(axes)})"  # type: ignore[arg-type]
    return row.get(prefix) or None


def trace_launches(path: Path) -> list[Launch]:
    """One Launch per dispatch row of a rocprofv3 kernel_trace.csv."""
    rows = _read_rows(path)
    if rows and (_column(rows[0], "name") is None or _column(rows[0], "start") is None):
        raise KoptFailure(
            f"{path}: not a rocprofv3 kernel trace (needs Kernel_Name, Start_Timestamp, End_Timestamp)"
        )
    launches = []
    for i, row in enumerate(rows, start=2):
        start, end = _number(row, "start", path, i), _number(row, "end", path, i)
        if start is None or end is None or end < start:
            raise KoptFailure(f"{path}:{i}: bad timestamps start={start} end={end}")
        vgpr, agpr, sgpr = (_number(row, k, path, i) for k in ("vgpr", "agpr", "sgpr"))
        launches.append(
            Launch(
                kernel=_column(row, "name") or "",
                duration_ns=end - start,
                registers_per_thread=None if vgpr is None else int(vgpr),
                accum_vgprs=None if agpr is None else int(agpr),
                sgprs=None if sgpr is None else int(sgpr),
                shared_mem_bytes=_number(row, "lds", path, i),
                scratch_bytes=_number(row, "scratch", path, i),
                block=_shape(row, "workgroup_size"),
                grid=_shape(row, "grid_size"),
            )
        )
    return launches


def stats_rows(path: Path) -> list[KernelStat]:
    """One KernelStat per row of a rocprofv3 kernel_stats.csv (times only)."""
    stats = []
    for i, row in enumerate(_read_rows(path), start=2):
        try:
            calls = parse_number(row.get("calls"))
            total = parse_number(row.get("totaldurationns"))
            if not row.get("name") or calls is None or total is None or calls <= 0:
                raise ValueError("needs Name, Calls > 0 and TotalDurationNs")
            stats.append(
                KernelStat(
                    name=row["name"],
                    calls=int(calls),
                    total_ns=total,
                    avg_ns=total / calls,
                    min_ns=parse_number(row.get("minns")),
                    max_ns=parse_number(row.get("maxns")),
                )
            )
        except ValueError as exc:
            raise KoptFailure(f"{path}:{i}: not a rocprofv3 kernel stats row: {exc}") from None
    return stats


def merge_stats(stats: list[KernelStat]) -> list[KernelStat]:
    """Stats of the same kernel from several processes, added up."""
    groups: dict[str, list[KernelStat]] = defaultdict(list)
    for s in stats:
        groups[s.name].append(s)
    merged = []
    for name, group in groups.items():
        calls = sum(s.calls for s in group)
        total = sum(s.total_ns for s in group)
        mins = [s.min_ns for s in group if s.min_ns is not None]
        maxs = [s.max_ns for s in group if s.max_ns is not None]
        merged.append(
            KernelStat(
                name,
                calls,
                total,
                total / calls,
                min(mins) if mins else None,
                max(maxs) if maxs else None,
            )
        )
    return merged
