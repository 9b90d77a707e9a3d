"""rocprofv3 adapter: wrap the bench in a kernel trace, read its CSV files back, and
attribute each dispatch to the roctx range it was launched in.

`rocprofv3 --kernel-trace --marker-trace --hip-runtime-trace --stats --truncate-kernels
--output-format csv -d OUT -o NAME` writes, per profiled process, `NAME_kernel_trace.csv`
(one row per dispatch) and `NAME_kernel_stats.csv` (one row per kernel), and when the
process used roctx, `NAME_marker_api_trace.csv` (a push/pop range is one row: Function =
its message, Thread_Id, Start_Timestamp = push, End_Timestamp = pop) and
`NAME_hip_api_trace.csv` (one row per HIP call, with its Correlation_Id). A dispatch's
Correlation_Id is that of the HIP call that launched it: the dispatch belongs to the
ranges open on the launching thread around that call, the innermost kopt range naming it.
Each range opening is counted (process, thread, push time). Nested kopt ranges of two
different names are not attributed (which config would the work be?). A process with a
marker trace and no HIP API trace cannot be attributed and stops the parse; a process with
no marker trace made no roctx calls (its dispatches are outside any range); no marker
trace at all: no ranges, the comparison falls back to whole-run kernel time.

The kernel trace is the source of time and resources:
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
from dataclasses import dataclass, replace
from pathlib import Path

from kopt_supervisor.engine import KoptFailure
from kopt_supervisor.engine.profile.profiler import Profiler, parse_number
from kopt_supervisor.engine.profile.summary import (
    KOPT_PREFIX,
    KernelStat,
    Launch,
    ProfileSummary,
    summarize,
    summary_from_stats,
)

OUTPUT_NAME = "kopt_%pid%"
KERNEL_TRACE = "kernel_trace.csv"
MARKER_TRACE = "marker_api_trace.csv"
HIP_TRACE = "hip_api_trace.csv"
RANGES_SOURCE = (
    "rocprofv3 marker + HIP API traces: the roctx push/pop ranges open on the launching "
    "thread around each dispatch's HIP launch call"
)

_ALIASES = {
    "name": ("kernel_name",),
    "corr": ("correlation_id",),
    "thread": ("thread_id",),
    "function": ("function",),
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
            "--marker-trace",
            "--hip-runtime-trace",
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
        traces = sorted(out_dir.rglob(f"*{KERNEL_TRACE}"))
        if traces:
            return parse_traces(traces, kernel_regex)
        stats_files = sorted(out_dir.rglob("*kernel_stats.csv"))
        if stats_files:
            stats = merge_stats([s for path in stats_files for s in stats_rows(path)])
            return summary_from_stats(stats, kernel_regex, tool="rocprofv3", files=tuple(map(str, stats_files)))
        raise KoptFailure(f"{out_dir}: rocprofv3 wrote no *kernel_trace.csv or *kernel_stats.csv")


def _read_rows(path: Path) -> list[dict[str, str]]:
    try:
        with path.open(newline="", encoding="utf-8", errors="replace") as fh:
            reader = csv.DictReader(fh)
            if not reader.fieldnames:
                raise KoptFailure(f"{path}: empty CSV")
            return [{(k or "").strip().lower(): (v or "").strip() for k, v in row.items()} for row in reader]
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
    return [launch for launch, _ in _trace(path)]


def _trace(path: Path) -> list[tuple[Launch, str]]:
    """Each dispatch row of a kernel_trace.csv: its Launch and its Correlation_Id ("" if none)."""
    rows = _read_rows(path)
    if rows and (_column(rows[0], "name") is None or _column(rows[0], "start") is None):
        raise KoptFailure(f"{path}: not a rocprofv3 kernel trace (needs Kernel_Name, Start_Timestamp, End_Timestamp)")
    launches = []
    for i, row in enumerate(rows, start=2):
        start, end = _number(row, "start", path, i), _number(row, "end", path, i)
        if start is None or end is None or end < start:
            raise KoptFailure(f"{path}:{i}: bad timestamps start={start} end={end}")
        vgpr, agpr, sgpr = (_number(row, k, path, i) for k in ("vgpr", "agpr", "sgpr"))
        launches.append(
            (
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
                ),
                _column(row, "corr") or "",
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


# ---------------------------------------------------------------------------------------
# Ranges


@dataclass(frozen=True)
class _Range:
    name: str
    thread: str
    start: float
    end: float


def parse_traces(traces: list[Path], kernel_regex: str) -> ProfileSummary:
    """The summary of kernel traces, with each dispatch's roctx range when the marker and
    HIP API traces beside them allow."""
    markers = {t: _sibling(t, MARKER_TRACE) for t in traces}
    files = [str(t) for t in traces]
    if not any(m.is_file() for m in markers.values()):
        launches = [x for t in traces for x in trace_launches(t)]
        why = f"none: no *{MARKER_TRACE} (no roctx ranges, or rocprofv3 ran without --marker-trace)"
        return summarize(launches, kernel_regex, tool="rocprofv3", files=tuple(files), ranges_source=why)
    launches = []
    for trace in traces:
        marker, hip = markers[trace], _sibling(trace, HIP_TRACE)
        rows = _trace(trace)
        if not marker.is_file():
            launches += [replace(x, range="") for x, _ in rows]
            continue
        if not hip.is_file():
            raise KoptFailure(
                f"{marker}: roctx ranges but no {hip.name} beside it: kopt needs rocprofv3 "
                "--hip-runtime-trace to tell which range launched each dispatch"
            )
        files += [str(marker), str(hip)]
        launches += attribute_dispatches(
            rows, marker_ranges(marker), hip_calls(hip), process=trace.name[: -len(KERNEL_TRACE)]
        )
    return summarize(launches, kernel_regex, tool="rocprofv3", files=tuple(files), ranges_source=RANGES_SOURCE)


def _sibling(trace: Path, suffix: str) -> Path:
    return trace.with_name(trace.name[: -len(KERNEL_TRACE)] + suffix)


def marker_ranges(path: Path) -> list[_Range]:
    """The roctx ranges of a marker_api_trace.csv (marks, start == end, hold no launch)."""
    out = []
    for i, row in enumerate(_read_rows(path), start=2):
        if "domain" in row and row["domain"] and row["domain"] != "MARKER_CORE_API":
            continue
        name, thread = _column(row, "function"), _column(row, "thread")
        start, end = _number(row, "start", path, i), _number(row, "end", path, i)
        if name is None or thread is None or start is None or end is None:
            raise KoptFailure(
                f"{path}:{i}: not a rocprofv3 marker trace row "
                "(needs Function, Thread_Id, Start_Timestamp, End_Timestamp)"
            )
        if end < start:
            raise KoptFailure(f"{path}:{i}: bad timestamps start={start} end={end}")
        if end > start:
            out.append(_Range(name, thread, start, end))
    return out


def hip_calls(path: Path) -> dict[str, tuple[str, float, float]]:
    """Correlation_Id -> (Thread_Id, start, end) of each HIP API call."""
    out: dict[str, tuple[str, float, float]] = {}
    for i, row in enumerate(_read_rows(path), start=2):
        corr, thread = _column(row, "corr"), _column(row, "thread")
        start, end = _number(row, "start", path, i), _number(row, "end", path, i)
        if not corr or thread is None or start is None or end is None:
            raise KoptFailure(
                f"{path}:{i}: not a rocprofv3 HIP API trace row "
                "(needs Correlation_Id, Thread_Id, Start_Timestamp, End_Timestamp)"
            )
        out[corr] = (thread, start, end)
    return out


def attribute_dispatches(
    rows: list[tuple[Launch, str]],
    ranges: list[_Range],
    calls: dict[str, tuple[str, float, float]],
    *,
    process: str,
) -> list[Launch]:
    """Each dispatch with the innermost kopt range open on its launching thread around its
    HIP launch call (push/pop ranges of one thread nest, so a stack sweep finds them)."""
    by_thread: dict[str, list[_Range]] = defaultdict(list)
    for r in ranges:
        by_thread[r.thread].append(r)
    for rs in by_thread.values():
        rs.sort(key=lambda r: (r.start, -r.end))
    located: dict[str, list[tuple[float, float, int]]] = defaultdict(list)
    out: list[Launch | None] = [None] * len(rows)
    for i, (launch, corr) in enumerate(rows):
        call = calls.get(corr)
        if call is None:
            out[i] = replace(launch, range="", range_note="its launch call is not in the HIP API trace")
            continue
        located[call[0]].append((call[1], call[2], i))
    for thread, items in located.items():
        rs, j = by_thread.get(thread, []), 0
        stack: list[_Range] = []
        for start, end, i in sorted(items):
            while j < len(rs) and rs[j].start <= start:
                while stack and stack[-1].end < rs[j].start:
                    stack.pop()
                stack.append(rs[j])
                j += 1
            open_ = [r for r in stack if r.start <= start and end <= r.end]
            out[i] = _in_ranges(rows[i][0], open_, process)
    return [x for x in out if x is not None]


def _in_ranges(launch: Launch, open_: list[_Range], process: str) -> Launch:
    kopt = [r for r in open_ if r.name.startswith(KOPT_PREFIX)]
    if not kopt:
        note = f"outside any kopt range (innermost range {open_[-1].name!r})" if open_ else ""
        return replace(launch, range="", range_note=note)
    names = {r.name for r in kopt}
    inner = kopt[-1]
    if len(names) > 1:
        return replace(
            launch,
            range=inner.name,
            range_note=(f"nested kopt ranges {kopt[0].name!r} > {inner.name!r} name different configs"),
        )
    return replace(launch, range=inner.name, range_instance=f"{process}:{inner.thread}:{inner.start:.0f}")
