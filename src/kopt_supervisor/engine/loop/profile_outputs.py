"""The candidate's outputs under the profiler against best's (docs/security.md, "The outputs
under the profiler"): a tree that does less work, or wrong work, only while it is profiled
would otherwise have the profiler's kernel time agree with a patched timer.

Both trees' profiles draw the same inputs (KOPT_PROFILE_SEED) and the harness summarises each
config's last output into `<profile folder>/outputs.json` (KOPT_PROFILE_OUTPUTS, the audit's
JSON). `compare` reads both files as any file a sandbox wrote (never through a link, never
blocking, bounded: sandbox.read_output) and compares them with decide/audit.compare.

    compare(best_dir, cand_dir, columns=..., configs=..., earlier=[records]) ->
        {"checked": n, "tolerance": {...}}   they agree
        {"checked": 0, "note": ...}          best wrote none (not kopt's harness), none compared before
        {"unconfirmed": ...}                 the keep goes to review
        raises CorrectnessRefuted            the candidate's outputs differ, or are missing

Reads two files; no other side effect.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from kopt_supervisor.engine.decide import audit
from kopt_supervisor.engine.errors import KoptFailure
from kopt_supervisor.engine.metrics import BenchError
from kopt_supervisor.engine.profile.profiler import MAX_PROFILE_OUTPUTS_BYTES, PROFILE_OUTPUTS
from kopt_supervisor.engine.sandbox.paths import read_output

WHERE = "the candidate's outputs under the profiler"


class CorrectnessRefuted(KoptFailure):
    """A keep whose rows fail their correctness rule when run in fresh processes (or whose
    outputs under the profiler differ from best's)."""


def compare(
    best_dir: Path,
    cand_dir: Path,
    *,
    columns: list[str],
    configs: set[str],
    earlier: Iterable[Mapping[str, Any]],
) -> dict[str, Any]:
    """Best's and the candidate's outputs.json compared config by config (`columns`: the
    baseline's config columns; `configs`: its config keys; `earlier`: the run's iteration
    records so far).

    Best's file missing or unreadable: a note (a bench that is not kopt's harness) while no
    earlier keep compared outputs, else unconfirmed (best's tree, a candidate once, may be what
    stopped writing them); a best file whose configs are not the baseline's: unconfirmed. The
    tolerance is best's file's until a comparison of the run recorded one, then that one (best's
    tolerance is its tree's word; the first comparison's best was the baseline's tree unless a
    keep came before without one). A candidate that wrote none where best did, one that does not
    parse, or a config missing, added or different: CorrectnessRefuted."""
    records = list(earlier)
    try:
        best = audit.parse(
            read_output(best_dir / PROFILE_OUTPUTS, MAX_PROFILE_OUTPUTS_BYTES).decode(),
            columns,
            "best's outputs under the profiler",
        )
    except (BenchError, OSError, UnicodeDecodeError) as e:
        why = f"best's profile wrote no outputs kopt could read (unreadable: {e})"
        if compared_before(records):
            return {"unconfirmed": f"{why}, though an earlier keep of this run compared them"}
        return {"checked": 0, "note": f"{why}: not kopt's harness, not compared"}
    if configs and set(best) != configs:
        return {"unconfirmed": f"best's outputs list {len(best)} config(s), not the baseline's {len(configs)}"}
    trusted = first_tolerances(records)
    best = {
        k: dataclasses.replace(b, atol=trusted[k][0], rtol=trusted[k][1]) if k in trusted else b
        for k, b in best.items()
    }
    try:
        data = read_output(cand_dir / PROFILE_OUTPUTS, MAX_PROFILE_OUTPUTS_BYTES + 1)
    except FileNotFoundError:
        raise CorrectnessRefuted(f"{WHERE}: none written, while best's profile wrote them") from None
    except OSError as e:  # a link, a FIFO, a folder: never read through
        raise CorrectnessRefuted(f"{WHERE}: none written as a regular file ({e})") from None
    if len(data) > MAX_PROFILE_OUTPUTS_BYTES:
        raise CorrectnessRefuted(f"{WHERE}: over {MAX_PROFILE_OUTPUTS_BYTES} bytes, more than a summary can be")
    try:
        cand = audit.parse(data.decode(), columns, WHERE)
    except (BenchError, UnicodeDecodeError) as e:
        raise CorrectnessRefuted(str(e)) from None
    extra = sorted(set(cand) - set(best))
    missing = sorted(set(best) - set(cand))
    if missing or extra:
        which = f"config {missing[0]} missing" if missing else f"config {extra[0]} not in best's"
        raise CorrectnessRefuted(f"{WHERE}: {which}")
    for key, b in best.items():
        differs = audit.compare(b, cand[key])
        if differs:
            said = differs.replace("audited timed call (set 0)", "last call")
            raise CorrectnessRefuted(f"{WHERE}, config {key}: {said}")
    return {"checked": len(best), "tolerance": {k: [b.atol, b.rtol] for k, b in best.items()}}


def outputs_of(record: Mapping[str, Any]) -> Mapping[str, Any]:
    """An iteration record's comparison of outputs under the profiler ({} without one)."""
    got = (record.get("profile") or {}).get("outputs") or {}
    return got if isinstance(got, Mapping) else {}


def first_tolerances(records: Iterable[Mapping[str, Any]]) -> dict[str, tuple[float, float]]:
    """Per config, the (atol, rtol) of the run's first comparison that recorded one; {} before."""
    for record in records:
        tol = outputs_of(record).get("tolerance")
        if isinstance(tol, dict) and tol:
            return {str(k): (float(v[0]), float(v[1])) for k, v in tol.items()}
    return {}


def compared_before(records: Iterable[Mapping[str, Any]]) -> bool:
    """Whether a keep of the run had its outputs under the profiler compared."""
    return any(outputs_of(r).get("checked", 0) > 0 for r in records)
