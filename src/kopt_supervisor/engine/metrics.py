"""Reading a benchmark's CSV: config columns, config classes, correctness, one value per config.

A bench run writes a table with one row per config, or the same number of rows for every
config (a bench that prints each repetition as a row, Google Benchmark's repetitions: they
are samples of the same run, summarised by their median). The rules of kopt.toml's [target]
turn it into a `Measurement`: per config its class, its value, and whether it passed the
correctness rule (NaN/Inf or a missing metric always fail). A broken file (no CSV, empty,
malformed, a missing column, a config with more or fewer rows than the others) is a
`BenchError` whose one-line message names the file and column or config.

The output's shape is part of correctness: in a look, the candidate's table must hold best's
configs, each exactly as often as best's (`check_shape`); an extra, a missing or a
duplicated config row is a bench failure, never a median over the duplicates. `paired`
pairs two such measurements.

Pure: text in, tables and measurements out (engine/adapters/__init__.py finds and reads the file).
"""

from __future__ import annotations

import difflib
import io
import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kopt_supervisor.engine import KoptFailure, expr
from kopt_supervisor.engine.config import TargetConfig
from kopt_supervisor.engine.decide.estimate import Pair

if TYPE_CHECKING:  # imported where a table is read: pandas is 0.39 s of every kopt process's start
    import pandas as pd

MEAN_SUFFIX = "_mean"
"""A column named after the metric with this suffix (the harness's `us_mean` beside its
median `us`) is the bench's mean over the same timed calls: `ConfigResult.mean`, never a
config column."""
LAST_SUFFIX = "_last"
"""A column named after the metric with this suffix (the harness's `us_last` in a served
look) is the metric of the look's last timed block alone, the one whose outputs kopt audits:
`ConfigResult.last`, never a config column (`plausible.last_block_not_faster`)."""
MAX_NAMED = 3
"""Configs named in one shape error; the rest are counted."""


class BenchError(KoptFailure):
    """The bench produced nothing comparable (status fail_bench). `ended`: its process exited
    or was killed on its own, not stopped by kopt for a timeout or a flood of output (a run
    worth trying again where the code is trusted: loop/start.py BASELINE_TRIES)."""

    def __init__(self, message: str, *, ended: bool = False) -> None:
        super().__init__(message)
        self.ended = ended


@dataclass(frozen=True)
class ConfigResult:
    key: str
    cls: str
    values: tuple[float, ...]
    ok: bool
    reasons: tuple[str, ...] = ()
    production: bool = True
    row: dict[str, Any] = field(default_factory=dict)
    mean: float = math.nan
    """The bench's mean over the timed calls behind the value (a `<metric>_mean` column, the
    mean over the config's rows); NaN when the bench reports none or a row's is not finite."""
    calls: float = math.nan
    """With [target].calls: the timed calls the config's rows say they stand for, summed over
    its rows; NaN without the column or when a row's count is not a finite number."""
    last: float = math.nan
    """The metric of the last timed block alone (a `<metric>_last` column, the mean over the
    config's rows); NaN when the bench reports none or a row's is not finite."""

    @property
    def value(self) -> float:
        finite = [v for v in self.values if math.isfinite(v)]
        return statistics.median(finite) if finite else math.nan

    @property
    def rows(self) -> int:
        """How many rows of the table are this config's."""
        return len(self.values)


@dataclass(frozen=True)
class Measurement:
    configs: dict[str, ConfigResult]
    config_columns: tuple[str, ...]
    class_columns: tuple[str, ...]
    timed: float | None = None
    """With [target].calls: what the bench says its timed calls took in all, in the
    metric's unit (each row's latency times its count of calls); None without the column or
    when a row's count or latency is not a finite positive number."""

    @property
    def failing(self) -> list[ConfigResult]:
        return [c for c in self.configs.values() if not c.ok]

    @property
    def ok(self) -> bool:
        return not self.failing

    def classes(self) -> list[str]:
        return sorted({c.cls for c in self.configs.values()})


def format_value(v: Any) -> str:
    if isinstance(v, float) and v.is_integer() and abs(v) < 1e15:
        return str(int(v))
    return str(v)


def class_columns(class_by: Sequence[str] | None, config_cols: Sequence[str]) -> list[str]:
    """The columns a config class is keyed by: [target].class_by as given ([] is one class of
    every config), all config columns when it is not set (each config its own class)."""
    return list(class_by) if class_by is not None else list(config_cols)


def describe_classes(columns: Sequence[str]) -> str:
    """How kopt.toml's class columns (class_columns) read everywhere they are shown: the
    proposal, the workspace README, the proposer's prompt."""
    if not columns:
        return "one class: every config decided together (class_by = [])"
    return "classes by " + ", ".join(f"`{c}`" for c in columns)


def key_of(row: Mapping[str, Any], columns: Iterable[str]) -> str:
    """`col=value,col=value`: the name of a config (all config columns) or a class."""
    return ",".join(f"{c}={format_value(row[c])}" for c in columns)


def parse_class_key(key: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in key.split(","):
        if "=" in part:
            k, v = part.split("=", 1)
            out[k] = v
    return out


# ---------------------------------------------------------------------------------------
# Parsing a table


def parse_table(text: str, *, metric: str, from_stdout: bool = False, source: str = "CSV") -> pd.DataFrame:
    """A bench's table from its text (`from_stdout`: the last CSV block naming the metric
    among log lines). `source` names the file in errors."""
    import pandas as pd

    if from_stdout:
        text = _csv_block(text, metric, source)
    if not text.strip():
        raise BenchError(f"{source}: empty CSV")
    try:
        df = pd.read_csv(io.StringIO(text), skipinitialspace=True)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise BenchError(f"{source}: malformed CSV: {first}") from None
    df.columns = [str(c).strip() for c in df.columns]
    if df.empty:
        raise BenchError(f"{source}: the CSV has a header but no rows")
    return df


def _csv_block(text: str, metric: str, source: str) -> str:
    """From stdout mixed with log lines, the last block that starts with a header naming
    the metric column and runs to the first line with a different number of fields."""
    lines = text.splitlines()
    header_at = None
    for i, line in enumerate(lines):
        if metric in [c.strip() for c in line.split(",")]:
            header_at = i
    if header_at is None:
        raise BenchError(f"{source}: no CSV header with column {metric!r} in the bench's stdout")
    n = lines[header_at].count(",")
    block = [lines[header_at]]
    for line in lines[header_at + 1 :]:
        if not line.strip() or line.count(",") != n:
            break
        block.append(line)
    return "\n".join(block) + "\n"


# ---------------------------------------------------------------------------------------
# Interpreting a table


def close_name(name: str, available: Sequence[str], others: Sequence[str] = ()) -> str | None:
    """The column the user most likely meant by `name`: one of `available` first (the same name
    in other case or spacing, one that starts with it (`median` -> `median_us`), else the
    closest spelling), then one of `others` spelled the same but for case; None when nothing
    is close."""

    def norm(s: str) -> str:
        return "".join(ch for ch in s.lower() if ch.isalnum())

    want = norm(name)
    if not want:
        return None
    for pool in (available, others):
        same = [a for a in pool if norm(a) == want]
        if same:
            return same[0]
    starts = [a for a in available if norm(a).startswith(want)]
    if starts:
        return min(starts, key=lambda a: abs(len(norm(a)) - len(want)))
    near = difflib.get_close_matches(want, [norm(a) for a in available], n=1, cutoff=0.75)
    return next(a for a in available if norm(a) == near[0]) if near else None


def missing_metric(name: str, df: pd.DataFrame, source: str) -> str:
    """The one line of a [target].metric that names no column of the bench's table: the file,
    the key and its value, a close match, the names a metric can take (the numeric columns)
    and the others."""
    import pandas as pd

    cols = [str(c) for c in df.columns]
    numeric = [c for c in cols if pd.to_numeric(df[c], errors="coerce").notna().any()]
    other = [c for c in cols if c not in numeric]
    guess = close_name(name, numeric, other)
    return (
        f"{source}: metric column {name!r} missing: [target].metric names no column of the bench's table"
        + (f"; did you mean {guess!r}?" if guess else ";")
        + f" available: {', '.join(numeric) or 'none'}"
        + (f" (not numbers: {', '.join(other)})" if other else "")
    )


def resolve_columns(df: pd.DataFrame, cfg: TargetConfig, source: str) -> tuple[list[str], list[str]]:
    """(config columns, class columns) for this table, checked against kopt.toml."""
    cols = list(df.columns)
    if cfg.metric not in cols:
        raise BenchError(missing_metric(cfg.metric, df, source))
    if cfg.calls and cfg.calls not in cols:
        raise BenchError(f"{source}: calls column {cfg.calls!r} missing (columns: {', '.join(cols)})")
    used = {
        cfg.metric,
        cfg.metric + MEAN_SUFFIX,
        cfg.metric + LAST_SUFFIX,
        *cfg.ignore,
        *filter(None, [cfg.calls]),
    }
    if cfg.correct:
        used |= expr.parse(cfg.correct).names
    if cfg.config is not None:
        config_cols = list(cfg.config)
    else:
        config_cols = [c for c in cols if c not in used]
    missing = [c for c in config_cols if c not in cols]
    if missing:
        raise BenchError(f"{source}: config column {missing[0]!r} missing (columns: {', '.join(cols)})")
    class_cols = class_columns(cfg.class_by, config_cols)
    missing = [c for c in class_cols if c not in cols]
    if missing:
        raise BenchError(f"{source}: class_by column {missing[0]!r} missing (columns: {', '.join(cols)})")
    if not config_cols:
        config_cols = []
    return config_cols, class_cols


def measure(df: pd.DataFrame, cfg: TargetConfig, source: str = "CSV") -> Measurement:
    import pandas as pd

    config_cols, class_cols = resolve_columns(df, cfg, source)
    metric = pd.to_numeric(df[cfg.metric], errors="coerce")
    passed = _evaluate_rule(df, cfg.correct, source) if cfg.correct else pd.Series(True, index=df.index)
    production = _evaluate_rule(df, cfg.production, source) if cfg.production else pd.Series(True, index=df.index)

    means, lasts = (_column(df, cfg.metric + suffix) for suffix in (MEAN_SUFFIX, LAST_SUFFIX))
    calls = _column(df, cfg.calls) if cfg.calls else None

    grouped: dict[str, dict[str, Any]] = {}
    for i, raw in df.iterrows():
        row = {c: raw[c] for c in config_cols}
        key = key_of(row, config_cols) if config_cols else "all"
        g = grouped.setdefault(
            key,
            {
                "cls": key_of(raw, class_cols) if class_cols else "all",
                "values": [],
                "reasons": [],
                "means": [],
                "lasts": [],
                "calls": [],
                "production": bool(production[i]),
                "row": {c: _plain(v) for c, v in row.items()},
            },
        )
        v = float(metric[i]) if not pd.isna(metric[i]) else math.nan
        g["values"].append(v)
        g["means"].append(_cell(means, i))
        g["lasts"].append(_cell(lasts, i))
        g["calls"].append(_cell(calls, i))
        if pd.isna(metric[i]):
            g["reasons"].append(f"{cfg.metric} missing or not a number ({raw[cfg.metric]!r})")
        elif not math.isfinite(v):
            g["reasons"].append(f"{cfg.metric} is {v}")
        elif cfg.direction == "min" and v <= 0:
            g["reasons"].append(f"{cfg.metric} is {v} (a latency must be > 0)")
        if not bool(passed[i]):
            g["reasons"].append(f"fails {cfg.correct!r}")
    _check_uniform({k: len(g["values"]) for k, g in grouped.items()}, source)
    configs = {
        k: ConfigResult(
            k,
            g["cls"],
            tuple(g["values"]),
            not g["reasons"],
            tuple(dict.fromkeys(g["reasons"])),
            g["production"],
            g["row"],
            _mean_of(g["means"]),
            _sum_of(g["calls"]),
            _mean_of(g["lasts"]),
        )
        for k, g in grouped.items()
    }
    return Measurement(configs, tuple(config_cols), tuple(class_cols), _timed(df, metric, cfg.calls))


def _column(df: pd.DataFrame, name: str) -> pd.Series | None:
    """A column as numbers (what is not one: NaN), or None when the table has none."""
    import pandas as pd

    return pd.to_numeric(df[name], errors="coerce") if name in df.columns else None


def _cell(column: pd.Series | None, i: Any) -> float:
    """Row i of a `_column` (NaN without the column or where it holds no number)."""
    import pandas as pd

    return math.nan if column is None or pd.isna(column[i]) else float(column[i])


def _check_uniform(rows: dict[str, int], source: str) -> None:
    """Every config as many times as the others (once, or once per repetition): a config
    with more rows than the rest is a duplicated row, one with fewer a missing one."""
    counts = sorted(set(rows.values()), key=lambda n: (-list(rows.values()).count(n), n))
    if len(counts) < 2:
        return
    usual = counts[0]
    odd = sorted(k for k, n in rows.items() if n != usual)
    raise BenchError(
        f"{source}: {_named([f'{k} ({rows[k]} rows)' for k in odd])} where every other config has "
        f"{usual} row(s): one row per config (or as many for each), never duplicates"
    )


def check_shape(best: Measurement, cand: Measurement, source: str = "the candidate's CSV") -> None:
    """The candidate's table has exactly best's configs, each as many rows as best's: an
    extra config, a missing one or a duplicated row is a BenchError naming them (one line)."""
    extra = sorted(set(cand.configs) - set(best.configs))
    missing = sorted(set(best.configs) - set(cand.configs))
    counts = sorted(k for k in set(best.configs) & set(cand.configs) if cand.configs[k].rows != best.configs[k].rows)
    problems = []
    if extra:
        problems.append(f"config(s) best's has not: {_named(extra)}")
    if missing:
        problems.append(f"lacks config(s) {_named(missing)}")
    if counts:
        problems.append(
            "a different number of rows than best's for "
            + _named([f"{k} ({cand.configs[k].rows}, best {best.configs[k].rows})" for k in counts])
        )
    if problems:
        raise BenchError(
            f"{source}: {'; '.join(problems)}: a look's rows must be best's configs, each once "
            "(the bench's output changed shape)"
        )


def paired(
    best: Measurement, cand: Measurement, round_index: int, order: str, source: str = "the candidate's CSV"
) -> list[Pair]:
    """One look's pairs from each side's measurement (`check_shape` first): one per config
    that passed on both sides, with the bench's means and last blocks where it reports them."""
    check_shape(best, cand, source)
    return [
        Pair(
            k,
            b.cls,
            b.value,
            c.value,
            round_index,
            order,
            best_mean=b.mean,
            cand_mean=c.mean,
            best_last=b.last,
            cand_last=c.last,
        )
        for k, b in best.configs.items()
        if b.ok and (c := cand.configs[k]).ok
    ]


def _sum_of(values: list[float]) -> float:
    return math.fsum(values) if values and all(math.isfinite(v) for v in values) else math.nan


def check_same_calls(best: Measurement, cand: Measurement, source: str = "the candidate's look") -> None:
    """A served look's timed calls per config are fixed by the config (docs/files.md, the
    per-tree serve protocol): a candidate whose rows claim another count than best's is a
    BenchError. Inflating its count would shrink the seconds it claims to save below what
    the OS's accounting checks, while its per-call latency still shows the gain. Checked where
    the OS's accounting is the external truth (no GPU): on a GPU the harness times fewer blocks
    of a config whose first block lasts long (harness/timing.py look_blocks), so a faster tree
    times more calls, and the profiler, not the count, is the truth there."""
    differ = sorted(
        k
        for k, b in best.configs.items()
        if k in cand.configs and math.isfinite(b.calls) and cand.configs[k].calls != b.calls
    )
    if differ:
        raise BenchError(
            f"{source}: timed calls differ from best's for "
            + _named([f"{k} ({cand.configs[k].calls:g}, best {best.configs[k].calls:g})" for k in differ])
            + ": a served look's calls are fixed by the config"
        )


def _mean_of(values: list[float]) -> float:
    return statistics.fmean(values) if values and all(math.isfinite(v) for v in values) else math.nan


def _named(items: list[str]) -> str:
    shown = ", ".join(items[:MAX_NAMED])
    return shown + (f" (+{len(items) - MAX_NAMED} more)" if len(items) > MAX_NAMED else "")


def _timed(df: pd.DataFrame, metric: pd.Series, calls_column: str) -> float | None:
    import pandas as pd

    if not calls_column:
        return None
    calls = pd.to_numeric(df[calls_column], errors="coerce")
    total = metric * calls
    if len(total) == 0 or not bool(((metric > 0) & (calls > 0) & total.apply(math.isfinite)).all()):
        return None
    return float(total.sum())


def _evaluate_rule(df: pd.DataFrame, source_expr: str, source: str) -> pd.Series:
    try:
        out: pd.Series = expr.parse(source_expr).eval_rule(df, where=source)
    except KoptFailure:
        raise
    except Exception as exc:  # not a truth value per row, a type error between a column and a constant
        raise BenchError(f"{source}: cannot evaluate {source_expr!r}: {exc}") from None
    return out


def _plain(v: Any) -> Any:
    if hasattr(v, "item"):
        v = v.item()
    return v
