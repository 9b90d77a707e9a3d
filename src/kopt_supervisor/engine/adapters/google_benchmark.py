"""Google Benchmark's JSON (`--benchmark_format=json` on stdout, or `--benchmark_out=FILE`).

The document holds `context` and `benchmarks`: per run `name` (`BM_Softmax/M:4096/N:1024/
manual_time`: the family, its arguments, named `M:4096` or bare `4096`, and modifiers such as
`min_time:0.500`, `iterations:100`, `repeats:5`, `process_time`, `manual_time`,
`real_time`, `threads:8`), `run_name`, `run_type` (`iteration` or `aggregate`), `repetitions`,
`repetition_index`, `threads`, for aggregates `aggregate_name` (mean, median, stddev, cv...)
and `aggregate_unit`, `iterations`, `real_time`, `cpu_time`, `time_unit` (ns, us, ms, s), user
counters (`bytes_per_second`, `items_per_second`, anything `state.counters` set) as fields of
their own, `label`, and for a run that failed `error_occurred` / `error_message`
(`state.SkipWithError`) or, skipped on purpose, `skipped` / `skip_message`. Numbers may be
`NaN` or `Infinity`.

Rows:
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

Pure.
"""

from __future__ import annotations

import math
import re
from typing import Any

import pandas as pd

from kopt_supervisor.engine.adapters.model import AdapterError, Table, is_time_unit, to_unit
from kopt_supervisor.engine.adapters.text import load_json

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


def read_text(text: str, source: str, *, unit: str = "us", stat: str = "median") -> Table:
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
