"""torch.utils.benchmark as an engineer prints it: `Compare(results).print()` tables and
printed `Measurement`s (`print(timer.blocked_autorange())`, `print(timer.timeit(n))`).

A Compare table:

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

Pure.
"""

from __future__ import annotations

import math
import re
from typing import Any

import pandas as pd

from kopt_supervisor.engine.adapters.model import AdapterError, Table, to_unit
from kopt_supervisor.engine.adapters.text import ANSI

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


def read_text(text: str, source: str = "stdout", *, unit: str = "us") -> list[Table]:
    """Every Compare table in `text`, then (as one table) its printed Measurements."""
    lines = [ANSI.sub("", ln).rstrip() for ln in text.splitlines()]
    tables = _compare_tables(lines, unit, source)
    m = _measurements(lines, unit, source)
    return tables + ([m] if m is not None else [])
