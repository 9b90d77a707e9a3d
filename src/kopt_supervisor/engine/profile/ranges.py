"""kopt's NVTX/roctx range names, and which config a range stands for.

The harness (and a user's bench that wants per-class profiling) wraps each config's timed
and checked calls in a push/pop range named

    kopt:col=value,col=value

with the config's identifying CSV columns, values written as `metrics.format_value` writes
them (`format_value(2048.0)` is "2048"). A bench may name only the columns that identify a
config; the range stands for the config row whose columns match all its pairs. A range
that names a column no config has, matches no row, or matches several is not attributed:
`RangeMatcher.match` says why, and the comparison lists its kernels as unattributed.

Attribution of one profile (`attribute`): every (range, kernel) group of launches goes to
the config its kopt range names, whatever the kernel's name; what no config can claim
(outside any kopt range, in a range naming no single config) is kept apart with the reason.
Per config per kernel the launches' count, total and spread are pooled, which
engine/profile/classes.py turns into each config's time and its variance.

Pure: no files, no subprocesses.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kopt_supervisor.engine.metrics import format_value
from kopt_supervisor.engine.profile.model import KOPT_PREFIX, ProfileSummary


@dataclass(frozen=True)
class ConfigRef:
    """One config of the bench: its key (`col=value,...` over all config columns), its class
    and its row (config column -> value as the bench's CSV gave it)."""

    key: str
    cls: str
    row: Mapping[str, Any]


def config_refs(
    record_configs: Mapping[str, Mapping[str, Any]], class_of: Mapping[str, str] | None = None
) -> list[ConfigRef]:
    """ConfigRefs from the iteration record's `configs` ({key: {"cls", "row", ...}}).

    class_of: config key -> the class it votes in, when the decision's classes differ from
    the record's (`decide.voting_classes`: the guard class of non-production configs), so
    that the profiler's classes are the bench's."""
    return [
        ConfigRef(key, str((class_of or {}).get(key, c["cls"])), dict(c.get("row") or {}))
        for key, c in record_configs.items()
    ]


def range_name(row: Mapping[str, Any], columns: Iterable[str]) -> str:
    """The range name a bench emits for the config `row`, naming `columns` in this order."""
    return KOPT_PREFIX + ",".join(f"{c}={format_value(row[c])}" for c in columns)


def parse_range(name: str, columns: Iterable[str]) -> list[tuple[str, str]]:
    """`kopt:a=1,b=x` -> [("a", "1"), ("b", "x")], knowing the config columns.

    A value may itself hold a comma: a piece that does not start with `<known column>=`
    continues the previous value. ValueError (one line) for a name that is not a kopt range
    name, names no pair, names an unknown column first, or names a column twice."""
    if not name.startswith(KOPT_PREFIX):
        raise ValueError(f"not a kopt range name (no {KOPT_PREFIX!r} prefix)")
    known = set(columns)
    pairs: list[tuple[str, str]] = []
    for piece in name[len(KOPT_PREFIX) :].split(","):
        col, eq, value = piece.partition("=")
        if eq and col in known:
            if any(c == col for c, _ in pairs):
                raise ValueError(f"names column {col!r} twice")
            pairs.append((col, value))
        elif pairs:
            last_col, last_value = pairs[-1]
            pairs[-1] = (last_col, f"{last_value},{piece}")
        elif eq:
            raise ValueError(f"names column {col!r}, which no config has")
        else:
            raise ValueError("names no col=value pair")
    return pairs


class RangeMatcher:
    """Which config a kopt range name stands for, against the bench's configs."""

    def __init__(self, configs: Iterable[ConfigRef]) -> None:
        self.configs = list(configs)
        self.columns = sorted({c for ref in self.configs for c in ref.row})
        self._formatted = [(ref, {c: format_value(v) for c, v in ref.row.items()}) for ref in self.configs]
        self._cache: dict[str, tuple[ConfigRef | None, str]] = {}

    def match(self, name: str) -> tuple[ConfigRef | None, str]:
        """(the config, "") or (None, why the range stands for no single config)."""
        if name not in self._cache:
            self._cache[name] = self._match(name)
        return self._cache[name]

    def _match(self, name: str) -> tuple[ConfigRef | None, str]:
        try:
            pairs = parse_range(name, self.columns)
        except ValueError as exc:
            return None, f"range {name!r} {exc}"
        hits = [ref for ref, row in self._formatted if all(row.get(c) == v for c, v in pairs)]
        if not hits:
            return None, f"range {name!r} matches no config"
        if len(hits) > 1:
            return None, (
                f"range {name!r} matches {len(hits)} configs ({hits[0].key}; {hits[1].key}"
                f"{'; ...' if len(hits) > 2 else ''}): it must name more columns"
            )
        return hits[0], ""


@dataclass
class LaunchTotals:
    """Launches of one kernel pooled: their count, total time and spread."""

    n: int = 0
    total: float = 0.0
    m2: float = 0.0
    """Sum of squared deviations, merged over groups of one kernel (Chan et al.)."""

    def add(self, n: int, total: float, m2: float) -> None:
        if self.n == 0:
            self.n, self.total, self.m2 = n, total, m2
            return
        mean_a, mean_b = self.total / self.n, total / n
        delta = mean_b - mean_a
        self.m2 += m2 + delta * delta * self.n * n / (self.n + n)
        self.n += n
        self.total += total


@dataclass
class AttributedProfile:
    """One profile, attributed: per config per kernel, and what no config can claim."""

    configs: dict[str, dict[str, LaunchTotals]] = field(default_factory=dict)
    openings: dict[str, int] | None = None
    outside: list[tuple[str, int, float, float, str]] = field(default_factory=list)
    """(kernel, calls, total, m2, why)"""
    cv2: float | None = None
    """Pooled relative variance of one launch, from every group launched twice or more."""

    def variance(self, agg: LaunchTotals) -> float:
        if agg.n >= 2:
            return agg.n * agg.m2 / (agg.n - 1)
        mean = agg.total / agg.n if agg.n else 0.0
        return (self.cv2 or 0.0) * mean * mean


def attribute(summary: ProfileSummary, matcher: RangeMatcher) -> AttributedProfile:
    """One profile's launch groups, attributed to configs (and what none can claim)."""
    run = AttributedProfile()
    opened = dict(summary.range_openings) if summary.range_openings is not None else None
    run.openings = {} if opened is not None else None
    counted: set[str] = set()
    rel, dof = 0.0, 0
    for g in summary.ranged:
        if g.calls >= 2 and g.total_ns > 0:
            mean = g.total_ns / g.calls
            rel += g.m2_ns2 / (mean * mean)
            dof += g.calls - 1
        why = g.note
        ref = None
        if not why:
            if not g.range:
                why = "outside any kopt range"
            elif not g.range.startswith(KOPT_PREFIX):
                why = f"innermost range {g.range!r} is not a kopt range"
            else:
                ref, why = matcher.match(g.range)
        if ref is None:
            run.outside.append((g.kernel, g.calls, g.total_ns, g.m2_ns2, why))
            continue
        run.configs.setdefault(ref.key, {}).setdefault(g.kernel, LaunchTotals()).add(g.calls, g.total_ns, g.m2_ns2)
        if opened is not None and run.openings is not None and g.range not in counted:
            counted.add(g.range)
            run.openings[ref.key] = run.openings.get(ref.key, 0) + opened.get(g.range, 0)
    run.cv2 = rel / dof if dof else None
    return run
