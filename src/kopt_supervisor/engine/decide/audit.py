"""kopt's own correctness check of a served look (docs/files.md, "The per-tree serve
protocol"): after both trees answered a look, kopt draws an audit seed and each side
summarises the outputs of one timed call per config, the buffer set and the positions
picked by that seed. This module holds the rule both kopt and the harness implement
(`choices`), reads a side's audit file (`parse`), checks a summary against the rule
(`rule_problem`) and the candidate's summary against best's (`compare`).

The commitment: with each look, before kopt draws the audit seed, each side writes the
summaries (no samples) of every timed set's outputs (`PATH.sets.json`, `parse_commitment`).
kopt compares the candidate's with best's set by set (`compare_sets`), and the audited set's
summary with what its side committed to (`commitment_problem`). So a process cannot compute
the outputs of the one set the audit seed picks once it knows the seed: every set's outputs
had to exist, right, before the seed was drawn (and the work of computing them is in the
look, where the OS's accounting and the profiler's outside-ranges time see it).

The candidate's outputs are never trusted to its own process's check: every sampled value
within BEST's tolerance of best's, as many NaN/Inf as best at most, and the float64 sums
within what the per-sample tolerance allows over the whole output.

Pure: text and numbers in, one-line problems out.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from kopt_supervisor.engine.metrics import BenchError, key_of

T = TypeVar("T")
VERSION = 1
SAMPLES = 64
COMMITMENT_SUFFIX = ".sets.json"
"""The look's commitment is written beside its CSV: `PATH` + this suffix."""
SAME_SUM_RTOL = 1e-9
"""How far an audited set's float64 sums may be from the ones its side committed to: the same
values summed by another reduction (a batch of sets at once) round differently, by ~1e-16
of the sum of |x| per element; anything a candidate could gain by is far above this."""
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
    calls: int | None = None
    """A profile's outputs file: the calls the config made (kopt's harness says; None: not said)."""


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

    def build(entry: Any, where: str) -> tuple[Mapping[str, Any], ConfigAudit]:
        audit = _config(entry, where)
        return dict(audit.config), audit

    return _by_config(text, columns, source, "an audit", "audited", build)


def parse_commitment(
    text: str, columns: Sequence[str], source: str
) -> dict[str, tuple[tuple[OutputSummary, ...], ...]]:
    """A side's commitment file, keyed like `parse`: per config, per timed set, its output
    summaries (samples empty). Not the protocol's JSON, a config twice or without a column, a
    set without outputs: a BenchError naming `source`."""

    def build(entry: Any, where: str) -> tuple[Mapping[str, Any], tuple[tuple[OutputSummary, ...], ...]]:
        if not isinstance(entry, dict) or not isinstance(entry.get("config"), dict):
            raise BenchError(f"{where}: 'config' must map columns to values")
        sets = entry.get("sets")
        if not isinstance(sets, list) or not sets or not all(isinstance(x, list) and x for x in sets):
            raise BenchError(f"{where}: 'sets' must list each timed set's output summaries")
        return entry["config"], tuple(
            tuple(_sums(o, f"{where}.sets[{i}][{j}]") for j, o in enumerate(x)) for i, x in enumerate(sets)
        )

    return _by_config(text, columns, source, "a commitment", "committed", build)


def _by_config(
    text: str,
    columns: Sequence[str],
    source: str,
    what: str,
    verb: str,
    build: Callable[[Any, str], tuple[Mapping[str, Any], T]],
) -> dict[str, T]:
    """The protocol's envelope (`{"version": 1, "configs": [...]}`) read, each entry built
    and keyed by its config over `columns`: a config lacking a column or there twice is a
    BenchError naming `source`."""
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise BenchError(f"{source}: not JSON: {exc}") from None
    if not isinstance(data, dict) or data.get("version") != VERSION or not isinstance(data.get("configs"), list):
        raise BenchError(f'{source}: not {what} of version {VERSION} ({{"version": 1, "configs": [...]}})')
    out: dict[str, T] = {}
    for n, entry in enumerate(data["configs"]):
        where = f"{source}: configs[{n}]"
        names, value = build(entry, where)
        missing = [c for c in columns if c not in names]
        if missing:
            raise BenchError(f"{where}: config lacks column {missing[0]!r}")
        key = key_of(names, columns)
        if key in out:
            raise BenchError(f"{where}: config {key} {verb} twice")
        out[key] = value
    return out


def compare_sets(
    best: tuple[tuple[OutputSummary, ...], ...], cand: tuple[tuple[OutputSummary, ...], ...], atol: float, rtol: float
) -> str | None:
    """The candidate's committed outputs against best's, set by set, with BEST's tolerance
    (the sums' rule of `compare`): the first difference as one line (None: they agree)."""
    if len(cand) != len(best):
        return f"the look's commitment lists {len(cand)} timed buffer sets, best's {len(best)}"
    for i, (bs, cs) in enumerate(zip(best, cand, strict=True)):
        if len(cs) != len(bs):
            return f"timed set {i}: {len(cs)} output tensor(s) committed, best's {len(bs)}"
        for j, (b, c) in enumerate(zip(bs, cs, strict=True)):
            where = f"timed set {i} (committed with the look)"
            why = _counts_problem(where, j, b, c) or _sums_problem(where, j, b, c, atol, rtol)
            if why:
                return why
    return None


def commitment_problem(audit: ConfigAudit, committed: tuple[tuple[OutputSummary, ...], ...]) -> str | None:
    """The audited set's summary against what its side committed to for that set before the
    audit seed was drawn (None: the same outputs)."""
    if len(committed) != audit.sets:
        return f"the audit shows {audit.sets} timed buffer sets, the look committed {len(committed)}"
    promised = committed[audit.set]
    if len(promised) != len(audit.outputs):
        return f"set {audit.set}: the audit shows {len(audit.outputs)} output tensor(s), the look committed {len(promised)}"
    for j, (c, a) in enumerate(zip(promised, audit.outputs, strict=True)):
        if (a.numel, a.nan, a.inf) != (c.numel, c.nan, c.inf):
            return (
                f"set {audit.set}, output {j}: the audit shows {a.numel} elements, {a.nan} NaN, {a.inf} Inf; "
                f"the look committed {c.numel}, {c.nan}, {c.inf}"
            )
        slack = SAME_SUM_RTOL * max(abs(c.abs_sum), 1.0) if math.isfinite(c.abs_sum) else 0.0
        for what, got, ref in (("sum", a.sum, c.sum), ("sum of |x|", a.abs_sum, c.abs_sum)):
            if not _close(got, ref, slack):
                return (
                    f"set {audit.set}, output {j}: the audited {what} is {got!r}, the look committed {ref!r} "
                    "(outputs changed after the look)"
                )
    return None


Committed = tuple[tuple[OutputSummary, ...], ...]
"""A config's commitment: per timed set, its outputs' summaries."""


def best_problem(
    audits: Mapping[str, ConfigAudit], commits: Mapping[str, Committed], rule_keys: Mapping[str, str], seed: int
) -> tuple[str, str] | None:
    """(config, why) of best's first config whose audit breaks the rule or its commitment
    (best's code is kept code: its bench is broken); `rule_keys`: config -> `config_key`."""
    for key, rule_key in rule_keys.items():
        why = rule_problem(audits[key], seed, rule_key) or commitment_problem(audits[key], commits[key])
        if why:
            return key, why
    return None


def candidate_problems(
    best: tuple[Mapping[str, ConfigAudit], Mapping[str, Committed]],
    cand: tuple[Mapping[str, ConfigAudit], Mapping[str, Committed]],
    rule_keys: Mapping[str, str],
    seed: int,
) -> dict[str, str]:
    """config -> why, for each of the candidate's configs whose audit breaks the rule, differs
    from what it committed to, or whose committed outputs or audit differ from best's ((audits,
    commitments) of each side)."""
    out = {}
    for key, rule_key in rule_keys.items():
        b, c = best[0][key], cand[0][key]
        why = (
            rule_problem(c, seed, rule_key)
            or commitment_problem(c, cand[1][key])
            or compare(b, c)
            or compare_sets(best[1][key], cand[1][key], b.atol, b.rtol)
        )
        if why:
            out[key] = why
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
            return (
                f"output {j}: the audit sampled position {got[k] if k < len(got) else 'none'} where the seed "
                f"picks {want[k] if k < len(want) else 'none'} ({len(got)} samples, the seed picks {len(want)})"
            )
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
        counts = _counts_problem(where, j, b, c)
        if counts:
            return counts
        if [i for i, _ in c.samples] != [i for i, _ in b.samples]:
            return f"{where}: output {j} was sampled at other positions than best's"
        for (i, cv), (_, bv) in zip(c.samples, b.samples, strict=True):
            if not _close(cv, bv, atol + rtol * abs(bv)):
                return (
                    f"{where}: output {j}[{i}] is {cv!r}, best's {bv!r} "
                    f"(tolerance {atol + rtol * abs(bv):.3g}: atol {atol:g}, rtol {rtol:g})"
                )
        why = _sums_problem(where, j, b, c, atol, rtol)
        if why:
            return why
    return None


def _counts_problem(where: str, j: int, b: OutputSummary, c: OutputSummary) -> str | None:
    """One output's element count and NaN/Inf counts against best's."""
    if c.numel != b.numel:
        return f"{where}: output {j} holds {c.numel} elements, best's {b.numel}"
    for what, count, most in (("NaN", c.nan, b.nan), ("Inf", c.inf, b.inf)):
        if count > most:
            return f"{where}: output {j} holds {count} {what} value(s), best's {most}"
    return None


def _sums_problem(where: str, j: int, b: OutputSummary, c: OutputSummary, atol: float, rtol: float) -> str | None:
    """One output's float64 sums against best's, within what the per-element tolerance allows."""
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
    return ConfigAudit(
        tuple((str(k), v) for k, v in config.items()),
        sets,
        chosen,
        atol,
        rtol,
        tuple(_output(o, f"{where}.outputs[{j}]") for j, o in enumerate(outputs)),
        _int(entry, "calls", where, minimum=1) if "calls" in entry else None,
    )


def _output(o: Any, where: str) -> OutputSummary:
    if not isinstance(o, dict):
        raise BenchError(f"{where}: not an object")
    numel = _int(o, "numel", where)
    samples = o.get("samples")
    if not isinstance(samples, list) or not all(
        isinstance(s, list) and len(s) == 2 and _is_int(s[0]) and _is_number(s[1]) for s in samples
    ):
        raise BenchError(f"{where}: 'samples' must list [flat_index, value] pairs")
    return OutputSummary(
        numel,
        _int(o, "nan", where),
        _int(o, "inf", where),
        _number(o, "sum", where),
        _number(o, "abs_sum", where),
        tuple((int(i), float(v)) for i, v in samples),
    )


def _sums(o: Any, where: str) -> OutputSummary:
    if not isinstance(o, dict):
        raise BenchError(f"{where}: not an object")
    return OutputSummary(
        _int(o, "numel", where),
        _int(o, "nan", where),
        _int(o, "inf", where),
        _number(o, "sum", where),
        _number(o, "abs_sum", where),
        (),
    )


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
