"""The candidate's outputs under the profiler against a trusted tree's (docs/security.md, "The
outputs under the profiler"): a tree that does less work, or wrong work, only while it is
profiled would otherwise have the profiler's kernel time agree with a patched timer.

The baseline's profile draws its inputs from a seed it records (KOPT_PROFILE_SEED) and the
harness summarises each config's profiled calls' outputs into `<profile folder>/outputs.json`
(KOPT_PROFILE_OUTPUTS, the audit's JSON). Every keep's profile draws the same inputs, and the
candidate's outputs are compared with the **baseline's**: the user's own tree, profiled before
any candidate ran, never best's, whose tree (a candidate once) could carry dormant code that
writes whatever the next cheat needs. A run whose baseline recorded no seed (begun before, or
its profile failed) compares with best's, as it did before. `compare` reads both files as any
file a sandbox wrote (never through a link, never blocking, bounded: sandbox.read_output) and
compares them with decide/audit.compare.

    compare(ref_dir, cand_dir, columns=..., configs=..., earlier=[records], reference=...) ->
        {"checked": n, "tolerance": {...}, "against": reference}   they agree
        {"checked": 0, "note": ...}          the reference wrote none (not kopt's harness), none compared before
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
    ref_dir: Path,
    cand_dir: Path,
    *,
    columns: list[str],
    configs: set[str],
    earlier: Iterable[Mapping[str, Any]],
    reference: str = "best",
) -> dict[str, Any]:
    """The reference's and the candidate's outputs.json compared config by config (`reference`:
    "baseline", the baseline's profile at the same seed, or "best", best's; `columns`: the
    baseline's config columns; `configs`: its config keys; `earlier`: the run's iteration
    records so far).

    The reference's file missing or unreadable: a note (a bench that is not kopt's harness)
    while no earlier keep compared outputs, else unconfirmed (best's tree, a candidate once, may
    be what stopped writing them); a reference whose configs are not the baseline's:
    unconfirmed. The tolerance is the reference's file's; best's only until a comparison of the
    run recorded one, then that one (best's tolerance is its tree's word). A candidate that
    wrote none where the reference did, one that does not parse, or a config missing, added or
    different: CorrectnessRefuted."""
    records = list(earlier)
    whose = "the baseline's" if reference == "baseline" else "best's"
    try:
        ref = audit.parse(
            read_output(ref_dir / PROFILE_OUTPUTS, MAX_PROFILE_OUTPUTS_BYTES).decode(),
            columns,
            f"{whose} outputs under the profiler",
        )
    except (BenchError, OSError, UnicodeDecodeError) as e:
        why = f"{whose} profile wrote no outputs kopt could read (unreadable: {e})"
        if compared_before(records):
            return {"unconfirmed": f"{why}, though an earlier keep of this run compared them"}
        return {"checked": 0, "note": f"{why}: not kopt's harness, not compared"}
    if configs and set(ref) != configs:
        return {"unconfirmed": f"{whose} outputs list {len(ref)} config(s), not the baseline's {len(configs)}"}
    trusted = first_tolerances(records) if reference != "baseline" else {}
    ref = {
        k: dataclasses.replace(b, atol=trusted[k][0], rtol=trusted[k][1]) if k in trusted else b for k, b in ref.items()
    }
    try:
        data = read_output(cand_dir / PROFILE_OUTPUTS, MAX_PROFILE_OUTPUTS_BYTES + 1)
    except FileNotFoundError:
        raise CorrectnessRefuted(f"{WHERE}: none written, while {whose} profile wrote them") from None
    except OSError as e:  # a link, a FIFO, a folder: never read through
        raise CorrectnessRefuted(f"{WHERE}: none written as a regular file ({e})") from None
    if len(data) > MAX_PROFILE_OUTPUTS_BYTES:
        raise CorrectnessRefuted(f"{WHERE}: over {MAX_PROFILE_OUTPUTS_BYTES} bytes, more than a summary can be")
    try:
        cand = audit.parse(data.decode(), columns, WHERE)
    except (BenchError, UnicodeDecodeError) as e:
        raise CorrectnessRefuted(str(e)) from None
    extra = sorted(set(cand) - set(ref))
    missing = sorted(set(ref) - set(cand))
    if missing or extra:
        which = f"config {missing[0]} missing" if missing else f"config {extra[0]} not in {whose}"
        raise CorrectnessRefuted(f"{WHERE}: {which}")
    for key, b in ref.items():
        differs = audit.compare(b, cand[key])
        if differs:
            said = differs.replace("audited timed call (set 0)", "its profiled calls' outputs in order").replace(
                "best's", whose
            )
            raise CorrectnessRefuted(f"{WHERE}, config {key}: {said}")
    return {"checked": len(ref), "tolerance": {k: [b.atol, b.rtol] for k, b in ref.items()}, "against": reference}


def baseline_reference(record: Mapping[str, Any], folder: Path) -> tuple[int, Path] | None:
    """The baseline's profile's seed and the folder its outputs are in (`folder`: its version's
    profiles/vN), or None where its profile drew no seed (a run begun before, a profile that
    failed): then best's outputs are the reference."""
    seed = (record.get("profile") or {}).get("seed")
    return (seed, folder / "best") if isinstance(seed, int) and not isinstance(seed, bool) else None


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
