"""Nsight Compute (ncu) adapter: wrap the bench, read ncu's CSV back into launches, and
each launch's NVTX range.

The command profiles every kernel of every process the bench starts (`--target-processes
all`; no kernel-name filter: the `[profile].kernel` regex only marks kernels for display),
leaves the GPU clocks alone (`--clock-control none`, so timings match the unprofiled bench)
and, by default, the caches too (`--cache-control none`: a profile whose every launch ran
after a flush disagreed with the bench where the unflushed one agreed, docs/profiling.md). It records NVTX ranges
(`--nvtx`) into a report `<out_dir>/ncu.ncu-rep` (`--export`) and prints the raw page as
CSV with base units and function names (no template arguments or parameters) to
`<out_dir>/ncu.csv` through `--log-file`, so the bench's own stdout never mixes with it.

With outside_ranges = "time" (the default) the bench runs twice under ncu (`next_pass`):
the kernels inside the `kopt:` ranges with every metric (`--nvtx-include`), then the others
with GPU time alone (`--nvtx-exclude`, into `outside/`), and `parse_passes` merges them; a
first pass that profiled nothing (no kopt range in the bench) is followed by the single
unfiltered pass instead (`whole/`). docs/profiling.md says why (replaying the contract
check's reference kernels with every metric cost ~100 s per tree).

A keep's two trees need the GPU time of each launch, its range, and the bytes it moved through L2
(the bytes floor, engine/profile/floors.py): `for_keep("time")` ([profile].keep, the
default) is one pass over the whole run with `gpu__time_duration.sum` and `lts__t_bytes.sum`
(no NVTX filter: the launches outside the ranges are in it, for the outside-time rule); on the
H100 the two filtered passes with every metric cost 48-54 s a keep
(docs/h100-wave3/part2-graphs-kept.md).

Each launch's range is read from the run's own raw page (`thread_ranges`: the column
`thread Domain:Push/Pop_Range` that `--nvtx` adds) wherever every launch is outside any range
or in one range of the default domain: no read-back then. Otherwise (nested ranges, another
domain) two commands read the report again (`after_commands`, no GPU needed; independent, so
the loop runs them at once): the raw page
as it is (`ncu_import.csv`), and with `--print-nvtx-rename kernel` (`ncu_nvtx.csv`), where
ncu names each launch made inside an NVTX push/pop range after its innermost range. The
parser joins the two by (process, ID): a launch whose two names differ was made in the
range the second names; a launch whose names agree was made outside any range. ncu shows
only the innermost range: a launch inside another range nested in a kopt range cannot be
attributed, and says so. Without `ncu_nvtx.csv` the profile holds no ranges and the
comparison falls back to whole-run kernel time, saying why.

The parser reads both CSV layouts ncu prints: the raw page (one row per launch, one column
per metric, a units row under the header) and the details page (one row per launch and
metric: "Metric Name", "Metric Unit", "Metric Value"). Lines ncu adds around the table
("==PROF== ...", "==WARNING== ...") are skipped; numbers may carry thousands separators;
"n/a" is a metric the GPU does not report and becomes None.
"""

from __future__ import annotations

import csv
import re
import shutil
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from kopt_supervisor.engine import KoptFailure
from kopt_supervisor.engine.profile.profiler import (
    KEEP_MODES,
    OUTSIDE_RANGES,
    ProfilePass,
    Profiler,
    bytes_of,
    parse_number,
    rate_to_bytes_per_s,
    time_to_ns,
)
from kopt_supervisor.engine.profile.summary import KOPT_PREFIX, Launch, ProfileSummary, summarize

NCU_LOG = "ncu.csv"
NCU_REPORT = "ncu"
"""--export base name: ncu writes `ncu.ncu-rep`."""
NCU_IMPORT = "ncu_import.csv"
NCU_NVTX = "ncu_nvtx.csv"
NVTX_SOURCE = "ncu --print-nvtx-rename kernel: the innermost NVTX push/pop range of each launch"
THREAD_SOURCE = "ncu --nvtx: each launch's one NVTX push/pop range, in the run's own raw page"
THREAD_COLUMN = "thread Domain:Push/Pop_Range"
"""The raw page's column (with --nvtx) that holds the push/pop ranges open on the launching
thread: empty, or `TID  "<domain>:<range>:PL_Type:PL_Value:CLR_Type:Color:Msg_Type:Msg"`."""
THREAD_ENTRY = re.compile(r'^\s*[0-9]+\s+"([^"]*)"\s*$')
DEFAULT_DOMAIN = "<default domain>:"
NVTX_KOPT_REGEX = "regex:kopt:.*/"
"""ncu's --nvtx-include/--nvtx-exclude rule for a launch made inside a push/pop range whose
name starts with `kopt:` (checked on the H100, docs/profiling.md)."""
OUTSIDE_DIR = "outside"
WHOLE_DIR = "whole"
ROLE_RANGES, ROLE_OUTSIDE, ROLE_WHOLE = "ranges", "outside", "whole"
PASS_RANGES = "kernels inside the kopt ranges, full metrics"
PASS_OUTSIDE = "kernels outside the kopt ranges, GPU time only"
PASS_WHOLE = "no launch inside a kopt range: the whole run's first launches (WHOLE_LAUNCHES), full metrics"
PASSES_TWO = (
    "two passes: the kernels inside the kopt ranges with full metrics, the others (outside/) with GPU time only"
)
PASS_KEEP = 'a keep\'s profile: one pass over the whole run, GPU time and L2 bytes ([profile].keep = "time")'
PASSES_FALLBACK = (
    "one whole-run pass with full metrics (whole/): the pass filtered to the kopt "
    "ranges found no launch (the bench emits no kopt range)"
)
WHOLE_LAUNCHES = 100
"""The whole-run pass profiles this many launches at most (ncu --launch-count; the run goes
on unprofiled after them). A bench without kopt's ranges times with its own loops: Liger's
RMSNorm bench (triton.testing.do_bench, 100 ms a config, two providers, 3 modes x 16 sizes)
launches ~10^5 kernels, and its whole-run pass under full metrics had not ended after 5
minutes on the H200 (2026-11-30, experiments/wild_gpu.sh): the baseline never reached a
verdict. The first launches are what such a profile describes (the summary names the pass)."""

M_TIME = "gpu__time_duration.sum"
M_REGS = "launch__registers_per_thread"
M_SMEM_STATIC = "launch__shared_mem_per_block_static"
M_SMEM_DYNAMIC = "launch__shared_mem_per_block_dynamic"
M_OCCUPANCY = "sm__warps_active.avg.pct_of_peak_sustained_active"
M_DRAM_BYTES = "dram__bytes.sum"
M_DRAM_RATE = "dram__bytes.sum.per_second"
M_DRAM_PCT = "dram__throughput.avg.pct_of_peak_sustained_elapsed"
M_L2_BYTES = "lts__t_bytes.sum"
"""A keep's pass reads it beside the time: the bytes each config's range moved through L2, which
must be at least what a call reads and writes (engine/profile/floors.py)."""

DEFAULT_METRICS: tuple[str, ...] = (
    M_TIME,
    M_REGS,
    M_SMEM_STATIC,
    M_SMEM_DYNAMIC,
    M_OCCUPANCY,
    M_DRAM_BYTES,
    M_DRAM_RATE,
    M_DRAM_PCT,
    M_L2_BYTES,
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
        outside_ranges: str = "time",
    ) -> None:
        if cache_control not in ("none", "all"):
            raise ValueError(f"cache_control must be 'none' or 'all', not {cache_control!r}")
        if outside_ranges not in OUTSIDE_RANGES:
            raise ValueError(f"outside_ranges must be one of {OUTSIDE_RANGES}, not {outside_ranges!r}")
        self.executable = executable
        self.metrics = metrics
        self.cache_control = cache_control
        self.launch_count = launch_count
        self.outside_ranges = outside_ranges
        self.pass_label = ""
        """What the one pass is for, in its summary (`for_keep`); empty: the plain whole run."""

    def command(self, inner_argv: list[str], out_dir: Path, kernel_regex: str) -> list[str]:
        """The argv that runs `inner_argv` under ncu, every kernel with the full metrics (one
        pass: outside_ranges = "full", or the fallback of the two-pass profile); creates
        `out_dir`."""
        return self._argv(inner_argv, out_dir, self.metrics, [])

    def for_keep(self, keep: str) -> Profiler:
        """[profile].keep = "time": this profiler for one unfiltered pass with GPU time and L2
        bytes (the per-class comparison, the outside-time rule and the bytes floor read nothing
        else); "full": self."""
        if keep not in KEEP_MODES:
            raise ValueError(f"keep must be one of {KEEP_MODES}, not {keep!r}")
        if keep == "full":
            return self
        timing = NcuProfiler(
            executable=self.executable,
            metrics=(M_TIME, M_L2_BYTES),
            cache_control=self.cache_control,
            launch_count=self.launch_count,
            outside_ranges="full",
        )
        timing.pass_label = PASS_KEEP
        return timing

    def next_pass(
        self, inner_argv: list[str], out_dir: Path, kernel_regex: str, done: Sequence[ProfilePass]
    ) -> ProfilePass | None:
        """outside_ranges = "time": first the kernels launched inside a kopt range, full
        metrics, into `out_dir`; then the others, GPU time alone, into `out_dir/outside/`;
        or, when the first found no launch (a bench without kopt ranges), the whole run with
        full metrics into `out_dir/whole/`. "full": one pass, `command`."""
        if self.outside_ranges == "full":
            step = super().next_pass(inner_argv, out_dir, kernel_regex, done)
            return replace(step, label=self.pass_label) if step is not None and self.pass_label else step
        out_dir = Path(out_dir).resolve()
        if not done:
            argv = self._argv(inner_argv, out_dir, self.metrics, ["--nvtx-include", NVTX_KOPT_REGEX])
            return ProfilePass(ROLE_RANGES, PASS_RANGES, tuple(argv), out_dir)
        if len(done) > 1:
            return None
        if profiled_nothing(out_dir):
            sub = _fresh(out_dir / WHOLE_DIR)
            cap = min(self.launch_count or WHOLE_LAUNCHES, WHOLE_LAUNCHES)
            argv = self._argv(inner_argv, sub, self.metrics, [], launch_count=cap)
            return ProfilePass(ROLE_WHOLE, PASS_WHOLE, tuple(argv), sub)
        sub = _fresh(out_dir / OUTSIDE_DIR)
        argv = self._argv(inner_argv, sub, (M_TIME,), ["--nvtx-exclude", NVTX_KOPT_REGEX])
        return ProfilePass(ROLE_OUTSIDE, PASS_OUTSIDE, tuple(argv), sub)

    def _argv(
        self,
        inner_argv: list[str],
        out_dir: Path,
        metrics: tuple[str, ...],
        nvtx_filter: list[str],
        launch_count: int | None = None,
    ) -> list[str]:
        out_dir = Path(out_dir).resolve()
        out_dir.mkdir(parents=True, exist_ok=True)
        argv = [
            self.executable,
            "--target-processes", "all",
            "--clock-control", "none",
            "--cache-control", self.cache_control,
            "--replay-mode", "kernel",
            "--metrics", ",".join(metrics),
            "--nvtx",
            *nvtx_filter,
            "--export", str(out_dir / NCU_REPORT),
            "--force-overwrite",
            *self._print_options(),
            "--log-file", str(out_dir / NCU_LOG),
        ]  # fmt: skip
        count = launch_count or self.launch_count
        if count:
            argv += ["--launch-count", str(count)]
        return argv + list(inner_argv)

    def _print_options(self) -> list[str]:
        return ["--print-kernel-base", "function", "--csv", "--page", "raw", "--print-units", "base"]

    def after_commands(self, out_dir: Path) -> list[list[str]]:
        """Read the report back: the raw page as it is, and with each launch named after its
        innermost NVTX push/pop range. None when the pass profiled no kernel (ncu's filter
        kept none: there is no report to read)."""
        out_dir = Path(out_dir).resolve()
        if profiled_nothing(out_dir) or own_ranges(out_dir) is not None:
            return []  # nothing profiled, or every launch's range is in the run's own page
        report = str(out_dir / f"{NCU_REPORT}.ncu-rep")
        base = [self.executable, "--import", report, *self._print_options()]
        return [
            [*base, "--log-file", str(out_dir / NCU_IMPORT)],
            [*base, "--print-nvtx-rename", "kernel", "--log-file", str(out_dir / NCU_NVTX)],
        ]

    def parse(self, out_dir: Path, kernel_regex: str) -> ProfileSummary:
        """The summary of one unfiltered pass's folder (what `command` wrote)."""
        return _parse_pass(Path(out_dir), kernel_regex)

    def parse_passes(self, done: Sequence[ProfilePass], kernel_regex: str) -> ProfileSummary:
        """The passes `next_pass` gave: one ("full"); the ranges and the outside passes,
        their launches merged; or the ranges pass that found nothing and the whole run."""
        roles = [p.role for p in done]
        if roles == ["single"]:
            summary = self.parse(done[0].out_dir, kernel_regex)
            return replace(summary, passes=self.pass_label) if self.pass_label else summary
        if roles == [ROLE_RANGES, ROLE_WHOLE]:
            return replace(self.parse(done[1].out_dir, kernel_regex), passes=PASSES_FALLBACK)
        if roles != [ROLE_RANGES, ROLE_OUTSIDE]:
            raise KoptFailure(f"ncu: passes {roles} are not a profile kopt takes")
        ranges_dir, outside_dir = (Path(p.out_dir) for p in done)
        inside = _pass_launches(ranges_dir, where_expected="inside")
        outside = [] if profiled_nothing(outside_dir) else _pass_launches(outside_dir, where_expected="outside")
        files = tuple(
            str(d / name)
            for d in (ranges_dir, outside_dir)
            for name in ((NCU_IMPORT, NCU_NVTX) if (d / NCU_NVTX).is_file() else (NCU_LOG,))
            if (d / name).is_file()
        )
        source = NVTX_SOURCE if (ranges_dir / NCU_NVTX).is_file() else THREAD_SOURCE
        merged = summarize(inside + outside, kernel_regex, tool="ncu", files=files, ranges_source=source)
        return replace(merged, passes=PASSES_TWO)


def profiled_nothing(out_dir: Path) -> bool:
    """True when the ncu pass in `out_dir` ran and profiled no kernel: its log holds no CSV
    table. A log with an ncu error and no table is a failure, not an empty pass; a missing log
    is no verdict here (False: reading it back fails and says so)."""
    log = Path(out_dir) / NCU_LOG
    if not log.is_file():
        return False
    lines = _read(log).splitlines()
    if any(line.startswith('"') for line in lines):
        return False
    errors = [line.strip() for line in lines if line.startswith("==ERROR==")]
    if errors:
        raise KoptFailure(f"{log}: ncu profiled no kernel: {errors[0]}")
    return True


def _fresh(sub: Path) -> Path:
    """A pass's own sub-folder, emptied of what an earlier attempt left there."""
    if sub.is_dir():
        shutil.rmtree(sub)
    return sub


def own_ranges(out_dir: Path) -> dict[tuple[str, str], str] | None:
    """(process ID, ID) -> each launch's range (its kernel name outside any), read from the
    run's own raw page (`thread_ranges`); None where that page cannot say (no log, another
    page, a launch in nested ranges or in another domain): the report is read back."""
    log = Path(out_dir) / NCU_LOG
    if not log.is_file():
        return None
    try:
        return thread_ranges(_read(log), where=str(log))
    except KoptFailure:
        return None


def thread_ranges(text: str, *, where: str = "ncu csv") -> dict[tuple[str, str], str] | None:
    """What `ncu --print-nvtx-rename kernel` would name each launch (its innermost push/pop
    range, else its kernel), read from the raw page's THREAD_COLUMN instead of a second import
    of the report; None where a launch's column is anything but empty or one range of the
    default domain (nested ranges, another domain, a name with a quote): the read-back, which
    has always handled those, is then needed. Checked on 16 H200 profiles (896 launches,
    2026-12-01): the same names as the read-back's, and the run's page the same as the
    imported one."""
    rows = list(csv.reader(line for line in text.splitlines() if line.startswith('"')))
    if not rows or "ID" not in rows[0] or "Kernel Name" not in rows[0]:
        return None
    header = rows[0]
    col = next((i for i, h in enumerate(header) if h.startswith(THREAD_COLUMN)), None)
    if col is None or "Metric Name" in header:
        return None
    pid, ident, kernel = (header.index(h) if h in header else -1 for h in ("Process ID", "ID", "Kernel Name"))
    names: dict[tuple[str, str], str] = {}
    for row in rows[1:]:
        if len(row) != len(header) or not row[ident].strip().isdigit():
            continue  # the units row
        key = (row[pid].strip() if pid >= 0 else "", row[ident].strip())
        value = row[col].strip()
        if not value:
            names[key] = row[kernel].strip()
            continue
        m = THREAD_ENTRY.match(value)
        if m is None or not m.group(1).startswith(DEFAULT_DOMAIN):
            return None
        fields = m.group(1)[len(DEFAULT_DOMAIN) :].rsplit(":", 6)
        if len(fields) != 7 or not fields[0]:
            return None
        names[key] = fields[0]
    if not names:
        raise KoptFailure(f"{where}: no launch in ncu's raw page")
    return names


def _parse_pass(out_dir: Path, kernel_regex: str) -> ProfileSummary:
    imported, nvtx = out_dir / NCU_IMPORT, out_dir / NCU_NVTX
    path = imported if imported.is_file() else out_dir / NCU_LOG
    if not path.is_file():
        raise KoptFailure(f"{path}: ncu wrote no output (did the profiled command run?)")
    if not nvtx.is_file():
        own = own_ranges(out_dir) if path.name == NCU_LOG else None
        if own is not None:
            return parse_ncu_csv(path, kernel_regex, ranges=own)
        return parse_ncu_csv(
            path, kernel_regex, why_no_ranges=(f"none: {NCU_NVTX} missing (the profiler's after_commands did not run)")
        )
    return parse_ncu_csv(path, kernel_regex, nvtx_path=nvtx)


def pass_launches(out_dir: Path) -> list[Launch]:
    """The launches of one pass, each with its innermost range: from the run's own raw page
    where it names every launch's range, else from the report read back (after_commands)."""
    imported, nvtx = out_dir / NCU_IMPORT, out_dir / NCU_NVTX
    own = None if nvtx.is_file() else own_ranges(out_dir)
    if own is not None:
        imported = nvtx = out_dir / NCU_LOG
    for path in (imported, nvtx):
        if not path.is_file():
            raise KoptFailure(f"{path}: ncu wrote no output (did the pass and its read-back run?)")
    keyed = ncu_keyed_launches(_read(imported), where=str(imported))
    renamed = own if own is not None else ncu_kernel_names(_read(nvtx), where=str(nvtx))
    return with_nvtx_ranges(keyed, renamed, plain=str(imported), nvtx=str(nvtx))


def _pass_launches(out_dir: Path, *, where_expected: str) -> list[Launch]:
    """The launches of one filtered pass (`pass_launches`). Every launch of the "inside" pass
    must be in some range, none of the "outside" pass in a kopt range: else ncu's NVTX filter
    did not apply, and the merge would count launches twice."""
    launches = pass_launches(out_dir)
    nvtx = out_dir / (NCU_NVTX if (out_dir / NCU_NVTX).is_file() else NCU_LOG)
    for x in launches:
        stray = not x.range if where_expected == "inside" else bool(x.range and x.range.startswith(KOPT_PREFIX))
        if stray:
            where = f"in range {x.range!r}" if x.range else "outside every range"
            raise KoptFailure(
                f"{nvtx}: kernel {x.kernel!r} launched {where} in the pass of kernels {where_expected} "
                f"the kopt ranges: ncu's --nvtx-{'include' if where_expected == 'inside' else 'exclude'} "
                "filter did not apply"
            )
    return launches


def parse_ncu_csv(
    path: Path,
    kernel_regex: str,
    *,
    nvtx_path: Path | None = None,
    why_no_ranges: str = "",
    ranges: dict[tuple[str, str], str] | None = None,
) -> ProfileSummary:
    """A summary of an ncu CSV (raw or details page) written by `ncu --csv`; with
    `nvtx_path` (the same report printed with `--print-nvtx-rename kernel`), each launch's
    innermost NVTX range; with `ranges` (`thread_ranges` of the same page), each launch's."""
    keyed = ncu_keyed_launches(_read(path), where=str(path))
    if ranges is not None:
        launches = with_nvtx_ranges(keyed, ranges, plain=str(path), nvtx=str(path))
        return summarize(launches, kernel_regex, tool="ncu", files=(str(path),), ranges_source=THREAD_SOURCE)
    if nvtx_path is None:
        launches = [launch for _, launch in keyed]
        return summarize(launches, kernel_regex, tool="ncu", files=(str(path),), ranges_source=why_no_ranges)
    renamed = ncu_kernel_names(_read(nvtx_path), where=str(nvtx_path))
    launches = with_nvtx_ranges(keyed, renamed, plain=str(path), nvtx=str(nvtx_path))
    return summarize(launches, kernel_regex, tool="ncu", files=(str(path), str(nvtx_path)), ranges_source=NVTX_SOURCE)


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise KoptFailure(f"{path}: cannot read: {exc.strerror}") from None


def with_nvtx_ranges(
    keyed: list[tuple[tuple[str, str], Launch]], renamed: dict[tuple[str, str], str], *, plain: str, nvtx: str
) -> list[Launch]:
    """The launches of `plain`, each with the range `nvtx` names it after.

    Both CSVs must print the same launches (one report); a launch named the same in both
    was made outside any range. ncu may prefix a range name with its domain: a name that
    holds `kopt:` anywhere but at its start is a format kopt does not know, and a failure
    rather than a launch silently counted outside the ranges."""
    keys = [k for k, _ in keyed]
    if set(keys) != set(renamed) or len(keys) != len(renamed):
        missing = sorted(set(keys) ^ set(renamed))[:3]
        raise KoptFailure(
            f"{nvtx}: not the same launches as {plain} (e.g. process/ID {missing}): "
            "both must be printed from one ncu report"
        )
    out = []
    for key, launch in keyed:
        name = renamed[key]
        if name.endswith("/" + launch.kernel):  # ncu 2025 prints "<innermost range>/<kernel>"
            name = name[: -len(launch.kernel) - 1]
        if name == launch.kernel:
            out.append(replace(launch, range=""))
        elif name.startswith(KOPT_PREFIX):
            out.append(replace(launch, range=name))
        elif KOPT_PREFIX in name:
            raise KoptFailure(
                f"{nvtx}: process {key[0]} ID {key[1]} is named {name!r}: a kopt range name not at the "
                "start (an NVTX domain prefix?); kopt expects ranges in the default domain named "
                "'kopt:col=value,...' (see docs/profiling.md for the capture to check)"
            )
        else:
            out.append(
                replace(
                    launch,
                    range=name,
                    range_note=(f"innermost range {name!r} is not a kopt range (ncu shows only the innermost range)"),
                )
            )
    return out


def ncu_kernel_names(text: str, *, where: str = "ncu csv") -> dict[tuple[str, str], str]:
    """(process ID, ID) -> the "Kernel Name" column of each launch of an ncu CSV."""
    names: dict[tuple[str, str], str] = {}
    for cols, _ in _records(text, where, need_time=False):
        key = (cols.get("Process ID", "").strip(), cols["ID"].strip())
        if key in names:
            raise KoptFailure(f"{where}: process {key[0]} ID {key[1]} appears twice")
        names[key] = cols["Kernel Name"].strip()
    return names


def ncu_launches(text: str, *, where: str = "ncu csv") -> list[Launch]:
    return [launch for _, launch in ncu_keyed_launches(text, where=where)]


def ncu_keyed_launches(text: str, *, where: str = "ncu csv") -> list[tuple[tuple[str, str], Launch]]:
    """Each launch of an ncu CSV with its (process ID, ID)."""
    out = []
    for rec in _records(text, where):
        cols = rec[0]
        out.append(((cols.get("Process ID", "").strip(), cols["ID"].strip()), _launch(rec, where)))
    return out


def _records(text: str, where: str, *, need_time: bool = True) -> list[_Record]:
    rows = list(csv.reader(line for line in text.splitlines() if line.startswith('"')))
    if not rows:
        raise KoptFailure(f"{where}: no CSV table in ncu's output (ncu failed or profiled nothing)")
    header = rows[0]
    if "ID" not in header or "Kernel Name" not in header:
        raise KoptFailure(f"{where}: not an ncu CSV (header lacks 'ID' and 'Kernel Name')")
    if "Metric Name" in header and "Metric Value" in header:
        return _details_records(header, rows[1:], where)
    return _raw_records(header, rows[1:], where, need_time=need_time)


# A record: the launch's columns plus {metric: (value text, unit)}.
_Record = tuple[dict[str, str], dict[str, tuple[str, str]]]


def _raw_records(header: list[str], rows: list[list[str]], where: str, *, need_time: bool = True) -> list[_Record]:
    """Raw page: one row per launch; the row with an empty ID under a header holds units."""
    if need_time and M_TIME not in header:
        raise KoptFailure(f"{where}: raw page has no {M_TIME} column (profiled without kopt's metrics?)")
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
            raise KoptFailure(f"{where}: kernel {name!r}, {metric} = {text!r} {unit!r}: {exc}") from None

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
        l2_bytes=value(M_L2_BYTES, bytes_of),
        block=cols.get("Block Size") or None,
        grid=cols.get("Grid Size") or None,
    )
