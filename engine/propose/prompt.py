"""The rules kopt hands every proposer, and the short KOPT_PROMPT of the current loop.

`rules(cfg)` states, in the reference program's words, what a careful kernel engineer is
told before each change: correctness first, one bottleneck-driven hypothesis that points at
evidence, global or one class, the smallest change, no protected files, no commits, no
fake wins, the plan's format. The context pack (engine.propose.context) and
`render_prompt` both print it. `render_prompt` is the prompt the loop writes today (best
per class, hottest kernels, recent regressions, the memory summary, failing rows on a
repair); the context pack replaces it once the loop passes `PackInputs`. Pure: returns text.
"""

from __future__ import annotations

from typing import Any

from kopt_supervisor.engine.config import Config
from kopt_supervisor.engine.projections import fmt_num, fmt_pct


def rules(cfg: Config) -> list[str]:
    """The rules kopt enforces, one item each (markdown)."""
    t, d = cfg.target, cfg.decide
    protected = ", ".join(f"`{p}`" for p in t.protected) or "none declared"
    return [
        f"**Correctness first.** Every config row must pass `{t.correct or 'the metric is present and finite'}`; "
        f"NaN/Inf fail. A failing candidate gets up to {cfg.propose.repair_attempts} repair attempts on the same "
        "hypothesis: keep the direction, make the minimal fix.",
        "**One hypothesis per iteration, driven by a bottleneck.** It must point back to evidence in this brief: "
        "a config class, a profiled kernel, or a metric with its value (registers, shared memory, occupancy, "
        "memory throughput, % of the roofline). No guess-and-tune.",
        "**Global or one class.** Say which: `scope: global` (every class must not regress), or "
        "`target_class: <class>` (that class must improve and the others must not regress).",
        "**The smallest change** the hypothesis needs, inside this worktree only. Do not modify the benchmark "
        f"command, its shapes, or the protected files ({protected}); a candidate that touches one is rejected "
        "unevaluated.",
        "**No fake wins.** Do not reduce the work, skip or weaken correctness, cache outputs across calls, move "
        "work out of the timed region, patch timers or other modules, or add dependencies. The profiler covers "
        "every kernel launched per config, and every new best is re-verified in fresh processes.",
        "**Do not commit** (no git commands that change history): kopt formats, re-benches and commits keeps; a "
        "candidate with commits of its own is rejected.",
        f"**How kopt decides.** Best and candidate are timed interleaved (ABBA) and compared per config class with "
        f"a {d.confidence * 100:g}% interval: changes under {d.min_effect_pct:g}% are noise. A class that regresses "
        f"beyond {d.max_other_regression_pct:g}% while another improves is a split: specialise (a kernel plus "
        "dispatch for the class that gains) instead of forcing one kernel on every class. The profiler's GPU time "
        "must agree with the bench.",
        "**Hardware numbers** come only from the cited specs in this brief; never estimate a spec.",
        "**Write the plan** to `$KOPT_PLAN` before you finish: first line the hypothesis (one sentence); then "
        "`target_class: <class>` or `scope: global`; then the evidence from this brief it rests on (class, kernel, "
        "metric and its value) and what you changed. An empty plan is a failed proposal; a plan that cites no "
        "evidence is marked.",
    ]


def render_prompt(
    cfg: Config,
    *,
    iteration: int,
    repair: int,
    best_commit: str,
    best_per_class: dict[str, float],
    classes: list[str],
    profile: dict[str, Any] | None,
    recent_regressions: list[dict[str, Any]],
    history: list[dict[str, Any]],
    failing_rows: list[dict[str, Any]] | None = None,
    hypothesis: str = "",
    roofline: dict[str, Any] | None = None,
) -> str:
    t = cfg.target
    out = [
        f"# kopt iteration v{iteration}" + (f" — correctness repair {repair} of {cfg.propose.repair_attempts}" if repair else ""),
        "",
        f"Goal: make `{t.metric}` {'lower' if t.direction == 'min' else 'higher'} for `{t.bench}` without breaking correctness.",
        f"BEST_COMMIT: `{best_commit}` (this worktree starts there).",
        "",
        "## Rules kopt enforces (you cannot bypass them)",
        "",
        *(f"- {r}" for r in rules(cfg)),
        "",
    ]
    if repair:
        out += [
            "## Repair this candidate",
            "",
            f"Your hypothesis was: {hypothesis}",
            "Keep the optimisation direction; make the minimal change that restores correctness.",
            "",
            "Failing rows:",
            "",
        ]
        for row in (failing_rows or [])[:30]:
            out.append(f"- `{row.get('config')}`: {'; '.join(row.get('reasons', []))}")
        out.append("")
    out += ["## Best per config class (current BEST_COMMIT)", "", f"| class | {t.metric} | % of roofline |", "|---|---|---|"]
    pct = (roofline or {}).get("classes", {})
    for cls in classes or sorted(best_per_class):
        out.append(f"| `{cls}` | {fmt_num(best_per_class.get(cls))} | {fmt_num((pct.get(cls) or {}).get('pct_geomean'))} |")
    out.append("")
    if profile:
        out += ["## Hottest kernels (last profile)", "", "| kernel | calls | avg ns | total ns |", "|---|---|---|---|"]
        for k in (profile.get("kernels") or [])[:8]:
            out.append(f"| `{k.get('name')}` | {k.get('calls')} | {fmt_num(k.get('avg_ns'))} | {fmt_num(k.get('total_ns'))} |")
        out.append("")
    out += ["## Recent regressions (since the last keep or tie)", ""]
    if recent_regressions:
        for r in recent_regressions:
            out.append(f"- v{r['version']}: {r['hypothesis']} → {fmt_pct(r.get('delta_pct'))} ({r.get('notes', '')})")
    else:
        out.append("- none")
    out += ["", "## Memory (unmasked iterations, oldest first)", ""]
    for h in history[-40:]:
        verdict = (h.get("decision") or {}).get("reason") or ""
        out.append(f"- v{h['version']} [{h['status']}] {h.get('hypothesis') or ''}"
                   + (f" (class {h['target_class']})" if h.get("target_class") else "")
                   + (f" — {verdict}" if verdict else ""))
    out.append("")
    return "\n".join(out)
