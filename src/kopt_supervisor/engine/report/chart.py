"""The latency chart beside results.md: best metric per class over iterations (kept points).

`class_series(...)` turns the chain of kept trees into one series per class: the class's
geometric mean of per-config medians of each kept tree, at the iteration that kept it.
`text_chart(...)` draws it with block characters (pure, always embedded in results.md);
`write_png(...)` draws it with matplotlib when it is importable (a step line per class on a
log axis, a marker at each keep) and returns False when it is not.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from kopt_supervisor.engine import fmt

BAR_WIDTH = 40
EIGHTHS = " ▏▎▍▌▋▊▉█"


@dataclass(frozen=True)
class Point:
    version: int
    value: float
    label: str
    """What the point is: "baseline" or the kept iteration's hypothesis."""


def class_series(points_by_tree: Sequence[tuple[int, str, Mapping[str, float | None]]]) -> dict[str, list[Point]]:
    """(version, label, {class: value}) per kept tree, oldest first -> {class: points}."""
    out: dict[str, list[Point]] = {}
    for version, label, values in points_by_tree:
        for cls, v in values.items():
            if v is not None and math.isfinite(v) and v > 0:
                out.setdefault(cls, []).append(Point(version, v, label))
    return dict(sorted(out.items()))


def _bar(fraction: float, width: int = BAR_WIDTH) -> str:
    eighths = max(1, round(max(0.0, min(1.0, fraction)) * width * 8))
    full, part = divmod(eighths, 8)
    return ("█" * full + (EIGHTHS[part] if part else "")).ljust(width)


def text_chart(series: Mapping[str, Sequence[Point]], metric: str, direction: str = "min") -> str:
    better = "lower" if direction == "min" else "higher"
    lines = [f"Best {metric} per class over iterations (kept points; {better} is better; % against the baseline)", ""]
    if not series:
        return "\n".join([*lines, "(no measured points)"]) + "\n"
    for cls, points in series.items():
        lines.append(cls)
        top = max(p.value for p in points)
        first = points[0].value
        for p in points:
            change = "" if p is points[0] else f"  {fmt.pct((p.value / first - 1) * 100, 1)}"
            lines.append(f"  v{p.version:<4} {_bar(p.value / top)} {fmt.num(p.value):>10}{change}")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def write_png(
    series: Mapping[str, Sequence[Point]],
    path: Path,
    metric: str,
    *,
    last_version: int,
    title: str,
    direction: str = "min",
) -> bool:
    """Draw the chart with matplotlib; False (and nothing written) when it is not installed."""
    try:  # optional (no extra names it): pyright need not resolve it
        import matplotlib  # pyright: ignore[reportMissingImports]

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # pyright: ignore[reportMissingImports]
    except ImportError:
        return False
    fig, ax = plt.subplots(figsize=(8, 4.5))
    try:
        for cls, points in series.items():
            xs = [p.version for p in points] + [max(last_version, points[-1].version)]
            ys = [p.value for p in points] + [points[-1].value]
            (line,) = ax.step(xs, ys, where="post", label=cls)
            ax.plot([p.version for p in points], [p.value for p in points], "o", color=line.get_color())
        ax.set_yscale("log")
        ax.set_xlabel("iteration")
        ax.set_ylabel(f"{metric} ({'lower' if direction == 'min' else 'higher'} is better)")
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(loc="best", fontsize="small")
        fig.tight_layout()
        fig.savefig(str(path), dpi=120)
    finally:
        plt.close(fig)
    return True
