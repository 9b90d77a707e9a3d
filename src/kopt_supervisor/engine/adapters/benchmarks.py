"""The benchmark libraries' outputs: pytest-benchmark's JSON report, Google Benchmark's JSON,
torch.utils.benchmark's printed tables and Measurements, and triton.testing.perf_report's
tables, each read as kopt's rows.

pytest-benchmark (`pytest --benchmark-json=PATH`). The report holds `machine_info`,
`commit_info`, `datetime`, `version` and `benchmarks`: one object per benchmarked test with
`group`, `name` (`test_softmax[1024-float16]`), `fullname`, `params` (the parametrize
arguments, or null), `param` (the id), `extra_info` (what the test put in
`benchmark.extra_info`), `options`, and `stats`: `min`, `max`, `mean`, `stddev`, `median`,
`iqr`, `q1`, `q3`, `ops`, `rounds`, `iterations`, ... with times in seconds. Rows, one per
benchmark:
- config: `test` (the name without its parameter id), `group` when any benchmark has one,
  then each key of `params` (without params, `param`: the id);
- metrics: `min_<unit>`, `median_<unit>`, `mean_<unit>`, `max_<unit>`, `stddev_<unit>`,
  `iqr_<unit>` (converted from seconds to [target.adapter].unit), `ops_per_s`; `rounds` and
  `iterations` as extras;
- every `extra_info` key as a column (booleans as 0/1): where a test records its error
  (`max_err`) or its own throughput.
A benchmark without stats (one a hook kept although its test errored) has NaN metrics: the
row fails. pytest-benchmark drops a failed test's benchmark from the report altogether, and
pytest then exits 1: the bench fails.

Google Benchmark (`--benchmark_format=json` on stdout, or `--benchmark_out=FILE`). The
document holds `context` and `benchmarks`: per run `name` (`BM_Softmax/M:4096/N:1024/
manual_time`: the family, its arguments, named `M:4096` or bare `4096`, and modifiers such as
`min_time:0.500`, `iterations:100`, `repeats:5`, `process_time`, `manual_time`,
`real_time`, `threads:8`), `run_name`, `run_type` (`iteration` or `aggregate`), `repetitions`,
`repetition_index`, `threads`, for aggregates `aggregate_name` (mean, median, stddev, cv...)
and `aggregate_unit`, `iterations`, `real_time`, `cpu_time`, `time_unit` (ns, us, ms, s), user
counters (`bytes_per_second`, `items_per_second`, anything `state.counters` set) as fields of
their own, `label`, and for a run that failed `error_occurred` / `error_message`
(`state.SkipWithError`) or, skipped on purpose, `skipped` / `skip_message`. Numbers may be
`NaN` or `Infinity`. Rows:
- config: `benchmark` (the family), one column per argument (its name, or `arg0`, `arg1`...),
  `threads` when the name carries it;
- metrics: `real_<unit>` (wall time, or the manual CUDA-event time with UseManualTime: what a
  GPU kernel takes) and `cpu_<unit>` (host CPU time), converted to [target.adapter].unit;
  each counter as a column; `iterations`, `label`;
- correctness: `error`, the error or skip message ("" when none). A failed or skipped run keeps
  its row with NaN times, so it fails in kopt instead of vanishing.
With repetitions every repetition is a row (a sample of its config) and the aggregates are
dropped; with --benchmark_report_aggregates_only, the [target.adapter].stat aggregate gives
each config its row. Complexity rows (`_BigO`, `_RMS`) are not configs and are dropped.

torch.utils.benchmark as an engineer prints it: `Compare(results).print()` tables and printed
`Measurement`s (`print(timer.blocked_autorange())`, `print(timer.timeit(n))`). A Compare table:

    [--------------------- softmax ---------------------]
                      |  torch.softmax  |  triton_softmax
    1 threads: ------------------------------------------
          [32, 256]   |        11.7     |       16.6
      (cand)  N=4096  |        93.8 (! 5%) |  101.1
    Times are in microseconds (us).

one table per label, a column per description, a row per sub_label under each thread count,
the env in parentheses when several envs were compared (printed on the first row of each env
only), values in one unit chosen per table (so it changes as a kernel gets faster), a high
variance flagged `(! XX%)`, colours when colorize() was called. A Measurement prints its
TaskSpec (`label: sub_label`, then the description) and `Median: 11.99 us` (or the one time of
a single measurement), `IQR: ...`, `N measurements, R runs per measurement, T thread(s)`.
Rows: config = `threads`, `env` (when any), the sub_label (its `key=value, ...` pairs as
columns when every row has the same keys, else `sub_label`), and `label` when several tables
are read as one; one metric column per description (a Measurement without a description:
`time`), converted to [target.adapter].unit. Pickled Measurements are not read: unpickling a
file the bench wrote would run the candidate's code inside kopt.

perf_report (triton.testing.perf_report): the CSV `Mark.run(save_path=...)` writes and the
table `run(print_data=True)` prints hold the benchmark's `x_names` columns first, then one
column per line named `<line_name> (<ylabel>)` (the mean the benchmark function returned, in
whatever its ylabel says: ms, GB/s, TFLOPS...), and with `diff_col=True` a last `Diff` column.
The printout is `<plot_name>:` followed by pandas' `df.to_string()` (an index column, dropped
here). Several benchmarks give several tables, each titled by its plot_name (the CSV file's
stem). Rows: the x_names are the config columns, each line column a metric (its unit from the
parentheses; kopt.toml's metric names the line of the kernel being optimised, the others are
ignored), `Diff` an ignored extra.

Pure: the callers read the files.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import pandas as pd

from kopt_supervisor.engine.adapters.table import (
    ANSI,
    TABLE_COLUMN,
    AdapterError,
    Table,
    csv_file_table,
    find_tables,
    is_time_unit,
    load_json,
    to_unit,
)

STATS = ("min", "median", "mean", "max", "stddev", "iqr")


def _plain(v: Any) -> Any:
    if isinstance(v, bool):
        return int(v)
    if v is None:
        return math.nan
    if isinstance(v, int | float | str):
        return v
    return json.dumps(v, sort_keys=True)


def read_pytest_benchmark(text: str, source: str, *, unit: str = "us") -> Table:
    data = load_json(text, source, key="benchmarks")
    benches = data["benchmarks"]
    if not isinstance(benches, list) or not benches:
        raise AdapterError(f"{source}: pytest-benchmark report with no benchmarks")
    groups = any(isinstance(b, dict) and b.get("group") for b in benches)
    rows: list[dict[str, Any]] = []
    param_keys: list[str] = []
    for i, b in enumerate(benches):
        if not isinstance(b, dict) or "name" not in b:
            raise AdapterError(f"{source}: benchmarks[{i}] is not a benchmark object (no 'name')")
        if not ({"stats", "fullname", "options"} & set(b)):
            raise AdapterError(
                f"{source}: benchmarks[{i}] ({b['name']!r}) is not a pytest-benchmark entry "
                f"(no stats, fullname or options)"
            )
        name = str(b["name"])
        row: dict[str, Any] = {"test": re.sub(r"\[.*\]$", "", name)}
        if groups:
            row["group"] = b.get("group") or ""
        params = b.get("params")
        if isinstance(params, dict) and params:
            for k, v in params.items():
                row[str(k)] = _plain(v)
                if str(k) not in param_keys:
                    param_keys.append(str(k))
        else:
            m = re.search(r"\[(.*)\]$", name)
            row["param"] = b.get("param") or (m.group(1) if m else "")
        raw = b.get("stats")
        stats: dict[str, Any] = raw if isinstance(raw, dict) else {}
        for s in STATS:
            v = stats.get(s)
            row[f"{s}_{unit}"] = to_unit(float(v), "s", unit) if isinstance(v, int | float) else math.nan
        ops = stats.get("ops")
        row["ops_per_s"] = float(ops) if isinstance(ops, int | float) else math.nan
        row["rounds"] = stats.get("rounds", math.nan)
        row["iterations"] = stats.get("iterations", math.nan)
        for k, v in (b.get("extra_info") or {}).items():
            col = str(k) if str(k) not in row else f"extra_{k}"
            row[col] = _plain(v)
        rows.append(row)
    frame = pd.DataFrame(rows)
    if "param" in frame and param_keys:  # mixed: some benchmarks parametrized, some not
        frame["param"] = frame["param"].fillna("")
    config = ["test", *(["group"] if groups else []), *param_keys, *(["param"] if "param" in frame else [])]
    metrics = tuple(f"{s}_{unit}" for s in STATS) + ("ops_per_s",)
    units = {f"{s}_{unit}": unit for s in STATS} | {"ops_per_s": "ops/s"}
    return Table(
        frame,
        "pytest-benchmark",
        "",
        tuple(config),
        metrics,
        units,
        (),
        source,
        (f"times converted from seconds to {unit}",),
    )


MODIFIERS = re.compile(r"^(min_time|min_warmup_time|iterations|repeats):|^(process_time|manual_time|real_time)$")
STANDARD = {
    "name",
    "family_index",
    "per_family_instance_index",
    "run_name",
    "run_type",
    "repetitions",
    "repetition_index",
    "threads",
    "aggregate_name",
    "aggregate_unit",
    "error_occurred",
    "error_message",
    "skipped",
    "skip_message",
    "iterations",
    "real_time",
    "cpu_time",
    "time_unit",
    "label",
    "cpu_coefficient",
    "real_coefficient",
    "big_o",
    "rms",
}


def parse_name(name: str) -> dict[str, Any]:
    """`BM_x/M:4096/1024/threads:2/manual_time` -> {"benchmark": "BM_x", "M": 4096, "arg1": 1024,
    "threads": 2}: the family, its arguments, the thread count; other modifiers dropped."""
    parts = name.split("/")
    out: dict[str, Any] = {"benchmark": parts[0]}
    k = 0
    for part in parts[1:]:
        if MODIFIERS.match(part):
            continue
        if part.startswith("threads:"):
            out["threads"] = _int(part.split(":", 1)[1])
            continue
        if ":" in part:
            key, value = part.split(":", 1)
            out[key] = _int(value)
        else:
            out[f"arg{k}"] = _int(part)
        k += 1
    return out


def _int(text: str) -> Any:
    try:
        return int(text)
    except ValueError:
        return text


def _time(run: dict[str, Any], key: str, unit: str, source: str) -> float:
    v = run.get(key)
    if not isinstance(v, int | float) or isinstance(v, bool):
        return math.nan
    tu = str(run.get("time_unit", "ns"))
    if not is_time_unit(tu):
        raise AdapterError(f"{source}: {run.get('name')!r} has time_unit {tu!r}, not ns, us, ms or s")
    return to_unit(float(v), tu, unit)


def read_google_benchmark(text: str, source: str, *, unit: str = "us", stat: str = "median") -> Table:
    data = load_json(text, source, key="benchmarks")
    runs = data["benchmarks"]
    if not isinstance(runs, list) or not runs:
        raise AdapterError(f"{source}: Google Benchmark output with no benchmarks")
    for i, r in enumerate(runs):
        if not isinstance(r, dict) or "name" not in r:
            raise AdapterError(f"{source}: benchmarks[{i}] is not a run object (no 'name')")
        if not ({"run_type", "time_unit", "real_time", "error_occurred", "skipped"} & set(r)):
            raise AdapterError(
                f"{source}: benchmarks[{i}] ({r['name']!r}) is not a Google Benchmark run "
                f"(no run_type, real_time or time_unit)"
            )
    notes: list[str] = [f"times converted to {unit}"]
    complexity = [r for r in runs if "big_o" in r or "rms" in r]
    runs = [r for r in runs if r not in complexity]
    with_iterations = {r.get("run_name", r["name"]) for r in runs if r.get("run_type", "iteration") != "aggregate"}
    chosen: list[dict[str, Any]] = []
    aggregates_used = False
    for r in runs:
        run_name = r.get("run_name", r["name"])
        if r.get("run_type") == "aggregate":
            if run_name in with_iterations or r.get("aggregate_name") != stat:
                continue
            aggregates_used = True
        chosen.append(r)
    if aggregates_used:
        notes.append(f"only aggregates reported: each config's {stat!r} aggregate")
    if complexity:
        notes.append(f"dropped {len(complexity)} complexity row(s) (BigO/RMS)")
    if not chosen:
        raise AdapterError(
            f"{source}: no iteration runs and no {stat!r} aggregates ([target.adapter].stat) among {len(runs)} run(s)"
        )
    rows: list[dict[str, Any]] = []
    arg_cols: list[str] = []
    counters: list[str] = []
    for r in chosen:
        row = parse_name(str(r.get("run_name", r["name"])))
        for k in row:
            if k != "benchmark" and k not in arg_cols:
                arg_cols.append(k)
        row[f"real_{unit}"] = _time(r, "real_time", unit, source)
        row[f"cpu_{unit}"] = _time(r, "cpu_time", unit, source)
        row["iterations"] = r.get("iterations", math.nan)
        if r.get("error_occurred"):
            row["error"] = str(r.get("error_message") or "error")
            row[f"real_{unit}"] = row[f"cpu_{unit}"] = math.nan
        elif r.get("skipped"):
            row["error"] = "skipped: " + str(r.get("skip_message") or "")
            row[f"real_{unit}"] = row[f"cpu_{unit}"] = math.nan
        else:
            row["error"] = ""
        row["label"] = str(r.get("label", ""))
        for k, v in r.items():
            if k not in STANDARD and isinstance(v, int | float) and not isinstance(v, bool):
                col = k if k not in row else f"counter_{k}"
                row[col] = float(v)
                if col not in counters:
                    counters.append(col)
        rows.append(row)
    frame = pd.DataFrame(rows)
    config = ["benchmark", *[c for c in arg_cols if c != "threads"], *(["threads"] if "threads" in arg_cols else [])]
    for c in config:
        if c in frame and frame[c].isna().any():  # families with different argument counts
            frame[c] = frame[c].astype(object).where(frame[c].notna(), "")
    metrics = (f"real_{unit}", f"cpu_{unit}", *counters)
    units = {f"real_{unit}": unit, f"cpu_{unit}": unit}
    for c in counters:
        if c.endswith("per_second"):
            units[c] = c.replace("_per_second", "/s")
    return Table(frame, "google-benchmark", "", tuple(config), metrics, units, ("error",), source, tuple(notes))


TITLE = re.compile(r"^\[-*\s*(?P<label>.*?)\s*-*\]$")
THREADS = re.compile(r"^(?P<n>\d+) threads: -*$")
UNIT_LINE = re.compile(r"^Times are in \w+ \((?P<unit>ns|us|ms|s)\)\.$")
ENV = re.compile(r"^\((?P<env>[^)]*)\)\s+(?P<rest>.*)$")
VALUE = re.compile(r"^\s*(?P<v>[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?)\s*(\(!\s*\d+%\))?\s*$")
MEASUREMENT = re.compile(r"^<.*Measurement object at 0x[0-9a-fA-F]+>$")
MEDIAN = re.compile(r"^\s+(Median:\s+)?(?P<v>[\d.]+)\s+(?P<unit>ns|us|ms|s)$")
COUNTS = re.compile(r"^\s+(?P<n>\d+) measurements?, (?P<runs>\d+) runs .*?(?P<threads>\d+) threads?$")
PAIR = re.compile(r"^\s*(?P<k>[A-Za-z_][A-Za-z0-9_]*)\s*[=:]\s*(?P<v>[^,=]+?)\s*$")


def _number(text: str) -> Any:
    try:
        f = float(text)
    except ValueError:
        return text.strip()
    return int(f) if f.is_integer() and "." not in text and "e" not in text.lower() else f


def _pairs(sub_label: str) -> dict[str, Any] | None:
    """`M=64, N=256` -> {"M": 64, "N": 256}; None when the label is not such pairs."""
    if not sub_label.strip():
        return None
    out: dict[str, Any] = {}
    for part in sub_label.split(","):
        m = PAIR.match(part)
        if not m:
            return None
        out[m["k"]] = _number(m["v"])
    return out


def _config_frame(keys: list[dict[str, Any]]) -> pd.DataFrame:
    """threads / env / sub_label rows -> config columns (pairs spread out when uniform)."""
    parsed = [_pairs(k["sub_label"]) for k in keys]
    spread = all(p is not None for p in parsed) and len({tuple(p) for p in parsed if p is not None}) == 1
    rows = []
    for k, p in zip(keys, parsed, strict=True):
        row: dict[str, Any] = {}
        if any(x.get("label") for x in keys) and len({x.get("label") for x in keys}) > 1:
            row["label"] = k.get("label", "")
        row["threads"] = k["threads"]
        if any(x.get("env") for x in keys):
            row["env"] = k.get("env", "")
        if spread and p is not None:
            row.update(p)
        else:
            row["sub_label"] = k["sub_label"]
        rows.append(row)
    return pd.DataFrame(rows)


def _compare_tables(lines: list[str], unit: str, source: str) -> list[Table]:
    tables: list[Table] = []
    i = 0
    while i < len(lines):
        m = TITLE.match(lines[i].strip())
        if not m or i + 1 >= len(lines) or "|" not in lines[i + 1]:
            i += 1
            continue
        label = m["label"]
        descriptions = [c.strip() for c in lines[i + 1].split("|")[1:]]
        keys: list[dict[str, Any]] = []
        values: list[list[float]] = []
        threads, env, table_unit = 1, "", ""
        j = i + 2
        while j < len(lines):
            line = lines[j]
            t = THREADS.match(line.strip())
            u = UNIT_LINE.match(line.strip())
            if t:
                threads, env = int(t["n"]), ""
            elif u:
                table_unit = u["unit"]
                j += 1
                break
            elif "|" in line:
                cells = line.split("|")
                name = cells[0].strip()
                e = ENV.match(name)
                if e:
                    env, name = e["env"], e["rest"].strip()
                row_values = []
                for c in cells[1:]:
                    v = VALUE.match(c)
                    row_values.append(float(v["v"]) if v else math.nan)
                if len(row_values) != len(descriptions):
                    raise AdapterError(
                        f"{source}: torch Compare table {label!r}: a row has {len(row_values)} "
                        f"values for {len(descriptions)} columns"
                    )
                keys.append({"label": label, "threads": threads, "env": env, "sub_label": name})
                values.append(row_values)
            elif line.strip() and not line.startswith("(! XX%)"):
                break
            j += 1
        if not table_unit:
            raise AdapterError(f"{source}: torch Compare table {label!r} without its 'Times are in ... (unit).' line")
        frame = _config_frame(keys)
        config = tuple(frame.columns)
        for k, d in enumerate(descriptions):
            frame[d or f"column{k + 1}"] = [
                to_unit(v[k], table_unit, unit) if not math.isnan(v[k]) else math.nan for v in values
            ]
        metrics = tuple(d or f"column{k + 1}" for k, d in enumerate(descriptions))
        tables.append(
            Table(
                frame,
                "torch-benchmark",
                label,
                config,
                metrics,
                dict.fromkeys(metrics, unit),
                (),
                source,
                (f"times converted from {table_unit} to {unit}",),
            )
        )
        i = j
    return tables


def _measurements(lines: list[str], unit: str, source: str) -> Table | None:
    found: list[tuple[dict[str, Any], str, float]] = []
    i = 0
    while i < len(lines):
        if not MEASUREMENT.match(lines[i].strip()):
            i += 1
            continue
        spec: list[str] = []
        j = i + 1
        value = None
        while j < len(lines) and not MEASUREMENT.match(lines[j].strip()):
            md = MEDIAN.match(lines[j])
            if md and value is None:
                value = to_unit(float(md["v"]), md["unit"], unit)
            elif value is None:
                spec.append(lines[j])
            c = COUNTS.match(lines[j])
            if c and value is not None:
                j += 1
                break
            j += 1
        if value is not None:
            c = COUNTS.match(lines[j - 1])
            threads = int(c["threads"]) if c else 1
            title = spec[0].strip() if spec else ""
            description = spec[1].strip() if len(spec) > 1 and not spec[1].startswith(("setup:", " ")) else ""
            label, _, sub = title.partition(": ")
            found.append(({"label": label, "threads": threads, "env": "", "sub_label": sub}, description, value))
        i = j
    if not found:
        return None
    order: list[tuple[Any, ...]] = []
    cells: dict[tuple[Any, ...], dict[str, list[float]]] = {}
    descriptions: list[str] = []
    for key, desc, v in found:
        k = (key["label"], key["threads"], key["sub_label"])
        if k not in cells:
            order.append(k)
            cells[k] = {}
        d = desc or "time"
        cells[k].setdefault(d, []).append(v)
        if d not in descriptions:
            descriptions.append(d)
    keys, rows = [], []
    for k in order:  # the n-th measurement of each description of a config forms its n-th row
        n = max(len(vs) for vs in cells[k].values())
        for r in range(n):
            keys.append({"label": k[0], "threads": k[1], "env": "", "sub_label": k[2]})
            rows.append([cells[k].get(d, [])[r] if r < len(cells[k].get(d, [])) else math.nan for d in descriptions])
    frame = _config_frame(keys)
    if "label" not in frame and len({k[0] for k in order}) == 1:
        title = order[0][0]
    else:
        title = ""
    config = tuple(frame.columns)
    for col, d in enumerate(descriptions):
        frame[d] = [row[col] for row in rows]
    return Table(
        frame,
        "torch-benchmark",
        title,
        config,
        tuple(descriptions),
        dict.fromkeys(descriptions, unit),
        (),
        source,
        (f"{len(found)} printed Measurement(s); times converted to {unit}",),
    )


def read_torch_benchmark(text: str, source: str = "stdout", *, unit: str = "us") -> list[Table]:
    """Every Compare table in `text`, then (as one table) its printed Measurements."""
    lines = [ANSI.sub("", ln).rstrip() for ln in text.splitlines()]
    tables = _compare_tables(lines, unit, source)
    m = _measurements(lines, unit, source)
    return tables + ([m] if m is not None else [])


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
