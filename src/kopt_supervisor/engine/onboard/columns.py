"""What each column of a bench's table is: a config, a metric, a statistic, a correctness
column, or an extra, and why.

Read from the column's name (its words and unit: `time (us)`, `latency[ms]`, `triton_ms`,
`max_abs_err`, `passed`), its values (numbers or text, integers or not, all zero), and what
the table's format says (a perf_report line, pytest-benchmark's stats, Google Benchmark's
real/cpu time). Every classification carries its reason, which the proposed kopt.toml
repeats in a comment.

Pure.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import pandas as pd

from kopt_supervisor.engine.adapters.model import RATE, TIME, ColumnUnit, Table, column_unit

CONFIG, METRIC, SPREAD, ERROR, FLAG, PRODUCTION, EXTRA = (
    "config",
    "metric",
    "spread",
    "error",
    "flag",
    "production",
    "extra",
)

ERROR_WORDS = {
    "err",
    "error",
    "errors",
    "diff",
    "difference",
    "maxerr",
    "max_err",
    "abs_err",
    "rel_err",
    "mae",
    "mse",
    "rmse",
    "deviation",
    "mismatch",
    "mismatches",
    "nan_count",
    "nans",
    "infs",
    "ulp",
    "ulps",
    "residual",
    "atol",
    "rtol",
    "delta",
}
FLAG_WORDS = {
    "pass",
    "passed",
    "passes",
    "ok",
    "correct",
    "valid",
    "verified",
    "match",
    "matches",
    "allclose",
    "success",
    "succeeded",
    "check",
    "checked",
    "equal",
    "close",
}
BAD_FLAG_WORDS = {"fail", "failed", "fails", "failure", "failures", "wrong", "invalid", "incorrect"}
SPREAD_WORDS = {
    "std",
    "stddev",
    "stdev",
    "sd",
    "var",
    "variance",
    "iqr",
    "cv",
    "q1",
    "q3",
    "ci",
    "ci95",
    "lo",
    "hi",
    "lower",
    "upper",
    "samples",
    "rounds",
    "iterations",
    "iters",
    "reps",
    "repeats",
    "repetitions",
    "runs",
    "warmup",
    "stderr",
    "sem",
}
STATISTICS = ("median", "p50", "mean", "avg", "average", "min", "max")
EXTRA_WORDS = {
    "seed",
    "run",
    "trial",
    "timestamp",
    "date",
    "host",
    "hostname",
    "device",
    "gpu",
    "commit",
    "version",
    "pid",
    "note",
    "notes",
    "comment",
    "speedup",
    "ratio",
    "pct",
    "percent",
    "util",
    "utilization",
    "occupancy",
    "efficiency",
    "label",
    "message",
    "msg",
    "status_message",
    "repetition",
    "repetition_index",
    "index",
    "idx",
    "iteration",
}
HARDWARE_WORDS = {"gpu", "host", "hostname", "device", "node", "machine", "arch", "sm"}
"""A text column naming the hardware a row ran on (`gpu_name`, `host`): a config column, so
rows measured on different GPUs or hosts are never merged as samples of one config."""
REFERENCE_WORDS = {
    "huggingface",
    "hf",
    "transformers",
    "apex",
    "xformers",
    "torch",
    "pytorch",
    "eager",
    "ref",
    "reference",
    "baseline",
    "cublas",
    "cublaslt",
    "cudnn",
    "naive",
    "aten",
    "inductor",
    "compile",
    "compiled",
    "numpy",
    "np",
    "rocblas",
    "hipblas",
    "miopen",
    "native",
    "vendor",
    "library",
    "original",
    "old",
}
PRODUCTION_NAMES = {"prod", "production", "is_prod", "is_production"}
TRUE_WORDS = {"true", "1", "yes", "y", "pass", "passed", "ok", "correct", "valid", "success", "match"}
FALSE_WORDS = {"false", "0", "no", "n", "fail", "failed", "wrong", "invalid", "error", "mismatch", "nan"}


def words(name: str) -> list[str]:
    """The lower-case words of a column name (`maxAbsErr` -> max, abs, err; `time (us)` -> time, us)."""
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", str(name))
    return [w for w in re.split(r"[^A-Za-z0-9%]+", spaced.lower()) if w]


@dataclass(frozen=True)
class Column:
    name: str
    role: str
    why: str
    numeric: bool
    integral: bool
    distinct: int
    unit: ColumnUnit
    statistic: str = ""
    """For a metric: median, mean, min, max... ("" when the name names none)."""
    reference: bool = False
    """A metric whose name says it times a reference implementation (torch_ms, cuBLAS (TFLOPS))."""
    all_zero: bool = False
    values: tuple[object, ...] = ()

    @property
    def kind(self) -> str:
        return self.unit.kind

    @property
    def identifier(self) -> bool:
        """Can a kopt.toml expression name it? (a Python identifier)"""
        return self.name.isidentifier()


def _numeric(s: pd.Series) -> pd.Series | None:
    if pd.api.types.is_bool_dtype(s):
        return s.astype(int)
    conv = pd.to_numeric(s, errors="coerce")
    present = s.notna() & (s.astype(str).str.strip() != "")
    if present.any() and conv[present].notna().all():
        return conv
    return None


def is_flag_values(s: pd.Series) -> bool:
    vals = {str(v).strip().lower() for v in s.dropna()}
    return bool(vals) and vals <= TRUE_WORDS | FALSE_WORDS and len(vals) <= 2


def classify(table: Table) -> list[Column]:
    """Every column of the table with its role and reason."""
    out = []
    for name in table.columns:
        out.append(classify_column(table, name))
    return out


def classify_column(table: Table, name: str) -> Column:
    s = table.frame[name]
    num = _numeric(s)
    numeric = num is not None
    finite = [float(v) for v in (num if num is not None else []) if isinstance(v, int | float) and math.isfinite(v)]
    integral = numeric and all(float(v).is_integer() for v in finite) and bool(finite)
    distinct = int(s.nunique(dropna=True))
    unit = column_unit(name)
    if name in table.units and table.units[name]:
        u = column_unit(f"x ({table.units[name]})")
        unit = ColumnUnit(name, u.unit, u.kind or unit.kind)
    w = set(words(name))
    sample = tuple(s.dropna().head(4).tolist())
    all_zero = numeric and bool(finite) and all(v == 0 for v in finite) and len(finite) == len(s.dropna())

    def col(role: str, why: str, **kw: object) -> Column:
        return Column(name, role, why, numeric, integral, distinct, unit, values=sample, all_zero=all_zero, **kw)  # type: ignore[arg-type]  # the keywords are Column's own optional fields

    statistic = next((st for st in STATISTICS if st in w), "")
    reference = bool(w & REFERENCE_WORDS)
    if name in table.correctness:
        return col(FLAG, f"the {table.format} format's error column")
    if name in table.config:
        return col(CONFIG, f"a config column of the {table.format} format")
    if name in table.metrics:
        return col(
            METRIC,
            f"a measurement of the {table.format} format" + (f" in {unit.unit}" if unit.unit else ""),
            statistic=statistic,
            reference=reference,
        )
    if name.lower() in PRODUCTION_NAMES and numeric:
        return col(PRODUCTION, "marks the production rows")
    if w & FLAG_WORDS and is_flag_values(s):
        return col(FLAG, f"a pass/fail column (values {', '.join(sorted({str(v) for v in s.dropna()}))})")
    if w & BAD_FLAG_WORDS and (is_flag_values(s) or numeric):
        return col(FLAG, "a failure flag or count (it must stay false / zero)")
    if w & ERROR_WORDS and numeric and unit.kind != TIME:
        return col(ERROR, "an error magnitude (its name: " + ", ".join(sorted(w & ERROR_WORDS)) + ")")
    if unit.kind in (TIME, RATE) and numeric:
        if w & SPREAD_WORDS:
            return col(SPREAD, f"a spread or count of a measurement ({', '.join(sorted(w & SPREAD_WORDS))}), not one")
        what = "a time" if unit.kind == TIME else "a rate"
        unit_text = f" in {unit.unit}" if unit.unit else " (unit not named: kopt cannot tell which)"
        return col(METRIC, f"{what}{unit_text}", statistic=statistic, reference=reference)
    if w & HARDWARE_WORDS and not numeric and distinct:
        return col(
            CONFIG,
            "the hardware the row ran on: rows of different GPUs or hosts are different configs, never samples of one",
        )
    if w & EXTRA_WORDS or (w & SPREAD_WORDS and numeric):
        return col(EXTRA, "bookkeeping, not a config: " + ", ".join(sorted(w & (EXTRA_WORDS | SPREAD_WORDS))))
    if not numeric:
        return col(CONFIG, "text: a config column" + (f" ({distinct} values)" if distinct else ""))
    if integral:
        return col(CONFIG, f"whole numbers: a dimension ({distinct} values)")
    return col(EXTRA, "a fractional number that is neither named a time nor a rate: an extra statistic")


def dtype_like(c: Column) -> bool:
    """A column holding dtypes (its name, or values such as float16, bf16, fp32, int8)."""
    if set(words(c.name)) & {"dtype", "precision", "type", "datatype"}:
        return True
    vals = {str(v).lower() for v in c.values}
    return bool(vals) and all(
        re.fullmatch(r"(torch\.)?(b?float\d+|bf16|fp\d+|int\d+|uint\d+|half|float|double|e4m3|e5m2|float8\w*)", v)
        for v in vals
    )
