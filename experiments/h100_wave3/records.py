"""A run's records read back as the third wave reports them: per iteration the verdict, the
seconds of its decision, of its keep's confirmation and of the profiler, the iteration's end to
end seconds, the external truth that confirmed (or refuted) a keep, kopt's best speedup at each
keep; and the figures the issue's "done when" names.

The redesign's record keys are read where they are and fall back, named, where they are not
(this module was written while they were being built):

- the confirmation: record["confirmation"] (its "seconds", "outcome" (else "verdict"/"kind"),
  "looks" (else "rounds"), "path": served or process), else timings["confirmation_s"], else the
  older fresh-process re-decision record["reverify"] and timings["reverify_s"];
- the decision's seconds: timings["decision_s"], else the decision's own looks (the first
  `eval` looks of timings["looks_s"], counted from run.db's samples) plus the reload, else the
  span of its samples, else all looks minus the confirmation;
- the external truth: record["external_truth"] (an object: kind "profiler" | "os_time" |
  "none", outcome "confirmed" | "refuted" | "unconfirmed", reason; or a word), else the
  profiler's agreement in record["profile"], else "none recorded".

`iteration_rows` and `figures` are pure (Iteration objects and sample spans in, dicts out);
`read_run` reads them from a workspace.
"""

from __future__ import annotations

import sqlite3
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from experiments.h100_wave2.records import profile_view
from kopt_supervisor.engine.api import best_speedup
from kopt_supervisor.engine.records import Iteration

DECISION_STAGE = "eval"
CONFIRM_STAGES = ("confirmation", "confirm", "reverify")
"""Sample stages of a keep's confirmation: the redesign's name first, the older re-decision last."""
CONFIRM_KEYS = ("confirmation", "confirm", "reverify")
CONFIRM_TIMINGS = ("confirmation_s", "confirm_s", "reverify_s")
KEPT = ("keep", "accepted")
DECIDED = ("keep", "accepted", "regression", "likely_regression", "tie", "split", "rejected", "borderline")
"""Statuses a decision reached (the rest: failures, interruptions, still running)."""
CONFIRM_TARGET_S = 10.0
KEEP_ITERATION_TARGET_S = 20.0


@dataclass(frozen=True)
class Span:
    """One decision stage of one iteration in run.db's samples: its looks and when its first
    and last samples were stored."""

    looks: int
    t0: float
    t1: float


Spans = Mapping[int, Mapping[str, Span]]
"""version -> stage -> Span."""


def _num(v: Any) -> float | None:
    try:
        return None if v is None else round(float(v), 3)
    except (TypeError, ValueError):
        return None


def confirmation_of(record: Mapping[str, Any], spans: Mapping[str, Span]) -> dict[str, Any] | None:
    """The keep's confirmation: its seconds, verdict, looks and where each was read (None: none ran)."""
    timings = record.get("timings") or {}
    for key in CONFIRM_KEYS:
        c = record.get(key)
        if isinstance(c, Mapping) and c:
            seconds, src = _num(c.get("seconds")), f"record[{key!r}]['seconds']"
            if seconds is None:
                tkey = next((t for t in CONFIRM_TIMINGS if timings.get(t) is not None), None)
                seconds, src = (
                    (_num(timings.get(tkey)), f"timings[{tkey!r}]") if tkey else (None, "no seconds recorded")
                )
            looks = c.get("looks", c.get("rounds"))
            if looks is None:
                looks = next((spans[s].looks for s in CONFIRM_STAGES if s in spans), None)
            return {
                "record_key": key,
                "seconds": seconds,
                "seconds_source": src,
                "verdict": c.get("outcome") or c.get("verdict") or c.get("kind"),
                "looks": looks,
                "path": c.get("path"),
                "agrees": c.get("agrees"),
                "reason": str(c.get("reason") or "")[:300],
            }
    tkey = next((t for t in CONFIRM_TIMINGS if timings.get(t) is not None), None)
    if tkey:
        return {
            "record_key": None,
            "seconds": _num(timings[tkey]),
            "seconds_source": f"timings[{tkey!r}]",
            "verdict": None,
            "looks": next((spans[s].looks for s in CONFIRM_STAGES if s in spans), None),
            "path": None,
            "agrees": None,
            "reason": "",
        }
    return None


def decision_seconds(
    record: Mapping[str, Any], spans: Mapping[str, Span], confirmation: Mapping[str, Any] | None
) -> tuple[float | None, str]:
    """The first decision's seconds and how they were read (see the module docstring)."""
    timings = record.get("timings") or {}
    if timings.get("decision_s") is not None:
        return _num(timings["decision_s"]), "timings['decision_s']"
    looks = [float(x) for x in timings.get("looks_s") or []]
    reload_s = float(timings.get("reload_s") or 0.0)
    span = spans.get(DECISION_STAGE)
    if span is not None and 0 < span.looks <= len(looks):
        return _num(sum(looks[: span.looks]) + reload_s), "timings looks_s of its eval looks + reload_s"
    if span is not None and span.looks > 0:
        first = looks[0] if looks else 0.0
        return _num(span.t1 - span.t0 + first + reload_s), "eval samples' span + the first look + reload_s"
    if looks:
        spent = float((confirmation or {}).get("seconds") or 0.0)
        return _num(max(0.0, sum(looks) + reload_s - spent)), "all looks + reload_s - the confirmation"
    return None, "no looks recorded"


def external_truth_of(record: Mapping[str, Any]) -> dict[str, Any]:
    """What confirmed or refuted the bench's claim from outside the candidate's process."""
    truth = record.get("external_truth")
    if isinstance(truth, str) and truth:
        return {"kind": truth, "source": "record['external_truth']"}
    if isinstance(truth, Mapping) and truth:
        kind = truth.get("kind") or truth.get("source") or truth.get("by") or "?"
        return {
            "kind": str(kind),
            "outcome": truth.get("outcome"),
            "reason": str(truth.get("reason") or "")[:400],
            "source": "record['external_truth']",
            "figures": truth.get("figures"),
        }
    prof = record.get("profile") or {}
    if prof.get("error"):
        return {
            "kind": "profiler",
            "outcome": "failed",
            "reason": str(prof["error"])[:400],
            "source": "record['profile'] (no external_truth)",
        }
    agreement = prof.get("agreement")
    if agreement:
        disagrees = any(c.get("status") == "disagrees" for c in agreement.get("classes") or [])
        return {
            "kind": "profiler",
            "outcome": "refuted" if disagrees else "confirmed",
            "reason": str(agreement.get("note", ""))[:400],
            "source": "record['profile'] (no external_truth)",
        }
    return {
        "kind": "none recorded",
        "outcome": None,
        "reason": "",
        "source": "no external_truth, no profiler agreement",
    }


def class_ratios(record: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Per class: the bench's ratio and verdict of the first decision, the profiler's ratio."""
    out: dict[str, dict[str, Any]] = {}
    for cls, c in (record.get("classes") or {}).items():
        if isinstance(c, Mapping):
            out[cls] = {"bench_ratio": _num(c.get("ratio")), "bench_verdict": c.get("verdict")}
    view = profile_view(record.get("profile")) or {}
    for c in (view.get("comparison") or {}).get("classes", []):
        out.setdefault(str(c["cls"]), {})["profiler_ratio"] = _num(c.get("ratio"))
    return out


def iteration_rows(iterations: Sequence[Iteration], spans: Spans) -> list[dict[str, Any]]:
    """One row per iteration, oldest first (see the module docstring); a keep also carries
    kopt's best speedup once it ended (engine.api.best_speedup over the iterations ended by
    then) and the seconds since the baseline started."""
    ordered = sorted(iterations, key=lambda it: it.version)
    base = next((it for it in ordered if str(it.status) == "baseline"), None)
    t_start = base.started_at if base else (ordered[0].started_at if ordered else 0.0)
    ended = sorted((it for it in ordered if it.finished_at is not None), key=lambda it: it.order)
    rows = []
    for it in ordered:
        rec = it.record
        sp = spans.get(it.version, {})
        dec = rec.get("decision") or {}
        timings = rec.get("timings") or {}
        confirmation = confirmation_of(rec, sp)
        decision_s, decision_src = decision_seconds(rec, sp, confirmation)
        status = str(it.status)
        classes = class_ratios(rec)
        row: dict[str, Any] = {
            "version": it.version,
            "status": status,
            "masked": it.masked,
            "hypothesis": it.hypothesis,
            "target_class": it.target_class,
            "verdict": dec.get("verdict"),
            "reason": str(dec.get("reason") or "")[:400],
            "flags": list(dec.get("flags") or []),
            "looks": (sp.get(DECISION_STAGE) or Span(0, 0, 0)).looks or dec.get("rounds"),
            "decision_s": decision_s,
            "decision_s_source": decision_src,
            "confirmation_s": (confirmation or {}).get("seconds"),
            "confirmation": confirmation,
            "profiler_s": _num(timings.get("profiler_s")),
            "total_s": _num(timings.get("total_s")),
            "engine_s": _num(timings.get("engine_s")),
            "external_truth": external_truth_of(rec)
            if status in KEPT or rec.get("external_truth") or (rec.get("profile") or {}).get("agreement")
            else None,
            "bench_claimed_gain": any(c.get("bench_verdict") == "improved" for c in classes.values()),
            "classes": classes,
            "failing": str((rec.get("failing_rows") or [{}])[0])[:300] if rec.get("failing_rows") else "",
            "audit": rec.get("audit"),
        }
        if status in KEPT and it.finished_at is not None and not it.masked:
            upto = [x for x in ended if x.order <= it.order and not x.masked]
            row["best_speedup"] = _num(best_speedup(upto))
            row["t_s"] = _num(it.finished_at - t_start)
        rows.append(row)
    return rows


def stats(xs: Sequence[float]) -> dict[str, Any]:
    return {
        "n": len(xs),
        "median": _num(statistics.median(xs)) if xs else None,
        "min": _num(min(xs)) if xs else None,
        "max": _num(max(xs)) if xs else None,
    }


def figures(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The issue's figures from one run's rows: per keep the confirmation's seconds (<= 10 s)
    and the iteration's end to end seconds (<= 20 s), what confirmed each keep, the best
    speedup against time, and the seconds of every decision."""
    cands = [r for r in rows if r["version"] > 0]
    keeps = [r for r in cands if r["status"] in KEPT]
    confirm = [float(r["confirmation_s"]) for r in keeps if r["confirmation_s"] is not None]
    keep_total = [float(r["total_s"]) for r in keeps if r["total_s"] is not None]
    decided = [r for r in cands if r["status"] in DECIDED]
    truths: dict[str, int] = {}
    for r in keeps:
        t = r["external_truth"] or {}
        kind = f"{t.get('kind', 'none recorded')} {t.get('outcome') or ''}".strip()
        truths[kind] = truths.get(kind, 0) + 1
    return {
        "candidates": len(cands),
        "decided": len(decided),
        "keeps": [r["version"] for r in keeps],
        "statuses": {s: sum(1 for r in cands if r["status"] == s) for s in sorted({r["status"] for r in cands})},
        "confirmation_s_per_keep": stats(confirm),
        "confirmation_target_met": bool(confirm) and max(confirm) <= CONFIRM_TARGET_S,
        "keep_iteration_s": stats(keep_total),
        "keep_iteration_target_met": bool(keep_total) and max(keep_total) <= KEEP_ITERATION_TARGET_S,
        "decision_s": stats([float(r["decision_s"]) for r in decided if r["decision_s"] is not None]),
        "total_s_per_decided": stats([float(r["total_s"]) for r in decided if r["total_s"] is not None]),
        "profiler_s_per_keep": stats([float(r["profiler_s"]) for r in keeps if r["profiler_s"] is not None]),
        "external_truth_of_keeps": truths,
        "best_speedup_over_time": [
            {"version": r["version"], "t_s": r.get("t_s"), "best_speedup": r.get("best_speedup")}
            for r in keeps
            if not r["masked"]
        ],
    }


def iteration_table(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One line per iteration for summary.md."""

    def classes(r: Mapping[str, Any]) -> str:
        out = []
        for cls, c in r["classes"].items():
            text = f"{cls} {pct(c.get('bench_ratio'))} {c.get('bench_verdict') or ''}".rstrip()
            if c.get("profiler_ratio") is not None:
                text += f" (profiler {pct(c['profiler_ratio'])})"
            out.append(text)
        return "; ".join(out)

    table = [
        [
            f"v{r['version']}" + (" (masked)" if r["masked"] else ""),
            r["status"],
            (r["hypothesis"] or "")[:50],
            classes(r),
            r["looks"],
            r["decision_s"],
            r["confirmation_s"],
            r["profiler_s"],
            r["total_s"],
            truth_word(r["external_truth"]),
            r.get("best_speedup"),
            r.get("t_s"),
            ",".join(r["flags"]),
        ]
        for r in rows
    ]
    return {
        "columns": [
            "it",
            "status",
            "hypothesis",
            "per class (bench; profiler)",
            "looks",
            "decision s",
            "confirmation s",
            "profiler s",
            "total s",
            "external truth",
            "best speedup",
            "at s",
            "flags",
        ],
        "rows": table,
    }


def truth_word(truth: Mapping[str, Any] | None) -> str:
    return "" if not truth else f"{truth.get('kind')} {truth.get('outcome') or ''}".strip()


def pct(ratio: float | None) -> str:
    return "" if ratio is None else f"{(float(ratio) - 1) * 100:+.2f}%"


# ---------------------------------------------------------------------------------------
# Reading a workspace


def read_spans(db: Path) -> dict[int, dict[str, Span]]:
    """Per iteration and stage, from run.db's samples: looks (distinct rounds), first and last
    sample times."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = con.execute(
            "SELECT version, stage, COUNT(DISTINCT round), MIN(t), MAX(t) FROM samples GROUP BY version, stage"
        ).fetchall()
    finally:
        con.close()
    out: dict[int, dict[str, Span]] = {}
    for version, stage, looks, t0, t1 in rows:
        out.setdefault(int(version), {})[str(stage)] = Span(int(looks), float(t0), float(t1))
    return out


def read_run(root: Path, tag: str) -> tuple[list[Iteration], dict[int, dict[str, Span]]]:
    """The run's iterations (masked ones included) and its sample spans."""
    from kopt_supervisor.engine.workspace import Workspace

    ws = Workspace(root, tag)
    with ws.open_store(readonly=True) as store:
        its = list(store.iterations())
    return its, read_spans(ws.db_path)
