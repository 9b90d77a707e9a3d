"""A run's records read back from its run.db, in the shape the wave's summaries report.

`iteration_views(root, tag)` gives, per iteration: the verdict and its flags, the bench's
per-class ratios, the profiler's per-class comparison and agreement (record["profile"]), every
kernel the profiler attributed to each config range on each side (whatever its name), the
kernels that appeared or disappeared per class, the fresh-process re-decision and the phase
timings (record["timings"]). `verification_figures(views)` derives what the verification
issue asks: the re-decision's cost per keep, and the class-targeted keeps the profiler sent
back. Pure except for reading the store.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

from experiments.device_wave import records_export  # noqa: F401 - part of this module's reading

CLASS_KEYS = ("ratio", "lo", "hi", "verdict", "rounds")


def iteration_views(root: Path, tag: str) -> list[dict[str, Any]]:
    """Every iteration of run `tag` under `root`, oldest first (see the module docstring)."""
    from kopt_supervisor.engine.workspace import Workspace

    ws = Workspace(root, tag)
    with ws.open_store(readonly=True) as store:
        return [
            iteration_view(it.version, str(it.status), it.hypothesis, it.target_class, it.scope, dict(it.record))
            for it in store.iterations()
        ]


def iteration_view(
    version: int, status: str, hypothesis: str, target_class: str | None, scope: str, record: dict[str, Any]
) -> dict[str, Any]:
    dec = record.get("decision") or {}
    t = dict(record.get("timings") or {})
    looks = [float(x) for x in t.get("looks_s") or []]
    rv = record.get("reverify")
    return {
        "version": version,
        "status": status,
        "hypothesis": hypothesis,
        "target_class": target_class,
        "scope": scope,
        "verdict": dec.get("verdict"),
        "by": dec.get("by"),
        "reason": dec.get("reason"),
        "flags": list(dec.get("flags") or []),
        "rounds": dec.get("rounds"),
        "gpu_seconds": dec.get("gpu_seconds"),
        "classes": {
            cls: {k: c.get(k) for k in CLASS_KEYS}
            for cls, c in (record.get("classes") or {}).items()
            if isinstance(c, dict)
        },
        "timings": {
            **{k: v for k, v in t.items() if k != "looks_s"},
            "looks_s": looks,
            "looks_n": len(looks),
            "looks_sum_s": round(sum(looks), 3),
        },
        "reverify": None
        if not rv
        else {k: rv.get(k) for k in ("verdict", "reason", "rounds", "gpu_seconds", "flags", "agrees", "seconds")},
        "profile": profile_view(record.get("profile")),
        "gpu_host": (record.get("gpu") or {}).get("host"),
    }


def profile_view(p: dict[str, Any] | None) -> dict[str, Any] | None:
    """record["profile"] as the summary reports it (None: the iteration was not profiled)."""
    if not p:
        return None
    if "error" in p:
        return {"error": p["error"]}
    view: dict[str, Any] = {"ranges": {}, "kernels": {}}
    for side in ("best", "cand"):
        summary = p.get(side)
        if not summary:
            continue
        view["ranges"][side] = kernels_by_range(summary)
        view["kernels"][side] = [k.get("name") for k in summary.get("kernels", [])]
        view.setdefault("ranges_source", {})[side] = summary.get("ranges_source", "")
        view.setdefault("passes", {})[side] = summary.get("passes")
    cmp = p.get("comparison")
    if cmp:
        view["comparison"] = {
            "per_class": cmp.get("per_class"),
            "note": cmp.get("note", ""),
            "noise": cmp.get("noise"),
            "confidence": cmp.get("confidence"),
            "problems": list(cmp.get("problems") or []),
            "classes": [
                {
                    "cls": c.get("cls"),
                    "ratio": c.get("ratio"),
                    "lo": c.get("lo"),
                    "hi": c.get("hi"),
                    "best_ns": c.get("best_ns"),
                    "cand_ns": c.get("cand_ns"),
                    "kernels": [k.get("name") for k in c.get("kernels") or []],
                    "appeared": list(c.get("appeared") or []),
                    "disappeared": list(c.get("disappeared") or []),
                    "problems": list(c.get("problems") or []),
                }
                for c in cmp.get("classes") or []
            ],
            "unattributed": {k: (cmp.get("unattributed") or {}).get(k) for k in ("best_ns", "cand_ns", "grew")}
            | {
                "groups": [
                    {k: g.get(k) for k in ("side", "kernel", "calls", "total_ns", "why")}
                    for g in (cmp.get("unattributed") or {}).get("groups") or []
                ]
            },
        }
    agr = p.get("agreement")
    if agr:
        classes = [
            {
                k: c.get(k)
                for k in (
                    "cls",
                    "status",
                    "bench_verdict",
                    "bench_ratio",
                    "bench_lo",
                    "bench_hi",
                    "profiler_ratio",
                    "profiler_lo",
                    "profiler_hi",
                    "reason",
                )
            }
            for c in agr.get("classes") or []
        ]
        view["agreement"] = {
            "classes": classes,
            "note": agr.get("note", ""),
            "disagrees": any(c["status"] == "disagrees" for c in classes),
        }
    return view


def kernels_by_range(summary: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """range name ("" outside every range; a note after it when one was recorded) -> the kernels
    launched there, each with its launches, whatever the kernel's name."""
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for g in summary.get("ranged") or []:
        key = g.get("range", "") + (f" [{g['note']}]" if g.get("note") else "")
        out[key].append(
            {
                "kernel": g.get("kernel"),
                "calls": g.get("calls"),
                "total_us": round(float(g.get("total_ns") or 0.0) / 1e3, 3),
            }
        )
    return dict(out)


def verification_figures(views: list[dict[str, Any]]) -> dict[str, Any]:
    """The verification issue's figures from one run: the fresh-process re-decision (run when
    the bench and then the profiler said keep) with its cost, the profiler's agreement, and
    every class-targeted keep the profiler sent back."""
    reverified = [v for v in views if v["reverify"]]
    costs = [float(v["timings"].get("reverify_s") or v["reverify"].get("seconds") or 0.0) for v in reverified]
    profiled = [v for v in views if v["profile"] and "agreement" in v["profile"]]
    rejected_targeted = [
        {"version": v["version"], "target_class": v["target_class"], "status": v["status"], "reason": v["reason"]}
        for v in views
        if v["target_class"] and "profiler_disagrees" in v["flags"]
    ]
    return {
        "iterations": sum(1 for v in views if v["version"] > 0),
        "keeps": sum(1 for v in views if v["status"] in ("keep", "accepted")),
        "bench_keeps_profiled": len(profiled),
        "profiler_disagreed": [v["version"] for v in views if "profiler_disagrees" in v["flags"]],
        "profiler_failed": [
            v["version"] for v in views if "profiler_failed" in v["flags"] or (v["profile"] or {}).get("error")
        ],
        "class_targeted_keeps_rejected_by_profiler": rejected_targeted,
        "reverified": [
            {
                "version": v["version"],
                "reverify_s": c,
                "verdict": v["reverify"]["verdict"],
                "rounds": v["reverify"]["rounds"],
                "agrees": v["reverify"]["agrees"],
            }
            for v, c in zip(reverified, costs, strict=True)
        ],
        "reverify_s_per_bench_keep": {
            "n": len(costs),
            "median": statistics.median(costs) if costs else None,
            "min": min(costs) if costs else None,
            "max": max(costs) if costs else None,
        },
        "profiler_s_per_profiled_keep": [v["timings"].get("profiler_s") for v in profiled],
    }


def iteration_table(views: list[dict[str, Any]]) -> dict[str, Any]:
    """One row per iteration for summary.md."""
    rows = []
    for v in views:
        t = v["timings"]
        agreement = (v["profile"] or {}).get("agreement") or {}
        prof = "; ".join(
            f"{c['cls']} {c['status']} ({_pct(c.get('profiler_ratio'))})"
            for c in agreement.get("classes", [])
            if c["status"] != "not_judged"
        )
        if (v["profile"] or {}).get("error"):
            prof = f"error: {v['profile']['error'][:120]}"
        rows.append(
            [
                f"v{v['version']}",
                v["status"],
                v["target_class"] or v["scope"],
                (v["hypothesis"] or "")[:60],
                "; ".join(f"{c} {_pct(x.get('ratio'))} {x.get('verdict') or ''}" for c, x in v["classes"].items()),
                v["rounds"],
                ",".join(v["flags"]),
                prof,
                t.get("looks_n"),
                t.get("looks_sum_s"),
                t.get("profiler_s"),
                t.get("reverify_s"),
                t.get("total_s"),
            ]
        )
    return {
        "columns": [
            "it",
            "status",
            "target",
            "hypothesis",
            "bench per class",
            "rounds",
            "flags",
            "profiler agreement",
            "looks",
            "looks s",
            "profiler s",
            "reverify s",
            "total s",
        ],
        "rows": rows,
    }


def range_table(views: list[dict[str, Any]]) -> dict[str, Any]:
    """Per profiled iteration and side: every config range with every kernel launched in it."""
    rows = []
    for v in views:
        for side, ranges in ((v["profile"] or {}).get("ranges") or {}).items():
            for rng, kernels in sorted(ranges.items()):
                rows.append(
                    [
                        f"v{v['version']}",
                        side,
                        rng or "(outside every range)",
                        ", ".join(f"{k['kernel']} x{k['calls']}" for k in kernels),
                    ]
                )
    return {"columns": ["it", "side", "range", "kernels (launches)"], "rows": rows}


def class_change_table(views: list[dict[str, Any]]) -> dict[str, Any]:
    """Per profiled keep and class: the profiler's ratio and interval, kernels in and out."""
    rows = []
    for v in views:
        for c in ((v["profile"] or {}).get("comparison") or {}).get("classes", []):
            rows.append(
                [
                    f"v{v['version']}",
                    c["cls"],
                    _pct(c["ratio"]),
                    f"[{_pct(c['lo'])}, {_pct(c['hi'])}]",
                    ", ".join(c["kernels"]),
                    ", ".join(c["appeared"]),
                    ", ".join(c["disappeared"]),
                    "; ".join(c["problems"]),
                ]
            )
    return {
        "columns": ["it", "class", "profiler change", "interval", "kernels", "appeared", "disappeared", "problems"],
        "rows": rows,
    }


def _pct(ratio: float | None) -> str:
    return "" if ratio is None else f"{(float(ratio) - 1) * 100:+.2f}%"
