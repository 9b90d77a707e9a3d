"""Nsight Compute (ncu) adapter: wrap the bench, read ncu's CSV back into launches.

The command profiles every process the bench starts (`--target-processes all`), leaves the
GPU clocks alone (`--clock-control none`, so timings match the unprofiled bench) and, by
default, the caches too (`--cache-control none`: the bench times warm repeated calls; ncu's
default flushes caches before every launch). Kernels are filtered with `--kernel-name
regex:` on the function name (no template arguments or parameters), and the raw page is
written as CSV with base units to `<out_dir>/ncu.csv` through `--log-file`, so the bench's
own stdout never mixes with it.

The parser reads both CSV layouts ncu prints: the raw page (one row per launch, one column
per metric, a units row under the header) and the details page (one row per launch and
metric: "Metric Name", "Metric Unit", "Metric Value"). Lines ncu adds around the table
("==PROF== ...", "==WARNING== ...") are skipped; numbers may carry thousands separators;
"n/a" is a metric the GPU does not report and becomes None.
"""

from __future__ import annotations

import csv
from collections.abc import Callable
from pathlib import Path

from kopt_supervisor.engine.errors import KoptFailure
from kopt_supervisor.engine.profile.base import Profiler
from kopt_supervisor.engine.profile.model import Launch, ProfileSummary, summarize
from kopt_supervisor.engine.profile.units import (
    bytes_of,
    parse_number,
    rate_to_bytes_per_s,
    time_to_ns,
)

NCU_LOG = "ncu.csv"

M_TIME = "gpu__time_duration.sum"
M_REGS = "launch__registers_per_thread"
M_SMEM_STATIC = "launch__shared_mem_per_block_static"
M_SMEM_DYNAMIC = "launch__shared_mem_per_block_dynamic"
M_OCCUPANCY = "sm__warps_active.avg.pct_of_peak_sustained_active"
M_DRAM_BYTES = "dram__bytes.sum"
M_DRAM_RATE = "dram__bytes.sum.per_second"
M_DRAM_PCT = "dram__throughput.avg.pct_of_peak_sustained_elapsed"

DEFAULT_METRICS: tuple[str, ...] = (
    M_TIME,
    M_REGS,
    M_SMEM_STATIC,
    M_SMEM_DYNAMIC,
    M_OCCUPANCY,
    M_DRAM_BYTES,
    M_DRAM_RATE,
    M_DRAM_PCT,
)


class NcuProfiler(Profiler):
    name = "ncu"

    def __init__(
        self,
        *,
        executable: str = "ncu",
        metrics: tuple[str, ...] = DEFAULT_METRICS,
        cache_control: str = "none",
        launch_count: int | None = None,
    ) -> None:
        if cache_control not in ("none", "all"):
            raise ValueError(f"cache_control must be 'none' or 'all', not {cache_control!r}")
        self.executable = executable
        self.metrics = metrics
        self.cache_control = cache_control
        self.launch_count = launch_count

    def command(self, inner_argv: list[str], out_dir: Path, kernel_regex: str) -> list[str]:
        """The argv that runs `inner_argv` under ncu; creates `out_dir`."""
        out_dir = Path(out_dir).resolve()
        out_dir.mkdir(parents=True, exist_ok=True)
        argv = [
            self.executable,
            "--target-processes", "all",
            "--clock-control", "none",
            "--cache-control", self.cache_control,
            "--replay-mode", "kernel",
            "--metrics", ",".join(self.metrics),
            "--kernel-name-base", "function",
            "--print-kernel-base", "function",
            "--csv",
            "--page", "raw",
            "--print-units", "base",
            "--log-file", str(out_dir / NCU_LOG),
        ]  # fmt: skip
        if kernel_regex:
            argv += ["--kernel-name", f"regex:.*(?:{kernel_regex}).*"]
        if self.launch_count:
            argv += ["--launch-count", str(self.launch_count)]
        return argv + list(inner_argv)

    def parse(self, out_dir: Path, kernel_regex: str) -> ProfileSummary:
        path = Path(out_dir) / NCU_LOG
        if not path.is_file():
            raise KoptFailure(f"{path}: ncu wrote no output (did the profiled command run?)")
        return parse_ncu_csv(path, kernel_regex)


def parse_ncu_csv(path: Path, kernel_regex: str) -> ProfileSummary:
    """A summary of an ncu CSV (raw or details page) written by `ncu --csv`."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise KoptFailure(f"{path}: cannot read: {exc.strerror}") from None
    launches = ncu_launches(text, where=str(path))
    return summarize(launches, kernel_regex, tool="ncu", files=(str(path),))


def ncu_launches(text: str, *, where: str = "ncu csv") -> list[Launch]:
    rows = list(csv.reader(line for line in text.splitlines() if line.startswith('"')))
    if not rows:
        raise KoptFailure(f"{where}: no CSV table in ncu's output (ncu failed or profiled nothing)")
    header = rows[0]
    if "ID" not in header or "Kernel Name" not in header:
        raise KoptFailure(f"{where}: not an ncu CSV (header lacks 'ID' and 'Kernel Name')")
    if "Metric Name" in header and "Metric Value" in header:
        records = _details_records(header, rows[1:], where)
    else:
        records = _raw_records(header, rows[1:], where)
    return [_launch(rec, where) for rec in records]


# A record: the launch's columns plus {metric: (value text, unit)}.
_Record = tuple[dict[str, str], dict[str, tuple[str, str]]]


def _raw_records(header: list[str], rows: list[list[str]], where: str) -> list[_Record]:
    """Raw page: one row per launch; the row with an empty ID under a header holds units."""
    if M_TIME not in header:
        raise KoptFailure(
            f"{where}: raw page has no {M_TIME} column (profiled without kopt's metrics?)"
        )
    metric_cols = [c for c in header if "__" in c]
    units: dict[str, str] = {}
    records: list[_Record] = []
    for row in rows:
        if row == header:
            continue
        if len(row) != len(header):
            raise KoptFailure(f"{where}: a row has {len(row)} fields, the header {len(header)}")
        rec = dict(zip(header, row, strict=True))
        if rec["ID"].strip() == "":
            units = {c: rec[c] for c in metric_cols}
            continue
        records.append((rec, {c: (rec[c], units.get(c, "")) for c in metric_cols}))
    return records


# Labels the details page uses for these metrics when they come from ncu's sections
# (LaunchStats, Occupancy, SpeedOfLight) rather than from --metrics.
SECTION_LABELS = {
    "Duration": M_TIME,
    "Registers Per Thread": M_REGS,
    "Static Shared Memory Per Block": M_SMEM_STATIC,
    "Dynamic Shared Memory Per Block": M_SMEM_DYNAMIC,
    "Achieved Occupancy": M_OCCUPANCY,
}


def _details_records(header: list[str], rows: list[list[str]], where: str) -> list[_Record]:
    """Details page: one row per (launch, metric); grouped back into launches in order."""
    grouped: dict[tuple[str, str], _Record] = {}
    for row in rows:
        if row == header:
            continue
        if len(row) != len(header):
            raise KoptFailure(f"{where}: a row has {len(row)} fields, the header {len(header)}")
        rec = dict(zip(header, row, strict=True))
        key = (rec.get("Process ID", ""), rec["ID"])
        if key not in grouped:
            grouped[key] = (rec, {})
        metric = rec["Metric Name"]
        metrics = grouped[key][1]
        entry = (rec["Metric Value"], rec.get("Metric Unit", ""))
        metrics[metric] = entry
        if metric in SECTION_LABELS:
            metrics.setdefault(SECTION_LABELS[metric], entry)
    return list(grouped.values())


def _launch(record: _Record, where: str) -> Launch:
    cols, metrics = record
    name = cols["Kernel Name"].strip()

    def value(metric: str, convert: Callable[[float, str], float] | None = None) -> float | None:
        if metric not in metrics:
            return None
        text, unit = metrics[metric]
        try:
            v = parse_number(text)
            if v is None or convert is None:
                return v
            return convert(v, unit) if unit.strip() else v
        except ValueError as exc:
            raise KoptFailure(
                f"{where}: kernel {name!r}, {metric} = {text!r} {unit!r}: {exc}"
            ) from None

    duration = value(M_TIME, time_to_ns)
    if duration is None:
        raise KoptFailure(f"{where}: kernel {name!r} (ID {cols['ID']}) has no {M_TIME}")
    smem = [value(m, bytes_of) for m in (M_SMEM_STATIC, M_SMEM_DYNAMIC)]
    regs = value(M_REGS)
    return Launch(
        kernel=name,
        duration_ns=duration,
        registers_per_thread=None if regs is None else int(regs),
        shared_mem_bytes=None if all(s is None for s in smem) else sum(s or 0.0 for s in smem),
        occupancy_pct=value(M_OCCUPANCY),
        dram_bytes=value(M_DRAM_BYTES, bytes_of),
        dram_bw_Bps=value(M_DRAM_RATE, rate_to_bytes_per_s),
        dram_pct=value(M_DRAM_PCT),
        block=cols.get("Block Size") or None,
        grid=cols.get("Grid Size") or None,
    )
