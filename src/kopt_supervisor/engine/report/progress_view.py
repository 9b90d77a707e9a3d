"""results.md's "Progress and where the time went" (docs/lanes.md): the best speedup against
wall time and GPU time, one row per keep, and per lane where its time went (engine/api/run_summary.py
computes both from the iteration records). Pure: the run's iterations in, markdown lines out.
"""

from __future__ import annotations

from collections.abc import Sequence

from kopt_supervisor.engine import fmt
from kopt_supervisor.engine.api.run_summary import Progress, progress
from kopt_supervisor.engine.records import Iteration
from kopt_supervisor.engine.report.markdown import table

TITLE = "Progress and where the time went"


def section(iterations: Sequence[Iteration], direction: str) -> list[str]:
    p = progress(iterations, direction)
    lines = [f"## {TITLE}", ""]
    if not p.gpu_s:
        return lines + ["No candidate iteration has ended yet.", ""]
    lines += [
        f"{len(p.lanes)} lane(s) ran {sum(x.iterations for x in p.lanes)} candidate iteration(s) in "
        f"{fmt.clock(p.elapsed_s)} of wall time and {fmt.hours(p.gpu_s)} of GPU time "
        "(each lane holds one GPU while its iteration runs; masked iterations included: their time was spent).",
        "",
    ]
    if p.curve:
        lines += table(
            ["keep", "wall time", "GPU time", "best speedup"],
            [[f"v{x.version}", fmt.clock(x.t_s), fmt.hours(x.gpu_s), fmt.speedup(x.speedup)] for x in p.curve],
        )
        lines.append("")
    else:
        lines += ["No keep yet: the speedup has not moved.", ""]
    lines += _lanes(p)
    return lines


def _lanes(p: Progress) -> list[str]:
    rows = []
    for x in p.lanes:
        cells = [x.wait_s, x.propose_s, x.measure_s, x.confirm_s, x.review_s, x.stale_s, x.other_s]
        rows.append(
            [
                str(x.lane),
                str(x.iterations),
                fmt.clock(x.busy_s),
                *(f"{fmt.clock(c)} ({fmt.share(100 * c / x.busy_s, 2) if x.busy_s else fmt.DASH})" for c in cells),
                f"{x.rebased} / {x.handed_back} / {x.stale_iterations}",
            ]
        )
    out = table(
        [
            "lane",
            "iterations",
            "busy",
            "waiting (GPU, BEST, lanes)",
            "proposing",
            "measuring",
            "confirming and keeping",
            "review",
            "stale",
            "other",
            "rebased / handed back / ended stale",
        ],
        rows,
    )
    share = p.stale_share
    return out + [
        "",
        f"Stale candidates (decided against a BEST another lane's keep had moved, then rebased or handed "
        f"back) took {fmt.clock(p.stale_s)}"
        + (f", {fmt.share(100 * share)} of the GPU time." if share is not None else "."),
        "",
    ]
