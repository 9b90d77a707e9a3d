"""Reading a benchmark's CSV: config columns, config classes, correctness, one value per config.

A bench run writes a table with one row per config (or several rows per config: they are
samples of the same run, summarised by their median). The rules of kopt.toml's [target]
turn it into a `Measurement`: per config its class, its value, and whether it passed the
correctness rule (NaN/Inf or a missing metric always fail). A broken file (no CSV, empty,
malformed, a missing column) is a `BenchError` whose one-line message names the file and
column. The ab_command's table (rows per side and block) becomes paired samples.

Pure: text in, tables and measurements out (engine/bench_output.py finds and reads the file).
"""

from __future__ import annotations

import io
import math
import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from kopt_supervisor.engine import expr
from kopt_supervisor.engine.config import TargetConfig
from kopt_supervisor.engine.decide import Pair
from kopt_supervisor.engine.errors import KoptFailure

AB_COLUMNS = ("side", "block")


class BenchError(KoptFailure):
    """The bench produced nothing comparable (status fail_bench)."""


@dataclass(frozen=True)
class ConfigResult:
    key: str
    cls: str
    values: tuple[float, ...]
    ok: bool
    reasons: tuple[str, ...] = ()
    production: bool = True
    row: dict[str, Any] = field(default_factory=dict)

    @property
    def value(self) -> float:
        finite = [v for v in self.values if math.isfinite(v)]
        return statistics.median(finite) if finite else math.nan


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


def key_of(row: dict[str, Any], columns: Iterable[str]) -> str:
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


def resolve_columns(df: pd.DataFrame, cfg: TargetConfig, source: str) -> tuple[list[str], list[str]]:
    """(config columns, class columns) for this table, checked against kopt.toml."""
    cols = list(df.columns)
    if cfg.metric not in cols:
        raise BenchError(f"{source}: metric column {cfg.metric!r} missing (columns: {', '.join(cols)})")
    if cfg.calls and cfg.calls not in cols:
        raise BenchError(f"{source}: calls column {cfg.calls!r} missing (columns: {', '.join(cols)})")
    used = {cfg.metric, *AB_COLUMNS, *cfg.ignore, *filter(None, [cfg.calls])}
    if cfg.correct:
        used |= expr.parse(cfg.correct).names
    if cfg.config is not None:
        config_cols = list(cfg.config)
    else:
        config_cols = [c for c in cols if c not in used]
    missing = [c for c in config_cols if c not in cols]
    if missing:
        raise BenchError(f"{source}: config column {missing[0]!r} missing (columns: {', '.join(cols)})")
    class_cols = list(cfg.class_by) if cfg.class_by is not None else config_cols
    missing = [c for c in class_cols if c not in cols]
    if missing:
        raise BenchError(f"{source}: class_by column {missing[0]!r} missing (columns: {', '.join(cols)})")
    if not config_cols:
        config_cols = []
    return config_cols, class_cols


def measure(df: pd.DataFrame, cfg: TargetConfig, source: str = "CSV") -> Measurement:
    config_cols, class_cols = resolve_columns(df, cfg, source)
    metric = pd.to_numeric(df[cfg.metric], errors="coerce")
    passed = _evaluate_rule(df, cfg.correct, source) if cfg.correct else pd.Series(True, index=df.index)
    production = _evaluate_rule(df, cfg.production, source) if cfg.production else pd.Series(True, index=df.index)

    grouped: dict[str, dict[str, Any]] = {}
    for i, raw in df.iterrows():
        row = {c: raw[c] for c in config_cols}
        key = key_of(row, config_cols) if config_cols else "all"
        g = grouped.setdefault(
            key,
            {"cls": key_of(raw, class_cols) if class_cols else "all", "values": [], "reasons": [],
             "production": bool(production[i]), "row": {c: _plain(v) for c, v in row.items()}},
        )
        v = float(metric[i]) if not pd.isna(metric[i]) else math.nan
        g["values"].append(v)
        if pd.isna(metric[i]):
            g["reasons"].append(f"{cfg.metric} missing or not a number ({raw[cfg.metric]!r})")
        elif not math.isfinite(v):
            g["reasons"].append(f"{cfg.metric} is {v}")
        elif cfg.direction == "min" and v <= 0:
            g["reasons"].append(f"{cfg.metric} is {v} (a latency must be > 0)")
        if not bool(passed[i]):
            g["reasons"].append(f"fails {cfg.correct!r}")
    configs = {
        k: ConfigResult(k, g["cls"], tuple(g["values"]), not g["reasons"], tuple(dict.fromkeys(g["reasons"])),
                        g["production"], g["row"])
        for k, g in grouped.items()
    }
    return Measurement(configs, tuple(config_cols), tuple(class_cols), _timed(df, metric, cfg.calls))


def _timed(df: pd.DataFrame, metric: pd.Series, calls_column: str) -> float | None:
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



# ---------------------------------------------------------------------------------------
# ab_command tables


def ab_pairs(df: pd.DataFrame, cfg: TargetConfig, round_index: int, source: str = "CSV") -> tuple[list[Pair], Measurement, Measurement]:
    """Paired samples from an ab_command table, plus each side's measurement (for the
    correctness check). Rows pair up by (config, block)."""
    for col in AB_COLUMNS:
        if col not in df.columns:
            raise BenchError(f"{source}: ab_command output lacks column {col!r}")
    sides = {s: df[df["side"].astype(str).str.strip() == s] for s in ("best", "cand")}
    for s, part in sides.items():
        if part.empty:
            raise BenchError(f"{source}: ab_command output has no rows with side == {s!r}")
    best_m = measure(sides["best"].reset_index(drop=True), cfg, source)
    cand_m = measure(sides["cand"].reset_index(drop=True), cfg, source)
    config_cols = list(best_m.config_columns)
    pairs: list[Pair] = []
    index: dict[tuple[str, int], dict[str, float]] = {}
    for side, part in sides.items():
        metric = pd.to_numeric(part[cfg.metric], errors="coerce")
        for i, raw in part.iterrows():
            key = key_of(raw, config_cols) if config_cols else "all"
            index.setdefault((key, int(raw["block"])), {})[side] = float(metric[i])
    first_side: dict[tuple[str, int], str] = {}
    for _, raw in df.iterrows():
        key = key_of(raw, config_cols) if config_cols else "all"
        first_side.setdefault((key, int(raw["block"])), str(raw["side"]).strip())
    for (key, block), vals in sorted(index.items()):
        if "best" in vals and "cand" in vals and key in best_m.configs:
            b, c = vals["best"], vals["cand"]
            if math.isfinite(b) and math.isfinite(c) and b > 0 and c > 0:
                order = "AB" if first_side.get((key, block)) == "best" else "BA"
                pairs.append(Pair(key, best_m.configs[key].cls, b, c, round_index, order, block))
    if not pairs:
        raise BenchError(f"{source}: ab_command output has no complete (best, cand) pairs")
    return pairs, best_m, cand_m

