"""experiments/process_offset.py's arithmetic: a pair offset told apart from the looks' noise."""

from __future__ import annotations

import math
import random

from experiments.process_offset import offsets, summarize


def test_an_offset_per_pair_shows_as_between_pairs_and_pure_look_noise_does_not() -> None:
    rng = random.Random(7)
    with_offset = {p: [0.02 * (1 if p % 2 else -1) + rng.gauss(0, 0.005) for _ in range(6)] for p in range(10)}
    noise_only = {p: [rng.gauss(0, 0.005) for _ in range(6)] for p in range(10)}
    a, b = offsets(with_offset), offsets(noise_only)
    assert 1.8 < a["offset_pct"] < 2.3 and a["between_pct"] > a["within_pct"]  # pairs at +-2%
    assert b["offset_pct"] < 0.25 and 0.3 < b["within_pct"] < 0.7  # what six looks of 0.5% leave
    assert len(a["pair_means_pct"]) == 10


def test_summarize_averages_a_class_per_look_before_comparing_pairs() -> None:
    # configs "x/bf16/wide" and "y/bf16/wide": B reads 1% slower in pair 0, 1% faster in pair 1
    rows = []
    for pair, sign in ((0, 1), (1, -1)):
        for look in range(3):
            b = 1 + sign * 0.01
            rows.append(
                {
                    "pair": pair,
                    "look": look,
                    "us": {
                        "A": {"x/bf16/wide": 1.0, "y/bf16/wide": 2.0},
                        "B": {"x/bf16/wide": b, "y/bf16/wide": 2.0 * b},
                    },
                }
            )
    s = summarize(rows)
    wide = s["classes"]["wide"]
    assert wide["within_pct"] == 0.0 and math.isclose(
        wide["offset_pct"], 100 * math.log(1.01) * math.sqrt(2), rel_tol=0.02
    )
    assert set(s["configs"]) == {"x/bf16/wide", "y/bf16/wide"}


class _Slow:
    """A served process that answers after a pause, recording when each request came and went."""

    def __init__(self, name: str, log: list[tuple[str, str]]) -> None:
        self.name, self.log = name, log

    def ask(self, line: str) -> str:
        import time

        self.log.append(("sent", self.name))
        time.sleep(0.05)
        self.log.append(("answered", self.name))
        return f"prepared {line.split()[1]}"


def test_prepare_together_overlaps_both_sides_and_alone_never_does() -> None:
    from experiments.process_offset import prepare

    log: list[tuple[str, str]] = []
    prepare({"A": _Slow("A", log), "B": _Slow("B", log)}, 0, 1, together=True)  # type: ignore[dict-item]
    assert [kind for kind, _ in log[:2]] == ["sent", "sent"]  # both asked before either answered
    log.clear()
    prepare({"A": _Slow("A", log), "B": _Slow("B", log)}, 0, 1, together=False)  # type: ignore[dict-item]
    assert log == [("sent", "A"), ("answered", "A"), ("sent", "B"), ("answered", "B")]
