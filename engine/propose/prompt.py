"""KOPT_PROMPT: the markdown file a `command` proposer (an agent) reads (DESIGN.md §10).

It carries the rules kopt enforces, the best metric per class, the hottest kernels of the
last profile, the recent regressions, the unmasked memory summary, and during a repair the
failing rows. Pure: returns text.
"""

from __future__ import annotations

from typing import Any

from kopt_supervisor.engine.config import Config
from kopt_supervisor.engine.projections import fmt_num, fmt_pct

RULES = """\
## Rules kopt enforces (you cannot bypass them)

- Change only what your one hypothesis needs, in this worktree. Do not commit: kopt commits keeps.
- Do not modify the benchmark command, its shapes, the protected files, or `.git`; a candidate
  that touches a protected file is rejected unevaluated.
- Correctness first: every row must pass `{correct}`; NaN/Inf fail. A failing candidate gets up
  to {repairs} repair attempts on the same hypothesis.
- kopt times the best tree and your candidate together, interleaved (ABBA), and decides per
  config class with a confidence interval: gains under {min_effect}% are noise unless proven.
- Do not sacrifice one config class for another: a class that regresses while another improves
  makes a split (specialise with a kernel plus dispatch instead).
- Write your plan to `$KOPT_PLAN`: first line the hypothesis (one sentence, bottleneck-driven);
  then `target_class: <class>` for a class-specific change, or `scope: global`.
"""


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
        RULES.format(correct=t.correct or "the metric is present and finite", repairs=cfg.propose.repair_attempts,
                     min_effect=cfg.decide.min_effect_pct),
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
