"""kopt's own correctness check of a served look (docs/files.md, "The per-tree serve
protocol"): after both trees answered a look, kopt draws an audit seed and each side
summarises the outputs of one timed call per config, the buffer set and the positions
picked by that seed. This module holds the rule both kopt and the harness implement
(`choices`), reads a side's audit file (`parse`), checks a summary against the rule
(`rule_problem`) and the candidate's summary against best's (`compare`).

The candidate's outputs are never trusted to its own process's check: every sampled value
within BEST's tolerance of best's, as many NaN/Inf as best at most, and the float64 sums
within what the per-sample tolerance allows over the whole output.

Pure: text and numbers in, one-line problems out.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kopt_supervisor.engine.metrics import BenchError, key_of

VERSION = 1
SAMPLES = 64
"""Positions sampled per output tensor (fewer when it holds fewer elements)."""


@dataclass(frozen=True)
class OutputSummary:
    """One output tensor of the audited call, as the harness summarised it."""

    numel: int
    nan: int
    inf: int
    sum: float
    abs_sum: float
    samples: tuple[tuple[int, float], ...]
    """(flat index, value) at the positions the seed picked, in order."""


@dataclass(frozen=True)
class ConfigAudit:
    """One config's audited call."""

    config: tuple[tuple[str, Any], ...]
    """The config's columns and values, as the file names them."""
    sets: int
    """S: how many timed buffer sets the config rotates through."""
    set: int
    """The set whose last timed call's outputs are summarised."""
    atol: float
    rtol: float
    outputs: tuple[OutputSummary, ...]


def choices(seed: int, key: str, sets: int, numels: Sequence[int]) -> tuple[int, tuple[tuple[int, ...], ...]]:
    """The rule: (the audited set, the sampled positions per output) for the config named
    `key` (`config_key`) under the audit `seed`."""
    rng = random.Random(f"{seed}/{key}")
    chosen = rng.randrange(sets)
    positions = tuple(tuple(sorted(rng.randrange(n) for _ in range(min(SAMPLES, n)))) for n in numels)
    return chosen, positions


def config_key(row: Mapping[str, Any], columns: Sequence[str]) -> str:
    """The config's name in the rule: its columns as `col=value,...` in the CSV's column
    order, values written as metrics.format_value writes them (an integral float as an
    integer)."""
    return key_of(row, columns)


def parse(text: str, columns: Sequence[str], source: str) -> dict[str, ConfigAudit]:
    """A side's audit file, keyed by the config's key over `columns` (kopt's config
    columns). A file that is not the protocol's JSON, a config twice or one lacking a
    column is a BenchError naming `source`."""
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise BenchError(f"{source}: not JSON: {exc}") from None
    if not isinstance(data, dict) or data.get("version") != VERSION or not isinstance(data.get("configs"), list):
        raise BenchError(f"{source}: not an audit of version {VERSION} ({{\"version\": 1, \"configs\": [...]}})")
    out: dict[str, ConfigAudit] = {}
    for n, entry in enumerate(data["configs"]):
        where = f"{source}: configs[{n}]"
        audit = _config(entry, where)
        names = dict(audit.config)
        missing = [c for c in columns if c not in names]
        if missing:
            raise BenchError(f"{where}: config lacks column {missing[0]!r}")
        key = key_of(names, columns)
        if key in out:
            raise BenchError(f"{where}: config {key} audited twice")
        out[key] = audit
    return out


def rule_problem(audit: ConfigAudit, seed: int, key: str) -> str | None:
    """What in `audit` does not follow the rule for `seed` (the set, the positions), or None."""
    chosen, positions = choices(seed, key, audit.sets, [o.numel for o in audit.outputs])
    if audit.set != chosen:
        return f"the audit summarised buffer set {audit.set}, the seed picks set {chosen} of {audit.sets}"
    for j, (out, want) in enumerate(zip(audit.outputs, positions, strict=True)):
        got = tuple(i for i, _ in out.samples)
        if got != want:
            k = next((n for n, (a, b) in enumerate(zip(got, want, strict=False)) if a != b), min(len(got), len(want)))
            return (f"output {j}: the audit sampled position {got[k] if k < len(got) else 'none'} where the seed "
                    f"picks {want[k] if k < len(want) else 'none'} ({len(got)} samples, the seed picks {len(want)})")
    return None


def compare(best: ConfigAudit, cand: ConfigAudit) -> str | None:
    """The candidate's audited outputs against best's, with BEST's tolerance: the first
    difference as one line (None: they agree)."""
    if cand.sets != best.sets:
        return f"the audit shows {cand.sets} timed buffer sets, best's {best.sets}"
    if len(cand.outputs) != len(best.outputs):
        return f"the audit shows {len(cand.outputs)} output tensor(s), best's {len(best.outputs)}"
    atol, rtol = best.atol, best.rtol
    where = f"audited timed call (set {best.set})"
    for j, (b, c) in enumerate(zip(best.outputs, cand.outputs, strict=True)):
        if c.numel != b.numel:
            return f"{where}: output {j} holds {c.numel} elements, best's {b.numel}"
        for what, count, most in (("NaN", c.nan, b.nan), ("Inf", c.inf, b.inf)):
            if count > most:
                return f"{where}: output {j} holds {count} {what} value(s), best's {most}"
        if [i for i, _ in c.samples] != [i for i, _ in b.samples]:
            return f"{where}: output {j} was sampled at other positions than best's"
        for (i, cv), (_, bv) in zip(c.samples, b.samples, strict=True):
            if not _close(cv, bv, atol + rtol * abs(bv)):
                return (f"{where}: output {j}[{i}] is {cv!r}, best's {bv!r} "
                        f"(tolerance {atol + rtol * abs(bv):.3g}: atol {atol:g}, rtol {rtol:g})")
        bound = b.numel * atol + rtol * b.abs_sum if math.isfinite(b.abs_sum) else 0.0
        for what, got, ref in (("sum", c.sum, b.sum), ("sum of |x|", c.abs_sum, b.abs_sum)):
            if not _close(got, ref, bound):
                return f"{where}: output {j}'s {what} is {got!r}, best's {ref!r} (tolerance {bound:.3g})"
    return None


def _close(got: float, ref: float, tolerance: float) -> bool:
    """Within `tolerance` of a finite `ref`; a non-finite `ref` only matched by the same."""
    if not math.isfinite(ref):
        return got == ref or (math.isnan(ref) and math.isnan(got))
    return math.isfinite(got) and abs(got - ref) <= tolerance


# ---------------------------------------------------------------------------------------
# Reading the file


def _config(entry: Any, where: str) -> ConfigAudit:
    if not isinstance(entry, dict):
        raise BenchError(f"{where}: not an object")
    config = entry.get("config")
    if not isinstance(config, dict) or not all(isinstance(v, str | int | float) for v in config.values()):
        raise BenchError(f"{where}: 'config' must map columns to values")
    sets = _int(entry, "sets", where, minimum=1)
    chosen = _int(entry, "set", where)
    if chosen >= sets:
        raise BenchError(f"{where}: set {chosen} is not one of its {sets} sets")
    atol, rtol = _number(entry, "atol", where), _number(entry, "rtol", where)
    if not (math.isfinite(atol) and math.isfinite(rtol) and atol >= 0 and rtol >= 0):
        raise BenchError(f"{where}: atol and rtol must be finite and >= 0, not {atol!r}, {rtol!r}")
    outputs = entry.get("outputs")
    if not isinstance(outputs, list) or not outputs:
        raise BenchError(f"{where}: 'outputs' must list the output tensors")
    return ConfigAudit(tuple((str(k), v) for k, v in config.items()), sets, chosen, atol, rtol,
                       tuple(_output(o, f"{where}.outputs[{j}]") for j, o in enumerate(outputs)))


def _output(o: Any, where: str) -> OutputSummary:
    if not isinstance(o, dict):
        raise BenchError(f"{where}: not an object")
    numel = _int(o, "numel", where)
    samples = o.get("samples")
    if not isinstance(samples, list) or not all(
            isinstance(s, list) and len(s) == 2 and _is_int(s[0]) and _is_number(s[1]) for s in samples):
        raise BenchError(f"{where}: 'samples' must list [flat_index, value] pairs")
    return OutputSummary(numel, _int(o, "nan", where), _int(o, "inf", where), _number(o, "sum", where),
                         _number(o, "abs_sum", where), tuple((int(i), float(v)) for i, v in samples))


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _int(d: dict[str, Any], key: str, where: str, minimum: int = 0) -> int:
    v = d.get(key)
    if not isinstance(v, int) or isinstance(v, bool) or v < minimum:
        raise BenchError(f"{where}: {key!r} must be an integer >= {minimum}, not {v!r}")
    return v


def _number(d: dict[str, Any], key: str, where: str) -> float:
    v = d.get(key)
    if not isinstance(v, int | float) or isinstance(v, bool):
        raise BenchError(f"{where}: {key!r} must be a number, not {v!r}")
    return float(v)
