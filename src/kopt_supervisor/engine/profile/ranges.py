"""kopt's NVTX/roctx range names, and which config a range stands for.

The harness (and a user's bench that wants per-class profiling) wraps each config's timed
and checked calls in a push/pop range named

    kopt:col=value,col=value

with the config's identifying CSV columns, values written as `metrics.format_value` writes
them (`format_value(2048.0)` is "2048"). A bench may name only the columns that identify a
config; the range stands for the config row whose columns match all its pairs. A range
that names a column no config has, matches no row, or matches several is not attributed:
`RangeMatcher.match` says why, and the comparison lists its kernels as unattributed.

Pure: no files, no subprocesses.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kopt_supervisor.engine.metrics import format_value
from kopt_supervisor.engine.profile.model import KOPT_PREFIX


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
