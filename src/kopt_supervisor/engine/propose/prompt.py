"""The rules kopt hands every proposer (the context pack, engine.propose.context, prints them).

`rules(cfg)` states, in the reference program's words, what a careful kernel engineer is
told before each change: correctness first, one bottleneck-driven hypothesis that points at
evidence, global or one class, the smallest change, no protected files, no commits, no
fake wins, the plan's format. Pure: returns text.
"""

from __future__ import annotations

from kopt_supervisor.engine.config.sections import Config


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
