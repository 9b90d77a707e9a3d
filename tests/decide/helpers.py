"""Building paired samples for the decision's tests."""

from __future__ import annotations

from kopt_supervisor.engine.decide.estimate import Pair


def rounds(
    ratios: dict[str, list[float]],
    *,
    best: float = 100.0,
    start: int = 0,
    flagged: set[int] | frozenset[int] = frozenset(),
) -> list[Pair]:
    """Process-level rounds: per class, one config whose candidate/best ratio in round r is
    ratios[cls][r]; orders alternate AB, BA, AB, ..."""
    pairs = []
    for cls, rs in ratios.items():
        for i, r in enumerate(rs):
            k = start + i
            pairs.append(Pair(f"{cls}/cfg", cls, best, best * r, k, "AB" if k % 2 == 0 else "BA", flagged=k in flagged))
    return pairs


def wiggle(center: float, n: int, spread: float = 0.002) -> list[float]:
    """n ratios around center with a fixed, symmetric zig-zag (deterministic noise)."""
    pattern = [1.0, -0.6, 0.3, -1.0, 0.6, -0.3]
    return [center * (1.0 + spread * pattern[i % len(pattern)]) for i in range(n)]
