"""pytest-benchmark's JSON report (`pytest --benchmark-json=PATH`).

The report holds `machine_info`, `commit_info`, `datetime`, `version` and `benchmarks`: one
object per benchmarked test with `group`, `name` (`test_softmax[1024-float16]`), `fullname`,
`params` (the parametrize arguments, or null), `param` (the id), `extra_info` (what the test
put in `benchmark.extra_info`), `options`, and `stats`: `min`, `max`, `mean`, `stddev`,
`median`, `iqr`, `q1`, `q3`, `ops`, `rounds`, `iterations`, ... with times in seconds.

Rows, one per benchmark:
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

Pure.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import pandas as pd

from kopt_supervisor.engine.adapters.model import AdapterError, Table, to_unit
from kopt_supervisor.engine.adapters.text import load_json

STATS = ("min", "median", "mean", "max", "stddev", "iqr")


def _plain(v: Any) -> Any:
    if isinstance(v, bool):
        return int(v)
    if v is None:
        return math.nan
    if isinstance(v, int | float | str):
        return v
    return json.dumps(v, sort_keys=True)


def read_text(text: str, source: str, *, unit: str = "us") -> Table:
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
